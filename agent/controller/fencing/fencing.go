// Package fencing stops the copies of a hub that has gone silent. Every
// hub renews a Lease on this worker, strata-fence-<origin>, in the agent's
// fencing namespace, with its fencing.fenceAfter as the Lease's duration.
// Once the agent has not seen a hub's Lease change for that long, every
// admitted copy of that hub here is evicted (its job suspended, its pods
// gone, its capacity free; condition Evicted, reason Fenced, and events),
// and the scheduler admits none of its copies until the agent sees the
// Lease change again. The hub places that worker's workloads elsewhere
// only after its fencing.replaceAfter, measured on its own clock from its
// last renewal attempt, which exceeds fenceAfter by a margin: a workload
// never runs on two clusters at once, as long as this agent runs and the
// Lease's changes reach it within the margin.
//
// Only durations are measured, each on one side's own clock: the agent
// never compares the hub's renewTime with its clock (it only notes that it
// changed), so hub and worker clocks may disagree by any amount.
//
// An agent that restarts cannot have watched the Lease meanwhile. It keeps
// when it last saw each hub's Lease change in a Lease of its own,
// strata-agent-fence-<origin> (spec.renewTime, on the agent's clock), and
// counts from there; with no such record it assumes the worst, that the
// Lease has been silent for fenceAfter already. It admits no copy of a hub
// whose Lease it has not read, and a Lease deleted is not taken as the
// hub's word: only a Lease without a duration (fencing Disabled on the
// hub) lets a hub's copies run without renewals.
package fencing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/workload"
)

// LeasePrefix starts the names of the hubs' fencing Leases; the rest is
// the hub's origin.
const LeasePrefix = strata.FencingLeasePrefix

// LeaseName is the fencing Lease of the hub of origin.
func LeaseName(origin string) string { return LeasePrefix + origin }

// ReasonFenced is the reason of the Evicted and Admitted conditions of a
// fenced hub's copies.
const ReasonFenced = strata.EvictedByFencing

// Fence follows the hubs' fencing Leases and evicts the copies of a hub
// that stopped renewing its own.
type Fence struct {
	client client.Client
	// reader reads from the API server, not the cache (stopOrphaned).
	reader    client.Reader
	recorder  events.EventRecorder
	clock     clock.Clock
	namespace string
	// changed is called when a hub is fenced or renews again (the
	// scheduler's Wake).
	changed func()

	mu     sync.Mutex
	leases map[string]*observed // by origin
	// sightings are, by origin, the last change of each hub's Lease the
	// informer delivered live (not in its initial list), noted by an
	// event handler whether or not this replica leads; complete once
	// synced says so.
	sightings map[string]sighting
	// atStart are the origins whose Lease was in the informer's initial
	// list.
	atStart map[string]bool
	synced  func() bool
}

// observed is what the agent knows of one hub's Lease.
type observed struct {
	// renewTime is the Lease's renewTime as the hub wrote it, on the hub's
	// clock: only compared with the next one, to see a change.
	renewTime time.Time
	// seen is when a change of the Lease was last seen, on the agent's
	// clock (restored: by an earlier agent process; zero: unknown, taken
	// as long ago).
	seen     time.Time
	duration time.Duration // 0: the hub does not fence
	// deleted: the Lease is gone; what was last seen still counts.
	deleted bool
	fenced  bool
	// revoked are the hub's dispatches (uid/generation) whose copies here
	// must not run (strata.dev/revoked-dispatches).
	revoked map[string]bool
}

// deadline is when the hub's copies are to be stopped; zero when never.
func (o *observed) deadline() time.Time {
	if o.duration == 0 {
		return time.Time{}
	}
	if o.seen.IsZero() {
		return time.Unix(0, 0) // nothing known of the Lease's last change: the worst
	}
	return o.seen.Add(o.duration)
}

// leaseView is what a Lease says: its renewTime and duration.
func leaseView(lease *coordinationv1.Lease) (renew time.Time, duration time.Duration) {
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	return renew, duration
}

// revokedOf reads the dispatches a hub's Lease revokes.
func revokedOf(lease *coordinationv1.Lease) map[string]bool {
	v := lease.Annotations[strata.RevokedDispatchesAnnotation]
	if v == "" {
		return nil
	}
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out[k] = true
		}
	}
	return out
}

