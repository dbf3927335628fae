package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	lwsjobs "strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's AdmissionChecks: a queue naming checks reserves quota, and the
// workload is admitted, its Job started, once every check's controller
// (played here by the test) says Ready; Retry queues it again; Rejected
// deactivates it; a check missing or not Active keeps the queue from
// admitting.
var _ = Describe("AdmissionChecks", Ordered, Label("agent", "admissionchecks"), func() {
	var ns string
	rackRequired := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}

	setCheck := func(ctx SpecContext, job *batchv1.Job, name string, state strata.CheckState, message string, updates ...strata.PodSetUpdate) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			i := -1
			for j, s := range wl.Status.AdmissionChecks {
				if s.Name == name {
					i = j
				}
			}
			g.Expect(i).To(BeNumerically(">=", 0), "the check's state is on the Workload")
			s := &wl.Status.AdmissionChecks[i]
			s.State, s.Message, s.PodSetUpdates, s.LastTransitionTime = state, message, updates, metav1.Now()
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
	}
	activate := func(ctx SpecContext, name string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: name}, &ac)).To(Succeed())
			meta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "the test runs it"})
			g.Expect(worker.Client.Status().Update(ctx, &ac)).To(Succeed())
		}, timeout).Should(Succeed())
	}
	suspended := func(g Gomega, ctx SpecContext, job *batchv1.Job) *batchv1.Job {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		return &j
	}
	expectReserved := func(ctx SpecContext, job *batchv1.Job, checks ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "quota reserved")
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadQuotaReserved)).To(BeTrue())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.WaitingForAdmissionChecks))
			var names []string
			for _, s := range wl.Status.AdmissionChecks {
				g.Expect(s.State).To(Equal(strata.CheckStatePending))
				names = append(names, s.Name)
			}
			g.Expect(names).To(Equal(checks))
		}, timeout).Should(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("checks-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-checks").NodeLabel("pool", "checks").TopologyName("checks-topology").Obj())).To(Succeed())
		cq := testutil.MakeClusterQueue("checks-q").Flavor("tas-checks").Obj()
		cq.Spec.AdmissionChecks = []string{"prov", "policy"}
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		createPoolNode(ctx, "checks", "checks-1", "b1", "r1", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "checks-q")
	})

	It("admits nothing while a check is missing or not Active, and says why", func(ctx SpecContext) {
		job := newJob(ns, "checks-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectWaiting(ctx, job, scheduler.ReasonCheckNotReady, "admission check prov does not exist")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "checks-q"}, &cq)).To(Succeed())
			c := meta.FindStatusCondition(cq.Status.Conditions, "Active")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.QueueAdmissionCheckNotReady))
		}, timeout).Should(Succeed())

		for _, name := range []string{"prov", "policy"} {
			Expect(worker.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/" + name}})).To(Succeed())
		}
		expectWaiting(ctx, job, scheduler.ReasonCheckNotReady, "admission check prov is not Active (its controller, example.com/prov")
		activate(ctx, "prov")
		activate(ctx, "policy")
		expectReserved(ctx, job, "prov", "policy")
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("starts the Job only once every check is Ready, with the checks' pod set updates", func(ctx SpecContext) {
		job := newJob(ns, "checks-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectReserved(ctx, job, "prov", "policy")

		By("the queues count it reserving, not admitted (Kueue's reservingWorkloads)")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "checks-q"}, &cq)).To(Succeed())
			g.Expect([]int32{cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads}).To(Equal([]int32{1, 0}))
			var lq strata.LocalQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "checks-q"}, &lq)).To(Succeed())
			g.Expect([]int32{lq.Status.ReservingWorkloads, lq.Status.AdmittedWorkloads}).To(Equal([]int32{1, 0}))
		}, timeout).Should(Succeed())

		By("one check Ready: still waiting, the Job suspended")
		setCheck(ctx, job, "prov", strata.CheckStateReady, "provisioned", strata.PodSetUpdate{Name: "main",
			Labels: map[string]string{"provisioned-by": "prov"}, Annotations: map[string]string{"example.com/request": "req-1"},
			NodeSelector: map[string]string{"example.com/capacity": "reserved"},
			Tolerations:  []corev1.Toleration{{Key: "example.com/provisioned", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}})
		Consistently(func(g Gomega) {
			g.Expect(ptr.Deref(suspended(g, ctx, job).Spec.Suspend, false)).To(BeTrue(), "a check is not Ready yet")
			c, _ := admittedCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}, "2s", "200ms").Should(Succeed())

		By("both Ready: admitted and started")
		setCheck(ctx, job, "policy", strata.CheckStateReady, "")
		Eventually(func(g Gomega) {
			c, _ := admittedCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("admission checks prov, policy Ready"))
			j := suspended(g, ctx, job)
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "the Job runs")
			tmpl := j.Spec.Template
			g.Expect(tmpl.Labels).To(HaveKeyWithValue("provisioned-by", "prov"))
			g.Expect(tmpl.Annotations).To(HaveKeyWithValue("example.com/request", "req-1"))
			g.Expect(tmpl.Spec.NodeSelector).To(HaveKeyWithValue("example.com/capacity", "reserved"))
			g.Expect(tmpl.Spec.NodeSelector).To(HaveKeyWithValue("pool", "checks"), "the flavor's node labels too")
			g.Expect(tmpl.Spec.Tolerations).To(ContainElement(HaveField("Key", "example.com/provisioned")))
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "checks-q"}, &cq)).To(Succeed())
			g.Expect([]int32{cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads}).To(Equal([]int32{1, 1}))
		}, timeout).Should(Succeed())
		By("the metrics count a reservation, then an admission that waited for its checks (Kueue's)")
		Eventually(func(g Gomega) {
			m := metrics.AgentLifecycle
			g.Expect(promtest.ToFloat64(m.QuotaReserved.WithLabelValues("checks-q"))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(m.Admitted.WithLabelValues("checks-q"))).To(BeNumerically(">=", 1))
			g.Expect(histogramCount(g, m.ChecksWait, "checks-q")).To(BeNumerically(">=", 1))
			g.Expect(histogramCount(g, m.Latency, "checks-q")).To(BeNumerically(">=", 1), "observed at the admission, not the reservation")
		}, timeout).Should(Succeed())

		By("a check Pending again after the admission: the Job stays admitted and running, as in Kueue")
		setCheck(ctx, job, "policy", strata.CheckStatePending, "re-evaluating")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.AdmissionChecks).To(ContainElement(And(HaveField("Name", "policy"), HaveField("State", strata.CheckStatePending))))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			c, reserved := admittedCondition(g, ctx, job)
			g.Expect(reserved).To(BeTrue(), "the reservation stays")
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "still admitted")
			j := suspended(g, ctx, job)
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "the Job runs")
			g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue("provisioned-by", "prov"))
		}, "2s", "200ms").Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("takes the reservation back on Retry and reserves again with every check Pending", func(ctx SpecContext) {
		job := newJob(ns, "checks-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectReserved(ctx, job, "prov", "policy")
		setCheck(ctx, job, "policy", strata.CheckStateReady, "")
		setCheck(ctx, job, "prov", strata.CheckStateRetry, "no capacity in zone a")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(strata.EvictedByAdmissionCheck))
			g.Expect(c.Message).To(ContainSubstring("admission check prov: no capacity in zone a"))
		}, timeout).Should(Succeed())
		// Queued again at once, it is reserved again: both checks Pending.
		expectReserved(ctx, job, "prov", "policy")
		Consistently(func(g Gomega) {
			g.Expect(ptr.Deref(suspended(g, ctx, job).Spec.Suspend, false)).To(BeTrue(), "never started")
		}, "1s", "200ms").Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("keeps a LeaderWorkerSet group's pods gated until its checks are Ready, then releases them with the checks' pod set updates", func(ctx SpecContext) {
		l := hostLWS(ns, "checks-q", "checks-lws", 1)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		var wl *strata.Workload
		Eventually(func(g Gomega) {
			wl = groupWorkload(g, ctx, l, 0)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "quota reserved: %v", wl.Status.Conditions)
			g.Expect(wl.Status.AdmissionChecks).To(HaveLen(2))
		}, timeout).Should(Succeed())
		lwsPods(ctx, l, 0)
		Consistently(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(3))
			for _, p := range pods.Items {
				g.Expect(p.Spec.SchedulingGates).NotTo(BeEmpty(), "pod %s released before its checks are Ready", p.Name)
			}
		}, "2s", "200ms").Should(Succeed())

		for _, check := range []string{"prov", "policy"} {
			Eventually(func(g Gomega) {
				wl := groupWorkload(g, ctx, l, 0)
				for i := range wl.Status.AdmissionChecks {
					if s := &wl.Status.AdmissionChecks[i]; s.Name == check {
						s.State, s.LastTransitionTime = strata.CheckStateReady, metav1.Now()
						if check == "prov" {
							s.PodSetUpdates = []strata.PodSetUpdate{{Name: lwsjobs.Worker, NodeSelector: map[string]string{"example.com/capacity": "reserved"},
								Labels: map[string]string{"provisioned-by": "prov"}}}
						}
					}
				}
				g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(3))
			for _, p := range pods.Items {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				_, podSet, _ := lwsjobs.PodOf(l, &p)
				if podSet == lwsjobs.Worker {
					g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("example.com/capacity", "reserved"), "pod %s", p.Name)
					g.Expect(p.Labels).To(HaveKeyWithValue("provisioned-by", "prov"))
				} else {
					g.Expect(p.Spec.NodeSelector).NotTo(HaveKey("example.com/capacity"), "the leader's pod set has no update")
				}
			}
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, l)).To(Succeed())
	})

	It("deactivates a workload a check rejects, and stops its Job if it ran", func(ctx SpecContext) {
		job := newJob(ns, "checks-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectReserved(ctx, job, "prov", "policy")
		setCheck(ctx, job, "prov", strata.CheckStateReady, "")
		setCheck(ctx, job, "policy", strata.CheckStateReady, "")
		Eventually(func(g Gomega) {
			g.Expect(ptr.Deref(suspended(g, ctx, job).Spec.Suspend, true)).To(BeFalse(), "the Job runs")
		}, timeout).Should(Succeed())

		setCheck(ctx, job, "policy", strata.CheckStateRejected, "over the team's GPU budget")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(ptr.Deref(wl.Spec.Active, true)).To(BeFalse(), "deactivated")
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("AdmissionCheckRejected"))
			g.Expect(c.Message).To(ContainSubstring("admission check policy: over the team's GPU budget"))
			j := suspended(g, ctx, job)
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue(), "the Job is stopped")
			g.Expect(j.Spec.Template.Spec.NodeSelector).NotTo(HaveKey("pool"), "the admission's template taken back")
		}, timeout).Should(Succeed())
		expectNotAdmitted(ctx, job, "an inactive Workload is not reserved again")
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
