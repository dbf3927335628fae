package hub

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/controller/jobs"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/testutil"
)

// leaderWorkerSet is a queue-labelled set of replicas groups of a leader
// and size-1 workers, its templates gated when gated (as the hub chart's
// admission policy makes them).
func leaderWorkerSet(ns, name string, replicas, size int32, gated bool) *lwsapi.LeaderWorkerSet {
	l := testutil.MakeLeaderWorkerSet(name, ns).Queue("q").Replicas(replicas).Size(size).Defaulted().Image("x")
	if gated {
		l.Gated()
	}
	return l.Obj()
}

var _ = Describe("LeaderWorkerSets on the hub", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lws-"}}
		Expect(hub.Client.Create(ctx, n)).To(Succeed())
		ns = n.Name
	})
	invalid := func(ctx SpecContext, name string) *metav1.Condition {
		var c *metav1.Condition
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lwsset-" + name}, &wl)).To(Succeed())
			c = meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		return c
	}

	It("keeps one hub Workload of every group's pod sets for a gated set", func(ctx SpecContext) {
		Expect(hub.Client.Create(ctx, leaderWorkerSet(ns, "inference", 2, 3, true))).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lwsset-inference"}, &wl)).To(Succeed())
			var got []string
			for _, ps := range wl.Spec.PodSets {
				got = append(got, ps.Name+"="+string(rune('0'+ps.Count)))
			}
			g.Expect(got).To(Equal([]string{"leader-0=1", "worker-0=2", "leader-1=1", "worker-1=2"}))
		}).Should(Succeed())
	})

	It("does not dispatch a set whose pods could run on the hub (not gated), and says how to fix it", func(ctx SpecContext) {
		Expect(hub.Client.Create(ctx, leaderWorkerSet(ns, "ungated", 1, 2, false))).To(Succeed())
		c := invalid(ctx, "ungated")
		Expect(c.Reason).To(Equal(jobs.ReasonNotManagedByHub))
		Expect(c.Message).To(ContainSubstring("lack the scheduling gate strata.dev/topology"))
	})

	It("refuses, as KEP-2724 does by default, a slice size that does not divide the workers, naming the setting that allows it", func(ctx SpecContext) {
		l := testutil.MakeLeaderWorkerSet("sliced", ns).Queue("q").Replicas(1).Size(7).Defaulted().Image("x").Gated().
			LeaderAnnotations(map[string]string{"kueue.x-k8s.io/podset-required-topology": "rack"}).
			WorkerAnnotations(map[string]string{"kueue.x-k8s.io/podset-required-topology": "rack",
				"kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname", "kueue.x-k8s.io/podset-slice-size": "4"}).Obj()
		Expect(hub.Client.Create(ctx, l)).To(Succeed())
		c := invalid(ctx, "sliced")
		Expect(c.Reason).To(Equal(intake.ReasonInvalidJob))
		Expect(c.Message).To(ContainSubstring(`Invalid value: "4": the slice size 4 must evenly divide the pod count 6 (KEP-2724); ` +
			`for the last 2 pods to form one partial slice (Kueue's TASPartialSlices), set topologyAwareScheduling.partialSlices`))
	})

	It("says a set has more groups than the hub dispatches", func(ctx SpecContext) {
		Expect(hub.Client.Create(ctx, leaderWorkerSet(ns, "wide", 17, 2, true))).To(Succeed())
		c := invalid(ctx, "wide")
		Expect(c.Reason).To(Equal(intake.ReasonInvalidJob))
		Expect(c.Message).To(ContainSubstring("through the hub a LeaderWorkerSet has at most 16 groups"))
	})
})
