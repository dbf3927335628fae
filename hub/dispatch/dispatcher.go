package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Dispatcher places the hub's pending Workloads: in passes over every
// ClusterQueue, heads first, each on the best (worker, flavor) of the
// fleet's targets, reserved there and recorded as dispatched: in the
// dispatch journal, one write per pass, and from there in the Workload's
// status (journal.go). The copy itself is created by the copies
// controller, which the journal wakes. A pass runs when something that can
// change a decision changes — a Workload, a Job's suspension, a queue, a
// WorkerCluster, a worker's summaries — and when a backoff ends; never by
// polling. A pass reads the Workloads and jobs from an index its
// informers' events keep (WorkloadEvents, JobEvents), not from a list.
type Dispatcher struct {
	client client.Client
	fleet  targetSource
	policy *placement.Policy
	// fair: fair sharing's strategies between the hub's queues (the hub
	// configuration's fairSharing); nil when it is off.
	fair []queue.FairStrategy
	// afs is admission fair sharing between the LocalQueues of a hub
	// ClusterQueue (the hub configuration's admissionFairSharing);
	// afsPenalties what this process dispatched from each LocalQueue
	// since its last usage sample.
	afs          queue.AdmissionFairSharing
	afsPenalties queue.Penalties
	recorder     events.EventRecorder
	clock        clock.Clock
	staleAfter   time.Duration
	backoff      time.Duration
	// createsNamespaces: the copies controller creates a copy's missing
	// namespace on a worker (dispatch.createNamespaces).
	createsNamespaces bool

	wake chan struct{}
	// rebuilt are the targets whose reservations were rebuilt from the
	// hub Workloads' records: once per target per process.
	rebuilt map[*placement.Target]bool

	mu sync.Mutex
	// recorded is the last dispatch this process wrote per Workload, to
	// tell a Workload the informer shows pending from one it has not shown
	// dispatched yet.
	recorded map[types.UID]recorded
	// reservedAhead are the reservations at the hub this process wrote,
	// by Workload, with the resourceVersion each was written over, until
	// the informer shows another (reserve).
	reservedAhead map[types.UID]reservedWrite
	// waiting records the last reason written per waiting Workload, so
	// that a pass writes only what changed.
	// By UID: a Workload made again under the same name is another.
	waiting map[types.UID]written
	// lastDispatch is the dispatch time of the last dispatch decided.
	lastDispatch time.Time
	// reasons writes waiting reasons, apart from the passes.
	reasons *reasonQueue
	// index holds the Workloads and jobs a pass reads, from their
	// informers' events (WorkloadEvents, JobEvents).
	index *index
	// reclaims are the quota preemptions under way, by preemptor UID; only
	// passes use them.
	reclaims map[types.UID]*reclaim
	// spread are the dispatches this process decided, for topology
	// spreading across the fleet until the informer shows them recorded;
	// only passes use them.
	spread map[types.UID]spreadEntry
	// journal is the write-ahead record of the dispatches (journal.go);
	// nil: each dispatch is recorded by a status write of its own.
	journal *Journal
	// burned is, per Workload, the highest dispatch generation whose
	// journal write failed: it may have landed all the same (an answer
	// lost), unseen by this process, so the next dispatch takes a later
	// generation and a restarted hub that reads both keeps the later one.
	burned map[types.UID]int64
}

// WithJournal records dispatches in j, one write per pass, instead of one
// status write each; Start reads what earlier processes left in it.
func (d *Dispatcher) WithJournal(j *Journal) *Dispatcher {
	d.journal = j
	return d
}

// New returns a Dispatcher.
func New(c client.Client, f *fleet.Fleet, cfg *configv1beta1.HubConfiguration, recorder events.EventRecorder, clk clock.Clock) *Dispatcher {
	return &Dispatcher{
		client: c, fleet: f, recorder: recorder, clock: clk,
		policy:            placement.New(cfg.Dispatch.PlacementPolicy, tas.OptionsFrom(cfg.TopologyAwareScheduling), 0),
		fair:              preemption.FairStrategies(cfg.FairSharing),
		afs:               queue.NewAdmissionFairSharing(cfg.AdmissionFairSharing),
		afsPenalties:      queue.Penalties{},
		staleAfter:        cfg.Dispatch.SummaryStaleAfter.Duration,
		backoff:           cfg.Dispatch.RejectionBackoff.Duration,
		createsNamespaces: cfg.Dispatch.CreateNamespaces,
		wake:              make(chan struct{}, 1),
		rebuilt:           map[*placement.Target]bool{},
		waiting:           map[types.UID]written{},
		recorded:          map[types.UID]recorded{},
		reservedAhead:     map[types.UID]reservedWrite{},
		burned:            map[types.UID]int64{},
		spread:            map[types.UID]spreadEntry{},
		reasons:           newReasonQueue(),
		index:             newIndex(),
	}
}

// Wake asks for a pass.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is true: one hub dispatches.
func (d *Dispatcher) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("dispatcher")
	ctx = ctrl.LoggerInto(ctx, log)
	go d.reasons.run(ctx, maxPassWrites)
	go d.warmCaches(ctx)
	if !d.loadJournal(ctx) {
		return nil
	}
	d.Wake()
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-timer:
		}
		next, took, err := d.pass(ctx)
		if err != nil {
			log.Error(err, "Dispatch pass")
			// Retry soon: a failed write or read.
			next = time.Second
		}
		timer = nil
		if next > 0 {
			timer = d.clock.After(next)
		}
		if gap := passGap(took); gap > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(gap):
			}
		}
	}
}

