package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Dispatcher places the hub's pending Workloads: in passes over every
// ClusterQueue, heads first, each on the best (worker, flavor) of the
// fleet's targets, reserved there and recorded in the Workload's status
// as dispatched. The copy itself is created by the copies controller,
// which the status update wakes. A pass runs when something that can
// change a decision changes — a Workload, a Job's suspension, a queue, a
// WorkerCluster, a worker's summaries — and when a backoff ends; never by
// polling. A pass reads the Workloads and jobs from an index its
// informers' events keep (WorkloadEvents, JobEvents), not from a list.
type Dispatcher struct {
	client     client.Client
	fleet      targetSource
	policy     *placement.Policy
	recorder   events.EventRecorder
	clock      clock.Clock
	staleAfter time.Duration
	backoff    time.Duration
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
}

// written is a waiting reason written: its condition's reason, and its
// message without numbers (workload.WithoutNumbers).
type written struct {
	reason, meaning string
}

type recorded struct {
	generation int64
	flavor     string
}

// targetSource is what the dispatcher asks of the fleet (*fleet.Fleet):
// the workers' targets, held while a pass decides, the topology hints of
// its dispatches, and what the hub knows of each worker's kinds and
// queues.
type targetSource interface {
	WithTargets(ctx context.Context, workers []fleet.Worker, now time.Time, staleAfter time.Duration, fn func([]*placement.Target) error) error
	Release(worker, flavor, key string)
	SetHint(key string, assignments []*tas.Assignment)
	PruneHints(live func(key string) bool)
	Serves(worker string, k jobs.Kind) (served, known bool)
	QueueRefusal(worker string, t fleet.QueueTarget) (reason, message string, known bool)
}

// New returns a Dispatcher.
func New(c client.Client, f *fleet.Fleet, cfg *configv1beta1.HubConfiguration, recorder events.EventRecorder, clk clock.Clock) *Dispatcher {
	return &Dispatcher{
		client: c, fleet: f, recorder: recorder, clock: clk,
		policy:            placement.New(cfg.Dispatch.PlacementPolicy, tas.OptionsFrom(cfg.TopologyAwareScheduling), 0),
		staleAfter:        cfg.Dispatch.SummaryStaleAfter.Duration,
		backoff:           cfg.Dispatch.RejectionBackoff.Duration,
		createsNamespaces: cfg.Dispatch.CreateNamespaces,
		wake:              make(chan struct{}, 1),
		rebuilt:           map[*placement.Target]bool{},
		waiting:           map[types.UID]written{},
		recorded:          map[types.UID]recorded{},
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
	d.Wake()
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-timer:
		}
		start := time.Now()
		next, err := d.Pass(ctx)
		if err != nil {
			log.Error(err, "Dispatch pass")
			// Retry soon: a failed write or read.
			next = time.Second
		}
		timer = nil
		if next > 0 {
			timer = d.clock.After(next)
		}
		if gap := passGap(time.Since(start)); gap > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(gap):
			}
		}
	}
}

// Pacing of passes: a pass over a large backlog is not free (~150 ms
// over 50,000 pending Workloads), and with admissions and completions
// coming all the time, passes ran back to back and took more than a core
// (BenchmarkHubBacklog, 2 workers, 48,000 pending: 1.4 cores) from the
// copies controller and the writes. After a pass longer than
// minPacedPass, the next waits as long as it took, at most maxPassGap:
// passes then take at most half of a core, and what happens meanwhile is
// decided in one pass. A pass of a small fleet (a few milliseconds) is
// not held back.
const (
	minPacedPass = 20 * time.Millisecond
	maxPassGap   = time.Second
)

// passGap is how long to wait after a pass of the given length before the
// next.
func passGap(took time.Duration) time.Duration {
	if took < minPacedPass {
		return 0
	}
	return min(took, maxPassGap)
}

// pending is a Workload waiting to be placed, with its queue.
type pending struct {
	*entry
	job   client.Object
	queue string // its ClusterQueue
}

