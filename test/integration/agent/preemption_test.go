package agent

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// prioritizedJob is a rack-required newJob of 4 pods with a
// WorkloadPriorityClass.
func prioritizedJob(ns, queue, class string) *batchv1.Job {
	job := newJob(ns, queue, 4, map[string]string{"strata.dev/podset-required-topology": rack})
	job.Labels[strata.PriorityClassLabel] = class
	return job
}

// expectPreempted waits for the Job's Workload to be preempted with
// reason, and its Job to be suspended again.
func expectPreempted(ctx SpecContext, job *batchv1.Job, reason, by string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		wl := workloadOf(g, ctx, job)
		g.Expect(wl.Status.Admission).To(BeNil())
		ev := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
		g.Expect(ev).NotTo(BeNil())
		g.Expect(ev.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ev.Reason).To(Equal(strata.EvictedByPreemption), "conditions: %v", wl.Status.Conditions)
		g.Expect(ev.Message).To(ContainSubstring(by))
		pc := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
		g.Expect(pc).NotTo(BeNil())
		g.Expect(pc.Reason).To(Equal(reason))
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue(), "the preempted Job is suspended again")
	}, timeout).Should(Succeed())
}

// hostsOf returns the hosts of the Job's admission.
func hostsOf(ctx SpecContext, job *batchv1.Job) []string {
	GinkgoHelper()
	var out []string
	Eventually(func(g Gomega) {
		out = nil
		wl := workloadOf(g, ctx, job)
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
		g.Expect(err).NotTo(HaveOccurred())
		for _, d := range a.Domains {
			out = append(out, d.Values[len(d.Values)-1])
		}
	}, timeout).Should(Succeed())
	return out
}

