package fleet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

var _ = Describe("A job deleted and created again while its worker does not answer", Label("fencing"), func() {
	It("runs again only once its earlier copy is stopped, across a hub restart", func(ctx SpecContext) {
		// fenceAfter long enough that a copy still running on w1 would be
		// seen beside the new one on w2.
		withFencingAfter(20*time.Second, 26*time.Second)
		e := newEnv(ctx, "recreated", map[string][][]string{"w1": {{"4"}}})
		j := e.job("again", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		var first types.UID
		Eventually(func(g Gomega) { first = hubWorkload(g, ctx, j).UID }).Should(Succeed())
		e.createNode(ctx, worker("w2"), "recreated-w2-n0", "r0", "4")
		followCtx, stopFollowing := context.WithCancel(context.Background())
		DeferCleanup(stopFollowing)
		seen := followRunning(followCtx, e.ns, "w1", "w2")

		By("a partition between the hub and w1, which the hub notices; the Job is deleted on the hub and created again")
		heal := cutW1()
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, j).Status.Conditions, strata.WorkloadWorkerUnreachable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		Expect(hub.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			err := hub.Client.Get(ctx, client.ObjectKeyFromObject(j), j.DeepCopy())
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Job is gone: %v", err)
		}).Should(Succeed())
		again := e.job("again", 1, "1", nil)
		Expect(hub.Client.Create(ctx, again)).To(Succeed())

		By("the earlier Workload stays, being deleted, until its copy is known stopped; the hub restarts meanwhile")
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: workload.JobWorkloadName("again")}, &wl)).To(Succeed())
			g.Expect(wl.UID).To(Equal(first))
			g.Expect(wl.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())
		stopHub()
		stopHub = startHub()

		By("the new Job runs on w2, only after w1's agent stopped the earlier copy")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, again)
			g.Expect(wl.UID).NotTo(Equal(first))
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 4*time.Minute, 200*time.Millisecond).Should(Succeed()) // the restarted hub reconnects every worker and counts replaceAfter from its start when it has not reached w1: slow when the suite has left hundreds of Jobs
		fencedOnW1(ctx, j)

		By("once the partition heals, the earlier copy goes from w1")
		heal()
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).To(BeNil(), "the earlier copy on w1 is removed on return")
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed()) // the hub retries a worker it could not reach every 30 s
		stopFollowing()
		events, overlaps := seen.result()
		GinkgoWriter.Printf("%d changes of copies watched, %d jobs running on two workers at once\n", events, len(overlaps))
		Expect(overlaps).To(BeEmpty(), "the job ran on two clusters at once")
	})
})
