package clusterqueue

import (
	"context"
	"slices"

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
	"strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/queue"
)

// Holds says whether a hub Workload holds its ClusterQueue's fleet quota,
// as the queue's status counts it: dispatched (placed on a worker, or
// admitted there) or reserved while the queue's admission checks decide,
// and not finished.
func Holds(wl *strata.Workload) bool {
	s := contribution(wl)
	return s.flavor != "" || s.reserved
}

// admissionQueue indexes hub Workloads that hold quota (Holds) by the
// ClusterQueue of their admission: the queue they stay charged to
// whatever their LocalQueue points at later.
const admissionQueue = "strata.dev/admission-cluster-queue"

// chargedTo are the ClusterQueues a hub Workload may hold quota of: its
// admission's, and its LocalQueue's (lq: its ClusterQueue, "" when the
// LocalQueue is missing), which it holds while placed without an
// admission.
func chargedTo(wl *strata.Workload, lq string) []string {
	var out []string
	if a := wl.Status.Admission; a != nil && a.ClusterQueue != "" {
		out = append(out, a.ClusterQueue)
	}
	if lq != "" && !slices.Contains(out, lq) {
		out = append(out, lq)
	}
	return out
}

// SetupInUse keeps a hub ClusterQueue being deleted (Kueue's
// resource-in-use finalizer, as a MultiKueue manager's Kueue does) until
// no Workload holds its quota: admitted through it, or placed from one of
// its LocalQueues and not admitted yet.
func SetupInUse(ctx context.Context, mgr ctrl.Manager, recorder events.EventRecorder, workloads *index.QueueWorkloads) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &strata.Workload{}, admissionQueue, func(o client.Object) []string {
		if wl := o.(*strata.Workload); Holds(wl) && wl.Status.Admission != nil && wl.Status.Admission.ClusterQueue != "" {
			return []string{wl.Status.Admission.ClusterQueue}
		}
		return nil
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	users := func(ctx context.Context, name string) ([]string, error) {
		var admitted strata.WorkloadList
		if err := c.List(ctx, &admitted, client.MatchingFields{admissionQueue: name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []string
		for i := range admitted.Items {
			out = append(out, admitted.Items[i].Namespace+"/"+admitted.Items[i].Name)
		}
		var lqs strata.LocalQueueList
		if err := c.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for i := range lqs.Items {
			wls, err := workloads.List(ctx, client.ObjectKeyFromObject(&lqs.Items[i]))
			if err != nil {
				return nil, err
			}
			for _, wl := range wls {
				if Holds(wl) && (wl.Status.Admission == nil || wl.Status.Admission.ClusterQueue == "") {
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
			wl := o.(*strata.Workload)
			lq := ""
			var l strata.LocalQueue
			if err := c.Get(ctx, queue.Key(wl), &l); err == nil {
				lq = l.Spec.ClusterQueue
			}
			var out []ctrl.Request
			for _, q := range chargedTo(wl, lq) {
				out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: q}})
			}
			return out
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
		// A LocalQueue deleted or pointed elsewhere no longer makes its
		// placed Workloads the old queue's.
		Watches(&strata.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: o.(*strata.LocalQueue).Spec.ClusterQueue}}}
		}), inuse.ChangeOrDelete(func(old, cur client.Object) bool {
			return old.(*strata.LocalQueue).Spec.ClusterQueue != cur.(*strata.LocalQueue).Spec.ClusterQueue
		})).
		Complete(r)
}
