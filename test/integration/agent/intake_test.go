package agent

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

const (
	rack    = "cloud.provider.com/topology-rack"
	timeout = 30 * time.Second
)

var jobCounter int

// newJob is an indexed Job of n pods in namespace ns, labelled for queue
// (none when empty), with the given pod-template annotations. Names are
// zero-padded so that they sort in creation order: Workloads created in the
// same second are queued by name, and job-10 must not pass job-9.
func newJob(ns, queue string, n int32, annotations map[string]string) *batchv1.Job {
	jobCounter++
	return testutil.MakeJob(fmt.Sprintf("job-%05d", jobCounter), ns).Queue(queue).Parallelism(n).Completions(n).Indexed().
		Request("cpu", "1").PodAnnotations(annotations).Obj()
}

func invalidCondition(g Gomega, ctx SpecContext, job *batchv1.Job) *metav1.Condition {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid)
	g.Expect(c).NotTo(BeNil())
	return c
}

// createLocalQueue creates, unless it exists, LocalQueue name in namespace
// ns pointing at the ClusterQueue of the same name, as the specs' Jobs name
// their queue.
func createLocalQueue(ctx SpecContext, ns, name string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(worker.Client.Create(ctx, testutil.MakeLocalQueue(name, ns, name)))).To(Succeed())
}

func createNamespace(ctx SpecContext, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "intake-", Labels: labels}}
	Expect(worker.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var _ = Describe("Intake", Label("agent", "intake"), func() {
	var queue string

	BeforeEach(func(ctx SpecContext) {
		jobCounter++
		queue = fmt.Sprintf("queue-%d", jobCounter)
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue(queue).Flavor("tas").Obj())).To(Succeed())
	})

	It("holds a queue-labelled Job suspended from creation, and leaves other Jobs alone", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, queue)
		managed := newJob(ns, queue, 2, nil)
		Expect(worker.Client.Create(ctx, managed)).To(Succeed())
		Expect(ptr.Deref(managed.Spec.Suspend, false)).To(BeTrue(), "the admission policy did not suspend the Job")
		running := newJob(ns, queue, 2, nil)
		running.Spec.Suspend = ptr.To(false)
		Expect(worker.Client.Create(ctx, running)).To(Succeed())
		Expect(ptr.Deref(running.Spec.Suspend, false)).To(BeTrue(), "the admission policy did not suspend a Job created with suspend: false")
		suspended := newJob(ns, queue, 2, nil)
		suspended.Spec.Suspend = ptr.To(true)
		Expect(worker.Client.Create(ctx, suspended)).To(Succeed())
		Expect(ptr.Deref(suspended.Spec.Suspend, false)).To(BeTrue())
		other := newJob(ns, "", 2, nil)
		Expect(worker.Client.Create(ctx, other)).To(Succeed())
		Expect(ptr.Deref(other.Spec.Suspend, false)).To(BeFalse())
	})

	It("creates a valid Workload owned by the Job", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, queue)
		job := newJob(ns, queue, 4, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			// Valid from the start: no Invalid condition, no invalid mark.
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid)).To(BeNil())
			g.Expect(wl.Annotations).NotTo(HaveKey(strata.InvalidAnnotation))
			g.Expect(wl.Spec.QueueName).To(Equal(queue))
			g.Expect(wl.Spec.PodSets).To(HaveLen(1))
			g.Expect(wl.Spec.PodSets[0].Count).To(Equal(int32(4)))
			g.Expect(wl.Spec.PodSets[0].TopologyRequest.Required).To(Equal(ptr.To(rack)))
			g.Expect(wl.Spec.PodSets[0].TopologyRequest.PodIndexLabel).To(Equal(ptr.To(strata.JobCompletionIndexLabel)))
			g.Expect(metav1.IsControlledBy(&wl, job)).To(BeTrue())
		}, timeout).Should(Succeed())
	})

	It("marks a Job with invalid annotations, with an event, until it is fixed", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, queue)
		job := newJob(ns, queue, 3, map[string]string{
			"strata.dev/podset-required-topology":       rack,
			"strata.dev/podset-slice-required-topology": "kubernetes.io/hostname",
			"strata.dev/podset-slice-size":              "two",
		})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonInvalidJob))
			g.Expect(c.Message).To(ContainSubstring(`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "two": must be a whole number of pods, at least 1`))
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Annotations).To(HaveKeyWithValue(strata.InvalidAnnotation, jobs.ReasonInvalidJob))
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range evs.Items {
				if e.Regarding.Name == job.Name && e.Type == corev1.EventTypeWarning {
					reasons = append(reasons, e.Reason)
				}
			}
			g.Expect(reasons).To(ContainElement(jobs.ReasonInvalidJob))
		}, timeout).Should(Succeed())

		By("fixing the slice size on the suspended Job")
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			j.Spec.Template.Annotations["strata.dev/podset-slice-size"] = "3"
			g.Expect(worker.Client.Update(ctx, &j)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(jobs.ReasonValid))
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Annotations).NotTo(HaveKey(strata.InvalidAnnotation))
		}, timeout).Should(Succeed())
	})

	It("marks a Job whose LocalQueue's ClusterQueue does not exist, until the ClusterQueue is created", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "not-yet")
		job := newJob(ns, "not-yet", 1, nil)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonQueueNotFound))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf(`ClusterQueue "not-yet" of LocalQueue "%s/not-yet" does not exist`, ns)))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("not-yet").Flavor("tas").Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(invalidCondition(g, ctx, job).Status).To(Equal(metav1.ConditionFalse))
		}, timeout).Should(Succeed())
	})

	It("marks a Job in a namespace the queue does not admit", func(ctx SpecContext) {
		_, job := jobOutsideQueueNamespaces(ctx, queue+"-ml")
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonNamespaceNotAllowed))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf(`does not admit namespace %q (namespaceSelector team=ml)`, job.Namespace)))
		}, timeout).Should(Succeed())

		By("the namespace is relabelled for the queue: the condition clears")
		var n corev1.Namespace
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: job.Namespace}, &n)).To(Succeed())
		n.Labels["team"] = "ml"
		Expect(worker.Client.Update(ctx, &n)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(jobs.ReasonValid))
		}, timeout).Should(Succeed())
	})

	It("stops a waiting Job from being admitted when its namespace loses the queue's label", func(ctx SpecContext) {
		// No quota: the Job waits, valid, until its namespace changes.
		cq := testutil.MakeClusterQueue(queue+"-unlabelled").Flavor("tas", "cpu", "0").Obj()
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		ns := createNamespace(ctx, map[string]string{"team": "ml"})
		createLocalQueue(ctx, ns, cq.Name)
		job := newJob(ns, cq.Name, 1, nil)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(job.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Annotations).NotTo(HaveKey(strata.InvalidAnnotation))
		}, timeout).Should(Succeed())

		By("the namespace loses the label the queue selects")
		var n corev1.Namespace
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		delete(n.Labels, "team")
		Expect(worker.Client.Update(ctx, &n)).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonNamespaceNotAllowed))
		}, timeout).Should(Succeed())
	})

	It("re-checks a queue's Jobs when the queue's spec changes", func(ctx SpecContext) {
		cq, job := jobOutsideQueueNamespaces(ctx, queue+"-widened")
		Eventually(func(g Gomega) {
			g.Expect(invalidCondition(g, ctx, job).Reason).To(Equal(jobs.ReasonNamespaceNotAllowed))
		}, timeout).Should(Succeed())

		By("the queue admits every namespace: the condition clears")
		// The agent writes the queue's status meanwhile: retry on conflict.
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq)).To(Succeed())
			cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
			g.Expect(worker.Client.Update(ctx, cq)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, job)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(jobs.ReasonValid))
		}, timeout).Should(Succeed())
	})
})

