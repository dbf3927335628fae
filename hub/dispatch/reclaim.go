package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// A hub ClusterQueue's quota is the fleet's: when a waiting Workload does
// not fit its queue's quota, and the queue's preemption policy lets it,
// the hub evicts dispatched Workloads of the queue (lower priority) or of
// its cohort (which borrow: reclaimWithinCohort), as Kueue's manager
// does on its quota. The victims are chosen by quota alone, with the
// agent's search (preemption.Find) and Kueue's order; where the preemptor
// then runs is decided on capacity, as for any Workload. An evicted
// Workload's copy is taken back by the copies controller, fencing-safe,
// and it waits again; the quota it held stays charged until then.

// reclaim is a quota preemption under way at the hub: its victims are
// being evicted, and the quota they free is held for the preemptor.
type reclaim struct {
	queue, flavor string
	need          corev1.ResourceList
	victims       []types.UID
	// why is the policy each victim was evicted under, by UID.
	why map[types.UID]string
	// fewer: it frees quota for fewer pods than the workload asks for
	// (partial admission); the workload waits for its victims rather
	// than take what fits meanwhile.
	fewer bool
	// generation is each victim's dispatch generation when it was
	// chosen: one dispatched again since (its copy gone, placed anew)
	// is no longer a victim of this reclaim.
	generation map[types.UID]int64
}

// stillVictim returns a reclaim's victim as the pass shows it, nil when
// it is gone or was dispatched again since it was chosen.
func (r *reclaim) stillVictim(byUID map[types.UID]*dispatched, uid types.UID) *dispatched {
	v := byUID[uid]
	if v == nil {
		return nil
	}
	if g, ok := r.generation[uid]; ok && g != v.e.generation {
		return nil
	}
	return v
}

// dispatched is a dispatched Workload of a pass, with its hub
// ClusterQueue.
type dispatched struct {
	e     *entry
	queue string
}

// usageOn is what a dispatched Workload holds of its queue's quota on
// flavor: all it is charged on the flavor it is dispatched on, or, with
// its pod sets placed on different flavors, their share on flavor; false
// when it holds nothing there.
func (v *dispatched) usageOn(flavor string) (corev1.ResourceList, bool) {
	if ReservedAtHub(v.e.wl) {
		u, ok := reservedUsage(v.e)[flavor]
		return u, ok
	}
	if p := v.e.wl.Status.Placement; p != nil && len(p.PodSetFlavors) > 0 {
		u, ok := queue.PlacedUsage(v.e.wl, v.e.flavor)[flavor]
		return u, ok
	}
	if v.e.flavor != flavor {
		return nil, false
	}
	return v.e.charged(), true
}

// Evicting says whether a dispatched hub Workload is being evicted by the
// hub (Evicted=True while it is placed): the copies controller takes its
// copy back. A new dispatch sets Evicted to False (RecordDispatch).
func Evicting(wl *strata.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadEvicted)
}

// holdReclaims charges the books with the quota of every reclaim under
// way whose preemptor still waits: what the victims free is their
// preemptor's. A preemptor dispatched but not admitted yet (dispatched,
// as the informer shows them, or this process's record) keeps its reclaim
// uncharged (its dispatch
// charges its quota), so that should its worker refuse it, the quota is
// held again while it waits, and the victims do not take it back first.
// The others are forgotten: admitted, or gone.
//
// An elastic Workload whose scale-up waits (resizes) keeps its reclaim,
// held, as a waiting one does: resize takes its own hold off before it
// checks the pods added.
func (d *Dispatcher) holdReclaims(waiting []pending, dispatched []dispatched, resizes []resizing, books *queue.Books) {
	if len(d.reclaims) == 0 {
		return
	}
	live := make(map[types.UID]bool, len(waiting))
	for _, p := range waiting {
		live[p.uid] = true
	}
	for _, r := range resizes {
		if r.resize.To > r.resize.From {
			live[r.e.uid] = true
		}
	}
	inFlight := map[types.UID]bool{}
	for _, x := range dispatched {
		if x.e.wl.Status.Admission == nil {
			inFlight[x.e.uid] = true
		}
	}
	// Dispatches this process recorded that the informer does not show
	// yet are in flight too.
	d.mu.Lock()
	for uid := range d.reclaims {
		if _, ok := d.recorded[uid]; ok {
			inFlight[uid] = true
		}
	}
	d.mu.Unlock()
	for uid, r := range d.reclaims {
		switch {
		case live[uid]:
			books.Charge(r.queue, r.flavor, r.need, 1)
		case !inFlight[uid]:
			delete(d.reclaims, uid)
		}
	}
}

