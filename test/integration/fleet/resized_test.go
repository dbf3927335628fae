package fleet

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// refuseAdmissions makes worker w refuse, with a policy in force when it
// returns, every admission of a Workload of namespace ns: copies sent
// there wait. remove lifts it.
func refuseAdmissions(ctx SpecContext, w *framework.Cluster, ns string) (remove func(context.Context)) {
	GinkgoHelper()
	remove = denyWith(ctx, w, "no-admission-"+ns, []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		"strata.dev", "v1beta1", "workloads/status",
		fmt.Sprintf("object.metadata.namespace != '%s' || !has(object.status.admission)", ns), "not admitted here yet")
	probe := testutil.MakeWorkload("probe", ns).Queue("no-such-queue").PodSets(testutil.MakePodSet("main", 1, "cpu", "1").Obj()).Obj()
	Expect(w.Client.Create(ctx, probe)).To(Succeed())
	Eventually(func(g Gomega) {
		var wl strata.Workload
		g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(probe), &wl)).To(Succeed())
		wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "f", Count: 1}}}
		err := w.Client.Status().Update(ctx, &wl, client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "the policy is not in force yet: %v", err)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return remove
}

var _ = Describe("A job changed after its dispatch", func() {
	It("evicts its hub Workload, takes the copy back, and dispatches the same Workload again as the job is now", func(ctx SpecContext) {
		e := newEnv(ctx, "resized", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		By("a policy on w1 that refuses admitting the spec's Workloads, so that the copy waits there")
		remove := refuseAdmissions(ctx, w1, e.ns)

		job := e.job("resized", 1, "1", nil)
		job.Spec.Completions = ptr.To[int32](4)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var uid types.UID
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).To(BeNil())
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To[int32](1)))
			uid = wl.UID
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the Job's parallelism raised to 2 on the hub before w1 admits it")
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			job.Spec.Parallelism = ptr.To[int32](2)
			g.Expect(hub.Client.Update(ctx, job)).To(Succeed())
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.UID).To(Equal(uid), "the Workload was replaced")
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(2)))
			var evicted *strata.PlacementAttempt
			for i, a := range wl.Status.Placement.Attempts {
				if a.DispatchGeneration == 1 {
					evicted = &wl.Status.Placement.Attempts[i]
				}
			}
			g.Expect(evicted).NotTo(BeNil(), "attempts: %v", wl.Status.Placement.Attempts)
			g.Expect(evicted.Result).To(Equal(strata.PlacementEvicted), "attempts: %v", wl.Status.Placement.Attempts)
			g.Expect(evicted.Message).To(ContainSubstring("the pod sets of the Job changed after the Workload was dispatched to w1"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("admitted on w1 as it is now, once w1 admits again: one copy, of the new dispatch")
		remove(ctx)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.UID).To(Equal(uid))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(2)))
			g.Expect(wl.Status.Placement.DispatchGeneration).To(BeNumerically(">", 1))
			cp, cwl := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To[int32](2)))
			g.Expect(cp.Labels[strata.DispatchGenerationLabel]).To(Equal(fmt.Sprint(wl.Status.Placement.DispatchGeneration)))
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
})

var _ = Describe("A job resized after its admission", func() {
	It("is stopped as Kueue stops a job its Workload no longer matches: its copy is taken back and the same Workload dispatched again as the job is now", func(ctx SpecContext) {
		e := newEnv(ctx, "resized-admitted", map[string][][]string{"w1": {{"4", "4"}}})
		w1 := worker("w1")
		job := e.job("resized", 2, "1", nil)
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var uid types.UID
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			uid = wl.UID
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the Job's parallelism and completions raised to 3 on the hub while its copy runs")
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](3), ptr.To[int32](3)
			g.Expect(hub.Client.Update(ctx, job)).To(Succeed())
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.UID).To(Equal(uid), "the Workload was replaced")
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(3)))
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			first := wl.Status.Placement.Attempts[0]
			g.Expect(first.DispatchGeneration).To(Equal(int64(1)))
			g.Expect(first.Result).To(Equal(strata.PlacementEvicted), "attempts: %v", wl.Status.Placement.Attempts)
			g.Expect(first.Message).To(ContainSubstring("the pod sets of the Job changed after the Workload was dispatched to w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(3)))
			g.Expect(wl.Status.Placement.DispatchGeneration).To(BeNumerically(">", 1))
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Spec.Parallelism).To(Equal(ptr.To[int32](3)))
			g.Expect(cp.Labels[strata.DispatchGenerationLabel]).To(Equal(fmt.Sprint(wl.Status.Placement.DispatchGeneration)))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
})

var _ = Describe("A copy relabelled before its worker admits it", Label("fencing"), func() {
	It("is revoked in its worker's fencing Lease before its workload is placed elsewhere", func(ctx SpecContext) {
		e := newEnv(ctx, "unadmitted", map[string][][]string{"w1": {{"4"}}})
		w1 := worker("w1")
		By("a policy on w1 that refuses admitting the spec's Workloads, so that the copy waits there")
		refuseAdmissions(ctx, w1, e.ns)
		j := e.job("relabelled", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		var uid types.UID
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			cp, cwl := copyOn(g, ctx, w1, j)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cwl).NotTo(BeNil(), "the agent made the copy's Workload")
			uid = wl.UID
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		e.createNode(ctx, worker("w2"), "unadmitted-w2-n0", "r0", "4")

		By("a tenant of w1 takes the hub's origin off the copy's Job and forges its hub Workload UID")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w1, j)
			g.Expect(cp).NotTo(BeNil())
			delete(cp.Labels, strata.OriginLabel)
			cp.Labels[strata.HubWorkloadUIDLabel] = "forged"
			g.Expect(w1.Client.Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())

		By("once the hub gives up the dispatch, w1's Lease already lists it as revoked (the suite renews every 2 minutes)")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			g.Expect(wl.Status.Placement.Attempts[0].Result).NotTo(Equal(strata.PlacementDispatched), "attempts: %v", wl.Status.Placement.Attempts)
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		lease := fenceLease(Default, ctx, "w1")
		Expect(lease.Annotations[strata.RevokedDispatchesAnnotation]).To(ContainSubstring(string(uid)+"/1"),
			"the dispatch was given up before w1's agent could know it is revoked")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
})
