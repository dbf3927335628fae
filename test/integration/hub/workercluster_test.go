package hub

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/controller/workercluster"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// kubeconfigSecret stores kubeconfig in Secret ns/name on the hub.
func kubeconfigSecret(ctx SpecContext, ns, name string, kubeconfig []byte) {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	Expect(hub.Client.Create(ctx, s)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, s))).To(Succeed()) })
}

// register creates WorkerCluster name from wc, deleted after the spec.
func register(ctx SpecContext, wc *strata.WorkerCluster) {
	GinkgoHelper()
	Expect(hub.Client.Create(ctx, wc)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, wc))).To(Succeed()) })
}

// condition returns a WorkerCluster's condition of type t, once it has one.
func condition(g Gomega, ctx SpecContext, name, t string) metav1.Condition {
	var wc strata.WorkerCluster
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
	c := meta.FindStatusCondition(wc.Status.Conditions, t)
	g.Expect(c).NotTo(BeNil(), "no %s condition yet", t)
	return *c
}

// publish writes a summary of flavor on worker w, observed at observed.
func publish(ctx SpecContext, w *framework.Cluster, flavor string, observed time.Time) {
	GinkgoHelper()
	cs := testutil.MakeCapacitySummary(flavor).Obj()
	Expect(client.IgnoreAlreadyExists(w.Client.Create(ctx, cs))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(w.Client.Delete(ctx, cs))).To(Succeed()) })
	Eventually(func(g Gomega) {
		g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(cs), cs)).To(Succeed())
		cs.Status = strata.CapacitySummaryStatus{
			SummaryGeneration: cs.Status.SummaryGeneration + 1, ObservedTime: &metav1.Time{Time: observed},
			Levels: []string{"cloud.provider.com/topology-rack", strata.HostnameLabel}, LeafLevels: 1,
			Resources: []corev1.ResourceName{"cpu", "pods"}, Vectors: []strata.ResourceVector{{8000, 110000}},
			Domains: []strata.SummaryDomain{{Values: []string{"r1"}, Free: []int32{0, 4}, Capacity: []int32{0, 4}}}, Nodes: 4,
		}
		g.Expect(w.Client.Status().Update(ctx, cs)).To(Succeed())
	}).Should(Succeed())
}

