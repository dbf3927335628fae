package testutil

import (
	"maps"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// Builders of the job kinds Strata runs: MakeJob("train", "ns").Queue("lq").
// Parallelism(4).Completions(4).Request("cpu", "1").Obj(). Every pod
// template starts with one container and no requests; a setter of pod
// templates sets every template of the kind unless it names one.

const (
	// mpiImage is the image of the MPI operator's pi example.
	mpiImage = "mpioperator/mpi-pi:openmpi"
	// lwsImage is the image of KEP-2724's LeaderWorkerSet examples.
	lwsImage = "registry.k8s.io/e2e-test-images/agnhost:2.53"
)

// podTemplate is a pod template of one container.
func podTemplate(container, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: image}}}}
}

// setQueue sets the queue-name label, none when q is empty.
func setQueue(m *metav1.ObjectMeta, q string) {
	if q == "" {
		return
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[strata.QueueNameLabel] = q
}

// annotate adds ann to t's annotations; a nil ann adds none and leaves
// nil annotations nil, an empty one makes them non-nil.
func annotate(t *corev1.PodTemplateSpec, ann map[string]string) {
	if ann == nil {
		return
	}
	if t.Annotations == nil {
		t.Annotations = make(map[string]string, len(ann))
	}
	maps.Copy(t.Annotations, ann)
}

// eachContainer calls f with the first container of each template.
func eachContainer(f func(*corev1.Container), ts ...*corev1.PodTemplateSpec) {
	for _, t := range ts {
		f(&t.Spec.Containers[0])
	}
}

// request sets a request of the first container of each template.
func request(r corev1.ResourceName, q string, ts ...*corev1.PodTemplateSpec) {
	eachContainer(func(c *corev1.Container) {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[r] = resource.MustParse(q)
	}, ts...)
}

// JobWrapper builds a batch/v1 Job.
type JobWrapper struct{ batchv1.Job }

// MakeJob starts a Job whose pods have one container "c" of busybox and
// never restart.
func MakeJob(name, ns string) *JobWrapper {
	w := &JobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       batchv1.JobSpec{Template: podTemplate("c", "busybox")},
	}}
	return w.RestartPolicy(corev1.RestartPolicyNever)
}

// UID sets the UID.
func (w *JobWrapper) UID(uid string) *JobWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// Queue sets the queue-name label, none when q is empty.
func (w *JobWrapper) Queue(q string) *JobWrapper {
	setQueue(&w.ObjectMeta, q)
	return w
}

// Parallelism sets the parallelism.
func (w *JobWrapper) Parallelism(n int32) *JobWrapper {
	w.Spec.Parallelism = &n
	return w
}

// Completions sets the completions.
func (w *JobWrapper) Completions(n int32) *JobWrapper {
	w.Spec.Completions = &n
	return w
}

// Indexed sets the Indexed completion mode.
func (w *JobWrapper) Indexed() *JobWrapper {
	w.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	return w
}

// Suspend sets spec.suspend.
func (w *JobWrapper) Suspend(s bool) *JobWrapper {
	w.Spec.Suspend = &s
	return w
}

// RestartPolicy sets the pods' restart policy ("": none).
func (w *JobWrapper) RestartPolicy(p corev1.RestartPolicy) *JobWrapper {
	w.Spec.Template.Spec.RestartPolicy = p
	return w
}

// Image sets the image of the pods' first container.
func (w *JobWrapper) Image(image string) *JobWrapper {
	w.Spec.Template.Spec.Containers[0].Image = image
	return w
}

// Request sets a request of the pods' first container.
func (w *JobWrapper) Request(r corev1.ResourceName, q string) *JobWrapper {
	request(r, q, &w.Spec.Template)
	return w
}

// PodAnnotations adds pod template annotations.
func (w *JobWrapper) PodAnnotations(ann map[string]string) *JobWrapper {
	annotate(&w.Spec.Template, ann)
	return w
}

