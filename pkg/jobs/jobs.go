// Package jobs is the adapter layer between Strata and the workload kinds
// it runs. A kind (batch/v1 Job, JobSet, ...) implements Kind and Job once,
// in its own package, and registers itself (pkg/jobs/kinds); intake (on
// hub and agent), the agent's starter, simulate and explain work through
// these interfaces. The hub's copy contract and status mirror still take
// batch/v1 Jobs only: JobSets run on workers, not yet through the hub.
//
// What a kind says: its pod sets with their topology requests (read from
// each pod template's annotations), its pod templates (where an admission
// puts the flavor's node labels and tolerations, Strata's labels and the
// topology scheduling gate, and from where they are taken back exactly),
// whether it is suspended and how to suspend or resume it, when its
// templates may change, and whether it finished.
package jobs

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
}

// ChildPods is implemented by jobs whose pods are controlled by child
// objects (a JobSet's Jobs), not by the job itself: an admission then
// labels their templates with strata.dev/owner-uid, so that the agent
// knows the job's pods from an earlier job's of the same name.
type ChildPods interface {
	ChildPods() bool
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
	return workload.Build(j.Kind().GroupVersionKind().Kind, &meta, j.Kind().WorkloadName(obj.GetName()), podSets, errs)
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
