package agent

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
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

	It("preempts nothing for a replica that spreading keeps out of the only block a preemption would free", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-spreadp").NodeLabel("pool", "spreadp").TopologyName("spread-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("spreadp-q").ResourceGroup("cpu").GroupFlavor("tas-spreadp", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj())).To(Succeed())
		for name, v := range map[string]int32{"spreadp-low": 10, "spreadp-mid": 100, "spreadp-high": 1000} {
			Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, v))).To(Succeed())
		}
		// One 4-CPU host per block.
		createPoolNode(ctx, "spreadp", "spreadp-b1", "b1", "r-b1", "4")
		createPoolNode(ctx, "spreadp", "spreadp-b2", "b2", "r-b2", "4")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "spreadp-q")
		spreading := `{"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["inference"]}],` +
			` "rules": [{"topologyKey": "` + block + `", "maxShareAllowingPlacement": "0.5"}]}`
		job := func(class string, pods int32, replica bool) *batchv1.Job {
			ann := map[string]string{"kueue.x-k8s.io/podset-required-topology": block}
			if replica {
				ann["kueue.x-k8s.io/podset-topology-spreading"] = spreading
			}
			j := newJob(ns, "spreadp-q", pods, ann)
			j.Labels[strata.PriorityClassLabel] = class
			if replica {
				j.Labels["app"] = "inference"
			}
			return j
		}
		By("a high-priority Job fills one block; a replica and a low-priority Job share the other")
		high := job("spreadp-high", 4, false)
		Expect(worker.Client.Create(ctx, high)).To(Succeed())
		expectAdmitted(ctx, high)
		first := job("spreadp-high", 2, true)
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		expectAdmitted(ctx, first)
		low := job("spreadp-low", 1, false)
		Expect(worker.Client.Create(ctx, low)).To(Succeed())
		expectAdmitted(ctx, low)

		By("a second replica may not join the first's block (a share of 1 > 0.5), and the other block is the high Job's")
		second := job("spreadp-mid", 2, true)
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectWaiting(ctx, second, scheduler.ReasonPending, "")
		// Before: the preemption search placed it without spreading, found
		// that evicting the low Job made room in the first replica's block,
		// and evicted it for nothing, again after each of its returns.
		Consistently(func(g Gomega) {
			wl := workloadOf(g, ctx, low)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "the low Job was preempted for a replica that cannot go where it ran")
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		for _, j := range []*batchv1.Job{high, first, low, second} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