var _ = Describe("Preemption", Ordered, Label("agent", "preemption"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("preempt-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-preempt").NodeLabel("pool", "preempt").TopologyName("preempt-topology").Obj())).To(Succeed())
		// Two racks of one 4-CPU node each.
		createPoolNode(ctx, "preempt", "pr1", "b1", "r1", "4")
		createPoolNode(ctx, "preempt", "pr2", "b1", "r2", "4")
		for name, v := range map[string]int32{"pre-low": 10, "pre-mid": 100, "pre-high": 1000} {
			Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, v))).To(Succeed())
		}
		ns = createNamespace(ctx, nil)
	})

	It("withinClusterQueue LowerPriority: evicts the lower priority Job in the rack the preemptor needs, waits for its pods, never takes equal priority", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("within-q").ResourceGroup("cpu").GroupFlavor("tas-preempt", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "within-q")

		low := prioritizedJob(ns, "within-q", "pre-low")
		Expect(worker.Client.Create(ctx, low)).To(Succeed())
		expectAdmitted(ctx, low)
		mid := prioritizedJob(ns, "within-q", "pre-mid")
		Expect(worker.Client.Create(ctx, mid)).To(Succeed())
		expectAdmitted(ctx, mid)
		lowHosts := hostsOf(ctx, low)
		runningPodOn(ctx, low, lowHosts[0])

		By("a second mid Job may not preempt the first (equal priority)")
		mid2 := prioritizedJob(ns, "within-q", "pre-mid")
		Expect(worker.Client.Create(ctx, mid2)).To(Succeed())
		// low is lower and preemptible: mid2 preempts it, not mid.
		expectPreempted(ctx, low, strata.PreemptedInClusterQueue, "(priority 100) of ClusterQueue within-q on flavor tas-preempt: withinClusterQueue: LowerPriority")
		expectWaiting(ctx, mid2, scheduler.ReasonPreempting, "admitted once the pods of "+ns+"/")

		By("the victim's pod ends: the preemptor is admitted on its rack, the victim waits")
		Expect(worker.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: low.Name + "-running"}}, client.GracePeriodSeconds(0))).To(Succeed())
		expectAdmitted(ctx, mid2)
		Expect(hostsOf(ctx, mid2)).To(Equal(lowHosts))
		expectWaiting(ctx, low, scheduler.ReasonPending, "cannot preempt")

		By("a third mid Job cannot preempt anything: the reason says why")
		mid3 := prioritizedJob(ns, "within-q", "pre-mid")
		Expect(worker.Client.Create(ctx, mid3)).To(Succeed())
		expectWaiting(ctx, mid3, scheduler.ReasonPending, "would need to preempt 1 workload of priority ≥ own")
		expectAdmitted(ctx, mid)

		for _, j := range []*batchv1.Job{low, mid, mid2, mid3} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("reclaimWithinCohort: a queue takes back its nominal quota from a borrower of its cohort, and the status shows borrowing and lending", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("team-a").Cohort("teams").ResourceGroup("cpu").GroupFlavor("tas-preempt", "4").
			Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("team-b").Cohort("teams").ResourceGroup("cpu").GroupFlavor("tas-preempt", "4").Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "team-a")
		createLocalQueue(ctx, ns, "team-b")

		By("team-b borrows team-a's idle quota")
		b1 := prioritizedJob(ns, "team-b", "pre-high")
		b2 := prioritizedJob(ns, "team-b", "pre-high")
		Expect(worker.Client.Create(ctx, b1)).To(Succeed())
		expectAdmitted(ctx, b1)
		Expect(worker.Client.Create(ctx, b2)).To(Succeed())
		expectAdmitted(ctx, b2)
		Eventually(func(g Gomega) {
			var a, b strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, types.NamespacedName{Name: "team-a"}, &a)).To(Succeed())
			g.Expect(worker.Client.Get(ctx, types.NamespacedName{Name: "team-b"}, &b)).To(Succeed())
			g.Expect(b.Status.FlavorsReservation).To(HaveLen(1))
			g.Expect(b.Status.FlavorsReservation[0].Resources[0].Borrowed.String()).To(Equal("4"))
			g.Expect(a.Status.FlavorsReservation[0].Resources[0].Lent.String()).To(Equal("4"))
		}, timeout).Should(Succeed())

		By("team-a's Job, of lower priority, reclaims: the most recently admitted borrower goes")
		a1 := prioritizedJob(ns, "team-a", "pre-low")
		Expect(worker.Client.Create(ctx, a1)).To(Succeed())
		expectAdmitted(ctx, a1)
		expectPreempted(ctx, b2, strata.PreemptedInCohortReclamation, "reclaimWithinCohort: Any")
		expectAdmitted(ctx, b1)

		for _, j := range []*batchv1.Job{a1, b1, b2} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("hierarchical Cohorts: a queue takes back from the other branch the quota its own branch's Cohort holds; a cycle of parents makes its queues inactive", func(ctx SpecContext) {
		cohort := func(name, parent, cpus string) *strata.Cohort {
			c := &strata.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: strata.CohortSpec{ParentName: parent}}
			if cpus != "" {
				c.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
					Flavors: []strata.FlavorQuotas{{Name: "tas-preempt", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpus)}}}}}}
			}
			return c
		}
		Expect(worker.Client.Create(ctx, cohort("hc-left", "hc-org", "4"))).To(Succeed())
		Expect(worker.Client.Create(ctx, cohort("hc-right", "hc-org", ""))).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("hc-a").Cohort("hc-left").ResourceGroup("cpu").GroupFlavor("tas-preempt", "0").
			Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("hc-c").Cohort("hc-right").ResourceGroup("cpu").GroupFlavor("tas-preempt", "0").Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "hc-a")
		createLocalQueue(ctx, ns, "hc-c")

		By("hc-c, with no quota in its branch, borrows hc-left's through the root")
		c1 := prioritizedJob(ns, "hc-c", "pre-high")
		Expect(worker.Client.Create(ctx, c1)).To(Succeed())
		expectAdmitted(ctx, c1)
		Eventually(func(g Gomega) {
			var c strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, types.NamespacedName{Name: "hc-c"}, &c)).To(Succeed())
			g.Expect(c.Status.FlavorsReservation).To(HaveLen(1))
			g.Expect(c.Status.FlavorsReservation[0].Resources[0].Borrowed.String()).To(Equal("4"))
		}, timeout).Should(Succeed())

		By("hc-a's Job, of lower priority, has precedence in hc-left: it reclaims")
		a1 := prioritizedJob(ns, "hc-a", "pre-low")
		Expect(worker.Client.Create(ctx, a1)).To(Succeed())
		expectAdmitted(ctx, a1)
		expectPreempted(ctx, c1, strata.PreemptedInCohortReclamation, "reclaimWithinCohort: Any")

		By("hc-org's parent is made hc-left: the queues under the cycle are inactive")
		Expect(worker.Client.Create(ctx, cohort("hc-org", "hc-left", ""))).To(Succeed())
		Eventually(func(g Gomega) {
			for _, name := range []string{"hc-a", "hc-c"} {
				var cq strata.ClusterQueue
				g.Expect(worker.Client.Get(ctx, types.NamespacedName{Name: name}, &cq)).To(Succeed())
				active := meta.FindStatusCondition(cq.Status.Conditions, "Active")
				g.Expect(active).NotTo(BeNil())
				g.Expect(active.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(active.Reason).To(Equal(strata.QueueCohortCycle))
			}
		}, timeout).Should(Succeed())
		expectWaiting(ctx, c1, scheduler.ReasonInadmissible, "is on a cycle of Cohort parents")

		for _, j := range []*batchv1.Job{a1, c1} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
		for _, name := range []string{"hc-org", "hc-left", "hc-right"} {
			Expect(worker.Client.Delete(ctx, &strata.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		}
	})

	It("LowerOrNewerEqualPriority: preempts an equal-priority Job queued after the preemptor, never one queued before", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("newer-q").ResourceGroup("cpu").GroupFlavor("tas-preempt", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerOrNewerEqualPriority}).Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "newer-q")

		By("an older Job on one rack; the preemptor queued next, through a LocalQueue that does not exist yet; a newer Job on the other rack")
		older := prioritizedJob(ns, "newer-q", "pre-mid")
		Expect(worker.Client.Create(ctx, older)).To(Succeed())
		expectAdmitted(ctx, older)
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, older)
			g.Expect(time.Now().After(wl.CreationTimestamp.Add(time.Second))).To(BeTrue())
		}, timeout).Should(Succeed())
		preemptor := prioritizedJob(ns, "newer-late", "pre-mid")
		Expect(worker.Client.Create(ctx, preemptor)).To(Succeed())
		expectInvalid(ctx, preemptor, "LocalQueueNotFound", "newer-late")
		// Queue order is by creation time, which the API server keeps to
		// the second: the newer Job is created in a later second.
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, preemptor)
			g.Expect(time.Now().After(wl.CreationTimestamp.Add(time.Second))).To(BeTrue())
		}, timeout).Should(Succeed())
		newer := prioritizedJob(ns, "newer-q", "pre-mid")
		Expect(worker.Client.Create(ctx, newer)).To(Succeed())
		expectAdmitted(ctx, newer)

		By("its LocalQueue appears: it preempts the newer Job, not the older one")
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("newer-late", ns, "newer-q"))).To(Succeed())
		expectAdmitted(ctx, preemptor)
		expectPreempted(ctx, newer, strata.PreemptedInClusterQueue, "withinClusterQueue: LowerOrNewerEqualPriority")
		expectAdmitted(ctx, older)

		for _, j := range []*batchv1.Job{older, newer, preemptor} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("borrowWithinCohort: a Job that must borrow preempts a lower-priority borrower of another queue, under the threshold", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("bw-a").Cohort("bw").ResourceGroup("cpu").GroupFlavor("tas-preempt", "4").
			Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionLowerPriority, BorrowWithinCohort: &strata.BorrowWithinCohort{
				Policy: strata.BorrowWithinCohortLowerPriority, MaxPriorityThreshold: ptr.To[int32](50)}}).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("bw-b").Cohort("bw").ResourceGroup("cpu").GroupFlavor("tas-preempt", "0").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("bw-c").Cohort("bw").ResourceGroup("cpu").GroupFlavor("tas-preempt", "4").Obj())).To(Succeed())
		for _, q := range []string{"bw-a", "bw-b"} {
			createLocalQueue(ctx, ns, q)
		}

		By("bw-b, with no quota of its own, borrows a rack; bw-a fills the other within its quota")
		borrower := prioritizedJob(ns, "bw-b", "pre-low")
		Expect(worker.Client.Create(ctx, borrower)).To(Succeed())
		expectAdmitted(ctx, borrower)
		own := prioritizedJob(ns, "bw-a", "pre-high")
		Expect(worker.Client.Create(ctx, own)).To(Succeed())
		expectAdmitted(ctx, own)

		By("bw-a's next Job must borrow: it preempts bw-b's (priority 10, under the threshold 50)")
		more := prioritizedJob(ns, "bw-a", "pre-mid")
		Expect(worker.Client.Create(ctx, more)).To(Succeed())
		expectAdmitted(ctx, more)
		expectPreempted(ctx, borrower, strata.PreemptedInCohortReclaimWhileBorrowing, "borrowWithinCohort: LowerPriority (cohort bw)")
		expectAdmitted(ctx, own)

		for _, j := range []*batchv1.Job{borrower, own, more} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("a Kueue ClusterQueue with a cohort and preemption policies applies with only its apiVersion changed", func(ctx SpecContext) {
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "test", "integration", "agent", "testdata", "kueue-clusterqueue.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var cq strata.ClusterQueue
		Expect(yaml.UnmarshalStrict(data, &cq)).To(Succeed())
		Expect(cq.APIVersion).To(Equal("strata.dev/v1beta1"))
		Expect(worker.Client.Create(ctx, &cq)).To(Succeed())
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(&cq), &cq)).To(Succeed())
		Expect(cq.Spec.Cohort).To(Equal("team-ab"))
		Expect(cq.Spec.Preemption.WithinClusterQueue).To(Equal(strata.PreemptionLowerPriority))
		Expect(cq.Spec.Preemption.BorrowWithinCohort.MaxPriorityThreshold).To(Equal(ptr.To[int32](100)))
		Expect(cq.Spec.ResourceGroups[0].Flavors[0].Resources[2].LendingLimit.String()).To(Equal("4"))
		Expect(cq.Spec.FlavorFungibility.WhenCanPreempt).To(Equal(strata.FungibilityTryNextFlavor), "Kueue's default")
	})

	It("a hub copy preempts only when the hub marked it, only up to the mark, and not at all when what it needs is free", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("copy-q").ResourceGroup("cpu").GroupFlavor("tas-preempt", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "copy-q")
		low := prioritizedJob(ns, "copy-q", "pre-low")
		Expect(worker.Client.Create(ctx, low)).To(Succeed())
		expectAdmitted(ctx, low)
		mid := prioritizedJob(ns, "copy-q", "pre-mid")
		Expect(worker.Client.Create(ctx, mid)).To(Succeed())
		expectAdmitted(ctx, mid)
		copyOf := func(uid, upTo string) *batchv1.Job {
			job := hubCopy(ns, "copy-q", 4, uid, "1", "tas-preempt")
			job.Labels[strata.PriorityClassLabel] = "pre-high"
			if upTo != "" {
				job.Annotations[strata.PreemptUpToAnnotation] = upTo
			}
			return job
		}

		By("a copy of priority 1000 without the hub's mark waits and preempts nothing")
		unmarked := copyOf("3f1c2b8e-0000-4000-8000-000000000001", "")
		Expect(worker.Client.Create(ctx, unmarked)).To(Succeed())
		expectWaiting(ctx, unmarked, scheduler.ReasonPending, "waiting for capacity")
		expectAdmitted(ctx, low)
		expectAdmitted(ctx, mid)
		Expect(worker.Client.Delete(ctx, unmarked, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())

		By("a copy marked up to priority 10 preempts the priority-10 Job, not the priority-100 one, and runs in its rack")
		lowHosts := hostsOf(ctx, low)
		marked := copyOf("3f1c2b8e-0000-4000-8000-000000000002", "10")
		Expect(worker.Client.Create(ctx, marked)).To(Succeed())
		expectPreempted(ctx, low, strata.PreemptedInClusterQueue, "(priority 1000) of ClusterQueue copy-q")
		expectAdmitted(ctx, marked)
		Expect(hostsOf(ctx, marked)).To(Equal(lowHosts))
		expectAdmitted(ctx, mid)

		By("another copy marked up to 10 finds nothing of priority <= 10 admitted and leaves the priority-100 Job alone")
		second := copyOf("3f1c2b8e-0000-4000-8000-000000000003", "10")
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		expectWaiting(ctx, second, scheduler.ReasonPending, "waiting for capacity")
		expectAdmitted(ctx, mid)

		By("once the priority-100 Job is gone, that copy is admitted without preempting anything")
		Expect(worker.Client.Delete(ctx, mid, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		expectAdmitted(ctx, second)
		Consistently(func(g Gomega) {
			wl := workloadOf(g, ctx, marked)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "the first copy keeps its admission")
		}, "2s").Should(Succeed())
		for _, j := range []*batchv1.Job{low, marked, second} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
