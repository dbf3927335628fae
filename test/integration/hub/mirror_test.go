package hub

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
)

// The hub's API server validates the status of a Job managed by another
// controller (KEP-4368): a running Job's start time stays, its counters
// never go down, a terminal condition stays. A Job placed again after its
// first copy was taken back must still take its second copy's status, the
// final one included.
var _ = Describe("A hub Job's status", Label("hub", "mirror"), func() {
	It("takes a second copy's status after the first copy ran and was taken back", func(ctx SpecContext) {
		hubJob := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mirrored-twice"},
			Spec: batchv1.JobSpec{
				ManagedBy:   ptr.To(strata.ManagedByController),
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
			},
		}
		Expect(hub.Client.Create(ctx, hubJob)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, hubJob, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
		})
		mirror := func(copyStatus batchv1.JobStatus) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var cur batchv1.Job
				g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(hubJob), &cur)).To(Succeed())
				copyJob := &batchv1.Job{Status: copyStatus}
				if batchjob.Adapt(&cur).MirrorStatus(batchjob.Adapt(copyJob)) {
					g.Expect(hub.Client.Status().Update(ctx, &cur)).To(Succeed())
				}
			}, 10*time.Second).Should(Succeed())
		}
		now := time.Now().Truncate(time.Second)
		first := metav1.NewTime(now.Add(-time.Hour))

		By("the first copy runs, two of its pods failing")
		mirror(batchv1.JobStatus{StartTime: &first, Active: 1, Ready: ptr.To[int32](1), Failed: 2, Terminating: ptr.To[int32](0)})

		By("the first copy is taken back")
		Eventually(func(g Gomega) {
			var cur batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(hubJob), &cur)).To(Succeed())
			if batchjob.Adapt(&cur).ClearRun() {
				g.Expect(hub.Client.Status().Update(ctx, &cur)).To(Succeed())
			}
		}, 10*time.Second).Should(Succeed())

		By("the second copy, on another worker, starts afresh and completes")
		second := metav1.NewTime(now.Add(-time.Minute))
		mirror(batchv1.JobStatus{StartTime: &second, Active: 1, Ready: ptr.To[int32](1), Terminating: ptr.To[int32](0)})
		done := metav1.NewTime(now)
		mirror(batchv1.JobStatus{StartTime: &second, CompletionTime: &done, Succeeded: 1, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: done, LastProbeTime: done},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: done, LastProbeTime: done},
			}})

		var got batchv1.Job
		Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(hubJob), &got)).To(Succeed())
		done2, result := batchjob.Adapt(&got).Finished()
		Expect(done2).To(BeTrue(), "the hub Job finished")
		Expect(result).To(Equal("Succeeded"))
		Expect(got.Status.Succeeded).To(Equal(int32(1)))
		Expect(got.Status.Failed).To(Equal(int32(2)), "the first run's failures stay counted")
		Expect(got.Status.StartTime.Time).To(BeTemporally("==", first.Time), "a running Job's start time stays")
	})
})
