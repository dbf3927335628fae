package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("A Topology whose levels change", Ordered, Label("agent", "topology"), func() {
	It("keeps admitted workloads where they are, places pending ones on the new levels, and republishes the summary", func(ctx SpecContext) {
		const zone = "example.com/zone"
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("mutable-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-mutable").NodeLabel("pool", "mutable").TopologyName("mutable-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("mutable-q").Flavor("tas-mutable").Obj())).To(Succeed())
		// Two racks of two 4-CPU nodes, in two zones (zone label set on the
		// nodes beside block and rack).
		for _, n := range []struct{ name, rack, zone string }{{"mutable-1", "r1", "z1"}, {"mutable-2", "r1", "z1"}, {"mutable-3", "r2", "z2"}, {"mutable-4", "r2", "z2"}} {
			Expect(framework.CreateReadyNode(ctx, worker.Client, n.name,
				map[string]string{"pool": "mutable", block: "b1", rack: n.rack, host: n.name, zone: n.zone}, "4")).To(Succeed())
		}
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "mutable-q")

		first := newJob(ns, "mutable-q", 8, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		expectAdmitted(ctx, first)
		var before strata.Workload
		Eventually(func(g Gomega) { before = *workloadOf(g, ctx, first) }).Should(Succeed())

		By("the levels become zone > host")
		Eventually(func(g Gomega) {
			var t strata.Topology
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "mutable-topology"}, &t)).To(Succeed())
			t.Spec.Levels = []strata.TopologyLevel{{NodeLabel: zone}, {NodeLabel: host}}
			g.Expect(worker.Client.Update(ctx, &t)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var cs strata.CapacitySummary
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "tas-mutable"}, &cs)).To(Succeed())
			g.Expect(cs.Status.Levels).To(HaveExactElements(zone, host))
		}).Should(Succeed())

		By("the admitted workload keeps its assignment")
		Consistently(func(g Gomega) {
			wl := workloadOf(g, ctx, first)
			g.Expect(wl.Status.Admission).To(Equal(before.Status.Admission))
		}, "2s").Should(Succeed())

		By("a zone-required Job is placed on the new levels, in the free zone")
		second := newJob(ns, "mutable-q", 8, map[string]string{"strata.dev/podset-required-topology": zone})
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectAdmitted(ctx, second)
		hosts := hostsOf(ctx, second)
		Expect(hosts).NotTo(ContainElements(hostsOf(ctx, first)))

		By("a Job still naming the old rack level waits, saying the level is gone")
		third := newJob(ns, "mutable-q", 1, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, third)).To(Succeed())
		expectWaiting(ctx, third, "Inadmissible", `is not a level of Topology "mutable-topology"`)

		for _, j := range []client.Object{first, second, third} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
