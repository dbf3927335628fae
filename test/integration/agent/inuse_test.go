package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/controller/inuse"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's resource-in-use finalizer: a ClusterQueue being deleted admits
// nothing and stays while its admitted workloads run; a ResourceFlavor
// stays while a ClusterQueue names it, a Topology while a ResourceFlavor
// does.
var _ = Describe("Deleting a queue, flavor or topology in use", Ordered, Label("agent", "localqueue"), func() {
	var ns string
	rackRequired := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}
	topology := testutil.MakeTopology("inuse-topology", block, rack, host).Obj()
	flavor := testutil.MakeResourceFlavor("tas-inuse").NodeLabel("pool", "inuse").TopologyName("inuse-topology").Obj()
	cq := testutil.MakeClusterQueue("inuse-q").Flavor("tas-inuse").Obj()

	BeforeAll(func(ctx SpecContext) {
		for _, o := range []client.Object{topology, flavor, cq} {
			Expect(worker.Client.Create(ctx, o)).To(Succeed())
		}
		createPoolNode(ctx, "inuse", "inuse-1", "b1", "r1", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "inuse-q")
	})

	// expectHeld checks that obj is being deleted and still there, and
	// that the agent said why (an InUse event naming what uses it).
	expectHeld := func(ctx SpecContext, obj client.Object, kind, user string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(obj.GetDeletionTimestamp()).NotTo(BeNil())
			g.Expect(obj.GetFinalizers()).To(ContainElement(inuse.Finalizer))
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs)).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(SatisfyAll(
				HaveField("Regarding.Kind", kind),
				HaveField("Regarding.Name", obj.GetName()),
				HaveField("Reason", inuse.ReasonInUse),
				HaveField("Note", ContainSubstring("still used by 1")),
				HaveField("Note", ContainSubstring(user)))))
		}, timeout).Should(Succeed())
	}
	expectGone := func(ctx SpecContext, obj client.Object) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			err := worker.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			g.Expect(err).To(HaveOccurred())
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		}, timeout).Should(Succeed())
	}

	It("keeps each until nothing uses it, and admits nothing into a ClusterQueue being deleted", func(ctx SpecContext) {
		By("the agent adds its finalizer to each")
		Eventually(func(g Gomega) {
			for _, o := range []client.Object{topology.DeepCopy(), flavor.DeepCopy(), cq.DeepCopy()} {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				g.Expect(o.GetFinalizers()).To(ContainElement(inuse.Finalizer), o.GetName())
			}
		}, timeout).Should(Succeed())
		running := newJob(ns, "inuse-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, running)).To(Succeed())
		expectAdmitted(ctx, running)

		By("the Topology and the flavor stay while the flavor and the queue name them")
		Expect(worker.Client.Delete(ctx, topology.DeepCopy())).To(Succeed())
		expectHeld(ctx, topology.DeepCopy(), "Topology", "tas-inuse")
		Expect(worker.Client.Delete(ctx, flavor.DeepCopy())).To(Succeed())
		expectHeld(ctx, flavor.DeepCopy(), "ResourceFlavor", "inuse-q")

		By("the ClusterQueue stays while a workload holds its quota, and admits nothing more")
		Expect(worker.Client.Delete(ctx, cq.DeepCopy())).To(Succeed())
		wlName := ns + "/" + workloadOf(Default, ctx, running).Name
		expectHeld(ctx, cq.DeepCopy(), "ClusterQueue", wlName)
		Eventually(func(g Gomega) {
			var got strata.ClusterQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(cq), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, "Active")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(strata.QueueTerminating))
			g.Expect(c.Message).To(Equal("being deleted: admits no workloads, and goes once its 1 admitted workload(s) finish"))
		}, timeout).Should(Succeed())
		expectLocalQueueStatus(ctx, ns, "inuse-q", 0, 1, metav1.ConditionFalse, strata.QueueStopped)
		waiting := newJob(ns, "inuse-q", 2, rackRequired)
		Expect(worker.Client.Create(ctx, waiting)).To(Succeed())
		expectWaiting(ctx, waiting, scheduler.ReasonStopped, "ClusterQueue inuse-q is being deleted: it admits no more workloads")
		expectNotAdmitted(ctx, waiting, "a ClusterQueue being deleted admits nothing")
		expectAdmitted(ctx, running)

		By("the admitted workload finishes: the queue goes, then the flavor, then the Topology")
		markFinished(ctx, running)
		expectGone(ctx, cq.DeepCopy())
		expectGone(ctx, flavor.DeepCopy())
		expectGone(ctx, topology.DeepCopy())
		expectLocalQueueStatus(ctx, ns, "inuse-q", 1, 0, metav1.ConditionFalse, strata.LocalQueueClusterQueueMissing)
	})
})
