package fleet

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	hubcopies "strata.dev/strata/hub/controller/copies"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("Dispatch lifecycle", func() {
	It("places a Job elsewhere when its worker can no longer admit it", func(ctx SpecContext) {
		e := newEnv(ctx, "gone", map[string][][]string{
			"w1": {{"4", "4"}},
			"w2": {{"4", "4"}},
		})
		By("blocking w1's StrictFIFO ClusterQueue with Jobs submitted there directly: one admitted, one that waits at its head")
		w1 := worker("w1")
		var cq strata.ClusterQueue
		Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "cq-gone"}, &cq)).To(Succeed())
		cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("8")}}
		cq.Spec.QueueingStrategy = strata.StrictFIFO
		Expect(w1.Client.Update(ctx, &cq)).To(Succeed())
		local := e.job("local", 1, "2", nil)
		Expect(w1.Client.Create(ctx, local)).To(Succeed())
		Eventually(func(g Gomega) {
			_, wl := copyOn(g, ctx, w1, local)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		// Its 8 CPUs fit neither the quota nor the nodes while "local"
		// runs: it waits at the head, and the queue behind it. The hub
		// sees the queue's quota (2 of 8 used), not its order.
		head := e.job("head", 2, "4", nil)
		Expect(w1.Client.Create(ctx, head)).To(Succeed())
		Eventually(func(g Gomega) {
			_, wl := copyOn(g, ctx, w1, head)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionFalse(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue(), "%v", wl.Status.Conditions)
		}).Should(Succeed())

		By("dispatching a Job that w1's summary still has room for")
		job := e.job("moved", 1, "4", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(2))
			first := wl.Status.Placement.Attempts[0]
			g.Expect(first.Cluster).To(Equal("w1"), "the tightest fit, as the summaries say")
			g.Expect(first.Result).To(Equal(strata.PlacementRejected), "w1's agent keeps it Pending behind the head of its queue")
			g.Expect(first.Message).To(ContainSubstring("has not been able to admit the copy for 3s"))
			g.Expect(wl.Status.Placement.Attempts[1].Result).To(Equal(strata.PlacementAdmitted))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w2"}), "w1's copy is gone")
		}, 2*time.Minute).Should(Succeed())
	})

	It("dispatches a Job created suspended (Kueue's way), runs on when it is suspended, takes the copy back when its Workload is deactivated or it is deleted, and dispatches again on reactivation", func(ctx SpecContext) {
		e := newEnv(ctx, "life", map[string][][]string{"w3": {{"4", "4"}}})
		job := e.job("life", 2, "1", nil)
		job.Spec.Suspend = ptr.To(true) // as every Kueue manifest has it
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil())
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w3"}))
		}).Should(Succeed())

		By("the copy running on the worker")
		w3 := worker("w3")
		Eventually(func(g Gomega) {
			cp, _ := copyOn(g, ctx, w3, job)
			g.Expect(cp).NotTo(BeNil())
			start := metav1.NewTime(time.Now().Truncate(time.Second))
			cp.Status = batchv1.JobStatus{StartTime: &start, Active: 2, Ready: ptr.To[int32](2)}
			g.Expect(w3.Client.Status().Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(j.Status.Active).To(Equal(int32(2)))
		}).Should(Succeed())

		By("suspending the hub Job changes nothing: its suspend is Strata's, as Kueue's")
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			job.Spec.Suspend = ptr.To(false)
			g.Expect(hub.Client.Update(ctx, job)).To(Succeed())
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			job.Spec.Suspend = ptr.To(true)
			g.Expect(hub.Client.Update(ctx, job)).To(Succeed())
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w3"}))
			g.Expect(hubWorkload(g, ctx, job).Status.Placement.DispatchGeneration).To(Equal(int64(1)))
		}, 2*time.Second).Should(Succeed())

		By("deactivating the hub Workload (spec.active: false), the user's hold")
		setActive(ctx, job, false)
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
			var j batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(j.Status.Active).To(BeZero(), "nothing of the removed copy runs")
			g.Expect(j.Status.StartTime).To(BeNil())
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement.Cluster).To(BeEmpty())
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Reason).To(Equal(dispatch.ReasonDeactivated))
			g.Expect(c.Message).To(ContainSubstring("spec.active"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
			g.Expect(ptr.Deref(hubWorkload(g, ctx, job).Spec.Active, true)).To(BeFalse(), "the intake keeps the user's spec.active")
		}, 2*time.Second).Should(Succeed())

		By("reactivating it")
		setActive(ctx, job, true)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
			cp, _ := copyOn(g, ctx, worker("w3"), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.DispatchGenerationLabel, "2"))
		}).Should(Succeed())

		By("deleting it")
		Expect(hub.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())
	})

	It("takes the copy back when the hub Job is deleted with --cascade=orphan, releasing its quota", func(ctx SpecContext) {
		e := newEnv(ctx, "orphan", map[string][][]string{"w3": {{"4", "4"}}})
		job := e.job("orphan", 2, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil())
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w3"}))
		}).Should(Succeed())

		By("deleting the hub Job with the orphan propagation policy (kubectl delete --cascade=orphan)")
		Expect(hub.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty(), "the copy must not run on unmanaged")
			var wl strata.Workload
			err := hub.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: workload.JobWorkloadName(job.Name)}, &wl)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Workload, and so its quota charge, is gone: %v", err)
		}).Should(Succeed())

		By("a Workload the garbage collector orphaned (no owner left) goes too")
		// envtest runs no garbage collector: do what it does for the
		// orphan policy, on a second Job's Workload.
		second := e.job("orphan-2", 1, "1", nil)
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		var wl strata.Workload
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, second).Status.Admission).NotTo(BeNil())
			g.Expect(copies(g, ctx, second)).To(Equal([]string{"w3"}))
		}).Should(Succeed())
		stopHub()
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: second.Namespace, Name: workload.JobWorkloadName(second.Name)}, &wl)).To(Succeed())
			wl.OwnerReferences = nil
			g.Expect(hub.Client.Update(ctx, &wl)).To(Succeed())
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, second, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		stopHub = startHub()
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, second)).To(BeEmpty())
			err := hub.Client.Get(ctx, client.ObjectKeyFromObject(&wl), &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}).Should(Succeed())
	})

	It("places again an admitted copy deleted on its worker, never sending it there again as the same dispatch", func(ctx SpecContext) {
		e := newEnv(ctx, "vanish", map[string][][]string{
			"w1": {{"4"}},
			"w2": {{"4"}},
		})
		job := e.job("vanish", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		var first string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.Status.Placement.Cluster
		}).Should(Succeed())

		By("deleting the admitted copy on " + first)
		w := worker(first)
		cp, _ := copyOn(Default, ctx, w, job)
		Expect(cp).NotTo(BeNil())
		Expect(w.Client.Delete(ctx, cp, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		other := map[string]string{"w1": "w2", "w2": "w1"}[first]
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal(other), "the worker that lost it is in backoff")
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
			g.Expect(wl.Status.Placement.Attempts[0].Result).To(Equal(strata.PlacementRejected))
			g.Expect(wl.Status.Placement.Attempts[0].Message).To(ContainSubstring("deleted on " + first))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{other}))
		}).Should(Succeed())
	})

	It("places again a copy deleted on its worker with its pods orphaned only once the agent deleted them", func(ctx SpecContext) {
		e := newEnv(ctx, "orphaned", map[string][][]string{
			"w1": {{"4"}},
			"w2": {{"4"}},
		})
		job, first, w, cp := admittedCopy(ctx, e, "orphaned")

		By("a pod of the copy on " + first + ", held Terminating by a finalizer once deleted")
		pod := heldPod(ctx, w, cp, "orphaned-0")

		By("kubectl delete job --cascade=orphan on " + first + ": envtest runs no garbage collector, so what it does by hand (the dependents lose their owner, then the copy's orphan finalizer goes)")
		Expect(w.Client.Delete(ctx, cp, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		wlKey := client.ObjectKey{Namespace: e.ns, Name: workload.JobWorkloadName(cp.Name)}
		Eventually(func(g Gomega) {
			var wwl strata.Workload
			g.Expect(w.Client.Get(ctx, wlKey, &wwl)).To(Succeed())
			wwl.OwnerReferences = nil
			g.Expect(w.Client.Update(ctx, &wwl)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			p.OwnerReferences = nil
			g.Expect(w.Client.Update(ctx, &p)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			err := w.Client.Get(ctx, client.ObjectKeyFromObject(cp), &j)
			if apierrors.IsNotFound(err) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			j.Finalizers = slices.DeleteFunc(j.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
			g.Expect(w.Client.Update(ctx, &j)).To(Succeed())
		}).Should(Succeed())

		By("the agent deletes the orphaned pod and names it on the copy's Workload; the hub waits for it")
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "the orphaned pod is deleted")
			var wwl strata.Workload
			g.Expect(w.Client.Get(ctx, wlKey, &wwl)).To(Succeed())
			g.Expect(wwl.Annotations[strata.GoingPodsAnnotation]).To(ContainSubstring(pod.Name))
		}).Should(Succeed())
		notPlacedAgain(ctx, job, "placed again while the orphaned pod may run")
		waitsFor(ctx, job, pod)

		By("the pod goes: so does the copy's Workload, and the hub places the workload again")
		releasePod(ctx, w, pod)
		placedAgainOnceGone(ctx, w, wlKey, job, first)
	})

	It("places again a copy deleted on its worker only once its pods are gone", func(ctx SpecContext) {
		e := newEnv(ctx, "podsgone", map[string][][]string{
			"w1": {{"4"}},
			"w2": {{"4"}},
		})
		job, first, w, cp := admittedCopy(ctx, e, "podsgone")
		wlKey := client.ObjectKey{Namespace: e.ns, Name: workload.JobWorkloadName(cp.Name)}
		Eventually(func(g Gomega) {
			var wwl strata.Workload
			g.Expect(w.Client.Get(ctx, wlKey, &wwl)).To(Succeed())
			g.Expect(wwl.Finalizers).To(ContainElement(strata.PodsGoneFinalizer), "the agent creates a copy's Workload with its finalizer")
		}).Should(Succeed())

		By("a pod of the copy on " + first + ", held Terminating by a finalizer once deleted")
		pod := heldPod(ctx, w, cp, "podsgone-0")

		By("kubectl delete job on " + first + " (background): the Job goes at once; envtest runs no garbage collector, so the pod's deletion is made by hand")
		Expect(w.Client.Delete(ctx, cp, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Expect(w.Client.Delete(ctx, pod)).To(Succeed())

		By("the copy's Workload, deleted, stays while the pod terminates, and names it; the hub waits for it")
		Eventually(func(g Gomega) {
			var wwl strata.Workload
			g.Expect(w.Client.Get(ctx, wlKey, &wwl)).To(Succeed())
			g.Expect(wwl.DeletionTimestamp).NotTo(BeNil(), "the agent deletes the Workload of a deleted Job")
			g.Expect(wwl.Annotations[strata.GoingPodsAnnotation]).To(ContainSubstring(pod.Name))
		}).Should(Succeed())
		notPlacedAgain(ctx, job, "placed again while the copy's pod may run")
		waitsFor(ctx, job, pod)

		By("the pod goes: so does the copy's Workload, and the hub places the workload again")
		releasePod(ctx, w, pod)
		placedAgainOnceGone(ctx, w, wlKey, job, first)
	})

	It("lets a copy's Workload deleted on its own go at once while its Job is there", func(ctx SpecContext) {
		e := newEnv(ctx, "wldeleted", map[string][][]string{"w1": {{"4"}}})
		job := e.job("wldeleted", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		w := worker("w1")
		cp, _ := copyOn(Default, ctx, w, job)
		Expect(cp).NotTo(BeNil())
		wlKey := client.ObjectKey{Namespace: e.ns, Name: workload.JobWorkloadName(cp.Name)}
		var wwl strata.Workload
		Expect(w.Client.Get(ctx, wlKey, &wwl)).To(Succeed())
		Expect(wwl.Finalizers).To(ContainElement(strata.PodsGoneFinalizer))
		Expect(w.Client.Delete(ctx, &wwl)).To(Succeed())
		Eventually(func(g Gomega) {
			var now strata.Workload
			err := w.Client.Get(ctx, wlKey, &now)
			if err == nil {
				g.Expect(now.UID).NotTo(Equal(wwl.UID), "the Workload deleted while its Job is there still held")
			} else {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			}
		}).Should(Succeed())
	})

	It("mirrors the copy's progress on the hub Job through to completion, then cleans the copy", func(ctx SpecContext) {
		e := newEnv(ctx, "sync", map[string][][]string{"w2": {{"4"}}})
		job := e.job("sync", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		w2 := worker("w2")
		var cp *batchv1.Job
		Eventually(func(g Gomega) {
			cp, _ = copyOn(g, ctx, w2, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse(), "the agent starts the copy once admitted")
		}).Should(Succeed())

		By("the worker's Job controller running the pod")
		start := metav1.NewTime(time.Now().Truncate(time.Second))
		cp.Status = batchv1.JobStatus{StartTime: &start, Active: 1, Ready: ptr.To[int32](1)}
		Expect(w2.Client.Status().Update(ctx, cp)).To(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(j.Status.Active).To(Equal(int32(1)))
			g.Expect(j.Status.StartTime).NotTo(BeNil())
		}).Should(Succeed())

		By("the pod succeeding")
		Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
		done := metav1.NewTime(start.Add(time.Second))
		cp.Status.Active, cp.Status.Ready, cp.Status.Succeeded = 0, ptr.To[int32](0), 1
		cp.Status.CompletionTime = &done
		cp.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: done, LastProbeTime: done},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: done, LastProbeTime: done},
		}
		Expect(w2.Client.Status().Update(ctx, cp)).To(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
			g.Expect(j.Status.Succeeded).To(Equal(int32(1)))
			g.Expect(j.Status.CompletionTime).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(hubWorkload(g, ctx, job).Status.Conditions, strata.WorkloadFinished)).To(BeTrue())
		}).Should(Succeed())
		By("removing the finished copy after finishedRetention")
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())
	})

	It("admits every Job of a burst exactly once across a hub restart", func(ctx SpecContext) {
		e := newEnv(ctx, "restart", map[string][][]string{
			"w1": {{"4", "4"}},
			"w2": {{"4", "4"}},
			"w3": {{"4", "4"}},
		})
		var jobs []*batchv1.Job
		for i := range 30 {
			job := e.job(fmt.Sprintf("r-%02d", i), 1, "500m", nil)
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
			if i == 10 {
				By("stopping the hub mid-burst")
				Eventually(func(g Gomega) {
					g.Expect(hubWorkload(g, ctx, jobs[0]).Status.Placement).NotTo(BeNil())
				}).Should(Succeed())
				stopHub()
			}
		}
		By("starting it again")
		stopHub = startHub()
		Eventually(func(g Gomega) {
			for _, job := range jobs {
				g.Expect(hubWorkload(g, ctx, job).Status.Admission).NotTo(BeNil(), job.Name)
			}
		}).Should(Succeed())
		for _, job := range jobs {
			wl := hubWorkload(Default, ctx, job)
			Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "%s: %+v", job.Name, wl.Status.Placement.Attempts)
			Expect(copies(Default, ctx, job)).To(Equal([]string{wl.Status.Placement.Cluster}), job.Name)
		}
	})
})

