package agent

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/pkg/testutil"
)

// Kueue v0.20's topology spreading: replicas of one service, each packed
// in a rack, spread over blocks.
var _ = Describe("Topology spreading", Ordered, Label("agent", "admission"), func() {
	It("spreads four rack-packed replicas of one service two per block, though one block holds them all", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("spread-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-spread").NodeLabel("pool", "spread").TopologyName("spread-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("spread-q").Flavor("tas-spread").Obj())).To(Succeed())
		blockOf := map[string]string{}
		for _, b := range []string{"b1", "b2"} {
			for h := range 2 {
				name := fmt.Sprintf("spread-%s-h%d", b, h)
				createPoolNode(ctx, "spread", name, b, "r-"+b, "4")
				blockOf[name] = b
			}
		}
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "spread-q")
		spreading := `{"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["inference"]}],` +
			` "rules": [{"topologyKey": "` + block + `", "maxShareAllowingPlacement": "0.5"}]}`
		var replicas []*batchv1.Job
		for range 4 {
			j := newJob(ns, "spread-q", 2, map[string]string{
				"kueue.x-k8s.io/podset-required-topology":  rack,
				"kueue.x-k8s.io/podset-topology-spreading": spreading,
			})
			j.Labels["app"] = "inference"
			Expect(worker.Client.Create(ctx, j)).To(Succeed())
			replicas = append(replicas, j)
			expectAdmitted(ctx, j) // one after another: each sees the ones before
		}
		perBlock := map[string]int{}
		for _, j := range replicas {
			blocks := map[string]bool{}
			for h := range admittedHostsOf(ctx, j) {
				blocks[blockOf[h]] = true
			}
			Expect(blocks).To(HaveLen(1), "%s packs into one rack", j.Name)
			for b := range blocks {
				perBlock[b]++
			}
		}
		Expect(perBlock).To(Equal(map[string]int{"b1": 2, "b2": 2}))

		By("a replica whose share allows no block (0.3 of 4, each holds 2) waits, saying why, though both have room")
		fifth := newJob(ns, "spread-q", 2, map[string]string{
			"kueue.x-k8s.io/podset-required-topology": rack,
			"kueue.x-k8s.io/podset-topology-spreading": `{"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["inference"]}],` +
				` "rules": [{"topologyKey": "` + block + `", "maxShareAllowingPlacement": "0.3"}]}`,
		})
		fifth.Labels["app"] = "inference"
		Expect(worker.Client.Create(ctx, fifth)).To(Succeed())
		expectWaiting(ctx, fifth, "Pending", "topology spreading")

		for _, j := range append(replicas, fifth) {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