// dispatchOf is the dispatch a copy's Workload belongs to, "" for a
// workload that is no hub's copy.
func dispatchOf(wl *strata.Workload) string {
	uid, gen := wl.Labels[strata.HubWorkloadUIDLabel], wl.Labels[strata.DispatchGenerationLabel]
	if uid == "" {
		return ""
	}
	return uid + "/" + gen
}

// next returns what the agent knows of a hub's Lease once it read it at
// now (its clock): prev is what this process knew (nil: nothing), lease
// the Lease (nil: not found), restored what an earlier agent process
// recorded (nil: nothing); sighted is the last change of the Lease this
// process's informer delivered live (nil: none yet); atStart says the
// Lease existed when this process started watching. A nil result means
// nothing is known yet.
//
// The Lease's last change counts from when this process saw it; a Lease
// this process has not seen change counts from the earlier process's
// record (it changed at the earliest then), and without one from long ago.
func next(prev *observed, lease *coordinationv1.Lease, restored *observed, sighted *sighting, atStart bool, now time.Time) *observed {
	var o observed
	switch {
	case lease == nil && prev != nil:
		o = *prev
		o.deleted = true
	case lease == nil && restored != nil:
		o = *restored
		o.deleted = true
	case lease == nil:
		return nil
	default:
		renew, duration := leaseView(lease)
		o = observed{renewTime: renew, duration: duration, revoked: revokedOf(lease)}
		switch {
		case prev != nil && prev.renewTime.Equal(renew):
			o.seen = prev.seen
		case prev == nil && restored != nil && restored.renewTime.Equal(renew) && !renew.IsZero():
			// The renewal an earlier agent process saw (a Lease deleted
			// and restored from a backup, say, while no agent ran): not a
			// change since.
			o.seen = restored.seen
		case sighted != nil && sighted.renewTime.Equal(renew):
			o.seen = sighted.at // the change, as the informer delivered it
		case prev != nil, !atStart:
			// A change, seen live (a Lease created after this process
			// started watching is one).
			o.seen = now
		case restored != nil:
			o.seen = restored.seen
		}
	}
	dl := o.deadline()
	o.fenced = !dl.IsZero() && !now.Before(dl)
	return &o
}

// sighting is a change of a hub's Lease as the informer delivered it live:
// its renewTime, and the agent's time then.
type sighting struct {
	renewTime, at time.Time
}

// New returns a Fence of the Leases in namespace; changed is called when a
// hub's copies become admissible or stop being so.
func New(c client.Client, recorder events.EventRecorder, clk clock.Clock, namespace string, changed func()) *Fence {
	return &Fence{client: c, reader: c, recorder: recorder, clock: clk, namespace: namespace, changed: changed, leases: map[string]*observed{}, sightings: map[string]sighting{}, atStart: map[string]bool{}}
}

