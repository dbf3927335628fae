package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Fleet preemption: when a workload fits on no worker as the fleet stands,
// the hub looks, on every eligible (cluster, flavor), for the lowest
// priority band of the worker ClusterQueue its copy would land in whose
// preemption lets it in (the summary's preemptible capacity, see
// tas.CapturePreemptible), and chooses the one worker where preempting
// costs least. Only that worker's copy is marked to preempt, up to the
// band's priority.

// PreemptionChoice is where a workload fits once workloads are preempted.
type PreemptionChoice struct {
	Cluster, Flavor string
	// Queue is the worker's ClusterQueue whose workloads it preempts.
	Queue string
	// UpTo is the priority up to which it may preempt there.
	UpTo int32
	// Workloads is how many workloads of the queue with priority ≤ UpTo
	// the worker holds on the flavor: the most it preempts.
	Workloads int32
	// PodSets are the placement once they are gone.
	PodSets []PodSetPlacement
	Reason  string
}

// PreemptionScope is whose workloads a copy landing in a worker
// ClusterQueue may preempt there, as bands of the summary's preemptible
// capacity (each band is one queue's workloads up to a priority).
type PreemptionScope struct {
	// Queue is the worker ClusterQueue the copy lands in; "" when the hub
	// does not know it or the copy may preempt nothing there.
	Queue string
	// Within: Queue's own workloads of a lower priority may go
	// (withinClusterQueue).
	Within bool
	// Reclaim names the other queues of Queue's cohort whose workloads may
	// go (reclaimWithinCohort: they borrow), each with the highest priority
	// that may.
	Reclaim map[string]int32
}

// ScopeFor is whose workloads a workload of priority asking need on
// flavor may preempt when it lands in worker ClusterQueue cq, given the
// books of the worker's queues: cq's own of a lower priority when it
// preempts within itself, and, when it reclaims within its cohort, those
// of the cohort's other queues that borrow on the flavor what it needs
// (of a lower priority, or any with reclaimWithinCohort: Any). Nothing
// when it may not preempt for it at all (preemption.MayPreemptFor).
func ScopeFor(cq *strata.ClusterQueue, flavor string, need corev1.ResourceList, priority int32, books *queue.Books) PreemptionScope {
	if cq == nil || !preemption.MayPreemptFor(cq, flavor, need) {
		return PreemptionScope{}
	}
	policy := preemption.PolicyOf(cq)
	sc := PreemptionScope{Queue: cq.Name, Within: policy.WithinClusterQueue != strata.PreemptionNever}
	if policy.ReclaimWithinCohort != strata.PreemptionNever && books != nil && books.Cohort(cq.Name) != "" {
		limit, reclaims := reclaimLimit(policy, priority, books.WithinNominal(cq.Name, flavor, need))
		// The peers' workloads are candidates while their queue borrows
		// what the workload is short of (preemption.Find).
		short := books.Short(cq.Name, flavor, need)
		if len(short) == 0 {
			short = need
		}
		for _, peer := range books.Peers(cq.Name) {
			if reclaims && books.Borrowing(peer, flavor, short) {
				if sc.Reclaim == nil {
					sc.Reclaim = map[string]int32{}
				}
				sc.Reclaim[peer] = limit
			}
		}
	}
	if !sc.Within && len(sc.Reclaim) == 0 {
		return PreemptionScope{}
	}
	return sc
}

// reclaimLimit is the highest priority of a cohort peer's workload a
// workload of priority may take back, and whether it may take any: as
// Kueue, it reclaims under reclaimWithinCohort only when it then fits in
// its queue's nominal quota (withinNominal); otherwise only under
// borrowWithinCohort, workloads of a lower priority, up to its
// maxPriorityThreshold.
func reclaimLimit(policy preemption.Policy, priority int32, withinNominal bool) (int32, bool) {
	lower := int32(math.MinInt32)
	if priority > math.MinInt32 {
		lower = priority - 1
	}
	if withinNominal {
		if policy.ReclaimWithinCohort == strata.PreemptionAny {
			return math.MaxInt32, true
		}
		return lower, priority > math.MinInt32
	}
	if policy.BorrowWithinCohort != strata.BorrowWithinCohortLowerPriority {
		return 0, false
	}
	if t := policy.MaxPriorityThreshold; t != nil && *t < lower {
		lower = *t
	}
	return lower, priority > math.MinInt32
}

