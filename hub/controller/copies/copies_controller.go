// Package copies follows each dispatched hub Workload's copy on its
// worker: it creates the copy the dispatcher decided on, brings the
// worker's admission and the copy's status back to the hub, undoes a
// dispatch the worker refuses or does not admit in time, takes the copy
// back when the hub's job is suspended or deleted, and cleans finished
// copies once their status is on the hub. It works on every kind of
// pkg/jobs (Jobs, JobSets) through the adapter.
package copies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
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
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/workload"
)

// Reasons of a worker's Dispatching condition and of refusals the hub
// finds itself.
const (
	ReasonDispatching       = "Dispatching"
	ReasonNamespaceNotFound = fleet.ReasonNamespaceNotFound
	ReasonForbidden         = "Forbidden"
	ReasonNameTaken         = "NameTaken"
	// ReasonQuotaExceeded: a ResourceQuota of the worker refused the copy.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonAdmissionDenied: an admission webhook or policy of the worker
	// refused the copy.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonRefused: the worker's API server refused the copy otherwise
	// (a 4xx answer).
	ReasonRefused = "Refused"
	// ReasonNotCreated: the copy could not be created (the worker failed
	// or did not answer) within the admission timeout from the dispatch.
	ReasonNotCreated = "CopyNotCreated"
)

// createRefusal says whether an error creating a copy is the worker's
// refusal — for a reason to name, then the hub places the workload
// elsewhere — or a failure worth retrying (reason ""): the worker's
// server errors, throttling, timeouts, a connection that failed. Missing
// namespaces, taken names and invalid copies are handled before.
func createRefusal(err error) string {
	status, ok := err.(apierrors.APIStatus)
	if !ok || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) {
		return ""
	}
	msg := status.Status().Message
	switch code := status.Status().Code; {
	case code == 403 && strings.Contains(msg, "exceeded quota"):
		return ReasonQuotaExceeded
	case code == 403 && (strings.Contains(msg, "admission webhook") || strings.Contains(msg, "ValidatingAdmissionPolicy")):
		return ReasonAdmissionDenied
	case code == 403:
		return ReasonForbidden
	case code >= 400 && code < 500:
		return ReasonRefused
	}
	return ""
}

// conflictRetry is how soon a reconcile that met a newer object runs again.
const conflictRetry = 200 * time.Millisecond

// creationGrace is how long a copy the hub created may be missing from
// the worker's informer before the hub creates it again.
const creationGrace = 30 * time.Second

// Reconciler follows the copies of hub Workloads.
type Reconciler struct {
	client client.Client
	// reader reads from the API server: the job a copy is made of, whole
	// (the informers' jobs are lean, see kinds.HubTransform).
	reader   client.Reader
	fleet    *fleet.Fleet
	recorder events.EventRecorder
	clock    clock.Clock
	cfg      *configv1beta1.HubConfiguration
	// served are the kinds whose hub objects are watched.
	served []jobs.Kind

	mu sync.Mutex
	// known is the last dispatch seen per hub Workload, to take back the
	// copy of a Workload deleted meanwhile.
	known map[types.NamespacedName]known
	// created is when the hub created each dispatch's copy.
	created map[string]time.Time
	// seen is when this process first saw each dispatch's copy.
	seen map[string]time.Time
	// admissions are the dispatches whose admission this process wrote
	// and the cache does not show yet.
	admissions map[string]bool
	// undoing are the dispatches whose copy was taken back and whose
	// outcome is not recorded yet: a reconcile that meets one records it
	// again instead of creating the copy anew.
	undoing map[string]outcome
	// onboarded is, by "worker/namespace/queue", when this process last
	// made sure of a namespace and LocalQueue on a worker (onboard).
	onboarded map[string]time.Time
}

// outcome is the record a take-back is to write.
type outcome struct {
	result strata.PlacementResult
	// reason is the hub Workload's condition reason; cause the attempt's
	// (the worker's refusal reason, when there is one).
	reason, cause, message string
}

type known struct {
	uid             types.UID
	cluster, flavor string
	generation      int64
	job             ref
}

// ref names a hub Workload's job: its kind and key (the copy on the
// worker has the same).
type ref struct {
	kind jobs.Kind
	key  types.NamespacedName
}

func (j ref) String() string {
	return j.kind.GroupVersionKind().Kind + " " + j.key.String()
}

// NewReconciler returns a Reconciler of the copies of hub jobs of the
// given kinds (those the hub serves).
func NewReconciler(c client.Client, reader client.Reader, f *fleet.Fleet, cfg *configv1beta1.HubConfiguration, served []jobs.Kind, recorder events.EventRecorder, clk clock.Clock) *Reconciler {
	return &Reconciler{client: c, reader: reader, fleet: f, cfg: cfg, served: served, recorder: recorder, clock: clk, known: map[types.NamespacedName]known{},
		created: map[string]time.Time{}, seen: map[string]time.Time{}, admissions: map[string]bool{}, undoing: map[string]outcome{},
		onboarded: map[string]time.Time{}}
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
			if err := r.client.List(context.Background(), &wls); err != nil {
				return // the periodic requeue of those waiting covers it
			}
			for i := range wls.Items {
				if cluster, _, _, ok := dispatch.Placed(&wls.Items[i]); ok && cluster == worker {
					send(client.ObjectKeyFromObject(&wls.Items[i]))
				}
			}
		}()
	}
	r.fleet.OnConnected(placedOn)
	// A worker that stops answering, or answers again: its dispatches are
	// looked at (fencing's replaceAfter counts from then).
	r.fleet.OnHealth(placedOn)
	return out
}

