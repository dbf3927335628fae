// Package mpijob adapts MPIJobs (github.com/kubeflow/mpi-operator,
// kubeflow.org/v2beta1): two pod sets, "launcher" (its one pod, run by the
// launcher Job the MPI operator creates) and "worker" (the Worker
// replicas), in that order. Workers rank by training.kubeflow.org/
// replica-index. With spec.runLauncherAsWorker the launcher is rank 0 and
// the workers' indexes start at 1: the worker pod set then gets
// podIndexOffset 1, unless its template names a podset-group-name, which
// leaves offsets to the group (KEP-2724, "MPIJob with
// runLauncherAsWorker"; workload.RankedPodSet gives the group's: the
// launcher's one pod when it is in the group). Grouped workers of a
// launcher that does not run as a worker say offset 0 explicitly, so
// that the group's offset does not apply to their indexes from 0.
//
// Suspension is spec.runPolicy.suspend: the MPI operator deletes the
// workers and suspends the launcher Job while it is set, and creates them
// from the current templates on resume, so the templates may change while
// suspended. The hub marks its MPIJobs with spec.runPolicy.managedBy,
// which the MPI operator (v0.6.0 and later) honours.
package mpijob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Kind is the MPIJob kind.
var Kind jobs.Kind = kind{}

// What strata-agent may do with MPIJobs on its cluster: its job
// reconciler reads them, and suspends and resumes them.
//
// +kubebuilder:rbac:roleName=strata-agent,groups=kubeflow.org,resources=mpijobs,verbs=get;list;watch;update;patch

// Registration registers MPIJobs (pkg/jobs/kinds).
var Registration = jobs.Registration{Kind: Kind, AddToScheme: kubeflow.AddToScheme}

// WorkloadPrefix starts the names of MPIJobs' Workloads.
const WorkloadPrefix = "mpijob-"

// Pod set names, in the Workload's order.
const (
	Launcher = "launcher"
	Worker   = "worker"
)

// ReplicaIndexLabel holds a worker pod's index.
const ReplicaIndexLabel = kubeflow.ReplicaIndexLabel

type kind struct{}

func (kind) GroupVersionKind() schema.GroupVersionKind {
	return kubeflow.SchemeGroupVersion.WithKind(kubeflow.Kind)
}

func (kind) WorkloadName(name string) string { return workload.NameFor(WorkloadPrefix, name) }

func (kind) NewObject() client.Object { return &kubeflow.MPIJob{} }

func (kind) Adapt(obj client.Object) (jobs.Job, bool) {
	j, ok := obj.(*kubeflow.MPIJob)
	if !ok {
		return nil, false
	}
	return MPIJob{j}, true
}

func (kind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]jobs.Job, error) {
	var list kubeflow.MPIJobList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]jobs.Job, len(list.Items))
	for i := range list.Items {
		out[i] = MPIJob{&list.Items[i]}
	}
	return out, nil
}

// MPIJob wraps an MPIJob.
type MPIJob struct{ *kubeflow.MPIJob }

// Adapt wraps an MPIJob.
func Adapt(j *kubeflow.MPIJob) MPIJob { return MPIJob{j} }

// Object is the MPIJob.
func (j MPIJob) Object() client.Object { return j.MPIJob }

// Kind is the MPIJob kind.
func (MPIJob) Kind() jobs.Kind { return Kind }

// replicas are the MPIJob's replica types in the Workload's order, with
// their pod set names; a replica type the spec lacks is left out.
func (j MPIJob) replicas() []replica {
	var out []replica
	for _, r := range []struct {
		t    kubeflow.MPIReplicaType
		name string
	}{{kubeflow.MPIReplicaTypeLauncher, Launcher}, {kubeflow.MPIReplicaTypeWorker, Worker}} {
		if spec := j.Spec.MPIReplicaSpecs[r.t]; spec != nil {
			out = append(out, replica{t: r.t, name: r.name, spec: spec})
		}
	}
	return out
}

type replica struct {
	t    kubeflow.MPIReplicaType
	name string
	spec *kubeflow.ReplicaSpec
}

