// Package podsready is the agent's waitForPodsReady (Kueue's
// all-or-nothing with a timeout): it keeps each admitted Workload's
// PodsReady condition from its pods (the strata.dev/workload label), and
// takes back the admission of one whose pods are not all ready or
// succeeded within the timeout of its admission, or within the recovery
// timeout of a pod failing after they were. The workload is counted in
// status.requeueState and waits out a backoff before it queues again (the
// scheduler honours requeueAt); past backoffLimitCount it is deactivated.
// The kind's controller stops the job once its Workload has no admission,
// as for any eviction. With waitForPodsReady on or off, it also takes back
// the admission of a Workload whose spec.active is false (a
// LeaderWorkerSet group's controller does not), and deactivates one
// admitted for longer than its maximum execution time in all (Kueue's
// max-exec-time-seconds, KEP-3125).
package podsready

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"strata.dev/strata/agent/index"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Reconciler keeps PodsReady and enforces the timeouts, per Workload.
type Reconciler struct {
	client   client.Client
	cfg      configv1beta1.WaitForPodsReady
	clock    clock.WithDelayedExecution
	recorder events.EventRecorder
	requeue  chan event.GenericEvent

	mu sync.Mutex
	// due is, per Workload, the deadline a timer is set for.
	due map[types.NamespacedName]time.Time
}

// NewReconciler returns a Reconciler for a defaulted configuration; clk
// measures the timeouts and the backoff.
func NewReconciler(c client.Client, cfg configv1beta1.WaitForPodsReady, clk clock.WithDelayedExecution, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, cfg: cfg, clock: clk, recorder: recorder,
		requeue: make(chan event.GenericEvent, 1024), due: map[types.NamespacedName]time.Time{}}
}

// SetupWithManager watches the admitted Workloads and the pods that carry
// a workload's label.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	admitted := predicate.NewPredicateFuncs(func(o client.Object) bool {
		wl, ok := o.(*strata.Workload)
		return ok && (wl.Status.Admission != nil || wl.Status.RequeueState != nil || workload.ExecutionExceeded(wl))
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("podsready").
		For(&strata.Workload{}, builder.WithPredicates(admitted)).
		WatchesRawSource(source.Channel(r.requeue, &handler.EnqueueRequestForObject{}))
	if !r.enabled() {
		// Deactivated Workloads, and maximum execution times, only.
		return b.Complete(r)
	}
	return b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[strata.WorkloadLabel]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[strata.WorkloadLabel] != ""
	}))).
		Complete(r)
}

// enabled says whether waitForPodsReady is on; off, the Reconciler only
// takes back deactivated Workloads' admissions.
func (r *Reconciler) enabled() bool { return r.cfg.Enable == nil || *r.cfg.Enable }

// after reconciles the Workload again when d has passed on the clock,
// unless a timer is set for then or earlier already.
func (r *Reconciler) after(key types.NamespacedName, d time.Duration) {
	at := r.clock.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.due[key]; ok && !t.After(at) && t.After(r.clock.Now()) {
		return
	}
	r.due[key] = at
	r.clock.AfterFunc(d, func() {
		r.mu.Lock()
		if r.due[key].Equal(at) {
			delete(r.due, key)
		}
		r.mu.Unlock()
		r.requeue <- event.GenericEvent{Object: &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	})
}

// Reconcile brings one Workload's PodsReady condition up to date and
// evicts it when its time is up.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wl := &strata.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.due, req.NamespacedName)
			r.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !workload.IsActive(wl) {
		// Deactivated, by this controller past backoffLimitCount or by
		// its user: it queues from zero once active again (Kueue's). The
		// kinds' controllers take an inactive Workload's admission back
		// too, but not every kind's (a LeaderWorkerSet group's).
		if (wl.Status.RequeueState != nil || wl.Status.Admission != nil || workload.ExecutionExceeded(wl)) && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			return ctrl.Result{}, r.deactivated(ctx, wl)
		}
		return ctrl.Result{}, nil
	}
	// The maximum execution time (Kueue's max-exec-time-seconds), with
	// waitForPodsReady on or off. A workload marked for it stays marked
	// until its deactivation evicts it: one evicted otherwise before its
	// spec.active was written (that write lost a conflict) is deactivated
	// all the same, admitted or not, as Kueue deactivates a
	// DeactivationTarget.
	if workload.ExecutionExceeded(wl) && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return ctrl.Result{}, r.executionExceeded(ctx, wl)
	}
	if left, ok := workload.ExecutionLeft(wl, r.clock.Now()); ok {
		if left <= 0 {
			return ctrl.Result{}, r.executionExceeded(ctx, wl)
		}
		r.after(req.NamespacedName, left)
	}
	if !r.enabled() || wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
		return ctrl.Result{}, err
	}
	// An earlier Job's pods (orphaned, or still terminating) carry the
	// same label: they are not this admission's.
	ready, want := readyPods(workload.OwnedPods(wl, pods.Items)), admittedPods(wl)
	prev := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPodsReady)
	status, reason := condition(prev, ready >= want)
	// Absent counts as waiting to start: not written (an admission writes
	// it, but a Workload admitted before waitForPodsReady was on has none).
	if (prev != nil || status == metav1.ConditionTrue) && (prev == nil || prev.Status != status || prev.Reason != reason) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadPodsReady, Status: status, Reason: reason,
			Message: conditionMessage(reason, ready, want), LastTransitionTime: metav1.NewTime(r.clock.Now())})
		// The update's event brings the Workload back for its deadline;
		// so does a newer Workload's when it conflicts.
		return ctrl.Result{}, ignoreConflict(client.IgnoreNotFound(r.client.Status().Update(ctx, wl)))
	}
	cause, left, limit := due(wl, &r.cfg, r.clock.Now())
	switch {
	case cause == "":
		return ctrl.Result{}, nil
	case left > 0:
		r.after(req.NamespacedName, left)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.timedOut(ctx, wl, cause, ready, want, limit)
}

