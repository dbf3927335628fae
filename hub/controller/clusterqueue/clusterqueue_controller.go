// Package clusterqueue keeps the status of the hub's ClusterQueues: how
// many of their Workloads wait and how many are admitted on a worker, and
// what the dispatched ones use per flavor, as `kubectl get clusterqueues`
// shows on an agent's cluster.
package clusterqueue

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/controller/throttle"
	"strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
)

// statusInterval bounds the status writes of one ClusterQueue, which would
// otherwise follow every dispatch of a burst.
const statusInterval = time.Second

// Reconciler writes the hub's ClusterQueue status.
type Reconciler struct {
	client    client.Client
	workloads *index.QueueWorkloads
	written   *throttle.Throttle[string]
	// fair: the hub's fairSharing is on; each queue's status carries its
	// weighted share.
	fair bool
}

// NewReconciler returns a Reconciler that reads each LocalQueue's
// Workloads from workloads.
func NewReconciler(c client.Client, workloads *index.QueueWorkloads, clk clock.Clock) *Reconciler {
	return &Reconciler{client: c, workloads: workloads, written: throttle.New[string](clk, statusInterval)}
}

// WithFairSharing writes each queue's weighted share in its
// status.fairSharing (the hub's fairSharing on), as the agent does.
func (r *Reconciler) WithFairSharing(on bool) *Reconciler {
	r.fair = on
	return r
}

// SetupWithManager registers the reconciler: a ClusterQueue's creation or
// spec change, a LocalQueue pointing at it, and a change of what one of
// its Workloads counts for (pending, admitted, finished, dispatched
// flavor, or another queue).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr)
	// CRDs older than Cohorts (helm upgrade does not update them): no
	// watch; cohorts are flat.
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: strata.GroupVersion.Group, Kind: "Cohort"}, strata.GroupVersion.Version); err == nil {
		b = b.Watches(&strata.Cohort{}, handler.EnqueueRequestsFromMapFunc(r.cohortPeers))
	}
	return b.
		Named("clusterqueue").
		For(&strata.ClusterQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&strata.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: o.(*strata.LocalQueue).Spec.ClusterQueue}}}
		})).
		Watches(&strata.Workload{}, handler.EnqueueRequestsFromMapFunc(r.clusterQueueOf), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*strata.Workload), e.ObjectNew.(*strata.Workload)
				return old.Spec.QueueName != cur.Spec.QueueName || contribution(old) != contribution(cur)
			},
		})).
		// What a queue lends depends on what the others of its cohort tree
		// use: a change of one's usage brings the others (a change of a
		// Cohort, all of them: above).
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.cohortPeers), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*strata.ClusterQueue), e.ObjectNew.(*strata.ClusterQueue)
				return cur.Spec.Cohort != "" && !equality.Semantic.DeepEqual(old.Status.FlavorsUsage, cur.Status.FlavorsUsage)
			},
		})).
		Complete(r)
}

// cohortPeers maps a ClusterQueue, or a Cohort, to the other queues that
// have a cohort (those of its tree among them: the trees are not worth
// telling apart here).
func (r *Reconciler) cohortPeers(ctx context.Context, o client.Object) []ctrl.Request {
	cq, isQueue := o.(*strata.ClusterQueue)
	if isQueue && cq.Spec.Cohort == "" {
		return nil
	}
	var list strata.ClusterQueueList
	if err := r.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.Cohort != "" && (!isQueue || p.Name != cq.Name) {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
	}
	return out
}

// share is what one Workload adds to its ClusterQueue's status.
type share struct {
	counts queue.Counts
	flavor string // dispatched on, "" when not dispatched
	// reserved: its quota is reserved in the queue while the queue's
	// admission checks decide (dispatch.ReservedAtHub).
	reserved bool
}

func contribution(wl *strata.Workload) share {
	var s share
	s.counts.Count(wl)
	if _, flavor, _, ok := dispatch.Placed(wl); ok && !finished(wl) {
		s.flavor = flavor
	}
	s.reserved = dispatch.ReservedAtHub(wl) && !finished(wl)
	return s
}

func finished(wl *strata.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)
}

// clusterQueueOf maps a Workload to the ClusterQueue of its LocalQueue.
func (r *Reconciler) clusterQueueOf(ctx context.Context, o client.Object) []ctrl.Request {
	return clusterQueueOf(ctx, r.client, o)
}

// clusterQueueOf maps a Workload to the ClusterQueue of its LocalQueue,
// read with c.
func clusterQueueOf(ctx context.Context, c client.Reader, o client.Object) []ctrl.Request {
	var lq strata.LocalQueue
	if err := c.Get(ctx, queue.Key(o.(*strata.Workload)), &lq); err != nil {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: lq.Spec.ClusterQueue}}}
}

