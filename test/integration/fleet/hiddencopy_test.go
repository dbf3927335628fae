package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

var _ = Describe("A copy hidden by a tenant during a partition", Label("fencing"), func() {
	It("is revoked by a restarted hub before it renews the worker's Lease, its workload having been placed elsewhere", func(ctx SpecContext) {
		withFencing(14 * time.Second)
		e := newEnv(ctx, "hiddenmoved", map[string][][]string{"w1": {{"4"}}})
		w1 := worker("w1")
		j := e.job("hidden", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		var uid types.UID
		Eventually(func(g Gomega) { uid = hubWorkload(g, ctx, j).UID }).Should(Succeed())
		e.createNode(ctx, worker("w2"), "hiddenmoved-w2-n0", "r0", "4")

		By("a partition between the hub and w1: w1's agent fences the copy")
		heal := cutW1()
		DeferCleanup(heal)
		fencedOnW1(ctx, j)

		By("a tenant of w1 takes the hub's origin off the copy's Job and forges its hub Workload UID")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, j)
			g.Expect(cp).NotTo(BeNil())
			delete(cp.Labels, strata.OriginLabel)
			cp.Labels[strata.HubWorkloadUIDLabel] = "forged"
			g.Expect(w1.Client.Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())

		By("after replaceAfter the workload runs on w2")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())

		By("the hub restarts, forgetting what it revoked in memory only, and the partition heals")
		stopHub()
		stopHub = startHub()
		healed := time.Now()
		heal()
		Eventually(func(g Gomega) {
			lease := fenceLease(g, ctx, "w1")
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", healed), "not renewed since the partition healed")
			g.Expect(lease.Annotations[strata.RevokedDispatchesAnnotation]).To(ContainSubstring(string(uid)+"/1"),
				"w1's Lease renewed without revoking the hidden copy")
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			_, cwl := copyOn(g, ctx, w1, j)
			if cwl != nil {
				g.Expect(cwl.Status.Admission).To(BeNil(), "the hidden copy was admitted again on w1 while the workload runs on w2")
			}
		}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
