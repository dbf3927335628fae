// Package jobset adapts JobSets (sigs.k8s.io/jobset, jobset.x-k8s.io
// v1alpha2): one pod set per ReplicatedJob, of replicas × the pods each of
// its Jobs runs at once. Pods rank by job index × pods per Job + completion
// index, so that each Job's pods are consecutive ranks: with
// podset-slice-required-topology (whose slice size defaults to the Jobs'
// parallelism, KEP-2724 "JobSet with two-level scheduling") every Job's
// pods share one slice domain.
package jobset

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Kind is the JobSet kind.
var Kind jobs.Kind = kind{}

// What strata-agent may do with JobSets on its cluster: its job
// reconciler reads them, and suspends and resumes them.
//
// +kubebuilder:rbac:roleName=strata-agent,groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;update;patch

// And on their child Jobs: taking an admission back from their templates
// may need their start time cleared first (RestoreChildren).
//
// +kubebuilder:rbac:roleName=strata-agent,groups=batch,resources=jobs/status,verbs=update

// Registration registers JobSets (pkg/jobs/kinds).
var Registration = jobs.Registration{Kind: Kind, AddToScheme: jobsetapi.AddToScheme}

// WorkloadPrefix starts the names of JobSets' Workloads.
const WorkloadPrefix = "jobset-"

type kind struct{}

func (kind) GroupVersionKind() schema.GroupVersionKind {
	return jobsetapi.GroupVersion.WithKind("JobSet")
}

func (kind) WorkloadName(name string) string { return workload.NameFor(WorkloadPrefix, name) }

func (kind) NewObject() client.Object { return &jobsetapi.JobSet{} }

func (kind) Adapt(obj client.Object) (jobs.Job, bool) {
	js, ok := obj.(*jobsetapi.JobSet)
	if !ok {
		return nil, false
	}
	return JobSet{js}, true
}

func (kind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]jobs.Job, error) {
	var list jobsetapi.JobSetList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]jobs.Job, len(list.Items))
	for i := range list.Items {
		out[i] = JobSet{&list.Items[i]}
	}
	return out, nil
}

// JobSet wraps a JobSet.
type JobSet struct{ *jobsetapi.JobSet }

// Adapt wraps a JobSet.
func Adapt(js *jobsetapi.JobSet) JobSet { return JobSet{js} }

// Object is the JobSet.
func (j JobSet) Object() client.Object { return j.JobSet }

// Kind is the JobSet kind.
func (JobSet) Kind() jobs.Kind { return Kind }

// PodSets are one per ReplicatedJob, named after it, with the topology
// request of its pod template's annotations. A JobSet of more
// ReplicatedJobs than a Workload holds pod sets (workload.MaxPodSets), or
// whose ReplicatedJob runs more pods than a pod set may have
// (workload.MaxPodSetPods), is invalid; it still gets the pod sets of the
// first ReplicatedJobs a Workload holds, so that its Workload passes the
// API's schema and carries the Invalid condition that says what to fix.
func (j JobSet) PodSets() ([]strata.PodSet, field.ErrorList) {
	var errs field.ErrorList
	rjs := j.Spec.ReplicatedJobs
	if n := len(rjs); n > workload.MaxPodSets {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicatedJobs"), n, fmt.Sprintf(
			"%d ReplicatedJobs, more than the %d pod sets a Workload holds (one per ReplicatedJob); merge those of one template, or split the JobSet",
			n, workload.MaxPodSets)))
		rjs = rjs[:workload.MaxPodSets]
	}
	out := make([]strata.PodSet, 0, len(rjs))
	for i := range rjs {
		rj := &rjs[i]
		rjPath := field.NewPath("spec", "replicatedJobs").Index(i)
		path := rjPath.Child("template", "spec", "template", "metadata", "annotations")
		perJob := workload.JobPodCount(&batchv1.Job{Spec: rj.Template.Spec})
		replicas := max(rj.Replicas, 0)
		pods := int64(replicas) * int64(perJob)
		errs = append(errs, workload.ValidatePodCount(pods, rjPath.Child("replicas"), rj.Replicas,
			fmt.Sprintf("%d Jobs of %d pods each (parallelism, capped by completions)", replicas, perJob))...)
		count := int32(min(pods, math.MaxInt32))
		ps := strata.PodSet{Name: rj.Name, Count: count, Template: *rj.Template.Spec.Template.DeepCopy()}
		req, reqErrs := workload.ParseTopologyRequest(rj.Template.Spec.Template.Annotations, count, perJob, path)
		errs = append(errs, reqErrs...)
		if !workload.RequestUsable(reqErrs) {
			req = nil // invalid values may break the Workload schema
		}
		if req != nil {
			if ptr.Deref(rj.Template.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion {
				req.PodIndexLabel = ptr.To(strata.JobCompletionIndexLabel)
			}
			req.SubGroupIndexLabel = ptr.To(jobsetapi.JobIndexKey)
			req.SubGroupCount = ptr.To(replicas)
		}
		ps.TopologyRequest = req
		out = append(out, ps)
	}
	return out, errs
}