// touch has WorkerCluster name reconciled again, by an annotation.
func touch(ctx SpecContext, name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var wc strata.WorkerCluster
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
		if wc.Annotations == nil {
			wc.Annotations = map[string]string{}
		}
		wc.Annotations["test.strata.dev/touched"] = time.Now().Format(time.RFC3339Nano)
		g.Expect(hub.Client.Update(ctx, &wc)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("WorkerCluster", func() {
	It("connects through a kubeconfig Secret and reports the worker's summaries", func(ctx SpecContext) {
		w := workers[0]
		kubeconfigSecret(ctx, hubCfg.Namespace, "w1-kubeconfig", w.Kubeconfig)
		register(ctx, testutil.MakeWorkerCluster("w1").KubeConfigSecret(hubCfg.Namespace, "w1-kubeconfig").Obj())

		By("reporting that the worker publishes nothing yet")
		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "w1", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(g, ctx, "w1", strata.WorkerClusterSummariesFresh).Reason).To(Equal(workercluster.ReasonNoSummaries))
		}).Should(Succeed())

		By("reading a summary the worker publishes")
		publish(ctx, w, "tas-a100", time.Now())
		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "w1", strata.WorkerClusterSummariesFresh).Status).To(Equal(metav1.ConditionTrue))
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			g.Expect(wc.Status.Summaries).To(HaveLen(1))
			g.Expect(wc.Status.Summaries[0].Flavor).To(Equal("tas-a100"))
			summaries, ok, err := hubFleet.Summaries(ctx, "w1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(summaries).To(HaveLen(1))
		}).Should(Succeed())

		By("offering its flavor to placement")
		staleAfter := hubCfg.Dispatch.SummaryStaleAfter.Duration
		targets, err := hubFleet.Targets(ctx, []fleet.Worker{{Name: "w1"}}, time.Now(), staleAfter)
		Expect(err).NotTo(HaveOccurred())
		Expect(targets).To(HaveLen(1))
		Expect(targets[0].Cluster).To(Equal("w1"))
		Expect(targets[0].Flavor).To(Equal("tas-a100"))
		Expect(targets[0].Unavailable).To(BeEmpty())
		Expect(targets[0].Snapshot().NodeCount()).To(Equal(int64(4)))

		By("a worker whose clock is an hour behind: its summaries are fresh, as the hub saw them published")
		publish(ctx, w, "tas-a100", time.Now().Add(-time.Hour))
		Consistently(func(g Gomega) {
			g.Expect(condition(g, ctx, "w1", strata.WorkerClusterSummariesFresh).Status).To(Equal(metav1.ConditionTrue))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		targets, err = hubFleet.Targets(ctx, []fleet.Worker{{Name: "w1"}}, hubClock.Now(), staleAfter)
		Expect(err).NotTo(HaveOccurred())
		Expect(targets[0].Unavailable).To(BeEmpty())

		By("marking it stale when the worker stops publishing: the hub's clock moves on by summaryStaleAfter")
		hubClock.Shift(staleAfter)
		DeferCleanup(func() { hubClock.Shift(-staleAfter) })
		touch(ctx, "w1")
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "w1", strata.WorkerClusterSummariesFresh)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonStale))
			g.Expect(c.Message).To(ContainSubstring("tas-a100 (observed"))
			targets, err := hubFleet.Targets(ctx, []fleet.Worker{{Name: "w1"}}, hubClock.Now(), hubCfg.Dispatch.SummaryStaleAfter.Duration)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(targets).To(HaveLen(1))
			g.Expect(targets[0].Unavailable).To(HavePrefix("summary stale: observed"))
		}).Should(Succeed())
	})

	It("takes a summary it finds on connecting as old as the worker's API server says it is", func(ctx SpecContext) {
		w := workers[1]
		By("a summary published, then nothing for a few seconds (an agent gone before the hub started)")
		publish(ctx, w, "found-on-connect", time.Now())
		var cs strata.CapacitySummary
		Expect(w.Client.Get(ctx, client.ObjectKey{Name: "found-on-connect"}, &cs)).To(Succeed())
		var written time.Time
		for _, m := range cs.ManagedFields {
			if m.Time != nil && m.Time.After(written) {
				written = m.Time.Time
			}
		}
		Expect(written.IsZero()).To(BeFalse(), "the worker's API server keeps managedFields")
		Eventually(func() time.Duration { return time.Since(written) }).Should(BeNumerically(">", 8*time.Second))

		By("connecting: the summary's age is the time since that write, not zero")
		kubeconfigSecret(ctx, hubCfg.Namespace, "w2-late-kubeconfig", w.Kubeconfig)
		register(ctx, testutil.MakeWorkerCluster("w2-late").KubeConfigSecret(hubCfg.Namespace, "w2-late-kubeconfig").Obj())
		Eventually(func(g Gomega) {
			summaries, ok, err := hubFleet.Summaries(ctx, "w2-late")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(summaries).To(ContainElement(HaveField("Name", "found-on-connect")))
		}).Should(Succeed())
		// Read at once: counted from when the hub found it, the age would
		// be about the poll's interval.
		age, ok := hubFleet.SummaryAge("w2-late", hubClock.Now())(&cs)
		Expect(ok).To(BeTrue())
		Expect(age).To(BeNumerically(">=", 5*time.Second), "seen first on connecting, written at %s", written)
	})

	It("reads kubeconfig Secrets only from the hub's own namespace", func(ctx SpecContext) {
		Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})).To(Succeed())
		kubeconfigSecret(ctx, "tenant", "w2-kubeconfig", workers[1].Kubeconfig)
		register(ctx, testutil.MakeWorkerCluster("w2-elsewhere").KubeConfigSecret("tenant", "w2-kubeconfig").Obj())
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "w2-elsewhere", strata.WorkerClusterConnected)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(workercluster.ReasonSecretOutside))
			g.Expect(c.Message).To(Equal(fmt.Sprintf("the hub reads kubeconfig Secrets only from its own namespace %s, not tenant: move Secret w2-kubeconfig there", hubCfg.Namespace)))
		}).Should(Succeed())
	})

	It("says which permission its credential lacks", func(ctx SpecContext) {
		w := workers[1]
		user, err := w.AddUser(envtest.User{Name: "no-rights"})
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfigSecret(ctx, hubCfg.Namespace, "w2-weak", kubeconfig)
		register(ctx, testutil.MakeWorkerCluster("w2-weak").KubeConfigSecret(hubCfg.Namespace, "w2-weak").Obj())
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "w2-weak", strata.WorkerClusterConnected)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonForbidden))
			g.Expect(c.Message).To(Equal(fmt.Sprintf("the hub's credential (Secret %s/w2-weak) may not list capacitysummaries.strata.dev (cluster-wide); watch capacitysummaries.strata.dev (cluster-wide); "+
				"list workloads.strata.dev (cluster-wide); watch workloads.strata.dev (cluster-wide); list jobs.batch (cluster-wide); watch jobs.batch (cluster-wide) on the worker", hubCfg.Namespace)))
		}).Should(Succeed())
	})

	It("reports an unreachable worker and a missing Secret", func(ctx SpecContext) {
		cfg, err := clientcmd.Load(workers[1].Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		for _, c := range cfg.Clusters {
			c.Server = "https://127.0.0.1:1" // nothing listens there
		}
		unreachable, err := clientcmd.Write(*cfg)
		Expect(err).NotTo(HaveOccurred())
		kubeconfigSecret(ctx, hubCfg.Namespace, "w2-gone", unreachable)
		register(ctx, testutil.MakeWorkerCluster("w2-gone").KubeConfigSecret(hubCfg.Namespace, "w2-gone").Obj())
		register(ctx, testutil.MakeWorkerCluster("w2-nosecret").KubeConfigSecret(hubCfg.Namespace, "absent").Obj())
		Eventually(func(g Gomega) {
			c := condition(g, ctx, "w2-gone", strata.WorkerClusterConnected)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonUnreachable))
			g.Expect(c.Message).To(ContainSubstring("does not answer"))
			g.Expect(condition(g, ctx, "w2-gone", strata.WorkerClusterSummariesFresh).Status).To(Equal(metav1.ConditionUnknown))
			c = condition(g, ctx, "w2-nosecret", strata.WorkerClusterConnected)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonSecretNotFound))
			g.Expect(c.Message).To(Equal(fmt.Sprintf("Secret %s/absent does not exist", hubCfg.Namespace)))
		}).Should(Succeed())
	})

	It("shows a cordoned worker", func(ctx SpecContext) {
		wc := testutil.MakeWorkerCluster("w1-cordoned").KubeConfigSecret(hubCfg.Namespace, "w1-c").Obj()
		wc.Spec.Unschedulable = true
		kubeconfigSecret(ctx, hubCfg.Namespace, "w1-c", workers[0].Kubeconfig)
		register(ctx, wc)
		Eventually(func(g Gomega) {
			var got strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(wc), &got)).To(Succeed())
			g.Expect(got.Spec.Unschedulable).To(BeTrue())
			g.Expect(condition(g, ctx, "w1-cordoned", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
	})
})