// heightAfterReclaiming is Kueue's preemption oracle for the order of a
// pass's heads (queue.Books.WouldBorrowAfter): how high in its cohort
// tree p borrows on flavor once the victims a search on quota alone finds
// among the dispatched Workloads are gone; false when it finds none, or
// its queue preempts nothing. Workloads being evicted already are not
// candidates (they count until their copies are gone).
func heightAfterReclaiming(cq *strata.ClusterQueue, flavor string, books *queue.Books, dispatched []dispatched, p pending) (int, bool) {
	policy := preemption.PolicyOf(cq)
	if !policy.Any() {
		return 0, false
	}
	var cands []preemption.Workload
	for i := range dispatched {
		v := &dispatched[i]
		usage, on := v.usageOn(flavor)
		if !on || v.e.uid == p.uid || (v.queue != cq.Name && !books.Peer(cq.Name, v.queue)) || Evicting(v.e.wl) {
			continue
		}
		cands = append(cands, preemption.Workload{Key: types.NamespacedName{Namespace: v.e.namespace, Name: v.e.name}, Queue: v.queue,
			Priority: v.e.priority, QueuedAt: v.e.queuedAt, AdmittedAt: admittedAt(v.e.wl), Requests: usage})
	}
	pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: p.namespace, Name: p.name}, Queue: cq.Name, Priority: p.priority, QueuedAt: p.queuedAt, Requests: p.need}
	result := preemption.Find(pre, policy, books, flavor, cands, preemption.QuotaOnly{})
	if len(result.Victims) == 0 {
		return 0, false
	}
	return result.BorrowHeight, true
}

// reclaimQuota is called for p when no flavor of its queue has quota left
// for it. It returns the waiting reason to show: a reclaim under way (its
// victims named), or why none helps; "" when the queue's policy preempts
// nothing.
func (d *Dispatcher) reclaimQuota(ctx context.Context, cq *strata.ClusterQueue, books *queue.Books, view *passView, p pending, writes *passWrites) string {
	policy := preemption.PolicyOf(cq)
	policy.Fair = d.fair
	if !policy.Any() {
		return ""
	}
	byUID := make(map[types.UID]*dispatched, len(view.dispatched))
	for i := range view.dispatched {
		byUID[view.dispatched[i].e.uid] = &view.dispatched[i]
	}
	if r := d.reclaims[p.uid]; r != nil {
		var left []string
		for _, uid := range r.victims {
			if v := r.stillVictim(byUID, uid); v != nil {
				left = append(left, v.e.namespace+"/"+v.e.name)
				d.markEvicted(ctx, v, p, cq, r.why[uid], writes)
			}
		}
		if len(left) > 0 {
			return reclaimingMessage(r.flavor, left)
		}
		// Its victims are gone and it still does not fit: what they freed
		// was taken. A new search may start.
		delete(d.reclaims, p.uid)
	}
	// A backlog in a queue out of quota would otherwise search once per
	// waiting Workload: identical searches are made once per pass, and
	// at most reclaimSearchesPerPass are made (the others keep their
	// quota reason until a later pass).
	key := reclaimKeyOf(cq, p, d.policy.Options().PartialSlices)
	if why, ok := view.noReclaim[key]; ok {
		return why
	}
	if view.reclaimSearches <= 0 {
		return ""
	}
	view.reclaimSearches--
	best, whys := reclaimSearch(cq, books, view, p, policy, "")
	if best == nil && splittable(p) {
		// Its pod sets may each be within quota on a flavor of their own
		// once the first that is on none gets some back.
		if sized, o := d.splitReclaim(cq, books, view, p, policy); o != nil {
			p, best = sized, o
		}
	}
	if best == nil && workload.Reducible(p.wl.Spec.PodSets, d.policy.Options().PartialSlices) > 0 {
		// As Kueue's partial admission: the most pods (at least minCount)
		// for which a preemption frees quota. Each search counts against
		// the pass's budget; the choice is not cut short by it.
		partialSlices := d.policy.Options().PartialSlices
		total := workload.Reducible(p.wl.Spec.PodSets, partialSlices)
		k, o, ok := workload.FewestTakenAway(total, func(k int32) (*reclaimOption, bool) {
			view.reclaimSearches--
			o, _ := reclaimSearch(cq, books, view, p.withCounts(workload.ReducedCounts(p.wl.Spec.PodSets, k, partialSlices)), policy, "")
			return o, o != nil
		})
		// The most pods its quota can be made to hold may hold already
		// (workers have no room for them): no preemption at the hub helps.
		if ok && (len(o.going) > 0 || len(o.result.Victims) > 0) {
			p, best = p.withCounts(workload.ReducedCounts(p.wl.Spec.PodSets, k, partialSlices)), o
		}
	}
	if best != nil {
		return d.startReclaim(ctx, cq, books, view, p, best, writes)
	}
	why := "no preemption at the hub frees quota: " + strings.Join(whys, "; ")
	if view.noReclaim != nil {
		view.noReclaim[key] = why
	}
	return why
}

