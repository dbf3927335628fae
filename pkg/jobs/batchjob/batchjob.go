// Package batchjob adapts batch/v1 Jobs: one pod set, "main", of
// parallelism pods (capped by completions), ranked by the completion index
// of an Indexed Job.
package batchjob

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Kind is the batch/v1 Job kind.
var Kind jobs.Kind = kind{}

// What strata-agent may do with Jobs on its cluster: its job reconciler
// reads them, and suspends and resumes them. (`make manifests` reads the
// kinds' packages into strata-agent's ClusterRole only; the hub's
// permissions on a kind are in hub/.)
//
// +kubebuilder:rbac:roleName=strata-agent,groups=batch,resources=jobs,verbs=get;list;watch;update;patch

// Registration registers batch/v1 Jobs (pkg/jobs/kinds).
var Registration = jobs.Registration{Kind: Kind, AddToScheme: batchv1.AddToScheme}

type kind struct{}

func (kind) GroupVersionKind() schema.GroupVersionKind {
	return batchv1.SchemeGroupVersion.WithKind("Job")
}

func (kind) WorkloadName(name string) string { return workload.JobWorkloadName(name) }

func (kind) NewObject() client.Object { return &batchv1.Job{} }

func (kind) Adapt(obj client.Object) (jobs.Job, bool) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, false
	}
	return Job{j}, true
}

func (kind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]jobs.Job, error) {
	var list batchv1.JobList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]jobs.Job, len(list.Items))
	for i := range list.Items {
		out[i] = Job{&list.Items[i]}
	}
	return out, nil
}

// Job wraps a batch/v1 Job.
type Job struct{ *batchv1.Job }

// Adapt wraps a batch/v1 Job.
func Adapt(j *batchv1.Job) Job { return Job{j} }

// Object is the Job.
func (j Job) Object() client.Object { return j.Job }

// Kind is the batch/v1 Job kind.
func (Job) Kind() jobs.Kind { return Kind }

// PodSets is the Job's one pod set (see workload.JobPodSets).
func (j Job) PodSets() ([]strata.PodSet, field.ErrorList) { return workload.JobPodSets(j.Job) }

// AdjustWorkload marks the Workload of a Job resized while it runs
// (kueue.x-k8s.io/elastic-job: "true"; see workload.Elastic).
func (j Job) AdjustWorkload(wl *strata.Workload) {
	if v := j.Annotations[strata.ElasticJobAnnotation]; v != "" {
		metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.ElasticJobAnnotation, v)
	}
}

