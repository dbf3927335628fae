package agent

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// twoLevelJobSet is KEP-2724's two-level example: replicas Jobs of 4
// workers (Indexed, 1 CPU each), the JobSet in one block, each Job's pods
// on one host (the slice size defaults to the Jobs' parallelism).
func twoLevelJobSet(ns, queue, name string, replicas int32) *jobsetapi.JobSet {
	workers := testutil.MakeJob("workers", "").Parallelism(4).Completions(4).Indexed().Image("fake").Request("cpu", "1").
		PodAnnotations(map[string]string{
			"kueue.x-k8s.io/podset-required-topology":       block,
			"kueue.x-k8s.io/podset-slice-required-topology": host,
		}).Obj()
	return testutil.MakeJobSet(name, ns).Queue(queue).ReplicatedJob(replicas, workers).Obj()
}

// deleteJobSet deletes a JobSet and the pods jobSetPods made for it (no
// Job controller runs here to remove them), so that they free their nodes.
func deleteJobSet(ctx SpecContext, js *jobsetapi.JobSet) {
	GinkgoHelper()
	Expect(worker.Client.Delete(ctx, js)).To(Succeed())
	Expect(worker.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(js.Namespace),
		client.MatchingLabels{strata.WorkloadLabel: jobset.Kind.WorkloadName(js.Name)}, client.GracePeriodSeconds(0))).To(Succeed())
}

func jobSetWorkload(g Gomega, ctx SpecContext, js *jobsetapi.JobSet) *strata.Workload {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
	return &wl
}

// jobSetPods creates the pods the JobSet and Job controllers would, from
// the started JobSet's template, in a random order.
func jobSetPods(ctx SpecContext, js *jobsetapi.JobSet) {
	GinkgoHelper()
	var got jobsetapi.JobSet
	Eventually(func(g Gomega) {
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(BeFalse(), "the agent has not started the JobSet yet")
	}, timeout).Should(Succeed())
	rj := got.Spec.ReplicatedJobs[0]
	var pods []*corev1.Pod
	for j := range rj.Replicas {
		for i := range *rj.Template.Spec.Parallelism {
			tmpl := rj.Template.Spec.Template.DeepCopy()
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%s-%d-%d", js.Name, rj.Name, j, i), Namespace: js.Namespace,
				Labels: tmpl.Labels, Annotations: tmpl.Annotations,
			}, Spec: tmpl.Spec}
			p.Labels[jobsetapi.JobSetUIDKey] = string(got.UID)
			p.Labels[jobsetapi.JobIndexKey] = fmt.Sprint(j)
			p.Labels[strata.JobCompletionIndexLabel] = fmt.Sprint(i)
			pods = append(pods, p)
		}
	}
	rand.Shuffle(len(pods), func(a, b int) { pods[a], pods[b] = pods[b], pods[a] })
	for _, p := range pods {
		Expect(worker.Client.Create(ctx, p)).To(Succeed())
	}
}

// jobSetChildren creates the child Jobs the JobSet controller makes from
// the started JobSet's template: running (not suspended), controlled by the
// JobSet, labelled with its and their ReplicatedJob's names.
func jobSetChildren(ctx SpecContext, js *jobsetapi.JobSet) []*batchv1.Job {
	GinkgoHelper()
	var got jobsetapi.JobSet
	Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
	var out []*batchv1.Job
	for _, rj := range got.Spec.ReplicatedJobs {
		for i := range rj.Replicas {
			labels := map[string]string{jobsetapi.JobSetNameKey: got.Name, jobsetapi.ReplicatedJobNameKey: rj.Name}
			child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", got.Name, rj.Name, i), Namespace: got.Namespace, Labels: labels},
				Spec: *rj.Template.Spec.DeepCopy()}
			child.Spec.Template.Labels = maps.Clone(child.Spec.Template.Labels)
			maps.Copy(child.Spec.Template.Labels, labels)
			child.Spec.Suspend = ptr.To(false)
			Expect(controllerutil.SetControllerReference(&got, child, worker.Client.Scheme())).To(Succeed())
			Expect(worker.Client.Create(ctx, child)).To(Succeed())
			// Started, as the Job controller says (before Kubernetes 1.36
			// it keeps the start time when the Job is suspended).
			child.Status.StartTime = ptr.To(metav1.Now())
			Expect(worker.Client.Status().Update(ctx, child)).To(Succeed())
			out = append(out, child)
		}
	}
	return out
}

