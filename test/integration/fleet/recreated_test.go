package fleet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	hubcopies "strata.dev/strata/hub/controller/copies"
	"strata.dev/strata/pkg/workload"
)

var _ = Describe("A job deleted and created again", Label("fencing"), func() {
	It("runs again only once its earlier copy is stopped, while its worker does not answer, across a hub restart", func(ctx SpecContext) {
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

	It("runs again only once the earlier copy's pods are gone, when its worker answers", func(ctx SpecContext) {
		e := newEnv(ctx, "recreatedpods", map[string][][]string{"w1": {{"4"}}})
		j := e.job("again", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		runningOn(ctx, j, "w1")
		var first types.UID
		Eventually(func(g Gomega) { first = hubWorkload(g, ctx, j).UID }).Should(Succeed())

		By("a pod of the copy on w1 that takes its time to go (a finalizer holds it)")
		w1 := worker("w1")
		var cp batchv1.Job
		Expect(w1.Client.Get(ctx, client.ObjectKeyFromObject(j), &cp)).To(Succeed())
		const hold = "test.strata.dev/hold"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "again-0", Namespace: e.ns, Finalizers: []string{hold},
				Labels: map[string]string{strata.WorkloadLabel: workload.JobWorkloadName(cp.Name)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: cp.Name, UID: cp.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		Expect(w1.Client.Create(ctx, pod)).To(Succeed())
		release := func(ctx context.Context) {
			Eventually(func(g Gomega) {
				var p corev1.Pod
				err := w1.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)
				if apierrors.IsNotFound(err) {
					return
				}
				g.Expect(err).To(Succeed())
				p.Finalizers = nil
				g.Expect(w1.Client.Update(ctx, &p)).To(Succeed())
			}).Should(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) { release(ctx) })

		By("the Job is deleted on the hub and created again")
		Expect(hub.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			err := hub.Client.Get(ctx, client.ObjectKeyFromObject(j), j.DeepCopy())
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Job is gone: %v", err)
		}).Should(Succeed())
		again := e.job("again", 1, "1", nil)
		Expect(hub.Client.Create(ctx, again)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(w1.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "the garbage collector deletes the pod")
		}).Should(Succeed())

		By("while the pod terminates, the earlier Workload stays and says what it waits for; the new Job does not start")
		key := types.NamespacedName{Namespace: e.ns, Name: workload.JobWorkloadName("again")}
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, key, &wl)).To(Succeed())
			g.Expect(wl.UID).To(Equal(first))
			c := meta.FindStatusCondition(wl.Status.Conditions, hubcopies.ConditionCopyGoing)
			g.Expect(c).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(c.Reason).To(Equal(hubcopies.ReasonWaitingForPods))
			g.Expect(c.Message).To(ContainSubstring("again-0 (Terminating since "))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, key, &wl)).To(Succeed())
			g.Expect(wl.UID).To(Equal(first))
			g.Expect(wl.DeletionTimestamp).NotTo(BeNil())
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the pod goes: the earlier Workload goes, and the new Job runs on w1")
		release(ctx)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, again)
			g.Expect(wl.UID).NotTo(Equal(first))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		runningOn(ctx, again, "w1")
	})
})