// Pass places what it can. It returns when the next pass is due without
// an event (a backoff ending), 0 when none is.
func (d *Dispatcher) Pass(ctx context.Context) (time.Duration, error) {
	now := d.clock.Now()
	start := time.Now()
	if !d.index.hasSynced() {
		return 100 * time.Millisecond, nil
	}
	// The informer's Workloads that have not finished, as the index's
	// entries: a pass copies only those it writes.
	entries := d.index.list()
	var wcs strata.WorkerClusterList
	if err := d.client.List(ctx, &wcs); err != nil {
		return 0, err
	}
	workers := make([]fleet.Worker, 0, len(wcs.Items))
	view := &passView{clusterLabels: map[string]labels.Set{}, queueOf: map[string]workerQueue{}, refusals: map[string]queueRefusal{},
		waits: map[waitKey]waitOutcome{}, quota: map[quotaKey]quotaOutcome{}}
	for i := range wcs.Items {
		wc := &wcs.Items[i]
		w := fleet.Worker{Name: wc.Name, Cordoned: wc.Spec.Unschedulable, Deleting: !wc.DeletionTimestamp.IsZero()}
		if c := meta.FindStatusCondition(wc.Status.Conditions, strata.WorkerClusterConnected); c == nil || c.Status != metav1.ConditionTrue {
			w.NotConnected = "not connected"
			if c != nil {
				w.NotConnected = c.Reason + ": " + c.Message
			}
		}
		workers = append(workers, w)
		view.clusterLabels[wc.Name] = labels.Set(wc.Labels)
		wq := workerQueue{localQueue: wc.Spec.LocalQueueName}
		if wc.Spec.Onboarding != nil {
			wq.onboarding = wc.Spec.Onboarding.ClusterQueue
		}
		view.queueOf[wc.Name] = wq
	}

	var placed []*strata.Workload
	waiting := make([]pending, 0, len(entries))
	writes := &passWrites{}
	usage := map[string]map[string]corev1.ResourceList{} // ClusterQueue → flavor → usage
	var errs []error
	queues := map[string]*strata.ClusterQueue{}
	localQueues := map[types.NamespacedName]string{}
	d.forgetRecorded(entries)
	d.pruneHints(entries)
	for _, e := range entries {
		if e.deleting {
			continue
		}
		cq, err := d.clusterQueue(ctx, e.localQueue, localQueues, queues)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.placed {
			placed = append(placed, e.wl)
			if cq != nil {
				d.chargeUsage(usage, cq.Name, e.flavor, e)
			}
			continue
		}
		d.mu.Lock()
		r, written := d.recorded[e.uid]
		d.mu.Unlock()
		if written && r.generation > e.generation {
			// Dispatched by this process; the informer is behind.
			if cq != nil {
				d.chargeUsage(usage, cq.Name, r.flavor, e)
			}
			continue
		}
		if cq == nil || e.invalid {
			continue // intake says why on the Workload
		}
		job, err := d.job(ctx, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if job == nil || job.deleting {
			continue
		}
		if job.suspended {
			// On the hub, spec.suspend is the user's: nothing is sent.
			d.wait(ctx, pending{entry: e, job: job.job.Object()}, ReasonSuspended,
				fmt.Sprintf("the %s is suspended on the hub; it is dispatched when spec.suspend is false", e.kind.GroupVersionKind().Kind))
			continue
		}
		waiting = append(waiting, pending{entry: e, job: job.job.Object(), queue: cq.Name})
	}

	var next time.Duration
	err := d.fleet.WithTargets(ctx, workers, now, d.staleAfter, func(targets []*placement.Target) error {
		d.rebuild(ctx, targets, placed)
		var err error
		next, err = d.place(ctx, targets, waiting, queues, usage, view, now, writes)
		metrics.HubReservations.Set(float64(countReservations(targets)))
		return err
	})
	errs = append(errs, err)
	metrics.HubDispatchPass.Observe(time.Since(start).Seconds())
	metrics.HubPendingWorkloads.Set(float64(len(waiting)))
	// The pass's writes — dispatch records, waiting reasons — go out now,
	// with the fleet's targets unlocked: the copies controller and the
	// summaries need them meanwhile. A record not written undoes its
	// reservation; the quota it took in this pass stays taken until the
	// next pass, which its failure brings.
	for _, f := range writes.run() {
		d.fleet.Release(f.cluster, f.flavor, f.key)
		errs = append(errs, f.err)
	}
	return next, errors.Join(errs...)
}

// pruneHints drops the topology hints of dispatches that are no longer
// current: of Workloads gone or dispatched again.
func (d *Dispatcher) pruneHints(entries []*entry) {
	current := make(map[string]bool)
	for _, e := range entries {
		if e.placed {
			current[Key(e.uid, e.generation)] = true
		}
	}
	d.mu.Lock()
	for uid, r := range d.recorded {
		current[Key(uid, r.generation)] = true // written, not shown yet
	}
	d.mu.Unlock()
	d.fleet.PruneHints(func(key string) bool { return current[key] })
}

// forgetRecorded drops the dispatches the informer shows now, and those
// of Workloads that are gone; and, once they hold more than the
// Workloads there are, the reasons of Workloads that are gone (keyed by
// UID, a stale one is never read).
func (d *Dispatcher) forgetRecorded(entries []*entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) > len(entries) {
		live := make(map[types.UID]bool, len(entries))
		for _, e := range entries {
			live[e.uid] = true
		}
		for uid := range d.waiting {
			if !live[uid] {
				delete(d.waiting, uid)
			}
		}
	}
	if len(d.recorded) == 0 {
		return
	}
	seen := make(map[types.UID]bool, len(d.recorded))
	for _, e := range entries {
		r, ok := d.recorded[e.uid]
		if !ok {
			continue
		}
		seen[e.uid] = true
		if e.generation >= r.generation {
			delete(d.recorded, e.uid)
		}
	}
	for uid := range d.recorded {
		if !seen[uid] {
			delete(d.recorded, uid)
		}
	}
}