var _ = Describe("Priority", Label("agent", "intake"), func() {
	It("takes the priority of the Job's PriorityClass, and marks an unknown one", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000})).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("prio-q").Flavor("tas").Obj())).To(Succeed())
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "prio-q")
		urgent := newJob(ns, "prio-q", 1, nil)
		urgent.Spec.Template.Spec.PriorityClassName = "urgent"
		Expect(worker.Client.Create(ctx, urgent)).To(Succeed())
		unknown := newJob(ns, "prio-q", 1, nil)
		unknown.Spec.Template.Spec.PriorityClassName = "nope"
		Expect(worker.Client.Create(ctx, unknown)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(urgent.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Spec.Priority).To(Equal(ptr.To[int32](1000)))
			c := invalidCondition(g, ctx, unknown)
			g.Expect(c.Reason).To(Equal(jobs.ReasonPriorityClassNotFound))
		}, timeout).Should(Succeed())

		By("the PriorityClass is created: the Job is valid and takes its priority")
		Expect(worker.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "nope"}, Value: 7})).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, unknown)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(unknown.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Spec.Priority).To(Equal(ptr.To[int32](7)))
		}, timeout).Should(Succeed())
	})

	// The Job controller starts without waiting for the classes' initial
	// list (on a cluster without any it comes late); a Job that names one
	// still waits for it and takes the class's value.
	It("gives a Job created while the agent was stopped its WorkloadPriorityClass's priority", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("wpc-restart-q").Flavor("tas").Obj())).To(Succeed())
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "wpc-restart-q")
		stopAgent()
		Expect(worker.Client.Create(ctx, &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "restart-high"}, Value: 900})).To(Succeed())
		named := newJob(ns, "wpc-restart-q", 1, nil)
		named.Labels[strata.PriorityClassLabel] = "restart-high"
		Expect(worker.Client.Create(ctx, named)).To(Succeed())
		plain := newJob(ns, "wpc-restart-q", 1, nil)
		Expect(worker.Client.Create(ctx, plain)).To(Succeed())
		stopAgent = startAgent()
		Eventually(func(g Gomega) {
			for _, j := range []*batchv1.Job{named, plain} {
				var wl strata.Workload
				g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(j.Name)}, &wl)).To(Succeed())
				if j == named {
					g.Expect(wl.Spec.Priority).To(Equal(ptr.To[int32](900)))
					g.Expect(wl.Spec.PriorityClassSource).To(Equal(strata.WorkloadPriorityClassSource))
				}
				if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid); c != nil {
					g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s: %s", j.Name, c.Message)
				}
			}
		}, timeout).Should(Succeed())
	})

	It("takes the priority of the Job's WorkloadPriorityClass, leaving its pods' PriorityClass, and marks an unknown one", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})).To(Succeed())
		Expect(worker.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "wpc-pods"}, Value: 5})).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("wpc-q").Flavor("tas").Obj())).To(Succeed())
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "wpc-q")
		high := newJob(ns, "wpc-q", 1, nil)
		high.Labels[strata.PriorityClassLabel] = "high"
		high.Spec.Template.Spec.PriorityClassName = "wpc-pods"
		Expect(worker.Client.Create(ctx, high)).To(Succeed())
		unknown := newJob(ns, "wpc-q", 1, nil)
		unknown.Labels[strata.PriorityClassLabel] = "wpc-later"
		Expect(worker.Client.Create(ctx, unknown)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(high.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Spec.Priority).To(Equal(ptr.To[int32](1000)))
			g.Expect(wl.Spec.PriorityClassName).To(Equal("high"))
			g.Expect(wl.Spec.PriorityClassSource).To(Equal(strata.WorkloadPriorityClassSource))
			g.Expect(wl.Spec.PodSets[0].Template.Spec.PriorityClassName).To(Equal("wpc-pods"))
			c := invalidCondition(g, ctx, unknown)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(jobs.ReasonPriorityClassNotFound))
			g.Expect(c.Message).To(Equal(`WorkloadPriorityClass "wpc-later" does not exist`))
		}, timeout).Should(Succeed())
		var job batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(high), &job)).To(Succeed())
		Expect(job.Spec.Template.Spec.PriorityClassName).To(Equal("wpc-pods"))

		By("a PriorityClass of the missing name does not stand in for the WorkloadPriorityClass")
		Expect(worker.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "wpc-later"}, Value: 3})).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(invalidCondition(g, ctx, unknown).Reason).To(Equal(jobs.ReasonPriorityClassNotFound))
		}, 2*time.Second).Should(Succeed())

		By("the WorkloadPriorityClass is created: the Job is valid and takes its priority")
		Expect(worker.Client.Create(ctx, &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "wpc-later"}, Value: 7})).To(Succeed())
		Eventually(func(g Gomega) {
			c := invalidCondition(g, ctx, unknown)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(jobs.ReasonValid))
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(unknown.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Spec.Priority).To(Equal(ptr.To[int32](7)))
			g.Expect(wl.Spec.PriorityClassSource).To(Equal(strata.WorkloadPriorityClassSource))
		}, timeout).Should(Succeed())
	})
})

