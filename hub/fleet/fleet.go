// Package fleet is the hub's view of its worker clusters: one connection
// per worker, with informers of the worker's CapacitySummaries and of the
// copies this hub dispatched there (Jobs, JobSets, ... and their Workloads
// labelled with the hub's origin), kept current by the WorkerCluster controller; and the
// placement targets built from the summaries, with the hub's in-flight
// reservations. It is a manager Runnable: the connections live as long as
// the manager.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/tas"
)

// Fleet holds a connection to every registered worker. It is safe for
// concurrent use.
type Fleet struct {
	scheme *runtime.Scheme
	origin string
	// compression is whether the workers' API servers are asked to gzip
	// their responses (SetCompression).
	compression bool
	// changed receives a worker's name whenever its summaries change or its
	// connection ends.
	changed chan string
	// copies receives the key of the hub Workload whose copy changed on a
	// worker.
	copies chan types.NamespacedName

	mu      sync.Mutex
	ctx     context.Context // the manager's, once started
	started chan struct{}
	remotes map[string]*remote
	// listeners are called with a worker's name when its summaries change.
	listeners []func(string)
	// connected are called with a worker's name once its informers are
	// synced on a new connection.
	connectedListeners []func(string)
	// healthListeners are called with a worker's name when the health
	// probe takes it as down or as answering again.
	healthListeners []func(string)

	// tmu guards targets, the placement targets of every worker by flavor,
	// and their reservations.
	tmu     sync.Mutex
	targets map[string]map[string]*placement.Target

	// fencing, when set, has the hub renew a fencing Lease on every
	// worker; renewed is when it last did, per worker (fencing.go). Both
	// guarded by mu.
	fencing *Fencing
	renewed map[string]time.Time
	// published is, per worker, the Lease duration its last renewal that
	// may have landed carried (0: none), or, before this process renewed
	// it, the one its WorkerCluster recorded (SeedPublished).
	published map[string]time.Duration
	// fences is the state of each worker's Lease renewals (fencing.go).
	fences    map[string]fenceState
	startedAt time.Time
	// clock is the hub's: what fencing measures (renewals, startedAt).
	clock       clock.PassiveClock
	beforeRenew func(ctx context.Context, worker string) (Sweep, error)
	// revoked are, per worker, the dispatches whose copies there must not
	// run, written into its fencing Lease (revocations.go), each true once
	// a renewal that landed wrote it; renewing holds the worker's renewing
	// lock while it writes them.
	revoked  map[string]map[string]bool
	renewing map[string]*sync.Mutex
	// leaseVersions are, per worker, the resourceVersion of the fencing
	// Lease this process last wrote: a Lease read at another version was
	// written by another hub process since (renewOnce).
	leaseVersions map[string]string
	// wakes ask each worker's renewal loop for a renewal now (a new
	// revocation); revokedAt is when each revocation not written yet was
	// made (RevocationWritten), writtenAt when each was first written (or
	// adopted), and seen those whose copy a sweep found: a sweep ends none
	// whose copy it never found younger than revocationHold (settle).
	wakes     map[string]chan struct{}
	revokedAt map[string]map[string]time.Time
	writtenAt map[string]map[string]time.Time
	seen      map[string]map[string]bool
	// clusterIDs are the identities of the clusters the hub dispatched to,
	// by worker, and identityChecked when each was last confirmed
	// (identity.go); guarded by mu.
	clusterIDs      map[string]string
	identityChecked map[string]time.Time
	switches        map[string]ClusterSwitch
	// recounting are the workers whose recount is due (recount); guarded
	// by mu.
	recounting map[string]bool

	// smu guards sightings: per worker and summary name, when the hub saw
	// the summary's observedTime change, on its own clock (summaryAge);
	// written, when each summary was last written by the worker's API
	// server's clock; and offsets, each worker API server's clock against
	// the hub's (sightings.go).
	smu       sync.Mutex
	sightings map[string]sighting
	written   map[string]time.Time
	offsets   map[string]time.Duration
	// generations: each worker's open connection's generation, which its
	// informer events and answers carry (openSightings); generation, the
	// last one given.
	generations map[string]uint64
	generation  uint64

	// hmu guards hints, the placement of each dispatch whose copy is to be
	// created, by dispatch key: read by the copies controller without
	// waiting for a dispatch pass, which holds tmu.
	hmu   sync.Mutex
	hints map[string][]*tas.Assignment
	// dispatchedHere are the dispatches this process decided whose
	// reservation has not ended (NoteDispatched); guarded by hmu.
	dispatchedHere map[string]bool
}

