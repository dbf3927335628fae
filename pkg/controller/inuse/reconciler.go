package inuse

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ReasonInUse is the reason of the event that says why a deletion waits.
const ReasonInUse = "InUse"

// settle is how long nothing must have used an object being deleted
// before its finalizer goes: a user written a moment before the deletion
// (an admission on its way to the informers) shows up meanwhile.
const settle = time.Second

// Users names what uses the object called name (empty: nothing).
type Users func(ctx context.Context, name string) ([]string, error)

// Reconciler keeps the finalizer of one cluster-scoped kind.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	kind     string
	// what users are, in the event's words.
	what   string
	newObj func() client.Object
	users  Users

	clock clock.Clock

	mu sync.Mutex
	// told are the objects being deleted whose wait an event announced:
	// one event each (a queue of a thousand running workloads would
	// otherwise get one per workload that finishes).
	told map[types.UID]bool
	// idle are the objects being deleted that nothing used, since when.
	idle map[types.UID]time.Time
}

// NewReconciler returns a Reconciler for objects of kind (newObj makes
// an empty one) used by what users names, described as what in events.
func NewReconciler(c client.Client, recorder events.EventRecorder, kind, what string, newObj func() client.Object, users Users) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, kind: kind, what: what, newObj: newObj, users: users, clock: clock.RealClock{},
		told: map[types.UID]bool{}, idle: map[types.UID]time.Time{}}
}

// For is the predicate of the reconciled kind's own events: its creation
// and its spec or deletion (deletion marks the generation); nothing once
// it is gone.
func For() builder.Predicates {
	return builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	})
}

// ChangeOrDelete passes the deletion of a user, and the updates where
// changed says that what it uses changed (a map function sees the old
// object and the new of an update).
func ChangeOrDelete(changed func(old, cur client.Object) bool) builder.Predicates {
	return builder.WithPredicates(predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return changed(e.ObjectOld, e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	})
}

// Reconcile adds the finalizer to a live object and removes it from one
// being deleted once nothing uses it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var users []string
	if !obj.GetDeletionTimestamp().IsZero() {
		var err error
		if users, err = r.users(ctx, obj.GetName()); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing what uses %s %s: %w", r.kind, obj.GetName(), err)
		}
	}
	switch Decide(obj, users) {
	case Add:
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(obj, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Patch(ctx, obj, patch))
	case Remove:
		if wait := r.idleFor(obj.GetUID()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(obj, Finalizer)
		if err := r.client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.forget(obj.GetUID())
		ctrl.LoggerFrom(ctx).V(1).Info("Nothing uses it any more: its deletion completes", "kind", r.kind, "name", obj.GetName())
	case Wait:
		r.mu.Lock()
		delete(r.idle, obj.GetUID())
		r.mu.Unlock()
		msg := WaitMessage(r.kind, obj.GetName(), r.what, users)
		ctrl.LoggerFrom(ctx).V(1).Info(msg)
		r.tell(obj, msg)
	}
	return ctrl.Result{}, nil
}

// idleFor says how much longer an object being deleted that nothing
// uses must stay so before its finalizer goes (0: it may go now).
func (r *Reconciler) idleFor(uid types.UID) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	since, ok := r.idle[uid]
	if !ok {
		r.idle[uid] = now
		return settle
	}
	return since.Add(settle).Sub(now)
}

// tell says once per object why its deletion waits.
func (r *Reconciler) tell(obj client.Object, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told[obj.GetUID()] {
		return
	}
	r.told[obj.GetUID()] = true
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonInUse, "Delete", "%s", msg)
}

// forget drops what tell and idleFor kept of an object.
func (r *Reconciler) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.told, uid)
	delete(r.idle, uid)
}
