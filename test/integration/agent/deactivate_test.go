package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's hold: a Workload's spec.active false keeps it from admission and
// takes an admission back; true lets it in again.
var _ = Describe("A deactivated Workload", Ordered, Label("agent", "intake"), func() {
	It("is evicted and its Job suspended, waits while inactive, and is admitted again once active", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("inactive-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-inactive").NodeLabel("pool", "inactive").TopologyName("inactive-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("inactive-q").Flavor("tas-inactive").Obj())).To(Succeed())
		createPoolNode(ctx, "inactive", "inactive-1", "b1", "r1", "4")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "inactive-q")
		job := newJob(ns, "inactive-q", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectAdmitted(ctx, job)

		setActive := func(active bool) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				wl := workloadOf(g, ctx, job)
				wl.Spec.Active = ptr.To(active)
				g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		By("deactivating the admitted Workload")
		setActive(false)
		expectWaiting(ctx, job, jobs.ReasonDeactivated, "spec.active")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Conditions).To(ContainElement(And(
				HaveField("Type", strata.WorkloadEvicted), HaveField("Status", metav1.ConditionTrue), HaveField("Reason", jobs.ReasonDeactivated))))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue(), "the Job is stopped")
		}, timeout).Should(Succeed())
		expectNotAdmitted(ctx, job, "an inactive Workload is not admitted, though it fits")
		expectRequeued(ctx, job, metav1.ConditionFalse, jobs.ReasonDeactivated)

		By("reactivating it")
		setActive(true)
		expectAdmitted(ctx, job)
		expectRequeued(ctx, job, metav1.ConditionTrue, strata.RequeuedReactivated)
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "the Job runs again")
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