// Holds says why a workload may not be admitted now: it is a copy of a
// fenced hub, or of a hub whose Lease this agent has not read. "" when
// it may.
func (f *Fence) Holds(wl *strata.Workload) string {
	origin := wl.Labels[strata.OriginLabel]
	if origin == "" || wl.Labels[strata.HubWorkloadUIDLabel] == "" {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.leases[origin]
	if o == nil {
		return fmt.Sprintf("waiting for hub %s's fencing Lease %s/%s: no copy of a hub is admitted before the agent has read its Lease "+
			"(a hub writes it once it connects; if it never appears, the hub's dispatch.workerNamespace is not this agent's fencing namespace)",
			origin, f.namespace, LeaseName(origin))
	}
	if o.revoked[dispatchOf(wl)] {
		return revokedMessage(origin)
	}
	if !o.fenced {
		return ""
	}
	return fenceMessage(origin, f.namespace, o)
}

func missingMessage(origin, namespace string) string {
	return fmt.Sprintf("hub %s's fencing Lease %s/%s is missing, and no earlier agent recorded it: "+
		"its copies on this worker stay stopped until the hub writes the Lease", origin, namespace, LeaseName(origin))
}

func revokedMessage(origin string) string {
	return fmt.Sprintf("hub %s revoked this dispatch (its fencing Lease lists it): it placed the workload elsewhere while it could not reach this worker, or could not remove this copy; it never runs here again", origin)
}

func fenceMessage(origin, namespace string, o *observed) string {
	switch {
	case o.seen.IsZero():
		return fmt.Sprintf("hub %s's fencing Lease %s/%s has not changed since this agent started, and no earlier agent recorded when it last did (fenceAfter %s): "+
			"its copies on this worker stay stopped until the hub renews the Lease", origin, namespace, LeaseName(origin), o.duration)
	case o.deleted:
		return fmt.Sprintf("hub %s's fencing Lease %s/%s was deleted, and last changed at %s on this agent's clock (fenceAfter %s): "+
			"its copies on this worker stay stopped until the hub renews the Lease", origin, namespace, LeaseName(origin), o.seen.UTC().Format(time.RFC3339), o.duration)
	}
	return fmt.Sprintf("hub %s has not renewed its fencing Lease %s/%s since %s on this agent's clock (fenceAfter %s): its copies on this worker stay stopped until it renews the Lease",
		origin, namespace, LeaseName(origin), o.seen.UTC().Format(time.RFC3339), o.duration)
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the Lease controller, and an event handler
// that notes each change of a hub's Lease as it arrives (a Lease created
// after the agent started watching is such a change), also while this
// replica waits to lead.
func (f *Fence) SetupWithManager(mgr ctrl.Manager) error {
	f.reader = mgr.GetAPIReader()
	inf, err := mgr.GetCache().GetInformer(context.Background(), &coordinationv1.Lease{})
	if err != nil {
		return err
	}
	sight := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Namespace != f.namespace || !strings.HasPrefix(l.Name, LeasePrefix) {
			return
		}
		renew, _ := leaseView(l)
		origin := strings.TrimPrefix(l.Name, LeasePrefix)
		f.mu.Lock()
		defer f.mu.Unlock()
		if prev, ok := f.sightings[origin]; !ok || !prev.renewTime.Equal(renew) {
			f.sightings[origin] = sighting{renewTime: renew, at: f.clock.Now()}
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				sight(obj)
				return
			}
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Namespace == f.namespace && strings.HasPrefix(l.Name, LeasePrefix) {
				f.mu.Lock()
				f.atStart[strings.TrimPrefix(l.Name, LeasePrefix)] = true
				f.mu.Unlock()
			}
		},
		UpdateFunc: func(old, obj any) {
			if o, ok := old.(*coordinationv1.Lease); ok {
				if n, ok := obj.(*coordinationv1.Lease); ok && ptr.Equal(o.Spec.RenewTime, n.Spec.RenewTime) {
					return // the same renewal
				}
			}
			sight(obj)
		},
	})
	if err != nil {
		return err
	}
	f.synced = reg.HasSynced
	return ctrl.NewControllerManagedBy(mgr).
		Named("fencing").
		For(&coordinationv1.Lease{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == f.namespace && strings.HasPrefix(o.GetName(), LeasePrefix)
		}))).
		// A hub is followed whether or not its Lease is there: after a
		// restart, the agent's record of a deleted Lease, or a copy an
		// earlier process admitted, brings it up.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetNamespace() != f.namespace || !strings.HasPrefix(o.GetName(), RecordPrefix) {
				return nil
			}
			return f.follow(strings.TrimPrefix(o.GetName(), RecordPrefix))
		})).
		Watches(&strata.Workload{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			wl, ok := o.(*strata.Workload)
			if !ok || wl.Status.Admission == nil || wl.Labels[strata.HubWorkloadUIDLabel] == "" {
				return nil
			}
			return f.follow(wl.Labels[strata.OriginLabel])
		}), builder.WithPredicates(predicate.Funcs{
			// Its first sight of each is enough: a copy is admitted
			// later only once its hub's Lease was read.
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(f)
}

// follow is the request that follows the hub of origin.
func (f *Fence) follow(origin string) []reconcile.Request {
	if origin == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: f.namespace, Name: LeaseName(origin)}}}
}

