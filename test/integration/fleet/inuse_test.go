package fleet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/controller/inuse"
	"strata.dev/strata/test/integration/framework"
)

// Kueue's resource-in-use finalizer across the fleet: a ClusterQueue being
// deleted, on a worker or on the hub, stays while what it admitted runs
// and admits (dispatches) nothing more meanwhile.
var _ = Describe("Deleting a ClusterQueue in use across the fleet", func() {
	terminating := func(g Gomega, ctx context.Context, c *framework.Cluster, name, message string) {
		var cq strata.ClusterQueue
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: name}, &cq)).To(Succeed())
		g.Expect(cq.DeletionTimestamp).NotTo(BeNil())
		g.Expect(cq.Finalizers).To(ContainElement(inuse.Finalizer))
		active := meta.FindStatusCondition(cq.Status.Conditions, "Active")
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(active.Reason).To(Equal(strata.QueueTerminating))
		g.Expect(active.Message).To(ContainSubstring(message))
	}
	gone := func(ctx context.Context, c *framework.Cluster, name string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &strata.ClusterQueue{})
			g.Expect(err).To(HaveOccurred())
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		}).Should(Succeed())
	}

	It("keeps a worker's queue while its copy runs, and the hub sends new copies elsewhere", func(ctx SpecContext) {
		e := newEnv(ctx, "inuse-w", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		first := e.job("first", 1, "1", nil)
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		var on string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, first)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			on = wl.Status.Placement.Cluster
		}).Should(Succeed())
		other := map[string]string{"w1": "w2", "w2": "w1"}[on]
		Expect(other).NotTo(BeEmpty())

		By("deleting the worker's ClusterQueue: it stays, and its copy runs on")
		Expect(worker(on).Client.Delete(ctx, &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq-inuse-w"}})).To(Succeed())
		Eventually(func(g Gomega) {
			terminating(g, ctx, worker(on), "cq-inuse-w", "goes once its 1 admitted workload(s) finish")
			g.Expect(hubWorkload(g, ctx, first).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		By("a new Job goes to the other worker")
		second := e.job("second", 1, "1", nil)
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, second)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(other))
			g.Expect(copies(g, ctx, second)).To(Equal([]string{other}))
		}).Should(Succeed())

		By("the copy completes: the worker's queue goes")
		completeCopy(ctx, worker(on), first)
		gone(ctx, worker(on), "cq-inuse-w")
	})

	It("keeps a hub queue while a Job it dispatched runs, dispatching nothing more", func(ctx SpecContext) {
		e := newEnv(ctx, "inuse-h", map[string][][]string{"w1": {{"4"}}})
		running := e.job("running", 1, "1", nil)
		Expect(hub.Client.Create(ctx, running)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, running).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		By("deleting the hub's ClusterQueue: it stays while the Job runs")
		Expect(hub.Client.Delete(ctx, &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq-inuse-h"}})).To(Succeed())
		Eventually(func(g Gomega) {
			terminating(g, ctx, hub, "cq-inuse-h", "goes once its 1 dispatched workload(s) finish")
		}).Should(Succeed())

		By("a new Job waits, saying why")
		waiting := e.job("waiting", 1, "1", nil)
		Expect(hub.Client.Create(ctx, waiting)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, waiting)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.QueueStopped))
			g.Expect(c.Message).To(ContainSubstring("ClusterQueue cq-inuse-h is being deleted"))
			g.Expect(wl.Status.Placement == nil || len(wl.Status.Placement.Attempts) == 0).To(BeTrue(), "no copy sent")
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, waiting)).To(BeEmpty())
		}, "2s").Should(Succeed())

		By("the Job completes: the hub's queue goes, and the waiting Job says its queue is missing")
		completeCopy(ctx, worker("w1"), running)
		gone(ctx, hub, "cq-inuse-h")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, waiting).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring("cq-inuse-h"))
		}).Should(Succeed())
	})
})
