package fleet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// A worker's ClusterQueue with AdmissionChecks: the hub takes the worker's
// quota reservation as its dispatch's admission (as MultiKueue's manager
// does), the copy's Job starts once the worker's checks are Ready, and a
// copy a check rejects is refused there.
var _ = Describe("Admission checks on a worker", func() {
	It("takes the worker's reservation, starts the copy once its checks are Ready, and is refused there by a rejecting check", func(ctx SpecContext) {
		e := newEnv(ctx, "checks", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		const check = "fleet-budget"
		Expect(w1.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check},
			Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/budget"}})).To(Succeed())
		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: check}, &ac)).To(Succeed())
			meta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active"})
			g.Expect(w1.Client.Status().Update(ctx, &ac)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.AdmissionChecks = []string{check}
			g.Expect(w1.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		job := e.job("train", 1, "2", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		By("the copy's quota reserved on w1, waiting for its check; the hub records it admitted there, saying so")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring("its job starts once the worker's admission checks are Ready"))
			_, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.AdmissionChecks).To(ConsistOf(HaveField("State", strata.CheckStatePending)))
			// A hub's copy starts gated (its pods are released by the
			// ungater), so its Workload says whether it may run.
			cc := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(cc).NotTo(BeNil())
			g.Expect(cc.Reason).To(Equal(strata.WaitingForAdmissionChecks))
		}).Should(Succeed())

		setCheck := func(job *batchv1.Job, state strata.CheckState, message string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				_, cwl := copyOn(g, ctx, w1, job)
				g.Expect(cwl).NotTo(BeNil())
				g.Expect(cwl.Status.AdmissionChecks).To(HaveLen(1))
				cwl.Status.AdmissionChecks[0].State, cwl.Status.AdmissionChecks[0].Message = state, message
				cwl.Status.AdmissionChecks[0].LastTransitionTime = metav1.Now()
				g.Expect(w1.Client.Status().Update(ctx, cwl)).To(Succeed())
			}).Should(Succeed())
		}
		By("the check Ready: the copy's Job starts, the hub's message drops the wait")
		setCheck(job, strata.CheckStateReady, "")
		Eventually(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeFalse(), "the copy runs")
			g.Expect(meta.IsStatusConditionTrue(cwl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", cwl.Status.Conditions)
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).NotTo(ContainSubstring("admission checks"))
		}).Should(Succeed())

		By("a second Job rejected by the check: refused on w1, recorded in its attempts")
		rejected := e.job("over-budget", 1, "2", nil)
		Expect(hub.Client.Create(ctx, rejected)).To(Succeed())
		Eventually(func(g Gomega) {
			_, cwl := copyOn(g, ctx, w1, rejected)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.AdmissionChecks).To(HaveLen(1))
		}).Should(Succeed())
		setCheck(rejected, strata.CheckStateRejected, "over the team's budget")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, rejected)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			var refused []strata.PlacementAttempt
			for _, a := range wl.Status.Placement.Attempts {
				if a.Result == strata.PlacementRejected {
					refused = append(refused, a)
				}
			}
			g.Expect(refused).NotTo(BeEmpty(), "%v", wl.Status.Placement.Attempts)
			g.Expect(refused[0].Cluster).To(Equal("w1"))
			g.Expect(refused[0].Message).To(ContainSubstring("admission check fleet-budget: over the team's budget"))
		}).Should(Succeed())
		DeferCleanup(func(ctx context.Context) {
			_ = client.IgnoreNotFound(w1.Client.Delete(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check}}))
		})
	})
})

