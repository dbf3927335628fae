package fleet

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("Hub queueing", func() {
	It("dispatches within the ClusterQueue's fleet-wide quota, higher priority first", func(ctx SpecContext) {
		e := newEnv(ctx, "quota", map[string][][]string{"w1": {{"8", "8"}}, "w2": {{"8"}}})
		Eventually(func(g Gomega) { // the hub writes the queue's status meanwhile
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-quota"}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("2")}}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		for _, c := range append(workers, hub) {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "quota-high"}, Value: 100}
			Expect(c.Client.Create(ctx, pc)).To(Succeed())
		}
		// The hub sends no copy where a worker's summary, listing its
		// classes, lacks the Job's: "high" must not be kept from the
		// quota by summaries older than its class.
		for _, w := range []string{"w1", "w2"} {
			hubReads(ctx, w, e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
				if st.PriorityClasses != nil {
					g.Expect(st.PriorityClasses).To(ContainElement(HaveField("Name", "quota-high")))
				}
			})
		}

		first := e.job("first", 1, "2", nil)
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, first).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		low := e.job("low", 1, "2", nil)
		Expect(hub.Client.Create(ctx, low)).To(Succeed())
		high := e.job("high", 1, "2", nil)
		high.Spec.Template.Spec.PriorityClassName = "quota-high"
		Expect(hub.Client.Create(ctx, high)).To(Succeed())
		for _, job := range []string{"low", "high"} {
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, e.job(job, 1, "2", nil))
				c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
				g.Expect(c.Message).To(ContainSubstring("more than is left of the quota of 2"))
			}).Should(Succeed())
		}
		By("the hub's ClusterQueue status counting them")
		Eventually(func(g Gomega) {
			var got strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-quota"}, &got)).To(Succeed())
			g.Expect(got.Status.AdmittedWorkloads).To(Equal(int32(1)))
			g.Expect(got.Status.PendingWorkloads).To(Equal(int32(2)))
			g.Expect(got.Status.FlavorsUsage).To(HaveLen(1))
			g.Expect(got.Status.FlavorsUsage[0].Resources.Cpu().String()).To(Equal("2"))
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, "Active")).To(BeTrue())
		}).Should(Succeed())

		By("the first Job finishing on its worker")
		wl := hubWorkload(Default, ctx, first)
		completeCopy(ctx, worker(wl.Status.Placement.Cluster), first)
		Eventually(func(g Gomega) {
			h, l := hubWorkload(g, ctx, high), hubWorkload(g, ctx, low)
			g.Expect(h.Status.Admission).NotTo(BeNil(), "high: %+v %+v", h.Status.Conditions, h.Status.Placement)
			g.Expect(l.Status.Placement).To(BeNil(), "the quota holds one of them; low: %+v", l.Status.Conditions)
		}).Should(Succeed())
	})

	It("lets a hub ClusterQueue borrow its cohort's unused fleet quota, and shows the borrowing and lending", func(ctx SpecContext) {
		e := newEnv(ctx, "cohort", map[string][][]string{"w1": {{"8", "8"}}})
		By("the WorkerCluster shows the flavor's free capacity, in all and in its freest rack")
		Eventually(func(g Gomega) {
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			var found bool
			for _, s := range wc.Status.Summaries {
				if s.Flavor == e.flavor {
					found = true
					g.Expect(s.Free.Cpu().String()).To(Equal("16"))
					g.Expect(s.LargestFree).To(HaveLen(1))
					g.Expect(s.LargestFree[0].Level).To(Equal(rack))
					g.Expect(s.LargestFree[0].Domain).To(Equal("r0"))
					g.Expect(s.LargestFree[0].Free.String()).To(Equal("16"))
				}
			}
			g.Expect(found).To(BeTrue())
		}).Should(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeClusterQueue("cq-cohort-lender").Cohort("fleet-teams").
			ResourceGroup("cpu").GroupFlavor(e.flavor, "6").Obj())).To(Succeed())
		e.intoCohort(ctx, "cq-cohort", "fleet-teams", "2")

		By("a Job of 4 CPUs, twice the queue's nominal quota, goes with 2 borrowed")
		borrower := e.job("borrower", 1, "4", nil)
		Expect(hub.Client.Create(ctx, borrower)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, borrower).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var cq, lender strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-cohort"}, &cq)).To(Succeed())
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-cohort-lender"}, &lender)).To(Succeed())
			g.Expect(cq.Status.FlavorsReservation).To(HaveLen(1))
			g.Expect(cq.Status.FlavorsReservation[0].Resources[0].Total.String()).To(Equal("4"))
			g.Expect(cq.Status.FlavorsReservation[0].Resources[0].Borrowed.String()).To(Equal("2"))
			g.Expect(lender.Status.FlavorsReservation).To(HaveLen(1))
			g.Expect(lender.Status.FlavorsReservation[0].Resources[0].Lent.String()).To(Equal("2"))
		}).Should(Succeed())

		By("a Job of 6 more CPUs waits: the cohort has 4 left to lend")
		more := e.job("more", 1, "6", nil)
		Expect(hub.Client.Create(ctx, more)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, more).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring("more than is left of the nominal quota of 2 and of what cohort fleet-teams lends"))
		}).Should(Succeed())
	})

	It("reclaims at the hub the fleet quota a cohort peer borrows: the newest borrower's copy is taken back, and the reclaiming Job runs where it ran", func(ctx SpecContext) {
		e := newEnv(ctx, "reclaim", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		By("team A's queue (2 CPUs) and team B's (6 CPUs, reclaimWithinCohort: Any) sharing a cohort")
		Expect(hub.Client.Create(ctx, testutil.MakeClusterQueue("cq-reclaim-b").Cohort("reclaim-teams").
			ResourceGroup("cpu").GroupFlavor(e.flavor, "6").Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj())).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("lq-b", e.ns, "cq-reclaim-b"))).To(Succeed())
		for _, w := range workers {
			Expect(w.Client.Create(ctx, testutil.MakeLocalQueue("lq-b", e.ns, "cq-reclaim"))).To(Succeed())
		}
		e.intoCohort(ctx, "cq-reclaim", "reclaim-teams", "2")

		By("team A borrowing 6 CPUs of B's unused quota, one Job on each worker")
		a1, a2 := e.job("a1", 1, "4", nil), e.job("a2", 1, "4", nil)
		ranOn := map[string]string{}
		for _, job := range []*batchv1.Job{a1, a2} {
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil())
				ranOn[job.Name] = wl.Status.Placement.Cluster
			}).Should(Succeed())
		}
		Expect(ranOn["a1"]).NotTo(Equal(ranOn["a2"]))

		By("team B's Job, within B's nominal quota, reclaiming it")
		b1 := testutil.MakeJob("b1", e.ns).Queue("lq-b").Parallelism(1).Completions(1).Request("cpu", "4").Obj()
		Expect(hub.Client.Create(ctx, b1)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, b1)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(ranOn["a2"]), "it runs where the reclaimed Job ran")
		}).Should(Succeed())
		By("only a2, the most recently admitted borrower, preempted, and waiting again")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, a2)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "a2 is not dispatched")
			p := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Reason).To(Equal(strata.PreemptedInCohortReclamation))
			g.Expect(p.Message).To(ContainSubstring("ns-reclaim/job-b1"))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(copies(g, ctx, a2)).To(BeEmpty())
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, a1)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal(ranOn["a1"]))
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)).To(BeNil())
			g.Expect(hubWorkload(g, ctx, a2).Status.Placement.Cluster).To(BeEmpty(), "the quota B reclaimed is not lent again")
		}, "3s").Should(Succeed())
	})

	It("says when a worker lacks the copy's LocalQueue, sends no copy there, and sends it once the LocalQueue is back", func(ctx SpecContext) {
		e := newEnv(ctx, "nolq", map[string][][]string{"w2": {{"4"}}})
		w2 := worker("w2")
		Expect(w2.Client.Delete(ctx, &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lq"}})).To(Succeed())
		job := e.job("lost", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring(`w2/f-nolq: LocalQueue "lq" does not exist in namespace "ns-nolq"`))
			g.Expect(wl.Status.Placement == nil || len(wl.Status.Placement.Attempts) == 0).To(BeTrue(), "no copy sent")
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())
		Expect(w2.Client.Create(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-nolq"))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
		}).Should(Succeed())
	})

	It("sends a worker exactly what its ClusterQueue's quota holds, in a burst", func(ctx SpecContext) {
		e := newEnv(ctx, "qburst", map[string][][]string{"w1": {{"8", "8"}}, "w2": {{"8"}}})
		w1 := worker("w1")
		By("giving w1's ClusterQueue 4 CPUs, a quarter of its nodes; w2's takes what its 8 CPUs hold")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}
			g.Expect(w1.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		By("running a one-CPU Job submitted on w1 in it: the hub reads a summary that counts it")
		local := e.job("local", 1, "1", nil)
		Expect(w1.Client.Create(ctx, local)).To(Succeed())
		admittedOn(ctx, w1, []*batchv1.Job{local})
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Queues).To(HaveLen(1))
			g.Expect(st.Queues[0].Usage.Cpu().String()).To(Equal("1"))
		})
		By("submitting 11 one-CPU Jobs on the hub at once: 3 fit what is left of w1's quota, 8 w2's nodes")
		var jobs []*batchv1.Job
		for i := range 11 {
			job := e.job(fmt.Sprintf("burst-%02d", i), 1, "1", nil)
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
		}
		By("every one is admitted where it was first sent: 3 on w1, 8 on w2")
		Eventually(func(g Gomega) {
			on := map[string]int{}
			for _, job := range jobs {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job.Name, wl.Status.Conditions)
				g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "%s admitted the first time: %+v", job.Name, wl.Status.Placement.Attempts)
				on[wl.Status.Placement.Cluster]++
			}
			g.Expect(on).To(Equal(map[string]int{"w1": 3, "w2": 8}))
		}).Should(Succeed())
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Queues).To(HaveLen(1))
			g.Expect(st.Queues[0].Usage.Cpu().String()).To(Equal("4"))
		})
	})
})

// intoCohort gives the env's hub ClusterQueue q a nominal CPU quota of the
// env's flavor in cohort.
func (e *env) intoCohort(ctx context.Context, q, cohort, cpu string) {
	GinkgoHelper()
	Eventually(func(g Gomega) { // the hub writes the queue's status meanwhile
		var cq strata.ClusterQueue
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: q}, &cq)).To(Succeed())
		cq.Spec.Flavors = nil
		cq.Spec.Cohort = cohort
		cq.Spec.ResourceGroups = testutil.MakeClusterQueue("x").ResourceGroup("cpu").GroupFlavor(e.flavor, cpu).Obj().Spec.ResourceGroups
		g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
	}).Should(Succeed())
}