// PodSpec replaces the pod spec, its container and restart policy too.
func (w *JobWrapper) PodSpec(s corev1.PodSpec) *JobWrapper {
	w.Spec.Template.Spec = s
	return w
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// JobSetWrapper builds a JobSet.
type JobSetWrapper struct{ jobsetapi.JobSet }

// MakeJobSet starts a JobSet of no replicated jobs.
func MakeJobSet(name, ns string) *JobSetWrapper {
	return &JobSetWrapper{jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// Queue sets the queue-name label, none when q is empty.
func (w *JobSetWrapper) Queue(q string) *JobSetWrapper {
	setQueue(&w.ObjectMeta, q)
	return w
}

// ReplicatedJob appends a replicated job of replicas Jobs of job's spec,
// named after job: ReplicatedJob(2, MakeJob("workers", "").Parallelism(4)...Obj()).
func (w *JobSetWrapper) ReplicatedJob(replicas int32, job *batchv1.Job) *JobSetWrapper {
	w.Spec.ReplicatedJobs = append(w.Spec.ReplicatedJobs, jobsetapi.ReplicatedJob{
		Name: job.Name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: job.Spec},
	})
	return w
}

// Obj returns the JobSet.
func (w *JobSetWrapper) Obj() *jobsetapi.JobSet { return &w.JobSet }

// MPIJobWrapper builds an MPIJob.
type MPIJobWrapper struct{ kubeflow.MPIJob }

// MakeMPIJob starts an MPIJob of a launcher and one worker, their pods of
// one container ("mpi-launcher", "mpi-worker") of mpiImage.
func MakeMPIJob(name, ns string) *MPIJobWrapper {
	return &MPIJobWrapper{kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
			kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: podTemplate("mpi-launcher", mpiImage)},
			kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](1), Template: podTemplate("mpi-worker", mpiImage)},
		}},
	}}
}

func (w *MPIJobWrapper) template(t kubeflow.MPIReplicaType) *corev1.PodTemplateSpec {
	return &w.Spec.MPIReplicaSpecs[t].Template
}

func (w *MPIJobWrapper) templates() []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{w.template(kubeflow.MPIReplicaTypeLauncher), w.template(kubeflow.MPIReplicaTypeWorker)}
}

// Queue sets the queue-name label, none when q is empty.
func (w *MPIJobWrapper) Queue(q string) *MPIJobWrapper {
	setQueue(&w.ObjectMeta, q)
	return w
}

// SlotsPerWorker sets the slots per worker.
func (w *MPIJobWrapper) SlotsPerWorker(n int32) *MPIJobWrapper {
	w.Spec.SlotsPerWorker = &n
	return w
}

// RunLauncherAsWorker sets whether the launcher is rank 0.
func (w *MPIJobWrapper) RunLauncherAsWorker(b bool) *MPIJobWrapper {
	w.Spec.RunLauncherAsWorker = &b
	return w
}

// Workers sets the workers' replicas.
func (w *MPIJobWrapper) Workers(n int32) *MPIJobWrapper {
	w.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = &n
	return w
}

// ContainerName renames the container of launcher and workers.
func (w *MPIJobWrapper) ContainerName(name string) *MPIJobWrapper {
	eachContainer(func(c *corev1.Container) { c.Name = name }, w.templates()...)
	return w
}

// Request sets a request of the container of launcher and workers.
func (w *MPIJobWrapper) Request(r corev1.ResourceName, q string) *MPIJobWrapper {
	request(r, q, w.templates()...)
	return w
}

// LauncherAnnotations adds annotations to the launcher's template.
func (w *MPIJobWrapper) LauncherAnnotations(ann map[string]string) *MPIJobWrapper {
	annotate(w.template(kubeflow.MPIReplicaTypeLauncher), ann)
	return w
}

// WorkerAnnotations adds annotations to the workers' template.
func (w *MPIJobWrapper) WorkerAnnotations(ann map[string]string) *MPIJobWrapper {
	annotate(w.template(kubeflow.MPIReplicaTypeWorker), ann)
	return w
}

// Obj returns the MPIJob.
func (w *MPIJobWrapper) Obj() *kubeflow.MPIJob { return &w.MPIJob }

// LeaderWorkerSetWrapper builds a LeaderWorkerSet.
type LeaderWorkerSetWrapper struct{ lwsapi.LeaderWorkerSet }

