package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's admission fair sharing on a MultiKueue manager: the hub keeps
// its LocalQueues' usage and a hub ClusterQueue whose admissionScope asks
// for it dispatches first the LocalQueue that consumed less, whatever the
// priorities.
var _ = Describe("Hub admission fair sharing", func() {
	It("dispatches first the hub LocalQueue that consumed less", func(ctx SpecContext) {
		stopHub()
		old := hubCfg.AdmissionFairSharing
		hubCfg.AdmissionFairSharing = &configv1beta1.AdmissionFairSharing{
			UsageHalfLifeTime:     metav1.Duration{Duration: time.Hour},
			UsageSamplingInterval: &metav1.Duration{Duration: time.Second},
		}
		stopHub = startHub()
		DeferCleanup(func() {
			stopHub()
			hubCfg.AdmissionFairSharing = old
			stopHub = startHub()
		})
		e := newEnv(ctx, "afs", map[string][][]string{"w1": {{"8"}}})
		Eventually(func(g Gomega) { // the hub writes the queue's status meanwhile
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-afs"}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}
			cq.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("lq-b", e.ns, "cq-afs"))).To(Succeed())
		for _, w := range workers {
			Expect(w.Client.Create(ctx, testutil.MakeLocalQueue("lq-b", e.ns, "cq-afs"))).To(Succeed())
		}
		for _, c := range append(workers, hub) {
			Expect(c.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "afs-high"}, Value: 100})).To(Succeed())
		}

		By("lq's first Job takes the queue's whole quota; its usage is sampled into its status")
		a1 := e.job("a1", 4, "1", nil)
		Expect(hub.Client.Create(ctx, a1)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, a1).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var lq strata.LocalQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "lq"}, &lq)).To(Succeed())
			g.Expect(lq.Status.FairSharing).NotTo(BeNil())
			g.Expect(lq.Status.FairSharing.AdmissionFairSharingStatus).NotTo(BeNil())
			used := lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources[corev1.ResourceCPU]
			g.Expect(used.MilliValue()).To(BeNumerically(">", 0))
		}).Should(Succeed())

		By("a higher-priority Job of lq, then one of lq-b, wait for the quota")
		a2 := e.job("a2", 4, "1", nil)
		a2.Spec.Template.Spec.PriorityClassName = "afs-high"
		Expect(hub.Client.Create(ctx, a2)).To(Succeed())
		b1 := e.job("b1", 4, "1", nil)
		b1.Labels[strata.QueueNameLabel] = "lq-b"
		Expect(hub.Client.Create(ctx, b1)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, j := range [][2]string{{"a2", "lq"}, {"b1", "lq-b"}} {
				job := e.job(j[0], 4, "1", nil)
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Spec.QueueName).To(Equal(j[1]))
				g.Expect(wl.Status.Placement).To(BeNil())
			}
		}).Should(Succeed())

		By("the first Job finishing on its worker: lq-b, which consumed nothing, goes first")
		completeCopy(ctx, worker(hubWorkload(Default, ctx, a1).Status.Placement.Cluster), a1)
		Eventually(func(g Gomega) {
			b, a := hubWorkload(g, ctx, b1), hubWorkload(g, ctx, a2)
			g.Expect(b.Status.Placement).NotTo(BeNil(), "b1: %+v", b.Status.Conditions)
			g.Expect(a.Status.Placement).To(BeNil(), "the quota holds one of them; a2: %+v", a.Status.Conditions)
		}).Should(Succeed())
	})
})
