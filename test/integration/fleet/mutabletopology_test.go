package fleet

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("A worker's Topology whose levels change", Label("fleet", "topology"), func() {
	It("reaches the hub without a restart: a Job asking for the new level waits, then goes", func(ctx SpecContext) {
		const name, zone = "mutable", "example.com/zone"
		e := &env{name: name, ns: "ns-" + name, flavor: "f-" + name}
		w1 := worker("w1")
		Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeClusterQueue("cq-"+name).Flavor(e.flavor).Obj())).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-"+name))).To(Succeed())
		Expect(w1.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
		Expect(w1.Client.Create(ctx, testutil.MakeTopology("mutable-levels", rack, host).Obj())).To(Succeed())
		Expect(w1.Client.Create(ctx, testutil.MakeResourceFlavor(e.flavor).NodeLabel("pool", name).TopologyName("mutable-levels").Obj())).To(Succeed())
		Expect(w1.Client.Create(ctx, testutil.MakeClusterQueue("cq-"+name).Flavor(e.flavor).Obj())).To(Succeed())
		Expect(w1.Client.Create(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-"+name))).To(Succeed())
		for i := range 4 {
			n := fmt.Sprintf("%s-w1-n%d", name, i)
			Expect(framework.CreateReadyNode(ctx, w1.Client, n, map[string]string{"pool": name, rack: fmt.Sprintf("r%d", i/2), zone: fmt.Sprintf("z%d", i/2), host: n}, "4")).To(Succeed())
		}
		waitSummaries(ctx, e.flavor, map[string][][]string{"w1": {{"4", "4", "4", "4"}}})

		By("a zone-required Job: no worker has that level yet")
		job := e.job("zoned", 2, "4", map[string]string{"strata.dev/podset-required-topology": zone})
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, job).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring(zone))
		}).Should(Succeed())

		By("w1's Topology becomes zone > host: the hub reads the new summary and sends the Job there")
		Eventually(func(g Gomega) {
			var t strata.Topology
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "mutable-levels"}, &t)).To(Succeed())
			t.Spec.Levels = []strata.TopologyLevel{{NodeLabel: zone}, {NodeLabel: host}}
			g.Expect(w1.Client.Update(ctx, &t)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
	})
})