// A hub ClusterQueue with AdmissionChecks: the hub reserves a Job's quota
// in its queue and dispatches it only once every check is Ready, as a
// MultiKueue manager waits for its queue's other checks; MultiKueue's own
// check is the hub's to play.
var _ = Describe("Admission checks on the hub", func() {
	It("reserves the quota, dispatches once the checks are Ready, queues again on Retry and deactivates on Rejected", func(ctx SpecContext) {
		e := newEnv(ctx, "hubchecks", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		budget, mk := "hub-budget-"+e.name, "hub-mk-"+e.name
		Expect(hub.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: budget},
			Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/budget"}})).To(Succeed())
		// A migrated MultiKueue manager's check: never Active here, never
		// waited for.
		Expect(hub.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: mk},
			Spec: strata.AdmissionCheckSpec{ControllerName: "kueue.x-k8s.io/multikueue"}})).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			for _, n := range []string{budget, mk} {
				_ = client.IgnoreNotFound(hub.Client.Delete(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: n}}))
			}
		})
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.AdmissionChecks = []string{mk, budget}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		job := e.job("train", 1, "2", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		By("the check not Active yet: the hub queue dispatches nothing, and says which check")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.QueueAdmissionCheckNotReady), c.Message)
			g.Expect(c.Message).To(ContainSubstring("admission check " + budget + " is not Active"))
			g.Expect(c.Message).NotTo(ContainSubstring(mk))
			g.Expect(wl.Status.Admission).To(BeNil())
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: budget}, &ac)).To(Succeed())
			meta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active"})
			g.Expect(hub.Client.Status().Update(ctx, &ac)).To(Succeed())
		}).Should(Succeed())
		By("Active: the quota is reserved in the hub queue, the check Pending, no copy sent")
		reserved := func(g Gomega, job *batchv1.Job) *strata.Workload {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.ClusterQueue).To(Equal("cq-" + e.name))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadQuotaReserved)).To(BeTrue(), "%v", wl.Status.Conditions)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Reason).To(Equal(strata.WaitingForAdmissionChecks), c.Message)
			g.Expect(wl.Status.AdmissionChecks).To(ConsistOf(And(HaveField("Name", budget), HaveField("State", strata.CheckStatePending))))
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "not dispatched")
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp).To(BeNil())
			return wl
		}
		Eventually(func(g Gomega) { reserved(g, job) }).Should(Succeed())

		setCheck := func(job *batchv1.Job, state strata.CheckState, message string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				wl := reserved(g, job)
				wl.Status.AdmissionChecks[0].State, wl.Status.AdmissionChecks[0].Message = state, message
				wl.Status.AdmissionChecks[0].LastTransitionTime = metav1.Now()
				g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
			}).Should(Succeed())
		}
		By("Retry: the reservation is taken back (evicted, queued again), and the Workload reserved again, the check Pending")
		setCheck(job, strata.CheckStateRetry, "try later")
		Eventually(func(g Gomega) {
			wl := reserved(g, job)
			// Evicted, then False again at the new reservation, as Kueue.
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.WorkloadQuotaReserved))
			r := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Message).To(ContainSubstring("admission check " + budget + ": try later"))
		}).Should(Succeed())

		By("Ready, with podSetUpdates: dispatched to w1, where the copy runs with them; the hub's reservation gives way to w1's admission")
		Eventually(func(g Gomega) {
			wl := reserved(g, job)
			wl.Status.AdmissionChecks[0].State, wl.Status.AdmissionChecks[0].Message = strata.CheckStateReady, ""
			wl.Status.AdmissionChecks[0].LastTransitionTime = metav1.Now()
			wl.Status.AdmissionChecks[0].PodSetUpdates = []strata.PodSetUpdate{{Name: "main",
				Labels: map[string]string{"budget": "approved"}, Annotations: map[string]string{"budget/ticket": "42"}}}
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeFalse(), "the copy runs")
			g.Expect(cp.Spec.Template.Labels).To(HaveKeyWithValue("budget", "approved"))
			g.Expect(cp.Spec.Template.Annotations).To(HaveKeyWithValue("budget/ticket", "42"))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.AdmissionChecks).To(BeEmpty(), "the worker's queue has no checks")
			wl := hubWorkload(g, ctx, job)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved)).To(BeNil())
			g.Expect(wl.Status.AdmissionChecks).To(ConsistOf(HaveField("State", strata.CheckStateReady)))
		}).Should(Succeed())
		By("the hub's metrics: the reservation taken back on Retry evicted it; the one handed to the dispatch is not counted twice, its checks' wait observed")
		Eventually(func(g Gomega) {
			m, q := metrics.HubLifecycle, "cq-"+e.name
			g.Expect(promtest.ToFloat64(m.QuotaReserved.WithLabelValues(q))).To(Equal(2.0), "reserved, taken back on Retry, reserved again")
			g.Expect(promtest.ToFloat64(m.Admitted.WithLabelValues(q))).To(Equal(1.0))
			g.Expect(promtest.ToFloat64(m.Evicted.WithLabelValues(q, strata.EvictedByAdmissionCheck))).To(Equal(1.0))
			var h dto.Metric
			g.Expect(m.ChecksWait.WithLabelValues(q).(prometheus.Metric).Write(&h)).To(Succeed())
			g.Expect(h.GetHistogram().GetSampleCount()).To(Equal(uint64(1)))
		}).Should(Succeed())

		By("Retry once dispatched: the copy is taken back, the Workload reserved and checked again; Ready again: dispatched again")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.AdmissionChecks).To(HaveLen(1))
			wl.Status.AdmissionChecks[0].State, wl.Status.AdmissionChecks[0].Message = strata.CheckStateRetry, "budget revised"
			wl.Status.AdmissionChecks[0].LastTransitionTime = metav1.Now()
			g.Expect(hub.Client.Status().Update(ctx, wl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := reserved(g, job)
			g.Expect(wl.Status.Placement.Attempts).To(ContainElement(And(HaveField("Cluster", "w1"), HaveField("Result", strata.PlacementEvicted),
				HaveField("Message", ContainSubstring("admission check "+budget+": budget revised")))))
		}).Should(Succeed())
		setCheck(job, strata.CheckStateReady, "")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, false)).To(BeFalse(), "the copy runs")
		}).Should(Succeed())

		By("a second Job rejected by the check: deactivated at the hub, never sent")
		rejected := e.job("over-budget", 1, "2", nil)
		Expect(hub.Client.Create(ctx, rejected)).To(Succeed())
		Eventually(func(g Gomega) { reserved(g, rejected) }).Should(Succeed())
		setCheck(rejected, strata.CheckStateRejected, "over the team's budget")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, rejected)
			g.Expect(wl.Spec.Active).To(HaveValue(BeFalse()))
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Reason).To(Equal("Deactivated"), c.Message)
			g.Expect(c.Message).To(ContainSubstring("admission check " + budget + ": over the team's budget"))
			g.Expect(wl.Status.Placement == nil || len(wl.Status.Placement.Attempts) == 0).To(BeTrue(), "never dispatched")
			cp, _ := copyOn(g, ctx, w1, rejected)
			g.Expect(cp).To(BeNil())
		}).Should(Succeed())
	})

	It("preempts at the hub a lower-priority Workload whose quota is only reserved while its checks decide", func(ctx SpecContext) {
		e := newEnv(ctx, "hubcheckspre", map[string][][]string{"w1": {{"4", "4"}}})
		budget := "hub-budget-" + e.name
		low, urgent := e.name+"-low", e.name+"-urgent"
		for _, c := range []*framework.Cluster{hub, worker("w1")} {
			for name, value := range map[string]int32{low: 10, urgent: 500} {
				Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, value))).To(Succeed())
			}
		}
		Expect(hub.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: budget},
			Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/budget"}})).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			_ = client.IgnoreNotFound(hub.Client.Delete(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: budget}}))
		})
		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: budget}, &ac)).To(Succeed())
			meta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active"})
			g.Expect(hub.Client.Status().Update(ctx, &ac)).To(Succeed())
		}).Should(Succeed())
		By("a hub queue of 2 CPUs that preempts lower priorities within itself, and checks")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec = testutil.MakeClusterQueue(cq.Name).ResourceGroup("cpu").GroupFlavor(e.flavor, "2").
				Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj().Spec
			cq.Spec.AdmissionChecks = []string{budget}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		lowJob := e.job("low", 1, "2", nil)
		lowJob.Labels[strata.PriorityClassLabel] = low
		Expect(hub.Client.Create(ctx, lowJob)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, lowJob)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadQuotaReserved)).To(BeTrue())
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			g.Expect(cq.Status.ReservingWorkloads).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("an urgent Job the queue's quota holds only without it: the low one's reservation is taken back, the urgent one reserved")
		urgentJob := e.job("urgent", 1, "2", nil)
		urgentJob.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, urgentJob)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, urgentJob)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadQuotaReserved)).To(BeTrue())
			lw := hubWorkload(g, ctx, lowJob)
			g.Expect(lw.Status.Admission).To(BeNil())
			p := meta.FindStatusCondition(lw.Status.Conditions, strata.WorkloadPreempted)
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Reason).To(Equal(strata.PreemptedInClusterQueue))
			g.Expect(p.Message).To(ContainSubstring(e.ns + "/job-urgent"))
			g.Expect(lw.Status.AdmissionChecks).To(ConsistOf(HaveField("State", strata.CheckStatePending)))
		}).Should(Succeed())
	})
})
