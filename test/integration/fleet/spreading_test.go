package fleet

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/workload"
)

var _ = Describe("Topology spreading across the fleet", func() {
	It("spreads replicas over the racks of every worker, counting what the hub dispatched everywhere", func(ctx SpecContext) {
		// Two workers with one 4-CPU rack each, both named r0: the hub
		// counts (worker, rack), not the rack's name.
		e := newEnv(ctx, "spread", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		replica := func(name string) *batchv1.Job {
			j := e.job(name, 2, "1", map[string]string{
				"kueue.x-k8s.io/podset-required-topology": rack,
				"kueue.x-k8s.io/podset-topology-spreading": `{"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["svc"]}],
					"rules": [{"topologyKey": "` + rack + `", "maxShareAllowingPlacement": "0.5"}]}`,
			})
			j.Labels["app"] = "svc"
			return j
		}
		placed := map[string]int{}
		dispatchedTo := func(job *batchv1.Job) string {
			GinkgoHelper()
			var cluster string
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Status.Placement).NotTo(BeNil())
				g.Expect(wl.Status.Placement.Cluster).NotTo(BeEmpty())
				g.Expect(wl.Status.Placement.TopologyHint).NotTo(BeEmpty(), "the plan is on the record, for counting after a restart")
				hints, err := workload.DecodeHints(wl.Status.Placement.TopologyHint)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(hints).To(HaveKey("main"))
				cluster = wl.Status.Placement.Cluster
				g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil(), "the worker admits the copy where the hub planned it")
			}).Should(Succeed())
			placed[cluster]++
			return cluster
		}

		By("the first replica goes where it packs best")
		first := replica("svc-1")
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		one := dispatchedTo(first)

		By("the second: that worker's rack holds more than half of one, so it goes to the other worker, though it has room")
		second := replica("svc-2")
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Expect(dispatchedTo(second)).NotTo(Equal(one))

		By("the third and fourth: one per worker again")
		for _, name := range []string{"svc-3", "svc-4"} {
			j := replica(name)
			Expect(hub.Client.Create(ctx, j)).To(Succeed())
			dispatchedTo(j)
		}
		Expect(placed).To(Equal(map[string]int{"w1": 2, "w2": 2}))

		By("a fifth finds both racks full")
		fifth := replica("svc-5")
		Expect(hub.Client.Create(ctx, fifth)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, fifth).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, fifth).Status.Placement).To(BeNil())
		}, "2s").Should(Succeed())
	})
})
