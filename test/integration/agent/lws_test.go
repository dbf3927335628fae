package agent

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	lwsjobs "strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// hostLWS is KEP-2724's "Co-locate Leader with Workers" example: replicas
// groups of a leader and two workers of 1 CPU, each group on one host.
func hostLWS(ns, queue, name string, replicas int32) *lwsapi.LeaderWorkerSet {
	ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"}
	return testutil.MakeLeaderWorkerSet(name, ns).Queue(queue).Replicas(replicas).Size(3).Defaulted().PodLabel("app", name).
		Request("cpu", "1").LeaderAnnotations(ann).WorkerAnnotations(ann).Obj()
}

// lwsPods creates the pods of a group as the LeaderWorkerSet controller
// does — the leader from its StatefulSet, the workers from the group's —
// from the created set's templates (gates included), in a random order.
func lwsPods(ctx SpecContext, l *lwsapi.LeaderWorkerSet, group int32) {
	GinkgoHelper()
	lwsPodsAt(ctx, l, group, "", "")
}

// lwsPodsAt is lwsPods with the template revision label the set's
// controller gives its pods (none when revision is empty), and suffix
// after each pod's name.
func lwsPodsAt(ctx SpecContext, l *lwsapi.LeaderWorkerSet, group int32, revision, suffix string) []*corev1.Pod {
	GinkgoHelper()
	var got lwsapi.LeaderWorkerSet
	Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
	size := lwsjobs.Size(&got)
	var pods []*corev1.Pod
	for w := range size {
		tmpl := got.Spec.LeaderWorkerTemplate.WorkerTemplate.DeepCopy()
		name, sts := fmt.Sprintf("%s-%d-%d", l.Name, group, w), fmt.Sprintf("%s-%d", l.Name, group)
		if w == 0 {
			if got.Spec.LeaderWorkerTemplate.LeaderTemplate != nil {
				tmpl = got.Spec.LeaderWorkerTemplate.LeaderTemplate.DeepCopy()
			}
			name, sts = fmt.Sprintf("%s-%d", l.Name, group), l.Name
		}
		labels := map[string]string{lwsjobs.NameLabel: l.Name, lwsjobs.GroupIndexLabel: strconv.Itoa(int(group)), lwsjobs.WorkerIndexLabel: strconv.Itoa(int(w))}
		for k, v := range tmpl.Labels {
			labels[k] = v
		}
		if revision != "" {
			labels[lwsjobs.RevisionLabel] = revision
		}
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + suffix, Namespace: l.Namespace, Labels: labels, Annotations: tmpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts, UID: types.UID("sts-" + sts), Controller: ptr.To(true)}}},
			Spec: tmpl.Spec,
		})
	}
	rand.Shuffle(len(pods), func(a, b int) { pods[a], pods[b] = pods[b], pods[a] })
	for _, p := range pods {
		Expect(worker.Client.Create(ctx, p)).To(Succeed())
	}
	return pods
}

// setCPUQuota sets the CPU quota of the first flavor of ClusterQueue
// lws-q.
func setCPUQuota(ctx SpecContext, quota string) {
	const cq = "lws-q"
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var q strata.ClusterQueue
		g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: cq}, &q)).To(Succeed())
		q.Spec.Flavors[0].Resources[0].NominalQuota = resource.MustParse(quota)
		g.Expect(worker.Client.Update(ctx, &q)).To(Succeed())
	}, timeout).Should(Succeed())
}

// scale sets a LeaderWorkerSet's replicas.
func scale(ctx SpecContext, l *lwsapi.LeaderWorkerSet, replicas int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var got lwsapi.LeaderWorkerSet
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
		got.Spec.Replicas = ptr.To(replicas)
		g.Expect(worker.Client.Update(ctx, &got)).To(Succeed())
	}, timeout).Should(Succeed())
}

func groupWorkload(g Gomega, ctx SpecContext, l *lwsapi.LeaderWorkerSet, group int32) *strata.Workload {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: lwsjobs.GroupWorkloadName(l.Name, group)}, &wl)).To(Succeed())
	return &wl
}

