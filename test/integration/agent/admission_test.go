package agent

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

const (
	block = "cloud.provider.com/topology-block"
	host  = "kubernetes.io/hostname"
)

// createNode creates a Ready node of the "admit" pool with cpu CPUs.
func createNode(ctx SpecContext, name, blockName, rackName, cpu string) {
	createPoolNode(ctx, "admit", name, blockName, rackName, cpu)
}

// createPoolNode creates a Ready, untainted node of a pool with cpu CPUs.
func createPoolNode(ctx SpecContext, pool, name, blockName, rackName, cpu string) {
	GinkgoHelper()
	Expect(framework.CreateReadyNode(ctx, worker.Client, name, map[string]string{"pool": pool, block: blockName, rack: rackName, host: name}, cpu)).To(Succeed())
}

// admittedHosts waits for the Job's workload to be admitted and returns the
// pods per host of its assignment.
func admittedHosts(ctx SpecContext, job *batchv1.Job) map[string]int32 {
	hosts := map[string]int32{}
	Eventually(func(g Gomega) {
		var wl strata.Workload
		g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
		g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
		psa := wl.Status.Admission.PodSetAssignments[0]
		g.Expect(psa.Flavor).To(Equal("tas-admit"))
		a, err := tas.Decode(psa.TopologyAssignment)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Levels).To(Equal([]string{host}))
		for _, d := range a.Domains {
			hosts[d.Values[0]] = d.Count
		}
	}, timeout).Should(Succeed())
	return hosts
}

// createPods creates the pods the Job controller would: from the Job's
// template once the agent has started it, with completion indexes, in the
// given order.
func createPods(ctx SpecContext, job *batchv1.Job, indexes ...int) {
	GinkgoHelper()
	var j batchv1.Job
	Eventually(func(g Gomega) {
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		g.Expect(j.Spec.Template.Labels).To(HaveKey(strata.WorkloadLabel), "the agent has not started the Job yet")
		g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
	}, timeout).Should(Succeed())
	for _, i := range indexes {
		p := testutil.JobPod(&j, i)
		Expect(worker.Client.Create(ctx, p)).To(Succeed())
	}
}

// podHosts returns, per pod name, the host its node selector names ("" while gated).
func podHosts(g Gomega, ctx SpecContext, job *batchv1.Job) map[string]string {
	var pods corev1.PodList
	g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		gated := slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == strata.TopologySchedulingGate })
		switch {
		case gated:
			out[p.Name] = ""
		default:
			out[p.Name] = p.Spec.NodeSelector[host]
			g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("pool", "admit"))
		}
	}
	return out
}