// Reconcile brings one hub Workload's copy in line with its record.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if errors.Is(err, errCopyGoing) {
		// The copy's deletion waits for its pods; its informer event
		// brings the Workload back, this only bounds the wait.
		return ctrl.Result{RequeueAfter: copyGoingRetry}, nil
	}
	if apierrors.IsConflict(err) {
		// Acted on an outdated hub object: look again in a moment, with
		// the newer one (not an error worth a log line).
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl strata.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.forget(ctx, req.NamespacedName)
	}
	cluster, flavor, gen, placed := dispatch.Placed(&wl)
	owner := metav1.GetControllerOfNoCopy(&wl)
	if owner == nil && wl.DeletionTimestamp.IsZero() {
		// On the hub a Workload exists only for its Job: one without an
		// owner was orphaned (the Job deleted with --cascade=orphan). It
		// goes, and with it its copy and its quota charge; nothing else
		// would ever end them.
		ctrl.LoggerFrom(ctx).Info("Deleting a hub Workload whose Job is gone (orphaned); its copy goes with it", "workload", req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}))
	}
	kind := jobs.KindOf(kinds.Hub, owner)
	if !placed || kind == nil {
		r.mu.Lock()
		delete(r.known, req.NamespacedName)
		r.mu.Unlock()
		return ctrl.Result{}, nil
	}
	jobRef := ref{kind: kind, key: types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}}
	r.mu.Lock()
	r.known[req.NamespacedName] = known{uid: wl.UID, cluster: cluster, flavor: flavor, generation: gen, job: jobRef}
	r.mu.Unlock()
	key := dispatch.Key(wl.UID, gen)

	hubJob, err := dispatch.HubJob(ctx, r.client, &wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	kindName := kind.GroupVersionKind().Kind
	finished := meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)
	switch {
	case hubJob == nil || !wl.DeletionTimestamp.IsZero():
		// The job is gone: its Workload follows; the copy goes first.
		return ctrl.Result{}, r.takeBack(ctx, &wl, jobRef, outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended, message: "the " + kindName + " was deleted"}, false)
	case !finished && hubJob.Suspended():
		return ctrl.Result{}, r.takeBack(ctx, &wl, jobRef, outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended,
			message: "the " + kindName + " was suspended on the hub; it is dispatched again when resumed"}, true)
	}

	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, &wc); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	} else if err == nil && !wc.DeletionTimestamp.IsZero() && !finished {
		return r.draining(ctx, &wl, hubJob, jobRef, &wc)
	}
	if down := r.fleet.Down(cluster); down != "" {
		return r.unreachable(ctx, &wl, hubJob, jobRef, down, true)
	}
	copyJob, copyWL, err := r.fleet.Copy(ctx, cluster, kind, jobRef.key)
	if errors.Is(err, fleet.ErrKindNotServed) {
		return ctrl.Result{}, r.refuse(ctx, &wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, ReasonKindNotServed,
			fmt.Sprintf("%v; placing it again", err))
	}
	if errors.Is(err, fleet.ErrNotConnected) {
		if gone, gerr := r.workerGone(ctx, cluster); gerr != nil || gone {
			if gerr != nil {
				return ctrl.Result{}, gerr
			}
			return ctrl.Result{}, r.refuse(ctx, &wl, hubJob, jobRef, strata.PlacementUnreachable, dispatch.ReasonRejected, "WorkerClusterDeleted",
				fmt.Sprintf("WorkerCluster %s was deleted; its copy there, if any, is left to the worker's administrators; placing it again", cluster))
		}
		// The copy stays recorded; nothing is sent elsewhere while it may
		// run (until fencing says it cannot). The connection's return
		// brings the Workload back.
		return r.unreachable(ctx, &wl, hubJob, jobRef, err.Error(), false)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(wl.Status.Conditions, ConditionUnreachable) != nil {
		// The worker answers again; the write's event brings the rest.
		return ctrl.Result{}, r.reachable(ctx, &wl)
	}
	if copyJob != nil {
		if uid, g, _ := dispatch.CopyOf(copyJob.Object()); uid != wl.UID || g != gen {
			// A copy of an earlier dispatch, or of an earlier Workload of
			// this name: it and its pods go before this one is created.
			return ctrl.Result{}, r.removeCopy(ctx, cluster, copyJob.Object(), true)
		}
	}
	if finished && wl.Status.Admission == nil {
		// Finished on the worker before this hub recorded its admission (a
		// one-second copy, a hub that just restarted): the record says
		// where it ran, never that it still waits.
		if copyWL != nil && copyWL.Status.Admission != nil {
			return ctrl.Result{}, r.admitted(ctx, &wl, hubJob, copyWL)
		}
		if err := r.ranUnseen(ctx, &wl); err != nil {
			return ctrl.Result{}, err
		}
	}
	if finished {
		return r.cleanFinished(ctx, &wl, cluster, flavor, key, copyJob)
	}
	r.mu.Lock()
	o, undoing := r.undoing[key]
	r.mu.Unlock()
	if undoing {
		// Being taken back: its copy's pods are not gone yet, or the
		// record's write did not land.
		return ctrl.Result{}, r.takeBack(ctx, &wl, jobRef, o, true)
	}
	if copyJob != nil && !copyJob.Object().GetDeletionTimestamp().IsZero() {
		// Going (taken back by an earlier hub process, or deleted on the
		// worker): nothing more is decided until it and its pods are gone.
		return ctrl.Result{RequeueAfter: copyGoingRetry}, nil
	}
	if copyJob == nil {
		if wl.Status.Admission != nil {
			return r.vanished(ctx, &wl, hubJob, cluster, jobRef)
		}
		return r.create(ctx, &wl, hubJob, cluster, flavor, gen, key)
	}
	r.fleet.ForgetHint(key) // the copy exists: it has its hint
	if err := r.syncJobStatus(ctx, hubJob, copyJob); err != nil {
		return ctrl.Result{}, err
	}
	if done, _ := copyJob.Finished(); done {
		r.fleet.Release(cluster, flavor, key) // the worker released it
		if wl.Status.Admission == nil && copyWL != nil && copyWL.Status.Admission != nil {
			// Admitted and finished on the worker before this hub recorded
			// the admission (a one-second copy, a hub that just restarted):
			// the record says where it ran, not that it still waits.
			return ctrl.Result{}, r.admitted(ctx, &wl, hubJob, copyWL)
		}
		return ctrl.Result{}, nil
	}
	verdict, reason, message := dispatch.Judge(copyWL)
	switch verdict {
	case dispatch.Refused:
		return ctrl.Result{}, r.refuse(ctx, &wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, reason,
			fmt.Sprintf("the worker refused the copy (%s): %s; placing it again", reason, message))
	case dispatch.Admitted:
		r.mu.Lock()
		delete(r.created, key)
		delete(r.seen, key)
		r.mu.Unlock()
		return ctrl.Result{}, r.admitted(ctx, &wl, hubJob, copyWL)
	}
	// The worker has admissionTimeout from when the copy is there: from
	// the dispatch, or from when this hub process first saw the copy, if
	// later (a hub that restarted, or waited for the connection, does not
	// count that time against the worker).
	dispatched := dispatchTime(&wl)
	r.mu.Lock()
	seen, ok := r.seen[key]
	if !ok {
		seen = r.clock.Now()
		r.seen[key] = seen
	}
	r.mu.Unlock()
	if seen.After(dispatched) {
		dispatched = seen
	}
	wait := dispatched.Add(r.cfg.Dispatch.AdmissionTimeout.Duration).Sub(r.clock.Now())
	if wait <= 0 {
		if res, decided, err := r.confirmLive(ctx, &wl, hubJob, cluster, jobRef); decided {
			return res, err
		}
		return ctrl.Result{}, r.refuse(ctx, &wl, hubJob, jobRef, strata.PlacementTimedOut, dispatch.ReasonTimedOut, "AdmissionTimeout",
			fmt.Sprintf("the worker did not admit the copy within %s; placing it again", r.cfg.Dispatch.AdmissionTimeout.Duration))
	}
	// A worker whose agent says it cannot admit the copy now (no room as
	// its nodes are packed, its quota, workloads ahead of it) keeps it for
	// pendingTimeout; the hub then places it where it fits now.
	if since, message, pending := PendingSince(copyWL); pending {
		timeout := r.cfg.Dispatch.PendingTimeout.Duration
		left := since.Add(timeout).Sub(r.clock.Now())
		if left <= 0 {
			if res, decided, err := r.confirmLive(ctx, &wl, hubJob, cluster, jobRef); decided {
				return res, err
			}
			return ctrl.Result{}, r.refuse(ctx, &wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, ReasonPendingOnWorker,
				fmt.Sprintf("the worker has not been able to admit the copy for %s (%s); placing it where it fits now", timeout, message))
		}
		wait = min(wait, left)
	}
	return ctrl.Result{RequeueAfter: wait}, r.mirrorWait(ctx, &wl, copyWL)
}

