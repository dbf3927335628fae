package e2e

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/provisioning"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/kwokcluster"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = strata.HostnameLabel
	wait  = 2 * time.Minute
)

func job(name string, pods int32, cpu string) *batchv1.Job {
	return testutil.MakeJob(name, "default").Queue("e2e").Parallelism(pods).Completions(pods).Indexed().Image("fake").
		Request("cpu", cpu).PodAnnotations(map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}).Obj()
}

var _ = Describe("strata-agent on a kwok cluster", Ordered, Label("e2e"), func() {
	BeforeAll(func(ctx SpecContext) {
		By("creating 4 racks of 4 fake nodes, 8 CPUs each")
		for r := range 4 {
			for h := range 4 {
				name := fmt.Sprintf("e2e-r%d-h%d", r, h)
				n := &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
						"pool": "e2e", block: "b1", rack: fmt.Sprintf("rack-%d", r), host: name,
						"type": "kwok",
					}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
					Status: corev1.NodeStatus{
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
						Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
					},
				}
				Expect(kube.Create(ctx, n)).To(Succeed())
			}
		}
		Expect(kube.Create(ctx, testutil.MakeTopology("e2e", block, rack, host).Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeResourceFlavor("e2e").NodeLabel("pool", "e2e").TopologyName("e2e").Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeClusterQueue("e2e").Flavor("e2e").Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeLocalQueue("e2e", "default", "e2e"))).To(Succeed())
	})

	It("runs a rack-required Job with every pod on one rack, to completion", func(ctx SpecContext) {
		j := job("one-rack", 8, "3")
		Expect(kube.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			complete := false
			for _, c := range got.Status.Conditions {
				complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}
			g.Expect(complete).To(BeTrue(), "job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())

		var pods corev1.PodList
		Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
		Expect(pods.Items).To(HaveLen(8))
		racks := map[string]bool{}
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).NotTo(BeEmpty())
			var n corev1.Node
			Expect(kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n)).To(Succeed())
			racks[n.Labels[rack]] = true
		}
		Expect(racks).To(HaveLen(1), "pods ran on racks %v", racks)
	})

	It("moves the pods of a deleted node to a spare node of the same rack, and the Job completes", func(ctx SpecContext) {
		// Pods run for 20 s (kwok's pod-complete stage delay), long enough to
		// lose a node under them.
		j := job("hot-swap", 4, "3") // 2 pods per node: 2 of a rack's 4 nodes
		j.Spec.Template.Annotations[kwokcluster.RunForAnnotation] = "20s"
		Expect(kube.Create(ctx, j)).To(Succeed())
		var running []corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
			running = nil
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running = append(running, p)
				}
			}
			var wl strata.Workload
			_ = kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}, &wl)
			g.Expect(running).To(HaveLen(4), "pods: %d, workload conditions: %+v", len(pods.Items), wl.Status.Conditions)
		}, wait, 200*time.Millisecond).Should(Succeed())
		failed := running[0].Spec.NodeName
		var n corev1.Node
		Expect(kube.Get(ctx, client.ObjectKey{Name: failed}, &n)).To(Succeed())
		rackOf := n.Labels[rack]
		By(fmt.Sprintf("deleting node %s of %s under the running Job", failed, rackOf))
		Expect(kube.Delete(ctx, &n)).To(Succeed())

		replacement := ""
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, "NodeReplacement")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			var hosts []string
			for _, d := range a.Domains {
				hosts = append(hosts, d.Values[0])
			}
			g.Expect(hosts).NotTo(ContainElement(failed))
			for _, h := range hosts {
				if h != running[1].Spec.NodeName && h != running[2].Spec.NodeName && h != running[3].Spec.NodeName {
					replacement = h
				}
			}
			g.Expect(replacement).NotTo(BeEmpty())
		}, wait, 200*time.Millisecond).Should(Succeed())
		var rn corev1.Node
		Expect(kube.Get(ctx, client.ObjectKey{Name: replacement}, &rn)).To(Succeed())
		Expect(rn.Labels[rack]).To(Equal(rackOf), "the replacement is in the same rack")

		// kwok would go on running the pods of a node that is gone; on a real
		// cluster they are lost, and the pod garbage collector deletes them
		// (40 s after the node). The test does that at once.
		By("deleting the pods of the lost node, as the pod garbage collector does")
		for _, p := range running {
			if p.Spec.NodeName == failed {
				Expect(client.IgnoreNotFound(kube.Delete(ctx, &p, client.GracePeriodSeconds(0)))).To(Succeed())
			}
		}
		By("the Job controller recreates them; they run on " + replacement + " and the Job completes")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			complete := false
			for _, c := range got.Status.Conditions {
				complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}
			g.Expect(complete).To(BeTrue(), "job status: %+v", got.Status)
		}, 4*time.Minute, time.Second).Should(Succeed())
		var pods corev1.PodList
		Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
		onReplacement := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded {
				Expect(p.Spec.NodeName).NotTo(Equal(failed))
				if p.Spec.NodeName == replacement {
					onReplacement++
				}
			}
		}
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
		Expect(onReplacement).To(Equal(2), "the recreated pods ran on the replacement; pods: %v", seen)
	})

	It("starts a Job of a queue with an AdmissionCheck only once the check is Ready, with its pod set update, to completion", func(ctx SpecContext) {
		check := &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "e2e-budget"}, Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/budget"}}
		Expect(kube.Create(ctx, check)).To(Succeed())
		meta.SetStatusCondition(&check.Status.Conditions, metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active"})
		Expect(kube.Status().Update(ctx, check)).To(Succeed())
		cq := testutil.MakeClusterQueue("e2e-checks").Flavor("e2e").Obj()
		cq.Spec.AdmissionChecks = []string{check.Name}
		Expect(kube.Create(ctx, cq)).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeLocalQueue("e2e-checks", "default", "e2e-checks"))).To(Succeed())
		j := job("checked", 2, "1")
		j.Labels[strata.QueueNameLabel] = "e2e-checks"
		Expect(kube.Create(ctx, j)).To(Succeed())

		wlKey := client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "quota reserved: %v", wl.Status.Conditions)
			g.Expect(wl.Status.AdmissionChecks).To(ConsistOf(HaveField("State", strata.CheckStatePending)))
		}, wait, time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeTrue(), "the check is Pending")
		}, "3s", "500ms").Should(Succeed())

		By("the check's controller (the test) says Ready, with a label for the pods")
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.AdmissionChecks).To(HaveLen(1))
			wl.Status.AdmissionChecks[0].State, wl.Status.AdmissionChecks[0].LastTransitionTime = strata.CheckStateReady, metav1.Now()
			wl.Status.AdmissionChecks[0].PodSetUpdates = []strata.PodSetUpdate{{Name: wl.Spec.PodSets[0].Name, Labels: map[string]string{"budget": "approved"}}}
			g.Expect(kube.Status().Update(ctx, &wl)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			complete := false
			for _, c := range got.Status.Conditions {
				complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}
			g.Expect(complete).To(BeTrue(), "job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
		var pods corev1.PodList
		Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Labels).To(HaveKeyWithValue("budget", "approved"))
		}
	})

	It("reserves quota for a Job its nodes cannot hold yet, asks the autoscaler for nodes with a ProvisioningRequest, and runs it on them to completion", func(ctx SpecContext) {
		Expect(kube.Create(ctx, testutil.MakeResourceFlavor("e2e-prov").NodeLabel("pool", "e2e-prov").TopologyName("e2e").Obj())).To(Succeed())
		Expect(kube.Create(ctx, &strata.ProvisioningRequestConfig{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scale-up"},
			Spec: strata.ProvisioningRequestConfigSpec{ProvisioningClassName: "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}})).To(Succeed())
		Expect(kube.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scale-up"},
			Spec: strata.AdmissionCheckSpec{ControllerName: strata.ProvisioningRequestControllerName,
				Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "strata.dev", Kind: "ProvisioningRequestConfig", Name: "e2e-scale-up"}}})).To(Succeed())
		cq := testutil.MakeClusterQueue("e2e-prov").Flavor("e2e-prov").Obj()
		cq.Spec.AdmissionChecks = []string{"e2e-scale-up"}
		Expect(kube.Create(ctx, cq)).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeLocalQueue("e2e-prov", "default", "e2e-prov"))).To(Succeed())
		j := job("provisioned", 4, "2")
		j.Labels[strata.QueueNameLabel] = "e2e-prov"
		Expect(kube.Create(ctx, j)).To(Succeed())

		By("quota reserved, the topology delayed, a ProvisioningRequest made")
		wlKey := client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}
		pr := &unstructured.Unstructured{}
		pr.SetGroupVersionKind(provisioning.GVK)
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "quota reserved: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].DelayedTopologyRequest).To(Equal(ptr.To(strata.DelayedTopologyRequestPending)))
			g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: provisioning.RequestName(wl.Name, "e2e-scale-up", 1)}, pr)).To(Succeed())
		}, wait, time.Second).Should(Succeed())

		By("the autoscaler (the test) adds two nodes in a rack and says Provisioned")
		for h := range 2 {
			name := fmt.Sprintf("e2e-prov-h%d", h)
			Expect(kube.Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "e2e-prov", block: "b2", rack: "rack-prov", host: name, "type": "kwok"},
					Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
					Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				},
			})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(pr), pr)).To(Succeed())
			conds := []any{map[string]any{"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "two nodes",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
			g.Expect(unstructured.SetNestedSlice(pr.Object, conds, "status", "conditions")).To(Succeed())
			g.Expect(kube.Status().Update(ctx, pr)).To(Succeed())
		}, wait, time.Second).Should(Succeed())

		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			complete := false
			for _, c := range got.Status.Conditions {
				complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}
			g.Expect(complete).To(BeTrue(), "job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
		var pods corev1.PodList
		Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
		Expect(pods.Items).To(HaveLen(4))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(HavePrefix("e2e-prov-h"), "on a provisioned node")
			Expect(p.Annotations).To(HaveKeyWithValue(provisioning.ConsumesAnnotation, pr.GetName()))
		}
	})

	It("resizes an elastic Job while it runs: pods added are placed and run beside the running ones, none restarted, and it completes", func(ctx SpecContext) {
		j := testutil.MakeJob("elastic", "default").Queue("e2e").Parallelism(2).Completions(2).Indexed().Image("fake").
			Request("cpu", "1").PodAnnotations(map[string]string{kwokcluster.RunForAnnotation: "30s"}).Obj()
		j.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		Expect(kube.Create(ctx, j)).To(Succeed())
		wlKey := client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}
		runningPods := func(g Gomega) map[types.UID]string {
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: wlKey.Name})).To(Succeed())
			out := map[types.UID]string{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
					out[p.UID] = p.Labels[batchv1.JobCompletionIndexAnnotation]
				}
			}
			return out
		}
		var first map[types.UID]string
		Eventually(func(g Gomega) {
			first = runningPods(g)
			g.Expect(first).To(HaveLen(2))
		}, wait, 200*time.Millisecond).Should(Succeed())

		By("grown to 4 pods: two more run, the first two untouched")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			got.Spec.Parallelism, got.Spec.Completions = ptr.To[int32](4), ptr.To[int32](4)
			g.Expect(kube.Update(ctx, &got)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			running := runningPods(g)
			g.Expect(running).To(HaveLen(4))
			for uid := range first {
				g.Expect(running).To(HaveKey(uid), "a first pod was restarted")
			}
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(4)))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadResized)).To(BeTrue(), "%+v", wl.Status.Conditions)
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
		}, wait, 200*time.Millisecond).Should(Succeed())

		By("shrunk to 3: the last index goes, the admission follows, and the Job completes")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			got.Spec.Parallelism, got.Spec.Completions = ptr.To[int32](3), ptr.To[int32](3)
			g.Expect(kube.Update(ctx, &got)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(3)))
		}, wait, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			complete := false
			for _, c := range got.Status.Conditions {
				complete = complete || c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}
			g.Expect(complete).To(BeTrue(), "job status: %+v", got.Status)
			g.Expect(got.Status.Succeeded).To(Equal(int32(3)))
		}, wait, time.Second).Should(Succeed())
	})

	It("keeps a Job too big for any rack waiting, with the reason", func(ctx SpecContext) {
		j := job("too-big", 11, "3") // a rack holds 4 nodes x 2 pods
		Expect(kube.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("rack required: the best rack fits 8 of 11 pods"))
		}, wait, time.Second).Should(Succeed())
		var got batchv1.Job
		Expect(kube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
		Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeTrue())
		Expect(got.Status.Active).To(BeZero())
	})

	It("runs KEP-2724's two-level JobSet with JobSet's own controller: every Job's pods on one host, the JobSet in one block", Label("jobset"), func(ctx SpecContext) {
		js := twoLevelJobSet("two-level", "default", "e2e")
		Expect(kube.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(jobSetCompleted(&got)).To(BeTrue(), "jobset status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
		expectJobsOnOneHostEach(ctx, kube, js)
	})
})
