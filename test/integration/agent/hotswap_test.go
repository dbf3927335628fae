package agent

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/nodefailure"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// assignedHosts returns the hosts of a workload's assignment, in rank order.
func assignedHosts(g Gomega, ctx SpecContext, job *batchv1.Job) []string {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
	g.Expect(wl.Status.Admission).NotTo(BeNil())
	a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
	g.Expect(err).NotTo(HaveOccurred())
	var hosts []string
	for _, d := range a.Domains {
		hosts = append(hosts, d.Values[0])
	}
	return hosts
}

func swapJob(ctx SpecContext, ns string, pods int32) *batchv1.Job {
	j := newJob(ns, "swap-q", pods, map[string]string{"strata.dev/podset-required-topology": rack})
	Expect(worker.Client.Create(ctx, j)).To(Succeed())
	Eventually(func(g Gomega) { assignedHosts(g, ctx, j) }, timeout).Should(Succeed())
	return j
}

var _ = Describe("Hot swap", Ordered, Label("agent", "hotswap"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("swap-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-swap").NodeLabel("pool", "swap").TopologyName("swap-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("swap-q").Flavor("tas-swap").Obj())).To(Succeed())
		for _, n := range [][3]string{{"w1", "r1", "4"}, {"w2", "r1", "4"}, {"w3", "r1", "4"}, {"w4", "r2", "4"}, {"w5", "r3", "4"}, {"w6", "r3", "4"}, {"w7", "r3", "4"}, {"w8", "r3", "4"}} {
			createPoolNode(ctx, "swap", n[0], "b1", n[1], n[2])
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "swap-q")
	})

	It("replaces a deleted node with a free node of the same rack, keeping the other pods", func(ctx SpecContext) {
		job := swapJob(ctx, ns, 8) // two of rack r1's three nodes (r1 is tighter than r3)
		var before []string
		Eventually(func(g Gomega) { before = assignedHosts(g, ctx, job) }, timeout).Should(Succeed())
		Expect(before).To(HaveLen(2))
		failed, kept := before[0], before[1]
		Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: failed}})).To(Succeed())
		Eventually(func(g Gomega) {
			after := assignedHosts(g, ctx, job)
			g.Expect(after).To(HaveLen(2))
			g.Expect(after[1]).To(Equal(kept), "the healthy node keeps its place and ranks")
			g.Expect(after[0]).NotTo(Equal(failed))
			g.Expect(after[0]).To(BeElementOf("w1", "w2", "w3"), "the replacement is in the same rack")
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.UnhealthyNodes).To(BeEmpty())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)).To(BeTrue())
		}, timeout).Should(Succeed())
	})

	It("moves a rack-required workload whose pods are all on the failed node to another rack when its rack has no spare node", func(ctx SpecContext) {
		job := swapJob(ctx, ns, 4) // rack r2 is a single node
		var hosts []string
		Eventually(func(g Gomega) { hosts = assignedHosts(g, ctx, job) }, timeout).Should(Succeed())
		Expect(hosts).To(Equal([]string{"w4"}))
		uid := workloadOf(Default, ctx, job).UID
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w4"}})).To(Succeed())
		By("its pods stay together, on one node of rack r3, in the same admitted Workload")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.UID).To(Equal(uid))
			g.Expect(assignedHosts(g, ctx, job)).To(ConsistOf(BeElementOf("w5", "w6", "w7", "w8")))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)).To(BeTrue())
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
		}, timeout).Should(Succeed())
	})
	It("fails a pending pod stranded on a NoSchedule-tainted node and moves the node's pods", func(ctx SpecContext) {
		job := swapJob(ctx, ns, 8) // two of the three free nodes of rack r3
		var hosts []string
		Eventually(func(g Gomega) { hosts = assignedHosts(g, ctx, job) }, timeout).Should(Succeed())
		Expect(hosts).To(HaveLen(2))
		createPods(ctx, job, 0, 1, 2, 3, 4, 5, 6, 7)
		Eventually(func(g Gomega) {
			g.Expect(podHostsIn(g, ctx, job)).To(HaveLen(8))
		}, timeout).Should(Succeed())

		var n corev1.Node
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: hosts[0]}, &n)).To(Succeed())
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "degraded", Effect: corev1.TaintEffectNoSchedule})
		Expect(worker.Client.Update(ctx, &n)).To(Succeed())
		Eventually(func(g Gomega) {
			after := assignedHosts(g, ctx, job)
			g.Expect(after[1]).To(Equal(hosts[1]))
			g.Expect(after[0]).NotTo(Equal(hosts[0]))
			g.Expect(after[0]).To(BeElementOf("w5", "w6", "w7", "w8"))
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})).To(Succeed())
			failed := 0
			for _, p := range pods.Items {
				if p.Spec.NodeSelector[host] != hosts[0] {
					g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodFailed), "pods of the healthy node stay")
					continue
				}
				failed++
				g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
				g.Expect(p.Status.Conditions).To(ContainElement(SatisfyAll(
					HaveField("Type", corev1.PodConditionType(nodefailure.PodConditionTerminatedByStrata)),
					HaveField("Reason", nodefailure.ReasonUnschedulableOnNode))))
				g.Expect(p.Status.Conditions).To(ContainElement(SatisfyAll(
					HaveField("Type", corev1.DisruptionTarget), HaveField("Status", corev1.ConditionTrue))),
					"a podFailurePolicy that ignores disruptions does not count it")
			}
			g.Expect(failed).To(Equal(4))
		}, timeout).Should(Succeed())
	})

	It("replaces a NotReady node at once when the workload's pods there are terminated", func(ctx SpecContext) {
		createPoolNode(ctx, "swap", "x1", "b1", "r4", "4")
		createPoolNode(ctx, "swap", "x2", "b1", "r4", "4")
		job := swapJob(ctx, ns, 4) // one node of rack r4
		var hosts []string
		Eventually(func(g Gomega) { hosts = assignedHosts(g, ctx, job) }, timeout).Should(Succeed())
		Expect(hosts).To(HaveLen(1))
		Expect(hosts[0]).To(BeElementOf("x1", "x2"))

		By("a pod of the workload that ran on the node has failed")
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-ran", Namespace: ns, Labels: map[string]string{
				strata.WorkloadLabel: jobs.WorkloadName(job.Name), strata.PodSetLabel: "main", strata.TASLabel: "true",
			}, OwnerReferences: jobOwner(job)},
			Spec: corev1.PodSpec{NodeName: hosts[0], Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		Expect(worker.Client.Create(ctx, p)).To(Succeed())
		p.Status.Phase = corev1.PodFailed
		Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())

		By("the node goes NotReady")
		var n corev1.Node
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: hosts[0]}, &n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
		Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())

		// Well before the 30s NotReady delay.
		Eventually(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{map[string]string{"x1": "x2", "x2": "x1"}[hosts[0]]}))
		}, 15*time.Second).Should(Succeed())
	})
})