// Reconcile writes a ClusterQueue's status when it changed, at most once
// per statusInterval.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cq strata.ClusterQueue
	if err := r.client.Get(ctx, req.NamespacedName, &cq); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.Name)
			metrics.HubQueues.Forget(req.Name)
			metrics.HubLifecycle.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wait := r.written.Wait(cq.Name); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil // write the numbers as they are then
	}
	var lqs strata.LocalQueueList
	if err := r.client.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: cq.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	var wls []*strata.Workload
	for i := range lqs.Items {
		list, err := r.workloads.List(ctx, client.ObjectKeyFromObject(&lqs.Items[i]))
		if err != nil {
			return ctrl.Result{}, err
		}
		wls = append(wls, list...)
	}
	var peers []*strata.ClusterQueue
	var cohorts []*strata.Cohort
	if cq.Spec.Cohort != "" {
		// The queues of every tree: those of other trees change nothing.
		var list strata.ClusterQueueList
		if err := r.client.List(ctx, &list); err != nil {
			return ctrl.Result{}, err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Name != cq.Name && p.Spec.Cohort != "" {
				peers = append(peers, p)
			}
		}
		var cl strata.CohortList
		if err := r.client.List(ctx, &cl); err != nil && !meta.IsNoMatchError(err) {
			return ctrl.Result{}, err // without the Cohort CRD, cohorts are flat
		}
		for i := range cl.Items {
			cohorts = append(cohorts, &cl.Items[i])
		}
	}
	st := statusInTree(&cq, wls, cohorts, r.fair, peers...)
	metrics.HubQueues.Record(&cq, &st, queue.Flavors(&cq))
	if equality.Semantic.DeepEqual(st, cq.Status) {
		return ctrl.Result{}, nil
	}
	cq.Status = st
	if err := r.client.Status().Update(ctx, &cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.written.Wrote(cq.Name)
	return ctrl.Result{}, nil
}

// Status is a hub ClusterQueue's status from the Workloads of its
// LocalQueues: pending (not admitted on a worker yet), admitted (on a
// worker, unfinished), the requests of the dispatched ones per flavor in
// the queue's flavor order, what of them it borrows and lends within its
// cohort (from the usage its peers' status shows), and Active (the hub
// dispatches from every ClusterQueue; only an invalid clusterSelector
// stops it).
func Status(cq *strata.ClusterQueue, wls []*strata.Workload, peers ...*strata.ClusterQueue) strata.ClusterQueueStatus {
	return StatusInTree(cq, wls, nil, peers...)
}

// StatusInTree is Status with the Cohort objects that make the cohorts
// trees.
func StatusInTree(cq *strata.ClusterQueue, wls []*strata.Workload, cohorts []*strata.Cohort, peers ...*strata.ClusterQueue) strata.ClusterQueueStatus {
	return statusInTree(cq, wls, cohorts, false, peers...)
}

// statusInTree is StatusInTree, with the queue's weighted share (Kueue's
// status.fairSharing) when fair.
func statusInTree(cq *strata.ClusterQueue, wls []*strata.Workload, cohorts []*strata.Cohort, fair bool, peers ...*strata.ClusterQueue) strata.ClusterQueueStatus {
	st := *cq.Status.DeepCopy()
	var c queue.Counts
	usage := map[string]corev1.ResourceList{}
	holding := 0
	for _, wl := range wls {
		if Holds(wl) {
			holding++ // deleted too, while its copy goes
		}
		if !wl.DeletionTimestamp.IsZero() {
			continue
		}
		s := contribution(wl)
		c.Pending, c.Admitted, c.Reserving = c.Pending+s.counts.Pending, c.Admitted+s.counts.Admitted, c.Reserving+s.counts.Reserving
		if s.reserved {
			for f, rl := range dispatch.ReservedUsage(wl) {
				queue.AddRequests(usage, f, rl)
			}
		}
		if s.flavor != "" {
			// As the dispatcher charges it: the pods it is placed or
			// admitted with, less its finished ones, on each pod set's
			// flavor.
			for f, rl := range queue.GrantedUsage(wl, s.flavor) {
				queue.AddRequests(usage, f, rl)
			}
		}
	}
	st.PendingWorkloads, st.AdmittedWorkloads, st.ReservingWorkloads = c.Pending, c.Admitted, c.Reserving
	st.FlavorsUsage = nil
	for _, fq := range queue.Flavors(cq) {
		if u := queue.StatusUsage(cq, usage[fq.Name]); len(u) > 0 {
			st.FlavorsUsage = append(st.FlavorsUsage, strata.FlavorUsage{Name: fq.Name, Resources: u})
		}
	}
	books := queue.NewBooks(append([]*strata.ClusterQueue{cq}, peers...), cohorts...)
	for f, rl := range usage {
		books.Charge(cq.Name, f, rl, 1)
	}
	for _, p := range peers {
		for _, fu := range p.Status.FlavorsUsage {
			books.Charge(p.Name, fu.Name, fu.Resources, 1)
		}
	}
	st.FlavorsReservation = books.Reservation(cq)
	st.FairSharing = nil
	if fair {
		st.FairSharing = &strata.FairSharingStatus{WeightedShare: books.Share(cq.Name).Rounded()}
	}
	active := metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "dispatches to the workers its clusterSelector takes"}
	if cq.Spec.ClusterSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(cq.Spec.ClusterSelector); err != nil {
			active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: "InvalidClusterSelector", Message: err.Error()}
		}
	}
	if active.Status == metav1.ConditionTrue && cq.DeletionTimestamp != nil {
		// Kept by the in-use finalizer (SetupInUse) while what it
		// dispatched runs: it dispatches nothing more.
		active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueTerminating,
			Message: "being deleted: dispatches no workloads"}
		if holding > 0 {
			active.Message = fmt.Sprintf("being deleted: dispatches no workloads, and goes once its %d dispatched workload(s) finish", holding)
		}
	}
	if active.Status == metav1.ConditionTrue && strata.Stopped(cq.Spec.StopPolicy) {
		active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueStopped,
			Message: fmt.Sprintf("stopped (stopPolicy %s): dispatches no workloads until the policy is None", *cq.Spec.StopPolicy)}
	}
	active.ObservedGeneration = cq.Generation
	meta.SetStatusCondition(&st.Conditions, active)
	return st
}
