package clusterqueue

import (
	"context"
	"slices"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/controller/inuse"
	"strata.dev/strata/pkg/index"
)

// Holds says whether a hub Workload holds its ClusterQueue's fleet quota,
// as the queue's status counts it: dispatched (placed on a worker, or
// admitted there) or reserved while the queue's admission checks decide,
// and not finished.
func Holds(wl *strata.Workload) bool {
	s := contribution(wl)
	return s.flavor != "" || s.reserved
}

// SetupInUse keeps a hub ClusterQueue being deleted (Kueue's
// resource-in-use finalizer, as a MultiKueue manager's Kueue does) until
// no Workload of its LocalQueues holds its quota.
func SetupInUse(mgr ctrl.Manager, recorder events.EventRecorder, workloads *index.QueueWorkloads) error {
	c := mgr.GetClient()
	users := func(ctx context.Context, name string) ([]string, error) {
		var lqs strata.LocalQueueList
		if err := c.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []string
		for i := range lqs.Items {
			wls, err := workloads.List(ctx, client.ObjectKeyFromObject(&lqs.Items[i]))
			if err != nil {
				return nil, err
			}
			for _, wl := range wls {
				if Holds(wl) {
					out = append(out, wl.Namespace+"/"+wl.Name)
				}
			}
		}
		slices.Sort(out)
		return out, nil
	}
	r := inuse.NewReconciler(c, recorder, "ClusterQueue", "dispatched workload(s)",
		func() client.Object { return &strata.ClusterQueue{} }, users)
	return ctrl.NewControllerManagedBy(mgr).Named("inuse-clusterqueue").
		For(&strata.ClusterQueue{}, inuse.For()).
		Watches(&strata.Workload{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			return clusterQueueOf(ctx, c, o)
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return Holds(e.ObjectOld.(*strata.Workload)) && !Holds(e.ObjectNew.(*strata.Workload))
			},
			DeleteFunc: func(e event.DeleteEvent) bool {
				wl, ok := e.Object.(*strata.Workload)
				return ok && Holds(wl)
			},
		})).
		Complete(r)
}