// hotSwapPool creates a flavor, queue and nodes of their own for a spec, so
// that placements do not depend on what earlier specs left running. nodes
// are name, rack, CPUs.
func hotSwapPool(ctx SpecContext, pool string, nodes ...[3]string) string {
	Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-"+pool).NodeLabel("pool", pool).TopologyName("timing-topology").Obj())).To(Succeed())
	Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue(pool+"-q").Flavor("tas-"+pool).Obj())).To(Succeed())
	for _, n := range nodes {
		createPoolNode(ctx, pool, n[0], "b1", n[1], n[2])
	}
	return pool + "-q"
}

// admitJob creates a rack-required Job on a queue and returns the hosts of
// its assignment.
func admitJob(ctx SpecContext, ns, queue string, pods int32) (*batchv1.Job, []string) {
	createLocalQueue(ctx, ns, queue)
	j := newJob(ns, queue, pods, map[string]string{"strata.dev/podset-required-topology": rack})
	Expect(worker.Client.Create(ctx, j)).To(Succeed())
	var hosts []string
	Eventually(func(g Gomega) { hosts = assignedHosts(g, ctx, j) }, timeout).Should(Succeed())
	return j, hosts
}

// jobOwner is the owner reference the Job controller gives the Job's pods:
// the agent acts only on the pods of the Job that owns the Workload.
func jobOwner(job *batchv1.Job) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
}

