package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's LocalQueue defaulting, by the chart's admission policies on the
// real API server: a Job without a queue label, in a namespace with a
// LocalQueue named "default", is queued there; elsewhere it is left
// alone, and so is a Job a controller owns.
var _ = Describe("LocalQueue defaulting", Ordered, Label("agent", "defaultqueue"), func() {
	var withDefault, without string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("defaultq-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-defaultq").NodeLabel("pool", "defaultq").TopologyName("defaultq-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("defaultq").Flavor("tas-defaultq").Obj())).To(Succeed())
		createPoolNode(ctx, "defaultq", "defaultq-1", "b1", "r1", "4")
		withDefault = createNamespace(ctx, nil)
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("default", withDefault, "defaultq"))).To(Succeed())
		without = createNamespace(ctx, nil)
	})

	get := func(g Gomega, ctx SpecContext, job *batchv1.Job) *batchv1.Job {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		return &j
	}

	It("queues an unlabelled Job in the namespace's default LocalQueue, suspended until admitted", func(ctx SpecContext) {
		job := newJob(withDefault, "", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(job.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(job.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"), "labelled at creation")
		Expect(ptr.Deref(job.Spec.Suspend, false)).To(BeTrue(), "suspended at creation")
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			g.Expect(ptr.Deref(get(g, ctx, job).Spec.Suspend, true)).To(BeFalse(), "started once admitted")
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("leaves alone a Job labelled for another queue, one in a namespace without a default LocalQueue, and one a controller owns", func(ctx SpecContext) {
		createLocalQueue(ctx, withDefault, "defaultq")
		labelled := newJob(withDefault, "defaultq", 1, nil)
		Expect(worker.Client.Create(ctx, labelled)).To(Succeed())
		Expect(labelled.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "defaultq"))

		elsewhere := newJob(without, "", 1, nil)
		Expect(worker.Client.Create(ctx, elsewhere)).To(Succeed())
		Expect(elsewhere.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(ptr.Deref(elsewhere.Spec.Suspend, false)).To(BeFalse())

		// A Job owned by another object's controller (as a JobSet's or a
		// CronJob's): its owner is what is queued, or not Strata's.
		owner := &batchv1.Job{}
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(labelled), owner)).To(Succeed())
		owned := newJob(withDefault, "", 1, nil)
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		Expect(worker.Client.Create(ctx, owned)).To(Succeed())
		Expect(owned.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(ptr.Deref(owned.Spec.Suspend, false)).To(BeFalse())

		kueues := newJob(withDefault, "", 1, nil)
		kueues.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a"}
		Expect(worker.Client.Create(ctx, kueues)).To(Succeed())
		Expect(kueues.Labels).NotTo(HaveKey(strata.QueueNameLabel), "a Job labelled for Kueue is Kueue's")

		Consistently(func(g Gomega) {
			for _, j := range []*batchv1.Job{elsewhere, owned, kueues} {
				var wl strata.WorkloadList
				g.Expect(worker.Client.List(ctx, &wl, client.InNamespace(j.Namespace))).To(Succeed())
				for _, w := range wl.Items {
					g.Expect(w.Name).NotTo(HaveSuffix(j.Name), "no Workload for %s", j.Name)
				}
			}
		}, 2*time.Second).Should(Succeed())
		for _, j := range []*batchv1.Job{labelled, elsewhere, owned, kueues} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