var _ = Describe("JobSet", Ordered, Label("agent", "jobset"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("js-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-js").NodeLabel("pool", "js").TopologyName("js-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("js-q").Flavor("tas-js", "cpu", "64").Obj())).To(Succeed())
		// Block b1: two hosts of 4 CPUs, exactly the two slices of the
		// example; b2: three.
		for _, n := range [][3]string{{"js-b1-h1", "b1", "r1"}, {"js-b1-h2", "b1", "r2"}, {"js-b2-h1", "b2", "r1"}, {"js-b2-h2", "b2", "r1"}, {"js-b2-h3", "b2", "r2"}} {
			createPoolNode(ctx, "js", n[0], n[1], n[2], "4")
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "js-q")
	})

	It("admits KEP-2724's two-level JobSet in the tightest block, each Job's pods on one host, and restores its templates exactly when evicted", func(ctx SpecContext) {
		js := twoLevelJobSet(ns, "js-q", "two-level", 2)
		original := js.Spec.ReplicatedJobs[0].Template.Spec.Template.DeepCopy()
		Expect(worker.Client.Create(ctx, js)).To(Succeed())
		Expect(js.Spec.Suspend).To(Equal(ptr.To(true)), "the chart's admission policy creates it suspended")

		By("one Workload, one pod set per ReplicatedJob, ranked by job index and completion index")
		var hosts []string
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			g.Expect(wl.Spec.PodSets).To(HaveLen(1))
			ps := wl.Spec.PodSets[0]
			g.Expect(ps.Name).To(Equal("workers"))
			g.Expect(ps.Count).To(Equal(int32(8)))
			g.Expect(ps.TopologyRequest).NotTo(BeNil())
			g.Expect(ps.TopologyRequest.PodSetSliceSize).To(Equal(ptr.To[int32](4)), "the slice size defaults to the Jobs' parallelism")
			g.Expect(ps.TopologyRequest.SubGroupIndexLabel).To(Equal(ptr.To(jobsetapi.JobIndexKey)))
			g.Expect(ps.TopologyRequest.SubGroupCount).To(Equal(ptr.To[int32](2)))
			g.Expect(metav1.IsControlledBy(wl, js)).To(BeTrue())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			hosts = nil
			for _, d := range a.Domains {
				g.Expect(d.Count).To(Equal(int32(4)))
				hosts = append(hosts, d.Values[0])
			}
		}, timeout).Should(Succeed())
		Expect(hosts).To(Equal([]string{"js-b1-h1", "js-b1-h2"}), "the tightest block that holds both slices")

		By("started: the flavor's node labels, Strata's labels and the scheduling gate in the template")
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(BeFalse())
			tmpl := got.Spec.ReplicatedJobs[0].Template.Spec.Template
			g.Expect(tmpl.Spec.NodeSelector).To(HaveKeyWithValue("pool", "js"))
			g.Expect(tmpl.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, jobset.Kind.WorkloadName(js.Name)))
			g.Expect(tmpl.Labels).To(HaveKeyWithValue(strata.OwnerUIDLabel, string(got.UID)))
			g.Expect(tmpl.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}))
		}, timeout).Should(Succeed())

		By("the pods are ungated in rank order: each Job's four pods on one host")
		jobSetPods(ctx, js)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{strata.WorkloadLabel: jobset.Kind.WorkloadName(js.Name)})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(8))
			perJob := map[string]map[string]bool{}
			for _, p := range pods.Items {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				j := p.Labels[jobsetapi.JobIndexKey]
				if perJob[j] == nil {
					perJob[j] = map[string]bool{}
				}
				perJob[j][p.Spec.NodeSelector[host]] = true
			}
			g.Expect(perJob).To(Equal(map[string]map[string]bool{"0": {"js-b1-h1": true}, "1": {"js-b1-h2": true}}))
		}, timeout).Should(Succeed())

		By("its Jobs, made by the JobSet controller from the started template, run")
		children := jobSetChildren(ctx, js)
		Expect(children).To(HaveLen(2))

		By("evicted while nothing else can take it: suspended, the template exactly as written")
		for _, n := range []string{"js-b1-h1", "js-b1-h2", "js-b2-h1", "js-b2-h2", "js-b2-h3"} {
			var node corev1.Node
			Expect(worker.Client.Get(ctx, client.ObjectKey{Name: n}, &node)).To(Succeed())
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
			Expect(worker.Client.Update(ctx, &node)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			wl.Status.Admission = nil
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Evicted", Message: "evicted by the test"})
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeTrue())
		}, timeout).Should(Succeed())

		By("its Jobs suspended by the JobSet controller: what the admission added leaves them too, or a JobSet admitted again on a flavor of other node labels would run its Jobs' pods with both (the JobSet controller merges its templates into theirs on resume)")
		for _, child := range children {
			Eventually(func(g Gomega) {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(child), child)).To(Succeed())
				child.Spec.Suspend = ptr.To(true)
				g.Expect(worker.Client.Update(ctx, child)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		for _, child := range children {
			Eventually(func(g Gomega) {
				var got batchv1.Job
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(child), &got)).To(Succeed())
				tmpl := got.Spec.Template
				g.Expect(got.Status.StartTime).To(BeNil(), "cleared, so that the template may change")
				g.Expect(tmpl.Spec.NodeSelector).To(Equal(original.Spec.NodeSelector), "job %s", got.Name)
				g.Expect(tmpl.Spec.SchedulingGates).To(Equal(original.Spec.SchedulingGates), "job %s", got.Name)
				g.Expect(tmpl.Spec.Tolerations).To(Equal(original.Spec.Tolerations), "job %s", got.Name)
				g.Expect(tmpl.Labels).NotTo(HaveKey(HavePrefix(strata.Prefix)), "job %s", got.Name)
				g.Expect(tmpl.Labels).To(HaveKeyWithValue(jobsetapi.JobSetNameKey, js.Name), "the JobSet controller's labels stay")
			}, timeout).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(HavePrefix(strata.Prefix)))
			tmpl := got.Spec.ReplicatedJobs[0].Template.Spec.Template
			g.Expect(equality.Semantic.DeepEqual(&tmpl, original)).To(BeTrue(), "template %+v, want %+v", tmpl, original)
		}, timeout).Should(Succeed())
		for _, n := range []string{"js-b1-h1", "js-b1-h2", "js-b2-h1", "js-b2-h2", "js-b2-h3"} {
			var node corev1.Node
			Expect(worker.Client.Get(ctx, client.ObjectKey{Name: n}, &node)).To(Succeed())
			node.Spec.Taints = nil
			Expect(worker.Client.Update(ctx, &node)).To(Succeed())
		}
		deleteJobSet(ctx, js)
	})

	It("replaces a failed host of a running JobSet inside its block (hot swap)", func(ctx SpecContext) {
		createPoolNode(ctx, "js", "js-b1-h3", "b1", "r2", "4") // b1's third host: a spare
		js := twoLevelJobSet(ns, "js-q", "swap", 2)
		Expect(worker.Client.Create(ctx, js)).To(Succeed())
		var hosts []string
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			hosts = nil
			for _, d := range a.Domains {
				hosts = append(hosts, d.Values[0])
			}
			g.Expect(hosts).To(HaveLen(2))
		}, timeout).Should(Succeed())
		Expect(hosts).To(HaveEach(HavePrefix("js-b1-")))
		spare := "js-b1-h1"
		for _, h := range []string{"js-b1-h2", "js-b1-h3"} {
			if !slices.Contains(hosts, h) && slices.Contains(hosts, spare) {
				spare = h
			}
		}
		jobSetPods(ctx, js)

		By("one of its hosts fails: NotReady, and the JobSet's pods there terminated")
		failed := hosts[0]
		var pods corev1.PodList
		Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{strata.WorkloadLabel: jobset.Kind.WorkloadName(js.Name)})).To(Succeed())
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeSelector[host] == failed {
				p.Status.Phase = corev1.PodFailed
				Expect(worker.Client.Status().Update(ctx, p)).To(Succeed())
			}
		}
		var node corev1.Node
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: failed}, &node)).To(Succeed())
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
		Expect(worker.Client.Status().Update(ctx, &node)).To(Succeed())

		By("replaced by the block's spare host, the other Job's host kept")
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			var now []string
			for _, d := range a.Domains {
				now = append(now, d.Values[0])
			}
			g.Expect(now).To(ConsistOf(spare, hosts[1]))
		}, timeout).Should(Succeed())
		deleteJobSet(ctx, js)
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
		Expect(worker.Client.Status().Update(ctx, &node)).To(Succeed())
	})

	It("keeps a JobSet no block holds waiting, saying why", func(ctx SpecContext) {
		js := twoLevelJobSet(ns, "js-q", "too-wide", 4) // 4 slices of a host: no block has 4 hosts
		Expect(worker.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("block required"))
		}, timeout).Should(Succeed())
		var got jobsetapi.JobSet
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeTrue())
	})
})
