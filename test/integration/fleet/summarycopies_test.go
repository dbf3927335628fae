package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/summarycopy"
)

var _ = Describe("The hub's copies of the workers' summaries", func() {
	It("copies each worker's summary into the hub with its domains, follows it, shows totals, and removes copies nothing stands for", func(ctx SpecContext) {
		e := newEnv(ctx, "copies", map[string][][]string{"w1": {{"4", "4"}, {"2"}}})
		summarized(ctx, e.flavor, "w1")
		name := summarycopy.Name("w1", e.flavor)

		By("the hub's copy " + name + " has w1's domains, levels and node count, labelled and owned by WorkerCluster w1")
		Eventually(func(g Gomega) {
			var src, cp strata.CapacitySummary
			g.Expect(worker("w1").Client.Get(ctx, client.ObjectKey{Name: e.flavor}, &src)).To(Succeed())
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &cp)).To(Succeed())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.WorkerClusterLabel, "w1"))
			g.Expect(cp.OwnerReferences).To(ContainElement(And(HaveField("Kind", "WorkerCluster"), HaveField("Name", "w1"))))
			g.Expect(cp.Spec.Flavor).To(Equal(e.flavor))
			g.Expect(cp.Status.Nodes).To(BeEquivalentTo(3))
			g.Expect(cp.Status.Levels).To(Equal(src.Status.Levels))
			g.Expect(cp.Status.Domains).To(Equal(src.Status.Domains))
			g.Expect(cp.Status.Dispatches).To(BeEmpty(), "the copy leaves out what only placement reads")
		}).Should(Succeed())

		By("WorkerCluster w1 shows the flavor's capacity beside its free amount: 10 CPUs")
		Eventually(func(g Gomega) {
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			var got *strata.WorkerSummaryStatus
			for i := range wc.Status.Summaries {
				if wc.Status.Summaries[i].Flavor == e.flavor {
					got = &wc.Status.Summaries[i]
				}
			}
			g.Expect(got).NotTo(BeNil())
			capacity := got.Capacity[corev1.ResourceCPU]
			g.Expect(capacity.Cmp(resource.MustParse("10"))).To(BeZero(), "capacity %v", got.Capacity)
		}).Should(Succeed())

		By("a node added on w1 reaches the copy")
		e.createNode(ctx, worker("w1"), "copies-w1-r1-n1", "r1", "2")
		Eventually(func(g Gomega) {
			var cp strata.CapacitySummary
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &cp)).To(Succeed())
			g.Expect(cp.Status.Nodes).To(BeEquivalentTo(4))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("copies that no worker's summary stands for are removed: a flavor w1 does not have, and a WorkerCluster that does not exist")
		stray := func(name, worker, flavor string) *strata.CapacitySummary {
			return &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{strata.WorkerClusterLabel: worker}},
				Spec: strata.CapacitySummarySpec{Flavor: flavor}}
		}
		for _, cs := range []*strata.CapacitySummary{stray("w1.no-such-flavor", "w1", "no-such-flavor"), stray("gone.gpu", "gone", "gpu")} {
			Expect(hub.Client.Create(ctx, cs)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(cs), &strata.CapacitySummary{})).To(Satisfy(func(err error) bool { return client.IgnoreNotFound(err) == nil && err != nil }),
					"%s is still there", cs.Name)
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		}
		Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &strata.CapacitySummary{})).To(Succeed(), "w1's copy stays")
	})

	It("shows a dispatch in flight on its rack until the worker's summary counts it", Serial, func(ctx SpecContext) {
		e := newEnv(ctx, "inflight", map[string][][]string{"w1": {{"4", "4"}}})
		summarized(ctx, e.flavor, "w1")
		name := summarycopy.Name("w1", e.flavor)

		By("w1's agent stopped: the copy is sent, and nothing on w1 admits it")
		stopAgents["w1"]()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				stopAgents["w1"] = startAgent(worker("w1"))
			}
		})
		job := e.job("held", 2, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			var cp strata.CapacitySummary
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &cp)).To(Succeed())
			g.Expect(cp.Status.InFlight).To(ConsistOf(And(HaveField("Values", ConsistOf("r0")), HaveField("Workloads", int32(1)), HaveField("Pods", int32(2)))))
			cpu := cp.Status.InFlight[0].Requests[corev1.ResourceCPU]
			g.Expect(cpu.Cmp(resource.MustParse("4"))).To(BeZero(), "requests %v", cp.Status.InFlight[0].Requests)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("w1's agent back: the copy is admitted, the summary counts it, and nothing is in flight any more")
		stopAgents["w1"] = startAgent(worker("w1"))
		restarted = true
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			var cp strata.CapacitySummary
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &cp)).To(Succeed())
			g.Expect(cp.Status.InFlight).To(BeEmpty())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
})
