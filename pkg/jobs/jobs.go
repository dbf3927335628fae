// Package jobs is the adapter layer between Strata and the workload kinds
// it runs. A kind (batch/v1 Job, JobSet, ...) implements Kind and Job once,
// in its own package, and registers itself (pkg/jobs/kinds); intake (on
// hub and agent), the agent's starter, simulate and explain work through
// these interfaces, and so do the hub's copy contract and status mirror.
//
// What a kind says: its pod sets with their topology requests (read from
// each pod template's annotations), its pod templates (where an admission
// puts the flavor's node labels and tolerations, Strata's labels and the
// topology scheduling gate, and from where they are taken back exactly),
// whether it is suspended and how to suspend or resume it, when its
// templates may change, and whether it finished; for the hub, who manages
// it, the object a worker gets, and how its status is mirrored back.
package jobs

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Kind is one workload kind Strata runs.
type Kind interface {
	// GroupVersionKind of the kind's objects.
	GroupVersionKind() schema.GroupVersionKind
	// WorkloadName is the name of the Workload of the object of that name;
	// also the value of its pods' strata.dev/workload label.
	WorkloadName(name string) string
	// NewObject returns an empty object of the kind, to read into.
	NewObject() client.Object
	// Adapt wraps an object of the kind; false when it is not one.
	Adapt(obj client.Object) (Job, bool)
	// List lists the kind's objects.
	List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]Job, error)
}

// Job is one object of a workload kind, as Strata sees it. Its methods
// read and change the wrapped object only; writing it is the caller's.
type Job interface {
	// Object is the wrapped object.
	Object() client.Object
	// Kind is the object's kind.
	Kind() Kind
	// PodSets are the pod sets of its Workload, in a fixed order, with
	// copies of their templates and the topology requests their
	// annotations ask for. Errors point into the object; a pod set whose
	// annotations are invalid has no topology request.
	PodSets() ([]strata.PodSet, field.ErrorList)
	// Templates are the object's pod templates, in the order of PodSets,
	// to be changed in place.
	Templates() []*corev1.PodTemplateSpec
	// Suspended says whether the object is suspended (or, for a kind
	// without suspension, held).
	Suspended() bool
	// SetSuspended suspends or resumes it.
	SetSuspended(bool)
	// TemplatesMutable says whether the API server and the kind's
	// controller let the templates change now.
	TemplatesMutable() bool
	// Finished says whether it completed or failed: "Succeeded" or
	// "Failed".
	Finished() (bool, string)

	// ReclaimablePods are, per pod set, the pods that finished and whose
	// places will not be taken again (none when no pod set has any).
	ReclaimablePods() []strata.ReclaimablePod

	// ManagedBy is the controller its spec.managedBy names ("" when
	// unset: the kind's own).
	ManagedBy() string
	// ForWorker is the object a worker gets for it: a new object of the
	// kind with its name, namespace, labels, annotations and spec,
	// suspended, managed by the kind's own controller there, without what
	// the hub's API server generated (selectors and their labels) and
	// without a time to live after finishing (the hub removes a finished
	// copy once its final status is mirrored).
	ForWorker() Job
	// MirrorStatus sets its status to from's (the copy's on a worker);
	// false when they were the same.
	MirrorStatus(from Job) bool
	// ClearRun takes off its status what a run that was taken back put
	// there (active and ready pods, a suspended object's start); a
	// finished object keeps its status. False when nothing changed.
	ClearRun() bool
}

// Resizer is implemented by kinds that can run a pod set with fewer pods
// than it asks for, as a partial admission admits it (a batch/v1 Job with
// job-min-parallelism). What it asked for stays recorded on the object, so
// that its pod sets (PodSets) and its Workload still ask for all of it.
type Resizer interface {
	// RunWith makes the pod set run count pods; false when nothing changed.
	RunWith(podSet string, count int32) bool
	// RunAsAsked undoes RunWith; false when nothing changed.
	RunAsAsked() bool
	// RunningWith is how many pods the pod set runs while RunWith's
	// change stands (its user may change it meanwhile); false when it
	// runs as it asks.
	RunningWith(podSet string) (int32, bool)
}

// Scaler is implemented by kinds whose hub copy is resized in place while
// it runs (an elastic batch/v1 Job, workload.Elastic): the hub brings the
// copy to the size its queue granted, and the worker's agent then resizes
// the copy's admission.
type Scaler interface {
	// ScalePatch is the JSON merge patch that makes the job run count pods
	// at once; nil when it does.
	ScalePatch(count int32) []byte
}

// Decider is implemented by kinds whose result can be decided before the
// object finishes: a batch/v1 Job has SuccessCriteriaMet or FailureTarget
// while its last pods terminate, and Complete or Failed only after.
type Decider interface {
	// Decided says whether its result is decided, finished or not.
	Decided() bool
}

