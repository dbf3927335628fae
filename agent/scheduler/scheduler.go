// Package scheduler admits pending workloads: per ClusterQueue (reached
// through the LocalQueue a workload names) in priority and creation order,
// the queues taking turns, through the queue's flavors, with the TAS engine
// on the capacity cache. It runs when workloads or capacity change, never on
// a timer.
package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reasons of the Admitted condition.
const (
	ReasonAdmitted = "Admitted"
	ReasonPending  = "Pending"
	// ReasonPreempting: the workload preempted workloads and waits until
	// their pods are gone. A hub does not take back a copy that says so
	// before dispatch.admissionTimeout: its preemption is under way.
	ReasonPreempting = "Preempting"
	// ReasonInadmissible: no capacity that may free up lets the workload in
	// as written (a level its flavors' Topologies lack, more than a whole
	// quota), or its queue's flavors cannot be used as they are (missing,
	// not topology-aware, their Topology missing: admissible again by
	// itself once they are fixed), or a hub pinned it to a flavor its
	// queue does not have (admissible again once the queue has it). As
	// Kueue's, such a head holds up a StrictFIFO queue; a hub's pinned copy
	// does not (its hub takes it back).
	ReasonInadmissible = "Inadmissible"
	// ReasonHeld: the workload may not be admitted now whatever the
	// capacity: a copy of a hub that has gone silent (fencing).
	ReasonHeld = strata.EvictedByFencing
	// ReasonStopped: the workload's LocalQueue or ClusterQueue is stopped
	// (stopPolicy: Hold or HoldAndDrain); the message names it. Kueue's
	// reason for this is Suspended (Inadmissible before v0.14), which
	// this agent's Job controller already gives a Job the user suspended.
	ReasonStopped = strata.QueueStopped
	// ReasonCheckNotReady: an AdmissionCheck the workload's ClusterQueue
	// names does not exist or is not Active; the queue admits nothing
	// until it is (Kueue's inactive ClusterQueue).
	ReasonCheckNotReady = strata.QueueAdmissionCheckNotReady
)

// Scheduler admits workloads. It is a manager Runnable.
type Scheduler struct {
	client client.Client
	// reader reads from the API server itself, not the informers: to tell
	// whether a write with an unknown outcome was applied.
	reader   client.Reader
	cache    *cache.Cache
	recorder events.EventRecorder
	opts     tas.Options
	wake     chan struct{}
	// index is fed by WorkloadEvent.
	index *workloadIndex
	// queueStatusAt is when each ClusterQueue's status was last written;
	// writes are at most one per queueStatusInterval.
	queueStatusAt map[string]time.Time
	// recorded are the ClusterQueues whose metrics the last pass set.
	recorded map[string]bool
	// drained is the last drain scan that evicted all it found (drain).
	drained drainScan
	// queueStatusWake is set while a pass is due for a deferred write.
	queueStatusWake atomic.Bool
	// holds says why a workload may not be admitted now whatever the
	// capacity ("" when it may): a copy of a fenced hub.
	holds func(*strata.Workload) string

	// Admissions are written asynchronously, as kube-scheduler binds: the
	// capacity is taken in the cache at once (assumed), the status write
	// runs on one of writers, and a failed write gives the capacity back.
	// inflight holds admissions the informer has not shown yet; they count
	// against their queue's quota like the ones it shows.
	mu       sync.Mutex
	inflight map[types.NamespacedName]*inflightAdmission
	writers  chan struct{}

	// preemptions under way, by preemptor; read and written by passes
	// only. victimOf is their victims' preemptors, as of this pass, and
	// searches the preemption searches left to this pass.
	preemptions map[types.NamespacedName]*pendingPreemption
	// uncapped are the Workloads a pass tries as their hub placed them,
	// with fewer pods than they ask for (strata.dev/pod-set-counts), as
	// they are.
	uncapped map[types.UID]*strata.Workload
	victimOf map[types.NamespacedName]victimRef
	// preemptionsRestored: the first pass rebuilt the preemptions an
	// earlier process left under way (restorePreemptions).
	preemptionsRestored bool
	// pendingWL are the pass's pending workloads of open queues, by key;
	// charged the preemptions whose hold the pass charged.
	pendingWL map[types.NamespacedName]*strata.Workload
	// passTried and passAdmitted count the pass's pending workloads and
	// the admissions it started (strata_admission_attempts_total).
	passTried, passAdmitted int
	charged                 map[types.NamespacedName]bool
	// servable are the pass's pending workloads that no StrictFIFO head
	// of their queue comes before.
	servable map[types.NamespacedName]bool
	searches int
	// oracles are the quota-only searches that order the rounds' heads
	// (heightAfterPreempting) left to this pass; beyond them a head that
	// must preempt is ordered by the estimate (Books.WouldBorrow).
	oracles int
	// cohortsUnknown: this pass could not list the ClusterQueues, so the
	// usage of cohorts is not known.
	cohortsUnknown bool

	// podsReady is waitForPodsReady's configuration, nil when it is off:
	// an admission starts the workload's PodsReady condition, and with
	// blockAdmission nothing is admitted while an admitted workload's
	// pods are not all ready (notReady, for the pass). clock tells when a
	// requeued workload's backoff ends; wakeAt is the pass already asked
	// for then.
	podsReady *configv1beta1.WaitForPodsReady
	// fair: fair sharing's preemption strategies, nil when it is off.
	fair []queue.FairStrategy
	// afs is admission fair sharing; afsPenalties what this process
	// admitted from each LocalQueue since its last usage sample.
	afs          queue.AdmissionFairSharing
	afsPenalties queue.Penalties
	// lqUsage is the pass's LocalQueue usage, and afsScoped the
	// ClusterQueues that order by it (nil when admission fair sharing is
	// off): preemption takes first from the LocalQueue that consumed more.
	lqUsage   *queue.UsagePass
	afsScoped map[string]bool
	// round is what the current round of a pass charged the books (its
	// admissions and preemptions); see roundBooks.
	round    roundBooks
	notReady bool
	// secondPasses are the workloads due for a second pass (KEP-2724's
	// delayed topology assignment) whose placement failed, with their
	// backoff; read and written by passes only.
	secondPasses map[types.NamespacedName]*secondPassState
	clock        clock.WithDelayedExecution
	wakeMu       sync.Mutex
	wakeAt       time.Time
}

// inflightAdmission is an admission being written, or written and not
// seen yet.
type inflightAdmission struct {
	admission *strata.Admission
	// uid is the workload's; written is the resourceVersion the write
	// returned (0 while it runs). A listed workload with another UID, or
	// at least as new as written, is what the informer knows now.
	uid     types.UID
	written int64
}

// stale says whether a listed workload supersedes an in-flight admission:
// it is another object of the same name, or the write's result or newer.
func (f *inflightAdmission) stale(wl *strata.Workload) bool {
	if wl.UID != f.uid {
		return true
	}
	return f.written > 0 && cache.Version(wl) >= f.written
}

// admissionWriters is the number of concurrent admission writes.
const admissionWriters = 16

// queueStatusInterval bounds ClusterQueue status writes, which would
// otherwise follow every admission.
const queueStatusInterval = time.Second

// New returns a Scheduler; it records why workloads wait as events with
// recorder.
func New(c client.Client, cc *cache.Cache, opts tas.Options, recorder events.EventRecorder) *Scheduler {
	return &Scheduler{client: c, reader: c, cache: cc, opts: opts, recorder: recorder, wake: make(chan struct{}, 1), index: newWorkloadIndex(), queueStatusAt: map[string]time.Time{},
		inflight: map[types.NamespacedName]*inflightAdmission{}, writers: make(chan struct{}, admissionWriters),
		preemptions: map[types.NamespacedName]*pendingPreemption{}, uncapped: map[types.UID]*strata.Workload{}, secondPasses: map[types.NamespacedName]*secondPassState{}, clock: clock.RealClock{}}
}

// WithPodsReady turns on waitForPodsReady's part in admission (cfg, when
// enabled) and measures requeued workloads' backoff on clk.
func (s *Scheduler) WithPodsReady(cfg configv1beta1.WaitForPodsReady, clk clock.WithDelayedExecution) *Scheduler {
	if cfg.Enable == nil || *cfg.Enable {
		s.podsReady = &cfg
	}
	s.clock = clk
	return s
}

// wakeLater asks for a pass at t (on the scheduler's clock), unless one is
// asked for by then already.
func (s *Scheduler) wakeLater(t time.Time) {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	now := s.clock.Now()
	if !s.wakeAt.Before(now) && !s.wakeAt.After(t) {
		return
	}
	s.wakeAt = t
	s.clock.AfterFunc(t.Sub(now), func() {
		s.wakeMu.Lock()
		if s.wakeAt.Equal(t) {
			s.wakeAt = time.Time{}
		}
		s.wakeMu.Unlock()
		s.Wake()
	})
}

// WithFairSharing turns on fair sharing (the agent's fairSharing
// configuration; nil leaves it off): heads are served by Kueue's
// tournament of shares, and preemption in a cohort tree follows fair
// sharing's strategies.
func (s *Scheduler) WithFairSharing(fs *configv1beta1.FairSharing) *Scheduler {
	s.fair = preemption.FairStrategies(fs)
	return s
}

// WithAdmissionFairSharing turns admission fair sharing on: a
// ClusterQueue whose admissionScope asks for it serves first the
// workloads of the LocalQueue that consumed the least (its status, kept
// by the LocalQueue controller), counting what this process admitted from
// it since that status was sampled.
func (s *Scheduler) WithAdmissionFairSharing(afs queue.AdmissionFairSharing) *Scheduler {
	s.afs = afs
	s.afsPenalties = queue.Penalties{}
	return s
}

// WithHolds makes the scheduler ask holds before it tries a workload: a
// workload it says why of waits, Admitted=False with reason Held (see
// ReasonHeld), without blocking its queue.
func (s *Scheduler) WithHolds(holds func(*strata.Workload) string) *Scheduler {
	s.holds = holds
	return s
}

// WithAPIReader makes the scheduler read workloads whose admission write
// had an unknown outcome with r (the manager's API reader, which bypasses
// the informers) instead of its client.
func (s *Scheduler) WithAPIReader(r client.Reader) *Scheduler {
	s.reader = r
	return s
}

// WorkloadEvent records a Workload's current object (or its deletion) in
// the scheduler's index and asks for a pass. The capacity cache calls it
// after applying the same event (cache.Hooks), so that the index is never
// ahead of the cache: a workload the index shows requeued no longer holds
// its previous admission's capacity when it is placed again.
func (s *Scheduler) WorkloadEvent(wl *strata.Workload, deleted bool) {
	if deleted {
		s.index.delete(client.ObjectKeyFromObject(wl))
	} else {
		s.index.set(wl)
	}
	s.Wake()
}