// Templates are the ReplicatedJobs' pod templates, in order.
func (j JobSet) Templates() []*corev1.PodTemplateSpec {
	out := make([]*corev1.PodTemplateSpec, len(j.Spec.ReplicatedJobs))
	for i := range j.Spec.ReplicatedJobs {
		out[i] = &j.Spec.ReplicatedJobs[i].Template.Spec.Template
	}
	return out
}

// ChildPods is true: a JobSet's pods are its Jobs'.
func (JobSet) ChildPods() bool { return true }

// Suspended is spec.suspend.
func (j JobSet) Suspended() bool { return ptr.Deref(j.Spec.Suspend, false) }

// SetSuspended sets spec.suspend.
func (j JobSet) SetSuspended(s bool) { j.Spec.Suspend = ptr.To(s) }

// TemplatesMutable says the templates may change, and the JobSet may
// start with them: while suspended, once no child Job has active pods
// (the JobSet controller's status says so). The JobSet controller
// suspends the child Jobs and, on resume, brings their pod templates'
// node selectors, tolerations, labels and scheduling gates to the
// JobSet's; a JobSet suspended and resumed before that controller saw it
// would keep its old pods running beside the new admission's (Kueue holds
// the quota until the job is inactive).
func (j JobSet) TemplatesMutable() bool {
	if !j.Suspended() {
		return false
	}
	for _, st := range j.Status.ReplicatedJobsStatus {
		if st.Active > 0 {
			return false
		}
	}
	return true
}

// RestoreChildren applies restore to the pod templates of the JobSet's
// child Jobs that have not finished: the JobSet controller, resuming a
// JobSet, merges the ReplicatedJobs' node selectors, tolerations, labels
// and scheduling gates into the Jobs it made before, so what an admission
// added to them must leave them with the admission. A child Job whose
// template changes must be suspended with no active pod (the JobSet
// controller suspends it after the JobSet, the Job controller then ends
// its pods); until then, or when its update meets a newer version,
// ErrChildrenRunning. Its start time is cleared first where the Job
// controller has not (before Kubernetes 1.36 it keeps it, and the API
// server lets a template change only without it), as the JobSet
// controller does before it resumes a Job.
func (j JobSet) RestoreChildren(ctx context.Context, c client.Client, restore func(i int, tmpl *corev1.PodTemplateSpec)) error {
	var children batchv1.JobList
	if err := c.List(ctx, &children, client.InNamespace(j.Namespace), client.MatchingLabels{jobsetapi.JobSetNameKey: j.Name}); err != nil {
		return fmt.Errorf("listing the JobSet's Jobs: %w", err)
	}
	running := 0
	for i := range children.Items {
		child := &children.Items[i]
		if !metav1.IsControlledBy(child, j.JobSet) || !child.DeletionTimestamp.IsZero() || jobFinished(child) {
			continue
		}
		t := slices.IndexFunc(j.Spec.ReplicatedJobs, func(rj jobsetapi.ReplicatedJob) bool {
			return rj.Name == child.Labels[jobsetapi.ReplicatedJobNameKey]
		})
		if t < 0 {
			continue
		}
		before := child.Spec.Template.DeepCopy()
		restore(t, &child.Spec.Template)
		if equality.Semantic.DeepEqual(before, &child.Spec.Template) {
			continue
		}
		if !ptr.Deref(child.Spec.Suspend, false) || child.Status.Active > 0 {
			running++
			continue
		}
		if child.Status.StartTime != nil {
			tmpl := child.Spec.Template.DeepCopy()
			child.Status.StartTime = nil
			if err := c.Status().Update(ctx, child); err != nil {
				if apierrors.IsNotFound(err) {
					continue // gone: made again from the JobSet's templates
				}
				if apierrors.IsConflict(err) {
					running++
					continue
				}
				return fmt.Errorf("clearing the start time of the JobSet's Job %s: %w", child.Name, err)
			}
			child.Spec.Template = *tmpl
		}
		if err := c.Update(ctx, child); err != nil {
			if apierrors.IsNotFound(err) {
				continue // gone: made again from the JobSet's templates
			}
			if apierrors.IsConflict(err) {
				running++ // changed meanwhile: read again shortly
				continue
			}
			return fmt.Errorf("restoring the pod template of the JobSet's Job %s: %w", child.Name, err)
		}
	}
	if running > 0 {
		return fmt.Errorf("%w (%d of the JobSet's Jobs not suspended with their pods ended, or changed meanwhile)", jobs.ErrChildrenRunning, running)
	}
	return nil
}

