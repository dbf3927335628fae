package agent

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

var _ = Describe("Partial admission", Ordered, Label("agent", "partial"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("minpar-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-minpar").NodeLabel("pool", "minpar").TopologyName("minpar-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("minpar-q").Flavor("tas-minpar", "cpu", "5").Obj())).To(Succeed())
		// Rack r1 holds 4 pods of 1 CPU, rack r2 2.
		createPoolNode(ctx, "minpar", "pa1", "b1", "r1", "4")
		createPoolNode(ctx, "minpar", "pa2", "b1", "r2", "2")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "minpar-q")
	})

	It("admits a Job with as many pods as fit, runs it with that parallelism, and gives it back its own when the admission is taken back", func(ctx SpecContext) {
		// 6 pods in one rack: more than the quota (5 CPUs) and than any
		// rack; 4 fit, in r1.
		job := newJob(ns, "minpar-q", 6, map[string]string{"strata.dev/podset-required-topology": rack})
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "2"}
		Expect(worker.Client.Create(ctx, job)).To(Succeed())

		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(6)))
			g.Expect(wl.Spec.PodSets[0].MinCount).To(Equal(ptr.To[int32](2)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			psa := wl.Status.Admission.PodSetAssignments[0]
			g.Expect(psa.Count).To(Equal(int32(4)))
			cpu := psa.ResourceUsage[corev1.ResourceCPU]
			g.Expect(cpu.String()).To(Equal("4"))
			a, err := tas.Decode(psa.TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Domains).To(ConsistOf(tas.DomainAssignment{Values: []string{"pa1"}, Count: 4}))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(ContainSubstring("with 4 of the 6 pods of pod set main (partial admission"))

			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(ptr.Deref(j.Spec.Parallelism, 0)).To(Equal(int32(4)))
			g.Expect(ptr.Deref(j.Spec.Completions, 0)).To(Equal(int32(6)), "completions do not follow without job-completions-equal-parallelism")
			var asked workload.PartialSizes
			g.Expect(json.Unmarshal([]byte(j.Annotations[strata.PartialAdmissionAnnotation]), &asked)).To(Succeed())
			g.Expect(asked).To(Equal(workload.PartialSizes{Parallelism: ptr.To[int32](6), Completions: ptr.To[int32](6)}))
		}, timeout).Should(Succeed())

		By("its 4 pods are released into rack r1")
		createPods(ctx, job, 0, 1, 2, 3)
		Eventually(func(g Gomega) {
			g.Expect(podHostsIn(g, ctx, job)).To(Equal(map[string]string{
				job.Name + "-0": "pa1", job.Name + "-1": "pa1", job.Name + "-2": "pa1", job.Name + "-3": "pa1"}))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			// Running with fewer pods is not a change of the Job: it keeps
			// its admission and its parallelism.
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Parallelism, 0)).To(Equal(int32(4)))
		}, "2s", "200ms").Should(Succeed())

		By("deactivated, the Job asks for its 6 pods again")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			wl.Spec.Active = ptr.To(false)
			g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
			g.Expect(ptr.Deref(j.Spec.Parallelism, 0)).To(Equal(int32(6)))
			g.Expect(j.Annotations).NotTo(HaveKey(strata.PartialAdmissionAnnotation))
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(6)))
		}, timeout).Should(Succeed())
	})

	It("preempts for the most pods a preemption makes room for when all of them cannot run", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-minpre").NodeLabel("pool", "minpre").TopologyName("minpar-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("minpre-q").ResourceGroup("cpu").GroupFlavor("tas-minpre", "8").
			Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj())).To(Succeed())
		createLocalQueue(ctx, ns, "minpre-q")
		createPoolNode(ctx, "minpre", "pm1", "b1", "r1", "8")
		for name, v := range map[string]int32{"minpre-low": 10, "minpre-mid": 100, "minpre-high": 1000} {
			Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, v))).To(Succeed())
		}
		inRack := map[string]string{"strata.dev/podset-required-topology": rack}
		low := newJob(ns, "minpre-q", 4, inRack)
		low.Labels[strata.PriorityClassLabel] = "minpre-low"
		Expect(worker.Client.Create(ctx, low)).To(Succeed())
		expectAdmitted(ctx, low)
		keep := newJob(ns, "minpre-q", 2, inRack)
		keep.Labels[strata.PriorityClassLabel] = "minpre-high"
		Expect(worker.Client.Create(ctx, keep)).To(Succeed())
		expectAdmitted(ctx, keep)
		runningPodOn(ctx, low, "pm1")

		By("8 pods do not run even by preempting low (keep is of higher priority); 6 do: low is preempted for them")
		job := newJob(ns, "minpre-q", 8, inRack)
		job.Labels[strata.PriorityClassLabel] = "minpre-mid"
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "2"}
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectPreempted(ctx, low, strata.PreemptedInClusterQueue, "withinClusterQueue: LowerPriority")
		expectWaiting(ctx, job, scheduler.ReasonPreempting, "admitted once the pods of "+ns+"/"+jobs.WorkloadName(low.Name)+" are gone")

		By("low's pod ends: the Job runs with 6 pods")
		Expect(worker.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: low.Name + "-running"}}, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(6)))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(HaveSuffix("with 6 of the 8 pods of pod set main (partial admission: all did not fit); " +
				strata.AdmittedAfterPreempting + "1 workload(s): " + ns + "/" + jobs.WorkloadName(low.Name)))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Parallelism, 0)).To(Equal(int32(6)))
		}, timeout).Should(Succeed())
		expectAdmitted(ctx, keep)
		expectWaiting(ctx, low, scheduler.ReasonPending, "")

		for _, j := range []*batchv1.Job{low, keep, job} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})

	It("marks a Job whose job-min-parallelism is out of range invalid", func(ctx SpecContext) {
		job := newJob(ns, "minpar-q", 2, nil)
		job.Annotations = map[string]string{"strata.dev/job-min-parallelism": "2"}
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("metadata.annotations[strata.dev/job-min-parallelism]: Invalid value: \"2\": must be an integer between 1 and 1"))
		}, timeout).Should(Succeed())
	})
})
