// Package copies follows each dispatched hub Workload's copy on its
// worker: it creates the copy the dispatcher decided on, brings the
// worker's admission and the copy's status back to the hub, undoes a
// dispatch the worker refuses or does not admit in time, takes the copy
// back when the hub's job is suspended or deleted, and cleans finished
// copies once their status is on the hub. It works on every kind of
// pkg/jobs through the adapter.
//
// A reconcile observes (observe.go), decides with the pure nextStep
// (decide.go) and acts, writing the hub Workload's status once. The
// actions live by what they answer: sending a copy (send.go), following
// it (follow.go), undoing a dispatch (undo.go), a worker that does not
// answer or leaves (unreachable.go); what this process remembers is one
// type (memory.go), and the conditions are pure setters (conditions.go).
package copies

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/admitevents"
	"strata.dev/strata/pkg/jobs"
)

// Reconciler follows the copies of hub Workloads.
type Reconciler struct {
	client client.Client
	// reader reads from the API server: the job a copy is made of, whole
	// (the informers' jobs are lean, see kinds.HubTransform).
	reader   client.Reader
	fleet    *fleet.Fleet
	recorder events.EventRecorder
	// admissions records the admissions on workers: an event per hub
	// Job, or a digest per hub ClusterQueue (events.admissions).
	admissions *admitevents.Recorder
	clock      clock.Clock
	cfg        *configv1beta1.HubConfiguration
	// served are the kinds whose hub objects are watched.
	served []jobs.Kind
	// signing is the key the hub signs its copies with.
	signing *signingKey

	memory *memory
	// journal holds the dispatches not in their Workloads' status yet
	// (nil: there is no journal, every dispatch is in the status).
	journal *dispatch.Journal
}

// WithJournal reads the dispatches j holds as if their Workloads' status
// had them, and writes them there (dispatch.Journal).
func (r *Reconciler) WithJournal(j *dispatch.Journal) *Reconciler {
	r.journal = j
	return r
}

// NewReconciler returns a Reconciler of the copies of hub jobs of the
// given kinds (those the hub serves).
func NewReconciler(c client.Client, reader client.Reader, f *fleet.Fleet, cfg *configv1beta1.HubConfiguration, served []jobs.Kind, recorder events.EventRecorder, clk clock.Clock) *Reconciler {
	return &Reconciler{client: c, reader: reader, fleet: f, cfg: cfg, served: served, recorder: recorder, clock: clk, memory: newMemory(),
		admissions: admitevents.New(recorder, cfg.Events.Admissions, "Dispatch"), signing: newSigningKey(c, reader, cfg.Namespace)}
}

// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// concurrentReconciles: most reconciles read caches only, but those that
// act wait for one API write each (creating a copy on a worker, recording
// an admission on the hub); with 8, a burst's copies waited in the queue
// behind them (BenchmarkHub: 0.6-0.8 s from dispatch to copy, 0.6-1.0 s
// from the worker's admission to the hub's, p50; with 32, 0.1 and 0.3 s).
const concurrentReconciles = 32

// SetupWithManager registers the reconciler: hub Workloads, their jobs
// of every served kind, and every change of a copy on a worker.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(r.admissions); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("copies").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentReconciles}).
		For(&strata.Workload{})
	for _, k := range r.served {
		b = b.Watches(k.NewObject(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: k.WorkloadName(o.GetName())}}}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		})))
	}
	// A WorkerCluster deleted (drained), given up or gone: the Workloads
	// dispatched there are looked at.
	b = b.Watches(&strata.WorkerCluster{}, handler.EnqueueRequestsFromMapFunc(r.dispatchedTo), builder.WithPredicates(predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
				e.ObjectOld.GetAnnotations()[strata.AbandonCopiesAnnotation] != e.ObjectNew.GetAnnotations()[strata.AbandonCopiesAnnotation]
		},
	}))
	return b.WatchesRawSource(source.Channel(r.copyEvents(), &handler.TypedEnqueueRequestForObject[*strata.Workload]{})).
		Complete(r)
}

// dispatchedTo maps a WorkerCluster to the hub Workloads dispatched there.
func (r *Reconciler) dispatchedTo(ctx context.Context, wc client.Object) []ctrl.Request {
	var wls strata.WorkloadList
	if err := r.client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Workloads dispatched to a WorkerCluster", "workercluster", wc.GetName())
		return nil
	}
	var reqs []ctrl.Request
	for i := range wls.Items {
		if cluster, _, _, ok := dispatch.Placed(&wls.Items[i]); ok && cluster == wc.GetName() {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&wls.Items[i])})
		}
	}
	for _, key := range r.journal.On(wc.GetName()) {
		reqs = append(reqs, ctrl.Request{NamespacedName: key})
	}
	return reqs
}