// clusterQueue returns the ClusterQueue of a Workload's LocalQueue, nil
// when either is missing (intake marks the Workload invalid then). local
// (LocalQueue → its ClusterQueue's name, "" when missing) and seen hold
// what the pass has read: most Workloads share a few queues.
func (d *Dispatcher) clusterQueue(ctx context.Context, key types.NamespacedName, local map[types.NamespacedName]string,
	seen map[string]*strata.ClusterQueue) (*strata.ClusterQueue, error) {
	name, ok := local[key]
	if !ok {
		var lq strata.LocalQueue
		if err := d.client.Get(ctx, key, &lq); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		name = lq.Spec.ClusterQueue
		local[key] = name
	}
	if name == "" {
		return nil, nil
	}
	if cq, ok := seen[name]; ok {
		return cq, nil
	}
	cq := &strata.ClusterQueue{}
	if err := d.client.Get(ctx, types.NamespacedName{Name: name}, cq); err != nil {
		cq = nil
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	seen[name] = cq
	return cq, nil
}

// job returns the hub job (of any kind) that controls a Workload, nil
// when there is none (any more). It is the informer's object, not a copy
// (a pass reads every waiting Workload's job): copy it before changing it.
func (d *Dispatcher) job(ctx context.Context, e *entry) (*jobEntry, error) {
	if e.kind == nil {
		return nil, nil
	}
	je, known := d.index.job(e)
	if known {
		return je, nil
	}
	// A kind no informer feeds the index with: read it.
	j, err := HubJob(ctx, d.client, e.wl, client.UnsafeDisableDeepCopy)
	if j == nil || err != nil {
		return nil, err
	}
	return &jobEntry{job: j, suspended: j.Suspended(), deleting: !j.Object().GetDeletionTimestamp().IsZero()}, nil
}

// HubJob returns the hub job (of any kind) that controls a hub Workload,
// nil when there is none (any more).
func HubJob(ctx context.Context, c client.Reader, wl *strata.Workload, opts ...client.GetOption) (jobs.Job, error) {
	owner := metav1.GetControllerOfNoCopy(wl)
	k := jobs.KindOf(kinds.Hub, owner)
	if k == nil {
		return nil, nil
	}
	obj := k.NewObject()
	if err := c.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}, obj, opts...); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if obj.GetUID() != owner.UID {
		return nil, nil
	}
	j, _ := k.Adapt(obj)
	return j, nil
}

// chargeUsage adds a dispatched Workload's requests to its queue's usage
// of its flavor.
func (d *Dispatcher) chargeUsage(usage map[string]map[string]corev1.ResourceList, cq, flavor string, e *entry) {
	if usage[cq] == nil {
		usage[cq] = map[string]corev1.ResourceList{}
	}
	queue.AddUsage(usage[cq], []strata.PodSetAssignment{{Flavor: flavor, ResourceUsage: e.need}})
}

// ChargeUsage adds a Workload's requests to usage (by flavor) of the
// flavor it is dispatched on.
func ChargeUsage(usage map[string]corev1.ResourceList, flavor string, wl *strata.Workload) {
	psas := make([]strata.PodSetAssignment, 0, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		psas = append(psas, strata.PodSetAssignment{Flavor: flavor, ResourceUsage: queue.TotalRequests(&wl.Spec.PodSets[i])})
	}
	queue.AddUsage(usage, psas)
}

// rebuild reserves, on each target first seen available, the
// dispatches recorded on hub Workloads (taking nothing for those its
// summary counts): after a restart the hub holds what it held before. A
// dispatch the summary counts whose placement no longer fits the summary's
// free capacity is not held (it needs its capacity only if the worker
// gives its admission back).
func (d *Dispatcher) rebuild(ctx context.Context, targets []*placement.Target, placed []*strata.Workload) {
	// Forget targets that are gone (a worker removed, a flavor's summary
	// replaced by a new target): a target seen again is rebuilt, and
	// Holds keeps that from reserving anything twice.
	current := make(map[*placement.Target]bool, len(targets))
	for _, t := range targets {
		current[t] = true
	}
	for t := range d.rebuilt {
		if !current[t] {
			delete(d.rebuilt, t)
		}
	}
	for _, t := range targets {
		if d.rebuilt[t] || t.Unavailable != "" {
			// An unavailable target gets no new work; its dispatches are
			// reserved again when it is available (Decide skips it now).
			continue
		}
		d.rebuilt[t] = true
		for _, wl := range placed {
			cluster, flavor, gen, _ := Placed(wl)
			key := Key(wl.UID, gen)
			if cluster != t.Cluster || flavor != t.Flavor || t.Holds(key) {
				continue
			}
			if dec := d.policy.Decide(wl, []string{flavor}, []*placement.Target{t}); dec.Cluster != "" {
				if err := dec.Reserve(targets, key); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "Rebuilding a reservation", "workload", client.ObjectKeyFromObject(wl))
					continue
				}
				if t.Reserved(key) {
					// Not in the summary yet: maybe its copy is not created
					// either (the copies controller forgets the hint when
					// it sees the copy).
					d.fleet.SetHint(key, dec.Assignments())
				}
			}
		}
	}
}