// reclaimKeyOf is the reclaimKey of p's search in its queue cq.
func reclaimKeyOf(cq *strata.ClusterQueue, p pending, partialSlices bool) reclaimKey {
	key := reclaimKey{queue: cq.Name, priority: p.priority, need: p.needKey, split: splittable(p),
		fewer: workload.Reducible(p.wl.Spec.PodSets, partialSlices) > 0}
	if pr := cq.Spec.Preemption; pr != nil && pr.WithinClusterQueue == strata.PreemptionLowerOrNewerEqualPriority {
		key.queuedAt = p.queuedAt.UnixNano()
	}
	return key
}

// startReclaim evicts the victims of best for p (p.counts: for fewer
// pods), holds the quota freed for it, and returns its waiting reason.
func (d *Dispatcher) startReclaim(ctx context.Context, cq *strata.ClusterQueue, books *queue.Books, view *passView, p pending, best *reclaimOption, writes *passWrites) string {
	r := &reclaim{queue: cq.Name, flavor: best.fq.Name, need: p.need, why: map[types.UID]string{}, fewer: p.counts != nil, generation: map[types.UID]int64{}}
	var names []string
	for _, v := range best.going {
		r.victims = append(r.victims, v.e.uid)
		r.generation[v.e.uid] = v.e.generation
		names = append(names, v.e.namespace+"/"+v.e.name)
	}
	for _, victim := range best.result.Victims {
		v := best.candOf[victim.Key]
		r.victims = append(r.victims, v.e.uid)
		r.generation[v.e.uid] = v.e.generation
		r.why[v.e.uid] = victim.Reason
		names = append(names, v.e.namespace+"/"+v.e.name)
		d.markEvicted(ctx, v, p, cq, victim.Reason, writes)
	}
	if d.reclaims == nil {
		d.reclaims = map[types.UID]*reclaim{}
	}
	d.reclaims[p.uid] = r
	books.Charge(cq.Name, best.fq.Name, p.need, 1)
	clear(view.quota)
	clear(view.noReclaim)
	message := reclaimingMessage(best.fq.Name, names)
	if p.counts != nil {
		message += "; for " + workload.FewerPods(p.wl.Spec.PodSets, p.counts) + " (partial admission: its queue's quota holds no more)"
	}
	return message
}

