package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	strata "strata.dev/strata/api/v1beta1"
)

// A worker's waitForPodsReady evicts a copy whose pods did not start in
// time there: the hub takes it back and places it on another worker, and
// the Job runs on one worker at a time.
var _ = Describe("Pods not ready in time on a worker", func() {
	It("sends the copy to another worker once the first evicts it", func(ctx SpecContext) {
		e := newEnv(ctx, "ready", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		job := e.job("slow-start", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var on string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			on = wl.Status.Placement.Cluster
			g.Expect(copies(g, ctx, job)).To(Equal([]string{on}))
		}).Should(Succeed())
		other := map[string]string{"w1": "w2", "w2": "w1"}[on]
		Expect(other).NotTo(BeEmpty())

		By("the timeout passing on that worker, whose pods never become ready here")
		podsReadyClocks[on].SetTime(time.Now().Add(31 * time.Minute))
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(other))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{other}), "one copy, on the other worker")
			refused := false
			for _, a := range wl.Status.Placement.Attempts {
				if a.Cluster == on && a.Reason == strata.EvictedByPodsReadyTimeout {
					refused = true
				}
			}
			g.Expect(refused).To(BeTrue(), "the first worker's eviction is recorded: %+v", wl.Status.Placement.Attempts)
		}).Should(Succeed())
		c := meta.FindStatusCondition(hubWorkload(Default, ctx, job).Status.Conditions, strata.WorkloadAdmitted)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(BeEquivalentTo("True"))
	})
})
