package fleet

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
)

var _ = Describe("Reclaimable pods at the hub", func() {
	It("gives a finished part of a dispatched Job its fleet quota back at once", func(ctx SpecContext) {
		e := newEnv(ctx, "finished", map[string][][]string{"w1": {{"8"}}})
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-finished"}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		first := e.job("first", 4, "1", nil) // the whole quota
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, first).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		second := e.job("second", 2, "1", nil)
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, second).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring("quota"))
		}).Should(Succeed())

		By("two of the first Job's four pods succeed on the worker")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, worker("w1"), first)
			g.Expect(cp).NotTo(BeNil())
			cp.Status.Succeeded = 2
			g.Expect(worker("w1").Client.Status().Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())

		By("the hub records them, charges 2 CPUs for the first Job, and dispatches the second")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, first)
			g.Expect(wl.Status.ReclaimablePods).To(Equal([]strata.ReclaimablePod{{Name: "main", Count: 2}}))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "the first Job runs on")
			g.Expect(hubWorkload(g, ctx, second).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
	})
})