// Wake asks for a scheduling pass.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is true: only the leader admits.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Start runs scheduling passes until ctx ends.
func (s *Scheduler) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler")
	ctx = ctrl.LoggerInto(ctx, log)
	// No admission before the cache holds every node, pod and admitted
	// workload: after a restart, capacity must not be handed out twice.
	if !s.cache.WaitForSync(ctx) {
		return nil
	}
	for {
		start := time.Now()
		err := s.Schedule(ctx)
		recordAttempt(s.passTried, s.passAdmitted, time.Since(start))
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Scheduling pass; retrying in a second")
			time.AfterFunc(time.Second, s.Wake)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-s.cache.Changed():
		}
	}
}

// Schedule makes one pass over every queue.
func (s *Scheduler) Schedule(ctx context.Context) error {
	s.passTried, s.passAdmitted = 0, 0
	s.mu.Lock()
	keys := slices.Collect(maps.Keys(s.inflight))
	s.mu.Unlock()
	v := s.index.view(keys)
	usage := v.usage
	writing := map[types.NamespacedName]bool{}
	s.mu.Lock()
	for _, key := range keys {
		f := s.inflight[key]
		if f == nil {
			continue // its write failed meanwhile
		}
		e, ok := v.asked[key]
		if !ok || e.state != statePending || f.stale(e.wl) {
			// Deleted, admitted as the informer shows it (which counts it),
			// finished, invalid, or evicted or replaced since.
			delete(s.inflight, key)
			continue
		}
		// Admitted; the informer has not caught up.
		writing[key] = true
		q := f.admission.ClusterQueue
		if usage[q] == nil {
			usage[q] = map[string]corev1.ResourceList{}
		}
		queue.AddUsage(usage[q], f.admission.PodSetAssignments)
	}
	s.mu.Unlock()
	if len(writing) > 0 {
		for q, wls := range v.pending {
			v.pending[q] = slices.DeleteFunc(wls, func(wl *strata.Workload) bool {
				return writing[client.ObjectKeyFromObject(wl)]
			})
			if len(v.pending[q]) == 0 {
				delete(v.pending, q)
			}
		}
	}
	if err := s.cache.EnsureAccounted(v.recheck); err != nil {
		return err
	}
	// Reservations whose delayed topology assignment is due take their
	// nodes before the pending workloads are placed.
	secondPassErr := s.secondPass(ctx, v.secondPass)
	queues, byQueue, held, err := s.resolveQueues(ctx, v.pending)
	// The quota books need every queue of a cohort. When they cannot be
	// listed, the queues of this pass are booked alone and those with a
	// cohort admit nothing (see try): the error retries the pass.
	var all strata.ClusterQueueList
	listErr := s.client.List(ctx, &all)
	var cqs []*strata.ClusterQueue
	if listErr == nil {
		for i := range all.Items {
			cqs = append(cqs, &all.Items[i])
		}
	} else {
		for _, cq := range queues {
			if cq != nil {
				cqs = append(cqs, cq)
			}
		}
	}
	// So do the Cohort objects, which give cohorts quota and parents,
	// when a queue is in a cohort (see cache.SetupWithManager: without
	// one, they are not listed, and their informer does not hold up the
	// first pass).
	var cohortList strata.CohortList
	var cohorts []*strata.Cohort
	if listErr == nil && queue.AnyInCohort(cqs) {
		// Without the Cohort CRD (older CRDs), cohorts are flat.
		if listErr = s.client.List(ctx, &cohortList); listErr == nil {
			for i := range cohortList.Items {
				cohorts = append(cohorts, &cohortList.Items[i])
			}
		} else if meta.IsNoMatchError(listErr) {
			listErr = nil
		}
	}
	s.cohortsUnknown = listErr != nil
	books := queue.NewBooks(cqs, cohorts...)
	// inactive are the queues that cannot admit now (their Active
	// condition False): their pending workloads are all inadmissible.
	inactive := map[string]bool{}
	for _, cq := range cqs {
		// As Kueue: a queue that cannot admit is not in its cohort (a
		// stopped or terminating one never is: NewBooks), whether a flavor is missing
		// or an admission check is (or is not Active).
		if len(s.missingFlavors(cq)) > 0 || s.checksNotReady(ctx, cq) != "" {
			books.Detach(cq.Name)
			inactive[cq.Name] = true
		}
		if strata.Stopped(cq.Spec.StopPolicy) || cq.DeletionTimestamp != nil || books.InCycle(cq.Name) {
			inactive[cq.Name] = true
		}
	}
	books.ChargeAll(usage)
	// The workloads waiting in a stopped queue are pending there too.
	counted := byQueue
	if len(held) > 0 {
		counted = maps.Clone(byQueue)
		for q, wls := range held {
			counted[q] = append(slices.Clip(counted[q]), wls...)
		}
	}
	recordQueues(v, byQueue, held, queues, inactive)
	pendingKeys := map[types.NamespacedName]pendingRef{}
	for q, wls := range byQueue {
		for _, wl := range wls {
			pendingKeys[client.ObjectKeyFromObject(wl)] = pendingRef{uid: wl.UID, queue: q}
		}
	}
	// An elastic workload scaling up keeps the preemption made for the
	// pods it adds (preemptForResize) until they are admitted.
	for _, wl := range v.resize {
		if r, ok := workload.ResizeOf(wl); ok && r.To > r.From {
			ref := pendingRef{uid: wl.UID}
			if wl.Status.Admission != nil {
				ref.queue = wl.Status.Admission.ClusterQueue
			}
			pendingKeys[client.ObjectKeyFromObject(wl)] = ref
		}
	}
	// A preemptor whose admission is being written keeps its preemption
	// until the informer shows it admitted: should the write fail (a
	// conflict gives its capacity back), its victims must still not take
	// their place again.
	for key := range writing {
		if _, ok := pendingKeys[key]; !ok {
			pendingKeys[key] = pendingRef{}
		}
	}
	if !s.preemptionsRestored && err == nil {
		// Once, from a complete view of the pending workloads.
		s.preemptionsRestored = true
		s.restorePreemptions(counted, v.resize)
	}
	s.victimOf = s.forgetPreemptions(pendingKeys)
	// The quota a preemption frees is held for its preemptor until it is
	// admitted (see try); one being written is charged as admitted above.
	s.charged = map[types.NamespacedName]bool{}
	for key, p := range s.preemptions {
		if !writing[key] {
			books.Charge(p.queue, p.flavor, p.requests, 1)
			s.charged[key] = true
		}
	}
	s.publishHolds()
	s.searches = preemptionSearchesPerPass
	s.oracles = oracleSearchesPerPass
	// blockAdmission: an admission that the informer has not shown yet
	// is not ready either.
	s.notReady = s.podsReady != nil && *s.podsReady.BlockAdmission && (v.notReady > 0 || len(writing) > 0)
	// A failed status write of one ClusterQueue does not hold up
	// admission: the error is returned with the others, so the pass is
	// retried.
	// Elastic workloads resized while they run take or give back their
	// quota and capacity in place, before the pending workloads.
	resizeErr := s.resize(ctx, v.resize, books, usage)
	errs := []error{err, listErr, secondPassErr, resizeErr}
	if listErr == nil {
		errs = append(errs, s.updateQueues(ctx, cqs, v, counted, books), s.drain(ctx, cqs))
	}
	s.pendingWL, s.servable = map[types.NamespacedName]*strata.Workload{}, map[types.NamespacedName]bool{}
	for _, wls := range byQueue {
		for _, wl := range wls {
			s.pendingWL[client.ObjectKeyFromObject(wl)] = wl
		}
	}
	s.passTried = len(s.pendingWL)
	turns := make([]*queue.Turn[*strata.Workload], 0, len(byQueue))
	turnOf := make(map[string]*queue.Turn[*strata.Workload], len(byQueue))
	retries := map[*strata.Workload]int{}
	var lqUsage *queue.UsagePass
	s.lqUsage, s.afsScoped = nil, nil
	if s.afs.On() {
		lqUsage = s.afs.NewPass(func(key types.NamespacedName) *strata.LocalQueue {
			lq := &strata.LocalQueue{}
			if err := s.client.Get(ctx, key, lq); err != nil {
				return nil // gone meanwhile: no usage
			}
			return lq
		}, s.afsPenalties)
		s.lqUsage, s.afsScoped = lqUsage, map[string]bool{}
		for _, cq := range cqs {
			if s.afs.Orders(cq) {
				s.afsScoped[cq.Name] = true
			}
		}
	}
	for q, wls := range byQueue {
		if s.afs.Orders(queues[q]) {
			slices.SortStableFunc(wls, lqUsage.Compare)
		} else {
			sort.SliceStable(wls, func(i, j int) bool { return queue.Before(wls[i], wls[j]) })
		}
		strict := queues[q] != nil && queues[q].Spec.QueueingStrategy == strata.StrictFIFO
		for i, wl := range wls {
			if i == 0 || !strict {
				s.servable[client.ObjectKeyFromObject(wl)] = true
			}
		}
		if usage[q] == nil {
			usage[q] = map[string]corev1.ResourceList{}
		}
		turns = append(turns, &queue.Turn[*strata.Workload]{Queue: queues[q], Items: wls})
		turnOf[q] = turns[len(turns)-1]
	}
	var pick func([]*strata.ClusterQueue, []*strata.Workload) int
	if s.fair != nil {
		// A preemptor's hold is in the books already.
		self := func(wl *strata.Workload) *strata.Workload { return wl }
		pick = queue.FairPick(books, func(wl *strata.Workload) any { return wl }, self,
			func(wl *strata.Workload) bool { return s.charged[client.ObjectKeyFromObject(wl)] })
	}
	queue.Serve(turns, func(wl *strata.Workload) *strata.Workload { return wl },
		func(cq *strata.ClusterQueue, wl *strata.Workload) int {
			if s.fair != nil || s.oracles <= 0 {
				return books.WouldBorrowByUnit(cq, wl, nil)
			}
			return books.WouldBorrowByUnit(cq, wl, func(flavor string, need corev1.ResourceList) (int, bool) {
				return s.heightAfterPreempting(cq, flavor, books, wl, need)
			})
		}, pick, func() { s.round.end(books) },
		func(cq *strata.ClusterQueue, wl *strata.Workload) bool {
			admitted, blocks, err := s.try(ctx, cq, usage[cq.Name], books, wl)
			if err != nil {
				errs = append(errs, err)
			}
			if admitted && s.afs.Orders(cq) {
				// Its LocalQueue's next workloads come after those of
				// queues that now consumed less.
				lqUsage.Admitted(wl)
				if t := turnOf[cq.Name]; t != nil {
					slices.SortStableFunc(t.Items, lqUsage.Compare)
				}
			}
			if s.round.skipped {
				// Served again first in the next round, as Kueue's next
				// cycle takes a head its cycle skipped; its reason is
				// written only when it is not.
				s.round.skipped = false
				if t := turnOf[cq.Name]; t != nil && retries[wl] < maxRoundRetries {
					retries[wl]++
					t.Items = append([]*strata.Workload{wl}, t.Items...)
					return false
				}
				if err := s.setNotAdmitted(ctx, wl, ReasonPending, s.round.skipMessage); err != nil {
					errs = append(errs, err)
				}
			}
			return !admitted && blocks
		},
		func(cq *strata.ClusterQueue, behind []*strata.Workload) {
			// The rest of the queue waits behind its head. Written once:
			// the message does not name the head, so that a new head does
			// not rewrite every workload behind it.
			for _, wl := range behind {
				if err := s.setNotAdmitted(ctx, wl, ReasonPending,
					fmt.Sprintf("waiting in StrictFIFO ClusterQueue %s behind workloads that do not fit yet", cq.Name)); err != nil {
					errs = append(errs, err)
				}
			}
		})
	return errors.Join(errs...)
}

