package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/fencing"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/testutil"
)

// An agent that restarts has not watched its hubs' Leases meanwhile: a
// Lease deleted while it was away is followed from the agent's record of
// it, and a hub of which neither is left has its copies stopped.
var _ = Describe("Fencing across an agent restart", Ordered, Label("agent", "fencing"), func() {
	const fenceAfter = 15 * time.Second
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("fence-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-fence").NodeLabel("pool", "fence").TopologyName("fence-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("fence-q").Flavor("tas-fence").Obj())).To(Succeed())
		createPoolNode(ctx, "fence", "fence-1", "b1", "r1", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "fence-q")
	})

	hubLease := func(origin string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: config.DefaultWorkerNamespace, Name: fencing.LeaseName(origin)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(origin), RenewTime: ptr.To(metav1.NewMicroTime(time.Now())),
				LeaseDurationSeconds: ptr.To(int32(fenceAfter / time.Second))}}
	}
	record := func(origin string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: config.DefaultWorkerNamespace, Name: fencing.RecordPrefix + origin}}
	}
	copyOf := func(origin, uid string) *batchv1.Job {
		j := hubCopy(ns, "fence-q", 1, uid, "1", "tas-fence")
		j.Labels[strata.OriginLabel] = origin
		return j
	}
	expectFenced := func(ctx SpecContext, job *batchv1.Job, within time.Duration, message string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(fencing.ReasonFenced))
			g.Expect(c.Message).To(ContainSubstring(message))
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
		}, within, 200*time.Millisecond).Should(Succeed())
	}

	It("stops the copies of a hub whose Lease was deleted while it was away, at the deadline its record keeps, and those of a hub with no Lease nor record at once", func(ctx SpecContext) {
		kept, lost := "fence-hub-kept-record", "fence-hub-lost"
		for _, origin := range []string{kept, lost} {
			Expect(worker.Client.Create(ctx, hubLease(origin))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, origin := range []string{kept, lost} {
				Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, hubLease(origin)))).To(Succeed())
				Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, record(origin)))).To(Succeed())
			}
		})
		withRecord, withNothing := copyOf(kept, "0b5a3f7e-0000-4000-8000-00000000000a"), copyOf(lost, "0b5a3f7e-0000-4000-8000-00000000000b")
		for _, j := range []*batchv1.Job{withRecord, withNothing} {
			Expect(worker.Client.Create(ctx, j)).To(Succeed())
			expectAdmitted(ctx, j)
		}
		Eventually(func(g Gomega) {
			for _, origin := range []string{kept, lost} {
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(record(origin)), &coordinationv1.Lease{})).To(Succeed(), "the agent's record of %s", origin)
			}
		}, timeout).Should(Succeed())

		By("the agent stops; one hub's Lease is deleted, the other's with the agent's record of it")
		stopAgent()
		Expect(worker.Client.Delete(ctx, hubLease(kept))).To(Succeed())
		Expect(worker.Client.Delete(ctx, hubLease(lost))).To(Succeed())
		Expect(worker.Client.Delete(ctx, record(lost))).To(Succeed())
		stopAgent = startAgent()

		expectFenced(ctx, withNothing, timeout, "is missing, and no earlier agent recorded it")
		expectFenced(ctx, withRecord, fenceAfter+timeout, "was deleted")
		for _, j := range []*batchv1.Job{withRecord, withNothing} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