// runningPodOn creates a pod of the Job's workload bound to host, Running.
func runningPodOn(ctx SpecContext, job *batchv1.Job, host string) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-running", Namespace: job.Namespace, Labels: map[string]string{
			strata.WorkloadLabel: jobs.WorkloadName(job.Name), strata.PodSetLabel: "main", strata.TASLabel: "true",
		}, OwnerReferences: jobOwner(job)},
		// Released as the ungater does: its domain in its node selector
		// (a pod without it would be one released around the agent).
		Spec: corev1.PodSpec{NodeName: host, NodeSelector: map[string]string{strata.HostnameLabel: host},
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	Expect(worker.Client.Create(ctx, p)).To(Succeed())
	p.Status.Phase = corev1.PodRunning
	Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())
}

// expectEvictedForNodeFailure waits for the Job's Workload to carry hot
// swap's Evicted condition, with a message that says each of why.
func expectEvictedForNodeFailure(ctx SpecContext, job *batchv1.Job, why ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(workloadOf(g, ctx, job).Status.Conditions, strata.WorkloadEvicted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(nodefailure.ReasonNodeFailure))
		for _, w := range why {
			g.Expect(c.Message).To(ContainSubstring(w))
		}
	}, timeout).Should(Succeed())
}

func workloadOf(g Gomega, ctx SpecContext, job *batchv1.Job) *strata.Workload {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
	return &wl
}

