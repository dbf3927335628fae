package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
)

// hubJobSuspended returns the hub Job's Suspended=True condition, or nil.
func hubJobSuspended(g Gomega, ctx SpecContext, job *batchv1.Job) *batchv1.JobCondition {
	var j batchv1.Job
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

var _ = Describe("Worker loss", Serial, func() {
	It("takes a worker whose API server stops answering off dispatch within 15 s, and runs the work waiting for it within 30 s of its return", func(ctx SpecContext) {
		e := newEnv(ctx, "loss", map[string][][]string{
			"w1": {{"4", "4"}}, // the only rack of 8 CPUs, and the tightest fit for small Jobs
			"w2": {{"2", "2"}},
		})
		w1 := worker("w1")
		By("pausing w1's kube-apiserver: connections to it hang, as behind a partition")
		resume, err := w1.PauseAPIServer()
		Expect(err).NotTo(HaveOccurred())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				Expect(resume()).To(Succeed())
			}
		})
		paused := time.Now()
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w1", strata.WorkerClusterConnected)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("health probes"))
		}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("w1 Connected=False %s after its API server stopped answering\n", time.Since(paused).Round(100*time.Millisecond))

		By("a small Job goes to w2, though w1 would be the tighter fit")
		small := e.job("small", 1, "1", nil)
		Expect(hub.Client.Create(ctx, small)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, small)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())

		By("a rack of 8 CPUs exists only on w1: the Job waits, never sent to the unreachable worker")
		big := e.job("big", 8, "1", map[string]string{"strata.dev/podset-required-topology": rack})
		Expect(hub.Client.Create(ctx, big)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, big)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("unreachable"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			wl := hubWorkload(g, ctx, big)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "placement %+v", wl.Status.Placement)
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the hub Job says it runs nowhere: Suspended (WaitingOnHub), not Running")
		Eventually(func(g Gomega) {
			g.Expect(hubJobSuspended(g, ctx, big)).To(HaveField("Reason", batchjob.ReasonWaitingOnHub))
		}).Should(Succeed())

		By("w1 answers again: the waiting Job is admitted there within 30 s")
		Expect(resume()).To(Succeed())
		resumed = true
		back := time.Now()
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, big)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("the Job waiting for w1 admitted there %s after it answered again\n", time.Since(back).Round(100*time.Millisecond))
		Eventually(func(g Gomega) {
			g.Expect(hubJobSuspended(g, ctx, big)).To(BeNil(), "the copy's status is mirrored once it exists")
		}).Should(Succeed())
		Expect(copies(Default, ctx, small)).To(Equal([]string{"w2"}), "dispatched once")
	})
})