func countReservations(targets []*placement.Target) int {
	n := 0
	for _, t := range targets {
		n += t.Reservations()
	}
	return n
}

// place serves the queues head by head, as the agent does. Decisions
// are made one after the other, each reserved at once; their records and
// the waiting reasons go to writes, which Pass runs once the fleet's
// targets are let go.
func (d *Dispatcher) place(ctx context.Context, targets []*placement.Target, waiting []pending, queues map[string]*strata.ClusterQueue,
	usage map[string]map[string]corev1.ResourceList, view *passView, now time.Time, writes *passWrites) (time.Duration, error) {
	counts := map[string]int{}
	for _, p := range waiting {
		counts[p.queue]++
	}
	byQueue := make(map[string]*queue.Turn[pending], len(counts))
	for name, n := range counts {
		byQueue[name] = &queue.Turn[pending]{Queue: queues[name], Items: make([]pending, 0, n)}
	}
	for _, p := range waiting {
		t := byQueue[p.queue]
		t.Items = append(t.Items, p)
	}
	turns := make([]*queue.Turn[pending], 0, len(byQueue))
	for _, t := range byQueue {
		// A total order (namespace and name break ties): no stable sort
		// needed.
		slices.SortFunc(t.Items, func(a, b pending) int { return compareEntries(a.entry, b.entry) })
		turns = append(turns, t)
	}
	var errs []error
	var next time.Duration
	queue.Serve(turns, func(p pending) *strata.Workload { return p.wl },
		func(cq *strata.ClusterQueue, p pending) bool {
			if usage[cq.Name] == nil {
				usage[cq.Name] = map[string]corev1.ResourceList{}
			}
			blocks, retry, err := d.placeOne(ctx, targets, cq, usage[cq.Name], view, p, now, writes)
			if err != nil {
				errs = append(errs, err)
			}
			if retry > 0 && (next == 0 || retry < next) {
				next = retry
			}
			return blocks
		},
		func(cq *strata.ClusterQueue, behind []pending) {
			for _, p := range behind {
				d.wait(ctx, p, ReasonPending,
					fmt.Sprintf("waiting in StrictFIFO ClusterQueue %s behind workloads that fit nowhere yet", cq.Name))
			}
		})
	return next, errors.Join(errs...)
}

// placeOne decides and dispatches one Workload. blocks is true when it
// waits for capacity (not when it can never fit); retry is when a backoff
// that keeps a worker out ends.
func (d *Dispatcher) placeOne(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, used map[string]corev1.ResourceList,
	view *passView, p pending, now time.Time, writes *passWrites) (blocks bool, retry time.Duration, err error) {
	wl := p.wl
	// Flavors in the queue's order, within quota: the same for every
	// workload of the queue that needs as much, until a dispatch.
	qk := quotaKey{queue: cq.Name, need: p.needKey}
	q, ok := view.quota[qk]
	if !ok {
		for _, fq := range cq.Spec.Flavors {
			if err, _ := queue.CheckQuotaOf(fq, used[fq.Name], p.need); err != nil {
				q.notes = append(q.notes, fmt.Sprintf("flavor %s: %v", fq.Name, err))
				continue
			}
			q.flavors = append(q.flavors, fq.Name)
		}
		q.key = strings.Join(append(slices.Clip(q.flavors), q.notes...), "\x00")
		view.quota[qk] = q
	}
	flavors, notes := slices.Clip(q.flavors), slices.Clip(q.notes) // shared: appends copy
	if len(flavors) == 0 {
		d.wait(ctx, p, ReasonPending, "no flavor of ClusterQueue "+cq.Name+" has quota left: "+strings.Join(notes, "; "))
		return true, 0, nil
	}
	// A refusal for a queue fact of the worker's (no namespace, no
	// LocalQueue) keeps no backoff where the hub reads those facts: they
	// are checked below, and the workload goes there once they are fixed.
	var backoffs map[string]time.Time
	if p.attempts {
		backoffs = BackoffsExcept(wl, d.backoff, now, func(a *strata.PlacementAttempt) bool {
			if !QueueCauses[a.Reason] {
				return false
			}
			_, known := d.queueRefusal(view, a.Cluster, p)
			return known
		})
	}
	shape := p.shape
	// Within a pass capacity is only taken, never given back: a workload
	// that waits, waits for the same reason as every later one of its
	// queue, shape, flavors, kind and LocalQueue that no backoff singles
	// out. A backlog of thousands of a few shapes costs a decision per
	// shape, not per workload.
	var same *waitKey
	if len(backoffs) == 0 {
		same = &waitKey{queue: cq.Name, localQueue: p.localQueue, kind: p.kind.GroupVersionKind(), shape: shape, flavors: q.key}
		if o, ok := view.waits[*same]; ok {
			d.waitFor(ctx, p, o)
			return o.blocks, 0, nil
		}
	}
	o, dec := d.decide(ctx, targets, cq, view, p, shape, flavors, notes, backoffs, now)
	if dec == nil {
		o = withMeaning(o)
		if same != nil {
			view.waits[*same] = o
		}
		d.waitFor(ctx, p, o)
		return o.blocks, o.retry, nil
	}
	// The queue's usage changes: its quota is checked again.
	clear(view.quota)
	return false, o.retry, d.dispatch(ctx, targets, p, dec, o.message, now, used, writes)
}

