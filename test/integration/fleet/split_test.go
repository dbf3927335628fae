package fleet

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("Pod sets on different flavors", Label("jobset"), func() {
	It("places a JobSet whose replicated jobs fit only on different flavors of one worker, each on its own, and charges each flavor", func(ctx SpecContext) {
		// Flavor f-split: w1 has one 2-CPU node. Flavor f-split-big: w1
		// has a rack of two 4-CPU nodes. The driver (2 CPUs) fits on
		// f-split, the workers (2 pods of 4 CPUs in a rack) on
		// f-split-big: neither flavor holds both. No other worker has
		// nodes of either.
		e, big := splitEnv(ctx, "split")
		js := splitJobSet(e, "")
		Expect(hub.Client.Create(ctx, js)).To(Succeed())

		wantFlavors := []strata.PodSetFlavor{{Name: "driver", Flavor: e.flavor}, {Name: "workers", Flavor: big}}
		By("one copy, on w1, each pod set pinned to its flavor and admitted there")
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PodSetFlavors).To(Equal(wantFlavors))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			cp, cwl := jobSetCopyOn(g, ctx, "w1", js)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PodSetFlavorsAnnotation, "driver="+e.flavor+",workers="+big))
			g.Expect(cp.Annotations).NotTo(HaveKey(strata.FlavorAnnotation))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			got := map[string]string{}
			for _, psa := range cwl.Status.Admission.PodSetAssignments {
				got[psa.Name] = psa.Flavor
			}
			g.Expect(got).To(Equal(map[string]string{"driver": e.flavor, "workers": big}))
			for _, w := range []string{"w2", "w3"} {
				other, _ := jobSetCopyOn(g, ctx, w, js)
				g.Expect(other).To(BeNil(), "a copy on %s", w)
			}
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(Equal(fmt.Sprintf("admitted on w1, flavors %s (pod set driver), %s (pod set workers)", e.flavor, big)))
		}).Should(Succeed())

		By("the hub's ClusterQueue is charged on each pod set's flavor")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			got := map[string]string{}
			for _, fu := range cq.Status.FlavorsUsage {
				if q, ok := fu.Resources[corev1.ResourceCPU]; ok {
					got[fu.Name] = q.String()
				}
			}
			g.Expect(got).To(Equal(map[string]string{e.flavor: "2", big: "8"}))
		}).Should(Succeed())

		By("a Job of 2 CPUs in a rack waits: the split holds both flavors' capacity")
		one := e.job("one", 1, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, one)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, one)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(dispatch.ReasonPending), c.Message)
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, one)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "placed: %v", wl.Status.Placement)
		}, "3s").Should(Succeed())

		By("deleted, the JobSet frees both: the Job goes to w1")
		Expect(hub.Client.Delete(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, one)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}).Should(Succeed())
	})

	It("preempts on the one worker for the pod sets that fit only on a flavor full of lower priorities, the others keeping theirs", func(ctx SpecContext) {
		e, big := splitEnv(ctx, "splitpre")
		const low, urgent = "splitpre-low", "splitpre-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, urgent: 500})
		w1 := worker("w1")
		e.preemptWithin(ctx, w1)

		By("filling w1's big rack with two low-priority Jobs submitted there")
		var local []*batchv1.Job
		for i := range 2 {
			node := fmt.Sprintf("splitpre-big-w1-r0-n%d", i)
			job := e.job(fmt.Sprintf("local-%d", i), 1, "4", nil)
			job.Labels[strata.PriorityClassLabel] = low
			job.Spec.Template.Spec.NodeSelector = map[string]string{host: node}
			Expect(w1.Client.Create(ctx, job)).To(Succeed())
			local = append(local, job)
		}
		for _, job := range local {
			Eventually(func(g Gomega) {
				_, wl := copyOn(g, ctx, w1, job)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job.Name, wl.Status.Conditions)
			}).Should(Succeed())
		}
		hubReads(ctx, "w1", big, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).NotTo(BeEmpty(), "w1's summary tells what preempting would free")
		})

		By("submitting an urgent JobSet on the hub: its driver fits now on the env's flavor, its workers only once the big rack is freed")
		js := splitJobSet(e, urgent)
		Expect(hub.Client.Create(ctx, js)).To(Succeed())
		wantFlavors := []strata.PodSetFlavor{{Name: "driver", Flavor: e.flavor}, {Name: "workers", Flavor: big}}
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Flavor).To(Equal(big))
			g.Expect(wl.Status.Placement.PodSetFlavors).To(Equal(wantFlavors))
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			cp, cwl := jobSetCopyOn(g, ctx, "w1", js)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PodSetFlavorsAnnotation, "driver="+e.flavor+",workers="+big))
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PreemptUpToAnnotation, "10"))
			// The driver goes where the hub reserved it; the workers where
			// the preemption makes room.
			hints, err := workload.DecodeHints(cp.Annotations[strata.TopologyHintAnnotation])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hints).To(HaveKey("driver"))
			g.Expect(hints).NotTo(HaveKey("workers"))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			got := map[string]string{}
			for _, psa := range cwl.Status.Admission.PodSetAssignments {
				got[psa.Name] = psa.Flavor
			}
			g.Expect(got).To(Equal(map[string]string{"driver": e.flavor, "workers": big}))
			g.Expect(dispatch.ChoiceReason(&wl)).To(ContainSubstring("pod set driver on " + e.flavor + " now"))
		}).Should(Succeed())

		By("both low-priority Jobs on w1 were preempted for it")
		Eventually(func(g Gomega) {
			for _, job := range local {
				_, wl := copyOn(g, ctx, w1, job)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPreempted)).To(BeTrue(), "%s: %v", job.Name, wl.Status.Conditions)
			}
		}).Should(Succeed())
	})

	It("reclaims at the hub its queue's quota on the flavor where its workers fit, from a lower-priority Job, and places it split", func(ctx SpecContext) {
		e, big := splitEnv(ctx, "splitrec")
		const low, urgent = "splitrec-low", "splitrec-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, urgent: 500})
		By("the hub's ClusterQueue: 2 CPUs on the env's flavor, 8 on big, preempting lower priorities within itself")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("2")}}
			cq.Spec.Flavors[1].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("8")}}
			cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		By("a low-priority Job of two 4-CPU pods in a rack, on the hub: it takes big's rack and quota")
		lowJob := e.job("low", 2, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		lowJob.Labels[strata.PriorityClassLabel] = low
		Expect(hub.Client.Create(ctx, lowJob)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, lowJob)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Flavor).To(Equal(big))
		}).Should(Succeed())

		By("an urgent JobSet: its driver within quota on the env's flavor, its workers only once big's quota is reclaimed")
		js := splitJobSet(e, urgent)
		Expect(hub.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, lowJob)
			p := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
			g.Expect(p).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(p.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Message).To(ContainSubstring(jobset.Kind.WorkloadName(js.Name)))
			g.Expect(copies(g, ctx, lowJob)).To(BeEmpty())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Placement.PodSetFlavors).To(Equal([]strata.PodSetFlavor{{Name: "driver", Flavor: e.flavor}, {Name: "workers", Flavor: big}}))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, lowJob)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "the quota reclaimed is not given back while the JobSet holds it")
		}, "3s").Should(Succeed())
	})
})

