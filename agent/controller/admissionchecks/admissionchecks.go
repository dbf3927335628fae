// Package admissionchecks admits the workloads whose ClusterQueue names
// AdmissionChecks (Kueue's): the scheduler reserves their quota and marks
// each check Pending; each check's controller sets its state; this
// controller admits the workload once every check is Ready, takes the
// reservation back and queues it again when one asks to retry, and
// deactivates it when one rejects it.
package admissionchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Reconciler acts on the check states of reserved workloads.
type Reconciler struct {
	client   client.Client
	clock    clock.Clock
	recorder events.EventRecorder
}

// NewReconciler returns a Reconciler writing through c.
func NewReconciler(c client.Client, clk clock.Clock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, clock: clk, recorder: recorder}
}

// SetupWithManager watches the Workloads that have check states or a
// QuotaReserved condition (none of a queue without checks), and the
// ClusterQueues, whose checks may change under a reservation.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	withChecks := predicate.NewPredicateFuncs(func(o client.Object) bool {
		wl, ok := o.(*strata.Workload)
		return ok && concerned(wl)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("admissionchecks").
		For(&strata.Workload{}, builder.WithPredicates(withChecks)).
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.reservedIn), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// concerned says whether wl is this controller's: it has check states or
// a QuotaReserved condition.
func concerned(wl *strata.Workload) bool {
	return len(wl.Status.AdmissionChecks) > 0 || meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved) != nil
}

// reservedIn are the workloads a ClusterQueue holds a reservation of.
func (r *Reconciler) reservedIn(ctx context.Context, o client.Object) []reconcile.Request {
	var wls strata.WorkloadList
	if err := r.client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Workloads for a ClusterQueue's admission checks")
		return nil
	}
	var out []reconcile.Request
	for i := range wls.Items {
		wl := &wls.Items[i]
		if wl.Status.Admission != nil && wl.Status.Admission.ClusterQueue == o.GetName() && concerned(wl) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}})
		}
	}
	return out
}

// Reconcile brings one workload to what its check states call for.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wl := &strata.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return ctrl.Result{}, nil
	}
	now := r.clock.Now()
	if wl.Status.Admission == nil {
		if v, _ := workload.Verdict(wl.Status.AdmissionChecks); !workload.IsActive(wl) && v == workload.ChecksRejected {
			return ctrl.Result{}, r.sayRejected(ctx, wl, now)
		}
		// Its reservation was taken back (preempted, evicted, its queue
		// drained...): no quota reserved, every check Pending again
		// (Kueue resets the states at an eviction).
		if !workload.ReleaseChecks(wl, now) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.client.Status().Update(ctx, wl)
	}
	cq := &strata.ClusterQueue{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: wl.Status.Admission.ClusterQueue}, cq); err != nil {
		// Its queue is gone: the reservation stands as it is.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	checks := workload.ChecksOf(cq, workload.AdmissionFlavors(wl.Status.Admission))
	if len(checks) == 0 && len(wl.Status.AdmissionChecks) == 0 {
		return ctrl.Result{}, nil
	}
	changed := workload.SyncChecks(wl, checks, now)
	verdict, why := workload.Verdict(wl.Status.AdmissionChecks)
	switch verdict {
	case workload.ChecksRejected:
		return ctrl.Result{}, r.reject(ctx, wl, why, now)
	case workload.ChecksRetry:
		retry(wl, why, now)
		if err := r.client.Status().Update(ctx, wl); err != nil {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, strata.EvictedByAdmissionCheck, "Evict", "Quota reservation taken back, queued again: %s", why)
		return ctrl.Result{}, nil
	case workload.ChecksReady:
		if len(workload.DelayedPodSets(wl)) > 0 {
			// Its topology is assigned, and it is admitted, by the
			// scheduler's second pass (KEP-2724), which the Ready
			// checks' write wakes.
			break
		}
		changed = workload.AdmitChecked(wl, checks, now) || changed
	default:
		if !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			changed = wait(wl, checks, now) || changed
		}
		// Admitted: a check Pending again, or added to its queue since,
		// leaves it admitted and running (Kueue's); its state is kept.
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.client.Status().Update(ctx, wl)
}

// wait marks a reserved workload with a check not Ready as waiting.
func wait(wl *strata.Workload, checks []string, now time.Time) bool {
	return meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.WaitingForAdmissionChecks, Message: fmt.Sprintf("quota reserved; waiting for admission checks %s to be Ready", strings.Join(checks, ", ")),
		LastTransitionTime: metav1.NewTime(now)})
}

// retry takes a reservation back because a check asked to retry: the
// workload waits in its queue again at once, every check Pending.
func retry(wl *strata.Workload, why string, now time.Time) {
	message := "evicted: " + why + " (Retry); its quota reservation is taken back and it waits in its queue again"
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, now)
	wl.Status.Admission = nil
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: strata.EvictedByAdmissionCheck, Message: message, LastTransitionTime: t})
	meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted).LastTransitionTime = t
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.EvictedByAdmissionCheck, Message: message, LastTransitionTime: t})
	workload.SetRequeued(wl, metav1.ConditionTrue, strata.EvictedByAdmissionCheck, message, now)
	workload.ReleaseChecks(wl, now)
}

// reject deactivates a workload a check rejected (Kueue's): spec.active
// first, so that no new reservation comes before it, then its conditions,
// which the kinds' controllers' own deactivation may have written first
// (sayRejected writes them again then).
func (r *Reconciler) reject(ctx context.Context, wl *strata.Workload, why string, now time.Time) error {
	if workload.IsActive(wl) {
		patch := client.MergeFrom(wl.DeepCopy())
		wl.Spec.Active = ptr.To(false)
		if err := r.client.Patch(ctx, wl, patch); err != nil {
			return err
		}
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, strata.AdmissionCheckRejected, "Deactivate", "Deactivated: %s", why)
	}
	return r.sayRejected(ctx, wl, now)
}

// sayRejected writes, on a deactivated workload with a Rejected check, the
// eviction and why: its reservation goes, its conditions name the check.
// The Rejected state stays until the workload is queued again.
func (r *Reconciler) sayRejected(ctx context.Context, wl *strata.Workload, now time.Time) error {
	verdict, why := workload.Verdict(wl.Status.AdmissionChecks)
	if verdict != workload.ChecksRejected {
		return nil
	}
	message := fmt.Sprintf("deactivated (%s): %s; set spec.active to true to queue it again", strata.AdmissionCheckRejected, why)
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Message == message && wl.Status.Admission == nil {
		return nil
	}
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, now)
	wl.Status.Admission = nil
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: "Deactivated", Message: message, LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: "Deactivated", Message: message, LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
		Reason: "Deactivated", Message: "no quota reserved", LastTransitionTime: t})
	workload.SetRequeued(wl, metav1.ConditionFalse, "Deactivated", message, now)
	return r.client.Status().Update(ctx, wl)
}