// errCopyGoing says a copy being taken back still exists on its worker:
// its deletion waits for its pods (foreground), and its workload is placed
// elsewhere only once it is gone.
var errCopyGoing = errors.New("the copy is being deleted; waiting for its pods to be gone")

// copyGoingRetry bounds the wait for a going copy's deletion event.
const copyGoingRetry = 5 * time.Second

// ReasonWorkerClusterDeleted is the outcome of a dispatch whose
// WorkerCluster was deleted.
const ReasonWorkerClusterDeleted = "WorkerClusterDeleted"

// draining handles a dispatch to a WorkerCluster being deleted: its copy
// is taken back, and the workload placed elsewhere once the copy and its
// pods are gone; while the worker does not answer, as for any unreachable
// worker (with fencing, placed elsewhere after replaceAfter); at once when
// an administrator gave up the worker's copies.
func (r *Reconciler) draining(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, jobRef ref, wc *strata.WorkerCluster) (ctrl.Result, error) {
	if wc.Annotations[strata.AbandonCopiesAnnotation] == "true" {
		return ctrl.Result{}, r.abandonWith(ctx, wl, hubJob, jobRef, ReasonWorkerClusterDeleted, fmt.Sprintf(
			"WorkerCluster %s is being deleted and its copies were given up (%s=true); placing it again without knowing whether its copy there still runs",
			wc.Name, strata.AbandonCopiesAnnotation))
	}
	if down := r.fleet.Down(wc.Name); down != "" {
		return r.unreachable(ctx, wl, hubJob, jobRef, down, true)
	}
	if _, err := r.fleet.Client(wc.Name); err != nil {
		return r.unreachable(ctx, wl, hubJob, jobRef, err.Error(), false)
	}
	return ctrl.Result{}, r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementEvicted, dispatch.ReasonRejected, ReasonWorkerClusterDeleted,
		fmt.Sprintf("WorkerCluster %s is being deleted: its copy is taken back, and the workload placed elsewhere once the copy's pods are gone", wc.Name))
}

// connectGrace is how long a worker may take to connect before the
// Workloads dispatched there say it does not answer.
const connectGrace = 30 * time.Second

// ConditionUnreachable is a hub Workload's condition while the worker of
// its dispatch does not answer.
const ConditionUnreachable = "WorkerUnreachable"

// ReasonWorkerUnreachable is the outcome of a dispatch whose worker did not
// answer for fencing.replaceAfter.
const ReasonWorkerUnreachable = "WorkerUnreachable"

