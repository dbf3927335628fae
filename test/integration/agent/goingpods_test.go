package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/testutil"
)

// The hub may not read pods on a worker: while it takes a copy back and
// waits for the copy's pods to be gone, the agent writes on the copy the
// pods that keep it.
var _ = Describe("A hub's copy being deleted", Label("agent", "dispatch"), func() {
	const hold = "test.strata.dev/hold"

	// podOf creates a pod with labels, held by a finalizer, deleted: it
	// stays Terminating, as on a node that does not answer.
	podOf := func(ctx SpecContext, ns, name string, labels map[string]string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Finalizers: []string{hold}},
			Spec: corev1.PodSpec{NodeName: "gone-node", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		Expect(worker.Client.Create(ctx, pod)).To(Succeed())
		Expect(worker.Client.Delete(ctx, pod)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				var p corev1.Pod
				g.Expect(client.IgnoreNotFound(worker.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p))).To(Succeed())
				if p.Name != "" {
					p.Finalizers = nil
					g.Expect(worker.Client.Update(ctx, &p)).To(Succeed())
				}
			}).Should(Succeed())
		})
	}
	// deleteHeld deletes obj in the foreground: with no garbage collector
	// in this suite, it stays, being deleted, until its finalizer is
	// taken off at the end.
	deleteHeld := func(ctx SpecContext, obj client.Object) {
		Expect(worker.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				g.Expect(client.IgnoreNotFound(worker.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(Succeed())
				obj.SetFinalizers(nil)
				g.Expect(client.IgnoreNotFound(worker.Client.Update(ctx, obj))).To(Succeed())
			}).Should(Succeed())
		})
	}
	hubLabels := func(obj client.Object) {
		l := obj.GetLabels()
		l[strata.OriginLabel] = "strata-hub"
		l[strata.HubWorkloadUIDLabel] = "5b0c7a52-0000-4000-8000-0000000000a1"
		l[strata.DispatchGenerationLabel] = "1"
		obj.SetLabels(l)
	}

	It("lists a Job copy's pods, Terminating since when and on which node", func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		job := newJob(ns, "some-queue", 1, nil)
		hubLabels(job)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		podOf(ctx, ns, job.Name+"-0", map[string]string{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})
		podOf(ctx, ns, "someone-else", map[string]string{strata.WorkloadLabel: "job-someone-else"})
		deleteHeld(ctx, job)
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Annotations).To(HaveKeyWithValue(strata.GoingPodsAnnotation,
				MatchRegexp(`^`+job.Name+`-0 \(Terminating since \S+Z, node gone-node\)$`)))
		}, "10s").Should(Succeed())
	})

	It("lists a LeaderWorkerSet copy's pods", Label("lws"), func(ctx SpecContext) {
		ns := createNamespace(ctx, nil)
		l := testutil.MakeLeaderWorkerSet("going", ns).Queue("some-queue").Replicas(1).Size(2).Defaulted().Obj()
		hubLabels(l)
		Expect(worker.Client.Create(ctx, l)).To(Succeed())
		podOf(ctx, ns, "going-0", map[string]string{lws.NameLabel: l.Name})
		deleteHeld(ctx, l)
		Eventually(func(g Gomega) {
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(l), l)).To(Succeed())
			g.Expect(l.Annotations).To(HaveKeyWithValue(strata.GoingPodsAnnotation, MatchRegexp(`^going-0 \(Terminating since \S+Z, node gone-node\)$`)))
		}, "10s").Should(Succeed())
	})
})
