package agent

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("Why a Job waits", Ordered, Label("agent", "admission"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("why-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-why").NodeLabel("pool", "why").TopologyName("why-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("why-q").Flavor("tas-why").Obj())).To(Succeed())
		createPoolNode(ctx, "why", "wy1", "b1", "wr1", "2")
		// Another queue, on nodes of its own, whose admissions make the
		// scheduler look at the waiting Job again and again.
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-why-other").NodeLabel("pool", "why-other").TopologyName("why-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("why-other-q").Flavor("tas-why-other").Obj())).To(Succeed())
		createPoolNode(ctx, "why-other", "wo1", "b1", "wr9", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "why-q")
		createLocalQueue(ctx, ns, "why-other-q")
	})

	// pendingEvents are the Pending events regarding the Job.
	pendingEvents := func(g Gomega, ctx SpecContext, job *batchv1.Job) []eventsv1.Event {
		var evs eventsv1.EventList
		g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		return slices.DeleteFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Kind != "Job" || e.Regarding.Name != job.Name || e.Regarding.UID != job.UID || e.Reason != "Pending"
		})
	}
	notes := func(evs []eventsv1.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Note)
			if e.Series != nil {
				out = append(out, "repeated") // the same event emitted again
			}
		}
		return out
	}

	It("says why on the Job, once per reason, however often the scheduler looks", func(ctx SpecContext) {
		job := newJob(ns, "why-q", 4, map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(notes(pendingEvents(g, ctx, job))).To(ConsistOf(ContainSubstring("the best rack fits 2 of 4 pods")))
		}, timeout).Should(Succeed())

		By("other workloads come and are admitted: every pass looks at the waiting Job again")
		for range 3 {
			other := newJob(ns, "why-other-q", 1, map[string]string{"strata.dev/podset-required-topology": rack})
			Expect(worker.Client.Create(ctx, other)).To(Succeed())
			Eventually(func(g Gomega) {
				var wl strata.Workload
				g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.WorkloadName(other.Name)}, &wl)).To(Succeed())
				g.Expect(wl.Status.Admission).NotTo(BeNil())
			}, timeout).Should(Succeed())
		}
		Consistently(func(g Gomega) {
			g.Expect(notes(pendingEvents(g, ctx, job))).To(ConsistOf(ContainSubstring("the best rack fits 2 of 4 pods")))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("only the numbers change: no event")
		// In one write: a new node would pass through the API server's
		// not-ready taint, a reason of its own.
		var n corev1.Node
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "wy1"}, &n)).To(Succeed())
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3")
		n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("3")
		Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(notes(pendingEvents(g, ctx, job))).To(ConsistOf(ContainSubstring("the best rack fits 2 of 4 pods")))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the reason changes: one more event")
		Expect(worker.Client.Get(ctx, client.ObjectKey{Name: "wy1"}, &n)).To(Succeed())
		n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
		n.Status.Capacity[corev1.ResourcePods] = resource.MustParse("1")
		Expect(worker.Client.Status().Update(ctx, &n)).To(Succeed())
		want := ConsistOf(ContainSubstring("the best rack fits 2 of 4 pods"), ContainSubstring("limited by pods"))
		Eventually(func(g Gomega) { g.Expect(notes(pendingEvents(g, ctx, job))).To(want) }, timeout).Should(Succeed())
		Consistently(func(g Gomega) { g.Expect(notes(pendingEvents(g, ctx, job))).To(want) }, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		var j batchv1.Job
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
		Expect(j.Spec.Template.Labels).NotTo(HaveKey(strata.WorkloadLabel), "nothing on the Job says it was started")
	})
})