// Reconcile follows one hub's Lease: it records each change, and evicts
// the hub's admitted copies once the deadline passed.
func (f *Fence) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	origin := strings.TrimPrefix(req.Name, LeasePrefix)
	var lease *coordinationv1.Lease
	var l coordinationv1.Lease
	if err := f.client.Get(ctx, req.NamespacedName, &l); err == nil {
		lease = &l
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if f.synced != nil && !f.synced() {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil // the Leases' sightings are not complete yet
	}
	f.mu.Lock()
	_, known := f.leases[origin]
	var sighted *sighting
	if sg, ok := f.sightings[origin]; ok {
		sighted = &sg
	}
	atStart := f.atStart[origin]
	f.mu.Unlock()
	var restored *observed
	if !known {
		var err error
		if restored, err = f.restore(ctx, origin); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := f.clock.Now()
	f.mu.Lock()
	var before time.Time
	if prev := f.leases[origin]; prev != nil {
		before = prev.seen
	}
	f.mu.Unlock()
	o := f.observe(origin, lease, restored, sighted, atStart, now)
	if o == nil {
		// No Lease, and nothing known of one: no copy of the hub is
		// admitted until it appears. Copies an earlier agent process
		// admitted (the Lease and this agent's record of it deleted
		// since) are stopped: the worst is assumed.
		if err := f.evictCopies(ctx, origin, missingMessage(origin, f.namespace), nil); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Could not stop every copy of a hub whose Lease is missing", "origin", origin)
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return ctrl.Result{}, nil
	}
	if lease != nil && !o.seen.IsZero() && !o.seen.Equal(before) {
		// A change seen (or this process's first view): kept for the
		// agent process that follows.
		f.record(ctx, origin, o)
	}
	var failed error
	if len(o.revoked) > 0 {
		// Revoked dispatches stop whether the hub is fenced or not. A
		// copy that cannot be stopped does not keep the others of a
		// silent hub running: the deadline is looked at all the same.
		failed = f.evictCopies(ctx, origin, revokedMessage(origin), func(wl *strata.Workload) bool { return o.revoked[dispatchOf(wl)] })
	}
	// While dispatches are revoked, look again soon: a copy admitted by a
	// view older than the revocation is stopped within seconds.
	var recheck time.Duration
	if len(o.revoked) > 0 {
		recheck = 10 * time.Second
	}
	dl := o.deadline()
	result := ctrl.Result{RequeueAfter: recheck}
	switch {
	case dl.IsZero():
	case now.Before(dl):
		result.RequeueAfter = dl.Sub(now)
		if recheck > 0 {
			result.RequeueAfter = min(result.RequeueAfter, recheck)
		}
	default:
		// Fenced: stop every admitted copy of that hub; look again while
		// the Lease is silent, for copies admitted meanwhile by an older
		// view.
		result.RequeueAfter = 10 * time.Second
		failed = errors.Join(failed, f.evictCopies(ctx, origin, fenceMessage(origin, f.namespace, o), nil))
	}
	if failed != nil {
		// Retried on the schedule above, not controller-runtime's
		// backoff, which grows to minutes and would skip the deadline.
		ctrl.LoggerFrom(ctx).Error(failed, "Could not stop every copy of the hub that must stop", "origin", origin)
	}
	return result, nil
}

// observe records what a read of a hub's Lease says (nil: not found) and
// returns what is known of it now; nil when nothing is.
func (f *Fence) observe(origin string, lease *coordinationv1.Lease, restored *observed, sighted *sighting, atStart bool, now time.Time) *observed {
	f.mu.Lock()
	prev := f.leases[origin]
	o := next(prev, lease, restored, sighted, atStart, now)
	if o != nil {
		f.leases[origin] = o
	}
	wasHeld := prev == nil || prev.fenced
	held := o == nil || o.fenced
	var out *observed
	if o != nil {
		c := *o
		out = &c
	}
	f.mu.Unlock()
	if wasHeld != held {
		log := ctrl.Log.WithName("fencing")
		if held {
			log.Info("Fencing a silent hub: stopping its copies", "origin", origin, "lastChangeSeen", o.seen, "fenceAfter", o.duration)
		} else {
			log.Info("The hub's Lease is current: its copies may run", "origin", origin)
		}
		f.changed()
	}
	return out
}

// RecordPrefix starts the names of the Leases in which the agent keeps,
// per hub, when it last saw that hub's fencing Lease change.
const RecordPrefix = "strata-agent-fence-"

// restore reads what an earlier agent process recorded of a hub's Lease;
// nil when nothing.
func (f *Fence) restore(ctx context.Context, origin string) (*observed, error) {
	var rec coordinationv1.Lease
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: f.namespace, Name: RecordPrefix + origin}, &rec); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	o := &observed{}
	if rec.Spec.RenewTime != nil {
		o.seen = rec.Spec.RenewTime.Time
	}
	if d := rec.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		o.duration = time.Duration(*d) * time.Second
	}
	if t, err := time.Parse(time.RFC3339Nano, rec.Annotations[observedRenewTimeAnnotation]); err == nil {
		o.renewTime = t
	}
	o.revoked = revokedOf(&rec)
	return o, nil
}

