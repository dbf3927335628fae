package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("An elastic Job through the hub", func() {
	It("is resized in place on its worker as its hub queue grants: up within the hub quota, never beyond it, down at once, its copy never taken back", func(ctx SpecContext) {
		e := newEnv(ctx, "elastic", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		hubQuota(ctx, e, "6")
		job := testutil.MakeJob("elastic", e.ns).Queue("lq").Parallelism(2).Completions(2).Indexed().Request("cpu", "1").Obj()
		job.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var admittedAt metav1.Time
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(2)))
			admittedAt = meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted).LastTransitionTime
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		resize := func(n int32) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var j batchv1.Job
				g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
				j.Spec.Parallelism, j.Spec.Completions = ptr.To(n), ptr.To(n)
				g.Expect(hub.Client.Update(ctx, &j)).To(Succeed())
			}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		}
		// expect checks the hub Workload granted n pods, its copy on w1
		// running and admitted with them, and the Resized condition; the
		// first dispatch is the only one, admitted since it began.
		expect := func(n int32, status metav1.ConditionStatus, message string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Spec.PodSets[0].Count).To(Equal(n))
				g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "dispatched again: %v", wl.Status.Placement.Attempts)
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
				admitted := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
				g.Expect(admitted.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(admitted.LastTransitionTime).To(Equal(admittedAt))
				c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(status), c.Message)
				g.Expect(c.Message).To(ContainSubstring(message))
				g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(n))
				cp, cwl := copyOn(g, ctx, w1, job)
				g.Expect(cp).NotTo(BeNil())
				g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To(n)))
				g.Expect(cwl.Status.Admission).NotTo(BeNil())
				g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(n))
				g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		}
		By("grown from 2 pods to 4 on the hub: the hub's 6 CPUs hold them")
		resize(4)
		expect(4, metav1.ConditionTrue, "scaled up from 2 to 4 pods in place on w1")

		By("grown to 8: beyond the hub queue's quota, it waits there, still running 4")
		resize(8)
		expect(4, metav1.ConditionFalse, "scaling up from 4 to 8 pods waits for quota of hub ClusterQueue cq-elastic")
		Consistently(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To[int32](4)))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("back to 4: nothing waits any more")
		resize(4)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(4)))
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)).To(BeNil())
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("shrunk to 1: at once")
		resize(1)
		expect(1, metav1.ConditionTrue, "scaled down from 4 to 1 pods in place on w1")
	})

	It("preempts at the hub, as its queue's policy lets it, the lower-priority Job whose quota its scale-up needs", func(ctx SpecContext) {
		e := newEnv(ctx, "elasticpre", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		low, high := e.name+"-low", e.name+"-high"
		for _, c := range []*framework.Cluster{hub, w1} {
			for name, value := range map[string]int32{low: 10, high: 500} {
				Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, value))).To(Succeed())
			}
		}
		By("a hub queue of 4 CPUs that preempts lower priorities within itself, full: the elastic Job's 2 and a low-priority Job's 2")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}
			cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		job := testutil.MakeJob("elastic", e.ns).Queue("lq").Parallelism(2).Completions(2).Indexed().Request("cpu", "1").Obj()
		job.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		job.Labels[strata.PriorityClassLabel] = high
		lowJob := e.job("low", 2, "1", nil)
		lowJob.Labels[strata.PriorityClassLabel] = low
		for _, j := range []*batchv1.Job{job, lowJob} {
			Expect(hub.Client.Create(ctx, j)).To(Succeed())
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, j)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		}

		By("the elastic Job grown to 4: the low-priority Job is preempted at the hub, and the 4 pods granted and run on w1")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](4), ptr.To[int32](4)
			g.Expect(hub.Client.Update(ctx, &j)).To(Succeed())
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			lw := hubWorkload(g, ctx, lowJob)
			p := meta.FindStatusCondition(lw.Status.Conditions, strata.WorkloadPreempted)
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Reason).To(Equal(strata.PreemptedInClusterQueue))
			g.Expect(p.Message).To(ContainSubstring(e.ns + "/job-elastic"))
			g.Expect(copies(g, ctx, lowJob)).To(BeEmpty())
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(4)))
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "never dispatched again")
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To[int32](4)))
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(4)))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		By("the low-priority Job waits for quota, not dispatched again")
		Consistently(func(g Gomega) {
			lw := hubWorkload(g, ctx, lowJob)
			g.Expect(lw.Status.Placement == nil || lw.Status.Placement.Cluster == "").To(BeTrue())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
