// Package summarycopies keeps, in the hub cluster, a copy of each
// worker's capacity summaries with the hub's in-flight reservations on
// them (pkg/summarycopy decides what is written). With them a reader of
// the hub's API alone — kubectl strata dashboard, with no credential for
// any worker — sees every worker's topology and what the hub is about to
// put there.
package summarycopies

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/controller/throttle"
	"strata.dev/strata/pkg/summarycopy"
)

// Reconciler writes the copies of one worker's summaries per reconcile,
// keyed by the WorkerCluster's name.
type Reconciler struct {
	client client.Client
	fleet  *fleet.Fleet
	// written spaces out each worker's writes by the interval.
	written  *throttle.Throttle[string]
	interval time.Duration
	queue    atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// NewReconciler returns a reconciler that writes each worker's copies at
// most every interval.
func NewReconciler(c client.Client, f *fleet.Fleet, interval time.Duration, clk clock.Clock) *Reconciler {
	return &Reconciler{client: c, fleet: f, interval: interval, written: throttle.New[string](clk, interval)}
}

// +kubebuilder:rbac:groups=strata.dev,resources=capacitysummaries,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=capacitysummaries/status,verbs=get;update;patch

// SetupWithManager registers the reconciler: a WorkerCluster is looked at
// when it changes, when its worker's summaries change, and when a copy is
// changed or deleted by someone else.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.fleet.OnSummaries(func(worker string) {
		if q := r.queue.Load(); q != nil {
			(*q).Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: worker}})
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("summarycopies").
		// Creation and removal count, not its status: those are the
		// WorkerCluster controller's counts.
		For(&strata.WorkerCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&strata.CapacitySummary{}, handler.EnqueueRequestsFromMapFunc(copyToWorker)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.queue.Store(&q)
			return nil
		})).
		Complete(r)
}

// copyToWorker maps a hub copy to its WorkerCluster; summaries without the
// label are not the hub's.
func copyToWorker(_ context.Context, obj client.Object) []reconcile.Request {
	worker := obj.GetLabels()[strata.WorkerClusterLabel]
	if worker == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: worker}}}
}

// Reconcile brings a worker's copies in line with its summaries as the
// hub last read them. A worker the hub does not reach keeps its copies as
// they were: its WorkerCluster says it is not connected, and the copies'
// observedTime how old they are.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, req.NamespacedName, &wc); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	} else if err != nil {
		// Gone. (A WorkerCluster being drained keeps its copies up to
		// date until then.)
		r.written.Forget(req.Name)
		return ctrl.Result{}, r.deleteCopies(ctx, req.Name, nil)
	}
	summaries, connected, err := r.fleet.Summaries(ctx, wc.Name)
	if err != nil || !connected {
		// Its connection reports when it is back (OnSummaries).
		return ctrl.Result{}, err
	}
	if wait := r.written.Wait(wc.Name); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var list strata.CapacitySummaryList
	if err := r.client.List(ctx, &list, client.MatchingLabelsSelector{Selector: summarycopy.Of(wc.Name)}); err != nil {
		return ctrl.Result{}, err
	}
	existing := map[string]*strata.CapacitySummary{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	inFlight := r.fleet.InFlight(wc.Name)
	keep := map[string]bool{}
	wrote := false
	var errs []error
	for i := range summaries {
		s := &summaries[i]
		name := summarycopy.Name(wc.Name, s.Spec.Flavor)
		keep[name] = true
		want := summarycopy.Status(&s.Status, inFlight[s.Spec.Flavor])
		cs := existing[name]
		if cs == nil {
			cs = &strata.CapacitySummary{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{strata.WorkerClusterLabel: wc.Name}},
				Spec:       strata.CapacitySummarySpec{Flavor: s.Spec.Flavor},
			}
			// Deleting the WorkerCluster takes its copies along (where a
			// garbage collector runs; deleteCopies otherwise).
			if err := controllerutil.SetOwnerReference(&wc, cs, r.client.Scheme()); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.client.Create(ctx, cs); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, err)
				continue
			}
			wrote = true
		} else if cs.Spec.Flavor != s.Spec.Flavor || !summarycopy.Stale(&cs.Status, &want) {
			// Another flavor of the same name (a hashed name's collision)
			// is left alone; an unchanged copy too.
			continue
		}
		cs.Status = want
		if err := r.client.Status().Update(ctx, cs); err != nil {
			errs = append(errs, err)
			continue
		}
		wrote = true
	}
	if err := r.deleteCopies(ctx, wc.Name, keep); err != nil {
		errs = append(errs, err)
	}
	if wrote {
		r.written.Wrote(wc.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	// Reservations are made and end without a summary change (a
	// dispatch to a worker whose agent is slow or down, or undone): look
	// again every interval while the worker is connected.
	return ctrl.Result{RequeueAfter: r.interval}, nil
}

// deleteCopies deletes a worker's copies whose names keep does not hold.
func (r *Reconciler) deleteCopies(ctx context.Context, worker string, keep map[string]bool) error {
	var list strata.CapacitySummaryList
	if err := r.client.List(ctx, &list, client.MatchingLabelsSelector{Selector: summarycopy.Of(worker)}); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		cs := &list.Items[i]
		if keep[cs.Name] || cs.DeletionTimestamp != nil {
			continue
		}
		if err := r.client.Delete(ctx, cs, client.Preconditions{UID: &cs.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