// splitEnv is an env whose ClusterQueues (hub and workers) list two
// flavors: the env's, where w1 has one 2-CPU node, and big (returned),
// where w1 has a rack of two 4-CPU nodes. No other worker has nodes of
// either.
func splitEnv(ctx SpecContext, name string) (*env, string) {
	GinkgoHelper()
	e := newEnv(ctx, name, map[string][][]string{"w1": {{"2"}}})
	big := e.flavor + "-big"
	w1 := worker("w1")
	for _, c := range append([]*framework.Cluster{hub}, workers...) {
		if c != hub {
			Expect(c.Client.Create(ctx, testutil.MakeResourceFlavor(big).NodeLabel("pool", big).TopologyName(topology).Obj())).To(Succeed())
		}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cq strata.ClusterQueue
			if err := c.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq); err != nil {
				return err
			}
			cq.Spec.Flavors = append(cq.Spec.Flavors, strata.FlavorQuotas{Name: big})
			return c.Client.Update(ctx, &cq)
		})).To(Succeed(), c.Name)
	}
	for i := range 2 {
		node := fmt.Sprintf("%s-big-w1-r0-n%d", name, i)
		Expect(framework.CreateReadyNode(ctx, w1.Client, node, map[string]string{"pool": big, rack: "r0", host: node}, "4")).To(Succeed())
	}
	waitSummaries(ctx, big, map[string][][]string{"w1": {{"4", "4"}}})
	return e, big
}

// splitJobSet is a JobSet of a driver (one pod of 2 CPUs) and workers (two
// pods of 4 CPUs), each in a rack: on splitEnv's w1 the driver fits only
// on the env's flavor, the workers only on big. class, when set, is its
// WorkloadPriorityClass.
func splitJobSet(e *env, class string) *jobsetapi.JobSet {
	required := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack}
	driver := testutil.MakeJob("driver", "").Parallelism(1).Completions(1).Request("cpu", "2").PodAnnotations(required).Obj()
	workersJob := testutil.MakeJob("workers", "").Parallelism(2).Completions(2).Indexed().Request("cpu", "4").PodAnnotations(required).Obj()
	js := testutil.MakeJobSet("train", e.ns).Queue("lq").ReplicatedJob(1, driver).ReplicatedJob(1, workersJob).Obj()
	if class != "" {
		js.Labels[strata.PriorityClassLabel] = class
	}
	return js
}