// resolveQueues groups the pending workloads of each LocalQueue by the
// ClusterQueue it points at now, and returns those ClusterQueues. The
// workloads of a LocalQueue that is gone, whose ClusterQueue is gone, or
// whose ClusterQueue does not admit the namespace are left out: the Job
// controller marks them invalid with the reason, and the LocalQueue,
// ClusterQueue or Namespace event that lifts it brings them back. A pass
// reads each LocalQueue with pending workloads, its ClusterQueue and its
// namespace once, from the informers. The workloads of a stopped
// LocalQueue or ClusterQueue (stopPolicy) are not to schedule: each is
// marked Stopped once, naming the queue that stops it, and returned in
// held by ClusterQueue, where they count as pending.
func (s *Scheduler) resolveQueues(ctx context.Context, pending map[types.NamespacedName][]*strata.Workload) (cqs map[string]*strata.ClusterQueue, byQueue, held map[string][]*strata.Workload, err error) {
	cqs = map[string]*strata.ClusterQueue{} // nil: missing or unreadable
	byQueue, held = map[string][]*strata.Workload{}, map[string][]*strata.Workload{}
	var errs []error
	for key, wls := range pending {
		lq := &strata.LocalQueue{}
		if err := s.client.Get(ctx, key, lq); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		name := lq.Spec.ClusterQueue
		cq, seen := cqs[name]
		if !seen {
			cq = &strata.ClusterQueue{}
			if err := s.client.Get(ctx, types.NamespacedName{Name: name}, cq); err != nil {
				errs = append(errs, client.IgnoreNotFound(err))
				cq = nil
			}
			cqs[name] = cq
		}
		if cq == nil {
			continue
		}
		ns := &corev1.Namespace{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		if !queue.Resolve(key.Namespace, key.Name, ns.Labels, lq, cq).OK() {
			continue
		}
		if stop := queue.StopOf(lq, cq); stop.Stopped {
			// A hub takes a copy that says so elsewhere at once.
			for _, wl := range wls {
				if err := s.setNotAdmitted(ctx, wl, ReasonStopped, stop.Message); err != nil {
					errs = append(errs, err)
				}
			}
			held[name] = append(held[name], wls...)
			continue
		}
		if why := s.checksNotReady(ctx, cq); why != "" {
			// As a stopped queue: a hub takes such a copy elsewhere.
			for _, wl := range wls {
				if err := s.setNotAdmitted(ctx, wl, ReasonCheckNotReady, why); err != nil {
					errs = append(errs, err)
				}
			}
			held[name] = append(held[name], wls...)
			continue
		}
		byQueue[name] = append(byQueue[name], wls...)
	}
	return cqs, byQueue, held, errors.Join(errs...)
}

// try admits one workload on the first flavor of the queue where it fits;
// a workload a hub pinned to a flavor is tried on that flavor alone (see
// flavorsFor). Under the queue's flavorFungibility a flavor where it fits
// only by borrowing may wait until the others were tried
// (whenCanBorrow: TryNextFlavor), and when it fits nowhere it preempts on
// the first flavor where an allowed preemption helps, after trying every
// flavor (whenCanPreempt: TryNextFlavor) or at once (Preempt). blocks
// says whether a StrictFIFO queue waits behind it: true for a head not
// admitted, whether capacity may free up or not (Kueue's); false for one
// it leaves out for now (held, in its backoff, pinned by a hub to a
// flavor the queue lacks, or preempted for another).
func (s *Scheduler) try(ctx context.Context, cq *strata.ClusterQueue, usage map[string]corev1.ResourceList, books *queue.Books, wl *strata.Workload) (admitted, blocks bool, err error) {
	if s.holds != nil {
		if why := s.holds(wl); why != "" {
			// A preemption it made is over: the capacity it freed is not
			// held for a workload that may not be admitted (its hub
			// fenced, or its dispatch revoked); its victims may take it
			// again, and it searches afresh once it is let through.
			if key := client.ObjectKeyFromObject(wl); s.preemptions[key] != nil {
				delete(s.preemptions, key)
				s.publishHolds()
			}
			return false, false, s.setNotAdmitted(ctx, wl, ReasonHeld, why)
		}
	}
	if cq.Spec.Cohort != "" && s.cohortsUnknown {
		return false, true, nil
	}
	if books.InCycle(cq.Name) {
		return false, true, s.setNotAdmitted(ctx, wl, ReasonInadmissible, queue.CohortCycleMessage(cq))
	}
	if at := workload.RequeueAt(wl); at.After(s.clock.Now()) {
		// Evicted because its pods were not ready in time: it waits out
		// its backoff, and the workloads behind it go ahead (Kueue's).
		s.wakeLater(at)
		return false, false, s.setNotAdmitted(ctx, wl, strata.EvictedByPodsReadyTimeout, workload.BackoffMessage(wl))
	}
	key := client.ObjectKeyFromObject(wl)
	if counts, ok := workload.CappedCounts(wl); ok {
		// A hub's copy the hub placed with fewer pods than it asks for
		// (partial admission; the hub's quota is charged for as many):
		// admitted with at most as many, as a workload that asks for
		// them. The admission's write leaves the spec as it is; its
		// message counts what the Workload asks for.
		s.uncapped[wl.UID] = wl
		defer delete(s.uncapped, wl.UID)
		wl = workload.WithCounts(wl, counts)
	}
	// fits: the workload fits on flavor fitsOn, but blockAdmission holds
	// it (see fitted).
	var fits bool
	var fitsOn string
	if ref, ok := s.victimOf[key]; ok && ref.of(wl) {
		by := ref.by
		// What it frees is its preemptor's: it does not take it back. A
		// StrictFIFO queue waits behind it, as behind any head that does
		// not fit (Kueue requeues a victim at its place), unless its
		// preemptor waits behind the head of a StrictFIFO queue of its
		// own: that would stall this queue too.
		return false, s.servable[by], s.setNotAdmitted(ctx, wl, ReasonPending, fmt.Sprintf("preempted to make room for %s; waits until that workload is admitted", by))
	}
	// The quota held for this queue's preemptors that come after wl in
	// its order is wl's to take (Kueue has no holds: the queue's head
	// is served first). Taken, their preemptions are over, and they
	// search again once they are served.
	var lent []types.NamespacedName
	for pk, p := range s.preemptions {
		if pw := s.pendingWL[pk]; pk != key && s.charged[pk] && p.queue == cq.Name && pw != nil && queue.Before(wl, pw) {
			books.Charge(p.queue, p.flavor, p.requests, -1)
			lent = append(lent, pk)
		}
	}
	defer func() {
		for _, pk := range lent {
			switch p := s.preemptions[pk]; {
			case p == nil:
			case !admitted || books.Check(p.queue, p.flavor, p.requests, false).Err == nil:
				// Not taken (wl not admitted, or admitted elsewhere or
				// beside it): the hold stands.
				books.Charge(p.queue, p.flavor, p.requests, 1)
			default:
				// Taken: that preemption is over; its preemptor searches
				// again when it is served.
				delete(s.preemptions, pk)
				delete(s.charged, pk)
			}
		}
	}()
	if p := s.preemptions[key]; p != nil {
		// Its own reservation is not in its way.
		books.Charge(p.queue, p.flavor, p.requests, -1)
		if held := s.stillHeld(p); len(held) > 0 {
			books.Charge(p.queue, p.flavor, p.requests, 1)
			return false, true, s.setNotAdmitted(ctx, wl, ReasonPreempting, preemptingMessage(p, held))
		}
		// Its victims are gone: it is placed as any workload. If it is
		// not admitted, what they freed was taken meanwhile: the
		// preemption is over (its victims may be admitted again) and it
		// may preempt again. One that fits, held by blockAdmission,
		// keeps what its victims freed.
		defer func() {
			switch {
			case admitted || s.preemptions[key] != p:
			case fits && fitsOn == p.flavor:
				books.Charge(p.queue, p.flavor, p.requests, 1)
			default:
				delete(s.preemptions, key)
			}
		}()
	}
	flavors, why := queue.FlavorsFor(cq, wl)
	if why != "" {
		return false, false, s.setNotAdmitted(ctx, wl, ReasonInadmissible, why)
	}
	fung := queue.Fungibility(cq)
	preempts, upTo := preemption.Allowed(cq, wl)
	need := queue.WorkloadRequests(wl)
	// As Kueue's scheduling cycle: a head nominated, as the round began,
	// on a flavor whose quota held it then and an earlier head of the
	// round took is not walked to another flavor; it waits for the next
	// pass. One whose nomination still fits is admitted there first.
	// (A preemptor whose victims are gone keeps to its own hold: it is
	// walked as before.)
	var nominated string
	var nominatedFit bool
	if s.preemptions[key] == nil {
		nominated, nominatedFit = s.round.nominate(books, cq, wl, func(flavor string) bool {
			def, err := s.flavorReady(flavor)
			return err == nil && workload.FlavorRefusal(def, wl) == ""
		})
	}
	if nominatedFit {
		if fit := books.Check(cq.Name, nominated, need, false); fit.Err != nil {
			// Written only if the pass does not serve it again (Serve's
			// callback): a write now would leave the pass's copy of the
			// Workload behind the API server's, and its admission in the
			// next round would conflict and be given back.
			s.round.skipped = true
			s.round.skipMessage = fmt.Sprintf("waiting for capacity: flavor %s: %v (taken by a workload admitted before it in this round; tried again in the next)", nominated, fit.Err)
			s.Wake()
			return false, true, nil
		}
	}
	var reasons, cannotPreempt []string
	// never: no change of capacity lets the workload in; asWritten: only
	// a change of the workload would (no flavor is merely not ready).
	never, asWritten := true, true
	// borrowing: flavors skipped at first because the workload fits
	// there only by borrowing; preemptable: flavors where it does not fit
	// now, for the preemption search.
	var borrowing, preemptable []strata.FlavorQuotas
	// tryFlavor admits the workload on one flavor, with the pod sets'
	// counts (nil: all of its pods; fewer: a partial admission).
	tryFlavor := func(fq strata.FlavorQuotas, counts []int32) bool {
		if s.notReady {
			if s.fitsWith(cq, fq, books, wl, counts) {
				fits, fitsOn = true, fq.Name
				return true
			}
		}
		admitted, err := s.placeOn(cq, fq, books, wl, counts, true)
		if err == nil {
			if p := s.preemptions[key]; p != nil && p.flavor == fq.Name {
				notePreempted(admitted, p)
			}
			s.admit(ctx, admitted, fq.Name, usage, books)
			s.notReady = s.podsReady != nil && *s.podsReady.BlockAdmission
			return true
		}
		if errors.As(err, new(flavorNotReadyError)) {
			reasons = append(reasons, err.Error()) // it names the flavor
			asWritten = false
			return false
		}
		reasons = append(reasons, fmt.Sprintf("flavor %s: %v", fq.Name, err))
		inadmissible := errors.As(err, new(inadmissibleError))
		never = never && inadmissible
		if !inadmissible {
			preemptable = append(preemptable, fq)
		}
		return false
	}
	// searchOn searches one flavor for victims, once per flavor and within
	// the pass's budget; ok when it found some.
	searched := map[string]*preemption.Result{}
	searchOn := func(fq strata.FlavorQuotas) (preemption.Result, bool) {
		if r, done := searched[fq.Name]; done {
			return *r, r != nil && len(r.Victims) > 0
		}
		if !preempts || s.searches <= 0 {
			return preemption.Result{}, false
		}
		s.searches--
		r, why := s.search(cq, fq, books, wl, upTo)
		if why != "" {
			cannotPreempt = append(cannotPreempt, why)
		}
		searched[fq.Name] = &r
		return r, len(r.Victims) > 0
	}
	// preemptOn preempts what the search found on one flavor, for the pod
	// sets' counts (nil: all of its pods); admitted when the victims had
	// no running pods and the workload took their place at once.
	preemptOn := func(fq strata.FlavorQuotas, r preemption.Result, counts []int32) (done, admitted bool, err error) {
		need := need
		if counts != nil {
			need = queue.WorkloadRequests(workload.WithCounts(wl, counts))
		}
		done, err = s.preempt(ctx, cq, fq, books, wl, need, counts, nil, r)
		if done && len(s.stillHeld(s.preemptions[key])) == 0 && tryFlavor(fq, counts) {
			// The victims held no running pods: their capacity was free
			// at once. Held by blockAdmission, it keeps that quota.
			if fits {
				books.Charge(cq.Name, fq.Name, need, 1)
			}
			return true, !fits, err
		}
		if done {
			// What the victims free is the preemptor's: its quota is
			// held for it for the rest of the pass (and in the next ones,
			// see Schedule), so that no other workload takes it.
			books.Charge(cq.Name, fq.Name, need, 1)
			s.round.charged = append(s.round.charged, roundCharge{cq.Name, fq.Name, need, 1})
		}
		return done, false, err
	}
	if i := slices.IndexFunc(flavors, func(fq strata.FlavorQuotas) bool { return fq.Name == nominated }); nominatedFit && i >= 0 {
		if tryFlavor(flavors[i], nil) {
			return s.fitted(ctx, wl, fits)
		}
	}
	// Kueue assigns a flavor to each pod set (or PodSet group) on its own:
	// one whose pod sets fit now on different flavors, and not all on
	// one, is admitted so (a preemptor too, once its victims are gone).
	// Not under blockAdmission's hold: that goes through the walk below.
	if !s.notReady {
		if admitted, where := s.placeByUnit(cq, flavors, books, wl); admitted != nil {
			if p := s.preemptions[key]; p != nil {
				notePreempted(admitted, p)
			}
			s.admit(ctx, admitted, where, usage, books)
			s.notReady = s.podsReady != nil && *s.podsReady.BlockAdmission
			return true, true, nil
		}
	}
	// Flavors in order, as Kueue's flavor assigner walks them: a flavor
	// where it fits is taken at once (one where it fits only by borrowing
	// is put aside under whenCanBorrow: TryNextFlavor); under
	// whenCanPreempt: Preempt, the first flavor where a preemption lets it
	// in is taken, unless the workload would then borrow and
	// whenCanBorrow is TryNextFlavor.
	for _, fq := range flavors {
		if nominatedFit && fq.Name == nominated {
			continue // tried above
		}
		if fung.WhenCanBorrow == strata.FungibilityTryNextFlavor {
			if fit := books.Check(cq.Name, fq.Name, need, false); fit.Err == nil && fit.Borrows {
				borrowing = append(borrowing, fq)
				continue
			}
		}
		if tryFlavor(fq, nil) {
			return s.fitted(ctx, wl, fits)
		}
		if fung.WhenCanPreempt == strata.FungibilityPreempt && len(preemptable) > 0 && preemptable[len(preemptable)-1].Name == fq.Name {
			if r, ok := searchOn(fq); ok && (!r.Borrows || fung.WhenCanBorrow != strata.FungibilityTryNextFlavor) {
				if done, admitted, err := preemptOn(fq, r, nil); done || err != nil {
					return admitted, true, err
				}
			}
		}
	}
	// A fit by borrowing beats any preemption; the lowest borrowing in a
	// cohort tree first (Kueue's borrowing level).
	slices.SortStableFunc(borrowing, func(a, b strata.FlavorQuotas) int {
		return books.BorrowHeight(cq.Name, a.Name, need) - books.BorrowHeight(cq.Name, b.Name, need)
	})
	for _, fq := range borrowing {
		if tryFlavor(fq, nil) {
			return s.fitted(ctx, wl, fits)
		}
	}
	// A workload of several pod sets (or PodSet groups) preempts for those
	// that fit nowhere, on their own flavor, the others keeping theirs.
	if preempts {
		// Once its victims are gone, walked again from its first pod set,
		// its pod sets may all fit on one flavor: it is admitted there at
		// once, as the next pass would, before anything else of the pass
		// takes what they freed.
		whole := func() (done, admitted bool) {
			for _, fq := range flavors {
				if tryFlavor(fq, nil) {
					if fits {
						books.Charge(cq.Name, fq.Name, need, 1)
					}
					return true, !fits
				}
			}
			return false, false
		}
		if done, admitted, err := s.preemptByUnit(ctx, cq, flavors, books, wl, upTo, usage, whole); done || err != nil {
			return admitted, true, err
		}
	}
	// The best preemption over the flavors, as Kueue ranks them
	// (preemption.Better), the first flavor winning a tie.
	var best *strata.FlavorQuotas
	var bestResult preemption.Result
	for i, fq := range preemptable {
		r, ok := searchOn(fq)
		if ok && (best == nil || preemption.Better(r, bestResult, cq.Name)) {
			best, bestResult = &preemptable[i], r
		}
	}
	if best != nil {
		if done, admitted, err := preemptOn(*best, bestResult, nil); done || err != nil {
			return admitted, true, err
		}
	}
	// Fewer pods, once preemption was looked at for all of them (not
	// when this pass's searches ran out: the next may preempt for all).
	if !preempts || len(preemptable) == 0 || len(searched) == len(preemptable) {
		if c, ok := s.partially(cq, flavors, books, wl, preempts, upTo); ok {
			if c.victims == nil && tryFlavor(flavors[c.flavor], c.counts) {
				return s.fitted(ctx, wl, fits)
			}
			if c.victims != nil {
				if done, admitted, err := preemptOn(flavors[c.flavor], *c.victims, c.counts); done || err != nil {
					return admitted, true, err
				}
			}
		}
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "the ClusterQueue has no flavors")
	}
	if r := s.pinnedReasons(cq, flavors, books, wl); len(r) > 0 {
		// A hub's copy with its pod sets pinned to different flavors:
		// what keeps each from its own flavor, not that the others
		// refuse it.
		reasons = r
	}
	if never && s.unitsCouldFit(cq, flavors, books, wl) {
		// No one flavor can ever hold all of it, but each pod set (or
		// PodSet group) fits on some flavor on its own: it waits for room
		// on different flavors.
		never = false
		reasons = append(reasons, "its pod sets may be admitted on different flavors once each has room")
	}
	if never {
		by := "cannot be admitted by ClusterQueue " + cq.Name
		if asWritten {
			by += " as written"
		}
		// It still holds up a StrictFIFO queue, as any head Kueue cannot
		// admit does ("older workloads that can't be admitted block newer
		// ones"); Kueue's queue with a missing flavor or Topology admits
		// nothing at all.
		return false, true, s.setNotAdmitted(ctx, wl, ReasonInadmissible, by+": "+strings.Join(reasons, "; "))
	}
	message := "waiting for capacity: " + strings.Join(reasons, "; ")
	switch {
	case len(cannotPreempt) > 0:
		message += "; cannot preempt: " + strings.Join(cannotPreempt, "; ")
	case preempts && s.searches <= 0:
		// Not searched in this pass: the reason a search gave stands.
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && strings.Contains(c.Message, "; cannot preempt: ") {
			return false, true, nil
		}
	}
	return false, true, s.setNotAdmitted(ctx, wl, ReasonPending, message)
}