var _ = Describe("LeaderWorkerSet", Ordered, Label("agent", "lws"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("lws-topology", block, rack, host).Obj())).To(Succeed())
		flavor := testutil.MakeResourceFlavor("tas-lws").NodeLabel("pool", "lws").TopologyName("lws-topology").Obj()
		flavor.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/inference", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(worker.Client.Create(ctx, flavor)).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("lws-q").Flavor("tas-lws", "cpu", "64").Obj())).To(Succeed())
		// Two racks of two hosts of 3 CPUs: a group of three on each.
		for i := range 4 {
			createPoolNode(ctx, "lws", fmt.Sprintf("lws-r%d-h%d", i/2+1, i), "b1", fmt.Sprintf("r%d", i/2+1), "3")
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "lws-q")
	})

	It("runs KEP-2724's example: each group of a leader and two workers gated until admitted, then on one host, leader first in rank", func(ctx SpecContext) {
		l := hostLWS(ns, "lws-q", "tas-example-lws", 2)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		gate := corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}
		Expect(l.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.SchedulingGates).To(ConsistOf(gate), "the chart's admission policy gates the templates")
		Expect(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates).To(ConsistOf(gate))

		By("one Workload per group, leader and worker pod sets, grouped, each admitted on one host")
		hosts := map[int32]string{}
		Eventually(func(g Gomega) {
			for group := range int32(2) {
				wl := groupWorkload(g, ctx, l, group)
				g.Expect(metav1.IsControlledBy(wl, l)).To(BeTrue())
				g.Expect(wl.Spec.PodSets).To(HaveLen(2))
				g.Expect(wl.Spec.PodSets[0].Name).To(Equal(lwsjobs.Leader))
				g.Expect(wl.Spec.PodSets[1].Count).To(Equal(int32(2)))
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "group %d: %v", group, wl.Status.Conditions)
				var onHosts []string
				for _, psa := range wl.Status.Admission.PodSetAssignments {
					a, err := tas.Decode(psa.TopologyAssignment)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(a.Domains).To(HaveLen(1))
					onHosts = append(onHosts, a.Domains[0].Values[len(a.Domains[0].Values)-1])
				}
				g.Expect(onHosts).To(HaveLen(2))
				g.Expect(onHosts[0]).To(Equal(onHosts[1]), "group %d: leader and workers on one host", group)
				hosts[group] = onHosts[0]
			}
			g.Expect(hosts[0]).NotTo(Equal(hosts[1]))
		}, timeout).Should(Succeed())

		By("the pods, created in any order, labelled with their group's Workload and released onto its host with the flavor's labels and tolerations")
		for group := range int32(2) {
			lwsPods(ctx, l, group)
		}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(6))
			for _, p := range pods.Items {
				group, podSet, ok := lwsjobs.PodOf(l, &p)
				g.Expect(ok).To(BeTrue())
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, lwsjobs.GroupWorkloadName(l.Name, group)))
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.PodSetLabel, podSet))
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(host, hosts[group]), "pod %s", p.Name)
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("pool", "lws"))
				g.Expect(p.Spec.Tolerations).To(ContainElement(HaveField("Key", "example.com/inference")))
			}
		}, timeout).Should(Succeed())

		By("group 1 evicted while the queue's quota holds group 0 only: its released pods are deleted (the set's controller makes them again, gated); group 0's run on")
		setCPUQuota(ctx, "3")
		DeferCleanup(func(ctx SpecContext) { setCPUQuota(ctx, "64") })
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 1)
			wl.Status.Admission = nil
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Evicted", Message: "evicted by the test"})
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			groups := map[string]int{}
			for _, p := range pods.Items {
				groups[p.Labels[lwsjobs.GroupIndexLabel]]++
			}
			g.Expect(groups).To(Equal(map[string]int{"0": 3}))
		}, timeout).Should(Succeed())
	})

	It("adds a group's Workload on scale-up and removes it, releasing its host, on scale-down", func(ctx SpecContext) {
		l := hostLWS(ns, "lws-q", "scaled", 1)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 0).Status.Admission).NotTo(BeNil())
		}, timeout).Should(Succeed())

		By("scaling to 2: the second group gets a Workload, admitted on the last free host")
		scale(ctx, l, 2)
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 1).Status.Admission).NotTo(BeNil())
		}, timeout).Should(Succeed())

		By("a third group fits nowhere now: it waits, saying why on its Workload and in an event on the set")
		scale(ctx, l, 3)
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 2)
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("host"))
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(
				HaveField("Regarding.Kind", "LeaderWorkerSet"), HaveField("Regarding.Name", l.Name), HaveField("Reason", "Pending"))))
		}, timeout).Should(Succeed())

		By("scaling to 1: groups 1 and 2 lose their Workloads; the freed host takes the next set's group")
		scale(ctx, l, 1)
		Eventually(func(g Gomega) {
			var wls strata.WorkloadList
			g.Expect(worker.Client.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, wl := range wls.Items {
				if metav1.IsControlledBy(&wl, l) {
					names = append(names, wl.Name)
				}
			}
			g.Expect(names).To(ConsistOf(lwsjobs.GroupWorkloadName(l.Name, 0)))
		}, timeout).Should(Succeed())
		next := hostLWS(ns, "lws-q", "next", 1)
		Expect(worker.Client.Create(ctx, next)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, next, 0).Status.Admission).NotTo(BeNil())
		}, timeout).Should(Succeed())

		By("deleting the sets removes every group's Workload")
		Expect(worker.Client.Delete(ctx, l)).To(Succeed())
		Expect(worker.Client.Delete(ctx, next)).To(Succeed())
		Eventually(func(g Gomega) {
			var wls strata.WorkloadList
			g.Expect(worker.Client.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
			for _, wl := range wls.Items {
				owner := metav1.GetControllerOf(&wl)
				g.Expect(owner == nil || owner.Kind != "LeaderWorkerSet" || owner.Name == "tas-example-lws").To(BeTrue(), "workload %s", wl.Name)
			}
		}, timeout).Should(Succeed())
	})

	It("names the one pod set of a group without a leader template main, as Kueue, and releases its pods by it", func(ctx SpecContext) {
		ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: host}
		l := testutil.MakeLeaderWorkerSet("no-leader", ns).Queue("lws-q").Replicas(1).Size(2).NoLeader().Defaulted().PodLabel("app", "no-leader").
			Request("cpu", "1").WorkerAnnotations(ann).Obj()
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, l))).To(Succeed()) })
		var onHost string
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.Spec.PodSets).To(HaveLen(1))
			g.Expect(wl.Spec.PodSets[0].Name).To(Equal(lwsjobs.Main))
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(2)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Domains).To(HaveLen(1))
			onHost = a.Domains[0].Values[len(a.Domains[0].Values)-1]
		}, timeout).Should(Succeed())
		lwsPods(ctx, l, 0)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.PodSetLabel, lwsjobs.Main))
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(host, onHost), "pod %s", p.Name)
			}
		}, timeout).Should(Succeed())

		By("pods an earlier version labelled with the pod set worker, before their group was admitted, are labelled main again, and released")
		setCPUQuota(ctx, "2") // the first set's: the next one waits
		DeferCleanup(func(ctx SpecContext) { setCPUQuota(ctx, "64") })
		old := testutil.MakeLeaderWorkerSet("no-leader-old", ns).Queue("lws-q").Replicas(1).Size(2).NoLeader().Defaulted().PodLabel("app", "no-leader-old").
			Request("cpu", "1").WorkerAnnotations(ann).Obj()
		Expect(worker.Client.Create(ctx, old)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, old))).To(Succeed()) })
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, old, 0)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)).NotTo(BeNil(), "the group waits for quota")
		}, timeout).Should(Succeed())
		for _, p := range lwsPodsAt(ctx, old, 0, "", "") {
			Eventually(func(g Gomega) {
				var cur corev1.Pod
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
				g.Expect(cur.Spec.SchedulingGates).NotTo(BeEmpty())
				// As an earlier agent left it: labelled whole (with its
				// owner's UID, without which the pod is not the Workload's),
				// but for the pod set's name.
				g.Expect(cur.Labels).To(HaveKeyWithValue(strata.OwnerUIDLabel, string(old.UID)), "the agent labels the pod first")
				cur.Labels[strata.WorkloadLabel] = lwsjobs.GroupWorkloadName(old.Name, 0)
				cur.Labels[strata.PodSetLabel] = lwsjobs.Worker
				g.Expect(worker.Client.Update(ctx, &cur)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		setCPUQuota(ctx, "64")
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: old.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.PodSetLabel, lwsjobs.Main), "pod %s", p.Name)
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
			}
		}, timeout).Should(Succeed())
	})
})

