package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// admittedCondition returns the Job's Workload's Admitted condition, and
// whether the Workload is admitted.
func admittedCondition(g Gomega, ctx SpecContext, job *batchv1.Job) (*metav1.Condition, bool) {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
	return meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted), wl.Status.Admission != nil
}

func expectWaiting(ctx SpecContext, job *batchv1.Job, reason, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c, admitted := admittedCondition(g, ctx, job)
		g.Expect(admitted).To(BeFalse())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Message).To(ContainSubstring(message))
	}, timeout).Should(Succeed())
}

// expectRequeued waits until the Job's Workload has Kueue's Requeued
// condition with status and reason.
func expectRequeued(ctx SpecContext, job *batchv1.Job, status metav1.ConditionStatus, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		wl := workloadOf(g, ctx, job)
		g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadRequeued),
			HaveField("Status", status), HaveField("Reason", reason))))
	}, timeout).Should(Succeed())
}

// expectNotAdmitted checks that the Job's Workload stays unadmitted for a
// while.
func expectNotAdmitted(ctx SpecContext, job *batchv1.Job, why string) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		_, admitted := admittedCondition(g, ctx, job)
		g.Expect(admitted).To(BeFalse(), why)
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

func expectAdmitted(ctx SpecContext, job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		_, admitted := admittedCondition(g, ctx, job)
		g.Expect(admitted).To(BeTrue())
	}, timeout).Should(Succeed())
}

var _ = Describe("Queueing", Ordered, Label("agent", "queueing"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("fifo-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-fifo").NodeLabel("pool", "fifo").TopologyName("fifo-topology").Obj())).To(Succeed())
		for _, n := range []string{"q1", "q2"} {
			createPoolNode(ctx, "fifo", n, "b1", "r1", "4")
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "strict-q")
		createLocalQueue(ctx, ns, "besteffort-q")
	})

	It("under StrictFIFO, a head that cannot be admitted blocks the queue, as Kueue's does, whether quota may free up or not", func(ctx SpecContext) {
		cq := testutil.MakeClusterQueue("strict-q").Flavor("tas-fifo", "cpu", "4").Obj()
		cq.Spec.QueueingStrategy = strata.StrictFIFO
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		rackRequired := map[string]string{"strata.dev/podset-required-topology": rack}
		behind := "waiting in StrictFIFO ClusterQueue strict-q behind workloads that do not fit yet"

		By("a Job asking for a level the flavor's Topology does not have holds up the Job behind it")
		unknownLevel := newJob(ns, "strict-q", 1, map[string]string{"strata.dev/podset-required-topology": "example.com/zone"})
		Expect(worker.Client.Create(ctx, unknownLevel)).To(Succeed())
		expectWaiting(ctx, unknownLevel, scheduler.ReasonInadmissible, `"example.com/zone" is not a level of Topology "fifo-topology"`)
		first := newJob(ns, "strict-q", 3, rackRequired)
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		expectWaiting(ctx, first, scheduler.ReasonPending, behind)
		expectNotAdmitted(ctx, first, "StrictFIFO: it fits the quota, but the head cannot be admitted")
		Expect(worker.Client.Delete(ctx, unknownLevel, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		expectAdmitted(ctx, first)

		By("so does a Job larger than the whole quota")
		overQuota := newJob(ns, "strict-q", 6, rackRequired)
		Expect(worker.Client.Create(ctx, overQuota)).To(Succeed())
		expectWaiting(ctx, overQuota, scheduler.ReasonInadmissible, "more than the whole quota of 4")
		small := newJob(ns, "strict-q", 1, rackRequired)
		Expect(worker.Client.Create(ctx, small)).To(Succeed())
		expectWaiting(ctx, small, scheduler.ReasonPending, behind)
		expectNotAdmitted(ctx, small, "StrictFIFO: it fits what is left of the quota, but the head cannot be admitted")
		Expect(worker.Client.Delete(ctx, overQuota, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		expectAdmitted(ctx, small)

		By("a Job that waits for quota blocks a smaller one behind it")
		second := newJob(ns, "strict-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectWaiting(ctx, second, scheduler.ReasonPending, "quota: cpu needs 2, more than is left of the quota of 4")
		smallest := newJob(ns, "strict-q", 1, rackRequired)
		Expect(worker.Client.Create(ctx, smallest)).To(Succeed())
		expectWaiting(ctx, smallest, scheduler.ReasonPending, behind)
		expectNotAdmitted(ctx, smallest, "StrictFIFO: it fits the quota, but the head waits")

		By("the first Job is deleted: the head and then the smallest Job are admitted")
		Expect(worker.Client.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		expectAdmitted(ctx, second)
		expectAdmitted(ctx, smallest)
		// The specs below count on what this one leaves admitted: 3 pods.
		Expect(worker.Client.Delete(ctx, small, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("under BestEffortFIFO, a smaller Job passes one that waits", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("besteffort-q").Flavor("tas-fifo", "cpu", "8").Obj())).To(Succeed())
		// strict-q's second and smallest Jobs hold 3 CPUs of rack r1's 8.
		big := newJob(ns, "besteffort-q", 6, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, big)).To(Succeed())
		expectWaiting(ctx, big, scheduler.ReasonPending, "waiting for capacity")
		small := newJob(ns, "besteffort-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, small)).To(Succeed())
		expectAdmitted(ctx, small)
	})
})

var _ = Describe("Restart with a topology whose lowest level is the rack", Ordered, Label("agent", "queueing"), func() {
	It("accounts admitted workloads on their racks again: nothing admitted twice", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("racks-topology", block, rack).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-racks").NodeLabel("pool", "racks").TopologyName("racks-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("racks-q").Flavor("tas-racks").Obj())).To(Succeed())
		createPoolNode(ctx, "racks", "k1", "b1", "r1", "4")
		createPoolNode(ctx, "racks", "k2", "b1", "r1", "4")
		createPoolNode(ctx, "racks", "k3", "b1", "r2", "4")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "racks-q")

		full := newJob(ns, "racks-q", 8, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, full)).To(Succeed())
		expectAdmitted(ctx, full)

		stopAgent()
		stopAgent = startAgent()

		again := newJob(ns, "racks-q", 5, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, again)).To(Succeed())
		expectWaiting(ctx, again, scheduler.ReasonPending, "waiting for capacity")
		expectNotAdmitted(ctx, again, "rack r1 is full with the first Job, r2 has 4 CPUs")
	})
})