// PodSets are launcher (1 pod) and worker (its replicas), with the
// topology requests of their templates' annotations; replicas over
// workload.MaxPodSetPods are invalid.
func (j MPIJob) PodSets() ([]strata.PodSet, field.ErrorList) {
	var errs field.ErrorList
	var out []strata.PodSet
	for _, r := range j.replicas() {
		specPath := field.NewPath("spec", "mpiReplicaSpecs").Key(string(r.t))
		path := specPath.Child("template", "metadata", "annotations")
		count := max(ptr.Deref(r.spec.Replicas, 1), 0)
		errs = append(errs, workload.ValidatePodCount(int64(count), specPath.Child("replicas"), count, "replicas")...)
		ps := strata.PodSet{Name: r.name, Count: count, Template: *r.spec.Template.DeepCopy()}
		req, reqErrs := workload.ParseTopologyRequest(r.spec.Template.Annotations, count, 0, path)
		errs = append(errs, reqErrs...)
		if !workload.RequestUsable(reqErrs) {
			req = nil // invalid values may break the Workload schema
		}
		if req != nil && r.t == kubeflow.MPIReplicaTypeWorker {
			req.PodIndexLabel = ptr.To(ReplicaIndexLabel)
			switch {
			case ptr.Deref(j.Spec.RunLauncherAsWorker, false) && req.PodSetGroupName == nil:
				// The launcher is rank 0; workers' indexes start at 1.
				req.PodIndexOffset = ptr.To[int32](1)
			case !ptr.Deref(j.Spec.RunLauncherAsWorker, false) && req.PodSetGroupName != nil:
				// Grouped, the workers would take the group's offset
				// (workload.RankedPodSet); theirs start at 0 all the same.
				req.PodIndexOffset = ptr.To[int32](0)
			}
		}
		ps.TopologyRequest = req
		out = append(out, ps)
	}
	return out, errs
}

// Templates are the replicas' pod templates, in the order of PodSets.
func (j MPIJob) Templates() []*corev1.PodTemplateSpec {
	rs := j.replicas()
	out := make([]*corev1.PodTemplateSpec, len(rs))
	for i, r := range rs {
		out[i] = &r.spec.Template
	}
	return out
}

// ChildPods is true: the launcher's pod is its Job's.
func (MPIJob) ChildPods() bool { return true }

// Suspended is spec.runPolicy.suspend.
func (j MPIJob) Suspended() bool { return ptr.Deref(j.Spec.RunPolicy.Suspend, false) }

// SetSuspended sets spec.runPolicy.suspend.
func (j MPIJob) SetSuspended(s bool) { j.Spec.RunPolicy.Suspend = ptr.To(s) }

// TemplatesMutable says the templates may change, and the MPIJob may
// start with them: while suspended (the MPI operator creates the pods
// from them on resume), once no replica has active pods (the operator's
// status says so): an MPIJob suspended and resumed before the operator
// saw it would keep its old pods running beside the new admission's.
func (j MPIJob) TemplatesMutable() bool {
	if !j.Suspended() {
		return false
	}
	for _, st := range j.Status.ReplicaStatuses {
		if st != nil && st.Active > 0 {
			return false
		}
	}
	return true
}

// ReclaimablePods are none: an MPIJob's workers run until its launcher ends.
func (MPIJob) ReclaimablePods() []strata.ReclaimablePod { return nil }

// Finished reads the Succeeded and Failed conditions.
func (j MPIJob) Finished() (bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case kubeflow.JobSucceeded:
			return true, "Succeeded"
		case kubeflow.JobFailed:
			return true, "Failed"
		}
	}
	return false, ""
}

// ManagedBy is spec.runPolicy.managedBy.
func (j MPIJob) ManagedBy() string { return ptr.Deref(j.Spec.RunPolicy.ManagedBy, "") }

// ForWorker is the MPIJob without spec.runPolicy.managedBy and its TTL.
func (j MPIJob) ForWorker() jobs.Job {
	c := &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: maps.Clone(j.Labels), Annotations: maps.Clone(j.Annotations)},
		Spec:       *j.Spec.DeepCopy(),
	}
	c.Spec.RunPolicy.ManagedBy = nil
	c.Spec.RunPolicy.Suspend = ptr.To(true)
	c.Spec.RunPolicy.TTLSecondsAfterFinished = nil
	return MPIJob{c}
}

// MirrorStatus copies from's status: conditions, replica counts, times.
func (j MPIJob) MirrorStatus(from jobs.Job) bool {
	src, ok := from.(MPIJob)
	if !ok || equality.Semantic.DeepEqual(j.Status, src.Status) {
		return false
	}
	j.Status = *src.Status.DeepCopy()
	return true
}