// fitted ends try for a workload that a flavor admitted, or, under
// waitForPodsReady's blockAdmission, would have admitted (fits): that one
// waits, Admitted=False with reason WaitingForPodsReady, and so does its
// queue.
func (s *Scheduler) fitted(ctx context.Context, wl *strata.Workload, fits bool) (admitted, blocks bool, err error) {
	if !fits {
		return true, true, nil
	}
	return false, true, s.setNotAdmitted(ctx, wl, strata.WaitingForPodsReady,
		"fits, and waits until the pods of every admitted workload are ready (waitForPodsReady.blockAdmission)")
}

// inadmissibleError is a reason no change of capacity or usage lifts: the
// workload names a level its flavor's Topology does not have, or needs
// more than the flavor's whole quota.
type inadmissibleError struct{ error }

func (e inadmissibleError) Unwrap() error { return e.error }

// flavorNotReadyError is a flavor of the queue that cannot be used as it
// is: the ResourceFlavor does not exist, has no topologyName, or its
// Topology does not exist. No change of capacity lifts it; creating or
// fixing the flavor or its Topology does, and the capacity cache signals
// that change (Changed), on which the scheduler runs a pass. Its message
// names the flavor, as the condition shows it.
type flavorNotReadyError struct{ message string }

func (e flavorNotReadyError) Error() string { return e.message }

// flavorReady returns a ResourceFlavor's definition, or a
// flavorNotReadyError when the flavor is missing or not topology-aware.
// Its snapshot may still be missing (its Topology): see place.
func (s *Scheduler) flavorReady(name string) (*strata.ResourceFlavor, error) {
	def, ok := s.cache.FlavorDef(name)
	if !ok {
		return nil, flavorNotReadyError{fmt.Sprintf("ResourceFlavor %q does not exist", name)}
	}
	if def.Spec.TopologyName == nil {
		return nil, flavorNotReadyError{fmt.Sprintf("ResourceFlavor %q has no topologyName", name)}
	}
	return def, nil
}