var _ = Describe("LeaderWorkerSet rolling update", Ordered, Label("agent", "lws"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("lwsroll-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-lwsroll").NodeLabel("pool", "lwsroll").TopologyName("lwsroll-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("lwsroll-q").Flavor("tas-lwsroll", "cpu", "64").Obj())).To(Succeed())
		// One host of 3 CPUs: one group of three at a time.
		createPoolNode(ctx, "lwsroll", "lwsroll-h1", "b1", "r1", "3")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "lwsroll-q")
	})

	It("makes a rolled group a new Workload, admitted once the old template's pods are gone", func(ctx SpecContext) {
		l := hostLWS(ns, "lwsroll-q", "rolled", 1)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		var first types.UID
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.UID
		}, timeout).Should(Succeed())

		By("the pods of revision r1, released onto the host and running there")
		old := lwsPodsAt(ctx, l, 0, "r1", "")
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 0).Annotations).To(HaveKeyWithValue(lwsjobs.RevisionAnnotation, "r1"))
			for _, p := range old {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, lwsjobs.GroupWorkloadName(l.Name, 0)))
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
			}
		}, timeout).Should(Succeed())
		for _, p := range old {
			Expect(worker.Client.SubResource("binding").Create(ctx, p, &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "lwsroll-h1"}})).To(Succeed())
			Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			p.Status.Phase = corev1.PodRunning
			Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())
		}

		By("a new template, applied without the gate: the chart's policy keeps it")
		Eventually(func(g Gomega) {
			var got lwsapi.LeaderWorkerSet
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			for _, t := range []*corev1.PodTemplateSpec{got.Spec.LeaderWorkerTemplate.LeaderTemplate, &got.Spec.LeaderWorkerTemplate.WorkerTemplate} {
				t.Spec.Containers[0].Image = "registry.k8s.io/e2e-test-images/agnhost:2.54"
				t.Spec.SchedulingGates = nil
			}
			g.Expect(worker.Client.Update(ctx, &got)).To(Succeed())
			gate := corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}
			g.Expect(got.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.SchedulingGates).To(ConsistOf(gate))
			g.Expect(got.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates).To(ConsistOf(gate))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.UID).To(Equal(first), "a group the set's controller has not rolled keeps its Workload")
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the set's controller rolls the group: the old pods terminate (the kubelet is slow), the new revision's are made")
		for _, p := range old {
			Expect(worker.Client.Delete(ctx, p)).To(Succeed())
		}
		rolled := lwsPodsAt(ctx, l, 0, "r2", "-r2")
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.UID).NotTo(Equal(first))
			g.Expect(wl.Annotations).To(HaveKeyWithValue(lwsjobs.RevisionAnnotation, "r2"))
			g.Expect(wl.Spec.PodSets[0].Template.Spec.Containers[0].Image).To(HaveSuffix(":2.54"))
			for _, p := range old {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.DeletionTimestamp).NotTo(BeNil())
				g.Expect(p.Labels).NotTo(HaveKey(strata.WorkloadLabel), "an old pod counts on its own, not through the new admission")
			}
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Regarding.Name", l.Name), HaveField("Reason", "GroupRolled"))))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.Status.Admission).To(BeNil(), "the old pods still hold the host")
			for _, p := range rolled {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Spec.SchedulingGates).NotTo(BeEmpty())
			}
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the old pods gone, the new group is admitted on the host and its pods released")
		for _, p := range old {
			Expect(worker.Client.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 0).Status.Admission).NotTo(BeNil())
			for _, p := range rolled {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, lwsjobs.GroupWorkloadName(l.Name, 0)))
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(host, "lwsroll-h1"))
			}
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, l)).To(Succeed())
	})

	It("gives a surge group a Workload while the rollout keeps its leader, and removes it with the leader", func(ctx SpecContext) {
		l := hostLWS(ns, "lwsroll-q", "surged", 1)
		l.Spec.RolloutStrategy.RollingUpdateConfiguration = &lwsapi.RollingUpdateConfiguration{MaxSurge: intstr.FromInt32(1), MaxUnavailable: intstr.FromInt32(1)}
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) { groupWorkload(g, ctx, l, 0) }, timeout).Should(Succeed())

		By("the set's controller surges a group 1 during a rollout: it gets a Workload and its pods its label")
		surge := lwsPodsAt(ctx, l, 1, "r2", "")
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 1)
			g.Expect(metav1.IsControlledBy(wl, l)).To(BeTrue())
			for _, p := range surge {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, lwsjobs.GroupWorkloadName(l.Name, 1)))
			}
		}, timeout).Should(Succeed())

		By("the rollout done, the controller deletes the surge group: its Workload goes")
		for _, p := range surge {
			Expect(worker.Client.Delete(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			var wl strata.Workload
			err := worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lwsjobs.GroupWorkloadName(l.Name, 1)}, &wl)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "group 1's Workload: %v", err)
			groupWorkload(g, ctx, l, 0)
		}, timeout).Should(Succeed())
	})
})