// unreachable handles a dispatch whose worker does not answer. Nothing is
// sent elsewhere while the copy may run: with fencing, until
// replaceAfter from the hub's last renewal of the worker's fencing Lease
// (its agent stopped the copy after fenceAfter); without, for as long as
// the worker is gone. The Workload says which.
func (r *Reconciler) unreachable(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, jobRef ref, why string, down bool) (ctrl.Result, error) {
	cluster, _, _, _ := dispatch.Placed(wl)
	if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil // its copy goes once the worker answers
	}
	if !down && r.clock.Since(r.fleet.LastRenewed(cluster)) < connectGrace {
		// Not connected yet (a hub that just started, a new credential):
		// nothing to say before the connection had its chance.
		return ctrl.Result{RequeueAfter: connectGrace}, nil
	}
	fc := r.cfg.Fencing
	if fc.Mode != configv1beta1.FencingEnabled {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.sayUnreachable(ctx, wl, fmt.Sprintf(
			"worker %s does not answer (%s); fencing is Disabled: the workload waits for it and is never placed elsewhere while its copy may run", cluster, why))
	}
	since := r.fleet.LastRenewed(cluster)
	at := since.Add(fc.ReplaceAfter.Duration)
	if wait := at.Sub(r.clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: min(wait, 30*time.Second)}, r.sayUnreachable(ctx, wl, fmt.Sprintf(
			"worker %s does not answer (%s); the hub last renewed its fencing Lease there at %s: its agent stops the copy %s after that, and the hub places the workload elsewhere at %s",
			cluster, why, since.UTC().Format(time.RFC3339), fc.FenceAfter.Duration, at.UTC().Format(time.RFC3339)))
	}
	return ctrl.Result{}, r.abandon(ctx, wl, hubJob, jobRef, fmt.Sprintf(
		"worker %s has not answered since the hub last renewed its fencing Lease there at %s, for longer than fencing.replaceAfter (%s); its agent stopped the copy after fenceAfter (%s); placing it again (the copy there is removed when the worker returns, before it is renewed)",
		cluster, since.UTC().Format(time.RFC3339), fc.ReplaceAfter.Duration, fc.FenceAfter.Duration))
}

// sayUnreachable sets the Workload's WorkerUnreachable condition when its
// meaning changes.
func (r *Reconciler) sayUnreachable(ctx context.Context, wl *strata.Workload, message string) error {
	message = intake.Truncate(message, intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(wl.Status.Conditions, ConditionUnreachable); old != nil && old.Status == metav1.ConditionTrue && workload.SameMeaning(old.Message, message) {
		return nil
	}
	updated := wl.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: ConditionUnreachable, Status: metav1.ConditionTrue, Reason: ReasonWorkerUnreachable, Message: message})
	return client.IgnoreNotFound(r.client.Status().Update(ctx, updated))
}

// reachable removes the WorkerUnreachable condition of a Workload whose
// worker answers again.
func (r *Reconciler) reachable(ctx context.Context, wl *strata.Workload) error {
	if meta.FindStatusCondition(wl.Status.Conditions, ConditionUnreachable) == nil {
		return nil
	}
	updated := wl.DeepCopy()
	meta.RemoveStatusCondition(&updated.Status.Conditions, ConditionUnreachable)
	return client.IgnoreNotFound(r.client.Status().Update(ctx, updated))
}

// abandon ends a dispatch whose worker has been unreachable for
// replaceAfter, without removing its copy (the worker cannot be reached;
// its agent fenced the copy, and the hub removes it before it renews that
// worker's Lease again): the reservation ends and the Workload is placed
// again.
func (r *Reconciler) abandon(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, jobRef ref, message string) error {
	return r.abandonWith(ctx, wl, hubJob, jobRef, ReasonWorkerUnreachable, message)
}

// abandonWith ends a dispatch without removing its copy, for reason.
func (r *Reconciler) abandonWith(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, jobRef ref, reason, message string) error {
	cluster, flavor, gen, _ := dispatch.Placed(wl)
	key := dispatch.Key(wl.UID, gen)
	r.release(cluster, flavor, key)
	if err := r.clearRun(ctx, jobRef); err != nil {
		return err
	}
	updated := wl.DeepCopy()
	dispatch.RecordOutcome(&updated.Status, strata.PlacementUnreachable, reason, reason, message, r.clock.Now())
	meta.RemoveStatusCondition(&updated.Status.Conditions, ConditionUnreachable)
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Placing a workload again without its copy known gone", "cluster", cluster, "dispatch", key, "reason", reason)
	metrics.HubRejections.WithLabelValues(cluster, reason).Inc()
	if hubJob != nil {
		r.recorder.Eventf(hubJob.Object(), updated, corev1.EventTypeWarning, reason, "Dispatch", "%s", intake.Truncate(message, intake.MaxEventNote))
	}
	return nil
}

// ReasonKindNotServed is the refusal of a copy whose kind the worker does
// not serve (its CRD is not installed there).
const ReasonKindNotServed = "KindNotServed"

// ReasonPendingOnWorker is the refusal of a copy its worker's agent kept
// Pending for dispatch.pendingTimeout.
const ReasonPendingOnWorker = "PendingOnWorker"

// PendingSince says since when a copy's Workload has been Pending on its
// worker (the agent tried and cannot admit it now), with the agent's
// message; false when it is not.
func PendingSince(copyWL *strata.Workload) (time.Time, string, bool) {
	if copyWL == nil || copyWL.Status.Admission != nil {
		return time.Time{}, "", false
	}
	c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != workerPending {
		return time.Time{}, "", false
	}
	return c.LastTransitionTime.Time, c.Message, true
}

// workerPending is the reason of an agent's Admitted=False condition on a
// workload it tried and cannot admit now (agent/scheduler.ReasonPending).
const workerPending = "Pending"

// vanished handles an admitted copy that the worker's informer no longer
// shows: confirmed gone by a read from the worker, it was deleted there
// (by its administrators, or with its namespace) before it finished. It is
// never created again under the same dispatch — it may have run — but
// recorded as a refusal by that worker (it goes into backoff) and placed
// again.
func (r *Reconciler) vanished(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, cluster string, jobRef ref) (ctrl.Result, error) {
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err := c.Get(ctx, jobRef.key, jobRef.kind.NewObject()); err == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil // the informer is behind
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, "CopyDeleted",
		fmt.Sprintf("the admitted copy was deleted on %s before it finished; placing it again", cluster))
}

