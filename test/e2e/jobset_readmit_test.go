package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/kwokcluster"
)

// A JobSet evicted and admitted again on a flavor whose node labels have
// other keys runs on the second flavor's nodes: the JobSet controller
// merges the JobSet's templates into its existing Jobs on resume, so the
// first admission's node selector must have left them.
// readmitTaint keeps the nodes of the spec below to its own pods.
var readmitTaint = corev1.Taint{Key: "e2e.strata.dev/readmit", Effect: corev1.TaintEffectNoSchedule}

var _ = Describe("a JobSet admitted again on another flavor", Ordered, Label("e2e"), func() {
	const queue = "readmit"
	BeforeAll(func(ctx SpecContext) {
		By("two pools of 2 fake nodes of 4 CPUs, their flavors told by different label keys")
		for _, pool := range []struct{ key, value string }{{"readmit-a", "a"}, {"readmit-b", "b"}} {
			for h := range 2 {
				name := fmt.Sprintf("%s-h%d", pool.key, h)
				n := &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pool.key: pool.value, host: name, "type": "kwok"},
						Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
					// Only pods admitted on these flavors (which tolerate it)
					// go there: no other spec's pods take their room.
					Spec: corev1.NodeSpec{Taints: []corev1.Taint{readmitTaint}},
					Status: corev1.NodeStatus{
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
						Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
					},
				}
				Expect(kube.Create(ctx, n)).To(Succeed())
				DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(kube.Delete(ctx, n))).To(Succeed()) })
			}
		}
		flavorA := testutil.MakeResourceFlavor("readmit-a").NodeLabel("readmit-a", "a").TopologyName("readmit").Obj()
		flavorB := testutil.MakeResourceFlavor("readmit-b").NodeLabel("readmit-b", "b").TopologyName("readmit").Obj()
		for _, f := range []*strata.ResourceFlavor{flavorA, flavorB} {
			f.Spec.Tolerations = []corev1.Toleration{{Key: readmitTaint.Key, Operator: corev1.TolerationOpExists, Effect: readmitTaint.Effect}}
		}
		objs := []client.Object{
			testutil.MakeTopology("readmit", host).Obj(),
			flavorA, flavorB,
			testutil.MakeClusterQueue(queue).ResourceGroup("cpu").GroupFlavor("readmit-a", "8").GroupFlavor("readmit-b", "8").Obj(),
			testutil.MakeLocalQueue(queue, "default", queue),
		}
		for _, o := range objs {
			Expect(kube.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(kube.Delete(ctx, o))).To(Succeed()) })
		}
	})

	It("runs its pods on the second flavor's nodes", func(ctx SpecContext) {
		workers := testutil.MakeJob("workers", "").Parallelism(1).Completions(1).Image("fake").Request("cpu", "1").
			PodAnnotations(map[string]string{kwokcluster.RunForAnnotation: "10m"}).Obj()
		js := testutil.MakeJobSet("readmit", "default").Queue(queue).ReplicatedJob(2, workers).Obj()
		Expect(kube.Create(ctx, js)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(kube.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
		})
		wlKey := client.ObjectKey{Namespace: "default", Name: jobset.Kind.WorkloadName(js.Name)}
		runningOn := func(g Gomega, key string) {
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{jobsetapi.JobSetNameKey: js.Name})).To(Succeed())
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || !p.DeletionTimestamp.IsZero() {
					continue
				}
				g.Expect(p.Spec.NodeName).To(HavePrefix(key+"-"), "pod %s, node selector %v", p.Name, p.Spec.NodeSelector)
				running++
			}
			var wl strata.Workload
			_ = kube.Get(ctx, wlKey, &wl)
			var got jobsetapi.JobSet
			_ = kube.Get(ctx, client.ObjectKeyFromObject(js), &got)
			g.Expect(running).To(Equal(2), "workload %+v; jobset spec.suspend %v, status %+v", wl.Status, got.Spec.Suspend, got.Status)
		}

		By("admitted on one flavor, its two pods run there")
		var first string
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.Status.Admission.PodSetAssignments[0].Flavor
			runningOn(g, first)
		}, wait, time.Second).Should(Succeed())
		second := map[string]string{"readmit-a": "readmit-b", "readmit-b": "readmit-a"}[first]

		By("deactivated: the agent takes the admission back, the JobSet stops")
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			wl.Spec.Active = ptr.To(false)
			g.Expect(kube.Update(ctx, &wl)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{jobsetapi.JobSetNameKey: js.Name})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			var got jobsetapi.JobSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(strata.AddedByAdmissionAnnotation), "the admission is taken back")
		}, wait, time.Second).Should(Succeed())

		By("the first flavor's quota gone, activated again: admitted on the other flavor, its pods run there")
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(kube.Get(ctx, client.ObjectKey{Name: queue}, &cq)).To(Succeed())
			for i := range cq.Spec.ResourceGroups[0].Flavors {
				if fq := &cq.Spec.ResourceGroups[0].Flavors[i]; fq.Name == first {
					fq.Resources[0].NominalQuota = resource.MustParse("0")
				}
			}
			g.Expect(kube.Update(ctx, &cq)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			wl.Spec.Active = ptr.To(true)
			g.Expect(kube.Update(ctx, &wl)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(kube.Get(ctx, wlKey, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Flavor).To(Equal(second))
			runningOn(g, second)
		}, wait, time.Second).Should(Succeed())
	})
})