// ScalePatch sets the Job's parallelism to count; an Indexed Job whose
// completions equal its parallelism keeps them equal (the only change of
// completions the API server allows while it runs).
func (j Job) ScalePatch(count int32) []byte {
	if workload.JobPodCount(j.Job) == count {
		return nil
	}
	spec := map[string]int32{"parallelism": count}
	indexed := ptr.Deref(j.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
	if c := j.Spec.Completions; indexed && c != nil && *c == ptr.Deref(j.Spec.Parallelism, 1) {
		spec["completions"] = count
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

// RunWith starts the Job with count pods at once (fewer than it asks for:
// a partial admission), recording its parallelism and completions as they
// were (strata.PartialAdmissionAnnotation) unless already recorded;
// completions follow when the Job says so (JobCompletionsFollow).
func (j Job) RunWith(podSet string, count int32) bool {
	if podSet != workload.MainPodSet {
		return false
	}
	asked, recorded := workload.JobPartialSizes(j.Job)
	if !recorded {
		asked = workload.PartialSizes{Parallelism: ptr.To(ptr.Deref(j.Spec.Parallelism, 1)), Completions: j.Spec.Completions}
	}
	before := j.Spec.DeepCopy()
	j.Spec.Parallelism = ptr.To(count)
	if workload.JobCompletionsFollow(j.Job) {
		j.Spec.Completions = ptr.To(count)
	}
	if equality.Semantic.DeepEqual(before, &j.Spec) && !recorded {
		return false
	}
	if !recorded {
		b, _ := json.Marshal(asked)
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, strata.PartialAdmissionAnnotation, string(b))
	}
	return true
}

// RunningWith is how many pods the Job runs at once while a partial
// admission's start has it run fewer than it asks for; false otherwise.
func (j Job) RunningWith(podSet string) (int32, bool) {
	if podSet != workload.MainPodSet {
		return 0, false
	}
	return workload.JobRunningPartially(j.Job)
}

// RunAsAsked gives the Job back the parallelism and completions a partial
// admission's start replaced.
func (j Job) RunAsAsked() bool {
	asked, ok := workload.JobPartialSizes(j.Job)
	if _, has := j.Annotations[strata.PartialAdmissionAnnotation]; !has {
		return false
	}
	delete(j.Annotations, strata.PartialAdmissionAnnotation)
	if ok {
		j.Spec.Parallelism = asked.Parallelism
		if asked.Completions != nil {
			j.Spec.Completions = asked.Completions
		}
	}
	return true
}

// Templates is the Job's pod template.
func (j Job) Templates() []*corev1.PodTemplateSpec {
	return []*corev1.PodTemplateSpec{&j.Spec.Template}
}

// Suspended is spec.suspend.
func (j Job) Suspended() bool { return ptr.Deref(j.Spec.Suspend, false) }

// SetSuspended sets spec.suspend.
func (j Job) SetSuspended(s bool) { j.Spec.Suspend = ptr.To(s) }

// TemplatesMutable says the template may change: only while suspended and the Job controller has
// cleared its start time; until then the API server refuses a template
// change.
func (j Job) TemplatesMutable() bool { return j.Suspended() && j.Status.StartTime == nil }

// ReclaimablePods are, as Kueue counts them, the pods beyond the
// completions the Job still needs: a Job of 4 pods and 4 completions with
// 3 succeeded needs only 1 pod more.
func (j Job) ReclaimablePods() []strata.ReclaimablePod {
	// Counted against the pods it asks for, also while a partial
	// admission runs fewer (workload.Reclaimable counts its share).
	asked := workload.JobAsAsked(j.Job)
	pods := workload.JobPodCount(asked)
	if pods <= 1 || j.Status.Succeeded == 0 {
		return nil
	}
	remaining := ptr.Deref(asked.Spec.Completions, pods) - j.Status.Succeeded
	if remaining >= pods {
		return nil
	}
	return []strata.ReclaimablePod{{Name: workload.MainPodSet, Count: pods - max(remaining, 0)}}
}

// Finished reads the Complete and Failed conditions.
func (j Job) Finished() (bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "Succeeded"
		case batchv1.JobFailed:
			return true, "Failed"
		}
	}
	return false, ""
}

// Decided reads the SuccessCriteriaMet and FailureTarget conditions too:
// the Job's result is decided, and Complete or Failed follows once its
// pods have terminated.
func (j Job) Decided() bool {
	if done, _ := j.Finished(); done {
		return true
	}
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobSuccessCriteriaMet || c.Type == batchv1.JobFailureTarget) {
			return true
		}
	}
	return false
}

// ManagedBy is spec.managedBy.
func (j Job) ManagedBy() string { return ptr.Deref(j.Spec.ManagedBy, "") }

// serverLabels are set by the API server on a Job's pod template; a copy
// must not carry them, the worker's API server sets its own.
var serverLabels = []string{"controller-uid", "job-name", batchv1.ControllerUidLabel, batchv1.JobNameLabel}

// ForWorker is the Job without spec.managedBy, its TTL, and the selector
// and template labels the hub's API server generated.
func (j Job) ForWorker() jobs.Job {
	c := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: maps.Clone(j.Labels), Annotations: maps.Clone(j.Annotations)},
		Spec:       *j.Spec.DeepCopy(),
	}
	c.Spec.ManagedBy = nil
	c.Spec.Suspend = ptr.To(true)
	c.Spec.TTLSecondsAfterFinished = nil
	c.Spec.Selector, c.Spec.ManualSelector = nil, nil
	for _, l := range serverLabels {
		delete(c.Spec.Template.Labels, l)
	}
	return Job{c}
}

