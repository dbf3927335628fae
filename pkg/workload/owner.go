package workload

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

// OwnsPod says whether a pod that carries the workload's label is the
// workload's. The label is the Workload's name, which a re-created Job of
// the same name shares with its predecessor; so when the workload has a
// controller (its Job), the pod must be controlled by that same object, by
// UID. The pods of an earlier Job — still terminating, or orphaned, which
// leaves them without a controller — are not the new Job's, and nothing
// the agent does for the workload (ungating, hot swap) touches them.
// A workload without a controller claims every pod with its label. Pods
// that carry strata.dev/owner-uid (kinds whose pods belong to child
// objects, such as a JobSet's Jobs) are the workload's when it names the
// controller's UID.
func OwnsPod(wl *strata.Workload, p *corev1.Pod) bool {
	return Owns(wl, PodOwner(p))
}

// PodOwner is what OwnsPod compares with a workload's controller: the
// pod's strata.dev/owner-uid label when it has one, else its controller's
// UID ("" without a controller). For callers that keep it instead of the
// pod.
func PodOwner(p *corev1.Pod) types.UID {
	if uid, ok := p.Labels[strata.OwnerUIDLabel]; ok {
		return types.UID(uid)
	}
	if c := metav1.GetControllerOfNoCopy(p); c != nil {
		return c.UID
	}
	return ""
}

// Owns is OwnsPod for a pod whose PodOwner is owner.
func Owns(wl *strata.Workload, owner types.UID) bool {
	c := metav1.GetControllerOfNoCopy(wl)
	return c == nil || owner == c.UID
}

// OwnedPods returns the pods, of those carrying the workload's label, that
// are the workload's (OwnsPod), in order.
func OwnedPods(wl *strata.Workload, pods []corev1.Pod) []corev1.Pod {
	out := pods[:0:0]
	for i := range pods {
		if OwnsPod(wl, &pods[i]) {
			out = append(out, pods[i])
		}
	}
	return out
}

// SameMeaning says whether two messages differ at most in their numbers.
func SameMeaning(a, b string) bool {
	if a == b {
		return true
	}
	return WithoutNumbers(a) == WithoutNumbers(b)
}

// WithoutNumbers replaces every run of digits with '#': two messages of
// the same meaning (SameMeaning) give the same string.
func WithoutNumbers(m string) string {
	var b strings.Builder
	b.Grow(len(m))
	digits := false
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
	return b.String()
}

// OwnerJob is a reference to the job (a batch/v1 Job, a JobSet, an
// MPIJob, ...) that controls the workload, by UID, or nil: the job of that
// name now may be another one, and its events must not describe this
// workload.
func OwnerJob(wl *strata.Workload) *corev1.ObjectReference {
	owner := metav1.GetControllerOfNoCopy(wl)
	if owner == nil {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: wl.Namespace, Name: owner.Name, UID: owner.UID}
}

// Orphaned says whether a hub copy's Workload lost its controller while
// not being deleted: its job was deleted with its dependents orphaned
// (kubectl delete --cascade=orphan), and its pods may run on with nothing
// to stop them. A Workload is always created with its job as controller.
func Orphaned(wl *strata.Workload) bool {
	return wl.Labels[strata.HubWorkloadUIDLabel] != "" && metav1.GetControllerOfNoCopy(wl) == nil && wl.DeletionTimestamp.IsZero()
}

// PodsGoing says whether a hub copy's Workload is deleted and held by the
// agent's strata.PodsGoneFinalizer: its job is gone or going, and pods of
// it may still run.
func PodsGoing(wl *strata.Workload) bool {
	return IsCopy(wl) && !wl.DeletionTimestamp.IsZero() && slices.Contains(wl.Finalizers, strata.PodsGoneFinalizer)
}

// IsCopy says whether wl is a hub's copy on a worker: it carries the hub
// Workload's UID.
func IsCopy(wl *strata.Workload) bool {
	return wl.Labels[strata.HubWorkloadUIDLabel] != ""
}
