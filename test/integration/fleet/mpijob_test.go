package fleet

import (
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/testutil"
)

// mpiJob is an MPIJob of the env's queue: a launcher running as rank 0
// and workers workers, cpu CPUs each, the given annotations on both
// templates.
func (e *env) mpiJob(name string, workers int32, cpu string, annotations map[string]string) *kubeflow.MPIJob {
	return testutil.MakeMPIJob(name, e.ns).Queue("lq").RunLauncherAsWorker(true).Workers(workers).ContainerName("c").
		Request("cpu", cpu).LauncherAnnotations(annotations).WorkerAnnotations(annotations).Obj()
}

// mpiJobCopyOn returns the copy of a hub MPIJob on worker w and its
// Workload (nil when it has none).
func mpiJobCopyOn(g Gomega, ctx SpecContext, w string, j *kubeflow.MPIJob) (*kubeflow.MPIJob, *strata.Workload) {
	c := worker(w).Client
	var cp kubeflow.MPIJob
	if err := c.Get(ctx, client.ObjectKeyFromObject(j), &cp); err != nil {
		if !meta.IsNoMatchError(err) { // a worker without the CRD has none
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		}
		return nil, nil
	}
	var wl strata.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: mpijob.Kind.WorkloadName(j.Name)}, &wl); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return &cp, nil
	}
	return &cp, &wl
}

// launcherAsTheOperatorMakesIt creates the launcher Job of an MPIJob copy
// on worker w as the MPI operator does at startup: suspended, from the
// launcher's template (the agent resumes an admitted MPIJob only once it
// is there).
func launcherAsTheOperatorMakesIt(g Gomega, ctx SpecContext, w string, cp *kubeflow.MPIJob) {
	tmpl := cp.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.DeepCopy()
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	launcher := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: cp.Name + mpijob.LauncherSuffix, Namespace: cp.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cp, kubeflow.SchemeGroupVersionKind)}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: *tmpl},
	}
	g.Expect(client.IgnoreAlreadyExists(worker(w).Client.Create(ctx, launcher))).To(Succeed())
}

var _ = Describe("MPIJobs through the hub", Label("mpijob"), func() {
	It("dispatches an MPIJob whole to the worker whose rack holds launcher and workers, mirrors its status, and takes it back on deletion", func(ctx SpecContext) {
		// A launcher and 3 workers of 2 CPUs, all in one rack (grouped):
		// w1's racks hold 4 CPUs each; w2 has a rack of 8; w3 does not
		// serve MPIJobs.
		e := newEnv(ctx, "mpi", map[string][][]string{
			"w1": {{"4"}, {"4"}},
			"w2": {{"4", "4"}},
			"w3": {{"16"}},
		})
		j := e.mpiJob("pi", 3, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack, strata.PodSetGroupNameAnnotation: "pi"})
		summarized(ctx, e.flavor, "w1", "w2", "w3")
		Expect(hub.Client.Create(ctx, j)).To(Succeed())

		By("the hub takes it in: managed by the hub, one Workload of launcher and worker")
		var hubWL strata.Workload
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(got.Spec.RunPolicy.ManagedBy).To(Equal(ptr.To(strata.ManagedByController)))
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: mpijob.Kind.WorkloadName(j.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Spec.PodSets).To(HaveLen(2))
		}).Should(Succeed())

		By("exactly one copy, on w2, admitted there with launcher and workers in its one rack, resumed once the launcher Job the operator makes is there")
		Eventually(func(g Gomega) {
			cp, _ := mpiJobCopyOn(g, ctx, "w2", j)
			g.Expect(cp).NotTo(BeNil())
			launcherAsTheOperatorMakesIt(g, ctx, "w2", cp)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(&hubWL), &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w2"))
			cp, cwl := mpiJobCopyOn(g, ctx, "w2", j)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Spec.RunPolicy.ManagedBy).To(BeNil())
			g.Expect(ptr.Deref(cp.Spec.RunPolicy.Suspend, true)).To(BeFalse(), "the agent resumes the admitted copy")
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cwl.Status.Admission.PodSetAssignments).To(HaveLen(2))
			for _, w := range []string{"w1", "w3"} {
				other, _ := mpiJobCopyOn(g, ctx, w, j)
				g.Expect(other).To(BeNil(), "a copy on %s", w)
			}
		}).Should(Succeed())
		Expect(hubWL.Status.Placement.Attempts[0].Message).To(ContainSubstring("w3/f-mpi: the worker does not serve mpijobs.kubeflow.org"))

		By("completing the copy finishes the hub Workload and the hub MPIJob")
		Eventually(func(g Gomega) {
			cp, _ := mpiJobCopyOn(g, ctx, "w2", j)
			g.Expect(cp).NotTo(BeNil())
			now := metav1.Now()
			cp.Status.Conditions = []kubeflow.JobCondition{{Type: kubeflow.JobSucceeded, Status: corev1.ConditionTrue, Reason: "MPIJobSucceeded", LastTransitionTime: now, LastUpdateTime: now}}
			cp.Status.ReplicaStatuses = map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{kubeflow.MPIReplicaTypeLauncher: {Succeeded: 1}}
			g.Expect(worker("w2").Client.Status().Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			done, how := mpijob.Adapt(&got).Finished()
			g.Expect(done).To(BeTrue())
			g.Expect(how).To(Equal("Succeeded"))
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(&hubWL), &hubWL)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(hubWL.Status.Conditions, strata.WorkloadFinished)).To(BeTrue())
		}).Should(Succeed())

		By("deleting a running MPIJob on the hub removes its copy")
		second := e.mpiJob("second", 3, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack, strata.PodSetGroupNameAnnotation: "pi"})
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			cp, cwl := mpiJobCopyOn(g, ctx, "w2", second)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			cp, _ := mpiJobCopyOn(g, ctx, "w2", second)
			g.Expect(cp).To(BeNil())
			err := hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: mpijob.Kind.WorkloadName(second.Name)}, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Workload goes with its MPIJob: %v", err)
		}).Should(Succeed())
	})
})