// waitOutcome is why a workload waits: its condition's reason and
// message, whether it holds its queue (blocks), and when a backoff that
// keeps a worker out ends (retry).
type waitOutcome struct {
	reason, message string
	// meaning is the message without its numbers (newWait).
	meaning string
	blocks  bool
	retry   time.Duration
}

// withMeaning is o with its message truncated and its meaning computed.
func withMeaning(o waitOutcome) waitOutcome {
	w := newWait(o.reason, o.message)
	o.message, o.meaning = w.message, w.meaning
	return o
}

// waitKey is what decides a waiting outcome in a pass, besides backoffs.
type waitKey struct {
	queue      string
	localQueue types.NamespacedName
	kind       schema.GroupVersionKind
	shape      string
	// flavors are those within quota, and the notes on the others
	// (quotaOutcome.key).
	flavors string
}

// quotaKey is what decides which flavors of a queue have quota left for
// a workload in a pass, until a dispatch: the queue, and the workload's
// requests in all (entry.needKey).
type quotaKey struct {
	queue, need string
}

// quotaOutcome are the flavors of a queue within quota, in its order,
// and why the others are not; key joins both.
type quotaOutcome struct {
	flavors, notes []string
	key            string
}

// decide places p on the best eligible target of flavors (the queue's
// within quota; notes say why others are not): dec is the decision when
// it goes somewhere, nil when it waits (o says why); o.message is the
// reason of either.
func (d *Dispatcher) decide(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, view *passView, p pending,
	shape string, flavors, notes []string, backoffs map[string]time.Time, now time.Time) (waitOutcome, *placement.Decision) {
	wl := p.wl
	start := time.Now()
	// Levels are checked against the hub's Topology of a flavor when it
	// has one; otherwise each worker's summary says which levels it has.
	withLevels := flavors[:0:0]
	var mismatches []string
	for _, f := range flavors {
		if err := d.checkLevels(ctx, f, wl); err != nil {
			mismatches = append(mismatches, fmt.Sprintf("flavor %s: %v", f, err))
			continue
		}
		withLevels = append(withLevels, f)
	}
	if len(withLevels) == 0 {
		return waitOutcome{reason: ReasonNeverFits, message: "no flavor of ClusterQueue " + cq.Name + " has the topology levels the Job names: " + strings.Join(mismatches, "; ")}, nil
	}
	flavors = withLevels
	notes = append(notes, mismatches...)
	// Workers the queue may use, less those in backoff for this workload.
	selector := labels.Everything()
	if cq.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(cq.Spec.ClusterSelector)
		if err != nil {
			return waitOutcome{reason: ReasonPending, message: fmt.Sprintf("ClusterQueue %s has an invalid clusterSelector: %v", cq.Name, err)}, nil
		}
		selector = s
	}
	eligible, excluded, retry := eligibleTargets(targets, selector, view.clusterLabels, backoffs, flavors, now,
		func(cluster string) string { return LastRefusal(wl, cluster) })
	eligible, excluded = servingKind(eligible, excluded, p.kind, flavors, d.fleet.Serves)
	eligible, excluded = admittingQueues(eligible, excluded, flavors, func(cluster string) string {
		m, _ := d.queueRefusal(view, cluster, p)
		return m
	})
	dec := d.policy.DecideShape(wl, shape, flavors, eligible)
	metrics.HubPlacementLatency.Observe(time.Since(start).Seconds())
	reason := dec.Reason
	switch {
	case len(dec.Candidates) == 0 && len(excluded) > 0:
		// Workers offer the flavors, but none may take it now: say why,
		// not that none offers them.
		reason = "no worker may take it now: " + strings.Join(excluded, "; ")
	case len(excluded) > 0:
		reason += "; " + strings.Join(excluded, "; ")
	}
	if len(notes) > 0 {
		reason += "; " + strings.Join(notes, "; ")
	}
	if dec.Cluster == "" {
		if dec.NeverFits && len(excluded) == 0 {
			return waitOutcome{reason: ReasonNeverFits, message: reason, retry: retry}, nil
		}
		return waitOutcome{reason: ReasonPending, message: reason, blocks: true, retry: retry}, nil
	}
	return waitOutcome{message: reason, retry: retry}, dec
}