// Decided says whether j finished or its result is decided (Decider): a
// copy in that state is never taken back to run again.
func Decided(j Job) bool {
	if done, _ := j.Finished(); done {
		return true
	}
	d, ok := j.(Decider)
	return ok && d.Decided()
}

// GatedStart is implemented by kinds whose copy can be sent to a worker
// running, its pods held by the topology scheduling gate until the
// worker's agent admits it and releases them (agent/controller/ungater),
// instead of suspended and resumed by the agent: one write fewer per copy
// on the worker, and no start step.
type GatedStart interface {
	// StartGated makes the copy so, for the Workload named workload: not
	// suspended, every pod template gated and labelled with the Workload
	// and its pod set. False, the copy unchanged, when this copy must
	// wait suspended (a batch/v1 Job with activeDeadlineSeconds, whose
	// deadline would count while it waits, or with job-min-parallelism,
	// whose parallelism its start sets).
	StartGated(workload string) bool
}

// Gated says whether a job is a copy made by GatedStart that runs as it
// was sent: not suspended, marked (strata.GatedStartAnnotation), every pod
// template held by the topology scheduling gate and labelled for a
// Workload, and not started by an admission since (no record of one). Its
// pods run only once the agent releases them.
func Gated(j Job) bool {
	if j.Suspended() {
		return false
	}
	annotations := j.Object().GetAnnotations()
	if _, marked := annotations[strata.GatedStartAnnotation]; !marked {
		return false
	}
	if _, recorded := annotations[strata.AddedByAdmissionAnnotation]; recorded {
		return false
	}
	templates := j.Templates()
	if len(templates) == 0 {
		return false
	}
	for _, t := range templates {
		if t.Labels[strata.WorkloadLabel] == "" || !slices.ContainsFunc(t.Spec.SchedulingGates, workload.IsTopologyGate) {
			return false
		}
	}
	return true
}

// ChildPods is implemented by jobs whose pods are controlled by child
// objects (a JobSet's Jobs), not by the job itself: an admission then
// labels their templates with strata.dev/owner-uid, so that the agent
// knows the job's pods from an earlier job's of the same name.
type ChildPods interface {
	ChildPods() bool
}

// WaitMarker is implemented by hub jobs whose status can say that they
// run nowhere while the hub has not dispatched them (a batch/v1 Job's
// Suspended condition: kubectl shows it Suspended, not Running).
type WaitMarker interface {
	// MarkWaiting sets that status with reason and message; false when it
	// says so already.
	MarkWaiting(reason, message string) bool
}

// ChildSync is implemented by jobs whose controller creates child objects
// from the pod templates while the job is suspended and, when it resumes,
// does not bring their templates up to date (the MPI operator's launcher
// Job): the agent calls SyncChildren with the job's templates admitted and
// written, the job still suspended, and resumes it only once it
// succeeded — so that no pod of a child runs without the admission.
type ChildSync interface {
	// ChildrenMade returns ErrChildrenPending while a child its
	// controller makes before the job resumes is not there yet: made
	// later, it could come from the templates the controller's cache held
	// before the admission, and resuming the job would run its pods
	// without the admission. The agent starts the job only once it
	// returns nil, so that the job is not left admitted-but-suspended
	// (which reads as suspended by its user).
	ChildrenMade(ctx context.Context, c client.Reader) error
	// SyncChildren makes the children's pod templates carry the job's
	// scheduling directives: labels, annotations, node selector,
	// tolerations and scheduling gates.
	SyncChildren(ctx context.Context, c client.Client) error
}

// ErrChildrenPending says that a job's children are not all made yet, so
// that it cannot resume: the agent tries again shortly.
var ErrChildrenPending = errors.New("waiting for the job's controller to create its children")

// ChildRestore is implemented by jobs whose controller, when the job
// resumes, merges the job's pod templates into the children it made
// before instead of replacing theirs (the JobSet controller merges node
// selectors, tolerations, labels, annotations and scheduling gates): what
// an admission added stays on the children once it is taken back from the
// job, and an admission on a flavor of other node label keys would then
// run the children's pods with both flavors' labels, on no node. The agent
// takes an admission back from the children before the job.
type ChildRestore interface {
	// RestoreChildren calls restore on the pod template of each child made
	// from the job's pod template i (jobs.Job.Templates) and has not
	// finished, and writes those it changed. It returns
	// ErrChildrenRunning while such a child is not suspended with its pods
	// ended yet (its controller suspends it after the job; its template
	// cannot change before).
	RestoreChildren(ctx context.Context, c client.Client, restore func(i int, tmpl *corev1.PodTemplateSpec)) error
}

// ErrChildrenRunning says that a job's children are not all suspended
// yet, so that what an admission added to them cannot be taken back: the
// agent tries again when the job's status changes, or shortly.
var ErrChildrenRunning = errors.New("waiting for the job's controller to suspend its children")

