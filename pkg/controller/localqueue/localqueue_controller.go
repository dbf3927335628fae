// Package localqueue keeps the status of LocalQueues: how many of their
// workloads wait and how many are admitted, whether their ClusterQueue
// exists, and, under admission fair sharing, the usage they consumed.
package localqueue

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/controller/throttle"
	"strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
)

// statusInterval bounds the status writes of one LocalQueue, which would
// otherwise follow every admission of its workloads.
const statusInterval = time.Second

// Reconciler writes LocalQueue status.
type Reconciler struct {
	client    client.Client
	workloads *index.QueueWorkloads
	written   *throttle.Throttle[types.NamespacedName]
	clock     clock.Clock
	afs       queue.AdmissionFairSharing
	// gauges and lifecycle, when set, are the LocalQueue metrics
	// (metrics.localQueueMetrics).
	gauges    *metrics.LocalQueueGauges
	lifecycle *metrics.LocalQueueLifecycle
}

// NewReconciler returns a Reconciler that reads each queue's Workloads
// from workloads.
func NewReconciler(c client.Client, workloads *index.QueueWorkloads, clk clock.Clock) *Reconciler {
	return &Reconciler{client: c, workloads: workloads, written: throttle.New[types.NamespacedName](clk, statusInterval), clock: clk}
}

// WithAdmissionFairSharing keeps each LocalQueue's consumed usage in its
// status.fairSharing, sampled every afs.Interval (admission fair sharing
// on); off, a LocalQueue's status.fairSharing is removed.
func (r *Reconciler) WithAdmissionFairSharing(afs queue.AdmissionFairSharing) *Reconciler {
	r.afs = afs
	return r
}

// WithMetrics records each LocalQueue's gauges in g as its status is
// computed, and forgets them and its lifecycle metrics in l once it is
// deleted (metrics.localQueueMetrics).
func (r *Reconciler) WithMetrics(g *metrics.LocalQueueGauges, l *metrics.LocalQueueLifecycle) *Reconciler {
	r.gauges, r.lifecycle = g, l
	return r
}

// SetupWithManager registers the reconciler: a LocalQueue's creation or
// spec change, its ClusterQueue's creation, deletion (marked or done) or stopPolicy, and a change of
// what counts of its workloads (pending, admitted, finished, or another
// queue).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("localqueue").
		For(&strata.LocalQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.localQueuesOf), builder.WithPredicates(predicate.Funcs{
			// Its stopPolicy stops the LocalQueues too (their Active
			// condition); the gauges also show whether it can admit and
			// how it orders its workloads.
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*strata.ClusterQueue), e.ObjectNew.(*strata.ClusterQueue)
				if !equality.Semantic.DeepEqual(old.Spec.StopPolicy, cur.Spec.StopPolicy) || old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero() {
					return true
				}
				return r.gauges != nil && (old.Spec.QueueingStrategy != cur.Spec.QueueingStrategy || queueActive(old) != queueActive(cur))
			},
		})).
		Watches(&strata.Workload{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: queue.Key(o.(*strata.Workload))}}
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.(*strata.Workload), e.ObjectNew.(*strata.Workload)
			if old.Spec.QueueName != cur.Spec.QueueName || counts(old) != counts(cur) {
				return true
			}
			// The gauges also show why a workload waits and what an
			// admission holds (an elastic one resized in place).
			return r.gauges != nil && (queue.PendingStatus(old, false, true) != queue.PendingStatus(cur, false, true) ||
				!equality.Semantic.DeepEqual(old.Status.Admission, cur.Status.Admission))
		}})).
		Complete(r)
}

// counts are one workload's contribution to its queue's counts.
func counts(wl *strata.Workload) queue.Counts {
	var c queue.Counts
	c.Count(wl)
	return c
}

// queueActive says whether a ClusterQueue (nil: missing) may admit, as
// its Active condition says (none written yet: it may).
func queueActive(cq *strata.ClusterQueue) bool {
	if cq == nil {
		return false
	}
	c := meta.FindStatusCondition(cq.Status.Conditions, "Active")
	return c == nil || c.Status != metav1.ConditionFalse
}

// gaugeState is what the LocalQueue gauges show of a queue whose status
// is st and whose workloads are wls (strict: its ClusterQueue is
// StrictFIFO; active: the LocalQueue and its ClusterQueue may admit):
// pending workloads by queue.PendingStatus, and per flavor what those
// holding quota reserve and the admitted ones use (cpu in cores, memory
// in bytes), as queue.Counts counts them.
func gaugeState(st *strata.LocalQueueStatus, wls []*strata.Workload, strict, active bool) metrics.LocalQueueState {
	out := metrics.LocalQueueState{Pending: map[string]int{}, Status: st,
		Reservation: map[string]map[string]float64{}, Usage: map[string]map[string]float64{}}
	add := func(to map[string]map[string]float64, psas []strata.PodSetAssignment) {
		for _, psa := range psas {
			if to[psa.Flavor] == nil {
				to[psa.Flavor] = map[string]float64{}
			}
			for r, q := range psa.ResourceUsage {
				to[psa.Flavor][string(r)] += q.AsApproximateFloat64()
			}
		}
	}
	for _, wl := range wls {
		c := counts(wl)
		if c.Pending > 0 {
			out.Pending[queue.PendingStatus(wl, strict, active)]++
		}
		if c.Reserving > 0 {
			add(out.Reservation, wl.Status.Admission.PodSetAssignments)
		}
		if c.Admitted > 0 {
			add(out.Usage, wl.Status.Admission.PodSetAssignments)
		}
	}
	return out
}

// localQueuesOf returns the LocalQueues that point at a ClusterQueue.
func (r *Reconciler) localQueuesOf(ctx context.Context, o client.Object) []ctrl.Request {
	var lqs strata.LocalQueueList
	if err := r.client.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the LocalQueues of a ClusterQueue", "clusterQueue", o.GetName())
		return nil
	}
	out := make([]ctrl.Request, 0, len(lqs.Items))
	for _, lq := range lqs.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&lq)})
	}
	return out
}

// Reconcile writes a LocalQueue's status when it changed, at most once per
// statusInterval.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lq strata.LocalQueue
	if err := r.client.Get(ctx, req.NamespacedName, &lq); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
			if r.gauges != nil {
				r.gauges.Forget(req.NamespacedName)
				r.lifecycle.Forget(req.NamespacedName)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wait := r.written.Wait(req.NamespacedName); wait > 0 {
		// Write the numbers as they are then.
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	wls, err := r.workloads.List(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	var c queue.Counts
	for _, wl := range wls {
		c.Count(wl)
	}
	cq := &strata.ClusterQueue{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: lq.Spec.ClusterQueue}, cq); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		cq = nil
	}
	st := queue.Status(&lq.Status, &lq, cq, c)
	var res ctrl.Result
	st.FairSharing = nil
	if r.afs.On() {
		st.FairSharing, res.RequeueAfter = r.afs.NextFairSharingStatus(lq.Status.FairSharing, queue.CurrentUsage(wls), r.clock.Now())
	}
	if r.gauges != nil {
		active := meta.IsStatusConditionTrue(st.Conditions, strata.LocalQueueActive) && queueActive(cq)
		r.gauges.Record(req.NamespacedName, gaugeState(&st, wls, queue.StrictFIFO(cq), active))
	}
	if equality.Semantic.DeepEqual(st, lq.Status) {
		return res, nil
	}
	lq.Status = st
	if err := r.client.Status().Update(ctx, &lq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.written.Wrote(req.NamespacedName)
	return res, nil
}