// StartGated makes the copy run from its creation with its pods held by
// the topology scheduling gate (jobs.GatedStart): the Job controller
// creates them at once, and the worker's agent releases them onto the
// admission's nodes. A Job with activeDeadlineSeconds waits suspended
// instead: its deadline counts from its start, and would count its wait.
// So does a Job that may be admitted with fewer pods (job-min-parallelism):
// its parallelism is set to the admitted count before it starts.
func (j Job) StartGated(wl string) bool {
	if j.Spec.ActiveDeadlineSeconds != nil {
		return false
	}
	if minCount, _ := workload.JobMinCount(j.Job, workload.JobPodCount(j.Job)); minCount != nil {
		return false
	}
	t := &j.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[strata.WorkloadLabel] = wl
	t.Labels[strata.PodSetLabel] = workload.MainPodSet
	if !slices.ContainsFunc(t.Spec.SchedulingGates, workload.IsTopologyGate) {
		t.Spec.SchedulingGates = append(t.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate})
	}
	if j.Annotations == nil {
		j.Annotations = map[string]string{}
	}
	j.Annotations[strata.GatedStartAnnotation] = "true"
	j.Spec.Suspend = ptr.To(false)
	return true
}

// MirrorStatus copies from's status, as far as the API server lets a Job
// managed by another controller change its status: the start time of a
// running Job stays, and the succeeded and failed counters never go down.
// A copy placed again after one was taken back starts afresh on its
// worker: its start time and counters would be refused, and every later
// status with them, the final one included (mirrorStatus).
func (j Job) MirrorStatus(from jobs.Job) bool {
	src, ok := from.(Job)
	if !ok {
		return false
	}
	next := mirrorStatus(&j.Status, &src.Status, j.Suspended())
	if equality.Semantic.DeepEqual(j.Status, next) {
		return false
	}
	j.Status = next
	return true
}

// mirrorStatus is the status a hub Job (its status cur, suspended or not)
// takes from its copy's (src).
func mirrorStatus(cur, src *batchv1.JobStatus, suspended bool) batchv1.JobStatus {
	next := *src.DeepCopy()
	if cur.StartTime != nil && !suspended {
		next.StartTime = cur.StartTime.DeepCopy()
		if next.CompletionTime != nil && next.CompletionTime.Before(next.StartTime) {
			// The first run's worker's clock was ahead of this one's.
			next.CompletionTime = next.StartTime.DeepCopy()
		}
	}
	next.Succeeded = max(next.Succeeded, cur.Succeeded)
	next.Failed = max(next.Failed, cur.Failed)
	return next
}

// ClearRun zeroes the active, ready and terminating pods, and the start
// time of a suspended Job.
func (j Job) ClearRun() bool {
	if done, _ := j.Finished(); done {
		return false
	}
	st := &j.Status
	changed := st.Active != 0 || ptr.Deref(st.Ready, 0) != 0 || ptr.Deref(st.Terminating, 0) != 0
	st.Active = 0
	if st.Ready != nil {
		st.Ready = ptr.To[int32](0)
	}
	if st.Terminating != nil {
		st.Terminating = ptr.To[int32](0)
	}
	if j.Suspended() && st.StartTime != nil {
		st.StartTime = nil
		changed = true
	}
	return changed
}

// ReasonWaitingOnHub is the reason of the Suspended condition a hub Job
// has while the hub has not dispatched it.
const ReasonWaitingOnHub = "WaitingOnHub"

// MarkWaiting sets the Job's Suspended condition (reason WaitingOnHub)
// with the hub's reason and message: a hub Job that waits runs nowhere,
// and kubectl shows it Suspended, not Running. A started Job's status
// (mirrored from its copy) is left alone.
func (j Job) MarkWaiting(reason, message string) bool {
	// A Job re-placed after a run keeps its startTime (immutable once set
	// on a Job that is not suspended), so only what runs now counts.
	if done, _ := j.Finished(); done || j.Status.Active != 0 || ptr.Deref(j.Status.Ready, 0) != 0 {
		return false
	}
	message = reason + ": " + message
	if len(message) > maxConditionMessage {
		message = message[:maxConditionMessage-3] + "..."
	}
	for i := range j.Status.Conditions {
		c := &j.Status.Conditions[i]
		if c.Type != batchv1.JobSuspended {
			continue
		}
		if c.Status == corev1.ConditionTrue && c.Reason == ReasonWaitingOnHub && c.Message == message {
			return false
		}
		now := metav1.Now()
		if c.Status != corev1.ConditionTrue {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = corev1.ConditionTrue, ReasonWaitingOnHub, message, now
		return true
	}
	now := metav1.Now()
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
		Reason: ReasonWaitingOnHub, Message: message, LastProbeTime: now, LastTransitionTime: now})
	return true
}

// maxConditionMessage bounds a Job condition's message.
const maxConditionMessage = 1024