// dispatchTime is when the current dispatch was recorded.
func dispatchTime(wl *strata.Workload) time.Time {
	p := wl.Status.Placement
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		if a := p.Attempts[i]; a.DispatchGeneration == p.DispatchGeneration && a.Cluster == p.Cluster {
			return a.Time.Time
		}
	}
	return wl.CreationTimestamp.Time
}

// forget takes back the copy of a hub Workload that is gone.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.mu.Lock()
	k, ok := r.known[key]
	r.mu.Unlock()
	if !ok {
		return nil // never dispatched by this process: the orphan check finds its copy
	}
	r.release(k.cluster, k.flavor, dispatch.Key(k.uid, k.generation))
	copyJob, _, err := r.fleet.Copy(ctx, k.cluster, k.job.kind, k.job.key)
	if errors.Is(err, fleet.ErrKindNotServed) {
		err = nil // no copy of that kind can be there
	}
	if err != nil {
		return err
	}
	if copyJob != nil {
		if uid, _, _ := dispatch.CopyOf(copyJob.Object()); uid == k.uid {
			if err := r.deleteCopy(ctx, k.cluster, copyJob.Object()); err != nil {
				return err
			}
		}
	}
	r.mu.Lock()
	delete(r.known, key)
	r.mu.Unlock()
	return nil
}

// release ends a dispatch's reservation and forgets what this process
// knew of it.
func (r *Reconciler) release(cluster, flavor, key string) {
	r.fleet.Release(cluster, flavor, key)
	r.mu.Lock()
	delete(r.admissions, key)
	delete(r.created, key)
	delete(r.seen, key)
	delete(r.undoing, key)
	r.mu.Unlock()
}

// create sends the copy of the current dispatch to its worker.
func (r *Reconciler) create(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, cluster, flavor string, gen int64, key string) (ctrl.Result, error) {
	jobRef := ref{kind: hubJob.Kind(), key: client.ObjectKeyFromObject(hubJob.Object())}
	r.mu.Lock()
	at, sent := r.created[key]
	r.mu.Unlock()
	if sent {
		if wait := at.Add(creationGrace).Sub(r.clock.Now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil // the informer has not shown it yet
		}
	}
	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementUnreachable, dispatch.ReasonRejected, "WorkerClusterNotFound",
				fmt.Sprintf("WorkerCluster %s no longer exists", cluster))
		}
		return ctrl.Result{}, err
	}
	queueName := wc.Spec.LocalQueueName
	if queueName == "" {
		queueName = hubJob.Object().GetLabels()[strata.QueueNameLabel]
	}
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if ob := wc.Spec.Onboarding; ob != nil {
		if err := r.onboard(ctx, c, cluster, hubJob.Object().GetNamespace(), queueName, ob.ClusterQueue); err != nil {
			if apierrors.IsForbidden(err) {
				return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, ReasonForbidden, fmt.Sprintf(
					"onboarding (WorkerCluster %s spec.onboarding): %v; the hub's identity there needs the agent chart's hubAccess.onboarding=true", cluster, err))
			}
			return ctrl.Result{}, err
		}
	}
	// The placement the hub reserved for this dispatch, so that the agent
	// takes the capacity where the hub counted it (a hub restarted since
	// the decision has the one it rebuilt).
	var hint string
	if reserved := r.fleet.Hint(key); reserved != nil {
		if hint, err = workload.EncodeTopologyHints(wl.Spec.PodSets, reserved); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Encoding the topology hint; the copy goes without one", "cluster", cluster)
			hint = ""
		}
	}
	// The informer's job is lean (kinds.HubTransform): the copy is made of
	// the job as the API server has it, whole.
	whole, err := dispatch.HubJob(ctx, r.reader, wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if whole == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil // gone meanwhile: its deletion comes as an event
	}
	cp := dispatch.NewCopy(whole, wl, r.fleet.Origin(), queueName, flavor, gen, hint).Object()
	err = c.Create(ctx, cp)
	if apierrors.IsNotFound(err) && r.cfg.Dispatch.CreateNamespaces {
		if nsErr := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cp.GetNamespace()}}); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, ReasonForbidden, fmt.Sprintf("creating namespace %s on %s: %v", cp.GetNamespace(), cluster, nsErr))
		}
		err = c.Create(ctx, cp)
	}
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing := jobRef.kind.NewObject()
		if getErr := c.Get(ctx, client.ObjectKeyFromObject(cp), existing); getErr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(getErr)
		}
		if uid, g, ok := dispatch.CopyOf(existing); ok && uid == wl.UID && g == gen {
			break // created before, by this hub: the informer is behind
		}
		if existing.GetLabels()[strata.OriginLabel] == r.fleet.Origin() {
			return ctrl.Result{}, r.deleteCopy(ctx, cluster, existing) // a stale copy of ours
		}
		return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, ReasonNameTaken,
			fmt.Sprintf("%s exists on %s and is not a copy from this hub", jobRef, cluster))
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, ReasonNamespaceNotFound,
			fmt.Sprintf("namespace %s does not exist on %s (the hub creates it only with dispatch.createNamespaces)", cp.GetNamespace(), cluster))
	case apierrors.IsInvalid(err):
		return ctrl.Result{}, r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, "Invalid",
			fmt.Sprintf("the worker's API server rejected the copy: %v", err))
	default:
		switch reason := createRefusal(err); reason {
		case ReasonForbidden:
			return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, reason,
				fmt.Sprintf("the hub's credential may not create %s in namespace %s on %s: %v", jobs.Resource(jobRef.kind), cp.GetNamespace(), cluster, err))
		case ReasonQuotaExceeded, ReasonAdmissionDenied, ReasonRefused:
			return ctrl.Result{}, r.workerRefused(ctx, wl, hubJob, cluster, reason,
				fmt.Sprintf("%s refused the copy: %v", cluster, err))
		}
		// The admission timeout counts from the dispatch, also while no
		// copy could be created: the Workload must not say "dispatched"
		// for ever while the worker fails.
		if p := wl.Status.Placement; p != nil && p.DispatchTime != nil {
			if timeout := r.cfg.Dispatch.AdmissionTimeout.Duration; r.clock.Since(p.DispatchTime.Time) >= timeout {
				return ctrl.Result{}, r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementTimedOut, dispatch.ReasonRejected, ReasonNotCreated,
					fmt.Sprintf("the copy could not be created on %s within the admission timeout of %s: %v; placing it again", cluster, timeout, err))
			}
		}
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created a copy", "cluster", cluster, "job", jobRef.String(), "dispatch", key)
	r.fleet.ForgetHint(key)
	r.mu.Lock()
	r.created[key] = r.clock.Now()
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: r.cfg.Dispatch.AdmissionTimeout.Duration}, nil
}

