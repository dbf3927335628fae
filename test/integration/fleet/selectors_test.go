package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
)

var _ = Describe("Node selectors", func() {
	It("sends a Job only where its node selector or affinity matches, the first time, and one that matches no node nowhere", func(ctx SpecContext) {
		e := newEnv(ctx, "select", map[string][][]string{
			"w1": {{"4", "4"}}, // the tightest fit: the first choice of what may go anywhere
			"w2": {{"8", "8"}},
		})
		const model = "gpu.example/model"

		By("labelling w1's nodes a100 and w2's h100, and waiting for the hub to read the summaries that say so")
		for name, value := range map[string]string{"w1": "a100", "w2": "h100"} {
			w := worker(name)
			var nodes corev1.NodeList
			Expect(w.Client.List(ctx, &nodes, client.MatchingLabels{"pool": e.name})).To(Succeed())
			Expect(nodes.Items).To(HaveLen(2))
			for i := range nodes.Items {
				n := &nodes.Items[i]
				n.Labels[model] = value
				Expect(w.Client.Update(ctx, n)).To(Succeed())
			}
			hubReads(ctx, name, e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
				g.Expect(st.NodeLabels).NotTo(BeNil())
				g.Expect(st.NodeLabels.Common).To(HaveKeyWithValue(model, value))
			})
		}

		By("a Job selecting h100 goes to w2, one selecting a100 by affinity to w1")
		h100 := e.job("h100", 2, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		h100.Spec.Template.Spec.NodeSelector = map[string]string{model: "h100"}
		Expect(hub.Client.Create(ctx, h100)).To(Succeed())
		a100 := e.job("a100", 2, "1", nil)
		a100.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: model, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"h100"}}},
			}}}}}
		Expect(hub.Client.Create(ctx, a100)).To(Succeed())
		for _, tc := range []struct {
			j    string
			want string
		}{{"h100", "w2"}, {"a100", "w1"}} {
			j := h100
			if tc.j == "a100" {
				j = a100
			}
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", tc.j, wl.Status.Conditions)
				g.Expect(wl.Status.Placement.Cluster).To(Equal(tc.want), tc.j)
				g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "%s: admitted the first time", tc.j)
				g.Expect(copies(g, ctx, j)).To(Equal([]string{tc.want}), tc.j)
			}).Should(Succeed())
		}

		By("a Job selecting b200, which no node has, waits with NoClusterFits and is copied nowhere")
		b200 := e.job("b200", 1, "1", nil)
		b200.Spec.Template.Spec.NodeSelector = map[string]string{model: "b200"}
		Expect(hub.Client.Create(ctx, b200)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, b200).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(dispatch.ReasonNeverFits), c.Message)
			g.Expect(c.Message).To(ContainSubstring("node selector/affinity"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, b200)).To(BeEmpty())
			g.Expect(hubWorkload(g, ctx, b200).Status.Placement).To(Or(BeNil(), HaveField("Attempts", BeEmpty())))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})
})
