package agent

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("A Job re-created under the same name", Ordered, Label("agent", "intake"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("reborn-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-reborn").NodeLabel("pool", "reborn").TopologyName("reborn-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("reborn-q").Flavor("tas-reborn").Obj())).To(Succeed())
		createPoolNode(ctx, "reborn", "rb1", "b1", "r1", "4")
		createPoolNode(ctx, "reborn", "rb2", "b1", "r2", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "reborn-q")
	})

	// staleWorkload creates what an earlier Job of the name left behind
	// before garbage collection caught up: its Workload, admitted for one
	// pod on rb1, controlled by owners (none once orphaned).
	staleWorkload := func(ctx SpecContext, name string, owners []metav1.OwnerReference) *strata.Workload {
		wl := testutil.MakeWorkload(jobs.WorkloadName(name), ns).Queue("reborn-q").
			PodSets(testutil.MakePodSet("main", 1, "cpu", "1").Required(rack).Obj()).Obj()
		wl.OwnerReferences = owners
		Expect(worker.Client.Create(ctx, wl)).To(Succeed())
		// The scheduler may write its status meanwhile (or admit it).
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(Succeed())
			wl.Status.Admission = &strata.Admission{ClusterQueue: "reborn-q", PodSetAssignments: []strata.PodSetAssignment{{
				Name: "main", Flavor: "tas-reborn", Count: 1,
				ResourceUsage:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				TopologyAssignment: tas.Encode(&tas.Assignment{Levels: []string{host}, Domains: []tas.DomainAssignment{{Values: []string{"rb1"}, Count: 1}}}),
			}}}
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted"})
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		return wl
	}

	// expectOwnWorkload waits for the Job to run on a Workload of its own,
	// admitted for its own shape, and returns it.
	expectOwnWorkload := func(ctx SpecContext, job *batchv1.Job, stale types.UID, pods int32) *strata.Workload {
		GinkgoHelper()
		var wl strata.Workload
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.UID).NotTo(Equal(stale), "the earlier Job's Workload is still there")
			g.Expect(metav1.IsControlledBy(&wl, job)).To(BeTrue(), "owners: %v", wl.OwnerReferences)
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(pods))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.PodCount()).To(Equal(pods))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, wl.Name))
		}, timeout).Should(Succeed())
		return &wl
	}

	It("gets a Workload and an admission of its own, not its deleted predecessor's", func(ctx SpecContext) {
		// Seen by an agent that is behind: stopped while the Job is
		// deleted and created again (a running one would delete the
		// deleted Job's Workload first, as it should).
		stopAgent()
		job := newJob(ns, "reborn-q", 3, map[string]string{"strata.dev/podset-required-topology": rack})
		stale := staleWorkload(ctx, job.Name, []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: "00000000-0000-0000-0000-00000000dead", Controller: ptr.To(true),
		}})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		stopAgent = startAgent()
		expectOwnWorkload(ctx, job, stale.UID, 3)
	})

	It("does not adopt an orphaned Workload of the same name, nor ungate its orphaned pods", func(ctx SpecContext) {
		job := newJob(ns, "reborn-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		stale := staleWorkload(ctx, job.Name, nil)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectOwnWorkload(ctx, job, stale.UID, 2)

		By("an orphaned, gated pod of the earlier Job carries the same workload label")
		var started batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &started)).To(Succeed())
		orphan := testutil.JobPod(&started, 0)
		orphan.Name = job.Name + "-old-0"
		orphan.OwnerReferences = nil
		Expect(worker.Client.Create(ctx, orphan)).To(Succeed())
		createPods(ctx, job, 0, 1)
		gated := func(g Gomega, name string) bool {
			var p corev1.Pod
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
			return slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == strata.TopologySchedulingGate })
		}
		Eventually(func(g Gomega) {
			g.Expect(gated(g, job.Name+"-0")).To(BeFalse())
			g.Expect(gated(g, job.Name+"-1")).To(BeFalse())
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(gated(g, orphan.Name)).To(BeTrue(), "the agent released a pod of another Job")
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
