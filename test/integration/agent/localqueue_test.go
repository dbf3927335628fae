package agent

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// markFinished marks the Job's Workload Finished, as the Job controller
// would once the Job succeeded.
func markFinished(ctx SpecContext, job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		wl := workloadOf(g, ctx, job)
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "the Job succeeded"})
		g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
	}, timeout).Should(Succeed())
}

// expectLocalQueueStatus waits for a LocalQueue's counts and its Active
// condition's status and reason.
func expectLocalQueueStatus(ctx SpecContext, ns, name string, pending, admitted int32, active metav1.ConditionStatus, reason string) *strata.LocalQueue {
	GinkgoHelper()
	var lq strata.LocalQueue
	Eventually(func(g Gomega) {
		g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &lq)).To(Succeed())
		g.Expect(lq.Status.PendingWorkloads).To(Equal(pending), "pending")
		g.Expect(lq.Status.AdmittedWorkloads).To(Equal(admitted), "admitted")
		c := meta.FindStatusCondition(lq.Status.Conditions, strata.LocalQueueActive)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(active))
		g.Expect(c.Reason).To(Equal(reason))
	}, timeout).Should(Succeed())
	return &lq
}

func expectInvalid(ctx SpecContext, job *batchv1.Job, reason, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := invalidCondition(g, ctx, job)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Message).To(ContainSubstring(message))
	}, timeout).Should(Succeed())
}

var _ = Describe("LocalQueue", Ordered, Label("agent", "localqueue"), func() {
	var ns string
	rackRequired := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("lq-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-lq").NodeLabel("pool", "lq").TopologyName("lq-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("lq-cluster").Flavor("tas-lq").Obj())).To(Succeed())
		for _, n := range []string{"lq1", "lq2"} {
			createPoolNode(ctx, "lq", n, "b1", "r1", "8")
		}
		ns = createNamespace(ctx, nil)
	})

	It("admits a Job through the LocalQueue its label names, into the LocalQueue's ClusterQueue", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("team-a", ns, "lq-cluster"))).To(Succeed())
		job := newJob(ns, "team-a", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.QueueName).To(Equal("team-a"))
			g.Expect(wl.Status.Admission.ClusterQueue).To(Equal("lq-cluster"))
		}, timeout).Should(Succeed())
		expectLocalQueueStatus(ctx, ns, "team-a", 0, 1, metav1.ConditionTrue, strata.LocalQueueReady)
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "lq-cluster"}, &cq)).To(Succeed())
			g.Expect(cq.Status.AdmittedWorkloads).To(Equal(int32(1)))
		}, timeout).Should(Succeed())
	})

	It("holds a Job whose LocalQueue does not exist, and admits it once the LocalQueue is created", func(ctx SpecContext) {
		job := newJob(ns, "team-b", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectInvalid(ctx, job, jobs.ReasonLocalQueueNotFound, fmt.Sprintf(`LocalQueue "team-b" does not exist in namespace %q`, ns))
		expectNotAdmitted(ctx, job, "its LocalQueue does not exist")

		By("a LocalQueue of that name in another namespace does not count")
		other := createNamespace(ctx, nil)
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("team-b", other, "lq-cluster"))).To(Succeed())
		expectNotAdmitted(ctx, job, "the LocalQueue is in another namespace")

		By("the LocalQueue is created in the Job's namespace")
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("team-b", ns, "lq-cluster"))).To(Succeed())
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}, timeout).Should(Succeed())
	})

	It("says on the LocalQueue that its ClusterQueue is missing, counts its waiting Jobs, and admits them once it exists", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("team-c", ns, "lq-later"))).To(Succeed())
		first := newJob(ns, "team-c", 2, rackRequired)
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		second := newJob(ns, "team-c", 2, rackRequired)
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectInvalid(ctx, first, jobs.ReasonQueueNotFound, fmt.Sprintf(`ClusterQueue "lq-later" of LocalQueue "%s/team-c" does not exist`, ns))
		lq := expectLocalQueueStatus(ctx, ns, "team-c", 2, 0, metav1.ConditionFalse, strata.LocalQueueClusterQueueMissing)
		Expect(meta.FindStatusCondition(lq.Status.Conditions, strata.LocalQueueActive).Message).To(Equal(`ClusterQueue "lq-later" does not exist; the queue's workloads wait until it is created`))
		expectNotAdmitted(ctx, second, "its LocalQueue's ClusterQueue does not exist")

		By("the ClusterQueue is created")
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("lq-later").Flavor("tas-lq").Obj())).To(Succeed())
		expectAdmitted(ctx, first)
		expectAdmitted(ctx, second)
		expectLocalQueueStatus(ctx, ns, "team-c", 0, 2, metav1.ConditionTrue, strata.LocalQueueReady)

		By("a Job of the queue finishes: it no longer counts")
		markFinished(ctx, first)
		expectLocalQueueStatus(ctx, ns, "team-c", 0, 1, metav1.ConditionTrue, strata.LocalQueueReady)
	})
})
