// Package inuse wires Kueue's resource-in-use finalizer on a worker: a
// ClusterQueue stays while workloads hold its quota, a ResourceFlavor
// while a ClusterQueue names it, a Topology while a ResourceFlavor does
// (pkg/controller/inuse).
package inuse

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/controller/inuse"
	"strata.dev/strata/pkg/queue"
)

// admissionQueue indexes Workloads by the ClusterQueue whose quota they
// hold (inuse.HoldsQuota): the users of a ClusterQueue being deleted.
const admissionQueue = "strata.dev/admission-cluster-queue"

// Setup registers the three reconcilers (ClusterQueues, ResourceFlavors,
// Topologies) and the Workload index the first reads.
func Setup(ctx context.Context, mgr ctrl.Manager, recorder events.EventRecorder) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &strata.Workload{}, admissionQueue, func(o client.Object) []string {
		if wl := o.(*strata.Workload); inuse.HoldsQuota(wl) {
			return []string{wl.Status.Admission.ClusterQueue}
		}
		return nil
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	queues := inuse.NewReconciler(c, recorder, "ClusterQueue", "admitted workload(s)",
		func() client.Object { return &strata.ClusterQueue{} },
		func(ctx context.Context, name string) ([]string, error) {
			var wls strata.WorkloadList
			if err := c.List(ctx, &wls, client.MatchingFields{admissionQueue: name}, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			ptrs := make([]*strata.Workload, len(wls.Items))
			for i := range wls.Items {
				ptrs[i] = &wls.Items[i]
			}
			return inuse.QueueUsers(name, ptrs), nil
		})
	if err := ctrl.NewControllerManagedBy(mgr).Named("inuse-clusterqueue").
		For(&strata.ClusterQueue{}, inuse.For()).
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
				return inuse.HoldsQuota(e.ObjectOld.(*strata.Workload)) && !inuse.HoldsQuota(e.ObjectNew.(*strata.Workload))
			},
			DeleteFunc: func(e event.DeleteEvent) bool {
				wl, ok := e.Object.(*strata.Workload)
				return ok && wl.Status.Admission != nil
			},
		})).
		Complete(queues); err != nil {
		return err
	}

	flavors := inuse.NewReconciler(c, recorder, "ResourceFlavor", "ClusterQueue(s)",
		func() client.Object { return &strata.ResourceFlavor{} },
		func(ctx context.Context, name string) ([]string, error) {
			var cqs strata.ClusterQueueList
			if err := c.List(ctx, &cqs, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			return inuse.FlavorUsers(name, cqs.Items), nil
		})
	if err := ctrl.NewControllerManagedBy(mgr).Named("inuse-resourceflavor").
		For(&strata.ResourceFlavor{}, inuse.For()).
		// A queue that stops naming a flavor (a spec change, or the
		// queue gone) can let it go: the flavors of the old object and
		// of the new are looked at.
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			var out []ctrl.Request
			for _, f := range queue.Flavors(o.(*strata.ClusterQueue)) {
				out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: f.Name}})
			}
			return out
		}), inuse.ChangeOrDelete(func(old, cur client.Object) bool {
			return !equality.Semantic.DeepEqual(queue.Flavors(old.(*strata.ClusterQueue)), queue.Flavors(cur.(*strata.ClusterQueue)))
		})).
		Complete(flavors); err != nil {
		return err
	}

	topologies := inuse.NewReconciler(c, recorder, "Topology", "ResourceFlavor(s)",
		func() client.Object { return &strata.Topology{} },
		func(ctx context.Context, name string) ([]string, error) {
			var rfs strata.ResourceFlavorList
			if err := c.List(ctx, &rfs, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			return inuse.TopologyUsers(name, rfs.Items), nil
		})
	return ctrl.NewControllerManagedBy(mgr).Named("inuse-topology").
		For(&strata.Topology{}, inuse.For()).
		Watches(&strata.ResourceFlavor{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if t := o.(*strata.ResourceFlavor).Spec.TopologyName; t != nil {
				return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: *t}}}
			}
			return nil
		}), inuse.ChangeOrDelete(func(old, cur client.Object) bool {
			return !equality.Semantic.DeepEqual(old.(*strata.ResourceFlavor).Spec.TopologyName, cur.(*strata.ResourceFlavor).Spec.TopologyName)
		})).
		Complete(topologies)
}