var _ = Describe("Admission", Ordered, Label("agent", "admission"), func() {
	var (
		ns       string
		firstJob *batchv1.Job
	)

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("admit-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-admit").NodeLabel("pool", "admit").TopologyName("admit-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("admit-q").Flavor("tas-admit").Obj())).To(Succeed())
		for _, n := range [][4]string{{"a1", "b1", "r1", "4"}, {"a2", "b1", "r1", "4"}, {"a3", "b1", "r2", "4"}, {"a4", "b1", "r2", "4"}} {
			createNode(ctx, n[0], n[1], n[2], n[3])
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "admit-q")
	})

	It("admits a rack-required Job into one rack and starts it gated, with the flavor's node labels", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 6, map[string]string{"strata.dev/podset-required-topology": rack})
		firstJob = job
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		got := admittedHosts(ctx, job)
		Expect(got).To(Equal(map[string]int32{"a1": 4, "a2": 2}))
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}))
			g.Expect(j.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "admit"))
			g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue(strata.TASLabel, "true"))
			g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, jobs.WorkloadName(job.Name)))
		}, timeout).Should(Succeed())
	})

	It("ungates the pods in rank order, exactly as many per host as assigned", func(ctx SpecContext) {
		// Created out of order, with one index past the assignment, as an
		// Indexed Job with more completions than parallelism has.
		createPods(ctx, firstJob, 5, 3, 0, 4, 1, 2, 6)
		n := firstJob.Name
		Eventually(func(g Gomega) {
			g.Expect(podHosts(g, ctx, firstJob)).To(Equal(map[string]string{
				n + "-0": "a1", n + "-1": "a1", n + "-2": "a1", n + "-3": "a1",
				n + "-4": "a2", n + "-5": "a2",
				n + "-6": "", // every slot is taken: rank 6 waits
			}))
		}, timeout).Should(Succeed())
		By("rank 0 succeeds; rank 6 takes its slot")
		var p0 corev1.Pod
		Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: firstJob.Namespace, Name: n + "-0"}, &p0)).To(Succeed())
		p0.Status.Phase = corev1.PodSucceeded
		Expect(worker.Client.Status().Update(ctx, &p0)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(podHosts(g, ctx, firstJob)).To(HaveKeyWithValue(n+"-6", "a1"))
		}, timeout).Should(Succeed())
	})

	It("counts the first Job's pods before they exist: the next one goes to the other rack", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 6, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(admittedHosts(ctx, job)).To(Equal(map[string]int32{"a3": 4, "a4": 2}))
	})

	It("keeps a Job that fits in no rack waiting with the reason, and admits it when a node is added", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 4, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("flavor tas-admit: rack required: the best rack fits 2 of 4 pods; limited by cpu"))
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(SatisfyAll(
				HaveField("Regarding.Kind", "Workload"),
				HaveField("Regarding.Name", jobs.WorkloadName(job.Name)),
				HaveField("Reason", "Pending"),
				HaveField("Note", ContainSubstring("the best rack fits 2 of 4 pods")))))
		}, timeout).Should(Succeed())
		var j batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())

		By("adding a node to rack r2")
		createNode(ctx, "a5", "b1", "r2", "4")
		// BestFit: the largest free node first, and it holds all four.
		Expect(admittedHosts(ctx, job)).To(Equal(map[string]int32{"a5": 4}))
	})

	It("releases a deleted Job's capacity at once, so a waiting Job is admitted", func(ctx SpecContext) {
		waiting := newJob(ns, "admit-q", 4, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, waiting)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(waiting.Name)}, &wl)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue())
		}, timeout).Should(Succeed())

		Expect(worker.Client.Delete(ctx, firstJob, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			err := worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(firstJob.Name)}, &wl)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the deleted Job's Workload is still there: %v", err)
		}, timeout).Should(Succeed())
		Expect(admittedHosts(ctx, waiting)).To(Equal(map[string]int32{"a1": 4}))
	})

	It("sends a Job the user suspends back to its queue, and starts it again when it fits", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		admittedHosts(ctx, job)
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			j.Spec.Suspend = ptr.To(true)
			g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("JobSuspended"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "it fits, so it is admitted again")
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
		}, timeout).Should(Succeed())
	})

	It("stops a running Job resized by its user and admits it again as it is now", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 2, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		admittedHosts(ctx, job)
		By("an elastic Indexed Job grown from 2 pods to 3 while it runs")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](3), ptr.To[int32](3)
			g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(jobs.ReasonJobChanged))
			g.Expect(c.Message).To(ContainSubstring("pod set main has 3 pods, its assignment 2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "it fits, so it is admitted again")
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(3)))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "started again")
		}, timeout).Should(Succeed())
		// The specs after this one count the rack's capacity without it.
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			err := worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}, timeout).Should(Succeed())
	})

	It("resizes an elastic Job (kueue.x-k8s.io/elastic-job) in place while it runs: up within quota and capacity, down at once, never stopped", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 2, nil)
		job.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		wlKey := client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}
		var admittedAt metav1.Time
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, wlKey, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			admittedAt = c.LastTransitionTime
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
		}, timeout).Should(Succeed())
		resize := func(n int32) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var j batchv1.Job
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
				j.Spec.Parallelism, j.Spec.Completions = ptr.To(n), ptr.To(n)
				g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		expectSize := func(n int32, message string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var wl strata.Workload
				g.Expect(worker.Client.Get(ctx, wlKey, &wl)).To(Succeed())
				g.Expect(wl.Spec.PodSets[0].Count).To(Equal(n))
				g.Expect(wl.Status.Admission).NotTo(BeNil())
				psa := wl.Status.Admission.PodSetAssignments[0]
				g.Expect(psa.Count).To(Equal(n))
				a, err := tas.Decode(psa.TopologyAssignment)
				g.Expect(err).NotTo(HaveOccurred())
				var placed int32
				for _, d := range a.Domains {
					placed += d.Count
				}
				g.Expect(placed).To(Equal(n))
				c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Message).To(Equal(message))
				// Never taken back: admitted since the first admission.
				admitted := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
				g.Expect(admitted.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(admitted.LastTransitionTime).To(Equal(admittedAt))
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
				var j batchv1.Job
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
				g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse(), "never stopped")
			}, timeout).Should(Succeed())
		}
		By("grown from 2 pods to 4")
		resize(4)
		expectSize(4, "scaled up from 2 to 4 pods in place")
		By("shrunk to 1 (no pod of it runs here: at once)")
		resize(1)
		expectSize(1, "scaled down from 4 to 1 pods in place")
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			err := worker.Client.Get(ctx, wlKey, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}, timeout).Should(Succeed())
	})

	It("refuses an elastic Job whose pods name a topology, as Kueue's webhook does", func(ctx SpecContext) {
		job := newJob(ns, "admit-q", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		job.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("is placed unconstrained: its pods may not name a topology"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("rebuilds its capacity after a restart: nothing lost, nothing admitted twice", func(ctx SpecContext) {
		stopAgent()
		stopAgent = startAgent()
		// rack r2 is full and r1 has one free node of 4 CPUs, in admitted
		// workloads whose pods do not exist: a 5-pod rack Job must wait.
		tooBig := newJob(ns, "admit-q", 5, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, tooBig)).To(Succeed())
		fits := newJob(ns, "admit-q", 4, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, fits)).To(Succeed())
		Expect(admittedHosts(ctx, fits)).To(Equal(map[string]int32{"a2": 4}))
		Consistently(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(tooBig.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).To(BeNil())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("publishes the flavor's capacity summary, with admitted workloads' usage", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var cs strata.CapacitySummary
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "tas-admit"}, &cs)).To(Succeed())
			st := cs.Status
			g.Expect(st.SummaryGeneration).To(BeNumerically(">", 0))
			g.Expect(st.ObservedTime).NotTo(BeNil())
			g.Expect(st.Levels).To(Equal([]string{block, rack, host}))
			g.Expect(st.LeafLevels).To(Equal(int32(2)))
			g.Expect(st.Nodes).To(Equal(int32(5)))
			var values [][]string
			freeCPU := int64(0)
			cpuIdx := slices.Index(st.Resources, corev1.ResourceCPU)
			g.Expect(cpuIdx).To(BeNumerically(">=", 0))
			for _, d := range st.Domains {
				values = append(values, d.Values)
				for i := 0; i < len(d.Free); i += 2 {
					freeCPU += st.Vectors[d.Free[i]][cpuIdx] * int64(d.Free[i+1])
				}
			}
			g.Expect(values).To(Equal([][]string{{"b1", "r1"}, {"b1", "r2"}}))
			// Every CPU is taken by admitted workloads whose pods do not run.
			g.Expect(freeCPU).To(BeZero())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, "Ready")).To(BeTrue())
		}, timeout).Should(Succeed())
	})

	It("exports Prometheus metrics for queues, flavors and summaries", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			// 4+4+4+2+4 pods of admitted workloads whose Jobs have not finished.
			g.Expect(promtest.ToFloat64(metrics.AdmittedPods.WithLabelValues("tas-admit"))).To(BeNumerically(">=", 14))
			// The Job left waiting above was tried, and said why.
			g.Expect(promtest.ToFloat64(metrics.PendingWorkloads.WithLabelValues("admit-q", queue.PendingInadmissible))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.AgentQueues.Status.WithLabelValues("admit-q", metrics.QueueActive))).To(Equal(1.0))
			g.Expect(promtest.ToFloat64(metrics.AgentQueues.Status.WithLabelValues("admit-q", metrics.QueuePending))).To(BeZero())
			g.Expect(promtest.ToFloat64(metrics.SummaryBytes.WithLabelValues("tas-admit"))).To(BeNumerically(">", 0))
			g.Expect(promtest.ToFloat64(metrics.FreeCapacity.WithLabelValues("tas-admit", "b1", "cpu"))).To(BeZero())
			g.Expect(promtest.ToFloat64(metrics.FreeCapacity.WithLabelValues("tas-admit", "b1", "pods"))).To(BeNumerically(">", 0))
			g.Expect(promtest.CollectAndCount(metrics.AdmissionLatency)).To(BeNumerically(">", 0))
			// Kueue's lifecycle metrics: the specs above admitted Jobs in
			// admit-q, and evicted one its user suspended and one resized.
			m := metrics.AgentLifecycle
			g.Expect(promtest.ToFloat64(m.QuotaReserved.WithLabelValues("admit-q"))).To(BeNumerically(">=", 5))
			g.Expect(promtest.ToFloat64(m.Admitted.WithLabelValues("admit-q"))).To(BeNumerically(">=", 5))
			g.Expect(promtest.ToFloat64(m.Evicted.WithLabelValues("admit-q", "JobSuspended"))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(m.Evicted.WithLabelValues("admit-q", jobs.ReasonJobChanged))).To(BeNumerically(">=", 1))
			g.Expect(histogramCount(g, m.AdmissionWait, "admit-q")).To(BeNumerically(">=", 5))
			g.Expect(histogramCount(g, m.QuotaReservedWait, "admit-q")).To(BeNumerically(">=", 5))
			g.Expect(promtest.ToFloat64(metrics.AgentQueues.AdmittedActive.WithLabelValues("admit-q"))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.AdmissionAttempts.WithLabelValues(metrics.AttemptSuccess))).To(BeNumerically(">=", 5))
			g.Expect(promtest.CollectAndCount(metrics.AdmissionAttemptDuration)).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.AgentQueues.Usage.WithLabelValues("", "admit-q", "tas-admit", "cpu"))).To(BeNumerically(">", 0))
			// Kueue's LocalQueue metrics (metrics.localQueueMetrics, on
			// in this suite).
			lq := []string{"admit-q", ns}
			g.Expect(promtest.ToFloat64(metrics.AgentLocalQueues.Pending.WithLabelValues("admit-q", ns, queue.PendingInadmissible))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.AgentLocalQueues.AdmittedActive.WithLabelValues(lq...))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.AgentLocalQueues.Status.WithLabelValues("admit-q", ns, "True"))).To(Equal(1.0))
			g.Expect(promtest.ToFloat64(metrics.AgentLocalQueues.Usage.WithLabelValues("admit-q", ns, "tas-admit", "cpu"))).To(BeNumerically(">", 0))
			l := metrics.AgentLocalQueueLifecycle
			g.Expect(promtest.ToFloat64(l.Admitted.WithLabelValues(lq...))).To(BeNumerically(">=", 5))
			g.Expect(promtest.ToFloat64(l.QuotaReserved.WithLabelValues(lq...))).To(BeNumerically(">=", 5))
			g.Expect(promtest.ToFloat64(l.Evicted.WithLabelValues("admit-q", ns, "JobSuspended"))).To(BeNumerically(">=", 1))
		}, timeout).Should(Succeed())
	})

	It("forgets a deleted LocalQueue's metrics", func(ctx SpecContext) {
		lq := testutil.MakeLocalQueue("gone-lq", ns, "admit-q")
		Expect(worker.Client.Create(ctx, lq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hasSeries(metrics.AgentLocalQueues.Status, "name", "gone-lq")).To(BeTrue())
		}, timeout).Should(Succeed())
		metrics.AgentLocalQueueLifecycle.Admitted.WithLabelValues("gone-lq", ns).Inc()
		Expect(worker.Client.Delete(ctx, lq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hasSeries(metrics.AgentLocalQueues.Status, "name", "gone-lq")).To(BeFalse())
			g.Expect(hasSeries(metrics.AgentLocalQueueLifecycle.Admitted, "name", "gone-lq")).To(BeFalse())
		}, timeout).Should(Succeed())
	})

	It("forgets a deleted ClusterQueue's metrics, as Kueue clears them", func(ctx SpecContext) {
		cq := testutil.MakeClusterQueue("gone-q").Flavor("tas-admit").Obj()
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hasSeries(metrics.AgentQueues.AdmittedActive, "cluster_queue", "gone-q")).To(BeTrue())
		}, timeout).Should(Succeed())
		// What the queue's workloads would have left: counters that only
		// its deletion clears.
		metrics.AgentLifecycle.Admitted.WithLabelValues("gone-q").Inc()
		metrics.AgentLifecycle.Evicted.WithLabelValues("gone-q", "Preempted").Inc()
		metrics.PreemptedWorkloads.WithLabelValues("gone-q", "InClusterQueue").Inc()
		Expect(worker.Client.Delete(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hasSeries(metrics.AgentQueues.AdmittedActive, "cluster_queue", "gone-q")).To(BeFalse())
			g.Expect(hasSeries(metrics.AgentQueues.Status, "cluster_queue", "gone-q")).To(BeFalse())
			g.Expect(hasSeries(metrics.AgentLifecycle.Admitted, "cluster_queue", "gone-q")).To(BeFalse())
			g.Expect(hasSeries(metrics.AgentLifecycle.Evicted, "cluster_queue", "gone-q")).To(BeFalse())
			g.Expect(hasSeries(metrics.PreemptedWorkloads, "preempting_cluster_queue", "gone-q")).To(BeFalse())
		}, timeout).Should(Succeed())
		// The queues that remain keep theirs.
		Expect(hasSeries(metrics.AgentQueues.AdmittedActive, "cluster_queue", "admit-q")).To(BeTrue())
		Expect(hasSeries(metrics.AgentLocalQueues.AdmittedActive, "name", "admit-q")).To(BeTrue())
		Expect(hasSeries(metrics.AgentLifecycle.Admitted, "cluster_queue", "admit-q")).To(BeTrue())
	})
})

// hasSeries says whether c has a series whose label is value, without
// making one (as WithLabelValues would).
func hasSeries(c prometheus.Collector, label, value string) bool {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	found := false
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			found = found || (l.GetName() == label && l.GetValue() == value)
		}
	}
	return found
}

// histogramCount is how many observations a histogram of a ClusterQueue
// holds.
func histogramCount(g Gomega, h *prometheus.HistogramVec, queue string) uint64 {
	var m dto.Metric
	g.Expect(h.WithLabelValues(queue).(prometheus.Metric).Write(&m)).To(Succeed())
	return m.GetHistogram().GetSampleCount()
}