// AdjustWorkload takes the Workload's priority class from
// spec.runPolicy.schedulingPolicy.priorityClass when the job names no
// WorkloadPriorityClass: as in Kueue, it comes before the launcher's and
// the workers' templates.
func (j MPIJob) AdjustWorkload(wl *strata.Workload) {
	sp := j.Spec.RunPolicy.SchedulingPolicy
	if sp == nil || sp.PriorityClass == "" || wl.Spec.PriorityClassSource == strata.WorkloadPriorityClassSource {
		return
	}
	wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource = sp.PriorityClass, strata.PodPriorityClassSource
}

// ClearRun zeroes each replica type's active pods, and sets the Running
// condition False: no pod of the job runs until it is placed again.
func (j MPIJob) ClearRun() bool {
	if done, _ := j.Finished(); done {
		return false
	}
	changed := false
	for _, st := range j.Status.ReplicaStatuses {
		if st != nil && st.Active != 0 {
			st.Active = 0
			changed = true
		}
	}
	for i := range j.Status.Conditions {
		c := &j.Status.Conditions[i]
		if c.Type == kubeflow.JobRunning && c.Status == corev1.ConditionTrue {
			now := metav1.Now()
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, RunTakenBackReason, "its run on a worker was taken back; it waits to be placed again"
			c.LastUpdateTime, c.LastTransitionTime = now, now
			changed = true
		}
	}
	return changed
}

// RunTakenBackReason is the reason of the Running condition the hub sets
// False on an MPIJob whose copy it took back.
const RunTakenBackReason = "RunTakenBack"

// LauncherSuffix ends the name of the launcher Job the MPI operator
// creates for an MPIJob.
const LauncherSuffix = "-launcher"

// ChildrenMade returns ErrChildrenPending while the launcher Job is not
// there with launcherCreationPolicy AtStartup (the default): the operator
// makes it while the MPIJob is suspended, from the template its cache
// holds, which may be from before the admission, and once the MPIJob
// resumes it only resumes the launcher. With WaitForWorkersReady it is
// made after the resume, from the admitted template.
func (j MPIJob) ChildrenMade(ctx context.Context, c client.Reader) error {
	if j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher] == nil || j.Spec.LauncherCreationPolicy == kubeflow.LauncherCreationPolicyWaitForWorkersReady {
		return nil
	}
	var launcher batchv1.Job
	err := c.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Name + LauncherSuffix}, &launcher)
	if apierrors.IsNotFound(err) {
		return jobs.ErrChildrenPending
	}
	return err
}

// SyncChildren brings the launcher Job's pod template to the MPIJob's
// launcher template: the MPI operator creates the launcher Job at once
// (launcherCreationPolicy AtStartup), suspended while the MPIJob is, from
// the template of that moment, and on resume only unsuspends it. A
// suspended Job that has not started lets its template's labels,
// annotations, node selector, tolerations and scheduling gates change.
// The operator's own labels and annotations stay; Strata's follow the
// MPIJob's template.
func (j MPIJob) SyncChildren(ctx context.Context, c client.Client) error {
	spec := j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	if spec == nil {
		return nil
	}
	var launcher batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Name + LauncherSuffix}, &launcher); err != nil {
		return client.IgnoreNotFound(err) // gone since ChildrenMade: made again from the admitted template
	}
	if !metav1.IsControlledBy(&launcher, j.MPIJob) {
		return nil
	}
	want := &spec.Template
	got := &launcher.Spec.Template
	before := got.DeepCopy()
	got.Labels = syncStrata(got.Labels, want.Labels)
	got.Annotations = syncStrata(got.Annotations, want.Annotations)
	got.Spec.NodeSelector = maps.Clone(want.Spec.NodeSelector)
	got.Spec.Tolerations = slices.Clone(want.Spec.Tolerations)
	got.Spec.SchedulingGates = slices.Clone(want.Spec.SchedulingGates)
	if equality.Semantic.DeepEqual(before, got) {
		return nil
	}
	if !ptr.Deref(launcher.Spec.Suspend, false) {
		return fmt.Errorf("launcher Job %s/%s runs already; its template cannot take the admission", launcher.Namespace, launcher.Name)
	}
	return c.Update(ctx, &launcher)
}

// syncStrata returns to: the keys of from set, and the strata.dev/ keys
// from does not have removed.
func syncStrata(to, from map[string]string) map[string]string {
	out := maps.Clone(to)
	for k := range out {
		if _, ok := from[k]; !ok && strings.HasPrefix(k, strata.Prefix) {
			delete(out, k)
		}
	}
	if out == nil && len(from) > 0 {
		out = map[string]string{}
	}
	maps.Copy(out, from)
	return out
}