// onboardTTL is how long a namespace and LocalQueue the hub made sure of
// on a worker are taken to still be there: one deleted meanwhile is made
// again at the next copy after that.
const onboardTTL = time.Minute

// onboard makes sure namespace ns and its LocalQueue queue (pointing at
// the worker's ClusterQueue cq) exist on a worker, creating what is
// missing; what exists is left as it is. It needs only create: an
// existing object answers AlreadyExists.
func (r *Reconciler) onboard(ctx context.Context, c client.Client, cluster, ns, queue, cq string) error {
	key := cluster + "/" + ns + "/" + queue
	r.mu.Lock()
	at, ok := r.onboarded[key]
	r.mu.Unlock()
	if ok && r.clock.Since(at) < onboardTTL {
		return nil
	}
	labels := map[string]string{strata.OnboardedByLabel: r.fleet.Origin()}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on %s: %w", ns, cluster, err)
	}
	lq := &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: queue, Namespace: ns, Labels: labels}, Spec: strata.LocalQueueSpec{ClusterQueue: cq}}
	if err := c.Create(ctx, lq); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating LocalQueue %s/%s (ClusterQueue %s) on %s: %w", ns, queue, cq, cluster, err)
	}
	r.mu.Lock()
	r.onboarded[key] = r.clock.Now()
	r.mu.Unlock()
	return nil
}

// confirmLive re-reads a copy's Workload from the worker itself before a
// timeout takes the copy back on what the informer shows, which may be
// behind: a copy admitted meanwhile is recorded as admitted, and a copy
// whose state cannot be read now is left alone and looked at again (the
// worker may be unreachable; taking it back then could run the Job
// twice). decided is false when the timeout may go ahead.
func (r *Reconciler) confirmLive(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, cluster string, jobRef ref) (res ctrl.Result, decided bool, err error) {
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, true, nil
	}
	var obj client.Object
	if _, grouped := jobRef.kind.(jobs.GroupedWorkloads); grouped {
		// Its Workloads are named after what the copy holds.
		obj = jobRef.kind.NewObject()
		if err := c.Get(ctx, jobRef.key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, false, nil
			}
			ctrl.LoggerFrom(ctx).V(2).Info("Could not re-read the copy before its timeout; looking again shortly", "cluster", cluster, "error", err.Error())
			return ctrl.Result{RequeueAfter: 10 * time.Second}, true, nil
		}
	}
	live, err := jobs.WorkerWorkload(ctx, c, jobRef.kind, jobRef.key, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not re-read the copy before its timeout; looking again shortly", "cluster", cluster, "error", err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, true, nil
	}
	if live == nil {
		return ctrl.Result{}, false, nil // no Workload at all: the agent never took the copy in
	}
	if verdict, _, _ := dispatch.Judge(live); verdict == dispatch.Admitted {
		return ctrl.Result{}, true, r.admitted(ctx, wl, hubJob, live)
	}
	return ctrl.Result{}, false, nil
}

// workerRefused undoes a dispatch for a reason of the worker's, and says
// so on the WorkerCluster too.
func (r *Reconciler) workerRefused(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, cluster, reason, message string) error {
	if err := r.setDispatching(ctx, cluster, metav1.ConditionFalse, reason, message); err != nil {
		return err
	}
	jobRef := ref{kind: hubJob.Kind(), key: client.ObjectKeyFromObject(hubJob.Object())}
	return r.refuse(ctx, wl, hubJob, jobRef, strata.PlacementRejected, dispatch.ReasonRejected, reason, message)
}

// workerReasons are the refusals that say something about the worker, not
// the workload: the WorkerCluster's Dispatching condition names them.
var workerReasons = map[string]bool{
	intake.ReasonLocalQueueNotFound:  true,
	intake.ReasonQueueNotFound:       true,
	intake.ReasonNamespaceNotAllowed: true,
}

// refuse undoes the current dispatch: the copy goes first, then the
// record; the dispatcher then places the Workload again, without this
// worker for a backoff.
func (r *Reconciler) refuse(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, jobRef ref, result strata.PlacementResult, condReason, reason, message string) error {
	cluster, _, _, _ := dispatch.Placed(wl)
	if workerReasons[reason] {
		if err := r.setDispatching(ctx, cluster, metav1.ConditionFalse, reason, message); err != nil {
			return err
		}
	}
	// A copy still going is waited for through the undoing record; the
	// refusal is told once.
	_, _, gen, _ := dispatch.Placed(wl)
	r.mu.Lock()
	_, told := r.undoing[dispatch.Key(wl.UID, gen)]
	r.mu.Unlock()
	err := r.takeBack(ctx, wl, jobRef, outcome{result: result, reason: condReason, cause: reason, message: message}, true)
	if err != nil && !errors.Is(err, errCopyGoing) {
		return err
	}
	if told {
		return err
	}
	metrics.HubRejections.WithLabelValues(cluster, reason).Inc()
	if hubJob != nil {
		r.recorder.Eventf(hubJob.Object(), wl, corev1.EventTypeWarning, condReason, "Dispatch", "%s", intake.Truncate(cluster+": "+message, intake.MaxEventNote))
	}
	return err
}