var _ = Describe("ClusterQueue status", Label("agent"), func() {
	It("counts pending workloads and says why the queue cannot admit", func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("status-q").Flavor("no-such-flavor").Obj())).To(Succeed())
		ns := createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "status-q")
		Expect(worker.Client.Create(ctx, newJob(ns, "status-q", 1, nil))).To(Succeed())
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "status-q"}, &cq)).To(Succeed())
			g.Expect(cq.Status.PendingWorkloads).To(Equal(int32(1)))
			c := meta.FindStatusCondition(cq.Status.Conditions, "Active")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("flavors no-such-flavor do not exist"))
		}, timeout).Should(Succeed())
	})
})

// jobOutsideQueueNamespaces creates a ClusterQueue named name that admits
// only namespaces labelled team=ml, and a Job for it in a new namespace
// labelled team=web.
func jobOutsideQueueNamespaces(ctx SpecContext, name string) (*strata.ClusterQueue, *batchv1.Job) {
	GinkgoHelper()
	cq := testutil.MakeClusterQueue(name).Flavor("tas").Obj()
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}
	Expect(worker.Client.Create(ctx, cq)).To(Succeed())
	ns := createNamespace(ctx, map[string]string{"team": "web"})
	createLocalQueue(ctx, ns, cq.Name)
	job := newJob(ns, cq.Name, 1, nil)
	Expect(worker.Client.Create(ctx, job)).To(Succeed())
	return cq, job
}
