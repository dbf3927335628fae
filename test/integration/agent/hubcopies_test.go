package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("A worker that is also the hub cluster", Label("agent", "summary"), func() {
	It("collects summaries of flavors it does not have, but not the hub's copies of other workers' summaries", func(ctx SpecContext) {
		summary := func(name string, labels map[string]string) *strata.CapacitySummary {
			return &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: strata.CapacitySummarySpec{Flavor: name}}
		}
		hubCopy := summary("w9.gpu", map[string]string{strata.WorkerClusterLabel: "w9"})
		stale := summary("no-such-flavor", nil)
		Expect(worker.Client.Create(ctx, hubCopy)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, hubCopy))).To(Succeed()) })
		Expect(worker.Client.Create(ctx, stale)).To(Succeed())

		By("a new topology-aware flavor has the agent publish, and collect the summary of a flavor that does not exist")
		Expect(client.IgnoreAlreadyExists(worker.Client.Create(ctx, testutil.MakeTopology("hubcopies-topology", block, rack, host).Obj()))).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-hubcopies").NodeLabel("pool", "hubcopies").TopologyName("hubcopies-topology").Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "tas-hubcopies"}, &strata.CapacitySummary{})).To(Succeed())
			err := worker.Client.Get(ctx, client.ObjectKeyFromObject(stale), &strata.CapacitySummary{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		By("in the same rounds it left the hub's copy alone")
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(hubCopy), &strata.CapacitySummary{})).To(Succeed())
	})
})
