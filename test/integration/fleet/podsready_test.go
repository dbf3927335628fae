package fleet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// timeOut makes the waitForPodsReady timeout of job's copy on worker w
// pass: its PodsReady condition is dated 31 minutes before the agent's
// clock (podsReadyClocks). Only that copy: stepping the worker's clock
// would time out every Workload earlier specs left admitted there, a
// storm of evictions the hub then works through.
func timeOut(ctx context.Context, w string, job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		_, cwl := copyOn(g, ctx, worker(w), job)
		g.Expect(cwl).NotTo(BeNil())
		g.Expect(cwl.Status.Admission).NotTo(BeNil())
		c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadPodsReady)
		g.Expect(c).NotTo(BeNil())
		c.LastTransitionTime = metav1.NewTime(podsReadyClocks[w].Now().Add(-31 * time.Minute))
		g.Expect(worker(w).Client.Status().Update(ctx, cwl)).To(Succeed())
	}).Should(Succeed())
}

// A worker's waitForPodsReady evicts a copy whose pods did not start in
// time there: the hub takes it back and places it on another worker, and
// the Job runs on one worker at a time.
var _ = Describe("Pods not ready in time on a worker", func() {
	It("sends the copy to another worker once the first evicts it", func(ctx SpecContext) {
		e := newEnv(ctx, "ready", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		job := e.job("slow-start", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var on string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			on = wl.Status.Placement.Cluster
			g.Expect(copies(g, ctx, job)).To(Equal([]string{on}))
		}).Should(Succeed())
		other := map[string]string{"w1": "w2", "w2": "w1"}[on]
		Expect(other).NotTo(BeEmpty())

		By("the timeout passing on that worker, whose pods never become ready here")
		timeOut(ctx, on, job)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(other))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{other}), "one copy, on the other worker")
			refused := false
			for _, a := range wl.Status.Placement.Attempts {
				if a.Cluster == on && a.Reason == strata.EvictedByPodsReadyTimeout {
					refused = true
				}
			}
			g.Expect(refused).To(BeTrue(), "the first worker's eviction is recorded: %+v", wl.Status.Placement.Attempts)
		}).Should(Succeed())
		c := meta.FindStatusCondition(hubWorkload(Default, ctx, job).Status.Conditions, strata.WorkloadAdmitted)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(BeEquivalentTo("True"))
	})

	It("counts the evictions of the Job's copies across the fleet, and deactivates it at the hub past a worker's backoffLimitCount", func(ctx SpecContext) {
		e := newEnv(ctx, "readylimit", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		job := e.job("never-ready", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var first string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.Status.Placement.Cluster
		}).Should(Succeed())
		second := map[string]string{"w1": "w2", "w2": "w1"}[first]

		By("the first copy's timeout: the hub counts it, waits out the worker's backoff, and sends the count with the next copy")
		timeOut(ctx, first, job)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.RequeueState).NotTo(BeNil())
			g.Expect(wl.Status.RequeueState.Count).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(second))
			cp, cwl := copyOn(g, ctx, worker(second), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.RequeueCountAnnotation, "1"))
			g.Expect(cwl).NotTo(BeNil())
			// Kueue's: the backoff over, requeueAt goes and the count stays.
			g.Expect(wl.Status.RequeueState.RequeueAt).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.RequeuedBackoffFinished))
		}).Should(Succeed())

		By("the second copy's timeout passes the limit of 1: the worker deactivates its copy, and the hub the Job")
		timeOut(ctx, second, job)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			// Written with the deactivation: a hub restarted before the
			// record still records the limit, not a plain deactivation.
			g.Expect(wl.Annotations).To(HaveKeyWithValue(strata.DeactivatedByAnnotation, ContainSubstring(strata.RequeuingLimitExceeded)))
			g.Expect(wl.Status.Placement.Cluster).To(BeEmpty())
			attempts := wl.Status.Placement.Attempts
			g.Expect(attempts).NotTo(BeEmpty())
			g.Expect(attempts[len(attempts)-1].Reason).To(Equal(strata.RequeuingLimitExceeded))
			g.Expect(attempts[len(attempts)-1].Cluster).To(Equal(second))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Deactivated"))
			g.Expect(c.Message).To(ContainSubstring(strata.RequeuingLimitExceeded))
			g.Expect(wl.Status.RequeueState).To(BeNil(), "counted anew once active again")
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())

		By("activated again, it is dispatched with a count of its own")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			wl.Spec.Active = nil
			g.Expect(hub.Client.Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			cp, _ := copyOn(g, ctx, worker(wl.Status.Placement.Cluster), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).NotTo(HaveKey(strata.RequeueCountAnnotation))
		}).Should(Succeed())
	})

	It("holds a Job through the backoff its last copy was given, and forgets the count when its user deactivates it", func(ctx SpecContext) {
		e := newEnv(ctx, "readyhold", map[string][][]string{"w1": {{"4"}}})
		stopHub := func(p strata.StopPolicy) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var cq strata.ClusterQueue
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-readyhold"}, &cq)).To(Succeed())
				cq.Spec.StopPolicy = ptr.To(p)
				g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
			}).Should(Succeed())
		}
		admittedReason := func(g Gomega, job *batchv1.Job) *metav1.Condition {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		stopHub(strata.StopHold)
		job := e.job("held", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admittedReason(g, job).Reason).To(Equal(strata.QueueStopped))
		}).Should(Succeed())

		By("an hour of backoff left from a copy's eviction: the Job waits it out, and says so")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			at := metav1.NewTime(hubClock.Now().Add(time.Hour).Truncate(time.Second))
			wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2), RequeueAt: &at}
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		stopHub(strata.StopNone)
		Eventually(func(g Gomega) {
			c := admittedReason(g, job)
			g.Expect(c.Reason).To(Equal(strata.EvictedByPodsReadyTimeout))
			g.Expect(c.Message).To(ContainSubstring("evicted 2 time(s)"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, job).Status.Admission).To(BeNil())
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}, "2s").Should(Succeed())

		By("deactivated by its user: the count goes, as Kueue's")
		setActive(ctx, job, false)
		Eventually(func(g Gomega) {
			g.Expect(admittedReason(g, job).Reason).To(Equal("Deactivated"))
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.RequeueState).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("Deactivated"))
		}).Should(Succeed())

		By("active again, it is dispatched at once, with no count")
		setActive(ctx, job, true)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(strata.RequeuedReactivated))
			cp, _ := copyOn(g, ctx, worker("w1"), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).NotTo(HaveKey(strata.RequeueCountAnnotation))
		}).Should(Succeed())
	})
})
