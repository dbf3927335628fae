package fleet

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	hubcopies "strata.dev/strata/hub/controller/copies"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

// withHubClock restarts the hub with a clock offset from the real one for
// one spec (after withFencing, whose cleanup restarts it with the real
// clock).
func withHubClock(offset time.Duration) {
	GinkgoHelper()
	stopHub()
	hubClock = framework.SkewedClock{Offset: offset}
	stopHub = startHub()
	DeferCleanup(func() { hubClock = clock.RealClock{} })
}

// runningOn waits until job's copy runs (is admitted and unsuspended) on
// worker w, and its hub Workload says so.
func runningOn(ctx context.Context, j *batchv1.Job, w string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		wl := hubWorkload(g, ctx, j)
		g.Expect(wl.Status.Placement).NotTo(BeNil())
		g.Expect(wl.Status.Placement.Cluster).To(Equal(w))
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		cp, _ := copyOn(g, ctx, worker(w), j)
		g.Expect(cp).NotTo(BeNil())
		g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// fencedOnW1 waits until job's copy on w1 is stopped by fencing.
func fencedOnW1(ctx context.Context, j *batchv1.Job) {
	const w = "w1"
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cp, cwl := copyOn(g, ctx, worker(w), j)
		g.Expect(cwl).NotTo(BeNil())
		g.Expect(cwl.Status.Admission).To(BeNil())
		c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadEvicted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal("Fenced"))
		g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// cutW1 partitions the hub from worker w1 until the spec ends or heal is
// called.
func cutW1() (heal func()) {
	links["w1"].Cut()
	healed := false
	heal = func() {
		if !healed {
			healed = true
			links["w1"].Heal()
		}
	}
	DeferCleanup(heal)
	return heal
}

var _ = Describe("Fencing when clocks, restarts and caches do not cooperate", Serial, Label("fencing", "faults"), func() {
	DescribeTable("a hub whose clock is off by 15 minutes: never fenced while healthy; a cut-off copy stops before it is placed elsewhere",
		func(ctx SpecContext, name string, offset time.Duration) {
			withFencing(12 * time.Second)
			withHubClock(offset)
			e := newEnv(ctx, name, map[string][][]string{"w1": {{"4"}}})
			j := e.job("skewed", 1, "1", nil)
			Expect(hub.Client.Create(ctx, j)).To(Succeed())
			runningOn(ctx, j, "w1")

			By("three fenceAfter periods of a healthy hub: the copy runs on")
			Consistently(func(g Gomega) {
				cp, cwl := copyOn(g, ctx, worker("w1"), j)
				g.Expect(cwl.Status.Admission).NotTo(BeNil(), "the copy was stopped while its hub renews: %v", cwl.Status.Conditions)
				g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			}, 12*time.Second, 200*time.Millisecond).Should(Succeed())

			By("cutting the hub off w1, with room on w2: stopped on w1 before placed on w2")
			e.createNode(ctx, worker("w2"), name+"-w2-n0", "r0", "4")
			followCtx, stopFollowing := context.WithCancel(context.Background())
			DeferCleanup(stopFollowing)
			seen := followRunning(followCtx, e.ns, "w1", "w2")
			heal := cutW1()
			fencedOnW1(ctx, j)
			runningOn(ctx, j, "w2")
			heal()
			Eventually(func(g Gomega) {
				cp, _ := copyOn(g, ctx, worker("w1"), j)
				g.Expect(cp).To(BeNil(), "the stale copy on w1 is removed on return")
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			stopFollowing()
			events, overlaps := seen.result()
			GinkgoWriter.Printf("hub clock %s: %d changes watched, %d workloads unsuspended on two clusters at once\n", offset, events, len(overlaps))
			Expect(overlaps).To(BeEmpty(), "a workload ran on two clusters at once")
		},
		Entry("15 minutes ahead", "skew-ahead", 15*time.Minute),
		Entry("15 minutes behind", "skew-behind", -15*time.Minute),
	)

	It("keeps a copy stopped when its agent restarts in the middle of a partition, with the hub's clock ahead", func(ctx SpecContext) {
		// A margin of 2 s: an agent that restarted and counted the Lease's
		// silence from its own start would let the copy run 4 s more,
		// into the time it runs on w2.
		withFencing(6 * time.Second)
		withHubClock(15 * time.Minute)
		e := newEnv(ctx, "agentrestart", map[string][][]string{"w1": {{"4"}}})
		j := e.job("restarted", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		e.createNode(ctx, worker("w2"), "agentrestart-w2-n0", "r0", "4")
		followCtx, stopFollowing := context.WithCancel(context.Background())
		DeferCleanup(stopFollowing)
		seen := followRunning(followCtx, e.ns, "w1", "w2")

		By("cutting the hub off w1; the copy is fenced; w1's agent restarts")
		heal := cutW1()
		fencedOnW1(ctx, j)
		stopAgents["w1"]()
		stopAgents["w1"] = startAgent(worker("w1"))
		By("the restarted agent holds the copy while it is placed on w2")
		runningOn(ctx, j, "w2")
		Consistently(func(g Gomega) {
			_, cwl := copyOn(g, ctx, worker("w1"), j)
			if cwl != nil {
				g.Expect(cwl.Status.Admission).To(BeNil(), "the restarted agent admitted the fenced copy again")
			}
		}, 2*time.Second, 100*time.Millisecond).Should(Succeed())
		heal()
		stopFollowing()
		_, overlaps := seen.result()
		Expect(overlaps).To(BeEmpty(), "a workload ran on two clusters at once")
		var rec coordinationv1.Lease
		Expect(worker("w1").Client.Get(ctx, client.ObjectKey{Namespace: hubCfg.Dispatch.WorkerNamespace, Name: "strata-agent-fence-" + hubCfg.Origin}, &rec)).To(Succeed())
		Expect(rec.Spec.RenewTime).NotTo(BeNil(), "the agent records when it last saw the hub's Lease change")
	})

	It("removes a JobSet copy placed elsewhere before renewing its worker's Lease, though the restarted hub's JobSet cache there is not synced", Label("jobset"), func(ctx SpecContext) {
		withFencing(8 * time.Second)
		e := newEnv(ctx, "jsheal", map[string][][]string{"w1": {{"8"}}})
		js := e.jobSet("healed", 1, 1, "1", nil)
		Expect(hub.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("cutting w1 off and restarting the hub: its JobSet cache of w1 cannot sync")
		heal := cutW1()
		stopHub()
		stopHub = startHub()
		e.createNode(ctx, worker("w2"), "jsheal-w2-n0", "r0", "8")
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 4*time.Minute, 100*time.Millisecond).Should(Succeed()) // the restarted hub reconnects every worker and places again what it could not reach: slow when the suite has left hundreds of Jobs; under CI's load its first copy on w2 may time out (admissionTimeout 8 s here) and wait out one rejectionBackoff (1 m) before w2 is tried again

		By("healing: w1's JobSet copy goes before the Lease is renewed, never admitted again")
		heal()
		resumed := false
		Eventually(func(g Gomega) {
			cp, cwl := jobSetCopyOn(g, ctx, "w1", js)
			if cwl != nil && cwl.Status.Admission != nil {
				resumed = true
			}
			g.Expect(cp).To(BeNil())
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed()) // the hub retries a worker it could not reach every 30 s
		Expect(resumed).To(BeFalse(), "w1's agent resumed a JobSet copy placed elsewhere")
	})

	It("renews a worker's Lease though an orphaned copy there may not be deleted: that copy is revoked in the Lease instead, and stays stopped; a Job merely labelled as a copy is left alone", func(ctx SpecContext) {
		withFencing(time.Hour)
		e := newEnv(ctx, "stuck", map[string][][]string{"w1": {{"4"}}})
		w1 := worker("w1")
		By("a policy on w1 that refuses deleting the Jobs named kept*, in force")
		remove := denyWith(ctx, w1, "keep-kept", []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, "batch", "v1", "jobs",
			fmt.Sprintf("oldObject.metadata.namespace != '%s' || !oldObject.metadata.name.startsWith('kept')", e.ns),
			"this Job may not be deleted")
		probe := e.job("kept-probe", 1, "1", nil)
		probe.Labels = nil
		probe.Spec.Suspend = ptr.To(true)
		Expect(w1.Client.Create(ctx, probe)).To(Succeed())
		Eventually(func(g Gomega) {
			err := w1.Client.Delete(ctx, probe, client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "the policy is not in force yet: %v", err)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("a Job the hub dispatches to w1, signed, then deleted on the hub: its copy is an orphan the hub may not delete")
		kept := e.job("kept", 1, "1", nil)
		Expect(hub.Client.Create(ctx, kept)).To(Succeed())
		runningOn(ctx, kept, "w1")
		var keptKey string
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, kept)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKey(strata.CopySignatureAnnotation))
			keptKey = cp.Labels[strata.HubWorkloadUIDLabel] + "/" + cp.Labels[strata.DispatchGenerationLabel]
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(hub.Client.Delete(ctx, kept, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			err := hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: workload.JobWorkloadName(kept.Name)}, &wl)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Workload is still there: %v", err)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("a tenant's Job on w1 labelled as a copy of this hub, with no signature and no hub Workload")
		forged := e.job("forged", 1, "1", nil)
		forged.Labels[strata.OriginLabel] = hubCfg.Origin
		forged.Labels[strata.HubWorkloadUIDLabel] = "forged-uid"
		forged.Labels[strata.DispatchGenerationLabel] = "1"
		forged.Spec.Suspend = ptr.To(true)
		Expect(w1.Client.Create(ctx, forged)).To(Succeed())

		By("a new hub process sweeps w1 before its first renewal")
		stopHub()
		stopHub = startHub()
		Eventually(func(g Gomega) {
			l := fenceLease(g, ctx, "w1")
			g.Expect(l.Annotations).To(HaveKeyWithValue(strata.RevokedDispatchesAnnotation, ContainSubstring(keptKey)))
			g.Expect(l.Annotations[strata.RevokedDispatchesAnnotation]).NotTo(ContainSubstring("forged-uid"), "the hub revoked what it did not make")
			c := wcCondition(g, ctx, "w1", strata.WorkerClusterFenced)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		stopped := func(g Gomega) {
			cp, cwl := copyOn(g, ctx, w1, kept)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeTrue(), "the revoked copy runs")
			if cwl != nil {
				g.Expect(cwl.Status.Admission).To(BeNil(), "the revoked copy is admitted")
			}
		}
		Eventually(stopped, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Consistently(stopped, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		By("w1 still takes new work")
		j := e.job("after", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")

		By("the policy gone: the orphan is deleted and its revocation ends; the tenant's Job stays")
		remove(ctx)
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, kept)
			g.Expect(cp).To(BeNil())
			g.Expect(fenceLease(g, ctx, "w1").Annotations[strata.RevokedDispatchesAnnotation]).NotTo(ContainSubstring(keptKey))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, forged)
			g.Expect(cp).NotTo(BeNil(), "the hub deleted a Job it did not make")
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("stays up when a tenant on a worker sets a LeaderWorkerSet copy's replicas to 2^31-1: the copy is Invalid", Label("lws"), func(ctx SpecContext) {
		e := newEnv(ctx, "lwshuge", map[string][][]string{"w2": {{"4", "4"}}})
		l := e.leaderWorkerSet("huge", 2, 1, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: host})
		Expect(hub.Client.Create(ctx, l)).To(Succeed())
		var hubWL strata.Workload
		// Two minutes: on a loaded machine w2's agent may still be working
		// through the specs before this one, past the suite's 8s admission
		// timeout; the hub then sends the copy again after its backoff (1m).
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.SetKind.WorkloadName(l.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w2"))
		}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())

		By("a tenant of w2 sets the copy's replicas to 2147483647")
		w2 := worker("w2")
		Eventually(func(g Gomega) {
			var cp lwsapi.LeaderWorkerSet
			g.Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(l), &cp)).To(Succeed())
			cp.Spec.Replicas = ptr.To[int32](2147483647)
			g.Expect(w2.Client.Update(ctx, &cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			err := w2.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.GroupWorkloadName(l.Name, 0)}, &wl)
			if err == nil && meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid) {
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid).Message).To(ContainSubstring("spec.replicas"))
				return
			}
			// Or already refused by the hub for it.
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(&hubWL), &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Placement.Attempts).To(ContainElement(HaveField("Message", ContainSubstring("spec.replicas"))))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the hub and w2's agent still work: a new Job runs on w2")
		j := e.job("still-up", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w2")
	})

	DescribeTable("stops a copy whose Job a tenant relabelled as not the hub's before its workload runs elsewhere", func(ctx SpecContext, name string, forge bool) {
		withFencing(time.Hour)
		e := newEnv(ctx, name, map[string][][]string{"w1": {{"4"}}})
		j := e.job("relabelled", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		e.createNode(ctx, worker("w2"), name+"-w2-n0", "r0", "4")
		followCtx, stopFollowing := context.WithCancel(context.Background())
		DeferCleanup(stopFollowing)
		seen := followRunning(followCtx, e.ns, "w1", "w2")

		By("a tenant of w1 takes the hub's origin off the copy's Job (and forges its hub Workload UID)")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).NotTo(BeNil())
			delete(cp.Labels, strata.OriginLabel)
			if forge {
				cp.Labels[strata.HubWorkloadUIDLabel] = "forged"
			}
			g.Expect(worker("w1").Client.Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())

		By("the dispatch is revoked in w1's Lease, the copy stops there, and only then the workload runs on w2")
		uid := string(func() types.UID {
			var wl *strata.Workload
			Eventually(func(g Gomega) { wl = hubWorkload(g, ctx, j) }).Should(Succeed())
			return wl.UID
		}())
		Eventually(func(g Gomega) {
			g.Expect(fenceLease(g, ctx, "w1").Annotations[strata.RevokedDispatchesAnnotation]).To(ContainSubstring(uid))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			_, cwl := copyOn(g, ctx, worker("w1"), j)
			if cwl != nil {
				g.Expect(cwl.Status.Admission).To(BeNil(), "the relabelled copy was admitted again on w1")
			}
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
		stopFollowing()
		_, overlaps := seen.result()
		Expect(overlaps).To(BeEmpty(), "a workload ran on two clusters at once")
	},
		Entry("its hub Workload UID forged", "relabel", true),
		// Before: the hub read the copy live, took it for its own with the
		// informer behind, and waited for ever.
		Entry("its origin label alone removed", "unorigin", false),
	)

	It("mirrors the result of a copy that finished relabelled while the hub did not reach its worker", func(ctx SpecContext) {
		withFencing(time.Hour)
		e := newEnv(ctx, "relabeldone", map[string][][]string{"w1": {{"4"}}})
		j := e.job("relabelled-done", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		heal := cutW1()

		By("during the partition a tenant of w1 takes the hub's origin off the copy, and it completes")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).NotTo(BeNil())
			delete(cp.Labels, strata.OriginLabel)
			g.Expect(worker("w1").Client.Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())
		completeCopy(ctx, worker("w1"), j)

		By("healed: the hub's informer does not show the copy; its result reaches the hub's Job all the same")
		heal()
		// Before: the hub read the finished copy live, took the informer
		// for behind, and waited for it for ever.
		Eventually(func(g Gomega) {
			var hj batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(j), &hj)).To(Succeed())
			g.Expect(hj.Status.Conditions).To(ContainElement(And(HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))),
				"hub Workload: %+v", hubWorkload(g, ctx, j).Status.Conditions)
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, j)).To(ConsistOf("w1"), "the finished Job was sent again")
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("keeps evicted copies evicted when the hub's Lease is deleted during a partition", func(ctx SpecContext) {
		withFencing(time.Hour)
		e := newEnv(ctx, "leasegone", map[string][][]string{"w1": {{"4"}}})
		j := e.job("unleased", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		heal := cutW1()
		fencedOnW1(ctx, j)

		By("deleting the fencing Lease on w1")
		Expect(worker("w1").Client.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: hubCfg.Dispatch.WorkerNamespace, Name: strata.FencingLeasePrefix + hubCfg.Origin}})).To(Succeed())
		Consistently(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cwl.Status.Admission).To(BeNil(), "a deleted Lease released the fenced copy")
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeTrue())
		}, 6*time.Second, 200*time.Millisecond).Should(Succeed())

		By("healing: the hub writes its Lease again, and the same dispatch runs again")
		heal()
		runningOn(ctx, j, "w1")
	})

	It("sends no new copy to a worker whose fencing Lease it may not renew, and says why on the WorkerCluster", func(ctx SpecContext) {
		// w1's agent does not fence within the spec: what it does then is
		// the fencing specs' subject, not this one's.
		withFencingAfter(time.Minute, time.Hour)
		e := newEnv(ctx, "norenew", map[string][][]string{"w1": {{"4"}}, "w2": {{"2"}}})

		By("a policy on w1 that refuses writes of the hub's fencing Lease")
		w1 := worker("w1")
		remove := denyWith(ctx, w1, "no-fence-renewals", []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			"coordination.k8s.io", "v1", "leases",
			fmt.Sprintf("object.metadata.name != '%s'", strata.FencingLeasePrefix+hubCfg.Origin),
			"fencing Lease renewals are refused here")
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w1", strata.WorkerClusterFenced)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("fencing Lease renewals are refused here"))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("a Job that fits w1 best goes to w2")
		j := e.job("elsewhere", 1, "2", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w2")

		By("renewals allowed again: Fenced=True")
		remove(ctx)
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w1", strata.WorkerClusterFenced)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("places Jobs sent to a worker whose control plane just stopped elsewhere within 30 s", func(ctx SpecContext) {
		e := newEnv(ctx, "cpdown", map[string][][]string{"w1": {{"8"}}})
		jobs := make([]*batchv1.Job, 6)
		for i := range jobs {
			jobs[i] = e.job(fmt.Sprintf("sent%d", i), 1, "1", nil)
		}
		By("stopping w1's API server address (connections refused) and submitting 6 Jobs in the same second")
		Expect(links["w1"].Stop()).To(Succeed())
		started := false
		start := func(ctx context.Context) {
			if started {
				return
			}
			started = true
			Expect(links["w1"].Start()).To(Succeed())
			// The hub's informers of w1 retry with a backoff of up to
			// half a minute: the next spec must not meet a view of w1
			// from before the stop. A new hub process connects afresh.
			stopHub()
			stopHub = startHub()
			Eventually(func(g Gomega) {
				g.Expect(wcCondition(g, ctx, "w1", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) { start(ctx) })
		stopped := time.Now()
		for _, j := range jobs {
			Expect(hub.Client.Create(ctx, j)).To(Succeed())
		}
		e.createNode(ctx, worker("w2"), "cpdown-w2-n0", "r0", "8")
		for _, j := range jobs {
			runningOn(ctx, j, "w2")
		}
		took := time.Since(stopped)
		GinkgoWriter.Printf("6 Jobs sent as w1's control plane stopped: all running on w2 %s after the stop\n", took.Round(100*time.Millisecond))
		Expect(took).To(BeNumerically("<", 30*time.Second))
		tried := 0
		for _, j := range jobs {
			wl := hubWorkload(Default, ctx, j)
			for _, a := range wl.Status.Placement.Attempts {
				if a.Cluster == "w1" {
					tried++
					Expect(a.Reason).To(Equal(hubcopies.ReasonCopyNotSent), "%s: %+v", j.Name, a)
				}
			}
		}
		GinkgoWriter.Printf("%d of the 6 were dispatched to w1 first\n", tried)
		start(ctx)
	})
})