// checkLevels checks a workload's topology requests against the hub's
// Topology of a flavor, when the hub has the flavor and its Topology.
func (d *Dispatcher) checkLevels(ctx context.Context, flavor string, wl *strata.Workload) error {
	var rf strata.ResourceFlavor
	if err := d.client.Get(ctx, types.NamespacedName{Name: flavor}, &rf); err != nil || rf.Spec.TopologyName == nil {
		return nil
	}
	var topo strata.Topology
	if err := d.client.Get(ctx, types.NamespacedName{Name: *rf.Spec.TopologyName}, &topo); err != nil {
		return nil
	}
	levels := make([]string, 0, len(topo.Spec.Levels))
	for _, l := range topo.Spec.Levels {
		levels = append(levels, l.NodeLabel)
	}
	for i := range wl.Spec.PodSets {
		if err := workload.ValidateAgainstTopology(wl.Spec.PodSets[i].TopologyRequest, topo.Name, levels); err != nil {
			return err
		}
	}
	return nil
}

// passView is what a pass knows of the workers besides their targets.
type passView struct {
	clusterLabels map[string]labels.Set
	// queueOf is how each worker's copies are queued (its WorkerCluster's
	// localQueueName and onboarding).
	queueOf map[string]workerQueue
	// refusals memoizes queueRefusal by worker, namespace and LocalQueue.
	refusals map[string]queueRefusal
	// waits are the outcomes of workloads that wait, by what decided them
	// (placeOne).
	waits map[waitKey]waitOutcome
	// quota are the flavors within quota by queue and requests, until a
	// dispatch.
	quota map[quotaKey]quotaOutcome
}

type workerQueue struct {
	localQueue, onboarding string
}

type queueRefusal struct {
	message string
	known   bool
}

// QueueCauses are the refusals of a worker that hold for every workload
// queued as the refused one was, whatever the capacity: the hub checks
// them before dispatching (fleet.QueueRefusal).
var QueueCauses = map[string]bool{
	fleet.ReasonNamespaceNotFound:    true,
	queue.ReasonLocalQueueNotFound:   true,
	queue.ReasonClusterQueueNotFound: true,
	queue.ReasonNamespaceNotAllowed:  true,
}

// queueRefusal says why a worker would refuse p's copy for its queue
// ("" when it would not), and whether the hub knows (it reads the
// worker's queues).
func (d *Dispatcher) queueRefusal(view *passView, cluster string, p pending) (string, bool) {
	wq := view.queueOf[cluster]
	lq := wq.localQueue
	if lq == "" {
		lq = p.wl.Spec.QueueName
	}
	key := cluster + "/" + p.wl.Namespace + "/" + lq
	if r, ok := view.refusals[key]; ok {
		return r.message, r.known
	}
	_, message, known := d.fleet.QueueRefusal(cluster, fleet.QueueTarget{Namespace: p.wl.Namespace, LocalQueue: lq,
		CreatesNamespace: d.createsNamespaces, OnboardingClusterQueue: wq.onboarding})
	view.refusals[key] = queueRefusal{message: message, known: known}
	return message, known
}

// admittingQueues keeps the targets on workers whose queues take the
// workload's copy (refusal says why a worker's would not, "" when they
// would or the hub does not know); for the others of the queue's flavors
// it says what is missing there, naming together (in name order) the
// targets refused for one reason.
func admittingQueues(targets []*placement.Target, excluded, flavors []string, refusal func(cluster string) string) ([]*placement.Target, []string) {
	out := targets[:0:0]
	var messages []string
	where := map[string][]string{}
	for _, t := range targets {
		m := refusal(t.Cluster)
		switch {
		case m == "":
			out = append(out, t)
		case slices.Contains(flavors, t.Flavor):
			if where[m] == nil {
				messages = append(messages, m)
			}
			where[m] = append(where[m], t.Cluster+"/"+t.Flavor)
		}
	}
	// In name order, whatever the targets' order: a reason written only
	// when it changes stays the same while nothing does.
	for _, m := range messages {
		slices.Sort(where[m])
	}
	slices.SortFunc(messages, func(a, b string) int { return strings.Compare(where[a][0], where[b][0]) })
	for _, m := range messages {
		excluded = append(excluded, fmt.Sprintf("%s: %s", strings.Join(where[m], ", "), m))
	}
	return out, excluded
}

// maxRefusalInReason bounds a worker's refusal message quoted in a
// waiting reason.
const maxRefusalInReason = 200

