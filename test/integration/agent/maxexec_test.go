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

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's maximum execution time (KEP-3125): a job labelled
// max-exec-time-seconds is deactivated once its Workload was admitted for
// that long, its Job stopped; active again, it has the whole time again.
// The agent's clock for it is podsReadyClock (the agent's default
// configuration: waitForPodsReady off).
var _ = Describe("A maximum execution time", Ordered, Label("agent", "maxexec"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("maxexec-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-maxexec").NodeLabel("pool", "maxexec").TopologyName("maxexec-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("maxexec-q").Flavor("tas-maxexec").Obj())).To(Succeed())
		createPoolNode(ctx, "maxexec", "maxexec-1", "b1", "r1", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "maxexec-q")
	})

	suspended := func(g Gomega, ctx SpecContext, job *batchv1.Job) bool {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		return ptr.Deref(j.Spec.Suspend, false)
	}

	It("refuses a label that is not a number of seconds", func(ctx SpecContext) {
		job := newJob(ns, "maxexec-q", 1, nil)
		job.Labels[strata.KueueMaxExecTimeSecondsLabel] = "1h"
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectInvalid(ctx, job, intake.ReasonInvalidJob, `metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "1h": must be a whole number of seconds`)
		expectNotAdmitted(ctx, job, "an invalid Job is not admitted")
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("deactivates a Workload admitted for its maximum execution time, and gives it the whole time again once active", func(ctx SpecContext) {
		const limit = 600
		job := newJob(ns, "maxexec-q", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		job.Labels[strata.KueueMaxExecTimeSecondsLabel] = "600"
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.MaximumExecutionTimeSeconds).To(HaveValue(BeEquivalentTo(limit)))
			g.Expect(suspended(g, ctx, job)).To(BeFalse(), "the Job runs")
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(workloadOf(g, ctx, job).Status.Admission).NotTo(BeNil())
		}, 2*time.Second).Should(Succeed(), "not evicted before its time")

		By("its time passing")
		podsReadyClock.SetTime(time.Now().Add(limit*time.Second + time.Minute))
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			g.Expect(wl.Status.Admission).To(BeNil())
			admitted := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(admitted).NotTo(BeNil())
			g.Expect(admitted.Reason).To(Equal(jobs.ReasonDeactivated))
			g.Expect(admitted.Message).To(ContainSubstring(strata.MaximumExecutionTimeExceeded))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadEvicted), HaveField("Status", metav1.ConditionTrue),
				HaveField("Reason", jobs.ReasonDeactivated), HaveField("Message", ContainSubstring(strata.MaximumExecutionTimeExceeded)))))
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadDeactivationTarget)).To(BeNil(), "the mark goes with the eviction")
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(BeNil(), "the time it ran is forgotten")
			g.Expect(suspended(g, ctx, job)).To(BeTrue(), "the Job is stopped")
		}, timeout).Should(Succeed())

		By("activating it again")
		// The admission's time is the API server's (real) one: the clock
		// goes back to it, so that the new admission has its whole time.
		podsReadyClock.SetTime(time.Now())
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			wl.Spec.Active = ptr.To(true)
			g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			g.Expect(suspended(g, ctx, job)).To(BeFalse(), "the Job runs again")
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeTrue()), "with the whole time again")
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 2*time.Second).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
	It("deactivates a Workload marked for its maximum execution time and evicted before its deactivation was written", func(ctx SpecContext) {
		// The mark is written first, spec.active next; here the workload
		// lost its admission in between (preempted, its node failed, the
		// spec write lost a conflict first): it is deactivated all the
		// same, never admitted again in between, and forgets its time.
		job := newJob(ns, "maxexec-q", 8, nil) // more than the pool holds: queued
		job.Labels[strata.MaxExecTimeSecondsLabel] = "600"
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).To(BeNil())
			wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](600)
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadDeactivationTarget, Status: metav1.ConditionTrue,
				Reason: strata.MaximumExecutionTimeExceeded, Message: "admitted for its maximum execution time"})
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			g.Expect(wl.Status.Admission).To(BeNil())
			admitted := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(admitted).NotTo(BeNil())
			g.Expect(admitted.Message).To(ContainSubstring(strata.MaximumExecutionTimeExceeded))
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadDeactivationTarget)).To(BeNil(), "the mark goes with the deactivation")
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(BeNil(), "the time it ran is forgotten")
			g.Expect(suspended(g, ctx, job)).To(BeTrue())
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