// remote is one worker's connection.
type remote struct {
	// identity says which credential the connection uses; a new one
	// replaces the connection.
	identity string
	cache    crcache.Cache
	// client writes to the worker, and reads what the cache may not have
	// yet.
	client client.Client
	cancel context.CancelFunc
	synced bool
	health health
	// kinds are the caches of copies of kinds other than batch/v1 Jobs,
	// by kind, once the worker was found to serve them; discovered is what
	// its discovery said of each (see kinds.go).
	kinds      map[schema.GroupVersionKind]*kindWatch
	discovered map[schema.GroupVersionKind]bool
	// connectedAt is when this connection was made, on the hub's clock.
	connectedAt time.Time
	// queues are the worker's Namespaces, LocalQueues and ClusterQueues
	// (queues.go).
	queues queuesWatch
}

// Client rate limits towards each worker.
const (
	workerQPS   = 200
	workerBurst = 400
)

// New returns an empty fleet of the hub identified by origin.
func New(scheme *runtime.Scheme, origin string) *Fleet {
	return &Fleet{scheme: scheme, origin: origin, changed: make(chan string, 1024), copies: make(chan types.NamespacedName, 4096),
		started: make(chan struct{}), remotes: map[string]*remote{}, targets: map[string]map[string]*placement.Target{},
		hints: map[string][]*tas.Assignment{}, dispatchedHere: map[string]bool{}, renewed: map[string]time.Time{}, published: map[string]time.Duration{}, fences: map[string]fenceState{}, revoked: map[string]map[string]bool{}, wakes: map[string]chan struct{}{}, revokedAt: map[string]map[string]time.Time{}, writtenAt: map[string]map[string]time.Time{}, seen: map[string]map[string]bool{}, clusterIDs: map[string]string{}, identityChecked: map[string]time.Time{}, switches: map[string]ClusterSwitch{}, renewing: map[string]*sync.Mutex{}, leaseVersions: map[string]string{}, sightings: map[string]sighting{}, written: map[string]time.Time{}, offsets: map[string]time.Duration{}, generations: map[string]uint64{}, recounting: map[string]bool{},
		clock: clock.RealClock{}}
}

// SetCompression says whether the clients of workers connected from now
// on ask their API servers to gzip responses and watch streams
// (configv1beta1.WorkerConnections). Call it before the fleet starts.
func (f *Fleet) SetCompression(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compression = on
}

// Changed receives the names of workers whose summaries changed.
func (f *Fleet) Changed() <-chan string { return f.changed }

// CopyEvents receives the keys of hub Workloads whose copies changed on a
// worker: created, admitted, running, finished, deleted.
func (f *Fleet) CopyEvents() <-chan types.NamespacedName { return f.copies }

// OnSummaries calls fn with a worker's name whenever its summaries change,
// its connection ends, or its queues change (queues.go). fn must not
// block.
func (f *Fleet) OnSummaries(fn func(worker string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listeners = append(f.listeners, fn)
}

// OnConnected calls fn with a worker's name each time a new connection to
// it has read the worker's summaries and copies. fn must not block.
func (f *Fleet) OnConnected(fn func(worker string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connectedListeners = append(f.connectedListeners, fn)
}

// Origin is the hub's identity on the workers.
func (f *Fleet) Origin() string { return f.origin }

// Start keeps the connections until ctx ends, then closes them.
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	f.startedAt = f.clock.Now()
	close(f.started)
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, r := range f.remotes {
		r.cancel()
		delete(f.remotes, name)
	}
	return nil
}

// StartedAt is when this process started leading (the hub's clock);
// zero before.
func (f *Fleet) StartedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.startedAt
}