// eligibleTargets returns the targets on workers the queue's selector
// takes, less those of workers in backoff for the workload; for those, a
// reason per target of the queue's flavors, and when the first backoff
// ends.
func eligibleTargets(targets []*placement.Target, selector labels.Selector, clusterLabels map[string]labels.Set,
	backoffs map[string]time.Time, flavors []string, now time.Time, refusal func(cluster string) string) (eligible []*placement.Target, excluded []string, retry time.Duration) {
	for _, t := range targets {
		if !selector.Matches(clusterLabels[t.Cluster]) {
			continue
		}
		if until, ok := backoffs[t.Cluster]; ok {
			if slices.Contains(flavors, t.Flavor) {
				why := ""
				if m := refusal(t.Cluster); m != "" {
					why = " (" + intake.Truncate(m, maxRefusalInReason) + ")"
				}
				excluded = append(excluded, fmt.Sprintf("%s/%s: refused this workload%s; not again before %s", t.Cluster, t.Flavor, why, until.UTC().Format(time.RFC3339)))
			}
			if r := until.Sub(now); retry == 0 || r < retry {
				retry = r
			}
			continue
		}
		eligible = append(eligible, t)
	}
	return eligible, excluded, retry
}

// servingKind keeps the targets on workers that serve kind (its CRD is
// installed there); for the others of the queue's flavors it says why
// they are left out.
func servingKind(targets []*placement.Target, excluded []string, kind jobs.Kind, flavors []string,
	serves func(cluster string, kind jobs.Kind) (served, known bool)) ([]*placement.Target, []string) {
	if kind == nil {
		return targets, excluded
	}
	out := targets[:0:0]
	for _, t := range targets {
		served, known := serves(t.Cluster, kind)
		switch {
		case served:
			out = append(out, t)
			continue
		case !slices.Contains(flavors, t.Flavor):
		case known:
			excluded = append(excluded, fmt.Sprintf("%s/%s: the worker does not serve %s (install its CRD there)", t.Cluster, t.Flavor, jobs.Resource(kind)))
		default:
			excluded = append(excluded, fmt.Sprintf("%s/%s: not known yet whether the worker serves %s", t.Cluster, t.Flavor, jobs.Resource(kind)))
		}
	}
	return out, excluded
}

// dispatchTime is the time a dispatch decided at now carries: later than
// every earlier one of this process, in the microseconds the API keeps,
// so that the copies of one pass are ordered as the pass placed them.
func (d *Dispatcher) dispatchTime(now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := now.Truncate(time.Microsecond)
	if !t.After(d.lastDispatch) {
		t = d.lastDispatch.Add(time.Microsecond)
	}
	d.lastDispatch = t
	return t
}

// dispatch reserves a decision and has records write it on the Workload;
// the copies controller creates the copy. The decision counts against
// the queue's quota for the rest of the pass at once.
func (d *Dispatcher) dispatch(ctx context.Context, targets []*placement.Target, p pending, dec *placement.Decision, reason string, now time.Time,
	used map[string]corev1.ResourceList, writes *passWrites) error {
	wl := p.wl.DeepCopy()
	gen := RecordDispatch(&wl.Status, dec.Cluster, dec.Flavor, reason, d.dispatchTime(now))
	key := Key(wl.UID, gen)
	if err := dec.Reserve(targets, key); err != nil {
		return err
	}
	d.fleet.SetHint(key, dec.Assignments())
	psas := make([]strata.PodSetAssignment, 0, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		psas = append(psas, strata.PodSetAssignment{Flavor: dec.Flavor, ResourceUsage: queue.TotalRequests(&wl.Spec.PodSets[i])})
	}
	queue.AddUsage(used, psas)
	writes.record(dec.Cluster, dec.Flavor, key, func() error {
		if err := d.client.Status().Update(ctx, wl); err != nil {
			if apierrors.IsConflict(err) {
				// The informer's copy was behind; its update event brings
				// another pass.
				return errReleaseOnly
			}
			if apierrors.IsNotFound(err) {
				return errReleaseOnly
			}
			return err
		}
		d.mu.Lock()
		d.recorded[wl.UID] = recorded{generation: gen, flavor: dec.Flavor}
		delete(d.waiting, wl.UID)
		d.mu.Unlock()
		metrics.HubDecisions.WithLabelValues(dec.Cluster, dec.Flavor).Inc()
		d.recorder.Eventf(p.job, wl, corev1.EventTypeNormal, "Dispatched", "Dispatch", "%s",
			truncateNote(fmt.Sprintf("Dispatched to %s (flavor %s): %s", dec.Cluster, dec.Flavor, reason)))
		return nil
	})
	return nil
}

// maxPassWrites bounds the writes a pass makes at once. A burst of Jobs is
// placed in one pass; written one after the other, the hub API server's
// write latency (tens of milliseconds when it is busy) would set the pace
// of dispatch.
const maxPassWrites = 16

// errReleaseOnly is a failed record write that needs no retry of its own:
// its reservation is released, and the event that made it fail (a newer
// Workload, or its deletion) brings the next pass.
var errReleaseOnly = errors.New("release only")

// passWrites are a pass's API writes — dispatch records and waiting
// reasons — gathered while the pass holds the fleet's targets and run
// after it let them go (run), at most maxPassWrites at a time: no lock is
// held across an API call.
type passWrites struct {
	writes []passWrite
}

