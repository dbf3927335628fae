package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's stopPolicy on a ClusterQueue and a LocalQueue: Hold admits
// nothing more, HoldAndDrain also evicts what is admitted, None admits
// again.
var _ = Describe("A stopped queue", Ordered, Label("agent", "localqueue"), func() {
	var ns string
	rackRequired := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("stop-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-stop").NodeLabel("pool", "stop").TopologyName("stop-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("stop-q").Flavor("tas-stop").Obj())).To(Succeed())
		createPoolNode(ctx, "stop", "stop-1", "b1", "r1", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "stop-q")
	})

	setClusterQueue := func(ctx SpecContext, p strata.StopPolicy) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "stop-q"}, &cq)).To(Succeed())
			cq.Spec.StopPolicy = ptr.To(p)
			g.Expect(worker.Client.Update(ctx, &cq)).To(Succeed())
		}, timeout).Should(Succeed())
	}
	setLocalQueue := func(ctx SpecContext, p strata.StopPolicy) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var lq strata.LocalQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stop-q"}, &lq)).To(Succeed())
			lq.Spec.StopPolicy = ptr.To(p)
			g.Expect(worker.Client.Update(ctx, &lq)).To(Succeed())
		}, timeout).Should(Succeed())
	}
	expectDrained := func(ctx SpecContext, job *batchv1.Job, reason string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Status.Conditions).To(ContainElement(And(
				HaveField("Type", strata.WorkloadEvicted), HaveField("Status", metav1.ConditionTrue), HaveField("Reason", reason))))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue(), "the Job is stopped")
		}, timeout).Should(Succeed())
	}
	expectRunning := func(ctx SpecContext, job *batchv1.Job) {
		GinkgoHelper()
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "the Job runs")
		}, timeout).Should(Succeed())
	}

	It("holds a ClusterQueue's new workloads, keeps its admitted ones, drains them on HoldAndDrain, and admits all again on None", func(ctx SpecContext) {
		running := newJob(ns, "stop-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, running)).To(Succeed())
		expectRunning(ctx, running)

		By("Hold: nothing more is admitted, though it fits")
		setClusterQueue(ctx, strata.StopHold)
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "stop-q"}, &cq)).To(Succeed())
			c := meta.FindStatusCondition(cq.Status.Conditions, "Active")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.QueueStopped))
		}, timeout).Should(Succeed())
		expectLocalQueueStatus(ctx, ns, "stop-q", 0, 1, metav1.ConditionFalse, strata.QueueStopped)
		waiting := newJob(ns, "stop-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, waiting)).To(Succeed())
		expectWaiting(ctx, waiting, scheduler.ReasonStopped, "ClusterQueue stop-q is stopped (stopPolicy Hold)")
		expectNotAdmitted(ctx, waiting, "a held queue admits nothing")
		expectAdmitted(ctx, running)

		By("HoldAndDrain: the admitted workload is evicted and waits")
		setClusterQueue(ctx, strata.StopHoldAndDrain)
		expectDrained(ctx, running, strata.EvictedByClusterQueueStopped)
		expectWaiting(ctx, running, scheduler.ReasonStopped, "ClusterQueue stop-q is stopped (stopPolicy HoldAndDrain)")
		expectRequeued(ctx, running, metav1.ConditionFalse, strata.EvictedByClusterQueueStopped)

		By("None: both are admitted again")
		setClusterQueue(ctx, strata.StopNone)
		expectRunning(ctx, running)
		expectRequeued(ctx, running, metav1.ConditionTrue, strata.RequeuedClusterQueueRestarted)
		expectRunning(ctx, waiting)
		expectLocalQueueStatus(ctx, ns, "stop-q", 0, 2, metav1.ConditionTrue, strata.LocalQueueReady)
		for _, j := range []*batchv1.Job{running, waiting} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("drains a LocalQueue stopped with HoldAndDrain, and admits its workloads again on None", func(ctx SpecContext) {
		job := newJob(ns, "stop-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectRunning(ctx, job)

		setLocalQueue(ctx, strata.StopHoldAndDrain)
		expectDrained(ctx, job, strata.EvictedByLocalQueueStopped)
		expectWaiting(ctx, job, scheduler.ReasonStopped, "LocalQueue stop-q is stopped (stopPolicy HoldAndDrain)")
		expectLocalQueueStatus(ctx, ns, "stop-q", 1, 0, metav1.ConditionFalse, strata.QueueStopped)

		expectRequeued(ctx, job, metav1.ConditionFalse, strata.EvictedByLocalQueueStopped)

		setLocalQueue(ctx, strata.StopNone)
		expectRunning(ctx, job)
		expectRequeued(ctx, job, metav1.ConditionTrue, strata.RequeuedLocalQueueRestarted)
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})

// The summaries carry what the hub counts on beyond capacity: the queues
// with a quota on the flavor, what their preemption frees, and the
// priority classes' values. A change to them is published at once, not
// at the next capacity change or heartbeat (30 s here).
var _ = Describe("Capacity summaries", Ordered, Label("agent", "summary"), func() {
	summaryOf := func(g Gomega, ctx SpecContext) strata.CapacitySummaryStatus {
		var cs strata.CapacitySummary
		g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "tas-specs"}, &cs)).To(Succeed())
		return cs.Status
	}

	It("follow a new ClusterQueue and a new priority class within seconds", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("specs-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-specs").NodeLabel("pool", "specs").TopologyName("specs-topology").Obj())).To(Succeed())
		createPoolNode(ctx, "specs", "specs-1", "b1", "r1", "8")
		Eventually(func(g Gomega) {
			g.Expect(summaryOf(g, ctx).Nodes).To(Equal(int32(1)))
		}, timeout).Should(Succeed())

		By("a ClusterQueue that preempts, with a quota on the flavor")
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("specs-q").Flavor("tas-specs", "cpu", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			st := summaryOf(g, ctx)
			g.Expect(st.Queues).To(ContainElement(HaveField("Name", "specs-q")))
			g.Expect(st.PriorityClasses).NotTo(BeNil(), "the classes are listed once a queue may preempt")
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())

		By("a new WorkloadPriorityClass")
		Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass("specs-late", 77))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(summaryOf(g, ctx).PriorityClasses).To(ContainElement(strata.SummaryPriorityClass{
				Source: strata.WorkloadPriorityClassSource, Name: "specs-late", Value: 77}))
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
