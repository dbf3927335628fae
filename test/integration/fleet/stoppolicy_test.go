package fleet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/test/integration/framework"
)

// Kueue's stopPolicy, on a worker's ClusterQueue (the hub sends its
// copies elsewhere) and on the hub's (the hub dispatches nothing, and
// HoldAndDrain takes its copies back).
var _ = Describe("Stopped queues across the fleet", func() {
	stop := func(ctx context.Context, c *framework.Cluster, p strata.StopPolicy) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "cq-stop"}, &cq)).To(Succeed())
			cq.Spec.StopPolicy = ptr.To(p)
			g.Expect(c.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
	}
	admittedOn := func(g Gomega, wl *strata.Workload) string {
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		g.Expect(wl.Status.Placement).NotTo(BeNil())
		return wl.Status.Placement.Cluster
	}

	It("moves a copy off a worker whose ClusterQueue drains, holds and drains at the hub, and dispatches again on None", func(ctx SpecContext) {
		e := newEnv(ctx, "stop", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		first := e.job("first", 1, "1", nil)
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		var on string
		Eventually(func(g Gomega) { on = admittedOn(g, hubWorkload(g, ctx, first)) }).Should(Succeed())
		other := map[string]string{"w1": "w2", "w2": "w1"}[on]
		Expect(other).NotTo(BeEmpty())

		By("draining the worker's ClusterQueue: the copy runs on the other worker")
		stop(ctx, worker(on), strata.StopHoldAndDrain)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, first)
			g.Expect(admittedOn(g, wl)).To(Equal(other))
			g.Expect(copies(g, ctx, first)).To(Equal([]string{other}))
		}).Should(Succeed())
		By("sending no copy to the stopped worker queue, the only one with room")
		second := e.job("second", 1, "4", nil)
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, second)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring(on + "/f-stop: ClusterQueue cq-stop is stopped (stopPolicy HoldAndDrain)"))
			g.Expect(wl.Status.Placement == nil || len(wl.Status.Placement.Attempts) == 0).To(BeTrue(), "no copy sent")
		}).Should(Succeed())

		By("holding the hub's ClusterQueue: a new Job waits, saying why")
		stop(ctx, hub, strata.StopHold)
		third := e.job("third", 1, "1", nil)
		Expect(hub.Client.Create(ctx, third)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, third)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.QueueStopped))
			g.Expect(c.Message).To(ContainSubstring("ClusterQueue cq-stop is stopped (stopPolicy Hold)"))
			g.Expect(wl.Status.Placement == nil || len(wl.Status.Placement.Attempts) == 0).To(BeTrue(), "no copy sent")
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-stop"}, &cq)).To(Succeed())
			active := meta.FindStatusCondition(cq.Status.Conditions, "Active")
			g.Expect(active).NotTo(BeNil())
			g.Expect(active.Reason).To(Equal(strata.QueueStopped))
		}).Should(Succeed())

		By("draining the hub's ClusterQueue: the copy is taken back")
		stop(ctx, hub, strata.StopHoldAndDrain)
		Eventually(func(g Gomega) {
			for _, job := range []string{"first"} {
				j := e.job(job, 1, "1", nil)
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Admission).To(BeNil(), job)
				g.Expect(wl.Status.Conditions).To(ContainElement(And(
					HaveField("Type", strata.WorkloadEvicted), HaveField("Status", metav1.ConditionTrue), HaveField("Reason", strata.EvictedByClusterQueueStopped))), job)
				g.Expect(copies(g, ctx, j)).To(BeEmpty(), job)
			}
		}).Should(Succeed())

		By("restarting both queues: every Job runs once")
		stop(ctx, hub, strata.StopNone)
		stop(ctx, worker(on), strata.StopNone)
		Eventually(func(g Gomega) {
			for _, job := range []string{"first", "second", "third"} {
				j := e.job(job, 1, "1", nil)
				admittedOn(g, hubWorkload(g, ctx, j))
				g.Expect(copies(g, ctx, j)).To(HaveLen(1), job)
			}
			// Whichever worker the first runs on (both queues restart at
			// once: the hub may place it before or after it sees the
			// worker's queue admit again), the second fills the other.
			g.Expect(admittedOn(g, hubWorkload(g, ctx, second))).NotTo(Equal(admittedOn(g, hubWorkload(g, ctx, first))), "the only worker with room")
		}).Should(Succeed())
	})
})
