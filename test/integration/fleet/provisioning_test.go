package fleet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/provisioning"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/test/integration/framework"
)

// A Job that fits no worker's nodes now goes to the worker whose queue
// provisions nodes for it (a ProvisioningRequest admission check,
// KEP-2724's delayed topology assignment): the worker reserves quota, asks
// the cluster autoscaler (played by the test) for nodes, and runs the Job
// on them; the hub records the reservation as the dispatch's admission.
var _ = Describe("A worker that provisions nodes", func() {
	It("takes a Job no worker's nodes can hold now, and runs it on the nodes provisioned for it", func(ctx SpecContext) {
		e := newEnv(ctx, "provision", map[string][][]string{"w1": {{"2", "2"}}, "w2": {{"2", "2"}}})
		w2 := worker("w2")
		const check, config = "provision-autoscaler", "provision-config"
		Expect(w2.Client.Create(ctx, &strata.ProvisioningRequestConfig{ObjectMeta: metav1.ObjectMeta{Name: config},
			Spec: strata.ProvisioningRequestConfigSpec{ProvisioningClassName: "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}})).To(Succeed())
		Expect(w2.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check},
			Spec: strata.AdmissionCheckSpec{ControllerName: strata.ProvisioningRequestControllerName,
				Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "strata.dev", Kind: "ProvisioningRequestConfig", Name: config}}})).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			_ = client.IgnoreNotFound(w2.Client.Delete(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check}}))
			_ = client.IgnoreNotFound(w2.Client.Delete(ctx, &strata.ProvisioningRequestConfig{ObjectMeta: metav1.ObjectMeta{Name: config}}))
		})
		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(w2.Client.Get(ctx, client.ObjectKey{Name: check}, &ac)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(ac.Status.Conditions, strata.AdmissionCheckActive)).To(BeTrue(), "%v", ac.Status.Conditions)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(w2.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.AdmissionChecks = []string{check}
			g.Expect(w2.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		By("w2's summary says its queue provisions nodes on the flavor")
		Eventually(func(g Gomega) {
			var cs strata.CapacitySummary
			g.Expect(w2.Client.Get(ctx, client.ObjectKey{Name: e.flavor}, &cs)).To(Succeed())
			g.Expect(cs.Status.Queues).To(ContainElement(strata.QueueUsage{Name: "cq-" + e.name, Provisions: true}))
		}).Should(Succeed())

		// Four pods of 2 CPUs in one rack: each worker has a rack of two
		// such nodes.
		job := e.job("big", 4, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		By("dispatched to w2, whose queue reserves its quota alone and asks for nodes")
		var copyName string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.TopologyHint).To(BeEmpty())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring("ProvisioningRequest check asks the cluster autoscaler for are provisioned"))
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			g.Expect(wl.Status.Placement.Attempts[len(wl.Status.Placement.Attempts)-1].Message).To(ContainSubstring("provisions nodes for it"))
			_, cwl := copyOn(g, ctx, w2, job)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments[0].DelayedTopologyRequest).To(Equal(ptr.To(strata.DelayedTopologyRequestPending)))
			copyName = cwl.Name
			pr := &unstructured.Unstructured{}
			pr.SetGroupVersionKind(provisioning.GVK)
			g.Expect(w2.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: provisioning.RequestName(cwl.Name, check, 1)}, pr)).To(Succeed())
		}).Should(Succeed())
		expectNoCopy(ctx, worker("w1"), job)

		By("the autoscaler adds two nodes to the rack and says Provisioned: the copy is placed on the rack and runs")
		e.createNode(ctx, w2, "provision-w2-r0-n2", "r0", "2")
		e.createNode(ctx, w2, "provision-w2-r0-n3", "r0", "2")
		Eventually(func(g Gomega) {
			pr := &unstructured.Unstructured{}
			pr.SetGroupVersionKind(provisioning.GVK)
			g.Expect(w2.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: provisioning.RequestName(copyName, check, 1)}, pr)).To(Succeed())
			conds := []any{map[string]any{"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "the test provisioned it",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
			g.Expect(unstructured.SetNestedSlice(pr.Object, conds, "status", "conditions")).To(Succeed())
			g.Expect(w2.Client.Status().Update(ctx, pr)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cp, cwl := copyOn(g, ctx, w2, job)
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(cwl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", cwl.Status.Conditions)
			a, err := tas.Decode(cwl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Domains).To(HaveLen(4), "one pod on each node of the rack")
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse(), "the copy runs")
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).NotTo(ContainSubstring("ProvisioningRequest"))
		}).Should(Succeed())
		expectNoCopy(ctx, worker("w1"), job)
	})
})

// expectNoCopy checks that a worker has no copy of a hub Job.
func expectNoCopy(ctx context.Context, w *framework.Cluster, job *batchv1.Job) {
	GinkgoHelper()
	var j batchv1.Job
	err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)
	Expect(client.IgnoreNotFound(err)).To(Succeed())
	Expect(err).To(HaveOccurred(), "a copy on %s", w.Name)
}