// NeedLeaderElection is true: only the leader talks to the workers.
func (f *Fleet) NeedLeaderElection() bool { return true }

// Connect makes sure worker name is connected with cfg, identified by
// identity (a connection with another identity is replaced), and waits up
// to timeout for its summaries to be read. An error says why the worker
// cannot be reached; the connection is kept and retried by the informer.
func (f *Fleet) Connect(ctx context.Context, name, identity string, cfg *rest.Config, timeout time.Duration) error {
	select {
	case <-f.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	if _, ok := f.renewed[name]; !ok {
		// Not renewed by this process yet: the hub may have renewed it just
		// before it started.
		f.renewed[name] = f.clock.Now()
	}
	r := f.remotes[name]
	if r != nil && r.identity != identity {
		r.cancel()
		delete(f.remotes, name)
		f.forgetSightings(name)
		r = nil
	}
	if r == nil {
		var err error
		if r, err = f.connect(name, identity, cfg); err != nil {
			f.mu.Unlock()
			return err
		}
		f.remotes[name] = r
	}
	synced := r.synced
	f.mu.Unlock()
	if synced {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !r.cache.WaitForCacheSync(wait) {
		return fmt.Errorf("the worker's capacity summaries could not be read within %s", timeout)
	}
	f.mu.Lock()
	r.synced = true
	listeners := f.connectedListeners
	f.mu.Unlock()
	for _, fn := range listeners {
		fn(name)
	}
	return nil
}

// connect starts an informer of the worker's CapacitySummaries. f.mu is held.
func (f *Fleet) connect(name, identity string, cfg *rest.Config) (*remote, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "strata-hub"
	cfg.DisableCompression = !f.compression
	// One client per worker carries every copy of a burst; client-go's
	// default of 5 requests per second would make the hub the bottleneck.
	// The worker's API priority and fairness protects it.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = workerQPS, workerBurst
	}
	mine := labels.SelectorFromSet(labels.Set{strata.OriginLabel: f.origin})
	// rest.Config.Timeout bounds a whole response, a watch's too: the
	// informers would be cut and re-listed every Timeout. Requests keep it
	// (the direct client below); watches go without.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	// The worker API server's clock against the hub's, from its answers'
	// Date headers: how long ago a summary found at the hub's start was
	// written (sightings.go).
	gen := f.openSightings(name)
	watchCfg.Wrap(f.serverDates(name, gen))
	c, err := crcache.New(watchCfg, crcache.Options{
		Scheme: f.scheme,
		ByObject: map[client.Object]crcache.ByObject{
			// Not the copies a hub keeps of its workers' summaries, should
			// this worker be a hub cluster too.
			&strata.CapacitySummary{}: {Label: summarycopy.Published(), Transform: f.summaryWritten(name, gen)},
			&strata.Workload{}:        {Label: mine},
			&batchv1.Job{}:            {Label: mine},
		},
		// A worker the hub cannot reach must not block the hub: reads fail
		// fast and the informer retries with its own backoff.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            crcache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("a client for the worker: %w", err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	inf, err := c.GetInformer(ctx, &strata.CapacitySummary{}, crcache.BlockUntilSynced(false))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the worker's capacity summaries: %w", err)
	}
	notify := func() { f.notify(ctx, name) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.sawSummary(name, gen, o); notify() },
		UpdateFunc: func(_, o any) { f.sawSummary(name, gen, o); notify() },
		DeleteFunc: func(o any) { f.summaryGone(name, gen, o); notify() },
	}); err != nil {
		cancel()
		return nil, err
	}
	for _, obj := range []client.Object{&strata.Workload{}, &batchv1.Job{}} {
		inf, err := c.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watching the hub's copies on the worker: %w", err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { f.copyChanged(name, o) },
			UpdateFunc: func(_, o any) { f.copyChanged(name, o) },
			DeleteFunc: func(o any) { f.copyChanged(name, o) },
		}); err != nil {
			cancel()
			return nil, err
		}
	}
	direct, err := client.New(cfg, client.Options{Scheme: f.scheme})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("a client for the worker: %w", err)
	}
	ready, err := readyz(cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("a client for the worker: %w", err)
	}
	go func() {
		if err := c.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			notify()
		}
	}()
	r := &remote{identity: identity, cache: c, client: direct, cancel: cancel, connectedAt: f.clock.Now(),
		kinds: map[schema.GroupVersionKind]*kindWatch{}, discovered: map[schema.GroupVersionKind]bool{}}
	go f.probe(ctx, name, r, ready)
	go f.watchKinds(ctx, name, r, cfg, watchCfg)
	go f.watchQueues(ctx, name, r, direct, watchCfg)
	go f.renewFence(ctx, name, r)
	return r, nil
}

