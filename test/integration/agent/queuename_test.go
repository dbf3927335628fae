package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/testutil"
)

// The chart's policy strata-queue-name-immutable: the queue of a running
// Job is fixed; a suspended Job's may change.
var _ = Describe("The queue label of a running Job", Label("agent", "policy"), func() {
	relabel := func(ctx SpecContext, job *batchv1.Job, queue string) error {
		var j batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		patch := client.MergeFrom(j.DeepCopy())
		if queue == "" {
			delete(j.Labels, strata.QueueNameLabel)
		} else {
			j.Labels[strata.QueueNameLabel] = queue
		}
		j.Labels["team"] = "a" // another label may always change
		return worker.Client.Patch(ctx, &j, patch)
	}

	It("cannot be changed or removed, while another label can", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		// A hub's copy runs from its creation, its pods gated; with no
		// LocalQueue it stays so.
		job := newJob(ns, "no-such-queue", 1, nil)
		Expect(batchjob.Adapt(job).StartGated(jobs.WorkloadName(job.Name))).To(BeTrue())
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(ptr.Deref(job.Spec.Suspend, true)).To(BeFalse())

		for _, queue := range []string{"other", ""} {
			err := relabel(ctx, job, queue)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "relabelling to %q: %v", queue, err)
			Expect(err.Error()).To(ContainSubstring("the label strata.dev/queue-name of a running Job cannot be changed (it is no-such-queue): suspend it first"))
		}
		var j batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		Expect(j.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "no-such-queue"))

		By("once suspended, it can")
		patch := client.MergeFrom(j.DeepCopy())
		j.Spec.Suspend = ptr.To(true)
		Expect(worker.Client.Patch(ctx, &j, patch)).To(Succeed())
		Expect(relabel(ctx, job, "other")).To(Succeed())
	})

	It("of a LeaderWorkerSet, which cannot be suspended, cannot be changed or removed", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		l := hostLWS(ns, "no-such-queue", "relabel", 1)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		for _, queue := range []string{"other", ""} {
			var cur lwsapi.LeaderWorkerSet
			Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(l), &cur)).To(Succeed())
			patch := client.MergeFrom(cur.DeepCopy())
			if queue == "" {
				delete(cur.Labels, strata.QueueNameLabel)
			} else {
				cur.Labels[strata.QueueNameLabel] = queue
			}
			err := worker.Client.Patch(ctx, &cur, patch)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "relabelling to %q: %v", queue, err)
			Expect(err.Error()).To(ContainSubstring("the label strata.dev/queue-name of a LeaderWorkerSet cannot be changed (it is no-such-queue): delete the set and create it again"))
		}
	})

	It("of a suspended Job can be removed, and its Workload goes with it", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		job := newJob(ns, "no-such-queue", 1, nil) // created suspended by the chart's policy
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(ptr.Deref(job.Spec.Suspend, false)).To(BeTrue())
		key := client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, key, &strata.Workload{})).To(Succeed())
		}, timeout).Should(Succeed())
		Expect(relabel(ctx, job, "")).To(Succeed())
		// No longer Strata's: its Workload would wait in the queue, or
		// hold an admission's quota, for nothing.
		Eventually(func(g Gomega) {
			err := worker.Client.Get(ctx, key, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Workload: %v", err)
		}, timeout).Should(Succeed())
	})

	It("of a Job suspended after it started can be removed before its template is restored: the Workload goes, then what the admission added", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("unqueue-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-unqueue").NodeLabel("pool", "unqueue").TopologyName("unqueue-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("unqueue-q").Flavor("tas-unqueue").Obj())).To(Succeed())
		createPoolNode(ctx, "unqueue", "unqueue-1", "b1", "r1", "4")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "unqueue-q")
		job := newJob(ns, "unqueue-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		key := client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}
		By("started, its start time set by the Job controller")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Labels).To(HaveKey(strata.WorkloadLabel))
			now := metav1.Now()
			j.Status.StartTime = &now
			g.Expect(worker.Client.Status().Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		By("suspended by its user, then taken out of its queue while the start time keeps the template")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			j.Spec.Suspend = ptr.To(true)
			g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) { g.Expect(relabel(ctx, job, "")).To(Succeed()) }, timeout).Should(Succeed())
		// Before: nothing was done for a started Job without the label;
		// its Workload was admitted again and held the quota.
		Eventually(func(g Gomega) {
			err := worker.Client.Get(ctx, key, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Workload: %v", err)
		}, timeout).Should(Succeed())
		By("the Job controller clears the start time: the template is restored")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			j.Status.StartTime = nil
			g.Expect(worker.Client.Status().Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(j.Spec.Template.Labels).NotTo(HaveKey(strata.WorkloadLabel))
			g.Expect(j.Spec.Template.Spec.NodeSelector).NotTo(HaveKey("pool"))
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			err := worker.Client.Get(ctx, key, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Workload again: %v", err)
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