// takeBack removes the current dispatch's copy, ends its reservation and,
// when record is set, records the outcome on the Workload.
func (r *Reconciler) takeBack(ctx context.Context, wl *strata.Workload, jobRef ref, o outcome, record bool) error {
	cluster, flavor, gen, _ := dispatch.Placed(wl)
	key := dispatch.Key(wl.UID, gen)
	if record && wl.DeletionTimestamp.IsZero() {
		r.mu.Lock()
		r.undoing[key] = o
		r.mu.Unlock()
	}
	copyJob, _, err := r.fleet.Copy(ctx, cluster, jobRef.kind, jobRef.key)
	if errors.Is(err, fleet.ErrKindNotServed) {
		err = nil // no copy of that kind can be there
	}
	if err != nil && !errors.Is(err, fleet.ErrNotConnected) {
		return err
	}
	if errors.Is(err, fleet.ErrNotConnected) {
		gone, gerr := r.workerGone(ctx, cluster)
		if gerr != nil {
			return gerr
		}
		if !gone {
			// At most one live copy: nothing else is sent until this one
			// is known to be gone.
			return fmt.Errorf("cannot remove the copy on %s: %w", cluster, err)
		}
		// The WorkerCluster is gone, and with it the hub's way there.
	}
	// The workload is placed again only once its copy and the copy's pods
	// are gone (foreground deletion): never two runs at once.
	wait := record && wl.DeletionTimestamp.IsZero()
	if copyJob != nil {
		if uid, _, _ := dispatch.CopyOf(copyJob.Object()); uid == wl.UID {
			if err := r.removeCopy(ctx, cluster, copyJob.Object(), wait); err != nil {
				return err
			}
		}
	} else if c, cerr := r.fleet.Client(cluster); cerr == nil {
		// The informer may not show a copy created a moment ago, and
		// shows a going one until it is gone.
		existing := jobRef.kind.NewObject()
		if err := c.Get(ctx, jobRef.key, existing); err == nil {
			if uid, _, _ := dispatch.CopyOf(existing); uid == wl.UID {
				if err := r.removeCopy(ctx, cluster, existing, wait); err != nil {
					return err
				}
			}
		} else if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return err
		}
	}
	r.fleet.Release(cluster, flavor, key)
	r.mu.Lock()
	delete(r.created, key)
	delete(r.seen, key)
	delete(r.admissions, key)
	r.mu.Unlock()
	if err := r.clearRun(ctx, jobRef); err != nil {
		return err
	}
	if !record || !wl.DeletionTimestamp.IsZero() {
		return nil
	}
	wl = wl.DeepCopy()
	dispatch.RecordOutcome(&wl.Status, o.result, o.reason, o.cause, o.message, r.clock.Now())
	if err := r.client.Status().Update(ctx, wl); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.mu.Lock()
	delete(r.undoing, key)
	r.mu.Unlock()
	return nil
}