// jobFinished says whether a Job has its Complete or Failed condition.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// ReclaimablePods are the pods of each ReplicatedJob's succeeded Jobs:
// they are done, and no other Job takes their places.
func (j JobSet) ReclaimablePods() []strata.ReclaimablePod {
	var out []strata.ReclaimablePod
	for _, st := range j.Status.ReplicatedJobsStatus {
		if st.Succeeded <= 0 {
			continue
		}
		i := slices.IndexFunc(j.Spec.ReplicatedJobs, func(rj jobsetapi.ReplicatedJob) bool { return rj.Name == st.Name })
		if i < 0 || i >= workload.MaxPodSets {
			continue
		}
		rj := &j.Spec.ReplicatedJobs[i]
		done := min(st.Succeeded, max(rj.Replicas, 0))
		perJob := workload.JobPodCount(&batchv1.Job{Spec: rj.Template.Spec})
		if n := int64(done) * int64(perJob); n > 0 {
			out = append(out, strata.ReclaimablePod{Name: rj.Name, Count: int32(min(n, math.MaxInt32))})
		}
	}
	return out
}

// Finished reads the Completed and Failed conditions.
func (j JobSet) Finished() (bool, string) {
	switch {
	case meta.IsStatusConditionTrue(j.Status.Conditions, string(jobsetapi.JobSetCompleted)):
		return true, "Succeeded"
	case meta.IsStatusConditionTrue(j.Status.Conditions, string(jobsetapi.JobSetFailed)):
		return true, "Failed"
	}
	return false, ""
}

// ManagedBy is spec.managedBy.
func (j JobSet) ManagedBy() string { return ptr.Deref(j.Spec.ManagedBy, "") }

// ForWorker is the JobSet without spec.managedBy and its TTL.
func (j JobSet) ForWorker() jobs.Job {
	c := &jobsetapi.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: maps.Clone(j.Labels), Annotations: maps.Clone(j.Annotations)},
		Spec:       *j.Spec.DeepCopy(),
	}
	c.Spec.ManagedBy = nil
	c.Spec.Suspend = ptr.To(true)
	c.Spec.TTLSecondsAfterFinished = nil
	return JobSet{c}
}

// MirrorStatus copies from's status: conditions, restarts, terminal state
// and each ReplicatedJob's Job counts.
func (j JobSet) MirrorStatus(from jobs.Job) bool {
	src, ok := from.(JobSet)
	if !ok || equality.Semantic.DeepEqual(j.Status, src.Status) {
		return false
	}
	j.Status = *src.Status.DeepCopy()
	return true
}

// ClearRun zeroes each ReplicatedJob's active and ready Jobs.
func (j JobSet) ClearRun() bool {
	if done, _ := j.Finished(); done {
		return false
	}
	changed := false
	for i := range j.Status.ReplicatedJobsStatus {
		st := &j.Status.ReplicatedJobsStatus[i]
		if st.Active != 0 || st.Ready != 0 {
			st.Active, st.Ready = 0, 0
			changed = true
		}
	}
	return changed
}