// topologyMissing is the error of a topology-aware flavor without a
// snapshot in the cache: its Topology does not exist.
func topologyMissing(def *strata.ResourceFlavor) error {
	return flavorNotReadyError{fmt.Sprintf("Topology %q of ResourceFlavor %q does not exist", *def.Spec.TopologyName, def.Name)}
}

// fitsWith says whether placeOn would admit the workload on the flavor
// with the pod sets' counts (nil: their own), taking nothing.
func (s *Scheduler) fitsWith(cq *strata.ClusterQueue, fq strata.FlavorQuotas, books *queue.Books, wl *strata.Workload, counts []int32) bool {
	admitted, err := s.placeOn(cq, fq, books, wl, counts, false)
	return err == nil && admitted != nil
}

// placeOn finds the assignment of every pod set on one flavor, within quota,
// and takes its capacity in the cache in the same step (cache.Reserve):
// nothing else, hot swap included, can be given the same capacity in
// between. It returns the workload with its admission, not yet written. A
// flavor that is not ready is its reason before the quota. counts are
// the pod sets' counts (nil: their own; fewer for a partial admission,
// which is recorded in the admission only: the spec keeps asking for
// every pod). Unless take, it only says whether the workload would be
// admitted, taking nothing.
func (s *Scheduler) placeOn(cq *strata.ClusterQueue, fq strata.FlavorQuotas, books *queue.Books, asked *strata.Workload, counts []int32, take bool) (*strata.Workload, error) {
	wl := asked
	if counts != nil {
		wl = workload.WithCounts(asked, counts)
	}
	flavorDef, err := s.flavorReady(fq.Name)
	if err != nil {
		return nil, err
	}
	if why := workload.FlavorRefusal(flavorDef, wl); why != "" {
		return nil, inadmissibleError{errors.New(why)}
	}
	if fit := books.Check(cq.Name, fq.Name, queue.WorkloadRequests(wl), false); fit.Err != nil {
		if fit.Never {
			return nil, inadmissibleError{fit.Err}
		}
		return nil, fit.Err
	}
	if s.delaysTopology(cq, fq.Name) {
		// A ProvisioningRequest check provisions its nodes first: quota
		// only now, the topology once every check is Ready (secondPass).
		return s.withAdmission(cq, asked, wl, quotaOnly(cq, fq.Name, wl), "on flavor "+fq.Name), nil
	}
	var admitted *strata.Workload
	var others []*strata.Workload
	// A hub's copy was spread by the hub, over the whole fleet (this
	// worker's share included): counting this worker alone again would
	// refuse what the fleet's rule allows.
	if workload.Spreads(wl) && workload.DispatchKey(wl) == "" {
		others = s.cache.AdmittedIn(wl.Namespace)
	}
	found, placeErr := s.cache.Reserve(fq.Name, client.ObjectKeyFromObject(wl), func(snap *tas.Snapshot, topo *strata.Topology) (*strata.Workload, error) {
		admission, err := placeOnFlavor(snap, topo, flavorDef, cq, wl, others, s.opts)
		if err != nil {
			return nil, err
		}
		admitted = s.withAdmission(cq, asked, wl, admission, "on flavor "+fq.Name)
		if !take {
			return nil, nil
		}
		return admitted, nil
	})
	if !found {
		// Or the flavor changed since flavorReady read it: the cache
		// signals that, and the next pass gives the reason as it is then.
		return nil, topologyMissing(flavorDef)
	}
	if errors.As(placeErr, new(*workload.TopologyMismatchError)) {
		placeErr = inadmissibleError{placeErr}
	}
	if placeErr != nil {
		return nil, placeErr
	}
	return admitted, nil
}

// withAdmission is asked carrying admission (made for wl: asked, or asked
// with fewer pods) and its Admitted condition, whose message says where
// ("on flavor f"); the pod sets' PodsReady and the workload's requeue
// state start over in the same write.
func (s *Scheduler) withAdmission(cq *strata.ClusterQueue, asked, wl *strata.Workload, admission *strata.Admission, where string) *strata.Workload {
	admitted := asked.DeepCopy()
	admitted.Status.Admission = admission
	meta.SetStatusCondition(&admitted.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: ReasonAdmitted,
		Message: fmt.Sprintf("admitted by ClusterQueue %s %s", cq.Name, where) + partialNote(cmp.Or(s.uncapped[asked.UID], asked), admission),
	})
	c := meta.FindStatusCondition(admitted.Status.Conditions, strata.WorkloadAdmitted)
	c.LastTransitionTime = admittedAt(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted), c.LastTransitionTime.Time)
	if s.podsReady != nil {
		// In the admission's write: a PodsReady of an earlier
		// admission says nothing of this one's pods. Its time is the
		// admission's, on the clock waitForPodsReady's timeout is
		// measured on.
		meta.SetStatusCondition(&admitted.Status.Conditions, metav1.Condition{
			Type: strata.WorkloadPodsReady, Status: metav1.ConditionFalse, Reason: strata.PodsReadyWaitForStart,
			Message: "waiting for the pods of this admission to be ready or to succeed",
		})
		meta.FindStatusCondition(admitted.Status.Conditions, strata.WorkloadPodsReady).LastTransitionTime = metav1.NewTime(s.clock.Now())
	}
	if checks := workload.ChecksOf(cq, workload.AdmissionFlavors(admission)); len(checks) > 0 {
		// Its quota is reserved; it is admitted, and its job starts, once
		// every check is Ready (the admissionchecks controller). Its pods'
		// readiness is waited for from then.
		workload.ReserveForChecks(admitted, checks, s.clock.Now())
		meta.RemoveStatusCondition(&admitted.Status.Conditions, strata.WorkloadPodsReady)
	} else if len(admitted.Status.AdmissionChecks) > 0 || meta.FindStatusCondition(admitted.Status.Conditions, strata.WorkloadQuotaReserved) != nil {
		// Left from a reservation in a queue that had checks.
		admitted.Status.AdmissionChecks = nil
		meta.RemoveStatusCondition(&admitted.Status.Conditions, strata.WorkloadQuotaReserved)
	}
	// Back in its queue, and admitted: its backoff, deactivation or
	// stopped queue is over (Kueue's Requeued=True), in this write.
	workload.Requeue(admitted, true, s.clock.Now())
	return admitted
}

