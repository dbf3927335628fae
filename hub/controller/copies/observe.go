package copies

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
)

// observed is everything a reconcile decides on for one hub Workload: the
// Workload and its dispatch record, the hub job, the WorkerCluster, the
// worker's state as the fleet sees it, the copy, and what this process
// remembers of the dispatch. A read that failed is kept as its error; the
// decision says at which point it matters.
type observed struct {
	key types.NamespacedName
	// wl is the hub Workload; nil when it is gone.
	wl *strata.Workload
	// owner is the hub job's reference; nil for an orphaned Workload.
	owner *metav1.OwnerReference

	// The dispatch record (dispatch.Placed) and its key (dispatch.Key).
	cluster, flavor string
	gen             int64
	placed          bool
	dispatch        string
	// job is the hub job's kind and key; its kind is nil for a kind the
	// hub does not serve.
	job ref

	hubJob    jobs.Job // nil when gone
	hubJobErr error

	wc    *strata.WorkerCluster // nil when not found
	wcErr error

	// down is why the fleet's probe takes the worker as down; "" when not.
	down string
	// connErr says why the hub has no client for the worker.
	connErr error
	// published is the duration the worker's fencing Lease last carried
	// (fleet.Published), when known (publishedKnown).
	published      time.Duration
	publishedKnown bool
	// lastRenewed is when the hub last renewed the worker's fencing Lease
	// (or started, if it has not yet).
	lastRenewed time.Time

	// The copy of the current job on the worker, as its informer shows it.
	copyJob jobs.Job
	copyWL  *strata.Workload
	copyErr error

	// undoing is the outcome a take-back of this dispatch is to record;
	// nil when none is under way.
	undoing *outcome
	// takenBack says that this process recorded the dispatch's take-back
	// and the cache does not show the record yet.
	takenBack bool
	// seen is when this process first saw the dispatch's copy; zero when
	// it has not.
	seen time.Time
	// switched is set when the worker's name came to stand for another
	// cluster while this process ran (strata.dev/accept-cluster-id).
	switched *fleet.ClusterSwitch
	// copyMayExist says whether a copy of this dispatch may exist on the
	// worker: this process sent one (or tried, with an unknown outcome),
	// the informer shows one, or another hub process decided the dispatch
	// (and may have sent it).
	copyMayExist bool
	// pending is the copy's Pending spell this process saw begin; nil
	// when none.
	pending *pendingSighting
	// journalled is when the current dispatch was decided, when only the
	// dispatch journal holds its record (wl has it applied); zero when
	// the status has it.
	journalled time.Time

	cfg *configv1beta1.HubConfiguration
}

// finished says whether the hub Workload is finished.
func (o *observed) finished() bool {
	return meta.IsStatusConditionTrue(o.wl.Status.Conditions, strata.WorkloadFinished)
}

// kindName is the hub job's kind, for messages.
func (o *observed) kindName() string {
	return o.job.kind.GroupVersionKind().Kind
}

// observe reads what the decision on Workload key needs, from the caches
// and the fleet. It stops at the first fact that settles the decision
// alone (the Workload gone, orphaned or not dispatched); its error is only
// a failure to read the Workload.
func (r *Reconciler) observe(ctx context.Context, key types.NamespacedName) (*observed, error) {
	o := &observed{key: key, cfg: r.cfg}
	var wl strata.Workload
	if err := r.client.Get(ctx, key, &wl); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		return o, nil
	}
	o.wl = &wl
	if since, ok := r.journal.ApplyTo(&wl); ok {
		// Dispatched, and recorded in the dispatch journal only: its
		// record goes into the status with this controller's next write
		// (or on its own, PersistAfter on).
		o.journalled = since
	} else {
		// The status has it (a finished Workload's too, which the
		// dispatcher no longer reads).
		r.journal.Forget(wl.UID, dispatch.Generation(&wl))
	}
	o.owner = metav1.GetControllerOfNoCopy(o.wl)
	if o.owner == nil {
		return o, nil
	}
	o.cluster, o.flavor, o.gen, o.placed = dispatch.Placed(o.wl)
	o.job = ref{kind: jobs.KindOf(kinds.Hub, o.owner), key: types.NamespacedName{Namespace: wl.Namespace, Name: o.owner.Name}}
	if !o.placed || o.job.kind == nil {
		return o, nil
	}
	o.dispatch = dispatch.Key(wl.UID, o.gen)

	o.hubJob, o.hubJobErr = dispatch.HubJob(ctx, r.client, o.wl)
	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, types.NamespacedName{Name: o.cluster}, &wc); err == nil {
		o.wc = &wc
	} else if !apierrors.IsNotFound(err) {
		o.wcErr = err
	}
	o.down = r.fleet.DownReason(o.cluster)
	_, o.connErr = r.fleet.Client(o.cluster)
	o.lastRenewed = r.fleet.LastRenewed(o.cluster)
	o.published, o.publishedKnown = r.fleet.Published(o.cluster)
	o.copyJob, o.copyWL, o.copyErr = r.fleet.Copy(ctx, o.cluster, o.job.kind, o.job.key)
	if u, ok := r.memory.undoingOf(o.dispatch); ok {
		o.undoing = &u
	} else if u, ok := deactivatedBy(o.wl, o.dispatch); ok {
		// Deactivated past a worker's backoffLimitCount by a hub that
		// restarted before the take-back was recorded.
		o.undoing = &u
	}
	o.takenBack = r.memory.takenBackShown(key, o.dispatch)
	o.seen = r.memory.seenAt(o.dispatch)
	if sw, ok := r.fleet.Switched(o.cluster); ok {
		o.switched = &sw
	}
	o.copyMayExist = o.copyJob != nil || r.memory.wasSent(o.dispatch) || !r.fleet.DispatchedHere(o.dispatch)
	if p, ok := r.memory.pendingOf(o.dispatch); ok {
		o.pending = &p
	}
	return o, nil
}
