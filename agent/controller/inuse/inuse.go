package inuse

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

// admissionQueue indexes Workloads by the ClusterQueue whose quota they
// hold (HoldsQuota): the users of a ClusterQueue being deleted.
const admissionQueue = "strata.dev/admission-cluster-queue"

// ReasonInUse is the reason of the event that says why a deletion waits.
const ReasonInUse = "InUse"

// reconciler keeps the finalizer of one kind.
type reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	kind     string
	// what users are, in the event's words.
	what   string
	newObj func() client.Object
	users  func(ctx context.Context, name string) ([]string, error)

	mu sync.Mutex
	// told are the objects being deleted whose wait an event announced:
	// one event each (a queue of a thousand running workloads would
	// otherwise get one per workload that finishes).
	told map[types.UID]bool
}

// tell says once per object why its deletion waits.
func (r *reconciler) tell(obj client.Object, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told[obj.GetUID()] {
		return
	}
	if r.told == nil {
		r.told = map[types.UID]bool{}
	}
	r.told[obj.GetUID()] = true
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonInUse, "Delete", "%s", msg)
}

// forget drops what tell kept of an object.
func (r *reconciler) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.told, uid)
}

// Setup registers the three reconcilers (ClusterQueues, ResourceFlavors,
// Topologies) and the Workload index the first reads.
func Setup(ctx context.Context, mgr ctrl.Manager, recorder events.EventRecorder) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &strata.Workload{}, admissionQueue, func(o client.Object) []string {
		if wl := o.(*strata.Workload); HoldsQuota(wl) {
			return []string{wl.Status.Admission.ClusterQueue}
		}
		return nil
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	queues := &reconciler{client: c, recorder: recorder, kind: "ClusterQueue", what: "admitted workload(s)",
		newObj: func() client.Object { return &strata.ClusterQueue{} },
		users: func(ctx context.Context, name string) ([]string, error) {
			var wls strata.WorkloadList
			if err := c.List(ctx, &wls, client.MatchingFields{admissionQueue: name}, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			ptrs := make([]*strata.Workload, len(wls.Items))
			for i := range wls.Items {
				ptrs[i] = &wls.Items[i]
			}
			return QueueUsers(name, ptrs), nil
		}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("inuse-clusterqueue").
		For(&strata.ClusterQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicate.Funcs{
			// Its own deletion, once it is gone, needs nothing.
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		// Only a workload that stops holding a queue's quota can let a
		// queue being deleted go.
		Watches(&strata.Workload{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if a := o.(*strata.Workload).Status.Admission; a != nil {
				return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: a.ClusterQueue}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return HoldsQuota(e.ObjectOld.(*strata.Workload)) && !HoldsQuota(e.ObjectNew.(*strata.Workload))
			},
			DeleteFunc: func(e event.DeleteEvent) bool {
				wl, ok := e.Object.(*strata.Workload)
				return ok && wl.Status.Admission != nil
			},
		})).
		Complete(queues); err != nil {
		return err
	}

	flavors := &reconciler{client: c, recorder: recorder, kind: "ResourceFlavor", what: "ClusterQueue(s)",
		newObj: func() client.Object { return &strata.ResourceFlavor{} },
		users: func(ctx context.Context, name string) ([]string, error) {
			var cqs strata.ClusterQueueList
			if err := c.List(ctx, &cqs, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			return FlavorUsers(name, cqs.Items), nil
		}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("inuse-resourceflavor").
		For(&strata.ResourceFlavor{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		// A queue that stops naming a flavor (a spec change, or the
		// queue gone) can let it go: the flavors of the old object and
		// of the new are looked at.
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			var out []ctrl.Request
			for _, f := range queue.Flavors(o.(*strata.ClusterQueue)) {
				out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: f.Name}})
			}
			return out
		}), builder.WithPredicates(specChangeOrDelete(func(old, cur client.Object) bool {
			return !equality.Semantic.DeepEqual(queue.Flavors(old.(*strata.ClusterQueue)), queue.Flavors(cur.(*strata.ClusterQueue)))
		}))).
		Complete(flavors); err != nil {
		return err
	}

	topologies := &reconciler{client: c, recorder: recorder, kind: "Topology", what: "ResourceFlavor(s)",
		newObj: func() client.Object { return &strata.Topology{} },
		users: func(ctx context.Context, name string) ([]string, error) {
			var rfs strata.ResourceFlavorList
			if err := c.List(ctx, &rfs, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			return TopologyUsers(name, rfs.Items), nil
		}}
	return ctrl.NewControllerManagedBy(mgr).Named("inuse-topology").
		For(&strata.Topology{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&strata.ResourceFlavor{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if t := o.(*strata.ResourceFlavor).Spec.TopologyName; t != nil {
				return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: *t}}}
			}
			return nil
		}), builder.WithPredicates(specChangeOrDelete(func(old, cur client.Object) bool {
			return !equality.Semantic.DeepEqual(old.(*strata.ResourceFlavor).Spec.TopologyName, cur.(*strata.ResourceFlavor).Spec.TopologyName)
		}))).
		Complete(topologies)
}

// specChangeOrDelete passes the deletion of a user and the updates where
// changed says what it uses changed (an update's map function sees the
// old object and the new).
func specChangeOrDelete(changed func(old, cur client.Object) bool) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return changed(e.ObjectOld, e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	}
}

// Reconcile adds the finalizer to a live object and removes it from one
// being deleted once nothing uses it.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
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
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(obj, Finalizer)
		if err := r.client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.forget(obj.GetUID())
		ctrl.LoggerFrom(ctx).V(1).Info("Nothing uses it any more: its deletion completes", "kind", r.kind, "name", obj.GetName())
	case Wait:
		msg := WaitMessage(r.kind, obj.GetName(), r.what, users)
		ctrl.LoggerFrom(ctx).V(1).Info(msg)
		r.tell(obj, msg)
	}
	return ctrl.Result{}, nil
}
