package copies

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
)

// OrphanCollector removes, on every worker, the copies no hub Workload
// stands for any more: its Workload is gone (matched by UID and origin),
// or its dispatch was undone or superseded. The copies controller removes
// copies as it goes; this catches what it could not see — a Workload
// deleted while the hub was down, a worker unreachable at the time.
type OrphanCollector struct {
	client   client.Client
	fleet    *fleet.Fleet
	clock    clock.Clock
	interval time.Duration
	remove   func(ctx context.Context, cluster string, copyJob client.Object) error
	signing  *signingKey

	// sightings is, per worker, when this process first saw each copy
	// (by the object's UID), on its own clock: a copy's age is never read
	// from the worker's creationTimestamp, whose clock may differ.
	mu        sync.Mutex
	sightings map[string]map[types.UID]time.Time
}

// NewOrphanCollector returns an OrphanCollector that looks every interval.
func NewOrphanCollector(c client.Client, f *fleet.Fleet, r *Reconciler, interval time.Duration, clk clock.Clock) *OrphanCollector {
	return &OrphanCollector{client: c, fleet: f, clock: clk, interval: interval, remove: r.deleteCopy, signing: r.signing,
		sightings: map[string]map[types.UID]time.Time{}}
}

// NeedLeaderElection is true: one hub collects.
func (o *OrphanCollector) NeedLeaderElection() bool { return true }

// Start looks every interval until ctx ends.
func (o *OrphanCollector) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphans")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-o.clock.After(o.interval):
		}
		if n, err := o.Collect(ctx); err != nil {
			log.Error(err, "Collecting orphaned copies")
		} else if n > 0 {
			log.Info("Removed orphaned copies", "count", n)
		}
	}
}

