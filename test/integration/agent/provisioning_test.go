package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/provisioning"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// Kueue's ProvisioningRequest admission check with KEP-2724's delayed
// topology assignment: the agent reserves quota only, asks the cluster
// autoscaler (played here by the test) for capacity with a
// ProvisioningRequest, and once it is Provisioned places the pods on the
// nodes provisioned for them.
var _ = Describe("ProvisioningRequest admission check", Ordered, Label("agent", "admissionchecks"), func() {
	var ns string
	rackRequired := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}

	request := func(g Gomega, ctx SpecContext, job *batchv1.Job, n int) *unstructured.Unstructured {
		wl := workloadOf(g, ctx, job)
		pr := &unstructured.Unstructured{}
		pr.SetGroupVersionKind(provisioning.GVK)
		g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: provisioning.RequestName(wl.Name, "provreq", n)}, pr)).To(Succeed())
		return pr
	}
	setRequest := func(ctx SpecContext, job *batchv1.Job, n int, condition string, details map[string]string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			pr := request(g, ctx, job, n)
			conds := []any{map[string]any{"type": condition, "status": "True", "reason": condition, "message": "the test says " + condition,
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
			g.Expect(unstructured.SetNestedSlice(pr.Object, conds, "status", "conditions")).To(Succeed())
			if details != nil {
				g.Expect(unstructured.SetNestedStringMap(pr.Object, details, "status", "provisioningClassDetails")).To(Succeed())
			}
			g.Expect(worker.Client.Status().Update(ctx, pr)).To(Succeed())
		}, timeout).Should(Succeed())
	}
	expectDelayed := func(ctx SpecContext, job *batchv1.Job) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "quota reserved: %v", wl.Status.Conditions)
			psa := wl.Status.Admission.PodSetAssignments[0]
			g.Expect(psa.TopologyAssignment).To(BeNil())
			g.Expect(psa.DelayedTopologyRequest).To(Equal(ptr.To(strata.DelayedTopologyRequestPending)))
		}, timeout).Should(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("prov-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-prov").NodeLabel("pool", "prov").TopologyName("prov-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, &strata.ProvisioningRequestConfig{ObjectMeta: metav1.ObjectMeta{Name: "prov-config"},
			Spec: strata.ProvisioningRequestConfigSpec{
				ProvisioningClassName: "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
				Parameters:            map[string]string{"ValidUntilSeconds": "60"},
				RetryStrategy:         &strata.ProvisioningRequestRetryStrategy{BackoffLimitCount: ptr.To[int32](1), BackoffBaseSeconds: ptr.To[int32](1), BackoffMaxSeconds: ptr.To[int32](2)},
				PodSetUpdates: &strata.ProvisioningRequestPodSetUpdates{NodeSelector: []strata.ProvisioningRequestPodSetUpdatesNodeSelector{
					{Key: "example.com/node-group", ValueFromProvisioningClassDetail: "nodeGroup"}}},
			}})).To(Succeed())
		Expect(worker.Client.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "provreq"},
			Spec: strata.AdmissionCheckSpec{ControllerName: strata.ProvisioningRequestControllerName,
				Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "strata.dev", Kind: "ProvisioningRequestConfig", Name: "prov-config"}}})).To(Succeed())
		cq := testutil.MakeClusterQueue("prov-q").Flavor("tas-prov").Obj()
		cq.Spec.AdmissionChecks = []string{"provreq"}
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		createPoolNode(ctx, "prov", "prov-1", "b1", "r1", "2")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "prov-q")
	})

	It("marks the check Active", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var ac strata.AdmissionCheck
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "provreq"}, &ac)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(ac.Status.Conditions, strata.AdmissionCheckActive)).To(BeTrue(), "%v", ac.Status.Conditions)
		}, timeout).Should(Succeed())
	})

	It("reserves quota only, asks for the nodes, and once they are provisioned places and starts the Job on them", func(ctx SpecContext) {
		job := newJob(ns, "prov-q", 4, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		By("quota reserved without a topology: the nodes there now cannot hold it")
		expectDelayed(ctx, job)
		By("a ProvisioningRequest and its PodTemplate, as the pods will run")
		var name string
		Eventually(func(g Gomega) {
			pr := request(g, ctx, job, 1)
			name = pr.GetName()
			class, _, _ := unstructured.NestedString(pr.Object, "spec", "provisioningClassName")
			g.Expect(class).To(Equal("best-effort-atomic-scale-up.autoscaling.x-k8s.io"))
			params, _, _ := unstructured.NestedStringMap(pr.Object, "spec", "parameters")
			g.Expect(params).To(HaveKeyWithValue("ValidUntilSeconds", "60"))
			sets, _, _ := unstructured.NestedSlice(pr.Object, "spec", "podSets")
			g.Expect(sets).To(HaveLen(1))
			set := sets[0].(map[string]any)
			g.Expect(set["count"]).To(BeEquivalentTo(4))
			ref := set["podTemplateRef"].(map[string]any)["name"].(string)
			var tpl corev1.PodTemplate
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref}, &tpl)).To(Succeed())
			g.Expect(tpl.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "prov"))
			g.Expect(metav1.IsControlledBy(&tpl, workloadOf(g, ctx, job))).To(BeTrue())
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
		}, "1s", "200ms").Should(Succeed())

		By("the autoscaler provisions a node and says Provisioned")
		Expect(framework.CreateReadyNode(ctx, worker.Client, "prov-2", map[string]string{"pool": "prov", block: "b1", rack: "r2", host: "prov-2",
			"example.com/node-group": "ng-1"}, "8")).To(Succeed())
		setRequest(ctx, job, 1, "Provisioned", map[string]string{"nodeGroup": "ng-1"})
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.AdmissionChecks).To(HaveLen(1))
			g.Expect(wl.Status.AdmissionChecks[0].State).To(Equal(strata.CheckStateReady))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", wl.Status.Conditions)
			psa := wl.Status.Admission.PodSetAssignments[0]
			g.Expect(psa.DelayedTopologyRequest).To(Equal(ptr.To(strata.DelayedTopologyRequestReady)))
			a, err := tas.Decode(psa.TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Domains).To(HaveLen(1))
			g.Expect(a.Domains[0].Values[len(a.Domains[0].Values)-1]).To(Equal("prov-2"), "on the provisioned node")
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(provisioning.ConsumesAnnotation, name))
			g.Expect(j.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("example.com/node-group", "ng-1"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("waits, saying so, while its request's name is held by a request that is not its own", func(ctx SpecContext) {
		job := newJob(ns, "prov-q", 2, rackRequired)
		foreign := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
			"podSets":               []any{map[string]any{"podTemplateRef": map[string]any{"name": "someone-elses"}, "count": int64(1)}},
		}}}
		foreign.SetGroupVersionKind(provisioning.GVK)
		foreign.SetNamespace(ns)
		foreign.SetName(provisioning.RequestName(jobs.WorkloadName(job.Name), "provreq", 1))
		Expect(worker.Client.Create(ctx, foreign)).To(Succeed())
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectDelayed(ctx, job)
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.AdmissionChecks).To(ContainElement(HaveField("Message", ContainSubstring("is not this workload's"))), "%+v", wl.Status.AdmissionChecks)
		}, timeout).Should(Succeed())
		By("that request gone: its own is made")
		Expect(worker.Client.Delete(ctx, foreign)).To(Succeed())
		Eventually(func(g Gomega) {
			pr := request(g, ctx, job, 1)
			g.Expect(metav1.IsControlledBy(pr, workloadOf(g, ctx, job))).To(BeTrue())
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("retries a failed request after its backoff, and rejects the workload once the retries are spent", func(ctx SpecContext) {
		job := newJob(ns, "prov-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		expectDelayed(ctx, job)
		Eventually(func(g Gomega) { request(g, ctx, job, 1) }, timeout).Should(Succeed())
		setRequest(ctx, job, 1, "Failed", nil)
		By("Retry: evicted, reserved again, and a second request after the backoff")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil(), "%+v", wl.Status)
			g.Expect(c.Reason).To(Equal(strata.EvictedByAdmissionCheck))
			g.Expect(wl.Status.AdmissionChecks).To(ContainElement(HaveField("Message", ContainSubstring("provreq-2"))), "%+v", wl.Status)
			request(g, ctx, job, 2)
		}, timeout).Should(Succeed())
		By("the first request, and its PodTemplate, deleted: what it booked goes back to the autoscaler")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			pr := &unstructured.Unstructured{}
			pr.SetGroupVersionKind(provisioning.GVK)
			name := provisioning.RequestName(wl.Name, "provreq", 1)
			g.Expect(apierrors.IsNotFound(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr))).To(BeTrue(), "request %s still there", name)
			var tpls corev1.PodTemplateList
			g.Expect(worker.Client.List(ctx, &tpls, client.InNamespace(ns))).To(Succeed())
			for _, tpl := range tpls.Items {
				g.Expect(tpl.Name).NotTo(ContainSubstring(name), "its PodTemplate still there")
			}
		}, timeout).Should(Succeed())
		setRequest(ctx, job, 2, "Failed", nil)
		By("Rejected: deactivated")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(ptr.Deref(wl.Spec.Active, true)).To(BeFalse())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring(strata.AdmissionCheckRejected))
			g.Expect(c.Message).To(ContainSubstring("no retries left"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
	It("asks for alike pod sets with one PodTemplate (podSetMergePolicy), with the parameters of the job's provreq.kueue.x-k8s.io/ annotations", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var cfg strata.ProvisioningRequestConfig
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "prov-config"}, &cfg)).To(Succeed())
			cfg.Spec.PodSetMergePolicy = ptr.To(strata.IdenticalWorkloadSchedulingRequirements)
			g.Expect(worker.Client.Update(ctx, &cfg)).To(Succeed())
		}, timeout).Should(Succeed())
		// Two replicated jobs alike in what scheduling needs (their images
		// differ), and a third that asks for more.
		job := func(name, image, cpu string, pods int32) *batchv1.Job {
			return testutil.MakeJob(name, "").Parallelism(pods).Completions(pods).Image(image).Request("cpu", cpu).Obj()
		}
		js := testutil.MakeJobSet("merged", ns).Queue("prov-q").ReplicatedJob(1, job("trainer", "train", "1", 2)).
			ReplicatedJob(1, job("evaluator", "eval", "1", 1)).ReplicatedJob(1, job("driver", "drive", "2", 1)).Obj()
		js.Annotations = map[string]string{"provreq.kueue.x-k8s.io/ValidUntilSeconds": "30"}
		Expect(worker.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var wls strata.WorkloadList
			g.Expect(worker.Client.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
			var wl *strata.Workload
			for i := range wls.Items {
				if owner := metav1.GetControllerOf(&wls.Items[i]); owner != nil && owner.Name == js.Name {
					wl = &wls.Items[i]
				}
			}
			g.Expect(wl).NotTo(BeNil())
			g.Expect(wl.Annotations).To(HaveKeyWithValue("provreq.kueue.x-k8s.io/ValidUntilSeconds", "30"))
			pr := &unstructured.Unstructured{}
			pr.SetGroupVersionKind(provisioning.GVK)
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: provisioning.RequestName(wl.Name, "provreq", 1)}, pr)).To(Succeed())
			params, _, _ := unstructured.NestedStringMap(pr.Object, "spec", "parameters")
			g.Expect(params).To(HaveKeyWithValue("ValidUntilSeconds", "30"), "the job's annotation over the config's 60")
			sets, _, _ := unstructured.NestedSlice(pr.Object, "spec", "podSets")
			var counts []int64
			for _, set := range sets {
				counts = append(counts, set.(map[string]any)["count"].(int64))
			}
			g.Expect(counts).To(Equal([]int64{3, 1}), "trainer and evaluator in one PodTemplate, the driver in its own")
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