// checksNotReady says why cq admits nothing because of its
// AdmissionChecks: one it names does not exist, or its controller has not
// marked it Active (Kueue's inactive ClusterQueue); "" when every one is
// ready, or it names none.
func (s *Scheduler) checksNotReady(ctx context.Context, cq *strata.ClusterQueue) string {
	var why []string
	for _, name := range workload.QueueChecks(cq) {
		var ac strata.AdmissionCheck
		err := s.client.Get(ctx, types.NamespacedName{Name: name}, &ac)
		switch {
		case meta.IsNoMatchError(err):
			why = append(why, fmt.Sprintf("admission check %s: the AdmissionCheck CRD is not installed (apply the agent chart's crds/)", name))
		case apierrors.IsNotFound(err):
			why = append(why, fmt.Sprintf("admission check %s does not exist", name))
		case err != nil:
			why = append(why, fmt.Sprintf("admission check %s: %v", name, err))
		case !meta.IsStatusConditionTrue(ac.Status.Conditions, strata.AdmissionCheckActive):
			why = append(why, fmt.Sprintf("admission check %s is not Active (its controller, %s, has not marked it)", name, ac.Spec.ControllerName))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("ClusterQueue %s admits no workloads: %s", cq.Name, strings.Join(why, "; "))
}

// unitFlavors are, for a walk of wl's flavor assignment units over a
// queue's flavors, their names, their definitions (nil for a flavor not
// ready) and the workloads topology spreading counts.
func (s *Scheduler) unitFlavors(flavors []strata.FlavorQuotas, wl *strata.Workload) (names []string, defs []*strata.ResourceFlavor, others []*strata.Workload) {
	names = make([]string, len(flavors))
	defs = make([]*strata.ResourceFlavor, len(flavors))
	for i, fq := range flavors {
		names[i] = fq.Name
		if def, err := s.flavorReady(fq.Name); err == nil {
			defs[i] = def
		}
	}
	if workload.Spreads(wl) && workload.DispatchKey(wl) == "" {
		others = s.cache.AdmittedIn(wl.Namespace)
	}
	return names, defs, others
}

// unitsOn are the flavors of a units' walk on the cache's snapshots (held
// under its lock): one without a definition, snapshot or Topology has no
// snapshot, and nothing goes there.
func unitsOn(defs []*strata.ResourceFlavor, snaps []*tas.Snapshot, topos []*strata.Topology, others []*strata.Workload) []workload.UnitFlavor {
	units := make([]workload.UnitFlavor, len(defs))
	for i := range defs {
		units[i] = workload.UnitFlavor{Def: cmp.Or(defs[i], &strata.ResourceFlavor{}), Admitted: others}
		if defs[i] != nil && snaps[i] != nil && topos[i] != nil {
			units[i].Snapshot, units[i].TopologyName = snaps[i], topos[i].Name
		}
	}
	return units
}

// placeByUnit admits, when its pod sets fit on different flavors of its
// queue, a workload with more than one flavor assignment unit (a pod set
// alone, or a PodSet group: workload.FlavorUnits), each on the flavor
// Kueue's flavor assigner gives it (workload.PlaceByUnit), and takes the
// capacity in the cache in the same step; where says which flavor each
// pod set is on. It returns nil when the walk puts every unit on one
// flavor (the one-flavor walk admits it there, as any workload) or some
// unit fits nowhere now (the one-flavor walk gives the reasons, and
// preempts for the whole workload on one flavor).
func (s *Scheduler) placeByUnit(cq *strata.ClusterQueue, flavors []strata.FlavorQuotas, books *queue.Books, wl *strata.Workload) (admitted *strata.Workload, where string) {
	if len(flavors) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil, ""
	}
	names, defs, others := s.unitFlavors(flavors, wl)
	tryNext := queue.Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	err := s.cache.ReserveFlavors(names, client.ObjectKeyFromObject(wl), func(snaps []*tas.Snapshot, topos []*strata.Topology) (*strata.Workload, error) {
		units := unitsOn(defs, snaps, topos, others)
		p, ok := workload.PlaceByUnit(wl, units, books.UnitQuota(cq.Name, names), tryNext, s.opts)
		if !ok {
			return nil, nil
		}
		p.Release(units) // taken for good as the admission is recorded
		if p.Distinct() < 2 {
			return nil, nil
		}
		admission := &strata.Admission{ClusterQueue: cq.Name}
		parts := make([]string, 0, len(wl.Spec.PodSets))
		for i := range wl.Spec.PodSets {
			ps := &wl.Spec.PodSets[i]
			flavor := names[p.Flavors[i]]
			admission.PodSetAssignments = append(admission.PodSetAssignments, strata.PodSetAssignment{
				Name:               ps.Name,
				Flavor:             flavor,
				Count:              ps.Count,
				ResourceUsage:      queue.PodSetUsage(cq, ps),
				TopologyAssignment: tas.Encode(p.Assignments[i]),
			})
			parts = append(parts, fmt.Sprintf("%s (pod set %s)", flavor, ps.Name))
		}
		where = strings.Join(parts, ", ")
		admitted = s.withAdmission(cq, wl, wl, admission, "on flavors "+where)
		return admitted, nil
	})
	if err != nil {
		// Not expected: the placement was found under the cache's lock.
		return nil, ""
	}
	return admitted, where
}

// pinnedReasons says, of a hub's copy whose pod sets the hub pinned to
// different flavors (strata.dev/pod-set-flavors), why each unit that
// does not fit on its own flavor now does not ("pod set workers: flavor
// h100: ..."); nil for any other workload, or when each fits alone.
func (s *Scheduler) pinnedReasons(cq *strata.ClusterQueue, flavors []strata.FlavorQuotas, books *queue.Books, wl *strata.Workload) []string {
	pins, err := workload.PinnedPodSetFlavors(wl)
	if err != nil || pins == nil || len(flavors) < 2 {
		return nil
	}
	var out []string
	for _, unit := range workload.FlavorUnits(wl) {
		sub := workload.WithPodSets(wl, unit)
		pinned := pins[sub.Spec.PodSets[0].Name]
		i := slices.IndexFunc(flavors, func(fq strata.FlavorQuotas) bool { return fq.Name == pinned })
		if i < 0 {
			continue
		}
		if _, err := s.placeOn(cq, flavors[i], books, sub, nil, false); err != nil {
			names := make([]string, len(sub.Spec.PodSets))
			for k := range sub.Spec.PodSets {
				names[k] = sub.Spec.PodSets[k].Name
			}
			out = append(out, fmt.Sprintf("pod set %s: flavor %s: %v", strings.Join(names, ", "), pinned, err))
		}
	}
	return out
}

// unitsCouldFit says whether every flavor assignment unit of a workload of
// several (workload.FlavorUnits) fits, on its own, on some flavor of its
// queue where no change of capacity is needed to know it could: the
// flavor is ready, its taints are tolerated, its quota could ever hold
// the unit and its Topology has the levels the unit names.
func (s *Scheduler) unitsCouldFit(cq *strata.ClusterQueue, flavors []strata.FlavorQuotas, books *queue.Books, wl *strata.Workload) bool {
	units := workload.FlavorUnits(wl)
	if len(units) < 2 || len(flavors) < 2 {
		return false
	}
	for _, unit := range units {
		sub := workload.WithPodSets(wl, unit)
		if !slices.ContainsFunc(flavors, func(fq strata.FlavorQuotas) bool {
			def, err := s.flavorReady(fq.Name)
			if err != nil || workload.FlavorRefusal(def, sub) != "" {
				return false
			}
			if fit := books.Check(cq.Name, fq.Name, queue.WorkloadRequests(sub), false); fit.Err != nil && fit.Never {
				return false
			}
			levelsOK := false
			s.cache.Flavor(fq.Name, func(snap *tas.Snapshot, topo *strata.Topology) {
				levelsOK = snap != nil && topo != nil
				if !levelsOK {
					return
				}
				for i := range sub.Spec.PodSets {
					if workload.ValidateAgainstTopology(sub.Spec.PodSets[i].TopologyRequest, topo.Name, snap.Levels()) != nil {
						levelsOK = false
					}
				}
			})
			return levelsOK
		}) {
			return false
		}
	}
	return true
}

// partialNote says, for the Admitted condition, which pod sets an
// admission admits with fewer pods than they ask for ("" when none).
func partialNote(wl *strata.Workload, a *strata.Admission) string {
	counts := make([]int32, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		counts[i] = wl.Spec.PodSets[i].Count
		for _, psa := range a.PodSetAssignments {
			if psa.Name == wl.Spec.PodSets[i].Name {
				counts[i] = psa.Count
			}
		}
	}
	fewer := workload.FewerPods(wl.Spec.PodSets, counts)
	if fewer == "" {
		return ""
	}
	if _, capped := wl.Annotations[strata.PodSetCountsAnnotation]; capped {
		return ", with " + fewer + " (partial admission: its hub placed it with at most as many, " +
			strata.PodSetCountsAnnotation + ": " + wl.Annotations[strata.PodSetCountsAnnotation] + ")"
	}
	return ", with " + fewer + " (partial admission: all did not fit)"
}

// partialChoice is a partial admission chosen: the pod sets' counts, the
// flavor (an index into the queue's flavors), and the victims a search
// found there when they must be preempted first (nil: the counts fit).
type partialChoice struct {
	counts  []int32
	flavor  int
	victims *preemption.Result
}

// partially chooses how a workload whose pod sets may run with fewer pods
// (minCount), and which neither fits as it asks nor preempts for all of
// them, is admitted, as Kueue's partial admission: with the most pods
// (a binary search over the pods taken away, shared out among the pod
// sets in proportion to what each may lose, in whole slices:
// workload.ReducedCounts) that fit on one of the queue's flavors or, when
// its ClusterQueue lets it preempt, for which a search finds victims. The
// flavors are walked as for all of its pods: the first where the counts
// fit; under whenCanPreempt: Preempt, the first where victims are found
// (unless it would then borrow and whenCanBorrow is TryNextFlavor); else
// the best preemption (preemption.Better). ok is false when no count is
// admissible, or when preempting may be needed and the pass has no search
// left to decide (the next pass decides).
func (s *Scheduler) partially(cq *strata.ClusterQueue, flavors []strata.FlavorQuotas, books *queue.Books, wl *strata.Workload, preempts bool, upTo *int32) (partialChoice, bool) {
	total := workload.Reducible(wl.Spec.PodSets, s.opts.PartialSlices)
	if total == 0 || (preempts && s.searches <= 0) {
		return partialChoice{}, false
	}
	fung := queue.Fungibility(cq)
	_, c, ok := workload.FewestTakenAway(total, func(k int32) (partialChoice, bool) {
		c := partialChoice{counts: workload.ReducedCounts(wl.Spec.PodSets, k, s.opts.PartialSlices)}
		sized := workload.WithCounts(wl, c.counts)
		need := queue.WorkloadRequests(sized)
		c.flavor, c.victims = preemption.WalkFlavors(preemption.Flavors{
			N: len(flavors),
			Borrowing: func(i int) (int, bool) {
				fit := books.Check(cq.Name, flavors[i].Name, need, false)
				return books.BorrowHeight(cq.Name, flavors[i].Name, need), fit.Err == nil && fit.Borrows
			},
			Try: func(i int) preemption.Trial {
				_, err := s.placeOn(cq, flavors[i], books, wl, c.counts, false)
				return preemption.Trial{Fit: err == nil, Short: err != nil &&
					!errors.As(err, new(flavorNotReadyError)) && !errors.As(err, new(inadmissibleError))}
			},
			// The searches of one choice are not cut short by the pass's
			// budget (a choice made on a search left out would admit
			// fewer pods than Kueue does); each counts against it, so
			// that the workloads after this one search no more in this
			// pass.
			Search: func(i int) *preemption.Result {
				s.searches--
				if r, _ := s.search(cq, flavors[i], books, sized, upTo); len(r.Victims) > 0 {
					return &r
				}
				return nil
			},
			Preempts: preempts,
		}, fung, cq.Name)
		return c, c.flavor >= 0
	})
	return c, ok // !ok: not even its fewest pods
}

// delaysTopology says whether cq's checks for a workload on flavor
// include a ProvisioningRequest check (KEP-2724): the topology is assigned
// once it is Ready, on the nodes it provisioned.
func (s *Scheduler) delaysTopology(cq *strata.ClusterQueue, flavor string) bool {
	for _, name := range workload.ChecksOf(cq, []string{flavor}) {
		var ac strata.AdmissionCheck
		if err := s.client.Get(context.Background(), types.NamespacedName{Name: name}, &ac); err == nil && ac.Spec.ControllerName == strata.ProvisioningRequestControllerName {
			return true
		}
	}
	return false
}

// quotaOnly is the admission of every pod set on a flavor whose topology
// assignment is delayed: its quota, no topologyAssignment, and
// delayedTopologyRequest Pending.
func quotaOnly(cq *strata.ClusterQueue, flavor string, wl *strata.Workload) *strata.Admission {
	admission := &strata.Admission{ClusterQueue: cq.Name}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		admission.PodSetAssignments = append(admission.PodSetAssignments, strata.PodSetAssignment{
			Name:                   ps.Name,
			Flavor:                 flavor,
			Count:                  ps.Count,
			ResourceUsage:          queue.PodSetUsage(cq, ps),
			DelayedTopologyRequest: ptr.To(strata.DelayedTopologyRequestPending),
		})
	}
	return admission
}

// placeOnFlavor computes the admission of every pod set on a flavor; pod
// sets of one group share a domain. The snapshot is left unchanged.
func placeOnFlavor(snap *tas.Snapshot, topo *strata.Topology, flavorDef *strata.ResourceFlavor, cq *strata.ClusterQueue, wl *strata.Workload, others []*strata.Workload, opts tas.Options) (*strata.Admission, error) {
	assignments, taken, err := workload.PlaceSpread(snap, topo.Name, flavorDef.Spec.Tolerations, wl, others, opts)
	if err != nil {
		return nil, err
	}
	for _, u := range taken {
		snap.Release(u)
	}
	admission := &strata.Admission{ClusterQueue: cq.Name}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		admission.PodSetAssignments = append(admission.PodSetAssignments, strata.PodSetAssignment{
			Name:               ps.Name,
			Flavor:             flavorDef.Name,
			Count:              ps.Count,
			ResourceUsage:      queue.PodSetUsage(cq, ps),
			TopologyAssignment: tas.Encode(assignments[i]),
		})
	}
	return admission, nil
}

// admittedAt is the time an admission made at now records in its
// Admitted condition, given that condition before it (prev, nil when
// none). The API keeps that time to the second, and a started Job tells
// the admission it was started with from a later one by it (with the
// ClusterQueue): an admission in the same second as the condition before
// it — admitted, started, evicted and admitted again within one second —
// is recorded one second after that condition, so that it never reads as
// the admission it replaces.
func admittedAt(prev *metav1.Condition, now time.Time) metav1.Time {
	if prev != nil {
		last := prev.LastTransitionTime.Truncate(time.Second)
		if !now.Truncate(time.Second).After(last) {
			return metav1.NewTime(last.Add(time.Second))
		}
	}
	return metav1.NewTime(now)
}