// QuotaShort says why worker ClusterQueue cq has no quota for a workload
// asking need on flavor once queue freedFrom gives back freed (a
// preemption's band), given the books of the worker's queues; "" when it
// has. never: no usage lets it in. A cohort peer (freedFrom not cq) gives
// back no more than it borrows: the agent's search stops taking its
// workloads once it does not borrow. The books are left as they were.
func QuotaShort(books *queue.Books, cq, flavor string, need corev1.ResourceList, freedFrom string, freed corev1.ResourceList) (why string, never bool) {
	if freedFrom != cq {
		freed = books.Borrowed(freedFrom, flavor, freed)
	}
	if len(freed) > 0 {
		books.Charge(freedFrom, flavor, freed, -1)
		defer books.Charge(freedFrom, flavor, freed, 1)
	}
	if fit := books.Check(cq, flavor, need, false); fit.Err != nil {
		return fmt.Sprintf("ClusterQueue %s there has no room for it: %v", cq, fit.Err), fit.Never
	}
	return "", false
}

// allows says whether a band of queue q up to priority p is in the
// scope of a workload of priority.
func (s PreemptionScope) allows(q string, p, priority int32) bool {
	if q == s.Queue {
		return s.Within && p < priority
	}
	limit, ok := s.Reclaim[q]
	return ok && p <= limit
}

// preemptionOption is one target's lowest band that lets the workload in.
type preemptionOption struct {
	t     *Target
	entry strata.PreemptibleCapacity
	a     *answer
}

// DecidePreemption finds where wl, of priority, fits once workloads of a
// lower priority are preempted, among targets of flavors. scopeOf says
// whose workloads a copy on a target may preempt (a zero scope when none:
// the hub does not know the worker's queues, or they preempt nothing for
// it). A target with a preemption in flight (ReservePreemption) is not
// considered: its next summary tells what that one freed. The choice,
// best first: fewest workloads in the band (the most the worker may
// preempt), then the lowest band, then the placement order of Decide (the
// smallest enclosing domain, then room).
// quota, when not nil, says why the landing queue on a target has no
// quota for wl once the band's workloads (of queue) give back freed (""
// when it has): a band must free both the capacity and the quota it
// needs.
// It returns nil and why not when nothing helps ("" when no target's
// queue preempts, so that preemption is not in question).
func (p *Policy) DecidePreemption(wl *strata.Workload, flavors []string, targets []*Target, priority int32,
	scopeOf func(*Target) PreemptionScope, quota func(t *Target, queue string, freed corev1.ResourceList) string) (*PreemptionChoice, string) {
	var options []preemptionOption
	var why []string
	for _, t := range targets {
		if !slices.Contains(flavors, t.Flavor) || t.Unavailable != "" || t.summary == nil {
			continue
		}
		sc := scopeOf(t)
		if sc.Queue == "" || !sc.Within && len(sc.Reclaim) == 0 {
			continue
		}
		if t.Preempting() {
			why = append(why, fmt.Sprintf("%s/%s: a preemption is already under way there", t.Cluster, t.Flavor))
			continue
		}
		found := false
		lower := 0
		short := ""
		// Per queue, its lowest band that lets the workload in: bands are
		// cumulative within a queue, in ascending priority.
		done := map[string]bool{}
		for i, e := range t.summary.Preemptible {
			if done[e.ClusterQueue] || !sc.allows(e.ClusterQueue, e.Priority, priority) {
				continue
			}
			lower++
			if quota != nil {
				if short = quota(t, e.ClusterQueue, e.Requests); short != "" {
					continue
				}
			}
			s, err := t.preemptedSnapshot(i)
			if err != nil {
				why = append(why, fmt.Sprintf("%s/%s: %v", t.Cluster, t.Flavor, err))
				break
			}
			if a := p.place(t, s, wl, nil); a.fits {
				options = append(options, preemptionOption{t: t, entry: e, a: a})
				found = true
				done[e.ClusterQueue] = true
			}
		}
		q := sc.Queue
		switch {
		case found:
		case lower == 0 && len(sc.Reclaim) == 0:
			why = append(why, fmt.Sprintf("%s/%s: no workload of ClusterQueue %s there has a priority below %d", t.Cluster, t.Flavor, q, priority))
		case lower == 0:
			why = append(why, fmt.Sprintf("%s/%s: no workload there that ClusterQueue %s may preempt for it (its own of a priority below %d, or those of its cohort's borrowing queues %s)",
				t.Cluster, t.Flavor, q, priority, strings.Join(slices.Sorted(maps.Keys(sc.Reclaim)), ", ")))
		case short != "":
			// The last band frees the most: its quota still falls short.
			why = append(why, fmt.Sprintf("%s/%s: with every workload ClusterQueue %s may preempt there preempted, %s", t.Cluster, t.Flavor, q, short))
		default:
			why = append(why, fmt.Sprintf("%s/%s: it would not fit even with every workload of ClusterQueue %s of priority below %d preempted", t.Cluster, t.Flavor, q, priority))
		}
	}
	if len(options) == 0 {
		// "" when no target's queue preempts: nothing to say then.
		return nil, strings.Join(why, "; ")
	}
	flavorPos := func(f string) int { return slices.Index(flavors, f) }
	slices.SortStableFunc(options, func(a, b preemptionOption) int {
		return cmp.Or(cmp.Compare(a.entry.Workloads, b.entry.Workloads), cmp.Compare(a.entry.Priority, b.entry.Priority),
			cmp.Compare(len(b.a.domain), len(a.a.domain)), cmp.Compare(a.a.room, b.a.room),
			cmp.Compare(flavorPos(a.t.Flavor), flavorPos(b.t.Flavor)), cmp.Compare(a.t.Cluster, b.t.Cluster))
	})
	best := options[0]
	c := &PreemptionChoice{Cluster: best.t.Cluster, Flavor: best.t.Flavor, Queue: best.entry.ClusterQueue, UpTo: best.entry.Priority, Workloads: best.entry.Workloads}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		c.PodSets = append(c.PodSets, PodSetPlacement{Name: ps.Name, Assignment: best.a.assignments[i], Requests: workload.Request(ps).PodRequests})
	}
	c.Reason = fmt.Sprintf("fits nowhere now; %s/%s %s once workloads of ClusterQueue %s of priority ≤ %d are preempted there (%d such workloads hold the flavor)",
		c.Cluster, c.Flavor, best.a.reason, c.Queue, c.UpTo, c.Workloads)
	if len(options) > 1 {
		var others []string
		for _, o := range options[1:] {
			others = append(others, fmt.Sprintf("%s/%s: up to priority %d, %d workloads", o.t.Cluster, o.t.Flavor, o.entry.Priority, o.entry.Workloads))
		}
		c.Reason += "; also possible: " + strings.Join(others, "; ")
	}
	return c, ""
}