// splitReclaim is the hub preemption that frees p's queue's quota for
// its pod sets on different flavors (p of several flavor assignment units,
// whose quota holds all of it on no one flavor), as Kueue's flavor
// assigner and the agent's preemptByUnit decide it: its units walked over
// the queue's flavors by quota alone (workload.QuotaPlan), the first that
// is within quota on none reclaims, with the pod sets put there before
// it, on the first flavor where a search finds victims, and every later
// unit within quota on none goes there too, one search for them all. It
// returns p sized to the pod sets on that flavor (the hold's need) and the
// search's option; nil when none helps. Each search counts against the
// pass's budget.
func (d *Dispatcher) splitReclaim(cq *strata.ClusterQueue, books *queue.Books, view *passView, p pending, policy preemption.Policy) (pending, *reclaimOption) {
	fqs := queue.Flavors(cq)
	search := func(f int, podSets []int) (pending, *reclaimOption) {
		view.reclaimSearches--
		sized := p.withPodSets(workload.WithPodSets(p.wl, podSets))
		if o, _ := reclaimSearch(cq, books, view, sized, policy, fqs[f].Name); o != nil && len(o.going)+len(o.result.Victims) > 0 {
			return sized, o
		}
		return sized, nil
	}
	var first *reclaimOption
	var firstSized pending
	var firstCount int
	f, on := workload.QuotaPlan(p.wl, len(fqs), func(f int, placed *strata.Workload) bool {
		return books.Check(cq.Name, fqs[f].Name, queue.WorkloadRequests(placed), false).Err == nil
	}, func(unit []int, onFlavor map[int][]int) (int, bool) {
		for f := range fqs {
			if view.reclaimSearches <= 0 {
				break
			}
			set := slices.Concat(onFlavor[f], unit)
			if sized, o := search(f, set); o != nil {
				first, firstSized, firstCount = o, sized, len(set)
				return f, true
			}
		}
		return 0, false
	})
	if f < 0 || first == nil {
		return p, nil // within quota split (the capacity keeps it out), or no search helps
	}
	if len(on) > firstCount && view.reclaimSearches > 0 {
		// Later units on no flavor went there too: what frees quota for
		// all of them.
		if sized, o := search(f, on); o != nil {
			return sized, o
		}
	}
	return firstSized, first
}

// reclaimForFewer is, for placePartially, the search for the hub
// preemption that frees p's queue's quota for p with fewer pods (sized);
// nil when p's queue preempts nothing, a reclaim of p's is under way, or
// the pass's searches are spent. Each search counts against them.
func (d *Dispatcher) reclaimForFewer(cq *strata.ClusterQueue, books *queue.Books, view *passView, p pending) func(sized pending) *reclaimOption {
	policy := preemption.PolicyOf(cq)
	policy.Fair = d.fair
	if !policy.Any() || d.reclaims[p.uid] != nil || view.reclaimSearches <= 0 {
		return nil
	}
	return func(sized pending) *reclaimOption {
		view.reclaimSearches--
		o, _ := reclaimSearch(cq, books, view, sized, policy, "")
		if o == nil || len(o.going)+len(o.result.Victims) == 0 {
			return nil
		}
		return o
	}
}

// reclaimingFewer says whether a reclaim of p's for fewer pods is under
// way with some of its victims still there: p waits for them rather than
// take what fits meanwhile.
func (d *Dispatcher) reclaimingFewer(view *passView, p pending) bool {
	r := d.reclaims[p.uid]
	if r == nil || !r.fewer {
		return false
	}
	return slices.ContainsFunc(view.dispatched, func(v dispatched) bool { return slices.Contains(r.victims, v.e.uid) })
}

// reclaimSearchesPerPass bounds the quota preemption searches of a pass,
// as the agent bounds its preemption searches.
const reclaimSearchesPerPass = 16

// oracleSearchesPerPass bounds the quota-only searches that order a
// pass's heads (heightAfterReclaiming).
const oracleSearchesPerPass = 64

// reclaimingMessage is the waiting reason of a preemptor whose victims
// are being evicted at the hub.
func reclaimingMessage(flavor string, victims []string) string {
	slices.Sort(victims)
	return fmt.Sprintf("preempting %d workload(s) at the hub to free quota of flavor %s; dispatched once their copies are taken back: %s",
		len(victims), flavor, strings.Join(victims, ", "))
}