// admit writes an admission whose capacity place took in the cache,
// asynchronously; a failed write gives the capacity back and wakes the
// scheduler.
func (s *Scheduler) admit(ctx context.Context, wl *strata.Workload, flavorName string, usage map[string]corev1.ResourceList, books *queue.Books) {
	admission := wl.Status.Admission
	key := client.ObjectKeyFromObject(wl)
	queue.AddUsage(usage, admission.PodSetAssignments)
	for _, psa := range admission.PodSetAssignments {
		books.Charge(admission.ClusterQueue, psa.Flavor, psa.ResourceUsage, 1)
		// A copy: the writer decodes the server's answer into psa's maps.
		s.round.charged = append(s.round.charged, roundCharge{admission.ClusterQueue, psa.Flavor, psa.ResourceUsage.DeepCopy(), 1})
	}
	// A copy: the write below decodes the server's answer into wl, and with
	// it into admission, while later passes read the in-flight admission
	// (a pass seeing its pod set assignments half decoded would not count
	// the workload against its quota).
	pending := &inflightAdmission{admission: admission.DeepCopy(), uid: wl.UID}
	s.passAdmitted++
	s.mu.Lock()
	s.inflight[key] = pending
	s.mu.Unlock()
	log := ctrl.LoggerFrom(ctx)
	s.writers <- struct{}{}
	go func() {
		defer func() { <-s.writers }()
		if err := s.client.Status().Update(ctx, wl); err != nil {
			if !cache.OutcomeKnown(err) {
				// A timeout or a lost connection: the server may have
				// applied the write. Keep the capacity until a fresh read
				// says whether it did.
				log.Error(err, "Recording an admission: outcome unknown; keeping its capacity until the Workload is read again", "workload", key)
				if s.settle(ctx, key, pending) {
					return
				}
			} else {
				log.Error(err, "Recording an admission; giving its capacity back", "workload", key)
			}
			s.cache.RemoveWorkload(key)
			// The next pass accounts what the informer shows.
			s.index.recheckLater(key)
			s.mu.Lock()
			if s.inflight[key] == pending {
				delete(s.inflight, key)
			}
			s.mu.Unlock()
			s.Wake()
			return
		}
		if v := cache.Version(wl); v != math.MaxInt64 {
			s.mu.Lock()
			pending.written = v
			s.mu.Unlock()
		}
		log.V(2).Info("Admitted", "workload", key, "flavor", flavorName)
	}()
}

// settle reads a workload whose admission write had an unknown outcome
// from the API server (not the informer), retrying with backoff until it
// can tell: it returns true when the admission was applied (the capacity
// stays taken, as for a successful write), false when it was not (the
// caller gives the capacity back) or ctx ended.
func (s *Scheduler) settle(ctx context.Context, key types.NamespacedName, pending *inflightAdmission) bool {
	log := ctrl.LoggerFrom(ctx)
	delay := settleBase
	for {
		var cur strata.Workload
		err := s.reader.Get(ctx, key, &cur)
		switch {
		case apierrors.IsNotFound(err):
			return false
		case err == nil:
			if cur.UID != pending.uid || !equality.Semantic.DeepEqual(cur.Status.Admission, pending.admission) {
				return false
			}
			s.mu.Lock()
			pending.written = cache.Version(&cur)
			s.mu.Unlock()
			log.V(2).Info("An admission whose write timed out was applied", "workload", key)
			return true
		}
		log.Error(err, "Reading a workload whose admission write had an unknown outcome; retrying", "workload", key, "in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
		delay = min(2*delay, settleMax)
	}
}

// settleBase and settleMax bound the backoff of settle's reads.
const (
	settleBase = 500 * time.Millisecond
	settleMax  = 30 * time.Second
)

// missingFlavors are the flavors a ClusterQueue lists that do not exist,
// are not topology-aware, or whose Topology does not exist.
func (s *Scheduler) missingFlavors(cq *strata.ClusterQueue) []string {
	var missing []string
	for _, fq := range queue.Flavors(cq) {
		if !s.cache.Flavor(fq.Name, func(*tas.Snapshot, *strata.Topology) {}) {
			missing = append(missing, fq.Name)
		}
	}
	return missing
}

// updateQueues writes every ClusterQueue's status: pending and admitted
// workloads, usage per flavor (v's, with the in-flight admissions), and
// whether it can admit at all.
func (s *Scheduler) updateQueues(ctx context.Context, cqs []*strata.ClusterQueue, v *indexView, pending map[string][]*strata.Workload, books *queue.Books) error {
	var errs []error
	names := make(map[string]bool, len(cqs))
	for _, cq := range cqs {
		names[cq.Name] = true
		cq = cq.DeepCopy()
		st := cq.Status.DeepCopy()
		st.PendingWorkloads = int32(len(pending[cq.Name]))
		st.AdmittedWorkloads, st.ReservingWorkloads = v.admitted[cq.Name], v.reserving[cq.Name]
		st.FlavorsUsage = nil
		flavors := queue.Flavors(cq)
		for _, fq := range flavors {
			if u := queue.StatusUsage(cq, v.usage[cq.Name][fq.Name]); len(u) > 0 {
				st.FlavorsUsage = append(st.FlavorsUsage, strata.FlavorUsage{Name: fq.Name, Resources: u})
			}
		}
		st.FlavorsReservation = books.Reservation(cq)
		st.FairSharing = nil
		if s.fair != nil {
			st.FairSharing = &strata.FairSharingStatus{WeightedShare: books.Share(cq.Name).Rounded()}
		}
		recordBorrowing(cq.Name, st.FlavorsReservation)
		active := metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "can admit workloads"}
		missing := s.missingFlavors(cq)
		switch {
		case cq.DeletionTimestamp != nil:
			// Kept by the in-use controller until what it admitted ends.
			active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueTerminating,
				Message: terminatingMessage(st.ReservingWorkloads)}
		case strata.Stopped(cq.Spec.StopPolicy):
			active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueStopped,
				Message: fmt.Sprintf("stopped (stopPolicy %s): admits no workloads until the policy is None", *cq.Spec.StopPolicy)}
		case len(missing) > 0:
			active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueFlavorNotReady,
				Message: fmt.Sprintf("flavors %s do not exist, are not topology-aware, or their Topology does not exist", strings.Join(missing, ", "))}
		case books.InCycle(cq.Name):
			active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueCohortCycle,
				Message: fmt.Sprintf("cohort %s is on a cycle of Cohort parents (spec.parentName): admits no workloads until the cycle is broken", cq.Spec.Cohort)}
		default:
			if why := s.checksNotReady(ctx, cq); why != "" {
				active = metav1.Condition{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueAdmissionCheckNotReady, Message: why}
			}
		}
		meta.SetStatusCondition(&st.Conditions, active)
		metrics.AgentQueues.Record(cq, st, flavors)
		if equality.Semantic.DeepEqual(*st, cq.Status) {
			continue
		}
		if last, ok := s.queueStatusAt[cq.Name]; ok && time.Since(last) < queueStatusInterval {
			// Write the final numbers later: one timer for all queues.
			if s.queueStatusWake.CompareAndSwap(false, true) {
				time.AfterFunc(queueStatusInterval-time.Since(last), func() {
					s.queueStatusWake.Store(false)
					s.Wake()
				})
			}
			continue
		}
		s.queueStatusAt[cq.Name] = time.Now()
		cq.Status = *st
		// A conflict is no error: the newer queue comes as an event, whose
		// pass writes the numbers then (after the interval).
		if err := s.client.Status().Update(ctx, cq); !apierrors.IsConflict(err) {
			errs = append(errs, client.IgnoreNotFound(err))
		}
	}
	recordCohortShares(s.fair != nil, books)
	// The metrics of a ClusterQueue deleted since the last pass go, as
	// Kueue clears a deleted queue's: its gauges and its counters.
	for q := range s.recorded {
		if !names[q] {
			metrics.AgentQueues.Forget(q)
			borrowing.Drop(q)
			metrics.ForgetAgentQueue(q)
		}
	}
	s.recorded = names
	return errors.Join(errs...)
}

// terminatingMessage is the Active=False message of a ClusterQueue being
// deleted while reserving of its workloads hold its quota.
func terminatingMessage(reserving int32) string {
	if reserving == 0 {
		return "being deleted: admits no workloads"
	}
	return fmt.Sprintf("being deleted: admits no workloads, and goes once its %d admitted workload(s) finish", reserving)
}

// drain evicts the admitted workloads of the ClusterQueues and
// LocalQueues whose stopPolicy is HoldAndDrain (Kueue's semantics): each
// gets Evicted=True with reason ClusterQueueStopped or LocalQueueStopped,
// the Job controller stops its job, and it waits in its stopped queue. A
// workload whose admission is still being written is drained by the pass
// after the informer shows it.
func (s *Scheduler) drain(ctx context.Context, cqs []*strata.ClusterQueue) error {
	byName := make(map[string]*strata.ClusterQueue, len(cqs))
	cqDrains := false
	for _, cq := range cqs {
		byName[cq.Name] = cq
		cqDrains = cqDrains || strata.Drains(cq.Spec.StopPolicy)
	}
	var lqs strata.LocalQueueList
	if err := s.client.List(ctx, &lqs, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	draining := map[types.NamespacedName]*strata.LocalQueue{}
	for i := range lqs.Items {
		if lq := &lqs.Items[i]; strata.Drains(lq.Spec.StopPolicy) {
			draining[client.ObjectKeyFromObject(lq)] = lq
		}
	}
	if !cqDrains && len(draining) == 0 {
		s.drained = drainScan{}
		return nil
	}
	// A scan reads every workload: it is made again only when the
	// draining queues change or a workload is admitted since the last
	// one, or when that one failed.
	scan := drainScan{queues: drainingKey(cqs, draining), admissions: s.index.admissionCount()}
	if scan == s.drained {
		return nil
	}
	stopOf := func(wl *strata.Workload) queue.Stop {
		return queue.StopOf(draining[queue.Key(wl)], byName[wl.Status.Admission.ClusterQueue])
	}
	var errs []error
	again := false
	for _, wl := range s.index.admittedWhere(func(wl *strata.Workload) bool { return stopOf(wl).Drain }) {
		stop := stopOf(wl)
		done, err := s.evictStopped(ctx, client.ObjectKeyFromObject(wl), stop.Reason,
			queue.DrainMessage(stop.Reason, strata.StopHoldAndDrain, wl.Spec.QueueName, wl.Status.Admission.ClusterQueue))
		errs = append(errs, err)
		again = again || !done
	}
	s.drained = drainScan{}
	if !again {
		s.drained = scan
	}
	return errors.Join(errs...)
}

// drainScan is what a drain scan saw: the draining queues and the
// index's admission count.
type drainScan struct {
	queues     string
	admissions uint64
}

// drainingKey names the draining ClusterQueues and LocalQueues.
func drainingKey(cqs []*strata.ClusterQueue, lqs map[types.NamespacedName]*strata.LocalQueue) string {
	var names []string
	for _, cq := range cqs {
		if strata.Drains(cq.Spec.StopPolicy) {
			names = append(names, cq.Name)
		}
	}
	for key := range lqs {
		names = append(names, key.String())
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// evictStopped takes back the admission of a workload its stopped queue
// drains, as evictVictim does for a preempted one. done is false when it
// must be tried again (a conflict, or err).
func (s *Scheduler) evictStopped(ctx context.Context, key types.NamespacedName, reason, message string) (done bool, err error) {
	cur := &strata.Workload{}
	if err := s.reader.Get(ctx, key, cur); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if cur.Status.Admission == nil {
		return true, nil
	}
	workload.AccumulateExecution(cur.Spec.MaximumExecutionTimeSeconds, &cur.Status, s.clock.Now())
	cur.Status.Admission = nil
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: reason, Message: message})
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: reason, Message: message})
	// Out of its queue until the queue admits again (Kueue's).
	workload.SetRequeued(cur, metav1.ConditionFalse, reason, message, s.clock.Now())
	if err := s.client.Status().Update(ctx, cur); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case apierrors.IsConflict(err):
			return false, nil // the newer Workload's event brings a pass, which drains it
		}
		return false, fmt.Errorf("draining %s: %w", key, err)
	}
	s.cache.RemoveWorkload(key)
	note := truncateNote(message)
	s.recorder.Eventf(cur, nil, corev1.EventTypeWarning, reason, "Evict", "%s", note)
	if job := workload.OwnerJob(cur); job != nil {
		s.recorder.Eventf(job, cur, corev1.EventTypeWarning, reason, "Evict", "%s", note)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Drained", "workload", key, "reason", reason)
	return true, nil
}