// notify tells the WorkerCluster controller (through changed) and the
// listeners that a worker's summaries or health changed.
func (f *Fleet) notify(ctx context.Context, name string) {
	// Informer handlers may block (client-go buffers behind them); no
	// change is dropped.
	select {
	case f.changed <- name:
	case <-ctx.Done():
	}
	f.mu.Lock()
	listeners := f.listeners
	f.mu.Unlock()
	for _, fn := range listeners {
		fn(name)
	}
}

// copyChanged queues the hub Workload of a copy (a Job or its Workload)
// that changed on worker, and has the worker's WorkerCluster counted again
// soon.
func (f *Fleet) copyChanged(worker string, o any) {
	f.recount(worker)
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	name := obj.GetName()
	if j, isJob := jobs.AdaptAny(kinds.Hub, obj); isJob {
		name = j.Kind().WorkloadName(name)
	} else if wl, ok := obj.(*strata.Workload); ok {
		name = hubWorkloadOf(wl)
	}
	// Informer handlers may block (client-go buffers behind them): no
	// change of a copy is dropped.
	select {
	case f.copies <- types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}:
	case <-f.ctx.Done():
	}
}

// hubWorkloadOf is the name of the hub Workload whose copy's Workload wl
// is: wl's own name, or for a kind whose copy has several Workloads (a
// LeaderWorkerSet's groups) the one the kind says.
func hubWorkloadOf(wl *strata.Workload) string {
	for _, k := range kinds.Hub {
		if g, ok := k.(jobs.GroupedWorkloads); ok {
			if name, ok := g.HubWorkload(wl); ok {
				return name
			}
		}
	}
	return wl.Name
}

// recountDelay coalesces a worker's copy events into one recount of its
// WorkerCluster (status.workloads).
const recountDelay = time.Second

// recount has the WorkerCluster controller look at a worker once, a
// moment after its copies changed: a burst of copy events costs one
// reconcile, not one each.
func (f *Fleet) recount(worker string) {
	f.mu.Lock()
	if f.recounting[worker] {
		f.mu.Unlock()
		return
	}
	f.recounting[worker] = true
	f.mu.Unlock()
	time.AfterFunc(recountDelay, func() {
		f.mu.Lock()
		delete(f.recounting, worker)
		f.mu.Unlock()
		select {
		case f.changed <- worker:
		default: // the controller is busy with this worker's summaries anyway
		}
	})
}

// Forget drops a worker: its connection and its targets, with their
// reservations (the WorkerCluster is gone).
func (f *Fleet) Forget(name string) {
	f.Disconnect(name)
	f.tmu.Lock()
	defer f.tmu.Unlock()
	delete(f.targets, name)
}

// Disconnect closes a worker's connection; its targets stay, unavailable.
func (f *Fleet) Disconnect(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.remotes[name]; r != nil {
		r.cancel()
		delete(f.remotes, name)
	}
	// Connected again, the hub sees the summaries for the first time.
	f.forgetSightings(name)
}

// connected returns a worker's connection once its informers are synced.
func (f *Fleet) connected(name string) *remote {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.remotes[name]; r != nil && r.synced {
		return r
	}
	return nil
}

// ErrNotConnected says the worker is not connected, or not read yet.
var ErrNotConnected = errors.New("not connected")

// Client returns a client of the worker, for writes and for reads that
// must not wait for the informers.
func (f *Fleet) Client(name string) (client.Client, error) {
	r := f.connected(name)
	if r == nil {
		return nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	return r.client, nil
}
