package fleet

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

var _ = Describe("Refusals", func() {
	It("places a Job elsewhere when a worker's ResourceQuota refuses its copy, naming the quota", func(ctx SpecContext) {
		e := newEnv(ctx, "refusal", map[string][][]string{
			"w1": {{"4", "4"}}, // the tightest fit: the first choice
			"w2": {{"8", "8"}},
		})
		w1 := worker("w1")
		q := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: e.ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}},
		}
		Expect(w1.Client.Create(ctx, q)).To(Succeed())
		// No quota controller runs here: write the status it would.
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}
		Expect(w1.Client.Status().Update(ctx, q)).To(Succeed())

		j := e.job("refused", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			first := wl.Status.Placement.Attempts[0]
			g.Expect(first.Cluster).To(Equal("w1"))
			g.Expect(first.Result).To(Equal(strata.PlacementRejected))
			g.Expect(first.Message).To(ContainSubstring("exceeded quota"))
			g.Expect(first.Message).NotTo(ContainSubstring("credential"), "a quota is not a missing permission")
		}).Should(Succeed())
		Expect(copies(Default, ctx, j)).To(Equal([]string{"w2"}))
	})
})