// passWrite is one write; a record's (key set) undoes its reservation
// when it fails.
type passWrite struct {
	cluster, flavor, key string
	fn                   func() error
}

// failedRecord is a write that failed: a record's reservation is to be
// released (key set), and err (nil when there is nothing to report)
// returned.
type failedRecord struct {
	cluster, flavor, key string
	err                  error
}

// record adds fn, the record of the reservation key on cluster and flavor.
func (w *passWrites) record(cluster, flavor, key string, fn func() error) {
	w.writes = append(w.writes, passWrite{cluster: cluster, flavor: flavor, key: key, fn: fn})
}

// do adds fn, a write that undoes nothing when it fails.
func (w *passWrites) do(fn func() error) {
	w.writes = append(w.writes, passWrite{fn: fn})
}

// run runs the writes, records first, and returns those that failed:
// records to release, and errors to report.
func (w *passWrites) run() []failedRecord {
	slices.SortStableFunc(w.writes, func(a, b passWrite) int {
		return cmp.Compare(boolRank(a.key == ""), boolRank(b.key == ""))
	})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []failedRecord
		slots  = make(chan struct{}, maxPassWrites)
	)
	for _, pw := range w.writes {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := pw.fn()
			if err == nil {
				return
			}
			if errors.Is(err, errReleaseOnly) {
				err = nil
			}
			if pw.key == "" && err == nil {
				return
			}
			mu.Lock()
			failed = append(failed, failedRecord{cluster: pw.cluster, flavor: pw.flavor, key: pw.key, err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	w.writes = nil
	return failed
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wait has the reason queue say why a Workload waits, when that changed
// in more than its numbers, with an event on its Job; otherwise it writes
// nothing.
func (d *Dispatcher) wait(ctx context.Context, p pending, reason, message string) {
	d.waitFor(ctx, p, newWait(reason, message))
}

// newWait is a waiting outcome of reason and message (truncated to the
// API's bound), its meaning computed.
func newWait(reason, message string) waitOutcome {
	message = truncate(message)
	return waitOutcome{reason: reason, message: message, meaning: workload.WithoutNumbers(message)}
}

// waitFor is wait for an outcome whose meaning is computed: a pass
// compares thousands of waiting reasons, most of them unchanged. The
// write goes to the reason queue, not to the pass's writes: a pass does
// not wait for reasons.
func (d *Dispatcher) waitFor(ctx context.Context, p pending, o waitOutcome) {
	key := p.uid
	now := written{reason: o.reason, meaning: o.meaning}
	if p.waitingAs == now {
		// The Workload says so already.
		return
	}
	d.mu.Lock()
	last, seen := d.waiting[key]
	d.mu.Unlock()
	if seen && last == now || d.reasons.has(key, now) {
		return
	}
	// Copied when written, not when queued: thousands may wait in the
	// queue (the informer's object is not changed meanwhile; a newer one
	// replaces it there).
	src := p.wl
	d.reasons.add(key, now, func() error {
		wl := src.DeepCopy()
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: o.reason, Message: o.message})
		if err := d.client.Status().Update(ctx, wl); err != nil {
			if apierrors.IsConflict(err) {
				return nil // the newer Workload brings another pass
			}
			if err := client.IgnoreNotFound(err); err != nil {
				ctrl.LoggerFrom(ctx).V(2).Info("Could not write a waiting reason", "workload", client.ObjectKeyFromObject(wl), "error", err.Error())
				// Not recorded written: a pass a second from now queues it again.
				time.AfterFunc(time.Second, d.Wake)
			}
			return err
		}
		d.mu.Lock()
		d.waiting[key] = now
		d.mu.Unlock()
		d.recorder.Eventf(p.job, wl, corev1.EventTypeNormal, o.reason, "Dispatch", "%s", truncateNote(o.message))
		d.markWaiting(ctx, p.job, o.reason, o.message)
		return nil
	})
}

// markWaiting has a hub job that runs nowhere say so in its status, when
// its kind can (jobs.WaitMarker): kubectl then shows it Suspended, not
// Running. Best effort: the Workload's condition is the record.
func (d *Dispatcher) markWaiting(ctx context.Context, obj client.Object, reason, message string) {
	obj = obj.DeepCopyObject().(client.Object) // the pass's is the informer's
	j, ok := jobs.AdaptAny(kinds.Hub, obj)
	if !ok {
		return
	}
	m, ok := j.(jobs.WaitMarker)
	if !ok || !m.MarkWaiting(reason, message) {
		return
	}
	if err := d.client.Status().Update(ctx, obj); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not mark the hub job waiting", "job", client.ObjectKeyFromObject(obj), "error", err.Error())
	}
}

// maxEventNote is the API's limit on an event's note.
const maxEventNote = 1024

func truncateNote(m string) string {
	if len(m) <= maxEventNote {
		return m
	}
	return m[:maxEventNote-3] + "..."
}
