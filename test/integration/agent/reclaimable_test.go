package agent

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's reclaimable pods: the pods of a Job that finished for good free
// their nodes and their quota before the Job ends.
var _ = Describe("Reclaimable pods", Ordered, Label("agent", "admission"), func() {
	It("frees the hosts of a Job's succeeded pods at once: a host-required Job fits there while the first Job still runs", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("reclaim-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-reclaim").NodeLabel("pool", "reclaim").TopologyName("reclaim-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("reclaim-q").Flavor("tas-reclaim").Obj())).To(Succeed())
		createPoolNode(ctx, "reclaim", "reclaim-1", "b1", "r1", "2")
		createPoolNode(ctx, "reclaim", "reclaim-2", "b1", "r1", "2")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "reclaim-q")

		first := newJob(ns, "reclaim-q", 4, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		expectAdmitted(ctx, first)
		second := newJob(ns, "reclaim-q", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": host})
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) { workloadOf(g, ctx, second) }, timeout).Should(Succeed())
		expectNotAdmitted(ctx, second, "the first Job takes both hosts")

		By("two of the first Job's pods succeed on reclaim-2, and its status says so")
		for i := range 2 {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", first.Name, i), Namespace: ns, Labels: map[string]string{
					strata.WorkloadLabel: jobs.WorkloadName(first.Name), strata.PodSetLabel: "main", strata.TASLabel: "true",
				}, OwnerReferences: jobOwner(first)},
				Spec: corev1.PodSpec{NodeName: "reclaim-2", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}
			Expect(worker.Client.Create(ctx, p)).To(Succeed())
			p.Status.Phase = corev1.PodSucceeded
			Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(first), &j)).To(Succeed())
			j.Status.Succeeded = 2
			g.Expect(worker.Client.Status().Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(g, ctx, first).Status.ReclaimablePods).To(Equal([]strata.ReclaimablePod{{Name: "main", Count: 2}}))
		}, timeout).Should(Succeed())

		By("the second Job is admitted on the host the pods freed, the first one still admitted")
		Expect(admittedHostsOf(ctx, second)).To(Equal(map[string]int32{"reclaim-2": 2}))
		Expect(workloadOf(Default, ctx, first).Status.Admission).NotTo(BeNil())

		By("deactivated, then lowered to the two pods it has left, the first Job's Workload counts no reclaimable pod any more")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, first)
			wl.Spec.Active = ptr.To(false)
			g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(first), &j)).To(Succeed())
			g.Expect(j.Spec.Suspend).To(HaveValue(BeTrue()))
			j.Spec.Parallelism = ptr.To[int32](2)
			g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, first)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(2)))
			// Kept, its next admission would charge 2 - 2 = 0 pods for
			// the two it runs.
			g.Expect(wl.Status.ReclaimablePods).To(BeEmpty())
		}, timeout).Should(Succeed())

		for _, j := range []client.Object{first, second} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})

// admittedHostsOf waits for the Job's admission and returns its pods per host.
func admittedHostsOf(ctx SpecContext, job *batchv1.Job) map[string]int32 {
	GinkgoHelper()
	out := map[string]int32{}
	Eventually(func(g Gomega) {
		clear(out)
		wl := workloadOf(g, ctx, job)
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
		g.Expect(err).NotTo(HaveOccurred())
		for _, d := range a.Domains {
			out[d.Values[len(d.Values)-1]] += d.Count
		}
	}, timeout).Should(Succeed())
	return out
}