// copyEvents turns the fleet's copy events into generic events, and a new
// connection to a worker, or a change of its health, into one event per
// hub Workload dispatched there: what waited for the connection goes on
// at once.
func (r *Reconciler) copyEvents() <-chan event.TypedGenericEvent[*strata.Workload] {
	out := make(chan event.TypedGenericEvent[*strata.Workload], 1024)
	send := func(key types.NamespacedName) {
		out <- event.TypedGenericEvent[*strata.Workload]{Object: &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	}
	go func() {
		for key := range r.fleet.CopyEvents() {
			send(key)
		}
	}()
	placedOn := func(worker string) {
		go func() {
			var wls strata.WorkloadList
			if err := r.client.List(context.Background(), &wls, client.UnsafeDisableDeepCopy); err != nil {
				return // the periodic requeue of those waiting covers it
			}
			for i := range wls.Items {
				if cluster, _, _, ok := dispatch.Placed(&wls.Items[i]); ok && cluster == worker {
					send(client.ObjectKeyFromObject(&wls.Items[i]))
				}
			}
			for _, key := range r.journal.On(worker) {
				send(key)
			}
		}()
	}
	// A dispatch journalled, or read from the journal: its copy is sent.
	r.journal.OnJournalled(func(keys []types.NamespacedName) {
		go func() {
			for _, key := range keys {
				send(key)
			}
		}()
	})
	r.fleet.OnConnected(placedOn)
	// A worker that stops answering, or answers again: its dispatches are
	// looked at (fencing's replaceAfter counts from then).
	r.fleet.OnHealth(placedOn)
	return out
}

// Reconcile brings one hub Workload's copy in line with its record.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req.NamespacedName)
	if errors.Is(err, errCopyGoing) {
		// The copy's deletion waits for its pods; its informer event
		// brings the Workload back, this only bounds the wait.
		return ctrl.Result{RequeueAfter: copyGoingRetry}, nil
	}
	if apierrors.IsConflict(err) || errors.Is(err, errRenewedMeanwhile) || errors.Is(err, errCopyFinished) {
		// Acted on an outdated hub object: look again in a moment, with
		// the newer one (not an error worth a log line).
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

// reconcile observes, decides and acts, then writes the hub Workload's
// status once, and last what follows a landed write (events, metrics).
func (r *Reconciler) reconcile(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	// 1. Observe.
	o, err := r.observe(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if k, ok := r.memory.knownOf(key); ok && o.wl != nil && k.uid != o.wl.UID {
		// The Workload was replaced under its name (its job deleted and
		// created again) before this process saw it go: the earlier one's
		// copy is taken back first, or it would run on beside the new
		// one's.
		if err := r.forget(ctx, key); err != nil {
			return ctrl.Result{}, err
		}
	}
	if o.placed && o.job.kind != nil {
		// Remembered so that the copy of a Workload deleted meanwhile is
		// taken back.
		r.memory.track(key, known{uid: o.wl.UID, cluster: o.cluster, flavor: o.flavor, generation: o.gen, job: o.job})
	}
	// 2. Decide.
	st := nextStep(o, r.clock.Now())
	ctrl.LoggerFrom(ctx).V(4).Info("Next step", "action", st.action, "why", st.why)
	// 3. Act.
	s := &scope{observed: o}
	res, err := r.act(ctx, s, st)
	if err != nil && !errors.Is(err, errCopyGoing) {
		return ctrl.Result{}, err
	}
	// 4. Write the status, then what follows it. A dispatch only the
	// journal holds goes into the status with this write, or with one of
	// its own once it is PersistAfter old.
	if s.updated == nil && !o.journalled.IsZero() && o.wl != nil && st.action != actDeleteOrphan && st.action != actForget {
		if wait := dispatch.PersistAfter - r.clock.Since(o.journalled); wait > 0 {
			if res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = wait
			}
		} else {
			s.updated = o.wl.DeepCopy()
		}
	}
	if s.updated != nil {
		if werr := r.client.Status().Update(ctx, s.updated); werr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(werr)
		}
	}
	for _, fn := range s.after {
		if aerr := fn(ctx); aerr != nil {
			return ctrl.Result{}, aerr
		}
	}
	return res, err
}

// scope is one reconcile's work: what it observed, the hub Workload's
// status as the actions change it, and what is to follow its write.
type scope struct {
	*observed
	// updated is the hub Workload with its changed status; nil while
	// nothing changed it.
	updated *strata.Workload
	// after runs once the status write landed (or none was needed).
	after []func(context.Context) error
	// runningCopy is the Workload of the current dispatch on its worker
	// that may still run, as revokeStray last read it.
	runningCopy *strata.Workload
}

// change applies fn to the hub Workload's status, to be written at the
// end of the reconcile when fn says it changed it; it returns what fn
// returned. An unchanged status is not written.
func (s *scope) change(fn func(*strata.WorkloadStatus) bool) bool {
	if s.updated != nil {
		return fn(&s.updated.Status)
	}
	updated := s.wl.DeepCopy()
	if !fn(&updated.Status) {
		return false
	}
	s.updated = updated
	return true
}

// afterWrite runs fn once the status write landed.
func (s *scope) afterWrite(fn func(context.Context) error) {
	s.after = append(s.after, fn)
}

// act carries out st.
func (r *Reconciler) act(ctx context.Context, s *scope, st step) (ctrl.Result, error) {
	if st.noteSeen {
		r.memory.noteSeen(s.dispatch, r.clock.Now())
	}
	if st.notePending != nil {
		r.memory.notePending(s.dispatch, *st.notePending)
	}
	if st.mirror {
		r.fleet.ForgetHint(s.dispatch) // the copy exists: it has its hint
		mirror := func(ctx context.Context) error { return r.syncJobStatus(ctx, s.hubJob, s.copyJob) }
		switch {
		case st.action == actRecordAdmission:
			// After the Workload's status, and after what follows the
			// admission's write (its event, metric and memory), which a
			// failed mirror must not skip: whoever sees the hub's job run
			// or finish finds on its Workload where it ran.
			defer s.afterWrite(mirror)
		case st.release && !s.journalled.IsZero() && s.wl != nil:
			// Finished while its dispatch is only in the journal: the
			// dispatch goes into the status now, before the job says it
			// finished.
			if s.updated == nil {
				s.updated = s.wl.DeepCopy()
			}
			s.afterWrite(mirror)
		default:
			if err := mirror(ctx); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if st.release {
		r.fleet.Release(s.cluster, s.flavor, s.dispatch)
	}
	result := ctrl.Result{RequeueAfter: st.requeue}
	switch st.action {
	case actNone:
		return result, nil
	case actFail:
		return ctrl.Result{}, st.err
	case actForget:
		return ctrl.Result{}, r.forget(ctx, s.key)
	case actDeleteOrphan:
		ctrl.LoggerFrom(ctx).Info("Deleting a hub Workload whose Job is gone (orphaned); its copy goes with it", "workload", s.key)
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, s.wl, client.Preconditions{UID: &s.wl.UID}))
	case actUntrack:
		r.memory.untrack(s.key)
		if !s.wl.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, r.letGo(ctx, s.key, s.wl)
		}
		return ctrl.Result{}, nil
	case actTakeBack:
		return ctrl.Result{}, r.takeBack(ctx, s, st.outcome, st.record)
	case actRefuse:
		return ctrl.Result{}, r.refuse(ctx, s, st.outcome)
	case actConfirmThenRefuse:
		if res, decided, err := r.confirmLive(ctx, s); decided {
			return res, err
		}
		return ctrl.Result{}, r.refuse(ctx, s, st.outcome)
	case actTakeBackUnreached:
		return ctrl.Result{}, r.takeBackUnreached(ctx, s, st.outcome, st.record, st.revoke)
	case actAbandon:
		return ctrl.Result{}, r.abandon(ctx, s, st.outcome.reason, st.outcome.message)
	case actMarkUnreachable:
		s.change(func(ws *strata.WorkloadStatus) bool { return setUnreachable(ws, st.message) })
		return result, nil
	case actMarkReachable:
		s.change(clearUnreachable)
		return result, nil
	case actRemoveStale:
		return ctrl.Result{}, r.removeCopy(ctx, s.cluster, s.copyJob.Object(), true)
	case actRecordAdmission:
		// Its requeue: when a maximum execution time is up.
		if err := r.recordAdmission(ctx, s, s.copyWL); err != nil {
			return result, err
		}
		if st.scaleTo > 0 {
			return result, r.scaleCopy(ctx, s, st.scaleTo)
		}
		return result, nil
	case actCleanFinished:
		return r.cleanFinished(ctx, s, st)
	case actConfirmGone:
		return r.confirmGone(ctx, s)
	case actCreate:
		return r.createCopy(ctx, s)
	case actMarkWaiting:
		s.change(func(ws *strata.WorkloadStatus) bool {
			return setWaitingOnWorker(ws, s.cluster, s.flavor, s.copyWL, s.wl.Spec.MaximumExecutionTimeSeconds, r.clock.Now())
		})
		return result, nil
	}
	return ctrl.Result{}, fmt.Errorf("unknown action %q", st.action)
}
