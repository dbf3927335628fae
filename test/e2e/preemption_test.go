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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/kwokcluster"
)

var _ = Describe("preemption on a kwok worker", Ordered, Label("e2e", "jobset", "preemption"), func() {
	const pool = "e2e-preempt"
	// Two blocks of one rack of two 8-CPU hosts: pb<b>-h<h>.
	hostName := func(b, h int) string { return fmt.Sprintf("pb%d-h%d", b, h) }

	BeforeAll(func(ctx SpecContext) {
		for b := range 2 {
			for h := range 2 {
				name := hostName(b, h)
				n := &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
						"pool": pool, block: fmt.Sprintf("pblock-%d", b), rack: fmt.Sprintf("prack-%d", b), host: name, "type": "kwok",
					}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
					Status: corev1.NodeStatus{
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
						Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
					},
				}
				Expect(kube.Create(ctx, n)).To(Succeed())
				DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(kube.Delete(ctx, n))).To(Succeed()) })
			}
		}
		objs := []client.Object{
			testutil.MakeTopology(pool, block, rack, host).Obj(),
			testutil.MakeResourceFlavor(pool).NodeLabel("pool", pool).TopologyName(pool).Obj(),
			// Quota above the 32 CPUs of the four hosts: the topology alone
			// decides. With quota 32, a preempted Job could preempt again
			// by quota in the moment the JobSet's pods are done but its
			// Workload still holds its quota (a legitimate preemption the
			// spec does not expect).
			testutil.MakeClusterQueue(pool).ResourceGroup("cpu").GroupFlavor(pool, "64").
				Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj(),
			testutil.MakeLocalQueue(pool, "default", pool),
			testutil.MakeWorkloadPriorityClass("e2e-p1", 1),
			testutil.MakeWorkloadPriorityClass("e2e-p2", 2),
			testutil.MakeWorkloadPriorityClass("e2e-p3", 3),
			testutil.MakeWorkloadPriorityClass("e2e-p5", 5),
			testutil.MakeWorkloadPriorityClass("e2e-p100", 100),
		}
		for _, o := range objs {
			Expect(kube.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(kube.Delete(ctx, o))).To(Succeed()) })
		}
	})

	It("a high-priority JobSet preempts the minimum low-priority Jobs, in one block, and then runs", func(ctx SpecContext) {
		By("four low-priority Jobs fill the four hosts, one each, for a long time")
		type low struct {
			name, class string
			b, h        int
		}
		lows := []low{{"low-a", "e2e-p1", 0, 0}, {"low-b", "e2e-p2", 1, 0}, {"low-c", "e2e-p5", 0, 1}, {"low-d", "e2e-p3", 1, 1}}
		byName := map[string]*batchv1.Job{}
		for _, l := range lows {
			j := testutil.MakeJob(l.name, "default").Queue(pool).Parallelism(1).Completions(1).Indexed().Image("fake").Request("cpu", "8").
				PodAnnotations(map[string]string{kwokcluster.RunForAnnotation: "10m"}).Obj()
			j.Labels[strata.PriorityClassLabel] = l.class
			j.Spec.Template.Spec.NodeSelector = map[string]string{host: hostName(l.b, l.h)}
			Expect(kube.Create(ctx, j)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(kube.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
			})
			byName[l.name] = j
			// One at a time, each on its host.
			Eventually(func(g Gomega) {
				var pods corev1.PodList
				g.Expect(kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(j.Name)})).To(Succeed())
				g.Expect(pods.Items).To(HaveLen(1))
				g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			}, wait, 200*time.Millisecond).Should(Succeed())
		}

		By("a JobSet of priority 100 that needs a whole block (2 Jobs of 2 pods of 4 CPUs, each Job on one host)")
		workers := testutil.MakeJob("workers", "").Parallelism(2).Completions(2).Indexed().Image("fake").Request("cpu", "4").
			PodAnnotations(map[string]string{
				"kueue.x-k8s.io/podset-required-topology":       block,
				"kueue.x-k8s.io/podset-slice-required-topology": host,
				"kueue.x-k8s.io/podset-slice-size":              "2",
			}).Obj()
		js := testutil.MakeJobSet("urgent", "default").Queue(pool).ReplicatedJob(2, workers).Obj()
		js.Labels[strata.PriorityClassLabel] = "e2e-p100"
		Expect(kube.Create(ctx, js)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(kube.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
		})

		By("it completes, in one block")
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(jobSetCompleted(&got)).To(BeTrue(), "jobset status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())

		By("exactly two low Jobs were preempted, both in one block; the other two run on")
		// Candidates by priority: low-a (1), low-b (2), low-d (3), low-c
		// (5). low-a and low-b free one host in each block; low-d frees
		// block 1 with low-b; low-a, in the other block, is put back. The
		// two lowest (low-a, low-b) would free no block.
		preempted := map[string]bool{}
		for name, j := range byName {
			var wl strata.Workload
			Expect(kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: jobs.WorkloadName(j.Name)}, &wl)).To(Succeed())
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
				Expect(c.Reason).To(Equal(strata.PreemptedInClusterQueue))
				Expect(c.Message).To(ContainSubstring("(priority 100)"))
				preempted[name] = true
			}
		}
		Expect(preempted).To(Equal(map[string]bool{"low-b": true, "low-d": true}))
		for _, name := range []string{"low-a", "low-c"} {
			var got batchv1.Job
			Expect(kube.Get(ctx, client.ObjectKeyFromObject(byName[name]), &got)).To(Succeed())
			Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeFalse(), "%s was not preempted and runs on", name)
		}
	})
})
