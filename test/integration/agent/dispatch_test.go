package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// hubCopy is a rack-required Job of n pods in queue as a hub dispatches it:
// labelled with the hub's origin, the hub Workload's UID and the dispatch
// generation, pinned to flavor.
func hubCopy(ns, queue string, n int32, hubUID, generation, flavor string) *batchv1.Job {
	job := newJob(ns, queue, n, map[string]string{"strata.dev/podset-required-topology": rack})
	job.Labels[strata.OriginLabel] = "strata-hub"
	job.Labels[strata.HubWorkloadUIDLabel] = hubUID
	job.Labels[strata.DispatchGenerationLabel] = generation
	job.Annotations = map[string]string{strata.FlavorAnnotation: flavor}
	return job
}

// summaryDispatches returns the dispatches a flavor's CapacitySummary lists.
func summaryDispatches(g Gomega, ctx SpecContext, flavor string) []string {
	var cs strata.CapacitySummary
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: flavor}, &cs)).To(Succeed())
	return cs.Status.Dispatches
}

var _ = Describe("Jobs dispatched by a hub", Ordered, Label("agent", "dispatch"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("dispatch-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("dispatch-first").NodeLabel("pool", "dispatch-first").TopologyName("dispatch-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("dispatch-pinned").NodeLabel("pool", "dispatch-pinned").TopologyName("dispatch-topology").Obj())).To(Succeed())
		// Without the pin, every Job here would go to the first flavor.
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("dispatch-q").Flavor("dispatch-first").Flavor("dispatch-pinned").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("dispatch-narrow").Flavor("dispatch-first").Obj())).To(Succeed())
		createPoolNode(ctx, "dispatch-first", "dispatch-f1", "b1", "r1", "8")
		createPoolNode(ctx, "dispatch-pinned", "dispatch-p1", "b1", "r1", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "dispatch-q")
		createLocalQueue(ctx, ns, "dispatch-narrow")
	})

	It("admits a copy on its pinned flavor and lists its dispatch in that flavor's summary until the Job is gone", func(ctx SpecContext) {
		job := hubCopy(ns, "dispatch-q", 2, "7c9e6679-7425-40de-944b-e07fc1f90ae7", "3", "dispatch-pinned")
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		const key = "7c9e6679-7425-40de-944b-e07fc1f90ae7/3"
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Labels).To(HaveKeyWithValue(strata.OriginLabel, "strata-hub"))
			g.Expect(wl.Labels).To(HaveKeyWithValue(strata.HubWorkloadUIDLabel, "7c9e6679-7425-40de-944b-e07fc1f90ae7"))
			g.Expect(wl.Labels).To(HaveKeyWithValue(strata.DispatchGenerationLabel, "3"))
			g.Expect(wl.Annotations).To(HaveKeyWithValue(strata.FlavorAnnotation, "dispatch-pinned"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Flavor).To(Equal("dispatch-pinned"))
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(summaryDispatches(g, ctx, "dispatch-pinned")).To(Equal([]string{key}))
			g.Expect(summaryDispatches(g, ctx, "dispatch-first")).To(BeEmpty())
		}, timeout).Should(Succeed())

		By("deleting the Job")
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			err := worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the deleted Job's Workload is still there: %v", err)
			g.Expect(summaryDispatches(g, ctx, "dispatch-pinned")).NotTo(ContainElement(key))
		}, timeout).Should(Succeed())
	})

	It("keeps a copy pinned to a flavor its ClusterQueue lacks Inadmissible, naming the flavor, until the queue has it", func(ctx SpecContext) {
		job := hubCopy(ns, "dispatch-narrow", 1, "0d5e0f53-52a4-4f3b-9cf4-4b2c5f0a1e21", "1", "dispatch-pinned")
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectWaiting(ctx, job, scheduler.ReasonInadmissible,
			`the hub pinned flavor "dispatch-pinned" (annotation strata.dev/flavor), which ClusterQueue "dispatch-narrow" does not have`)
		expectNotAdmitted(ctx, job, "the first flavor has room, but the copy is pinned to another")

		By("adding the pinned flavor to the ClusterQueue")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "dispatch-narrow"}, &cq)).To(Succeed())
			cq.Spec.Flavors = append(cq.Spec.Flavors, testutil.MakeClusterQueue("").Flavor("dispatch-pinned").Obj().Spec.Flavors...)
			g.Expect(worker.Client.Update(ctx, &cq)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Flavor).To(Equal("dispatch-pinned"))
			g.Expect(summaryDispatches(g, ctx, "dispatch-pinned")).To(ContainElement("0d5e0f53-52a4-4f3b-9cf4-4b2c5f0a1e21/1"))
		}, timeout).Should(Succeed())
	})
})