// preemptedSnapshot is the target's free capacity once preemptible entry
// i is preempted, less the in-flight reservations: built on first use for
// the target's current version.
func (t *Target) preemptedSnapshot(i int) (*tas.Snapshot, error) {
	if t.preempted == nil || t.preemptedVersion != t.version {
		t.preempted, t.preemptedVersion = map[int]*tas.Snapshot{}, t.version
	}
	if s, ok := t.preempted[i]; ok {
		return s, nil
	}
	view, err := tas.PreemptibleStatus(t.summary, i)
	if err != nil {
		return nil, err
	}
	s, err := tas.NewSnapshotFromSummary(view)
	if err != nil {
		return nil, fmt.Errorf("preemptible capacity %d: %w", i, err)
	}
	for _, r := range t.reservations {
		if t.reflected[r.key] {
			continue
		}
		for k, a := range r.assignments {
			_, _ = s.CommitReservation(a, r.requests[k]) // a domain gone holds nothing
		}
	}
	t.preempted[i] = s
	return s, nil
}

// ReservePreemption holds dispatch key as a preemption in flight on the
// target: it takes no capacity (what it needs is freed by its victims),
// and the target is offered for no other preemption until Release, or a
// summary that counts the dispatch (the worker admitted it).
func (t *Target) ReservePreemption(key string) {
	t.Release(key)
	t.reservations[key] = &reservation{key: key, seq: t.version + 1, preempt: true}
	t.version++
}

// Preempting says whether a preemption is in flight on the target.
func (t *Target) Preempting() bool {
	for key, r := range t.reservations {
		if r.preempt && !t.reflected[key] {
			return true
		}
	}
	return false
}

// Reserve holds the choice as a preemption in flight on its target (one
// of targets).
func (c *PreemptionChoice) Reserve(targets []*Target, key string) error {
	t := Find(targets, c.Cluster, c.Flavor)
	if t == nil {
		return fmt.Errorf("no target %s/%s to reserve %s on", c.Cluster, c.Flavor, key)
	}
	t.ReservePreemption(key)
	return nil
}

// Assignments returns the choice's assignment of each pod set.
func (c *PreemptionChoice) Assignments() []*tas.Assignment {
	out := make([]*tas.Assignment, len(c.PodSets))
	for i, ps := range c.PodSets {
		out[i] = ps.Assignment
	}
	return out
}