// loadJournal reads the dispatches earlier processes journalled and did
// not see recorded, retrying until it can: no pass runs before, or it
// could decide a Workload whose copy is already sent. False when ctx
// ended first.
func (d *Dispatcher) loadJournal(ctx context.Context) bool {
	if d.journal == nil {
		return true
	}
	for {
		entries, err := d.journal.Load(ctx)
		if err == nil {
			d.mu.Lock()
			for _, e := range entries {
				if r, ok := d.recorded[e.UID]; !ok || r.generation < e.Generation {
					d.recorded[e.UID] = recordedOf(e)
				}
				// Topology spreading counts its plan as the record's.
				if hints, err := workload.DecodeHints(e.TopologyHint); err == nil && e.TopologyHint != "" {
					d.spread[e.UID] = spreadEntry{namespace: e.Namespace, generation: e.Generation, cluster: e.Cluster, hints: hints}
				}
			}
			d.mu.Unlock()
			ctrl.LoggerFrom(ctx).Info("Read the dispatch journal", "dispatches", len(entries))
			return true
		}
		ctrl.LoggerFrom(ctx).Error(err, "Reading the dispatch journal; nothing is dispatched until it is read")
		select {
		case <-ctx.Done():
			return false
		case <-d.clock.After(time.Second):
		}
	}
}

// warmCaches starts, without waiting for them, the informers of what a
// pass reads only once a Workload is there (the flavors and Topologies
// whose levels it checks): read first by a pass, each would hold that
// pass until its initial list, about a second on an API server that
// streams lists (the end of an empty list waits for etcd's next progress
// notification), with the first burst of Jobs waiting behind it.
func (d *Dispatcher) warmCaches(ctx context.Context) {
	for _, l := range []client.ObjectList{&strata.ResourceFlavorList{}, &strata.TopologyList{}} {
		if err := d.client.List(ctx, l); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).V(2).Info("Warming the dispatcher's caches", "error", err.Error())
		}
	}
}

// Pacing of passes: a pass over a large backlog is not free (~150 ms
// over 50,000 pending Workloads), and with admissions and completions
// coming all the time, passes ran back to back and took more than a core
// (BenchmarkHubBacklog, 2 workers, 48,000 pending: 1.4 cores) from the
// copies controller and the writes. After a pass that computed longer
// than minPacedPass, the next waits as long as that took, at most
// maxPassGap: passes then take at most half of a core, and what happens
// meanwhile is decided in one pass. A pass of a small fleet (a few
// milliseconds) is not held back, nor is one whose writes were slow: the
// time its writes waited for the API server is not counted.
const (
	minPacedPass = 20 * time.Millisecond
	maxPassGap   = time.Second
)

// passGap is how long to wait after a pass that computed for took before
// the next.
func passGap(took time.Duration) time.Duration {
	if took < minPacedPass {
		return 0
	}
	return min(took, maxPassGap)
}

// Pass places what it can. It returns when the next pass is due without
// an event (a backoff ending), 0 when none is.
func (d *Dispatcher) Pass(ctx context.Context) (time.Duration, error) {
	next, _, err := d.pass(ctx)
	return next, err
}

// pass is Pass, and also returns how long the pass computed: the time
// to its writes, which is what pacing (passGap) measures. The writes wait
// on the API server, not on this process's CPU; counted, they kept the
// dispatcher idle as long again during a burst while Workloads queued.
func (d *Dispatcher) pass(ctx context.Context) (time.Duration, time.Duration, error) {
	now := d.clock.Now()
	start := time.Now()
	if !d.index.hasSynced() {
		return 100 * time.Millisecond, 0, nil
	}
	// The informer's Workloads that have not finished, as the index's
	// entries: a pass copies only those it writes.
	entries := d.index.list()

	// 1. See the fleet: its workers, from their WorkerClusters (their
	// targets are held in 3).
	workers, view, err := d.seeWorkers(ctx)
	if err != nil {
		return 0, time.Since(start), err
	}

	// 2. Collect what is pending, by ClusterQueue; what is dispatched
	// charges its queue's usage.
	c, errs := d.collect(ctx, entries, now)

	// 3. Place, holding the fleet's targets: their reservations rebuilt,
	// then the queues served head by head, each in admission order.
	writes := &passWrites{}
	for _, v := range c.drained {
		d.markDrained(ctx, v, writes)
	}
	next, err := d.placeOnTargets(ctx, workers, c, view, now, writes)
	errs = append(errs, err)
	if c.retry > 0 && (next == 0 || c.retry < next) {
		next = c.retry
	}
	took := time.Since(start)
	metrics.HubDispatchPass.Observe(took.Seconds())
	metrics.HubPendingWorkloads.Set(float64(len(c.waiting)))

	// 4. Write the pass's deferred writes, the fleet's targets let go.
	errs = append(errs, d.runWrites(ctx, writes)...)
	if d.journal != nil {
		d.journal.Prune(ctx)
	}
	return next, took, errors.Join(errs...)
}