// recordCohortShares sets every cohort's weighted share, under fair
// sharing (on), as Kueue's kueue_cohort_weighted_share; none when off. A
// cohort gone since the last pass loses its series.
func recordCohortShares(on bool, books *queue.Books) {
	cohortShares.Replace("", func(put metrics.Put) {
		if !on {
			return
		}
		for name, share := range books.CohortShares() {
			put(metrics.CohortWeightedShare, float64(share.Rounded()), name)
		}
	})
}

// cohortShares are the cohorts' weighted shares, replaced at each pass.
var cohortShares metrics.Series

// recordBorrowing sets the borrowed and lent gauges of a queue.
func recordBorrowing(cq string, reservation []strata.FlavorReservation) {
	borrowing.Replace(cq, func(put metrics.Put) {
		for _, f := range reservation {
			for _, r := range f.Resources {
				if !r.Borrowed.IsZero() {
					put(metrics.BorrowedQuota, r.Borrowed.AsApproximateFloat64(), cq, f.Name, string(r.Name))
				}
				if !r.Lent.IsZero() {
					put(metrics.LentQuota, r.Lent.AsApproximateFloat64(), cq, f.Name, string(r.Name))
				}
			}
		}
	})
}

// borrowing are the series of BorrowedQuota and LentQuota, by
// ClusterQueue; passGauges those of PendingWorkloads and AdmittedPods,
// replaced at each pass. Replaced rather than reset: a scrape during a
// pass finds every series, with the last pass's values or this one's.
var borrowing, passGauges metrics.Series

// recordAttempt counts a pass that had pending workloads to try as an
// admission attempt (Kueue's kueue_admission_attempts_total and
// kueue_admission_attempt_duration_seconds): success when it admitted at
// least one, inadmissible when none. A pass with nothing pending is no
// attempt.
func recordAttempt(tried, admitted int, took time.Duration) {
	if tried == 0 {
		return
	}
	result := metrics.AttemptInadmissible
	if admitted > 0 {
		result = metrics.AttemptSuccess
	}
	metrics.AdmissionAttempts.WithLabelValues(result).Inc()
	metrics.AdmissionAttemptDuration.WithLabelValues(result).Observe(took.Seconds())
}

// recordQueues sets the pending and admitted gauges from one pass's view
// and its pending workloads by ClusterQueue: those it may try (byQueue)
// by queue.PendingStatus (queues: the ClusterQueues by name; inactive:
// those that cannot admit now), those of stopped queues or whose
// admission checks are not ready (held) inadmissible, as Kueue counts
// the workloads of an inactive queue.
func recordQueues(v *indexView, byQueue, held map[string][]*strata.Workload, queues map[string]*strata.ClusterQueue, inactive map[string]bool) {
	passGauges.Replace("", func(put metrics.Put) {
		n := map[string]map[string]int{}
		count := func(q, status string) {
			if n[q] == nil {
				n[q] = map[string]int{}
			}
			n[q][status]++
		}
		for q, wls := range byQueue {
			strict := queue.StrictFIFO(queues[q])
			for _, wl := range wls {
				count(q, queue.PendingStatus(wl, strict, !inactive[q]))
			}
		}
		for q, wls := range held {
			for range wls {
				count(q, queue.PendingInadmissible)
			}
		}
		for q, by := range n {
			for _, st := range []string{queue.PendingActive, queue.PendingInadmissible} {
				put(metrics.PendingWorkloads, float64(by[st]), q, st)
			}
		}
		for f, n := range v.pods {
			put(metrics.AdmittedPods, float64(n), f)
		}
	})
}

// setNotAdmitted writes the Admitted=False condition with reason and
// message, and events saying why the workload waits, when it changed; wl
// is the cache's object and is not modified.
func (s *Scheduler) setNotAdmitted(ctx context.Context, wl *strata.Workload, reason, message string) error {
	// A reason is written when its meaning changes, not when only its
	// live numbers do ("the best rack fits 2 of 4 pods" and "3 of 4"): a
	// capacity change would otherwise cost a write and an event for every
	// waiting workload.
	// A workload its stopped queue holds is not back in the queue; any
	// other reason is the queue's (Kueue's Requeued=True), written with it.
	// Not with the backoff's reason: the pass found the backoff not over,
	// whatever the clock says a moment later.
	// Nor while its hub is fenced: it is held, not queued.
	queueRuns := reason != strata.QueueStopped
	now := s.clock.Now()
	requeue := reason != strata.EvictedByPodsReadyTimeout && reason != ReasonHeld && workload.RequeueDue(wl, queueRuns, now)
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	// But a preemption's message is a record (restorePreemptions reads
	// its flavor, counts and victims after a restart): any change of it is
	// written.
	said := c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason &&
		(c.Message == truncate(message) || reason != ReasonPreempting && workload.SameMeaning(c.Message, truncate(message)))
	if said && !requeue {
		return nil
	}
	wl = wl.DeepCopy()
	changed := meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: reason, Message: truncate(message)})
	if requeue {
		workload.Requeue(wl, queueRuns, now)
	}
	if !changed && !requeue {
		return nil
	}
	if err := s.client.Status().Update(ctx, wl); err != nil {
		if apierrors.IsConflict(err) {
			// The cache is behind: the newer Workload comes as an event
			// (WorkloadEvent), whose pass decides again. Not worth an
			// error, nor a second's wait.
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	// Once per change of the condition, which is written only when its
	// reason or message changes: a pass that finds the same reason writes
	// nothing and says nothing, and so does the first pass after a
	// restart. The same goes on the Job, so that kubectl describe job says
	// why it waits. A write of Requeued alone says nothing.
	if said {
		return nil
	}
	note := truncateNote(message)
	s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, reason, "Schedule", "%s", note)
	if job := workload.OwnerJob(wl); job != nil {
		s.recorder.Eventf(job, wl, corev1.EventTypeNormal, reason, "Schedule", "%s", note)
	}
	return nil
}

// maxEventNote is the API's limit on an events.k8s.io/v1 Event's note: a
// longer one is rejected, and the event lost.
const maxEventNote = 1024

// truncateNote shortens an event note to the API's limit, on a character
// boundary.
func truncateNote(m string) string {
	if len(m) <= maxEventNote {
		return m
	}
	cut := maxEventNote - 3
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "..."
}

// truncate shortens a condition message to the API's limit of 32 KiB, on
// a character boundary.
func truncate(m string) string {
	const limit = 32 * 1024
	if len(m) <= limit {
		return m
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "..."
}

// roundBooks is what a round of a pass changed in the books: the
// admissions and preemptions it made (charged). Unlike Kueue's cycle (and
// simulate's round), a head that must preempt and finds no victims holds
// nothing for the rest of the round: Kueue then sets such a head aside
// until something changes, while the agent serves every pending workload
// in every pass, so that its hold would hold back the borrowers behind it
// for as long as it waits (held stays empty).
type roundBooks struct {
	charged, held []roundCharge
	// skipped: try just left a head for the next round, waiting for
	// skipMessage's reason.
	skipped     bool
	skipMessage string
}

// maxRoundRetries bounds how often a pass serves a skipped head again.
const maxRoundRetries = 8

// roundCharge is one change of the books: requests charged (sign 1) or
// taken back (-1, a victim) of a queue on a flavor.
type roundCharge struct {
	queue, flavor string
	requests      corev1.ResourceList
	sign          int64
}

// nominate returns the flavor a round would have nominated wl on as it
// began (queue.Books.Nominee on the books without the round's changes),
// as Kueue's scheduler nominates a cycle's heads at its start, and whether
// its quota fitted there then. Nothing when the round changed nothing
// before wl: the flavor walk then decides alone.
func (r *roundBooks) nominate(books *queue.Books, cq *strata.ClusterQueue, wl *strata.Workload, usable func(flavor string) bool) (string, bool) {
	touched := false
	for _, set := range [][]roundCharge{r.charged, r.held} {
		for _, c := range set {
			touched = touched || c.queue == cq.Name || books.Peer(cq.Name, c.queue)
		}
	}
	if !touched {
		return "", false
	}
	r.undo(books, -1)
	defer r.undo(books, 1)
	c := books.NomineeAmong(cq, wl, usable)
	return c.Flavor, c.Flavor != "" && books.Check(cq.Name, c.Flavor, c.Requests, false).Err == nil
}

// undo takes the round's changes out of the books (sign -1) or puts them
// back (1).
func (r *roundBooks) undo(books *queue.Books, sign int64) {
	for _, set := range [][]roundCharge{r.charged, r.held} {
		for _, c := range set {
			books.Charge(c.queue, c.flavor, c.requests, sign*c.sign)
		}
	}
}

// end gives back what the round held and starts the next.
func (r *roundBooks) end(books *queue.Books) {
	for _, c := range r.held {
		books.Charge(c.queue, c.flavor, c.requests, -c.sign)
	}
	r.charged, r.held, r.skipped = nil, nil, false
}