// timedOut evicts a Workload whose pods were not ready in time, or
// deactivates it past backoffLimitCount.
func (r *Reconciler) timedOut(ctx context.Context, wl *strata.Workload, cause string, ready, want int32, limit time.Duration) error {
	now := r.clock.Now()
	if evict(wl, &r.cfg, cause, ready, want, limit, now) {
		// Past backoffLimitCount: the eviction is counted first, while
		// the workload keeps its admission (so that nothing admits it
		// again in between), then it is deactivated; the update's event
		// brings it back to be evicted, saying why (deactivated).
		// A retry after a failed spec write finds its own count past the
		// limit already: only the spec is written again. A hub's copy
		// that arrives past this worker's limit gets its count too, so
		// that its deactivation says RequeuingLimitExceeded.
		if limit := r.cfg.RequeuingStrategy.BackoffLimitCount; wl.Status.RequeueState == nil || workload.RequeueCount(wl) <= *limit {
			count := workload.NextRequeueCount(wl)
			if wl.Status.RequeueState == nil {
				wl.Status.RequeueState = &strata.RequeueState{}
			}
			wl.Status.RequeueState.Count = &count
			if err := r.client.Status().Update(ctx, wl); err != nil {
				return ignoreConflict(client.IgnoreNotFound(err))
			}
		}
		wl.Spec.Active = ptr.To(false)
		return ignoreConflict(client.IgnoreNotFound(r.client.Update(ctx, wl)))
	}
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return ignoreConflict(client.IgnoreNotFound(err))
	}
	r.event(wl, strata.EvictedByPodsReadyTimeout, meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted).Message)
	ctrl.LoggerFrom(ctx).V(2).Info("Evicted: pods not ready in time", "workload", client.ObjectKeyFromObject(wl), "cause", cause,
		"requeueAt", workload.RequeueAt(wl))
	return nil
}

// executionExceeded deactivates an admitted Workload whose maximum
// execution time is used up: the status says why first (the mark,
// workload.MarkExecutionExceeded), while the workload keeps its admission
// so that nothing admits it again in between, then spec.active is set to
// false; the update's event brings it back to be evicted (deactivated),
// by this controller or the kind's, and deactivated then says why. A
// retry after a failed spec write finds the mark: only the spec is
// written again.
func (r *Reconciler) executionExceeded(ctx context.Context, wl *strata.Workload) error {
	if !workload.ExecutionExceeded(wl) {
		workload.MarkExecutionExceeded(wl, r.clock.Now())
		if err := r.client.Status().Update(ctx, wl); err != nil {
			return ignoreConflict(client.IgnoreNotFound(err))
		}
	}
	wl.Spec.Active = ptr.To(false)
	if err := r.client.Update(ctx, wl); err != nil {
		return ignoreConflict(client.IgnoreNotFound(err))
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deactivated: maximum execution time exceeded", "workload", client.ObjectKeyFromObject(wl),
		"maximumExecutionTimeSeconds", *wl.Spec.MaximumExecutionTimeSeconds)
	return nil
}

// deactivated takes back the admission and the requeueState of a
// deactivated Workload and, when it was deactivated past
// backoffLimitCount, says so on it (with a Warning event). The kind's
// controller may evict it too, saying only that it was deactivated:
// whichever writes last, the reason stays Deactivated.
func (r *Reconciler) deactivated(ctx context.Context, wl *strata.Workload) error {
	message, evicted, exceeded := deactivated(wl, &r.cfg, r.clock.Now())
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return ignoreConflict(client.IgnoreNotFound(err))
	}
	switch {
	case exceeded:
		r.event(wl, reasonDeactivated, message)
	case evicted:
		// As the Job controller says it, when this controller evicts first.
		if job := workload.OwnerJob(wl); job != nil {
			r.recorder.Eventf(job, wl, corev1.EventTypeNormal, reasonDeactivated, "Evict", "The Workload was deactivated; the Job waits until its spec.active is true")
		}
	}
	return nil
}

// ignoreConflict drops a conflict: the newer Workload's event brings it
// back.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// event records a Warning on the Workload and on its job.
func (r *Reconciler) event(wl *strata.Workload, reason, note string) {
	if len(note) > maxEventNote {
		note = note[:maxEventNote]
	}
	r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, reason, "Evict", "%s", note)
	if job := workload.OwnerJob(wl); job != nil {
		r.recorder.Eventf(job, wl, corev1.EventTypeWarning, reason, "Evict", "%s", note)
	}
}

// maxEventNote is the API's limit on an event's note.
const maxEventNote = 1024

// readyPods counts the pods that are ready or have succeeded, leaving
// out those being deleted.
func readyPods(pods []corev1.Pod) int32 {
	var n int32
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || podReady(p) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// admittedPods is the number of pods an admission is for.
func admittedPods(wl *strata.Workload) int32 {
	var n int32
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		n += psa.Count
	}
	return n
}
