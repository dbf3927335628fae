package agent

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("A pod released around the agent", Ordered, Label("agent", "ungater"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("bypass-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-bypass").NodeLabel("pool", "bypass").TopologyName("bypass-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("bypass-q").Flavor("tas-bypass").Obj())).To(Succeed())
		createPoolNode(ctx, "bypass", "bp1", "b1", "r1", "4")
		createPoolNode(ctx, "bypass", "bp2", "b1", "r2", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "bypass-q")
	})

	gated := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == strata.TopologySchedulingGate })
	}
	expectDeleted := func(ctx SpecContext, p *corev1.Pod) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var got corev1.Pod
			err := worker.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s: %v, gates %v, node selector %v", p.Name, err, got.Spec.SchedulingGates, got.Spec.NodeSelector)
		}, timeout).Should(Succeed())
	}

	It("is deleted, whether its gate was removed or it was made without one", func(ctx SpecContext) {
		job := newJob(ns, "bypass-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		createPods(ctx, job, 0, 1)
		Eventually(func(g Gomega) {
			for _, i := range []int{0, 1} {
				var p corev1.Pod
				g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testutil.JobPod(job, i).Name}, &p)).To(Succeed())
				g.Expect(gated(&p)).To(BeFalse())
				g.Expect(p.Spec.NodeSelector).To(HaveKey(host))
			}
		}, timeout).Should(Succeed())

		By("a pod past the admission's count waits behind its gate, until a tenant removes it")
		var started batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &started)).To(Succeed())
		extra := testutil.JobPod(&started, 2)
		Expect(worker.Client.Create(ctx, extra)).To(Succeed())
		Expect(gated(extra)).To(BeTrue())
		patch := client.MergeFrom(extra.DeepCopy())
		extra.Spec.SchedulingGates = slices.DeleteFunc(extra.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == strata.TopologySchedulingGate })
		Expect(worker.Client.Patch(ctx, extra, patch)).To(Succeed())
		expectDeleted(ctx, extra)

		By("a pod of the Job made without the gate")
		bare := testutil.JobPod(&started, 3)
		bare.Spec.SchedulingGates = nil
		Expect(worker.Client.Create(ctx, bare)).To(Succeed())
		expectDeleted(ctx, bare)

		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(SatisfyAll(
				HaveField("Regarding.Kind", "Workload"),
				HaveField("Regarding.Name", jobs.WorkloadName(job.Name)),
				HaveField("Reason", "PodReleasedAroundAgent"),
				HaveField("Note", ContainSubstring("Pod "+bare.Name+" lost the strata.dev/topology gate")))))
		}, timeout).Should(Succeed())

		By("the pods the agent released run on")
		for _, i := range []int{0, 1} {
			var p corev1.Pod
			Expect(worker.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: testutil.JobPod(job, i).Name}, &p)).To(Succeed())
			Expect(p.DeletionTimestamp).To(BeNil())
		}
	})
})