// observedRenewTimeAnnotation holds, on the agent's record, the hub's
// renewTime that the agent saw change at the record's renewTime.
const observedRenewTimeAnnotation = "strata.dev/observed-renew-time"

// record keeps when this agent saw a hub's Lease change, for the agent
// that follows it. A record that cannot be written leaves the earlier one,
// which only fences sooner after a restart.
func (f *Fence) record(ctx context.Context, origin string, o *observed) {
	key := types.NamespacedName{Namespace: f.namespace, Name: RecordPrefix + origin}
	var rec coordinationv1.Lease
	err := f.client.Get(ctx, key, &rec)
	if err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not read the fencing record", "lease", key, "error", err.Error())
		return
	}
	create := apierrors.IsNotFound(err)
	if create {
		rec = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	if rec.Annotations == nil {
		rec.Annotations = map[string]string{}
	}
	rec.Annotations[observedRenewTimeAnnotation] = o.renewTime.UTC().Format(time.RFC3339Nano)
	// The revocations too: they hold after a restart that finds the
	// hub's Lease deleted.
	delete(rec.Annotations, strata.RevokedDispatchesAnnotation)
	if len(o.revoked) > 0 {
		rec.Annotations[strata.RevokedDispatchesAnnotation] = strings.Join(slices.Sorted(maps.Keys(o.revoked)), ",")
	}
	rec.Spec.HolderIdentity = ptr.To("strata-agent")
	rec.Spec.RenewTime = ptr.To(metav1.NewMicroTime(o.seen))
	rec.Spec.LeaseDurationSeconds = nil
	if o.duration > 0 {
		rec.Spec.LeaseDurationSeconds = ptr.To(int32(o.duration / time.Second))
	}
	if create {
		err = f.client.Create(ctx, &rec)
	} else {
		err = f.client.Update(ctx, &rec)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not write the fencing record", "lease", key, "error", err.Error())
	}
}

