package fleet

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

var _ = Describe("Taints", func() {
	It("sends pods only where they tolerate the nodes' taints, the first time", func(ctx SpecContext) {
		e := newEnv(ctx, "taint", map[string][][]string{
			"w1": {{"4", "4"}}, // the tightest fit, first choice for what tolerates its taint
			"w2": {{"8", "8"}},
		})
		w1 := worker("w1")
		gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

		By("tainting w1's nodes, and waiting for the hub to read w1's summary that says so")
		var nodes corev1.NodeList
		Expect(w1.Client.List(ctx, &nodes, client.MatchingLabels{"pool": e.name})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(2))
		for i := range nodes.Items {
			n := &nodes.Items[i]
			n.Spec.Taints = append(n.Spec.Taints, gpuTaint)
			Expect(w1.Client.Update(ctx, n)).To(Succeed())
		}
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.TaintSets).To(Equal([]strata.TaintSet{{Taints: []corev1.Taint{gpuTaint}}}))
			g.Expect(st.Domains).To(HaveLen(1))
			g.Expect(st.Domains[0].FreeTaints).To(Equal([]int32{1}))
		})

		By("a Job that does not tolerate the taint goes to w2")
		plain := e.job("plain", 2, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, plain)).To(Succeed())
		By("a Job that tolerates it goes to w1, the tightest fit")
		tolerating := e.job("tolerating", 2, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		tolerating.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(hub.Client.Create(ctx, tolerating)).To(Succeed())
		for job, want := range map[string]string{"plain": "w2", "tolerating": "w1"} {
			j := plain
			if job == "tolerating" {
				j = tolerating
			}
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job, wl.Status.Conditions)
				g.Expect(wl.Status.Placement.Cluster).To(Equal(want), job)
				g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "%s: admitted the first time", job)
				g.Expect(copies(g, ctx, j)).To(Equal([]string{want}), job)
			}).Should(Succeed())
		}
	})
})
