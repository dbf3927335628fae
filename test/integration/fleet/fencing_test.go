package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// withFencing restarts the hub with short fencing times for one spec, and
// with the suite's afterwards. The times keep the order production
// enforces (renewInterval ≤ fenceAfter/3 < replaceAfter) with a margin
// of seconds instead of config validation's minute.
func withFencing(fenceAfter, renewInterval, replaceAfter time.Duration) {
	GinkgoHelper()
	stopHub()
	old := hubCfg.Fencing
	hubCfg.Fencing = configv1beta1.Fencing{Mode: configv1beta1.FencingEnabled, FenceAfter: &metav1.Duration{Duration: fenceAfter},
		RenewInterval: &metav1.Duration{Duration: renewInterval}, ReplaceAfter: &metav1.Duration{Duration: replaceAfter}}
	stopHub = startHub()
	DeferCleanup(func() {
		stopHub()
		hubCfg.Fencing = old
		stopHub = startHub()
	})
}

// fenceLease returns the hub's fencing Lease on worker w.
func fenceLease(g Gomega, ctx SpecContext, w string) *coordinationv1.Lease {
	var lease coordinationv1.Lease
	g.Expect(worker(w).Client.Get(ctx, client.ObjectKey{Namespace: hubCfg.Dispatch.WorkerNamespace, Name: strata.FencingLeasePrefix + hubCfg.Origin}, &lease)).To(Succeed())
	return &lease
}

var _ = Describe("Fencing", Serial, Label("fencing"), func() {
	It("stops a copy whose hub stopped renewing its Lease after fenceAfter, and runs it again once the hub renews", func(ctx SpecContext) {
		withFencing(4*time.Second, time.Second, 8*time.Second)
		e := newEnv(ctx, "fence", map[string][][]string{"w1": {{"4", "4"}}})
		j := e.job("guarded", 2, "2", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			cp, _ := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			g.Expect(fenceLease(g, ctx, "w1").Spec.LeaseDurationSeconds).To(Equal(ptr.To[int32](4)))
		}).Should(Succeed())

		By("the hub stops: nobody renews the Lease")
		stopHub()
		stopped := time.Now()
		hubStopped := true
		DeferCleanup(func() {
			if hubStopped {
				stopHub = startHub()
			}
		})
		var fencedAfter time.Duration
		Eventually(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Fenced"))
			g.Expect(c.Message).To(ContainSubstring("has not renewed its fencing Lease"))
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeTrue(), "the agent suspends the fenced copy")
			fencedAfter = time.Since(stopped)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("the copy was stopped %s after the hub stopped (fenceAfter 4s)\n", fencedAfter.Round(100*time.Millisecond))
		Consistently(func(g Gomega) {
			_, cwl := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cwl.Status.Admission).To(BeNil(), "nothing is admitted while the hub is silent")
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the hub returns and renews: the same dispatch runs again")
		stopHub = startHub()
		hubStopped = false
		Eventually(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "never dispatched again")
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("places a workload elsewhere only after replaceAfter when its worker stops answering, and removes the stale copy before renewing there", func(ctx SpecContext) {
		// replaceAfter leaves a few seconds between the health probe taking
		// the worker as down (about 7 s) and the re-placement.
		withFencing(4*time.Second, time.Second, 14*time.Second)
		e := newEnv(ctx, "replace", map[string][][]string{"w1": {{"4", "4"}}, "w2": {{"4", "4"}}})
		j := e.job("moved", 2, "2", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		var first string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.Status.Placement.Cluster
		}).Should(Succeed())
		second := map[string]string{"w1": "w2", "w2": "w1"}[first]

		By("pausing " + first + "'s kube-apiserver: the hub cannot reach it")
		resume, err := worker(first).PauseAPIServer()
		Expect(err).NotTo(HaveOccurred())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				Expect(resume()).To(Succeed())
			}
		})
		paused := time.Now()
		By("the Workload says why it waits, then is placed on " + second + " after replaceAfter")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, j).Status.Conditions, "WorkerUnreachable")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("places the workload elsewhere at"))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		var replacedAfter time.Duration
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement.Cluster).To(Equal(second))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
			replacedAfter = time.Since(paused)
			var results []strata.PlacementResult
			for _, a := range wl.Status.Placement.Attempts {
				results = append(results, a.Result)
			}
			g.Expect(results).To(ContainElement(strata.PlacementUnreachable))
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("placed again %s after %s stopped answering (replaceAfter 14s from the last renewal)\n", replacedAfter.Round(100*time.Millisecond), first)
		Expect(replacedAfter).To(BeNumerically(">=", 12*time.Second), "not before replaceAfter (less a renewal interval)")

		By("resuming " + first + ": its stale copy is removed before the hub renews its Lease there")
		Expect(resume()).To(Succeed())
		resumed = true
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, j)).To(Equal([]string{second}))
			lease := fenceLease(g, ctx, first)
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", paused), "renewed again")
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
		var cp batchv1.Job
		Expect(worker(second).Client.Get(ctx, client.ObjectKeyFromObject(j), &cp)).To(Succeed())
		Expect(cp.Labels[strata.DispatchGenerationLabel]).To(Equal("2"))
	})
})