// setActive sets the hub Workload's spec.active of job: the user's hold.
func setActive(ctx SpecContext, job client.Object, active bool) {
	GinkgoHelper()
	setWorkloadActive(ctx, job.GetNamespace(), workload.JobWorkloadName(job.GetName()), active)
}

// setWorkloadActive sets spec.active of the hub Workload ns/name.
func setWorkloadActive(ctx SpecContext, ns, name string, active bool) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var wl strata.Workload
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &wl)).To(Succeed())
		wl.Spec.Active = ptr.To(active)
		g.Expect(hub.Client.Update(ctx, &wl)).To(Succeed())
	}).Should(Succeed())
}

// heldPod creates on worker w a pod of copy cp's Workload, controlled by
// cp, that a finalizer holds Terminating once deleted (releasePod lets it
// go; so does the spec's cleanup).
func heldPod(ctx SpecContext, w *framework.Cluster, cp *batchv1.Job, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cp.Namespace, Finalizers: []string{"test.strata.dev/hold"},
			Labels: map[string]string{strata.WorkloadLabel: workload.JobWorkloadName(cp.Name)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: cp.Name, UID: cp.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	Expect(w.Client.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { releasePod(ctx, w, pod) })
	return pod
}

// releasePod takes heldPod's finalizer off pod, if it is still there.
func releasePod(ctx SpecContext, w *framework.Cluster, pod *corev1.Pod) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var p corev1.Pod
		err := w.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		p.Finalizers = nil
		g.Expect(w.Client.Update(ctx, &p)).To(Succeed())
	}).Should(Succeed())
}