// evictCopies evicts the admitted copies of the hub of origin (those
// which, when set, selects).
func (f *Fence) evictCopies(ctx context.Context, origin, message string, which func(*strata.Workload) bool) error {
	var wls strata.WorkloadList
	if err := f.client.List(ctx, &wls, client.MatchingLabels{strata.OriginLabel: origin}); err != nil {
		return err
	}
	// A few at a time: a worker may hold hundreds of the hub's copies, and
	// all must stop well within the margin before replaceAfter.
	sem := make(chan struct{}, evictWriters)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range wls.Items {
		wl := &wls.Items[i]
		if wl.Labels[strata.HubWorkloadUIDLabel] == "" || (which != nil && !which(wl)) {
			continue
		}
		// A copy whose job was deleted with its dependents orphaned, even
		// finished: it goes once its pods do (stopOrphaned).
		orphaned := workload.Orphaned(wl)
		if !orphaned && (wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var err error
			if wl.Status.Admission != nil {
				err = f.evict(ctx, wl, message)
			}
			if err == nil && orphaned {
				err = f.stopOrphaned(ctx, wl)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// evictWriters bounds the concurrent evictions of a fenced hub's copies.
const evictWriters = 16

// evict sends a copy's Workload back to its queue; the job controller
// suspends the copy, and the scheduler holds it while the hub is fenced.
func (f *Fence) evict(ctx context.Context, wl *strata.Workload, message string) error {
	wl = wl.DeepCopy()
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, f.clock.Now())
	wl.Status.Admission = nil
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonFenced, Message: message})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonFenced, Message: message})
	// Not back in its queue until the hub renews its Lease (Kueue's
	// Requeued): a Requeued=True of an earlier eviction would say it is.
	workload.SetRequeued(wl, metav1.ConditionFalse, ReasonFenced, message, f.clock.Now())
	if err := f.client.Status().Update(ctx, wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	f.recorder.Eventf(wl, nil, corev1.EventTypeWarning, ReasonFenced, "Evict", "%s", message)
	copyObj := f.copyOf(ctx, wl)
	if copyObj == nil {
		return nil
	}
	// Suspended here, at once, rather than when the job controller sees
	// the eviction: with hundreds of copies on a busy worker, that second
	// hop doubled the time the last one ran on (the job controller then
	// only restores its templates).
	if j, ok := jobs.AdaptAny(kinds.All, copyObj); ok && !j.Suspended() {
		j.SetSuspended(true)
		if err := f.client.Update(ctx, j.Object()); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	f.recorder.Eventf(copyObj, wl, corev1.EventTypeWarning, ReasonFenced, "Suspend", "%s", message)
	return nil
}

// stopOrphaned stops a copy whose job was deleted with its dependents
// orphaned (kubectl delete --cascade=orphan): its Workload has no
// controller any more (workload.Orphaned), and its pods run on, which no
// suspension reaches. Every pod that carries the Workload's label and has
// not ended is named on the Workload (strata.GoingPodsAnnotation) while
// any remains; the hub, which may not read pods, counts an orphaned copy
// as running until its Workload is gone. Those without a controller are
// deleted; a pod a child object still controls (a JobSet's Job, a
// LeaderWorkerSet's StatefulSet, orphaned with it) is left to that object
// and waited for: deleting it would only have the child make it again.
// The Workload goes once none remains. The pods are read from the API
// server: the garbage collector takes the owner off the Workload and off
// each pod separately, and the cache may show a pod's owner still.
func (f *Fence) stopOrphaned(ctx context.Context, wl *strata.Workload) error {
	var pods corev1.PodList
	if err := f.reader.List(ctx, &pods, client.InNamespace(wl.Namespace), client.MatchingLabels{strata.WorkloadLabel: wl.Name}); err != nil {
		return err
	}
	going, errs := deleteOrphanedPods(ctx, f.client, f.recorder, wl, goingPods(pods.Items))
	if len(going) > 0 {
		_, err := intake.ReportGoingPods(ctx, f.client, wl, going)
		return errors.Join(append(errs, err)...)
	}
	return client.IgnoreNotFound(f.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}))
}

// ReasonOrphanedCopy is the reason of the events on the pods the agent
// deletes of a copy deleted with its pods orphaned.
const ReasonOrphanedCopy = "OrphanedCopy"

// deleteOrphanedPods deletes, of going (the pods of copy wl that have not
// ended), those without a controller, with an event on each; a pod a
// child object still controls is left to it. It returns going and the
// deletions that failed.
func deleteOrphanedPods(ctx context.Context, c client.Client, recorder events.EventRecorder, wl *strata.Workload, going []corev1.Pod) ([]corev1.Pod, []error) {
	var errs []error
	for i := range going {
		p := &going[i]
		if !p.DeletionTimestamp.IsZero() || metav1.GetControllerOfNoCopy(p) != nil {
			continue
		}
		if err := c.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s of copy %s, whose job was deleted with its pods orphaned: %w", p.Name, wl.Name, err))
			continue
		}
		recorder.Eventf(p, wl, corev1.EventTypeWarning, ReasonOrphanedCopy, "Delete",
			"The hub's copy %s was deleted with its pods orphaned; its pods are deleted, as the hub places the workload again", wl.Name)
	}
	return going, errs
}

// copyOf returns the job that controls a Workload, nil when it cannot be
// read.
func (f *Fence) copyOf(ctx context.Context, wl *strata.Workload) client.Object {
	owner := metav1.GetControllerOfNoCopy(wl)
	k := jobs.KindOf(kinds.All, owner)
	if k == nil {
		return nil
	}
	obj := k.NewObject()
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}, obj); err != nil || obj.GetUID() != owner.UID {
		return nil
	}
	return obj
}
