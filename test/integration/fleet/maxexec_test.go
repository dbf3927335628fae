package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// Kueue's maximum execution time through the hub: the copy carries what
// is left of it, its worker deactivates the copy once it is used up, and
// the hub deactivates the Job rather than run it again elsewhere.
var _ = Describe("A maximum execution time through the hub", func() {
	It("deactivates the Job at the hub once its copy ran for the time, and gives it the whole time again once active", func(ctx SpecContext) {
		const limit = 600
		e := newEnv(ctx, "maxexec", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		job := e.job("time-boxed", 1, "1", nil)
		job.Labels[strata.KueueMaxExecTimeSecondsLabel] = "600"
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var on string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.MaximumExecutionTimeSeconds).To(HaveValue(BeEquivalentTo(limit)))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			on = wl.Status.Placement.Cluster
			cp, cwl := copyOn(g, ctx, worker(on), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.MaxExecTimeSecondsLabel, "600"))
			g.Expect(cp.Labels).NotTo(HaveKey(strata.KueueMaxExecTimeSecondsLabel))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Spec.MaximumExecutionTimeSeconds).To(HaveValue(BeEquivalentTo(limit)))
		}).Should(Succeed())

		By("its time passing on that worker")
		// Only this copy's: its admission dated before the worker's clock
		// by more than the limit (stepping the worker's clock would reach
		// what earlier specs left admitted there).
		Eventually(func(g Gomega) {
			_, cwl := copyOn(g, ctx, worker(on), job)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			c.LastTransitionTime = metav1.NewTime(podsReadyClocks[on].Now().Add(-(limit*time.Second + time.Minute)))
			g.Expect(worker(on).Client.Status().Update(ctx, cwl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			g.Expect(wl.Annotations).To(HaveKeyWithValue(strata.DeactivatedByAnnotation, ContainSubstring(strata.MaximumExecutionTimeExceeded)))
			g.Expect(wl.Status.Placement.Cluster).To(BeEmpty(), "not placed again elsewhere")
			attempts := wl.Status.Placement.Attempts
			g.Expect(attempts).NotTo(BeEmpty())
			g.Expect(attempts[len(attempts)-1].Reason).To(Equal(strata.MaximumExecutionTimeExceeded))
			g.Expect(attempts[len(attempts)-1].Cluster).To(Equal(on))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Deactivated"))
			g.Expect(c.Message).To(ContainSubstring(strata.MaximumExecutionTimeExceeded))
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(BeNil(), "forgotten: the whole time again once active")
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty(), "never run twice")
		}, "2s").Should(Succeed())

		By("activated again, it is dispatched with the whole time")
		setActive(ctx, job, true)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			cp, _ := copyOn(g, ctx, worker(wl.Status.Placement.Cluster), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.MaxExecTimeSecondsLabel, "600"))
		}).Should(Succeed())
	})
	It("deactivates the Job at the hub when the worker does not, its maximum execution time and a grace past", func(ctx SpecContext) {
		const limit = 600
		e := newEnv(ctx, "maxexechub", map[string][][]string{"w1": {{"4"}}})
		job := e.job("time-boxed", 1, "1", nil)
		job.Labels[strata.MaxExecTimeSecondsLabel] = "600"
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			_, cwl := copyOn(g, ctx, worker("w1"), job)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		By("the copy's limit removed on the worker (a tenant's edit), and the hub's count of its time passing")
		Eventually(func(g Gomega) {
			_, cwl := copyOn(g, ctx, worker("w1"), job)
			g.Expect(cwl).NotTo(BeNil())
			cwl.Spec.MaximumExecutionTimeSeconds = nil
			g.Expect(worker("w1").Client.Update(ctx, cwl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			c.LastTransitionTime = metav1.NewTime(hubClock.Now().Add(-(limit*time.Second + 2*time.Minute)))
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			attempts := wl.Status.Placement.Attempts
			g.Expect(attempts).NotTo(BeEmpty())
			g.Expect(attempts[len(attempts)-1].Reason).To(Equal(strata.MaximumExecutionTimeExceeded))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Deactivated"))
			g.Expect(c.Message).To(ContainSubstring(strata.MaximumExecutionTimeExceeded))
			g.Expect(copies(g, ctx, job)).To(BeEmpty(), "its copy taken back")
		}).Should(Succeed())
	})
	It("counts at the hub the time of a copy its worker preempted and keeps queued", func(ctx SpecContext) {
		e := newEnv(ctx, "maxexecpre", map[string][][]string{"w1": {{"4"}}})
		const low, high = "maxexecpre-low", "maxexecpre-high"
		priorityClasses(ctx, map[string]int32{low: 10, high: 1000})
		e.preemptWithin(ctx, worker("w1"))
		job := e.job("time-boxed", 1, "4", nil)
		job.Labels[strata.MaxExecTimeSecondsLabel] = "600"
		job.Labels[strata.PriorityClassLabel] = low
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		By("its admission at the hub 100 s old, the worker preempts the copy for a Job of its own and keeps it queued")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			c.LastTransitionTime = metav1.NewTime(hubClock.Now().Add(-100 * time.Second))
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		local := e.job("local", 1, "4", nil)
		local.Labels[strata.PriorityClassLabel] = high
		Expect(worker("w1").Client.Create(ctx, local)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeFalse())
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(HaveValue(BeNumerically(">=", 100)),
				"the preempted admission's time counts, so that a copy sent later carries only what is left")
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(HaveValue(BeNumerically("<", 200)))
		}).Should(Succeed())
		Expect(worker("w1").Client.Delete(ctx, local, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
	It("deactivates at the hub, sending no copy, a Job whose earlier copies used up its maximum execution time", func(ctx SpecContext) {
		e := newEnv(ctx, "maxexecused", map[string][][]string{"w1": {{"4"}}})
		hold := func(p strata.StopPolicy) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var cq strata.ClusterQueue
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
				cq.Spec.StopPolicy = ptr.To(p)
				g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
			}).Should(Succeed())
		}
		By("its hub queue held while the Workload's earlier copies' time is what its limit allows")
		hold(strata.StopHold)
		job := e.job("time-boxed", 1, "1", nil)
		job.Labels[strata.MaxExecTimeSecondsLabel] = "600"
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.QueueStopped))
			wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](600)
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		hold(strata.StopNone)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(BeEmpty())
			attempts := wl.Status.Placement.Attempts
			g.Expect(attempts).NotTo(BeEmpty())
			g.Expect(attempts[len(attempts)-1].Reason).To(Equal(strata.MaximumExecutionTimeExceeded))
			g.Expect(attempts[len(attempts)-1].Message).To(ContainSubstring("sends no copy"))
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).To(BeNil(), "the whole time again once active")
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty(), "no copy was sent")
		}, "2s").Should(Succeed())
	})
})
