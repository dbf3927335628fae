package fleet

import (
	"context"
	"fmt"
	"sync"
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
	DeferCleanup(func(ctx SpecContext) {
		stopHub()
		hubCfg.Fencing = old
		restarted := time.Now()
		stopHub = startHub()
		// The next spec must not meet an agent that fenced while the hub
		// restarted with the short times' Lease: wait until every worker's
		// Lease is renewed with the suite's.
		Eventually(func(g Gomega) {
			for _, w := range workers {
				l := fenceLease(g, ctx, w.Name)
				g.Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(int32(old.FenceAfter.Seconds()))), w.Name)
				g.Expect(l.Spec.RenewTime).NotTo(BeNil())
				g.Expect(l.Spec.RenewTime.Time).To(BeTemporally(">=", restarted.Add(-time.Second)), w.Name)
			}
		}).Should(Succeed())
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

	It("keeps every workload on one cluster when the hub is cut off from a worker whose agent runs on: fenced there, placed elsewhere after replaceAfter, stale copies removed on return", Label("partition"), func(ctx SpecContext) {
		withFencing(4*time.Second, time.Second, 14*time.Second)
		const n = 200 // the reliability issue's count
		e := newEnv(ctx, "part", map[string][][]string{"w1": {{"16", "16", "16"}}})
		jobs := make([]*batchv1.Job, n)
		for i := range jobs {
			jobs[i] = e.job(fmt.Sprintf("p%03d", i), 1, "100m", nil)
			Expect(hub.Client.Create(ctx, jobs[i])).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), j.Name)
				g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			}
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		By("w2 gets room for all of them")
		for i := range 3 {
			e.createNode(ctx, worker("w2"), fmt.Sprintf("part-w2-r0-n%d", i), "r0", "16")
		}

		By("sampling, every 100 ms, which copies may run (unsuspended) on each worker")
		var mu sync.Mutex
		overlaps, samples := 0, 0
		stop := make(chan struct{})
		sampled := make(chan struct{})
		sampling := time.Now()
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				running := map[string]int{}
				ok := true
				for _, w := range []string{"w1", "w2"} {
					var list batchv1.JobList
					if err := worker(w).Client.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
						ok = false
						break
					}
					for _, cp := range list.Items {
						if !ptr.Deref(cp.Spec.Suspend, false) {
							running[cp.Name]++
						}
					}
				}
				if !ok {
					continue
				}
				mu.Lock()
				samples++
				for _, c := range running {
					if c > 1 {
						overlaps++
					}
				}
				mu.Unlock()
			}
		}()
		DeferCleanup(func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
			<-sampled
		})

		By("cutting the hub's path to w1; w1's agent still reaches its API server")
		links["w1"].Cut()
		cut := time.Now()
		healed := false
		DeferCleanup(func() {
			if !healed {
				links["w1"].Heal()
			}
		})
		var fenced time.Duration
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(worker("w1").Client.List(ctx, &list, client.InNamespace(e.ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(n))
			for _, cp := range list.Items {
				g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeTrue(), "%s still runs on w1", cp.Name)
			}
			fenced = time.Since(cut)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		var replaced time.Duration
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"), j.Name)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), j.Name)
			}
			replaced = time.Since(cut)
		}, 90*time.Second, 200*time.Millisecond).Should(Succeed())

		By("healing: w1's stale copies go before its Lease is renewed")
		links["w1"].Heal()
		healed = true
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(worker("w1").Client.List(ctx, &list, client.InNamespace(e.ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
			g.Expect(fenceLease(g, ctx, "w1").Spec.RenewTime.Time).To(BeTemporally(">", cut.Add(replaced)))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		close(stop)
		<-sampled
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(worker("w2").Client.List(ctx, &list, client.InNamespace(e.ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(n))
			for _, j := range jobs {
				g.Expect(hubWorkload(g, ctx, j).Status.Admission).NotTo(BeNil(), "%s lost", j.Name)
			}
		}).Should(Succeed())
		mu.Lock()
		defer mu.Unlock()
		GinkgoWriter.Printf("partition of %d workloads: all stopped on w1 %s after the cut (fenceAfter 4s); all admitted on w2 %s after it (replaceAfter 14s); %d samples, %d with a workload unsuspended on both clusters\n",
			n, fenced.Round(100*time.Millisecond), replaced.Round(100*time.Millisecond), samples, overlaps)
		// Every 100 ms when the machine is free; at least one a second of
		// the whole window on a loaded one (two cores shared with the
		// suite's API servers), so that no moment of the partition went
		// unseen for long.
		Expect(samples).To(BeNumerically(">=", int(time.Since(sampling).Seconds())), "the sampler looked too rarely")
		Expect(overlaps).To(BeZero(), "a workload ran on two clusters at once")
		Expect(replaced).To(BeNumerically(">=", 12*time.Second))
	})
})
