package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// waitingReason is the message of a hub Workload's Admitted condition.
func waitingReason(g Gomega, wl *strata.Workload) string {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	g.Expect(c).NotTo(BeNil())
	return c.Message
}

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

	It("sends no copy where the worker's namespace, LocalQueue or ClusterQueue would refuse it, says what is missing where, and places it once that is fixed", func(ctx SpecContext) {
		e := newEnv(ctx, "qfacts", map[string][][]string{"w1": {{"4"}}, "w2": {{"8"}}})
		By("a team namespace and LocalQueue on the hub only")
		team := "qfacts-team"
		Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("team-q", team, "cq-qfacts"))).To(Succeed())
		j := e.job("team-job", 2, "1", nil)
		j.Namespace = team
		j.Labels[strata.QueueNameLabel] = "team-q"
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		noCopy := func(g Gomega, wl *strata.Workload) {
			g.Expect(wl.Status.Admission).To(BeNil())
			if p := wl.Status.Placement; p != nil {
				g.Expect(p.Attempts).To(BeEmpty(), "no copy is sent")
			}
		}
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			noCopy(g, wl)
			g.Expect(waitingReason(g, wl)).To(MatchRegexp(`^no worker may take it now: w1/f-qfacts, w2/f-qfacts(, w3/f-qfacts)?: namespace qfacts-team does not exist there$`))
		}).Should(Succeed())

		By("the namespace on every worker, a LocalQueue on w1 only whose ClusterQueue does not take it")
		w1, w2 := worker("w1"), worker("w2")
		for _, w := range workers {
			Expect(w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})).To(Succeed())
		}
		strict := testutil.MakeClusterQueue("cq-qfacts-strict").Flavor(e.flavor).Obj()
		strict.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "approved"}}
		Expect(w1.Client.Create(ctx, strict)).To(Succeed())
		Expect(w1.Client.Create(ctx, testutil.MakeLocalQueue("team-q", team, "cq-qfacts-strict"))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			noCopy(g, wl)
			reason := waitingReason(g, wl)
			g.Expect(reason).To(ContainSubstring(`w1/f-qfacts: ClusterQueue "cq-qfacts-strict" does not admit namespace "qfacts-team"`))
			g.Expect(reason).To(MatchRegexp(`w2/f-qfacts(, w3/f-qfacts)?: LocalQueue "team-q" does not exist in namespace "qfacts-team"`))
		}).Should(Succeed())

		By("w2 gets the LocalQueue: the Job goes there at once, admitted the first time")
		fixed := time.Now()
		Expect(w2.Client.Create(ctx, testutil.MakeLocalQueue("team-q", team, "cq-qfacts"))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("admitted on w2 %s after its LocalQueue was created\n", time.Since(fixed).Round(100*time.Millisecond))
		Expect(copies(Default, ctx, j)).To(Equal([]string{"w2"}))
	})
})
