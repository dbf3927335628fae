package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// setW1Onboarding sets or clears WorkerCluster w1's spec.onboarding.
func setW1Onboarding(ctx SpecContext, ob *strata.WorkerOnboarding) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var wc strata.WorkerCluster
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
		wc.Spec.Onboarding = ob
		g.Expect(hub.Client.Update(ctx, &wc)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("Onboarding", Serial, func() {
	It("runs a team onboarded on the hub alone on a worker that opts in: the hub makes its namespace and LocalQueue there", func(ctx SpecContext) {
		e := newEnv(ctx, "onb", map[string][][]string{"w1": {{"4"}}})
		summarized(ctx, e.flavor, "w1")
		By("a namespace and a LocalQueue on the hub only")
		team := "onb-team"
		Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("team-q", team, "cq-onb"))).To(Succeed())

		By("w1 opts in, its LocalQueues to point at its ClusterQueue cq-onb")
		setW1Onboarding(ctx, &strata.WorkerOnboarding{ClusterQueue: "cq-onb"})
		DeferCleanup(func(ctx SpecContext) { setW1Onboarding(ctx, nil) })

		job := e.job("onboarded", 2, "1", nil)
		job.Namespace = team
		job.Labels[strata.QueueNameLabel] = "team-q"
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
		}).Should(Succeed())
		By("WorkerCluster w1 counts the copy within seconds")
		Eventually(func(g Gomega) {
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			g.Expect(wc.Status.Workloads).To(BeNumerically(">=", 1))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		w1 := worker("w1")
		var ns corev1.Namespace
		Expect(w1.Client.Get(ctx, client.ObjectKey{Name: team}, &ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue(strata.OnboardedByLabel, hubCfg.Origin))
		var lq strata.LocalQueue
		Expect(w1.Client.Get(ctx, client.ObjectKey{Namespace: team, Name: "team-q"}, &lq)).To(Succeed())
		Expect(lq.Spec.ClusterQueue).To(Equal("cq-onb"))
		Expect(lq.Labels).To(HaveKeyWithValue(strata.OnboardedByLabel, hubCfg.Origin))
	})

	It("does not create a LocalQueue in a worker namespace it did not make and no administrator opted in", func(ctx SpecContext) {
		e := newEnv(ctx, "onbno", map[string][][]string{"w1": {{"4"}}})
		summarized(ctx, e.flavor, "w1")
		By("namespace " + e.ns + " exists on w1, made by its administrators; the hub's queue for it is another")
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("hub-only-q", e.ns, "cq-onbno"))).To(Succeed())
		setW1Onboarding(ctx, &strata.WorkerOnboarding{ClusterQueue: "cq-onbno"})
		DeferCleanup(func(ctx SpecContext) { setW1Onboarding(ctx, nil) })
		job := e.job("foreign", 1, "1", nil)
		job.Labels[strata.QueueNameLabel] = "hub-only-q"
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			a := wl.Status.Placement.Attempts[0]
			g.Expect(a.Cluster).To(Equal("w1"))
			g.Expect(a.Reason).To(Equal("NamespaceNotOnboardable"))
			g.Expect(a.Message).To(ContainSubstring(strata.HubOnboardingLabel))
			c := wcCondition(g, ctx, "w1", strata.WorkerClusterDispatching)
			g.Expect(c.Reason).To(Equal("NamespaceNotOnboardable"))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		var lq strata.LocalQueue
		err := worker("w1").Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "hub-only-q"}, &lq)
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(err).To(HaveOccurred(), "the hub created a LocalQueue in a namespace it does not own")
	})
})