// markEvicted queues the write that evicts a victim at the hub: Evicted
// and Preempted become True, naming its preemptor; the copies controller
// then takes its copy back. A victim already marked is left alone.
func (d *Dispatcher) markEvicted(ctx context.Context, v *dispatched, by pending, cq *strata.ClusterQueue, reason string, writes *passWrites) {
	if Evicting(v.e.wl) {
		return
	}
	// A victim that was itself reclaiming quota (dispatched, not admitted
	// yet) gives its hold up: back in its queue, it would otherwise take
	// back the quota it is evicted for.
	delete(d.reclaims, v.e.uid)
	if reason == "" {
		reason = strata.PreemptedInCohortReclamation
	}
	wl := v.e.wl.DeepCopy()
	message := fmt.Sprintf("preempted at the hub to free quota for %s/%s (priority %d) of ClusterQueue %s: %s", by.namespace, by.name, by.priority, cq.Name, preemption.PolicyNote(reason, cq))
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: truncate(message)})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: reason, Message: truncate(message)})
	workload.SetRequeued(wl, metav1.ConditionTrue, strata.EvictedByPreemption, truncate(message), d.clock.Now())
	writes.do(func() error {
		if err := d.client.Status().Update(ctx, wl); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil // the newer Workload's event brings a pass, which marks it again
			}
			return fmt.Errorf("evicting %s/%s at the hub: %w", wl.Namespace, wl.Name, err)
		}
		d.recorder.Eventf(wl, nil, corev1.EventTypeWarning, strata.EvictedByPreemption, "Preempt", "%s", truncateNote(message))
		return nil
	})
}

// admittedAt is when a hub Workload took its queue's quota: its
// dispatch (microseconds, and distinct per dispatch), as Kueue's "most
// recently admitted" reads its quota reservation.
func admittedAt(wl *strata.Workload) time.Time {
	if ReservedAtHub(wl) {
		// Its quota reserved while its queue's checks decide.
		if at := workload.ReservedAt(wl); !at.IsZero() {
			return at
		}
	}
	if p := wl.Status.Placement; p != nil && p.DispatchTime != nil {
		return p.DispatchTime.Time
	}
	return wl.CreationTimestamp.Time
}

// reclaimOption is a flavor of a hub queue on which preempting frees
// quota for a workload: the victims being evicted already (going), and
// those a search chose (result, among candOf).
type reclaimOption struct {
	fq     strata.FlavorQuotas
	going  []*dispatched
	candOf map[types.NamespacedName]*dispatched
	result preemption.Result
}

// reclaimSearch searches every flavor of cq for the dispatched Workloads
// whose preemption at the hub frees quota for p, and chooses one
// (preemption.Reclaim); nil and why on each flavor when none helps.
func reclaimSearch(cq *strata.ClusterQueue, books *queue.Books, view *passView, p pending, policy preemption.Policy, only string) (*reclaimOption, []string) {
	pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: p.namespace, Name: p.name}, Queue: cq.Name, Priority: p.priority, QueuedAt: p.queuedAt, Requests: p.need}
	fqs := queue.Flavors(cq)
	if only != "" {
		fqs = slices.DeleteFunc(slices.Clone(fqs), func(fq strata.FlavorQuotas) bool { return fq.Name != only })
	}
	flavors := make([]preemption.ReclaimFlavor, len(fqs))
	going := make([][]*dispatched, len(fqs))
	candOf := map[types.NamespacedName]*dispatched{}
	for i, fq := range fqs {
		flavors[i].Name = fq.Name
		for j := range view.dispatched {
			v := &view.dispatched[j]
			usage, on := v.usageOn(fq.Name)
			if !on || v.e.uid == p.uid || (v.queue != cq.Name && !books.Peer(cq.Name, v.queue)) {
				continue
			}
			w := preemption.Workload{Key: types.NamespacedName{Namespace: v.e.namespace, Name: v.e.name}, Queue: v.queue,
				Priority: v.e.priority, QueuedAt: v.e.queuedAt, AdmittedAt: admittedAt(v.e.wl), Requests: usage}
			if view.afsScoped[v.queue] && view.lqUsage != nil {
				// Admission fair sharing: the LocalQueue that consumed
				// more gives first.
				w.LocalQueueUsage = ptr.To(view.lqUsage.Usage(v.e.wl))
			}
			// Victims being evicted already (by an earlier pass, or an
			// earlier hub process) count as gone.
			if Evicting(v.e.wl) {
				flavors[i].Going = append(flavors[i].Going, w)
				going[i] = append(going[i], v)
				continue
			}
			flavors[i].Cands = append(flavors[i].Cands, w)
			candOf[w.Key] = v
		}
	}
	i, _, result, whys := preemption.Reclaim(pre, policy, queue.Fungibility(cq), books, flavors)
	if i < 0 {
		return nil, whys
	}
	return &reclaimOption{fq: fqs[i], going: going[i], candOf: candOf, result: result}, whys
}
