package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's fair sharing, turned on in the agent's configuration: a queue
// that borrows preempts in its cohort while its share stays the lower, and
// stops where it would not.
var _ = Describe("Fair sharing", Ordered, Label("agent", "fairsharing"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		stopAgent()
		stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
			cfg.FairSharing = &configv1beta1.FairSharing{PreemptionStrategies: []configv1beta1.PreemptionStrategy{
				configv1beta1.LessThanOrEqualToFinalShare, configv1beta1.LessThanInitialShare}}
		})
		DeferCleanup(func() {
			stopAgent()
			stopAgent = startAgent()
		})
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("fair-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-fair").NodeLabel("pool", "fair").TopologyName("fair-topology").Obj())).To(Succeed())
		// Three racks of one 4-CPU node each.
		for _, r := range []string{"r1", "r2", "r3"} {
			createPoolNode(ctx, "fair", "fair-"+r, "b1", r, "4")
		}
		for name, v := range map[string]int32{"fair-low": 10, "fair-high": 1000} {
			Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, v))).To(Succeed())
		}
		ns = createNamespace(ctx, nil)
	})

	It("a borrowing queue preempts, within its cohort, the queue whose share stays higher, whatever the priorities; then no more", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("fair-a").Cohort("fair").ResourceGroup("cpu").GroupFlavor("tas-fair", "2").
			Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("fair-b").Cohort("fair").ResourceGroup("cpu").GroupFlavor("tas-fair", "6").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("fair-c").Cohort("fair").ResourceGroup("cpu").GroupFlavor("tas-fair", "4").Obj())).To(Succeed())
		for _, q := range []string{"fair-a", "fair-b", "fair-c"} {
			createLocalQueue(ctx, ns, q)
		}
		job := func(queue, class string) *batchv1.Job {
			j := newJob(ns, queue, 4, map[string]string{"strata.dev/podset-required-topology": rack})
			j.Labels[strata.PriorityClassLabel] = class
			return j
		}

		By("fair-b fills the three racks: it borrows 6 of the cohort's 12 CPUs")
		var bs []*batchv1.Job
		for range 3 {
			b := job("fair-b", "fair-high")
			Expect(worker.Client.Create(ctx, b)).To(Succeed())
			expectAdmitted(ctx, b)
			bs = append(bs, b)
		}

		By("fair-a's Job, of lower priority and borrowing 2 once admitted, takes one of fair-b's: 2 of 12 is not above what fair-b then borrows")
		a1 := job("fair-a", "fair-low")
		Expect(worker.Client.Create(ctx, a1)).To(Succeed())
		expectAdmitted(ctx, a1)
		var preempted []*batchv1.Job
		Eventually(func(g Gomega) {
			preempted = nil
			for _, b := range bs {
				if workloadOf(g, ctx, b).Status.Admission == nil {
					preempted = append(preempted, b)
				}
			}
			g.Expect(preempted).To(HaveLen(1))
		}, timeout).Should(Succeed())
		expectPreempted(ctx, preempted[0], strata.PreemptedInCohortFairSharing, "fair sharing in cohort fair")
		By("the queues' status shows their shares: each borrows 2 of 12 CPUs, 167 per mille")
		Eventually(func(g Gomega) {
			for q, want := range map[string]int64{"fair-a": 167, "fair-b": 167, "fair-c": 0} {
				var cq strata.ClusterQueue
				g.Expect(worker.Client.Get(ctx, types.NamespacedName{Name: q}, &cq)).To(Succeed())
				g.Expect(cq.Status.FairSharing).NotTo(BeNil(), q)
				g.Expect(cq.Status.FairSharing.WeightedShare).To(Equal(want), q)
				// And Kueue's metric of it.
				g.Expect(promtest.ToFloat64(metrics.AgentQueues.WeightedShare.WithLabelValues(q, "fair"))).To(Equal(float64(want)), q)
			}
			// A root cohort borrows from no one.
			g.Expect(hasSeries(metrics.CohortWeightedShare, "cohort", "fair")).To(BeTrue())
			g.Expect(promtest.ToFloat64(metrics.CohortWeightedShare.WithLabelValues("fair"))).To(BeZero())
		}, timeout).Should(Succeed())

		By("a second Job of fair-a would borrow 6: its share would be above fair-b's, which keeps its workloads")
		a2 := job("fair-a", "fair-high")
		Expect(worker.Client.Create(ctx, a2)).To(Succeed())
		expectWaiting(ctx, a2, scheduler.ReasonPending, "fair sharing: once admitted, ClusterQueue fair-a's share would not be below the share of fair-b")

		for _, j := range append(bs, a1, a2) {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
