package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's waitForPodsReady: the pods of an admission are ready in time,
// or the workload is evicted, requeued after a backoff, and deactivated
// past the limit. (blockAdmission, which looks at every admitted workload
// of the cluster, is TestScheduleBlockAdmission's: the other specs leave
// admitted workloads whose pods never become ready here.)
var _ = Describe("Waiting for pods to be ready", Ordered, Label("agent", "podsready"), func() {
	const podsTimeout = 10 * time.Minute
	var ns string

	BeforeAll(func(ctx SpecContext) {
		stopAgent()
		stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
			w := &cfg.WaitForPodsReady
			w.Timeout = &metav1.Duration{Duration: podsTimeout}
			w.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](1)
		})
		DeferCleanup(func() {
			stopAgent()
			stopAgent = startAgent()
		})
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("ready-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-ready").NodeLabel("pool", "ready").TopologyName("ready-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("ready-q").Flavor("tas-ready").Obj())).To(Succeed())
		createPoolNode(ctx, "ready", "ready-1", "b1", "r1", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "ready-q")
	})

	// podsReady is the Workload's PodsReady condition.
	podsReady := func(g Gomega, ctx SpecContext, job *batchv1.Job) *metav1.Condition {
		return meta.FindStatusCondition(workloadOf(g, ctx, job).Status.Conditions, strata.WorkloadPodsReady)
	}
	// makeReady marks the Job's pods Running and Ready, as a kubelet would.
	makeReady := func(ctx SpecContext, job *batchv1.Job) {
		GinkgoHelper()
		// The ungater patches the pods meanwhile: each update is retried
		// on the pod as it is then.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodRunning {
					continue
				}
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				g.Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())
			}
		}, timeout).Should(Succeed())
	}
	suspended := func(g Gomega, ctx SpecContext, job *batchv1.Job) bool {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		return ptr.Deref(j.Spec.Suspend, false)
	}

	var first, second *batchv1.Job

	It("says when the pods of an admission are all ready", func(ctx SpecContext) {
		first = newJob(ns, "ready-q", 2, nil)
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		expectAdmitted(ctx, first)
		Eventually(func(g Gomega) {
			c := podsReady(g, ctx, first)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.PodsReadyWaitForStart))
		}, timeout).Should(Succeed())

		createPods(ctx, first, 0, 1)
		makeReady(ctx, first)
		Eventually(func(g Gomega) {
			c := podsReady(g, ctx, first)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(strata.PodsReadyStarted))
		}, timeout).Should(Succeed())
		second = newJob(ns, "ready-q", 1, nil)
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectAdmitted(ctx, second)
	})

	It("evicts a workload whose pods are not ready within the timeout, and requeues it after the backoff", func(ctx SpecContext) {
		By("the timeout passing with none of its pods ready")
		podsReadyClock.SetTime(time.Now().Add(podsTimeout + time.Minute))
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, second)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadEvicted),
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", strata.EvictedByPodsReadyTimeout),
				HaveField("Message", ContainSubstring("0 of 1 ready")))))
			g.Expect(wl.Status.RequeueState).NotTo(BeNil())
			g.Expect(wl.Status.RequeueState.Count).To(Equal(ptr.To[int32](1)))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadRequeued),
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", strata.EvictedByPodsReadyTimeout))), "Kueue's Requeued, until the backoff is over")
			g.Expect(suspended(g, ctx, second)).To(BeTrue(), "the Job is stopped")
		}, timeout).Should(Succeed())
		expectWaiting(ctx, second, strata.EvictedByPodsReadyTimeout, "queues again at")
		expectNotAdmitted(ctx, second, "its backoff has not passed")
		Consistently(func(g Gomega) {
			g.Expect(workloadOf(g, ctx, first).Status.Admission).NotTo(BeNil(), "the first, whose pods are ready, stays")
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the backoff passing")
		var requeueAt time.Time
		Eventually(func(g Gomega) {
			requeueAt = workloadOf(g, ctx, second).Status.RequeueState.RequeueAt.Time
		}, timeout).Should(Succeed())
		Expect(requeueAt.Sub(podsReadyClock.Now())).To(BeNumerically("~", time.Minute, time.Second), "the first backoff is backoffBaseSeconds")
		podsReadyClock.SetTime(requeueAt.Add(time.Second))
		expectAdmitted(ctx, second)
		Eventually(func(g Gomega) {
			g.Expect(suspended(g, ctx, second)).To(BeFalse(), "the Job runs again")
		}, timeout).Should(Succeed())
		wl := workloadOf(Default, ctx, second)
		Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadRequeued),
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", strata.RequeuedBackoffFinished))))
		Expect(wl.Status.RequeueState).To(Equal(&strata.RequeueState{Count: ptr.To[int32](1)}), "the count stays; requeueAt is cleared (Kueue's)")
	})

	It("deactivates the workload when its pods miss the timeout more than backoffLimitCount allows", func(ctx SpecContext) {
		podsReadyClock.SetTime(podsReadyClock.Now().Add(podsTimeout + time.Minute))
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, second)
			g.Expect(wl.Spec.Active).To(Equal(ptr.To(false)))
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Status.RequeueState).To(BeNil())
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadEvicted),
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "Deactivated"),
				HaveField("Message", ContainSubstring(strata.RequeuingLimitExceeded)))))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadRequeued),
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "Deactivated"))))
			g.Expect(suspended(g, ctx, second)).To(BeTrue(), "the Job is stopped")
		}, timeout).Should(Succeed())
		Expect(workloadOf(Default, ctx, first).Status.Admission).NotTo(BeNil(), "the first, whose pods are ready, stays")
		for _, j := range []*batchv1.Job{first, second} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("does not count a ready pod an earlier Job of the same name left behind", func(ctx SpecContext) {
		job := newJob(ns, "ready-q", 1, nil)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectAdmitted(ctx, job)
		var started batchv1.Job
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &started)).To(Succeed())
			g.Expect(ptr.Deref(started.Spec.Suspend, true)).To(BeFalse())
		}, timeout).Should(Succeed())

		By("an orphaned pod of an earlier Job, running and ready, carries the same workload label")
		orphan := testutil.JobPod(&started, 0)
		orphan.Name = job.Name + "-old-0"
		orphan.OwnerReferences = nil
		orphan.Spec.SchedulingGates = nil
		Expect(worker.Client.Create(ctx, orphan)).To(Succeed())
		orphan.Status.Phase = corev1.PodRunning
		orphan.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		Expect(worker.Client.Status().Update(ctx, orphan)).To(Succeed())
		Consistently(func(g Gomega) {
			c := podsReady(g, ctx, job)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "the Job's own pod does not exist yet")
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("its own pod becoming ready")
		createPods(ctx, job, 0)
		makeReady(ctx, job)
		Eventually(func(g Gomega) {
			c := podsReady(g, ctx, job)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, timeout).Should(Succeed())
	})
})