// clearRun takes a removed copy's run off the hub job's status: nothing
// of it is active or ready any more.
func (r *Reconciler) clearRun(ctx context.Context, jobRef ref) error {
	obj := jobRef.kind.NewObject()
	if err := r.client.Get(ctx, jobRef.key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	j, _ := jobRef.kind.Adapt(obj)
	if !j.ClearRun() {
		return nil
	}
	if err := r.client.Status().Update(ctx, obj); err != nil && !apierrors.IsInvalid(err) {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// workerGone says whether the WorkerCluster of a worker no longer exists.
// One being deleted is drained first (strata.dev/drain).
func (r *Reconciler) workerGone(ctx context.Context, cluster string) (bool, error) {
	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// removeCopy deletes a copy whose workload may be placed again; with
// wait, in the foreground (the copy stays until its pods are gone) and it
// returns errCopyGoing until the copy is gone.
func (r *Reconciler) removeCopy(ctx context.Context, cluster string, copyJob client.Object, wait bool) error {
	if !wait {
		return r.deleteCopy(ctx, cluster, copyJob)
	}
	if copyJob.GetDeletionTimestamp().IsZero() {
		if err := r.delete(ctx, cluster, copyJob, metav1.DeletePropagationForeground); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s/%s on %s: %w", copyJob.GetNamespace(), copyJob.GetName(), cluster, errCopyGoing)
}

// deleteCopy deletes a copy on a worker, its pods after it.
func (r *Reconciler) deleteCopy(ctx context.Context, cluster string, copyJob client.Object) error {
	return r.delete(ctx, cluster, copyJob, metav1.DeletePropagationBackground)
}

// delete deletes a copy on a worker with the given propagation.
func (r *Reconciler) delete(ctx context.Context, cluster string, copyJob client.Object, propagation metav1.DeletionPropagation) error {
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return err
	}
	uid := copyJob.GetUID()
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting a copy", "cluster", cluster, "job", client.ObjectKeyFromObject(copyJob), "labels", copyJob.GetLabels(), "propagation", propagation)
	err = c.Delete(ctx, copyJob, client.PropagationPolicy(propagation), client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if apierrors.IsForbidden(err) {
		resource := "jobs"
		if j, ok := jobs.AdaptAny(kinds.Hub, copyJob); ok {
			resource = jobs.Resource(j.Kind())
		}
		message := fmt.Sprintf("the hub's credential may not delete %s in namespace %s on %s: its copies there cannot be taken back", resource, copyJob.GetNamespace(), cluster)
		if cerr := r.setDispatching(ctx, cluster, metav1.ConditionFalse, ReasonForbidden, message); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// admitted records the worker's admission on the hub Workload.
func (r *Reconciler) admitted(ctx context.Context, wl *strata.Workload, hubJob jobs.Job, copyWL *strata.Workload) error {
	cluster, flavor, gen, _ := dispatch.Placed(wl)
	key := dispatch.Key(wl.UID, gen)
	r.mu.Lock()
	written := r.admissions[key]
	if wl.Status.Admission != nil {
		delete(r.admissions, key)
	}
	r.mu.Unlock()
	if written && wl.Status.Admission == nil {
		// The cache is behind this process's own write (the copy's next
		// change, such as the agent starting it, comes first): writing
		// again would only conflict. The write's event brings it back.
		return nil
	}
	var lq strata.LocalQueue
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, &lq); client.IgnoreNotFound(err) != nil {
		return err
	}
	updated := wl.DeepCopy()
	now := r.clock.Now()
	if !dispatch.RecordAdmission(&updated.Status, lq.Spec.ClusterQueue, copyWL, now) {
		return nil
	}
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil {
		r.mu.Lock()
		r.admissions[key] = true
		r.mu.Unlock()
	}
	if err := r.setDispatching(ctx, cluster, metav1.ConditionTrue, ReasonDispatching, "the worker admits the hub's copies"); err != nil {
		return err
	}
	if wl.Status.Admission == nil {
		metrics.HubAdmissionLatency.WithLabelValues(cluster).Observe(now.Sub(dispatchTime(wl)).Seconds())
		r.recorder.Eventf(hubJob.Object(), updated, corev1.EventTypeNormal, "Admitted", "Dispatch", "Admitted on %s (flavor %s)", cluster, flavor)
	}
	return nil
}

// ReasonRanUnseen is the Admitted condition of a hub Workload whose copy
// finished before the hub saw its admission.
const ReasonRanUnseen = "FinishedBeforeAdmissionSeen"

// ranUnseen replaces a finished Workload's "waiting for the worker"
// condition when its copy's admission can no longer be read.
func (r *Reconciler) ranUnseen(ctx context.Context, wl *strata.Workload) error {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Reason != dispatch.ReasonDispatched {
		return nil
	}
	cluster, flavor, _, _ := dispatch.Placed(wl)
	updated := wl.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonRanUnseen,
		Message: fmt.Sprintf("ran on %s (flavor %s) and finished before the hub saw its admission", cluster, flavor)})
	return client.IgnoreNotFound(r.client.Status().Update(ctx, updated))
}

// mirrorWait shows on the hub why the worker has not admitted the copy
// yet, when it says so.
func (r *Reconciler) mirrorWait(ctx context.Context, wl *strata.Workload, copyWL *strata.Workload) error {
	if copyWL == nil {
		return nil
	}
	c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	cluster, flavor, _, _ := dispatch.Placed(wl)
	message := intake.Truncate(fmt.Sprintf("dispatched to %s (flavor %s); the worker has not admitted it yet: %s", cluster, flavor, c.Message), intake.MaxConditionMessage)
	if old := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); old != nil && old.Reason == dispatch.ReasonDispatched && workload.SameMeaning(old.Message, message) {
		return nil
	}
	updated := wl.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: dispatch.ReasonDispatched, Message: message})
	return client.IgnoreNotFound(r.client.Status().Update(ctx, updated))
}

// syncJobStatus mirrors the copy's status onto the hub's job.
func (r *Reconciler) syncJobStatus(ctx context.Context, hubJob, copyJob jobs.Job) error {
	obj := hubJob.Object().DeepCopyObject().(client.Object)
	updated, _ := hubJob.Kind().Adapt(obj)
	if !updated.MirrorStatus(copyJob) {
		return nil
	}
	if err := r.client.Status().Update(ctx, obj); err != nil {
		if apierrors.IsInvalid(err) {
			ctrl.LoggerFrom(ctx).Error(err, "The hub's job cannot take the copy's status", "job", client.ObjectKeyFromObject(obj))
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	return nil
}

// cleanFinished ends the reservation of a finished Workload and removes
// its copy once it has been finished for finishedRetention.
func (r *Reconciler) cleanFinished(ctx context.Context, wl *strata.Workload, cluster, flavor, key string, copyJob jobs.Job) (ctrl.Result, error) {
	r.fleet.Release(cluster, flavor, key)
	if copyJob == nil {
		return ctrl.Result{}, nil
	}
	finishedAt := wl.CreationTimestamp.Time
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadFinished); c != nil {
		finishedAt = c.LastTransitionTime.Time
	}
	if wait := finishedAt.Add(r.cfg.Dispatch.FinishedRetention.Duration).Sub(r.clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return ctrl.Result{}, r.deleteCopy(ctx, cluster, copyJob.Object())
}

// setDispatching sets a WorkerCluster's Dispatching condition when it
// changes.
func (r *Reconciler) setDispatching(ctx context.Context, cluster string, status metav1.ConditionStatus, reason, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var wc strata.WorkerCluster
		if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
			return client.IgnoreNotFound(err)
		}
		old := meta.FindStatusCondition(wc.Status.Conditions, strata.WorkerClusterDispatching)
		if old == nil && status == metav1.ConditionTrue {
			return nil // never refused: nothing to say
		}
		if old != nil && old.Status == status && old.Reason == reason && strings.EqualFold(old.Message, message) {
			return nil
		}
		meta.SetStatusCondition(&wc.Status.Conditions, metav1.Condition{Type: strata.WorkerClusterDispatching, Status: status, Reason: reason,
			Message: intake.Truncate(message, intake.MaxConditionMessage), ObservedGeneration: wc.Generation})
		return client.IgnoreNotFound(r.client.Status().Update(ctx, &wc))
	})
}
