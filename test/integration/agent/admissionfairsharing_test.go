package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/scheduler"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's admission fair sharing, turned on in the agent's configuration:
// each LocalQueue's consumed usage is sampled into its status, and a
// ClusterQueue whose admissionScope asks for it serves first the
// LocalQueue that consumed less, whatever the priorities.
var _ = Describe("Admission fair sharing", Ordered, Label("agent", "admissionfairsharing"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		stopAgent()
		stopAgent = startAgent(func(cfg *configv1beta1.AgentConfiguration) {
			// A long half-life: what a queue consumed stays above
			// nothing for the whole spec.
			cfg.AdmissionFairSharing = &configv1beta1.AdmissionFairSharing{
				UsageHalfLifeTime:     metav1.Duration{Duration: time.Hour},
				UsageSamplingInterval: &metav1.Duration{Duration: time.Second},
			}
		})
		DeferCleanup(func() {
			stopAgent()
			stopAgent = startAgent()
		})
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("afs-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-afs").NodeLabel("pool", "afs").TopologyName("afs-topology").Obj())).To(Succeed())
		createPoolNode(ctx, "afs", "afs-n1", "b1", "r1", "4")
		Expect(worker.Client.Create(ctx, testutil.MakeWorkloadPriorityClass("afs-high", 1000))).To(Succeed())
		ns = createNamespace(ctx, nil)
	})

	It("samples each LocalQueue's usage and serves first the queue that consumed less, whatever the priority", func(ctx SpecContext) {
		cq := testutil.MakeClusterQueue("afs").Flavor("tas-afs").Obj()
		cq.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
		Expect(worker.Client.Create(ctx, cq)).To(Succeed())
		for _, q := range []string{"afs-a", "afs-b"} {
			Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue(q, ns, "afs"))).To(Succeed())
		}
		required := map[string]string{"strata.dev/podset-required-topology": rack}

		By("afs-a's first Job takes the whole node; its usage is sampled into its status")
		a1 := newJob(ns, "afs-a", 4, required)
		Expect(worker.Client.Create(ctx, a1)).To(Succeed())
		expectAdmitted(ctx, a1)
		Eventually(func(g Gomega) {
			var lq strata.LocalQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "afs-a"}, &lq)).To(Succeed())
			g.Expect(lq.Status.FairSharing).NotTo(BeNil())
			g.Expect(lq.Status.FairSharing.AdmissionFairSharingStatus).NotTo(BeNil())
			used := lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources[corev1.ResourceCPU]
			g.Expect(used.MilliValue()).To(BeNumerically(">", 0), "consumed: %v", lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources)
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var lq strata.LocalQueue
			g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "afs-b"}, &lq)).To(Succeed())
			g.Expect(lq.Status.FairSharing).NotTo(BeNil())
			g.Expect(lq.Status.FairSharing.AdmissionFairSharingStatus).NotTo(BeNil())
			g.Expect(lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources).To(BeEmpty())
		}, timeout).Should(Succeed())

		By("a higher-priority Job of afs-a, then one of afs-b, wait for the node")
		a2 := newJob(ns, "afs-a", 4, required)
		a2.Labels[strata.PriorityClassLabel] = "afs-high"
		Expect(worker.Client.Create(ctx, a2)).To(Succeed())
		expectWaiting(ctx, a2, scheduler.ReasonPending, "")
		b1 := newJob(ns, "afs-b", 4, required)
		Expect(worker.Client.Create(ctx, b1)).To(Succeed())
		expectWaiting(ctx, b1, scheduler.ReasonPending, "")

		By("the node frees up: afs-b, which consumed nothing, goes first")
		Expect(worker.Client.Delete(ctx, a1, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		expectAdmitted(ctx, b1)
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(g, ctx, a2).Status.Admission).To(BeNil())
		}, timeout).Should(Succeed())
		for _, j := range []*batchv1.Job{a2, b1} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
})