var _ = Describe("Hot swap timing", Ordered, Label("agent", "hotswap"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("timing-topology", block, rack, host).Obj())).To(Succeed())
		ns = createNamespace(ctx, nil)
	})

	It("replaces a NotReady node whose pods still run only once the NotReady delay has passed, and only with replaceOnPodTermination off", func(ctx SpecContext) {
		queue := hotSwapPool(ctx, "late", [3]string{"l1", "r1", "4"}, [3]string{"l2", "r1", "4"})
		job, hosts := admitJob(ctx, ns, queue, 4)
		Expect(hosts).To(HaveLen(1))
		runningPodOn(ctx, job, hosts[0]) // its pods there still run: only the delay makes it failed

		nodeClock.SetTime(time.Now())
		var n corev1.Node
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: hosts[0]}, &n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(nodeClock.Now()), LastHeartbeatTime: metav1.NewTime(nodeClock.Now())}}
		Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())
		By("with the taints the node lifecycle controller adds to a NotReady node, which do not cut the delay short")
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: hosts[0]}, &n)).To(Succeed())
		n.Spec.Taints = []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(nodeClock.Now()))},
		}
		Expect(worker.Client.Update(ctx, &n)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal(hosts))
			g.Expect(workloadOf(g, ctx, job).Status.UnhealthyNodes).To(BeEmpty())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("with replaceOnPodTermination on (the default), past the delay too: the two rules exclude each other, and its pod still runs")
		nodeClock.Step(31 * time.Second)
		// A change of the running pod makes hot swap look at the node again.
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Name + "-running"}, &p)).To(Succeed())
			metav1.SetMetaDataLabel(&p.ObjectMeta, "touched", "after-the-delay")
			g.Expect(worker.Client.Update(ctx, &p)).To(Succeed())
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal(hosts))
			g.Expect(workloadOf(g, ctx, job).Status.UnhealthyNodes).To(BeEmpty())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("an agent with replaceOnPodTermination off, stepping past the 30s NotReady delay")
		stopAgent()
		stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
			cfg.NodeFailure.ReplaceOnPodTermination = ptr.To(false)
		})
		DeferCleanup(func() {
			stopAgent()
			stopAgent = startAgent()
		})
		nodeClock.SetTime(n.Status.Conditions[0].LastTransitionTime.Time)
		Consistently(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal(hosts))
		}, time.Second, 200*time.Millisecond).Should(Succeed())
		nodeClock.Step(31 * time.Second)
		other := map[string]string{"l1": "l2", "l2": "l1"}[hosts[0]]
		Eventually(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{other}))
			c := meta.FindStatusCondition(workloadOf(g, ctx, job).Status.Conditions, nodefailure.ConditionNodeReplacement)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(Equal(fmt.Sprintf("node %s (NotReady for more than 30s) replaced by %s", hosts[0], other)))
		}, timeout).Should(Succeed())
	})

	It("shares the failed node's pods among free nodes of its rack when no one node has room for them all", func(ctx SpecContext) {
		queue := hotSwapPool(ctx, "share", [3]string{"s1", "r1", "4"}, [3]string{"s2", "r1", "4"}, [3]string{"s3", "r1", "2"}, [3]string{"s4", "r1", "2"})
		job, hosts := admitJob(ctx, ns, queue, 8)
		Expect(hosts).To(Equal([]string{"s1", "s2"}))
		uid := workloadOf(Default, ctx, job).UID
		Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "s1"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{"s3", "s4", "s2"}), "s1's ranks go to s3 and s4; s2 keeps its own")
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.UID).To(Equal(uid))
			c := meta.FindStatusCondition(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(Equal("node s1 (the node was deleted) replaced by s3, s4"))
		}, timeout).Should(Succeed())
	})

	It("evicts and requeues the workload when the failed node has no replacement (fail-fast)", func(ctx SpecContext) {
		queue := hotSwapPool(ctx, "full", [3]string{"f1", "r1", "4"}, [3]string{"f2", "r1", "4"})
		createLocalQueue(ctx, ns, queue)
		job := newJob(ns, queue, 8, map[string]string{"strata.dev/podset-required-topology": rack})
		job.Labels[strata.MaxExecTimeSecondsLabel] = "3600"
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(ConsistOf("f1", "f2"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "f1"}})).To(Succeed())
		expectEvictedForNodeFailure(ctx, job, "node f1 failed (the node was deleted): no replacement for node f1 in rack b1/r1", "fail-fast is on")
		By("requeued, it waits for room; the time it was admitted counts against its maximum execution time")
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).To(BeNil())
			g.Expect(wl.Status.AccumulatedPastExecutionTimeSeconds).NotTo(BeNil())
		}, timeout).Should(Succeed())
	})

	It("waits, saying why, when the kept nodes no longer hold the workload's pods with a replacement, and replaces once they do", func(ctx SpecContext) {
		queue := hotSwapPool(ctx, "shrunk", [3]string{"shrunk-1", "r1", "4"}, [3]string{"shrunk-2", "r1", "4"}, [3]string{"shrunk-3", "r1", "4"})
		job, hosts := admitJob(ctx, ns, queue, 8)
		Expect(hosts).To(HaveLen(2))
		failed, kept := hosts[0], hosts[1]
		By("the kept node's allocatable shrinks below what the workload's pods there take")
		Eventually(func(g Gomega) {
			var n corev1.Node
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: kept}, &n)).To(Succeed())
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("2")
			n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("2")
			g.Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: failed}})).To(Succeed())
		// Before: the reserve's error was retried for ever, with nothing
		// on the Workload. Now a search that waits (its pods run), saying
		// why, until recoveryTimeout.
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "not evicted: its pods run")
			c := meta.FindStatusCondition(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("Searching"))
			g.Expect(c.Message).To(ContainSubstring("no longer hold its pods"))
		}, timeout).Should(Succeed())
		By("the kept node's room comes back: the node is replaced")
		Eventually(func(g Gomega) {
			var n corev1.Node
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: kept}, &n)).To(Succeed())
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4")
			n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("4")
			g.Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			nodeClock.Step(2 * time.Second) // the retry backoff runs on the node clock
			after := assignedHosts(g, ctx, job)
			g.Expect(after).NotTo(ContainElement(failed))
			g.Expect(after).To(ContainElement(kept))
		}, timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	})

	It("evicts the workload, saying why, when two of its nodes fail at once", func(ctx SpecContext) {
		queue := hotSwapPool(ctx, "multi", [3]string{"m1", "r1", "4"}, [3]string{"m2", "r1", "4"}, [3]string{"m3", "r1", "4"}, [3]string{"m4", "r1", "4"})
		job, hosts := admitJob(ctx, ns, queue, 8)
		Expect(hosts).To(HaveLen(2))
		By("both nodes go while the agent is down, so that it sees them gone together")
		stopAgent()
		for _, h := range hosts {
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h}})).To(Succeed())
		}
		stopAgent = startAgent()
		expectEvictedForNodeFailure(ctx, job, "2 nodes failed at once", "Strata replaces one node at a time")
		By("requeued, it is admitted again on the rack's two other nodes")
		var left []string
		for _, h := range []string{"m1", "m2", "m3", "m4"} {
			if !slices.Contains(hosts, h) {
				left = append(left, h)
			}
		}
		Eventually(func(g Gomega) {
			g.Expect(assignedHosts(g, ctx, job)).To(ConsistOf(left))
		}, timeout).Should(Succeed())
	})

	Context("with the Job's unhealthy-nodes eviction threshold (Kueue's annotation)", func() {
		// thresholdJob admits a rack-required Job of 8 one-CPU pods, on two
		// of the pool's 4-CPU nodes, with the threshold set on the Job.
		thresholdJob := func(ctx SpecContext, queue, threshold string) (*batchv1.Job, []string) {
			createLocalQueue(ctx, ns, queue)
			j := newJob(ns, queue, 8, map[string]string{"strata.dev/podset-required-topology": rack})
			j.Annotations = map[string]string{"kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold": threshold}
			Expect(worker.Client.Create(ctx, j)).To(Succeed())
			var hosts []string
			Eventually(func(g Gomega) { hosts = assignedHosts(g, ctx, j) }, timeout).Should(Succeed())
			Expect(hosts).To(HaveLen(2))
			return j, hosts
		}
		unhealthy := func(wl *strata.Workload) []string {
			var out []string
			for _, n := range wl.Status.UnhealthyNodes {
				out = append(out, n.Name)
			}
			return out
		}

		It("runs on with two failed nodes and no room, then replaces them one at a time as nodes join", func(ctx SpecContext) {
			queue := hotSwapPool(ctx, "queued", [3]string{"hq1", "r1", "4"}, [3]string{"hq2", "r1", "4"})
			job, hosts := thresholdJob(ctx, queue, "2")
			var uid types.UID
			Eventually(func(g Gomega) {
				wl := workloadOf(g, ctx, job)
				g.Expect(wl.Annotations).To(HaveKeyWithValue("kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold", "2"))
				uid = wl.UID
			}, timeout).Should(Succeed())

			By("the first node goes, with no room left in the rack: fail-fast does not evict within the threshold")
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hosts[0]}})).To(Succeed())
			Eventually(func(g Gomega) {
				wl := workloadOf(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil())
				g.Expect(unhealthy(wl)).To(Equal([]string{hosts[0]}))
				c := meta.FindStatusCondition(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal("Searching"))
				g.Expect(c.Message).To(ContainSubstring("runs on within its unhealthy-nodes eviction threshold"))
			}, timeout).Should(Succeed())

			By("the second node goes: both wait, head first, and the Job keeps running")
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hosts[1]}})).To(Succeed())
			Eventually(func(g Gomega) {
				wl := workloadOf(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil())
				g.Expect(unhealthy(wl)).To(Equal(hosts))
			}, timeout).Should(Succeed())
			var j batchv1.Job
			Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())

			By("a node joins the rack: the head of the queue is replaced, the other keeps its place")
			createPoolNode(ctx, "queued", "hq3", "b1", "r1", "4")
			Eventually(func(g Gomega) {
				nodeClock.Step(2 * time.Second) // the retry backoff runs on the node clock
				wl := workloadOf(g, ctx, job)
				g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{"hq3", hosts[1]}))
				g.Expect(unhealthy(wl)).To(Equal([]string{hosts[1]}))
			}, timeout).WithPolling(250 * time.Millisecond).Should(Succeed())

			By("another node joins: the second is replaced, in the same Workload, never evicted")
			createPoolNode(ctx, "queued", "hq4", "b1", "r1", "4")
			Eventually(func(g Gomega) {
				nodeClock.Step(2 * time.Second)
				wl := workloadOf(g, ctx, job)
				g.Expect(wl.UID).To(Equal(uid))
				g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{"hq3", "hq4"}))
				g.Expect(wl.Status.UnhealthyNodes).To(BeEmpty())
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
				g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)).To(BeTrue())
			}, timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
		})

		It("evicts the workload when more nodes fail than the threshold allows", func(ctx SpecContext) {
			queue := hotSwapPool(ctx, "capped", [3]string{"hc1", "r1", "4"}, [3]string{"hc2", "r1", "4"})
			job, hosts := thresholdJob(ctx, queue, "1")
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hosts[0]}})).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(unhealthy(workloadOf(g, ctx, job))).To(Equal([]string{hosts[0]}))
			}, timeout).Should(Succeed())
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hosts[1]}})).To(Succeed())
			expectEvictedForNodeFailure(ctx, job, "2 nodes failed", "tas-unhealthy-nodes-eviction-threshold allows 1")
			Expect(workloadOf(Default, ctx, job).Status.UnhealthyNodes).To(BeEmpty(), "requeued, it has no node to replace")
		})

		It("refuses a threshold outside 1 to 8, saying so", func(ctx SpecContext) {
			createLocalQueue(ctx, ns, "swap-q")
			j := newJob(ns, "swap-q", 1, nil)
			j.Annotations = map[string]string{"strata.dev/tas-unhealthy-nodes-eviction-threshold": "9"}
			Expect(worker.Client.Create(ctx, j)).To(Succeed())
			Eventually(func(g Gomega) {
				c := meta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, strata.WorkloadInvalid)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Message).To(ContainSubstring(`metadata.annotations[strata.dev/tas-unhealthy-nodes-eviction-threshold]: Invalid value: "9": must be an integer between 1 and 8`))
			}, timeout).Should(Succeed())
		})
	})

	Context("with fail-fast off", func() {
		BeforeAll(func() {
			stopAgent()
			stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
				cfg.NodeFailure.FailFast = ptr.To(false)
				cfg.NodeFailure.RecoveryTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			})
			DeferCleanup(func() {
				stopAgent()
				stopAgent = startAgent()
			})
		})

		It("keeps searching with backoff and replaces the node when one frees up in the rack", func(ctx SpecContext) {
			queue := hotSwapPool(ctx, "retry", [3]string{"t1", "r1", "4"})
			job, hosts := admitJob(ctx, ns, queue, 4)
			Expect(hosts).To(Equal([]string{"t1"}))
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t1"}})).To(Succeed())
			Eventually(func(g Gomega) {
				wl := workloadOf(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "fail-fast is off: the workload keeps its admission")
				g.Expect(wl.Status.UnhealthyNodes).To(ConsistOf(HaveField("Name", "t1")))
				c := meta.FindStatusCondition(wl.Status.Conditions, nodefailure.ConditionNodeReplacement)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal("Searching"))
				g.Expect(c.Message).To(ContainSubstring("node t1 failed (the node was deleted): no replacement for node t1 in the flavor: the best free node there fits 0 of its 4 pods; retrying"))
			}, timeout).Should(Succeed())

			By("a node joins the rack; the next retry, a backoff step later, takes it")
			createPoolNode(ctx, "retry", "t2", "b1", "r1", "4")
			// 2s of the node clock every 250ms of real time: the 5m recovery
			// timeout stays beyond the 30s this waits, however slowly the
			// agent sees the new node on a loaded machine.
			Eventually(func(g Gomega) {
				nodeClock.Step(2 * time.Second)
				g.Expect(assignedHosts(g, ctx, job)).To(Equal([]string{"t2"}))
				g.Expect(meta.IsStatusConditionTrue(workloadOf(g, ctx, job).Status.Conditions, nodefailure.ConditionNodeReplacement)).To(BeTrue())
			}, timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
		})

		It("evicts and requeues the workload when the recovery timeout passes", func(ctx SpecContext) {
			queue := hotSwapPool(ctx, "timeout", [3]string{"u1", "r1", "4"})
			job, hosts := admitJob(ctx, ns, queue, 4)
			Expect(hosts).To(Equal([]string{"u1"}))
			Expect(worker.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "u1"}})).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(meta.IsStatusConditionFalse(workloadOf(g, ctx, job).Status.Conditions, nodefailure.ConditionNodeReplacement)).To(BeTrue())
			}, timeout).Should(Succeed())

			By("stepping past the 5m recovery timeout")
			nodeClock.Step(6 * time.Minute)
			expectEvictedForNodeFailure(ctx, job, "no replacement within the recovery timeout of 5m0s")
			Eventually(func(g Gomega) {
				g.Expect(workloadOf(g, ctx, job).Status.Admission).To(BeNil())
			}, timeout).Should(Succeed())
		})
	})
})

// podHostsIn returns the host each of a Job's pods was ungated to ("" while gated).
func podHostsIn(g Gomega, ctx SpecContext, job *batchv1.Job) map[string]string {
	var pods corev1.PodList
	g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Spec.NodeSelector[host]
		g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
	}
	return out
}