// Collect removes the orphaned copies on every connected worker and
// returns how many it removed.
func (o *OrphanCollector) Collect(ctx context.Context) (int, error) {
	var wcs strata.WorkerClusterList
	if err := o.client.List(ctx, &wcs); err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, wc := range wcs.Items {
		copies, err := o.fleet.Copies(ctx, wc.Name)
		if errors.Is(err, fleet.ErrNotConnected) {
			continue // not connected: looked at when it is
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := o.collect(ctx, wc.Name, creationGrace, copies, o.verifier(ctx, wc.Name), nil)
		removed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// CollectWorker removes the orphaned copies on one worker, whatever their
// age: the fleet calls it before it renews the fencing Lease of a worker
// that returns, so that its agent never resumes a copy whose workload was
// placed elsewhere meanwhile. A copy it may not delete does not hold the
// renewal up: it is reported (the WorkerCluster's Dispatching condition,
// the log) and revoked in the Lease instead, so that the agent never runs
// it. It fails only when the worker's copies cannot be listed.
//
// It lists the copies from the worker's API server, every kind: a copy of a
// kind whose informer is not synced yet must not be missed.
func (o *OrphanCollector) CollectWorker(ctx context.Context, cluster string) (fleet.Sweep, error) {
	copies, err := o.fleet.LiveCopies(ctx, cluster)
	if err != nil {
		return fleet.Sweep{}, err
	}
	sweep := fleet.Sweep{Present: map[string]bool{}}
	for _, j := range copies {
		if uid, gen, ok := dispatch.CopyOf(j.Object()); ok {
			sweep.Present[dispatch.Key(uid, gen)] = true
		}
	}
	// A copy whose Job lost the hub's labels keeps its revocation while
	// its Workload carries the dispatch: otherwise the agent would resume
	// it with the next renewal.
	live, err := o.fleet.LiveDispatches(ctx, cluster)
	if err != nil {
		return fleet.Sweep{}, err
	}
	// What was read is the cluster the hub dispatched to, or the sweep
	// ends nothing: through an address repointed to another cluster, the
	// worker's own copies would all look gone and their revocations end.
	verify := o.verifier(ctx, cluster)
	if err := verify(); err != nil {
		return fleet.Sweep{}, err
	}
	var hidden []string
	for _, k := range live {
		if !sweep.Present[k] {
			hidden = append(hidden, k)
		}
		sweep.Present[k] = true
	}
	// Such a copy the hub placed elsewhere meanwhile (after replaceAfter
	// with the worker cut off) is revoked now, though no revocation of it
	// was written: a process that restarted since lost the one it held in
	// memory, and this renewal would lift the worker's fence and let the
	// agent resume it beside the workload's new copy. Only dispatches of
	// the hub's own Workloads count (by UID): a tenant's Job labelled as a
	// copy fills no Lease.
	stale, err := o.moved(ctx, cluster, hidden)
	if err != nil {
		return fleet.Sweep{}, err
	}
	sweep.Stuck = append(sweep.Stuck, stale...)
	_, err = o.collect(ctx, cluster, 0, copies, verify, func(cp client.Object, err error) {
		if uid, gen, ok := dispatch.CopyOf(cp); ok {
			sweep.Stuck = append(sweep.Stuck, dispatch.Key(uid, gen))
		}
		ctrl.LoggerFrom(ctx).Info("An orphaned copy cannot be removed; revoking it in the fencing Lease instead", "cluster", cluster,
			"copy", client.ObjectKeyFromObject(cp), "error", err.Error())
	})
	if errors.Is(err, errHubRead) || errors.Is(err, fleet.ErrClusterChanged) {
		return fleet.Sweep{}, err
	}
	return sweep, nil
}

// verifier returns a check, made once, that cluster's address still
// reaches the cluster the hub dispatched to (fleet.CheckCluster).
func (o *OrphanCollector) verifier(ctx context.Context, cluster string) func() error {
	return sync.OnceValue(func() error { return o.fleet.CheckCluster(ctx, cluster) })
}

// moved returns, of dispatch keys found on cluster by the copies'
// Workloads only, those that a hub Workload of this hub (the key's UID)
// no longer places there: it was placed elsewhere, or its dispatch
// undone. A key of a newer dispatch than the Workload shows is not (the
// informer is behind), nor one of no hub Workload.
func (o *OrphanCollector) moved(ctx context.Context, cluster string, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var list strata.WorkloadList
	if err := o.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("%w: %w", errHubRead, err)
	}
	byUID := make(map[types.UID]*strata.Workload, len(list.Items))
	for i := range list.Items {
		byUID[list.Items[i].UID] = &list.Items[i]
	}
	var out []string
	for _, k := range keys {
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			continue
		}
		gen, err := strconv.ParseInt(k[i+1:], 10, 64)
		wl := byUID[types.UID(k[:i])]
		if err != nil || wl == nil || gen > dispatch.Generation(wl) {
			continue
		}
		if on, _, placedGen, placed := dispatch.Placed(wl); !placed || on != cluster || placedGen != gen {
			out = append(out, k)
		}
	}
	return out, nil
}

// errHubRead marks a failure to read the hub's own objects.
var errHubRead = errors.New("reading the hub's Workloads")

// collect removes the orphaned copies on cluster among copies, those older
// than grace (a younger copy may belong to a dispatch the hub's informer
// does not show yet). Only copies this hub made count (Made): an object
// that merely carries its labels is left alone, and reported. verify is
// called before the first removal: nothing is removed when it fails.
//
// stuck, when set, is told of each orphan whose deletion failed.
func (o *OrphanCollector) collect(ctx context.Context, cluster string, grace time.Duration, copies []jobs.Job, verify func() error, stuck func(client.Object, error)) (int, error) {
	key, err := o.signing.Get(ctx)
	if err != nil {
		// The records still tell the copies of existing Workloads.
		ctrl.LoggerFrom(ctx).Error(err, "Only copies of existing hub Workloads can be told as this hub's")
	}
	removed := 0
	var errs []error
	var notOurs []string
	var seen map[types.UID]time.Time
	if grace > 0 {
		seen = o.sighted(cluster, copies)
	}
	for _, j := range copies {
		cp := j.Object()
		if grace > 0 && o.clock.Since(seen[cp.GetUID()]) < grace {
			continue
		}
		wl, err := o.hubWorkload(ctx, j)
		if err != nil {
			return removed, fmt.Errorf("%w: %w", errHubRead, err) // the next round
		}
		if !Orphaned(cp, cluster, wl) {
			continue
		}
		if !Made(key, j.Kind().GroupVersionKind().GroupKind(), cp, wl) {
			notOurs = append(notOurs, cp.GetNamespace()+"/"+cp.GetName())
			continue
		}
		if err := verify(); err != nil {
			return removed, err
		}
		// One worker refusing a deletion holds up no other.
		if err := o.remove(ctx, cluster, cp); err != nil {
			if stuck != nil {
				stuck(cp, err)
			}
			errs = append(errs, fmt.Errorf("removing orphaned copy %s/%s on %s: %w", cp.GetNamespace(), cp.GetName(), cluster, err))
			continue
		}
		removed++
	}
	if len(notOurs) > 0 {
		ctrl.LoggerFrom(ctx).Info("Leaving alone objects that carry this hub's copy labels but that it did not make (no valid signature, no hub Workload of theirs)",
			"cluster", cluster, "count", len(notOurs), "objects", firstOf(notOurs, 5))
	}
	return removed, errors.Join(errs...)
}

// sighted notes the copies on cluster this process sees for the first
// time, forgets those gone, and returns when each was first seen.
func (o *OrphanCollector) sighted(cluster string, copies []jobs.Job) map[types.UID]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	before := o.sightings[cluster]
	now := o.clock.Now()
	seen := make(map[types.UID]time.Time, len(copies))
	for _, j := range copies {
		uid := j.Object().GetUID()
		if t, ok := before[uid]; ok {
			seen[uid] = t
		} else {
			seen[uid] = now
		}
	}
	o.sightings[cluster] = seen
	return seen
}

