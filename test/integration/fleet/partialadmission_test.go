package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

var _ = Describe("A Job that may run with fewer pods", func() {
	It("is placed on the worker where the most of its pods fit, and admitted there with that many", func(ctx SpecContext) {
		// One rack of 8 CPUs on w1, one of 2 on w2: 12 pods of a rack fit
		// nowhere, 8 fit on w1.
		e := newEnv(ctx, "minpar", map[string][][]string{"w1": {{"4", "4"}}, "w2": {{"2"}}})
		w1 := worker("w1")
		job := e.job("minpar", 12, "1", map[string]string{"strata.dev/podset-required-topology": rack})
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "3"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.PodSets[0].MinCount).To(Equal(ptr.To[int32](3)))
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			for _, a := range wl.Status.Placement.Attempts {
				g.Expect(a.Result).NotTo(Equal(strata.PlacementRejected), "attempts: %v", wl.Status.Placement.Attempts)
			}
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			g.Expect(ptr.Deref(cp.Spec.Parallelism, 0)).To(Equal(int32(8)))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(8)))
			c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(ContainSubstring("with 8 of the 12 pods of pod set main"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
