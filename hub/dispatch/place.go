package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// placeOnTargets holds the fleet's targets of workers while it rebuilds
// their reservations (rebuild) and places what waits (place). It returns
// when the next pass is due, as place does.
func (d *Dispatcher) placeOnTargets(ctx context.Context, workers []fleet.Worker, c *collected, view *passView, now time.Time,
	writes *passWrites) (time.Duration, error) {
	var next time.Duration
	err := d.fleet.WithTargets(ctx, workers, now, d.staleAfter, func(targets []*placement.Target) error {
		d.rebuild(ctx, targets, c.rebuildable)
		view.dispatched, view.resizes, view.checks = c.dispatched, c.resizes, c.checks
		view.placed, view.behind, view.targets = c.placed, c.behind, targets
		view.reclaimSearches, view.noReclaim = reclaimSearchesPerPass, map[reclaimKey]string{}
		view.oracles = oracleSearchesPerPass
		var err error
		next, err = d.place(ctx, targets, c.waiting, c.queues, c.usage, view, now, writes)
		metrics.HubReservations.Set(float64(countReservations(targets)))
		return err
	})
	return next, err
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
	// Under admission fair sharing, a queue whose admissionScope asks for
	// it dispatches first the workloads of the LocalQueue that consumed
	// the least; a dispatch counts against its LocalQueue at once.
	var lqUsage *queue.UsagePass
	byUsage := func(a, b pending) int { return lqUsage.Compare(a.wl, b.wl) }
	resort := false
	view.onDispatch, view.lqUsage, view.afsScoped = nil, nil, nil
	if d.afs.On() {
		lqUsage = d.afs.NewPass(func(key types.NamespacedName) *strata.LocalQueue {
			lq := &strata.LocalQueue{}
			if err := d.client.Get(ctx, key, lq); err != nil {
				return nil // gone meanwhile: no usage
			}
			return lq
		}, d.afsPenalties)
		view.onDispatch = func(wl *strata.Workload) {
			lqUsage.Admitted(wl)
			resort = true
		}
		view.lqUsage, view.afsScoped = lqUsage, map[string]bool{}
		for name, cq := range queues {
			if d.afs.Orders(cq) {
				view.afsScoped[name] = true
			}
		}
	}
	for _, t := range byQueue {
		if d.afs.Orders(t.Queue) {
			slices.SortStableFunc(t.Items, byUsage)
		} else {
			// A total order (namespace and name break ties): no stable
			// sort needed.
			slices.SortFunc(t.Items, func(a, b pending) int { return compareEntries(a.entry, b.entry) })
		}
		turns = append(turns, t)
	}
	books, err := d.books(ctx, queues, usage)
	if err != nil {
		return 0, err
	}
	d.holdReclaims(waiting, view.dispatched, view.resizes, books)
	d.resize(ctx, view.resizes, queues, view, books, writes)
	var errs []error
	var next time.Duration
	queue.Serve(turns, func(p pending) *strata.Workload { return p.wl },
		func(cq *strata.ClusterQueue, p pending) int {
			if d.fair != nil || view.oracles <= 0 {
				return books.WouldBorrow(cq, p.wl)
			}
			return books.WouldBorrowAfter(cq, p.wl, func(flavor string, _ corev1.ResourceList) (int, bool) {
				view.oracles--
				return heightAfterReclaiming(cq, flavor, books, view.dispatched, p)
			})
		}, d.fairPick(books), nil,
		func(cq *strata.ClusterQueue, p pending) bool {
			if books.InCycle(cq.Name) {
				// Kueue's inactive queue: nothing is dispatched until the
				// cycle of Cohort parents is broken (a Cohort's change
				// brings a pass).
				d.wait(ctx, p, strata.QueueCohortCycle, queue.CohortCycleMessage(cq))
				return false
			}
			resort = false
			blocks, retry, err := d.placeOne(ctx, targets, cq, books, view, p, now, writes)
			if err != nil {
				errs = append(errs, err)
			}
			if resort && d.afs.Orders(cq) {
				if t := byQueue[p.queue]; t != nil {
					slices.SortStableFunc(t.Items, byUsage)
				}
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
func (d *Dispatcher) placeOne(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, books *queue.Books,
	view *passView, p pending, now time.Time, writes *passWrites) (blocks bool, retry time.Duration, err error) {
	wl := p.wl
	if why := view.checks.notReady(ctx, cq); why != "" {
		// Kueue's ClusterQueue inactive for its admission checks: it
		// admits nothing until they exist and are Active.
		d.wait(ctx, p, strata.QueueAdmissionCheckNotReady, why)
		return false, 0, nil
	}
	// dispatched: this call dispatched p (its quota is charged).
	var dispatched bool
	if p.reserved {
		// Its reservation is not in its own way; it holds it while it
		// waits for a worker.
		usage := reservedUsage(p.entry)
		for f, need := range usage {
			books.Charge(cq.Name, f, need, -1)
		}
		clear(view.quota)
		defer func() {
			if !dispatched {
				for f, need := range usage {
					books.Charge(cq.Name, f, need, 1)
				}
				clear(view.quota)
			}
		}()
	}
	if r := d.reclaims[p.uid]; r != nil {
		// Its own hold is not in its way; it is held again while it
		// waits (unless a new reclaim replaced it, or it ended). Once
		// dispatched, the hold is dropped only when the dispatch is
		// recorded (holdReclaims): should the record's write fail, it
		// waits again, and the quota is still its own.
		books.Charge(r.queue, r.flavor, r.need, -1)
		clear(view.quota)
		defer func() {
			if d.reclaims[p.uid] == r && !dispatched {
				books.Charge(r.queue, r.flavor, r.need, 1)
				clear(view.quota)
			}
		}()
	}
	// Flavors in the queue's order, within quota: the same for every
	// workload of the queue that needs as much, until a dispatch.
	qk := quotaKey{queue: cq.Name, need: p.needKey}
	q, ok := view.quota[qk]
	if !ok {
		for _, fq := range queue.Flavors(cq) {
			if fit := books.Check(cq.Name, fq.Name, p.need, false); fit.Err != nil {
				q.notes = append(q.notes, fmt.Sprintf("flavor %s: %v", fq.Name, fit.Err))
				continue
			}
			q.flavors = append(q.flavors, fq.Name)
		}
		q.key = strings.Join(append(slices.Clip(q.flavors), q.notes...), "\x00")
		view.quota[qk] = q
	}
	flavors, notes := slices.Clip(q.flavors), slices.Clip(q.notes) // shared: appends copy
	if p.reserved {
		// On the flavors its checks were decided for.
		flavors, notes = nil, nil
		held := workload.AdmissionFlavors(wl.Status.Admission)
		for _, f := range held {
			if fit := books.Check(cq.Name, f, p.need, false); fit.Err != nil {
				notes = append(notes, fmt.Sprintf("flavor %s: %v", f, fit.Err))
				continue
			}
			flavors = append(flavors, f)
		}
		if len(held) > 1 {
			// Its pod sets reserved on different flavors: each is
			// checked by decide.
			flavors = held
		}
	}
	// A workload that may run with fewer pods (minCount) may be placed
	// with them on a flavor whose quota is short of all of them, as
	// Kueue's partial admission: the flavors within quota for its fewest
	// pods (placePartially checks each count).
	var partialFlavors []string
	if !p.reserved && workload.Reducible(wl.Spec.PodSets, d.policy.Options().PartialSlices) > 0 {
		fewest := queue.WorkloadRequests(workload.WithCounts(wl, workload.ReducedCounts(wl.Spec.PodSets, math.MaxInt32, d.policy.Options().PartialSlices)))
		for _, fq := range queue.Flavors(cq) {
			if books.Check(cq.Name, fq.Name, fewest, false).Err == nil {
				partialFlavors = append(partialFlavors, fq.Name)
			}
		}
	}
	if len(flavors) == 0 && len(partialFlavors) == 0 && !splittable(p) {
		message := "no flavor of ClusterQueue " + cq.Name + " has quota left: " + strings.Join(notes, "; ")
		// One reserved holds its quota already (others' holds, charged
		// while their victims go, may overcommit the queue a moment): it
		// waits, preempting nothing.
		if !p.reserved {
			if reclaiming := d.reclaimQuota(ctx, cq, books, view, p, writes); reclaiming != "" {
				message += "; " + reclaiming
			}
		}
		d.wait(ctx, p, ReasonPending, message)
		return true, 0, nil
	}
	// (One whose pod sets may go on different flavors is tried so by
	// decide: each may be within quota on its own.)
	// A refusal for a queue fact of the worker's (no namespace, no
	// LocalQueue) keeps no backoff where the hub reads those facts: they
	// are checked below, and the workload goes there once they are fixed.
	var backoffs map[string]time.Time
	if p.attempts {
		backoffs = BackoffsExcept(wl, d.backoff, now, func(a *strata.PlacementAttempt) bool {
			if !QueueRefusalReasons[a.Reason] {
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
	// A workload that spreads waits for reasons of its own: where others
	// of its kind went.
	// So does one that may be placed with fewer pods (minCount).
	if len(backoffs) == 0 && !p.reserved && !workload.Spreads(wl) && workload.Reducible(wl.Spec.PodSets, d.policy.Options().PartialSlices) == 0 {
		same = &waitKey{queue: cq.Name, localQueue: p.localQueue, kind: p.kind.GroupVersionKind(), shape: shape, flavors: q.key, priority: queue.Priority(wl),
			class: wl.Spec.PriorityClassName, classSource: wl.Spec.PriorityClassSource}
		if o, ok := view.waits[*same]; ok {
			d.waitFor(ctx, p, o)
			return o.blocks, 0, nil
		}
	}
	if d.reclaimingFewer(view, p) {
		// It waits for the victims of its reclaim for fewer pods, not
		// taking what fits meanwhile.
		d.wait(ctx, p, ReasonPending, "no flavor of ClusterQueue "+cq.Name+" has quota left for all of its pods; "+d.reclaimQuota(ctx, cq, books, view, p, writes))
		return true, 0, nil
	}
	o, dec, choice, counts := d.decide(ctx, targets, cq, view, p, shape, flavors, partialFlavors, notes, backoffs, now, books)
	if o.reclaim != nil {
		// With fewer pods, once preempting at the hub frees its queue's
		// quota for them.
		d.wait(ctx, p, ReasonPending, "no flavor of ClusterQueue "+cq.Name+" has quota left for all of its pods; "+
			d.startReclaim(ctx, cq, books, view, p.withCounts(counts), o.reclaim, writes))
		return true, 0, nil
	}
	if len(flavors) == 0 && dec == nil && choice == nil {
		// Not even its fewest pods go anywhere: it waits for quota.
		message := "no flavor of ClusterQueue " + cq.Name + " has quota left: " + strings.Join(notes, "; ")
		if !p.reserved {
			if reclaiming := d.reclaimQuota(ctx, cq, books, view, p, writes); reclaiming != "" {
				message += "; " + reclaiming
			}
		}
		d.wait(ctx, p, ReasonPending, message)
		return true, 0, nil
	}
	if p.reserved && (dec != nil || choice != nil) {
		if flavor, split := chosenFlavors(dec, choice); !OnReservedFlavors(wl.Status.Admission, flavor, split) {
			// Its checks were decided for the flavors reserved: it goes
			// there or waits.
			dec, choice = nil, nil
			o = waitOutcome{reason: ReasonPending, blocks: true, retry: o.retry, message: fmt.Sprintf(
				"its quota is reserved in hub ClusterQueue %s on %s, where its admission checks passed; no worker has room for it there now",
				cq.Name, workload.FlavorWords(&strata.Placement{Flavor: reservedFlavor(wl), PodSetFlavors: reservedSplit(wl)}))}
		}
	}
	placed := p.withCounts(counts)
	if !p.reserved && (dec != nil || choice != nil) {
		flavor, split := chosenFlavors(dec, choice)
		on := []string{flavor}
		for _, f := range split {
			on = append(on, f.Flavor)
		}
		if checks := view.checks.gating(ctx, cq, on); len(checks) > 0 {
			// Its queue's admission checks decide before a worker is
			// chosen: its quota is reserved, no capacity held.
			clear(view.quota)
			d.reserve(ctx, cq, placed, flavor, split, checks, now, books, writes)
			dispatched = true
			if view.onDispatch != nil {
				view.onDispatch(placed.wl)
			}
			return false, o.retry, nil
		}
	}
	if choice != nil {
		clear(view.quota)
		err := d.dispatchPreemption(ctx, targets, cq, placed, choice, now, books, writes)
		dispatched = err == nil
		if dispatched {
			d.chargeWorker(view, choice.Cluster, choice.Flavor, placed, choiceUsage(placed, choice))
			if view.onDispatch != nil {
				view.onDispatch(placed.wl)
			}
		}
		return false, o.retry, err
	}
	if dec == nil {
		o = withMeaning(o)
		if same != nil {
			view.waits[*same] = o
		}
		d.waitFor(ctx, p, o)
		return o.blocks, o.retry, nil
	}
	// The queue's usage changes: its quota is checked again; so does what
	// topology spreading counts in the namespace.
	clear(view.quota)
	delete(view.spread, wl.Namespace)
	err = d.dispatch(ctx, targets, cq, placed, dec, o.message, now, books, writes)
	dispatched = err == nil
	if dispatched {
		d.chargeWorker(view, dec.Cluster, dec.Flavor, placed, decisionUsage(placed, dec))
		if view.onDispatch != nil {
			view.onDispatch(placed.wl)
		}
	}
	return false, o.retry, err
}

// books returns the quota books of a pass: every hub ClusterQueue (a
// cohort's unused quota is lent by queues that may have no workload at
// all), charged with what the dispatched Workloads use.
func (d *Dispatcher) books(ctx context.Context, read map[string]*strata.ClusterQueue, usage map[string]map[string]corev1.ResourceList) (*queue.Books, error) {
	var list strata.ClusterQueueList
	if err := d.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	cqs := make([]*strata.ClusterQueue, 0, len(list.Items))
	for i := range list.Items {
		cq := &list.Items[i]
		if r, ok := read[cq.Name]; ok && r != nil {
			cq = r // the one the pass serves
		}
		cqs = append(cqs, cq)
	}
	var cohortList strata.CohortList
	if err := d.client.List(ctx, &cohortList, client.UnsafeDisableDeepCopy); err != nil && !meta.IsNoMatchError(err) {
		return nil, err // without the Cohort CRD, cohorts are flat
	}
	cohorts := make([]*strata.Cohort, len(cohortList.Items))
	for i := range cohortList.Items {
		cohorts[i] = &cohortList.Items[i]
	}
	books := queue.NewBooks(cqs, cohorts...)
	books.ChargeAll(usage)
	return books, nil
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

// decide places p on the best eligible target of flavors. flavors are
// the queue's within quota (notes say why others are not); dec is the
// decision when it goes somewhere; choice, when it fits nowhere, the one
// worker where preempting lets it in; both nil when it waits (o says
// why); o.message is the reason of any.
func (d *Dispatcher) decide(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, view *passView, p pending,
	shape string, flavors, partialFlavors, notes []string, backoffs map[string]time.Time, now time.Time,
	books *queue.Books) (waitOutcome, *placement.Decision, *placement.PreemptionChoice, []int32) {
	wl := p.wl
	start := time.Now()
	// Levels are checked against the hub's Topology of a flavor when it
	// has one; otherwise each worker's summary says which levels it has.
	levelsOf := map[string]error{}
	var mismatches []string
	withLevels := func(flavors []string) []string {
		out := flavors[:0:0]
		for _, f := range flavors {
			err, checked := levelsOf[f]
			if !checked {
				err = d.checkLevels(ctx, f, wl)
				levelsOf[f] = err
				if err != nil {
					mismatches = append(mismatches, fmt.Sprintf("flavor %s: %v", f, err))
				}
			}
			if err == nil {
				out = append(out, f)
			}
		}
		return out
	}
	flavors, partialFlavors = withLevels(flavors), withLevels(partialFlavors)
	if len(flavors) == 0 && len(partialFlavors) == 0 {
		if split := d.decideSplit(targets, cq, view, p, books, backoffs, now, nil); split != nil {
			return waitOutcome{message: placeReason(split.Reason, len(split.Candidates), nil, notes)}, split, nil, nil
		}
		if choice, _ := d.decideSplitPreemption(targets, cq, view, p, books, backoffs, now); choice != nil {
			return waitOutcome{message: choice.Reason}, nil, choice, nil
		}
		if len(mismatches) == 0 {
			return waitOutcome{reason: ReasonPending}, nil, nil, nil // no quota: placeOne says so
		}
		return waitOutcome{reason: ReasonNeverFits, message: "no flavor of ClusterQueue " + cq.Name + " has the topology levels the Job names: " + strings.Join(mismatches, "; ")}, nil, nil, nil
	}
	notes = append(notes, mismatches...)
	// partialOnly: all of its pods are within quota on no flavor; fewer
	// may be.
	partialOnly := len(flavors) == 0
	if partialOnly {
		flavors = partialFlavors
	}
	// Workers the queue may use, less those in backoff for this workload.
	selector := labels.Everything()
	if cq.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(cq.Spec.ClusterSelector)
		if err != nil {
			return waitOutcome{reason: ReasonPending, message: fmt.Sprintf("ClusterQueue %s has an invalid clusterSelector: %v", cq.Name, err)}, nil, nil, nil
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
	// Nor where its priority class does not exist (the summary lists the
	// worker's classes, and not its).
	eligible, _, excluded = placement.SplitTargets(eligible, excluded, flavors, func(t *placement.Target) string { return t.MissingClass(wl) })
	// Workers whose queue has no quota left for it now are not sent a
	// copy; preempting there may still let it in.
	var short []*placement.Target
	never := map[*placement.Target]bool{}
	eligible, short, excluded = placement.SplitTargets(eligible, excluded, flavors, func(t *placement.Target) string {
		why, nv := d.workerQuotaShort(view, t, p, nil, false)
		never[t] = nv
		return why
	})
	// A queue that could never hold it is no place to preempt either, but
	// may hold it with fewer pods.
	var neverWhole []*placement.Target
	short = slices.DeleteFunc(short, func(t *placement.Target) bool {
		if never[t] {
			neverWhole = append(neverWhole, t)
		}
		return never[t]
	})
	avoid, err := d.spreadAvoider(ctx, view, wl)
	if err != nil {
		return waitOutcome{reason: ReasonPending, message: fmt.Sprintf("counting the workloads topology spreading counts: %v", err), retry: retry}, nil, nil, nil
	}
	dec := &placement.Decision{Reason: "all of its pods are within quota on no flavor"}
	var oneFlavor *placement.Decision // the decision on one flavor, for SplitLater
	if !partialOnly {
		dec = d.policy.DecideAvoiding(wl, shape, flavors, eligible, avoid)
		oneFlavor = dec
	}
	if dec.Cluster == "" {
		// Its pod sets may fit, all of them, on different flavors of a
		// worker, as its agent admits them, before any preemption or
		// fewer pods (Kueue's flavor assigner: a fit beats a preemption).
		if split := d.decideSplit(targets, cq, view, p, books, backoffs, now, oneFlavor); split != nil {
			metrics.HubPlacementLatency.Observe(time.Since(start).Seconds())
			return waitOutcome{message: placeReason(split.Reason, len(split.Candidates), excluded, notes), retry: retry}, split, nil, nil
		}
	}
	if dec.Cluster == "" && !partialOnly {
		// Nowhere now: a worker whose queue provisions nodes for it
		// (KEP-2724's delayed topology assignment) takes it on quota
		// alone, before any preemption or fewer pods, as Kueue's flavor
		// assigner counts such a flavor as a fit.
		prov := d.policy.DecideProvisional(wl, flavors, eligible, func(t *placement.Target) bool {
			landing := d.landingOf(view, t.Cluster, wl)
			return landing != nil && t.Provisions(landing.Name)
		})
		if prov.Cluster != "" {
			metrics.HubPlacementLatency.Observe(time.Since(start).Seconds())
			return waitOutcome{message: placeReason(prov.Reason, len(prov.Candidates), excluded, notes), retry: retry}, prov, nil, nil
		}
		if prov.Reason != "" {
			notes = append(notes, prov.Reason)
		}
	}
	metrics.HubPlacementLatency.Observe(time.Since(start).Seconds())
	reason := placeReason(dec.Reason, len(dec.Candidates), excluded, notes)
	if dec.Cluster == "" {
		// preemptFor chooses the one worker that preempts for w (wl, or
		// wl with fewer pods, sized) on one of flavors: the workers where
		// it fits now have no room for it, and those whose queue is
		// short of quota may free some.
		preemptFor := func(w *strata.Workload, sized pending, flavors []string, targets []*placement.Target) (*placement.PreemptionChoice, string) {
			return d.policy.DecidePreemption(w, flavors, targets, func(t *placement.Target) (int32, bool) { return t.Priority(wl) }, func(t *placement.Target) []placement.PreemptionScope {
				return d.preemptionScopes(view, t, sized)
			}, func(t *placement.Target, freed map[string]corev1.ResourceList, nominal bool) string {
				why, _ := d.workerQuotaShort(view, t, sized, freed, nominal)
				return why
			})
		}
		// With fewer pods (minCount), after preemption for all of them:
		// they may fit, or a preemption may make room for them.
		partially := func() (waitOutcome, *placement.Decision, *placement.PreemptionChoice, []int32, bool) {
			candidates := append(append(slices.Clip(eligible), short...), neverWhole...)
			partial, choice, reclaim, counts := d.placePartially(view, p, partialFlavors, candidates, avoid, books, preemptFor, d.reclaimForFewer(cq, books, view, p))
			switch {
			case reclaim != nil:
				return waitOutcome{reclaim: reclaim, retry: retry}, nil, nil, counts, true
			case choice != nil:
				return waitOutcome{message: choice.Reason, retry: retry}, nil, choice, counts, true
			case partial != nil:
				return waitOutcome{message: placeReason(partial.Reason, len(partial.Candidates), excluded, notes), retry: retry}, partial, nil, counts, true
			}
			return waitOutcome{}, nil, nil, nil, false
		}
		// splitPreemption: its pod sets on different flavors of one
		// worker, where some fit now and the others once it preempts on
		// their flavor, as its agent preempts for such a workload.
		splitPreemption := func() (*placement.PreemptionChoice, string) {
			if partialOnly {
				return nil, ""
			}
			return d.decideSplitPreemption(targets, cq, view, p, books, backoffs, now)
		}
		if partialOnly || dec.NeverFits && len(excluded) == 0 {
			// (Never on one flavor: split, maybe.)
			if choice, _ := splitPreemption(); choice != nil {
				return waitOutcome{message: choice.Reason, retry: retry}, nil, choice, nil
			}
			if o, partial, choice, counts, ok := partially(); ok {
				return o, partial, choice, counts
			}
			if partialOnly {
				return waitOutcome{reason: ReasonPending, retry: retry}, nil, nil, nil // placeOne says why
			}
			return waitOutcome{reason: ReasonNeverFits, message: reason, retry: retry}, nil, nil, nil
		}
		if !dec.NeverFits || len(short) > 0 {
			choice, why := preemptFor(wl, p, flavors, append(slices.Clip(eligible), short...))
			if choice != nil {
				return waitOutcome{message: choice.Reason, retry: retry}, nil, choice, nil
			}
			if why != "" {
				reason += "; no preemption helps: " + why
			}
		}
		if choice, why := splitPreemption(); choice != nil {
			return waitOutcome{message: choice.Reason, retry: retry}, nil, choice, nil
		} else if why != "" {
			reason += "; no preemption on different flavors helps: " + why
		}
		if o, partial, choice, counts, ok := partially(); ok {
			return o, partial, choice, counts
		}
		return waitOutcome{reason: ReasonPending, message: reason, blocks: true, retry: retry}, nil, nil, nil
	}
	return waitOutcome{message: reason, retry: retry}, dec, nil, nil
}

// placePartially places a workload whose pod sets may run with fewer pods
// (minCount: a Job's job-min-parallelism) and that fits nowhere whole, nor
// by preemption, or whose queue's quota is short of all of its pods: with
// the most pods, at least minCount of each pod set, that are within its
// queue's quota on one of flavors and fit on one worker (whose queue has
// quota for them too), or for which preemptFor chooses a worker that
// preempts, as Kueue's partial admission (workload.ReducedCounts, a
// binary search over the pods taken away; the agent finds its count the
// same way). It returns the decision, or the preemption chosen (both nil
// when no count is admissible), and the counts: the queue is charged for
// those pods, and the copy is admitted with at most as many
// (status.placement.podSetCounts).
func (d *Dispatcher) placePartially(view *passView, p pending, flavors []string, candidates []*placement.Target, avoid placement.Avoider, books *queue.Books,
	preemptFor func(*strata.Workload, pending, []string, []*placement.Target) (*placement.PreemptionChoice, string),
	reclaimFor func(sized pending) *reclaimOption) (*placement.Decision, *placement.PreemptionChoice, *reclaimOption, []int32) {
	wl := p.wl
	partialSlices := d.policy.Options().PartialSlices
	total := workload.Reducible(wl.Spec.PodSets, partialSlices)
	if total == 0 || len(flavors) == 0 {
		return nil, nil, nil, nil
	}
	type outcome struct {
		dec     *placement.Decision
		choice  *placement.PreemptionChoice
		reclaim *reclaimOption
	}
	k, o, ok := workload.FewestTakenAway(total, func(k int32) (outcome, bool) {
		counts := workload.ReducedCounts(wl.Spec.PodSets, k, partialSlices)
		sized := p.withCounts(counts)
		// The flavors whose quota holds that many, and the workers there
		// whose queue does.
		within := slices.DeleteFunc(slices.Clone(flavors), func(f string) bool {
			return books.Check(p.queue, f, sized.need, false).Err != nil
		})
		var o outcome
		if len(within) == 0 && reclaimFor != nil {
			// Its queue's quota holds that many once preempting at the
			// hub frees some, as Kueue's partial admission counts a
			// preemption.
			o.reclaim = reclaimFor(sized)
		}
		if len(within) > 0 {
			var fitting, short []*placement.Target
			for _, t := range candidates {
				if !slices.Contains(within, t.Flavor) {
					continue
				}
				if why, _ := d.workerQuotaShort(view, t, sized, nil, false); why != "" {
					short = append(short, t)
					continue
				}
				fitting = append(fitting, t)
			}
			if len(fitting) > 0 {
				if dec := d.policy.DecideAvoiding(workload.WithCounts(wl, counts), sized.shape, within, fitting, avoid); dec.Cluster != "" {
					o.dec = dec
				}
			}
			if o.dec == nil {
				o.choice, _ = preemptFor(workload.WithCounts(wl, counts), sized, within, append(fitting, short...))
			}
		}
		return o, o.dec != nil || o.choice != nil || o.reclaim != nil
	})
	if !ok {
		return nil, nil, nil, nil // not even its fewest pods
	}
	counts := workload.ReducedCounts(wl.Spec.PodSets, k, partialSlices)
	note := "; with " + workload.FewerPods(wl.Spec.PodSets, counts) + " (partial admission: all fit on no worker or within quota)"
	switch {
	case o.reclaim != nil:
		return nil, nil, o.reclaim, counts
	case o.choice != nil:
		o.choice.Reason += note
		return nil, o.choice, nil, counts
	}
	o.dec.Reason += note
	return o.dec, nil, nil, counts
}

// podSetCounts are the counts of wl's pod sets a placement records, those
// with fewer pods than they ask for (nil when counts is).
func podSetCounts(wl *strata.Workload, counts []int32) []strata.PodSetCount {
	var out []strata.PodSetCount
	for i, c := range counts {
		if ps := &wl.Spec.PodSets[i]; c < ps.Count {
			out = append(out, strata.PodSetCount{Name: ps.Name, Count: c})
		}
	}
	return out
}

// withCounts is p placed with counts of its pods (nil: p itself): its
// need, shape and counts are those, for a partial admission's quota
// checks, charges and record; its Workload is the same.
func (p pending) withCounts(counts []int32) pending {
	if counts == nil {
		return p
	}
	e := *p.entry
	sized := workload.WithCounts(p.wl, counts)
	e.shape, e.need = placement.Shape(sized), queue.WorkloadRequests(sized)
	e.needKey = resourcesKey(e.need)
	p.entry, p.counts = &e, counts
	return p
}

// withCheckUpdates is p placed with what the Ready admission checks of
// its hub queue ask for its pod sets' node selectors and tolerations
// (workload.WithCheckUpdates): the copy carries them (NewCopy), so the
// worker and flavor chosen must suit them. Its shape and requests follow.
func (p pending) withCheckUpdates() pending {
	placed := workload.WithCheckUpdates(p.wl)
	if placed == p.wl {
		return p
	}
	e := *p.entry
	e.wl = placed
	e.shape, e.need = placement.Shape(placed), queue.WorkloadRequests(placed)
	e.needKey = resourcesKey(e.need)
	p.entry = &e
	return p
}

// placeReason is what a placement says: the policy's reason, why workers
// were left out, and notes. When no worker is a candidate and some were
// left out, it says why they were, not that none offers the flavors.
// The workers' reasons come in name order, whatever the targets' order
// from one pass to the next: a reason that changed only in its order was
// written again on every pass, and each write woke the next pass.
func placeReason(policyReason string, candidates int, excluded, notes []string) string {
	excluded = slices.Sorted(slices.Values(excluded))
	reason := policyReason
	switch {
	case candidates == 0 && len(excluded) > 0:
		reason = "no worker may take it now: " + strings.Join(excluded, "; ")
	case len(excluded) > 0:
		reason += "; " + strings.Join(excluded, "; ")
	}
	if len(notes) > 0 {
		reason += "; " + strings.Join(notes, "; ")
	}
	return reason
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

// pastBurned moves the dispatch just recorded on wl (generation gen) past
// any generation of wl whose journal write failed (burned), and returns
// its generation.
func (d *Dispatcher) pastBurned(wl *strata.Workload, gen int64) int64 {
	d.mu.Lock()
	b := d.burned[wl.UID]
	d.mu.Unlock()
	if gen > b {
		return gen
	}
	p := wl.Status.Placement
	if n := len(p.Attempts); n > 0 && p.Attempts[n-1].DispatchGeneration == gen {
		p.Attempts[n-1].DispatchGeneration = b + 1
	}
	p.DispatchGeneration = b + 1
	return b + 1
}

// dispatchTime returns the time a dispatch decided at now carries. It is
// later than every earlier one of this process, in the microseconds the
// API keeps, so that the copies of one pass are ordered as the pass
// placed them.
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

// dispatch reserves a decision and queues its record on the Workload in
// writes. The copies controller creates the copy. The decision counts
// against the queue's quota for the rest of the pass at once.
func (d *Dispatcher) dispatch(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, p pending, dec *placement.Decision, reason string, now time.Time,
	books *queue.Books, writes *passWrites) error {
	wl := p.wl.DeepCopy()
	gen := d.pastBurned(wl, RecordDispatch(&wl.Status, dec.Cluster, dec.Flavor, reason, d.dispatchTime(now)))
	RecordSplit(&wl.Status, dec.PodSetFlavors())
	workload.Requeue(wl, true, now) // Kueue's Requeued=True, in the record's write
	wl.Status.Placement.PodSetCounts = podSetCounts(wl, p.counts)
	key := Key(wl.UID, gen)
	if err := dec.Reserve(targets, key); err != nil {
		return err
	}
	// The plan, for topology spreading across the fleet: kept on the
	// record (when not too long), and by this process until the informer
	// shows the record.
	podSets := wl.Spec.PodSets
	if p.counts != nil {
		podSets = workload.WithCounts(wl, p.counts).Spec.PodSets
	}
	// A provisional dispatch has none: its worker places it on the nodes
	// it provisions.
	if !dec.Provisional {
		if hint, err := workload.EncodeTopologyHints(podSets, dec.Assignments()); err == nil && len(hint) <= maxPlacementHint {
			wl.Status.Placement.TopologyHint = hint
		}
		d.fleet.SetHint(key, dec.Assignments())
	}
	d.mu.Lock()
	d.noteSpread(wl, gen, dec.Cluster, dec.Assignments())
	d.mu.Unlock()
	d.fleet.NoteDispatched(key)
	for f, need := range decisionUsage(p, dec) {
		books.Charge(cq.Name, f, need, 1)
	}
	recordedFn := func() {
		d.mu.Lock()
		d.recorded[wl.UID] = recorded{generation: gen, cluster: dec.Cluster, flavor: dec.Flavor, podSetFlavors: dec.PodSetFlavors()}
		delete(d.waiting, wl.UID)
		d.mu.Unlock()
		metrics.HubDecisions.WithLabelValues(dec.Cluster, dec.Flavor).Inc()
		// No event here: the admission's event says where and why, as
		// Kueue has one event per admission (the dispatch is in the
		// Workload's status.placement and Admitted condition meanwhile).
	}
	if d.journal != nil {
		writes.journal(dec.Cluster, dec.Flavor, key, entryOf(wl), recordedFn, func() { d.forgetSpread(wl.UID, gen) })
		return nil
	}
	writes.record(dec.Cluster, dec.Flavor, key, func() error {
		if err := d.client.Status().Update(ctx, wl); err != nil {
			d.forgetSpread(wl.UID, gen)
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
		recordedFn()
		return nil
	})
	return nil
}

// decisionUsage is what a decision charges p's queue, by flavor: p's need
// on the decision's flavor, or, with its pod sets placed on different
// flavors, each pod set's requests on its own.
func decisionUsage(p pending, dec *placement.Decision) map[string]corev1.ResourceList {
	if !dec.Split() {
		return map[string]corev1.ResourceList{dec.Flavor: p.need}
	}
	return queue.SplitUsage(p.wl, dec.Flavor, dec.PodSetFlavors())
}

// choiceUsage is what a preemption choice charges p's queue, by flavor
// (decisionUsage's).
func choiceUsage(p pending, choice *placement.PreemptionChoice) map[string]corev1.ResourceList {
	if !choice.Split() {
		return map[string]corev1.ResourceList{choice.Flavor: p.need}
	}
	return queue.SplitUsage(p.wl, choice.Flavor, choice.PodSetFlavors())
}

// dispatchPreemption dispatches p to the one worker where preempting lets
// it in: its copy is marked to preempt up to the chosen priority there
// (status.placement.preemptUpTo), and the target holds a preemption in
// flight, so that no other preemptor counts on the same victims until the
// worker's summary shows the outcome. The copy carries no topology hint
// (the worker places it once its victims are gone), but for the pod sets
// of a split that fit now.
func (d *Dispatcher) dispatchPreemption(ctx context.Context, targets []*placement.Target, cq *strata.ClusterQueue, p pending, choice *placement.PreemptionChoice,
	now time.Time, books *queue.Books, writes *passWrites) error {
	wl := p.wl.DeepCopy()
	gen := d.pastBurned(wl, RecordDispatch(&wl.Status, choice.Cluster, choice.Flavor, choice.Reason, d.dispatchTime(now)))
	workload.Requeue(wl, true, now)
	RecordSplit(&wl.Status, choice.PodSetFlavors())
	wl.Status.Placement.PreemptUpTo = ptr.To(choice.UpTo)
	wl.Status.Placement.PodSetCounts = podSetCounts(wl, p.counts)
	key := Key(wl.UID, gen)
	if err := choice.Reserve(targets, key); err != nil {
		return err
	}
	if choice.Split() {
		// The pod sets that fit now go where the hub reserved them (the
		// others where the worker's preemption makes room).
		hints := make([]*tas.Assignment, len(choice.PodSets))
		for i, ps := range choice.PodSets {
			if ps.Flavor != choice.Flavor {
				hints[i] = ps.Assignment
			}
		}
		if hint, err := workload.EncodeTopologyHints(wl.Spec.PodSets, hints); err == nil && len(hint) <= maxPlacementHint {
			wl.Status.Placement.TopologyHint = hint
		}
		d.fleet.SetHint(key, hints)
	}
	d.fleet.NoteDispatched(key)
	for f, need := range choiceUsage(p, choice) {
		books.Charge(cq.Name, f, need, 1)
	}
	recordedFn := func() {
		d.mu.Lock()
		d.recorded[wl.UID] = recorded{generation: gen, cluster: choice.Cluster, flavor: choice.Flavor, podSetFlavors: choice.PodSetFlavors()}
		delete(d.waiting, wl.UID)
		d.mu.Unlock()
		metrics.HubDecisions.WithLabelValues(choice.Cluster, choice.Flavor).Inc()
		metrics.HubPreemptionDispatches.WithLabelValues(choice.Cluster, choice.Flavor).Inc()
		d.recorder.Eventf(p.job, wl, corev1.EventTypeNormal, "Dispatched", "Preempt", "%s",
			truncateNote(fmt.Sprintf("Dispatched to %s (%s) to preempt workloads of priority ≤ %d there: %s", choice.Cluster, FlavorWords(wl.Status.Placement), choice.UpTo, choice.Reason)))
	}
	if d.journal != nil {
		writes.journal(choice.Cluster, choice.Flavor, key, entryOf(wl), recordedFn, func() {})
		return nil
	}
	writes.record(choice.Cluster, choice.Flavor, key, func() error {
		if err := d.client.Status().Update(ctx, wl); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return errReleaseOnly
			}
			return err
		}
		recordedFn()
		return nil
	})
	return nil
}

// fairPick is queue.Serve's pick under the hub's fair sharing (nil when it
// is off): the tournament of the hub queues' shares of fleet quota.
func (d *Dispatcher) fairPick(books *queue.Books) func([]*strata.ClusterQueue, []pending) int {
	if d.fair == nil {
		return nil
	}
	return queue.FairPick(books, func(p pending) any { return p.uid }, func(p pending) *strata.Workload { return p.wl }, nil)
}

// chosenFlavors are the flavor of a decision or preemption choice and
// its pod sets' (none: all on it).
func chosenFlavors(dec *placement.Decision, choice *placement.PreemptionChoice) (string, []strata.PodSetFlavor) {
	if choice != nil {
		return choice.Flavor, choice.PodSetFlavors()
	}
	return dec.Flavor, dec.PodSetFlavors()
}