// placedAgainOnceGone waits for the copy's Workload wlKey on w to be gone
// and job's hub Workload placed again, as a copy deleted on first.
func placedAgainOnceGone(ctx SpecContext, w *framework.Cluster, wlKey client.ObjectKey, job *batchv1.Job, first string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		err := w.Client.Get(ctx, wlKey, &strata.Workload{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the copy's Workload: %v", err)
		wl := hubWorkload(g, ctx, job)
		g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
		g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
		g.Expect(wl.Status.Placement.Attempts[0].Message).To(ContainSubstring("deleted on " + first))
		g.Expect(meta.FindStatusCondition(wl.Status.Conditions, hubcopies.ConditionCopyGoing)).To(BeNil(), "the take-back is over")
	}).Should(Succeed())
}

// admittedCopy creates a one-pod Job named name in e and waits for it to
// be admitted: it returns the Job, the worker it went to, that worker and
// the copy there.
func admittedCopy(ctx SpecContext, e *env, name string) (*batchv1.Job, string, *framework.Cluster, *batchv1.Job) {
	GinkgoHelper()
	job := e.job(name, 1, "1", nil)
	Expect(hub.Client.Create(ctx, job)).To(Succeed())
	var first string
	Eventually(func(g Gomega) {
		wl := hubWorkload(g, ctx, job)
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		first = wl.Status.Placement.Cluster
	}).Should(Succeed())
	w := worker(first)
	cp, _ := copyOn(Default, ctx, w, job)
	Expect(cp).NotTo(BeNil())
	return job, first, w, cp
}

// notPlacedAgain checks for 3 s that job's hub Workload stays on its
// first dispatch.
func notPlacedAgain(ctx SpecContext, job *batchv1.Job, why string) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		wl := hubWorkload(g, ctx, job)
		g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), why)
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
}

// waitsFor checks that job's hub Workload says it waits for pod
// (CopyGoing, reason WaitingForPods, the pod named).
func waitsFor(ctx SpecContext, job *batchv1.Job, pod *corev1.Pod) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(hubWorkload(g, ctx, job).Status.Conditions, hubcopies.ConditionCopyGoing)
		g.Expect(c).NotTo(BeNil(), "the hub Workload says nothing of the pods it waits for")
		g.Expect(c.Reason).To(Equal(hubcopies.ReasonWaitingForPods))
		g.Expect(c.Message).To(ContainSubstring(pod.Name))
	}).Should(Succeed())
}