// firstOf returns at most n of names, with how many more there are.
func firstOf(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(names[:n:n], fmt.Sprintf("and %d more", len(names)-n))
}

// hubWorkload returns the hub Workload of a copy's name; nil when there is
// none.
func (o *OrphanCollector) hubWorkload(ctx context.Context, j jobs.Job) (*strata.Workload, error) {
	cp := j.Object()
	var wl strata.Workload
	if err := o.client.Get(ctx, types.NamespacedName{Namespace: cp.GetNamespace(), Name: j.Kind().WorkloadName(cp.GetName())}, &wl); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &wl, nil
}

// Made says whether this hub made cp, an object of kind gk with its origin
// label, given wl, the hub Workload of its name (nil: none): the copy
// carries the hub's signature (key), or the hub's own records name it (it
// is a copy of wl, by UID). Labels alone are not enough: anyone who may
// label a Job on a worker can put the hub's on it, and the hub must not
// delete, on a tenant's word, what it did not make. The records cover the
// copies hubs made before they signed.
func Made(key []byte, gk schema.GroupKind, cp metav1.Object, wl *strata.Workload) bool {
	if dispatch.Signed(key, gk, cp) {
		return true
	}
	uid, _, ok := dispatch.CopyOf(cp)
	return ok && wl != nil && wl.UID == uid
}

// Orphaned says whether a copy on cluster stands for no dispatch of hub
// Workload wl (nil: there is no hub Workload of its name): it has no
// dispatch labels, belongs to another Workload of that name, or to a
// dispatch that was undone or moved on. A copy of a newer dispatch than
// wl shows is not: the hub's informer is behind.
func Orphaned(cp metav1.Object, cluster string, wl *strata.Workload) bool {
	uid, gen, ok := dispatch.CopyOf(cp)
	if !ok || wl == nil || wl.UID != uid {
		return true
	}
	if gen > dispatch.Generation(wl) {
		return false
	}
	placedOn, _, placedGen, placed := dispatch.Placed(wl)
	return !placed || placedOn != cluster || placedGen != gen
}
