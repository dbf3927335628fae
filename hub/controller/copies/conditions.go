package copies

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/workload"
)

// ConditionUnreachable is a hub Workload's condition while the worker of
// its dispatch does not answer.
const ConditionUnreachable = strata.WorkloadWorkerUnreachable

// ReasonWorkerUnreachable is the outcome of a dispatch whose worker did not
// answer for fencing.replaceAfter.
const ReasonWorkerUnreachable = "WorkerUnreachable"

// ConditionCopyGoing is a hub Workload's condition while the hub takes
// its copy back and waits for the copy and its pods to be gone before
// placing it again; ReasonWaitingForPods its reason.
const (
	ConditionCopyGoing   = "CopyGoing"
	ReasonWaitingForPods = "WaitingForPods"
	ReasonWaitingForCopy = "WaitingForCopy"
)

// ReasonRanUnseen is the Admitted condition of a hub Workload whose copy
// finished before the hub saw its admission.
const ReasonRanUnseen = "FinishedBeforeAdmissionSeen"

// The functions below change a hub Workload's status in memory and say
// whether they changed it; the reconcile writes the status once.

// setUnreachable sets the WorkerUnreachable condition when its meaning
// changes.
func setUnreachable(st *strata.WorkloadStatus, message string) bool {
	message = intake.Truncate(message, intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(st.Conditions, ConditionUnreachable); old != nil && old.Status == metav1.ConditionTrue && workload.SameMeaning(old.Message, message) {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionUnreachable, Status: metav1.ConditionTrue, Reason: ReasonWorkerUnreachable, Message: message})
	return true
}

// clearUnreachable removes the WorkerUnreachable condition.
func clearUnreachable(st *strata.WorkloadStatus) bool {
	return meta.RemoveStatusCondition(&st.Conditions, ConditionUnreachable)
}

// setRanUnseen replaces a finished Workload's "waiting for the worker"
// Admitted condition when its copy's admission can no longer be read.
func setRanUnseen(st *strata.WorkloadStatus, cluster, flavor string) bool {
	c := meta.FindStatusCondition(st.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Reason != dispatch.ReasonDispatched {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonRanUnseen,
		Message: fmt.Sprintf("ran on %s (%s) and finished before the hub saw its admission", cluster, flavorWords(st, flavor))})
	return true
}

// setWaitingOnWorker shows on the hub why the worker has not admitted the
// copy yet, when the copy's Workload says so. A copy the worker admitted
// and then evicted while keeping it (preempted, fenced, suspended there)
// ends the hub's admission too: its time counts towards the maximum
// execution time (limit) until now, as the worker counts it, so that a
// later take-back, or a copy sent elsewhere, has only what is left.
func setWaitingOnWorker(st *strata.WorkloadStatus, cluster, flavor string, copyWL *strata.Workload, limit *int32, now time.Time) bool {
	if copyWL == nil {
		return false
	}
	c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	noted := c.Reason == dispatch.WorkerPreempting && dispatch.NotePreemption(st, cluster, c.Message)
	message := intake.Truncate(fmt.Sprintf("dispatched to %s (%s); the worker has not admitted it yet: %s", cluster, flavorWords(st, flavor), c.Message), intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(st.Conditions, strata.WorkloadAdmitted); old != nil && old.Reason == dispatch.ReasonDispatched && workload.SameMeaning(old.Message, message) {
		return noted
	}
	workload.AccumulateExecution(limit, st, now)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: dispatch.ReasonDispatched, Message: message, LastTransitionTime: metav1.NewTime(now)})
	return true
}

// setCopyGoing says on the hub Workload that its copy on cluster is being
// taken back, with the pods that keep it when the worker's agent reported
// them (strata.GoingPodsAnnotation on the copy).
func setCopyGoing(st *strata.WorkloadStatus, cluster string, copyJob metav1.Object) bool {
	c := metav1.Condition{Type: ConditionCopyGoing, Status: metav1.ConditionTrue, Reason: ReasonWaitingForCopy,
		Message: fmt.Sprintf("taking the copy back from %s: it is placed again once the copy and its pods are gone there", cluster)}
	if pods := copyJob.GetAnnotations()[strata.GoingPodsAnnotation]; pods != "" {
		c.Reason = ReasonWaitingForPods
		c.Message = fmt.Sprintf("taking the copy back from %s: it is placed again once its pods are gone there; waiting for %s "+
			"(a pod Terminating for long is on a node that does not answer: once that node is known gone, force-delete the pod there)", cluster, pods)
	}
	c.Message = intake.Truncate(c.Message, intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(st.Conditions, ConditionCopyGoing); old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, c)
	return true
}

// setCreateUnknown says on the hub Workload that creating its copy failed
// with an unknown outcome: the copy may exist and run.
func setCreateUnknown(st *strata.WorkloadStatus, cluster, flavor string, err error) bool {
	message := intake.Truncate(fmt.Sprintf("dispatched to %s (%s); creating the copy there has an unknown outcome (%v): it may exist and run there, "+
		"so the workload is placed elsewhere only once the worker answers, or once its fencing Lease has expired", cluster, flavorWords(st, flavor), err), intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(st.Conditions, strata.WorkloadAdmitted); old != nil && old.Reason == dispatch.ReasonDispatched && workload.SameMeaning(old.Message, message) {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: dispatch.ReasonDispatched, Message: message})
	return true
}

// setDispatching sets a WorkerCluster's Dispatching condition when it
// changes.
func (r *Reconciler) setDispatching(ctx context.Context, cluster string, status metav1.ConditionStatus, reason, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var wc strata.WorkerCluster
		if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
			return client.IgnoreNotFound(err)
		}
		old := meta.FindStatusCondition(wc.Status.Conditions, strata.WorkerClusterDispatching)
		if old == nil && status == metav1.ConditionTrue {
			return nil // never refused: nothing to say
		}
		if old != nil && old.Status == status && old.Reason == reason && strings.EqualFold(old.Message, message) {
			return nil
		}
		meta.SetStatusCondition(&wc.Status.Conditions, metav1.Condition{Type: strata.WorkerClusterDispatching, Status: status, Reason: reason,
			Message: intake.Truncate(message, intake.MaxConditionMessage), ObservedGeneration: wc.Generation})
		return client.IgnoreNotFound(r.client.Status().Update(ctx, &wc))
	})
}

// flavorWords names the flavor of the current dispatch for messages:
// "flavor f", or each pod set's when the hub placed them on different
// flavors (dispatch.FlavorWords).
func flavorWords(st *strata.WorkloadStatus, flavor string) string {
	if p := st.Placement; p != nil && len(p.PodSetFlavors) > 0 {
		return dispatch.FlavorWords(p)
	}
	return "flavor " + flavor
}