// MakeLeaderWorkerSet starts a LeaderWorkerSet whose leader and workers
// have one container "c" of lwsImage.
func MakeLeaderWorkerSet(name, ns string) *LeaderWorkerSetWrapper {
	leader := podTemplate("c", lwsImage)
	return &LeaderWorkerSetWrapper{lwsapi.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lwsapi.LeaderWorkerSetSpec{LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
			LeaderTemplate: &leader, WorkerTemplate: podTemplate("c", lwsImage),
		}},
	}}
}

// templates is the leader's template, when there is one, and the workers'.
func (w *LeaderWorkerSetWrapper) templates() []*corev1.PodTemplateSpec {
	lwt := &w.Spec.LeaderWorkerTemplate
	if lwt.LeaderTemplate == nil {
		return []*corev1.PodTemplateSpec{&lwt.WorkerTemplate}
	}
	return []*corev1.PodTemplateSpec{lwt.LeaderTemplate, &lwt.WorkerTemplate}
}

// Queue sets the queue-name label, none when q is empty.
func (w *LeaderWorkerSetWrapper) Queue(q string) *LeaderWorkerSetWrapper {
	setQueue(&w.ObjectMeta, q)
	return w
}

// Replicas sets the number of groups.
func (w *LeaderWorkerSetWrapper) Replicas(n int32) *LeaderWorkerSetWrapper {
	w.Spec.Replicas = &n
	return w
}

// Size sets the pods of a group, its leader's included.
func (w *LeaderWorkerSetWrapper) Size(n int32) *LeaderWorkerSetWrapper {
	w.Spec.LeaderWorkerTemplate.Size = &n
	return w
}

// Defaulted sets the enums the LeaderWorkerSet webhook defaults, startup
// policy LeaderCreated and rolling updates: a Go client sends them even
// when empty, which the schema refuses where no webhook defaults them.
func (w *LeaderWorkerSetWrapper) Defaulted() *LeaderWorkerSetWrapper {
	w.Spec.StartupPolicy = lwsapi.LeaderCreatedStartupPolicy
	w.Spec.RolloutStrategy = lwsapi.RolloutStrategy{Type: lwsapi.RollingUpdateStrategyType}
	return w
}

// NoLeader removes the leader's template: the leader is a worker.
func (w *LeaderWorkerSetWrapper) NoLeader() *LeaderWorkerSetWrapper {
	w.Spec.LeaderWorkerTemplate.LeaderTemplate = nil
	return w
}

// Image sets the image of the leader's and the workers' container.
func (w *LeaderWorkerSetWrapper) Image(image string) *LeaderWorkerSetWrapper {
	eachContainer(func(c *corev1.Container) { c.Image = image }, w.templates()...)
	return w
}

// Request sets a request of the leader's and the workers' container.
func (w *LeaderWorkerSetWrapper) Request(r corev1.ResourceName, q string) *LeaderWorkerSetWrapper {
	request(r, q, w.templates()...)
	return w
}

// PodLabel sets a label of the leader's and the workers' templates.
func (w *LeaderWorkerSetWrapper) PodLabel(k, v string) *LeaderWorkerSetWrapper {
	for _, t := range w.templates() {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[k] = v
	}
	return w
}

// Gated gates the leader's and the workers' pods with the topology
// scheduling gate, as the hub chart's admission policy does.
func (w *LeaderWorkerSetWrapper) Gated() *LeaderWorkerSetWrapper {
	for _, t := range w.templates() {
		t.Spec.SchedulingGates = append(t.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate})
	}
	return w
}

// LeaderAnnotations adds annotations to the leader's template, if any.
func (w *LeaderWorkerSetWrapper) LeaderAnnotations(ann map[string]string) *LeaderWorkerSetWrapper {
	if t := w.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
		annotate(t, ann)
	}
	return w
}

// WorkerAnnotations adds annotations to the workers' template.
func (w *LeaderWorkerSetWrapper) WorkerAnnotations(ann map[string]string) *LeaderWorkerSetWrapper {
	annotate(&w.Spec.LeaderWorkerTemplate.WorkerTemplate, ann)
	return w
}

// Obj returns the LeaderWorkerSet.
func (w *LeaderWorkerSetWrapper) Obj() *lwsapi.LeaderWorkerSet { return &w.LeaderWorkerSet }
