package fleet

import (
	"fmt"
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
	"strata.dev/strata/hub/dispatch"
)

var _ = Describe("A Job that may run with fewer pods", func() {
	It("is placed on the worker where the most of its pods fit, and admitted there with that many", func(ctx SpecContext) {
		// One rack of 8 CPUs on w1, one of 2 on w2: 12 pods of a rack fit
		// nowhere, 8 fit on w1.
		e := newEnv(ctx, "minpar", map[string][][]string{"w1": {{"4", "4"}}, "w2": {{"2"}}})
		w1 := worker("w1")
		// The hub's ClusterQueue holds 10 CPUs: not all 12 pods, and 2
		// more beside the 8 it runs with.
		hubQuota(ctx, e, "10")
		job := e.job("minpar", 12, "1", map[string]string{"strata.dev/podset-required-topology": rack})
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "3"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.PodSets[0].MinCount).To(Equal(ptr.To[int32](3)))
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			for _, a := range wl.Status.Placement.Attempts {
				g.Expect(a.Result).NotTo(Equal(strata.PlacementRejected), "attempts: %v", wl.Status.Placement.Attempts)
			}
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			g.Expect(ptr.Deref(cp.Spec.Parallelism, 0)).To(Equal(int32(8)))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(8)))
			c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(ContainSubstring("with 8 of the 12 pods of pod set main"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the hub's quota is charged for the 8 pods admitted, not the 12 asked for: 2 more fit")
		more := e.job("more", 2, "1", nil)
		Expect(hub.Client.Create(ctx, more)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, more)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("runs with the pods its hub ClusterQueue's quota holds, and no more on a worker with room for all", func(ctx SpecContext) {
		e := newEnv(ctx, "minquota", map[string][][]string{"w1": {{"8", "8"}}})
		w1 := worker("w1")
		hubQuota(ctx, e, "6")
		job := e.job("minquota", 8, "1", nil)
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "2"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PodSetCounts).To(Equal([]strata.PodSetCount{{Name: "main", Count: 6}}))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(6)))
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PodSetCountsAnnotation, "main=6"))
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse())
			g.Expect(ptr.Deref(cp.Spec.Parallelism, 0)).To(Equal(int32(6)))
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(6)))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the quota is used up: another Job waits for it")
		next := e.job("next", 1, "1", nil)
		Expect(hub.Client.Create(ctx, next)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, next).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending))
			g.Expect(c.Message).To(ContainSubstring("quota"))
		}).Should(Succeed())
	})

	It("runs with the pods its worker's ClusterQueue's quota holds, when that quota could never hold all of them", func(ctx SpecContext) {
		e := newEnv(ctx, "minwq", map[string][][]string{"w1": {{"8", "8"}}})
		w1 := worker("w1")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("6")}}
			g.Expect(w1.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		By("the hub reads the quota: a Job of 7 pods that must all run waits, no copy sent")
		probe := e.job("probe", 7, "1", nil)
		Expect(hub.Client.Create(ctx, probe)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, probe).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("has no room for it"))
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())

		By("a Job of 8 pods that may run with 2 is placed with the 6 the quota holds")
		job := e.job("minwq", 8, "1", nil)
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "2"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Placement.PodSetCounts).To(Equal([]strata.PodSetCount{{Name: "main", Count: 6}}))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PodSetCountsAnnotation, "main=6"))
			g.Expect(ptr.Deref(cp.Spec.Parallelism, 0)).To(Equal(int32(6)))
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(6)))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	DescribeTable("preempts at the hub for the most of its pods its ClusterQueue's quota can hold, when no preemption there frees quota for all",
		func(ctx SpecContext, name string, highPods, wantPods int32) {
			e := newEnv(ctx, name, map[string][][]string{"w1": {{"8", "8"}}})
			low, mid, high := name+"-low", name+"-mid", name+"-high"
			priorityClasses(ctx, map[string]int32{low: 10, mid: 500, high: 1000})
			By("a hub ClusterQueue of 8 CPUs that preempts lower priorities within itself")
			Eventually(func(g Gomega) {
				var cq strata.ClusterQueue
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
				cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("8")}}
				cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
				g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
			}).Should(Succeed())
			By("4 CPUs held by a low-priority Job, the rest of what it needs by a high-priority one")
			running := map[string]*batchv1.Job{}
			for _, r := range []struct {
				class string
				pods  int32
			}{{low, 4}, {high, highPods}} {
				job := e.job(r.class, r.pods, "1", nil)
				job.Labels[strata.PriorityClassLabel] = r.class
				Expect(hub.Client.Create(ctx, job)).To(Succeed())
				Eventually(func(g Gomega) {
					g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil())
				}).Should(Succeed())
				running[r.class] = job
			}

			By("a Job of 8 pods that may run with 2: preempting the low one frees quota for the most")
			job := e.job("fewer", 8, "1", nil)
			job.Labels[strata.PriorityClassLabel] = mid
			job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "2"}
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, running[low])
				p := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(p.Message).To(ContainSubstring("job-fewer"))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Status.Placement).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
				g.Expect(wl.Status.Placement.PodSetCounts).To(Equal([]strata.PodSetCount{{Name: "main", Count: wantPods}}), "conditions: %v", wl.Status.Conditions)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
				g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(wantPods))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			Consistently(func(g Gomega) {
				g.Expect(hubWorkload(g, ctx, running[high]).Status.Admission).NotTo(BeNil(), "the high-priority Job keeps its admission")
				g.Expect(hubWorkload(g, ctx, running[low]).Status.Admission).To(BeNil(), "the quota is used up: the low-priority Job waits")
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		},
		// 1 CPU left: not even its fewest pods fit before the preemption.
		Entry("its fewest pods do not fit before", "minreclaim", int32(3), int32(5)),
		// 2 CPUs left: its fewest pods fit now, but Kueue's partial
		// admission takes the most pods a preemption makes room for.
		Entry("its fewest pods fit before", "minreclaim2", int32(2), int32(6)),
	)

	It("preempts on the one worker where a preemption makes room for the most of its pods, when all of them fit nowhere even by preempting", func(ctx SpecContext) {
		// w1 has one rack of three 4-CPU nodes: n0 runs a low-priority
		// Job, n1 a high-priority one, n2 is free. 3 pods of 4 CPUs in one
		// rack fit nowhere even by preempting; 2 do once the low one goes
		// (1 fits now).
		e := newEnv(ctx, "minpre", map[string][][]string{"w1": {{"4", "4", "4"}}})
		const low, mid, high = "minpre-low", "minpre-mid", "minpre-high"
		priorityClasses(ctx, map[string]int32{low: 10, mid: 500, high: 1000})
		w1 := worker("w1")
		e.preemptWithin(ctx, w1)
		local := map[string]*batchv1.Job{}
		for n, class := range []string{low, high} {
			node := fmt.Sprintf("%s-w1-r0-n%d", e.name, n)
			job := e.job("local-"+node, 1, "4", nil)
			job.Labels[strata.PriorityClassLabel] = class
			job.Spec.Template.Spec.NodeSelector = map[string]string{host: node}
			Expect(w1.Client.Create(ctx, job)).To(Succeed())
			local[class] = job
		}
		for _, job := range local {
			Eventually(func(g Gomega) {
				_, wl := copyOn(g, ctx, w1, job)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job.Name, wl.Status.Conditions)
			}).Should(Succeed())
		}
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).NotTo(BeEmpty(), "w1's summary tells what preempting would free")
		})

		job := e.job("minpre", 3, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		job.Labels[strata.PriorityClassLabel] = mid
		job.Annotations = map[string]string{"kueue.x-k8s.io/job-min-parallelism": "1"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Parallelism, 0)).To(Equal(int32(2)))
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(2)))
			c := meta.FindStatusCondition(cwl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(ContainSubstring("with 2 of the 3 pods of pod set main"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			_, lwl := copyOn(g, ctx, w1, local[low])
			g.Expect(meta.IsStatusConditionTrue(lwl.Status.Conditions, strata.WorkloadPreempted)).To(BeTrue(), "%v", lwl.Status.Conditions)
			_, hwl := copyOn(g, ctx, w1, local[high])
			g.Expect(hwl.Status.Admission).NotTo(BeNil(), "the high-priority Job keeps its admission")
		}).Should(Succeed())
	})
})