// A LeaderWorkerSet group's Workload deactivated (spec.active: false) is
// evicted like any other: its released pods go, and it is admitted again
// once active.
var _ = Describe("A deactivated LeaderWorkerSet group", Ordered, Label("agent", "lws"), func() {
	It("loses its admission and its pods, and is admitted again once active", func(ctx SpecContext) {
		flavor := testutil.MakeResourceFlavor("tas-lws-held").NodeLabel("pool", "lws-held").TopologyName("lws-held-topology").Obj()
		flavor.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/inference", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("lws-held-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, flavor)).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("lws-held-q").Flavor("tas-lws-held").Obj())).To(Succeed())
		createPoolNode(ctx, "lws-held", "lws-held-h1", "b1", "r1", "3")
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "lws-held-q")
		l := hostLWS(ns, "lws-held-q", "held", 1)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 0).Status.Admission).NotTo(BeNil())
		}, timeout).Should(Succeed())
		lwsPods(ctx, l, 0)
		groupPods := func(g Gomega) []corev1.Pod {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			return pods.Items
		}
		Eventually(func(g Gomega) {
			pods := groupPods(g)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s released", p.Name)
			}
		}, timeout).Should(Succeed())

		setActive := func(active bool) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				wl := groupWorkload(g, ctx, l, 0)
				wl.Spec.Active = ptr.To(active)
				g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		By("deactivating the group's Workload")
		setActive(false)
		Eventually(func(g Gomega) {
			wl := groupWorkload(g, ctx, l, 0)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", strata.WorkloadEvicted),
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "Deactivated"))))
			g.Expect(groupPods(g)).To(BeEmpty(), "the released pods are deleted")
		}, timeout).Should(Succeed())

		By("activating it again")
		setActive(true)
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(g, ctx, l, 0).Status.Admission).NotTo(BeNil())
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, l)).To(Succeed())
	})
})
