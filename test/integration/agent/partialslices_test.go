package agent

import (
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// A slice size that does not divide the pod count: Invalid by default, as
// KEP-2724 says; with topologyAwareScheduling.partialSlices (Kueue v0.20's
// TASPartialSlices) it leaves one partial slice, held by one domain and
// ranked last.
var _ = Describe("Partial slices", Ordered, Label("agent", "admission"), func() {
	rackOf := map[string]string{}
	var ns string
	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("partial-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-partial").NodeLabel("pool", "partial").TopologyName("partial-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("partial-q").Flavor("tas-partial").Obj())).To(Succeed())
		// One block, two racks of two 4-CPU hosts: a rack holds 8 pods,
		// two slices of 4 but not also the partial one.
		for _, n := range [][2]string{{"partial-r1-h1", "r1"}, {"partial-r1-h2", "r1"}, {"partial-r2-h1", "r2"}, {"partial-r2-h2", "r2"}} {
			createPoolNode(ctx, "partial", n[0], "b1", n[1], "4")
			rackOf[n[0]] = n[1]
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "partial-q")
	})
	sliced := func(name string) *batchv1.Job {
		job := newJob(ns, "partial-q", 10, map[string]string{
			"kueue.x-k8s.io/podset-required-topology":       block,
			"kueue.x-k8s.io/podset-slice-required-topology": rack,
			"kueue.x-k8s.io/podset-slice-size":              "4",
		})
		job.Name = name
		return job
	}

	It("marks 10 pods in rack slices of 4 Invalid by default (KEP-2724: the size must divide the pod count)", func(ctx SpecContext) {
		job := sliced("kep")
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonInvalidJob))
			g.Expect(c.Message).To(ContainSubstring(`spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: "4": ` +
				`the slice size 4 must evenly divide the pod count 10 (KEP-2724); for the last 2 pods to form one partial slice (Kueue's TASPartialSlices), ` +
				`set topologyAwareScheduling.partialSlices`))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(workloadOf(g, ctx, job).Status.Admission).To(BeNil())
		}, "1s").Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("with partialSlices, admits 10 pods in rack slices of 4: two whole slices in one rack, the partial one of 2 in the other, ranked last", func(ctx SpecContext) {
		stopAgent()
		stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
			cfg.TopologyAwareScheduling.PartialSlices = true
		})
		DeferCleanup(func() {
			stopAgent()
			stopAgent = startAgent()
		})
		job := sliced("partial")
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectAdmitted(ctx, job)

		By("the assignment: 8 pods in one rack, then 2 in the other")
		var racks []string
		var counts []int32
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			racks, counts = nil, nil
			for _, d := range a.Domains {
				r := rackOf[d.Values[0]]
				if n := len(racks); n > 0 && racks[n-1] == r {
					counts[n-1] += d.Count
					continue
				}
				racks, counts = append(racks, r), append(counts, d.Count)
			}
		}, timeout).Should(Succeed())
		Expect(counts).To(Equal([]int32{8, 2}), "racks %v", racks)

		By("the pods are ungated with contiguous ranks: 0-7 in the first rack, 8-9 in the second")
		createPods(ctx, job, 9, 3, 0, 8, 5, 1, 7, 2, 6, 4)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns),
				client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(10))
			for _, p := range pods.Items {
				g.Expect(slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool {
					return sg.Name == strata.TopologySchedulingGate
				})).To(BeFalse(), "pod %s is still gated", p.Name)
				var idx int
				_, err := fmt.Sscan(p.Labels[strata.JobCompletionIndexLabel], &idx)
				g.Expect(err).NotTo(HaveOccurred())
				want := racks[0]
				if idx >= 8 {
					want = racks[1]
				}
				g.Expect(rackOf[p.Spec.NodeSelector[host]]).To(Equal(want), "pod of index %d", idx)
			}
		}, timeout).Should(Succeed())

		By("an agent restarted without partialSlices: the admitted Job keeps running, not Invalid")
		stopAgent()
		stopAgent = startAgent()
		Consistently(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid)).To(BeFalse())
		}, "2s").Should(Succeed())

		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