// GroupedWorkloads is implemented by kinds whose object the hub keeps as
// one Workload while a worker admits its copy as several (a
// LeaderWorkerSet's groups): the hub reads them all and judges them as
// one.
type GroupedWorkloads interface {
	// WorkerWorkloads are the names of the Workloads a worker keeps for
	// the object: at most workload.MaxGroups, whatever size the object
	// asks for (the hub reads them at each event of a copy).
	WorkerWorkloads(obj client.Object) []string
	// HubWorkload is the name of the hub Workload whose copy's Workload
	// wl is; false when wl is not one of the kind's.
	HubWorkload(wl *strata.Workload) (string, bool)
	// Aggregate is one Workload standing for the object's Workloads on a
	// worker (in the order of WorkerWorkloads, nil where there is none
	// yet), named as the hub Workload; nil when there is none at all.
	Aggregate(obj client.Object, wls []*strata.Workload) *strata.Workload
	// WorkerJobs are the jobs a worker admits for the object, one per
	// Workload of WorkerWorkloads, in that order (its groups).
	WorkerJobs(obj client.Object) []Job
}

// AllTemplates is implemented by jobs whose object has pod templates
// that Templates leaves out (a LeaderWorkerSet's workers' template when
// each group is its leader alone, every template when it has no groups).
type AllTemplates interface {
	// AllTemplates are every pod template of the object, each once.
	AllTemplates() []*corev1.PodTemplateSpec
}

// ObjectTemplates are every pod template of j's object: its AllTemplates,
// or else its Templates.
func ObjectTemplates(j Job) []*corev1.PodTemplateSpec {
	if a, ok := j.(AllTemplates); ok {
		return a.AllTemplates()
	}
	return j.Templates()
}

// WorkerWorkload reads with r the Workload a worker keeps for the copy of
// kind k at key, obj being that copy as read (nil when it was not found):
// its Workload, or the aggregate of a GroupedWorkloads kind's. nil when
// there is none.
func WorkerWorkload(ctx context.Context, r client.Reader, k Kind, key types.NamespacedName, obj client.Object) (*strata.Workload, error) {
	get := func(name string) (*strata.Workload, error) {
		wl := &strata.Workload{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, wl); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return wl, nil
	}
	g, grouped := k.(GroupedWorkloads)
	if !grouped {
		return get(k.WorkloadName(key.Name))
	}
	if obj == nil {
		return nil, nil
	}
	names := g.WorkerWorkloads(obj)
	wls := make([]*strata.Workload, len(names))
	for i, name := range names {
		wl, err := get(name)
		if err != nil {
			return nil, err
		}
		wls[i] = wl
	}
	return g.Aggregate(obj, wls), nil
}

// LabelsOwner says whether an admission labels j's templates with its UID.
func LabelsOwner(j Job) bool {
	c, ok := j.(ChildPods)
	return ok && c.ChildPods()
}

// WorkloadFor builds the Workload of a queue-labelled job (see
// workload.Build). Errors point into the object; the Workload is still
// returned, so that callers can record them on it.
func WorkloadFor(j Job) (*strata.Workload, field.ErrorList) {
	obj := j.Object()
	podSets, errs := j.PodSets()
	meta := metav1.ObjectMeta{Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
	wl, errs := workload.Build(j.Kind().GroupVersionKind().Kind, &meta, j.Kind().WorkloadName(obj.GetName()), podSets, errs)
	if a, ok := j.(WorkloadAdjuster); ok {
		a.AdjustWorkload(wl)
	}
	return wl, errs
}

// WorkloadAdjuster is implemented by jobs whose Workload differs from what
// their object's metadata gives (a LeaderWorkerSet group's topology hint
// is its part of the set's).
type WorkloadAdjuster interface {
	AdjustWorkload(wl *strata.Workload)
}

// KindOf returns the kind among ks that an owner reference points at; nil
// when none.
func KindOf(ks []Kind, ref *metav1.OwnerReference) Kind {
	for _, k := range ks {
		if IsKind(k, ref) {
			return k
		}
	}
	return nil
}

// AdaptAny wraps obj as a job of whichever of ks it is.
func AdaptAny(ks []Kind, obj client.Object) (Job, bool) {
	for _, k := range ks {
		if j, ok := k.Adapt(obj); ok {
			return j, true
		}
	}
	return nil, false
}

// Resource names a kind's objects as RBAC and API errors do:
// "jobs.batch", "jobsets.jobset.x-k8s.io".
func Resource(k Kind) string {
	return plural(k) + "." + k.GroupVersionKind().Group
}

// IsKind says whether an owner reference points at an object of kind k.
func IsKind(k Kind, ref *metav1.OwnerReference) bool {
	if ref == nil {
		return false
	}
	gvk := k.GroupVersionKind()
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && ref.Kind == gvk.Kind && gv.Group == gvk.Group
}
