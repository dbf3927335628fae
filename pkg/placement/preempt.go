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
	// Queues are the worker's ClusterQueues whose workloads it preempts:
	// the copy's own, or a cohort peer it reclaims from, or, when no one
	// queue's workloads free enough, several.
	Queues []string
	// UpTo is the priority up to which it may preempt there.
	UpTo int32
	// Workloads is how many workloads of those queues the bands counted
	// on hold on the flavor: the most it preempts.
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
	// Nominal: only if the copy then fits in Queue's nominal quota.
	Nominal bool
	// Short are the resources the copy is short of in Queue's quota (all
	// it asks for when only the capacity is short): the agent's search
	// takes a workload only when it holds some of them, so a band counts
	// only when its workloads all do (its resources). nil: any band.
	Short corev1.ResourceList
	// roomy: the copy fits the target's capacity as it is, only the
	// quota keeps it out. A band of the copy's own queue then counts
	// whatever its workloads hold: what the search frees of the resources
	// the copy is short of is the band's, and the capacity does not
	// matter. (A reclaim band still must hold what the copy is short of:
	// its queue must borrow it.)
	roomy bool
}

// ScopesFor is whose workloads a workload of priority asking need on
// flavor may preempt when it lands in worker ClusterQueue cq, given the
// books of the worker's queues, one scope per attempt of the agent's
// search (preemption.Find) that may take them: cq's own of a lower
// priority when it preempts within itself, and, when it reclaims within
// its cohort, those of the other queues of its cohort tree that borrow on
// the flavor what it needs, up to the cohort they share (of a lower
// priority, or any with reclaimWithinCohort: Any). When it does not fit cq's nominal quota as
// things stand, it reclaims while it would borrow only under
// borrowWithinCohort; a second scope then takes the borrowers under
// reclaimWithinCohort alone, on condition that it fits its nominal quota
// once they and its own go (Nominal). None when it may not preempt for
// it at all (Kueue's NoFit, as Find decides it).
//
// fair: the worker's agent preempts by fair sharing. Its own queue's
// workloads go as above; another queue's only while the copy's queue
// stays within its nominal quota with the copy admitted (fair sharing
// then takes from borrowers unconditionally), from the queues of its tree
// that borrow what it needs, under reclaimWithinCohort. Beyond its
// nominal quota the shares decide, which the hub does not predict: no
// scope of other queues then (the hub may miss a preemption the agent
// would make, never expects one it would not).
func ScopesFor(cq *strata.ClusterQueue, flavor string, need corev1.ResourceList, priority int32, books *queue.Books, fair bool) []PreemptionScope {
	if cq == nil {
		return nil
	}
	policy := preemption.PolicyOf(cq)
	if fair {
		return fairScopes(cq, policy, flavor, need, priority, books)
	}
	within := policy.WithinClusterQueue != strata.PreemptionNever
	// What the agent's search frees (preemption.Find): the resources the
	// copy cannot take now, or all it asks for when only the capacity is
	// short. Without borrowWithinCohort, it preempts nothing when it asks
	// for more of one of those than the queue's nominal quota (Kueue's
	// NoFit: Find's first check; without the books, of any resource).
	short := need
	if books != nil {
		if s := books.Short(cq.Name, flavor, need); len(s) > 0 {
			short = s
			if policy.BorrowWithinCohort != strata.BorrowWithinCohortLowerPriority && !books.ReclaimMayHelp(cq.Name, flavor, need, s) {
				return nil
			}
		}
	} else if !preemption.MayPreemptFor(cq, flavor, need) {
		return nil
	}
	base := PreemptionScope{Queue: cq.Name, Within: within, Short: short}
	nominal := PreemptionScope{Queue: cq.Name, Within: within, Nominal: true, Short: short}
	if policy.ReclaimWithinCohort != strata.PreemptionNever && books != nil && books.Cohort(cq.Name) != "" {
		full, fullOK := reclaimLimit(policy, priority, true)
		borrowForbidden := policy.BorrowWithinCohort != strata.BorrowWithinCohortLowerPriority
		for _, peer := range books.Peers(cq.Name) {
			// A queue of the tree the search may take from (its subtree
			// borrows what is short, up to the cohort the two share), and
			// whether the copy has precedence over it there (in a flat
			// cohort: it fits its nominal quota as things stand).
			if !books.Reclaimable(cq.Name, peer, flavor, short) {
				continue
			}
			advantage := books.Advantage(cq.Name, peer, flavor, need)
			limit, reclaims := reclaimLimit(policy, priority, advantage)
			// Find's attempt without borrowing, which takes every borrower
			// reclaimWithinCohort allows: not made when the queue may not
			// preempt while borrowing and already uses its nominal quota;
			// of use only when its own workloads may go too (it does not
			// fit its nominal quota as things stand).
			unborrowed := !advantage && within && fullOK && (!borrowForbidden || books.UnderNominal(cq.Name, flavor, short))
			if reclaims {
				if base.Reclaim == nil {
					base.Reclaim = map[string]int32{}
				}
				base.Reclaim[peer] = limit
			}
			if unborrowed {
				if nominal.Reclaim == nil {
					nominal.Reclaim = map[string]int32{}
				}
				nominal.Reclaim[peer] = full
			}
		}
	}
	var out []PreemptionScope
	if base.Within || len(base.Reclaim) > 0 {
		out = append(out, base)
	}
	if len(nominal.Reclaim) > 0 {
		out = append(out, nominal)
	}
	return out
}

// fairScopes is ScopesFor on a worker whose agent preempts by fair
// sharing.
func fairScopes(cq *strata.ClusterQueue, policy preemption.Policy, flavor string, need corev1.ResourceList, priority int32, books *queue.Books) []PreemptionScope {
	within := policy.WithinClusterQueue != strata.PreemptionNever
	short := need
	if books != nil {
		if s := books.Short(cq.Name, flavor, need); len(s) > 0 {
			short = s
			mayWhileBorrowing := policy.ReclaimWithinCohort != strata.PreemptionNever || policy.BorrowWithinCohort == strata.BorrowWithinCohortLowerPriority
			if !mayWhileBorrowing && !books.ReclaimMayHelp(cq.Name, flavor, need, s) {
				return nil
			}
		}
	} else if !preemption.MayPreemptFor(cq, flavor, need) {
		return nil
	}
	scope := PreemptionScope{Queue: cq.Name, Within: within, Short: short}
	if policy.ReclaimWithinCohort != strata.PreemptionNever && books != nil && books.Cohort(cq.Name) != "" && books.WithinNominal(cq.Name, flavor, need) {
		limit, ok := reclaimLimit(policy, priority, true)
		for _, peer := range books.Peers(cq.Name) {
			if ok && books.Borrowing(peer, flavor, short) {
				if scope.Reclaim == nil {
					scope.Reclaim = map[string]int32{}
				}
				scope.Reclaim[peer] = limit
			}
		}
	}
	if !scope.Within && len(scope.Reclaim) == 0 {
		return nil
	}
	return []PreemptionScope{scope}
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
// asking need on flavor (within its nominal quota when nominal) once each
// queue of freed gives back what freed says (preemption bands: a cohort
// peer's reclaim band is what the agent's search takes back from it),
// given the books of the worker's queues; "" when it has. never: no usage
// lets it in. The books are left as they were.
func QuotaShort(books *queue.Books, cq, flavor string, need corev1.ResourceList, freed map[string]corev1.ResourceList, nominal bool) (why string, never bool) {
	for q, r := range freed {
		books.Charge(q, flavor, r, -1)
	}
	defer func() {
		for q, r := range freed {
			books.Charge(q, flavor, r, 1)
		}
	}()
	if fit := books.Check(cq, flavor, need, nominal); fit.Err != nil {
		return fmt.Sprintf("ClusterQueue %s there has no room for it: %v", cq, fit.Err), fit.Never
	}
	return "", false
}

// allows says whether a band is in the scope of a workload of priority:
// its workloads all hold some of what the copy is short of, and it is a
// band of all its queue's workloads up to a priority when it is the
// copy's own queue (within), a reclaim band when it is a peer's. (Agents
// older than reclaim bands list only the former: the hub then counts on
// no reclaim there.)
func (s PreemptionScope) allows(e strata.PreemptibleCapacity, priority int32) bool {
	if s.Short != nil && len(e.Resources) > 0 && (e.Reclaim || !s.roomy) &&
		!slices.ContainsFunc(e.Resources, func(r corev1.ResourceName) bool { _, ok := s.Short[r]; return ok }) {
		// Its workloads need not hold what the copy is short of: the
		// agent's search would not take them. (Agents older than
		// resources do not say: their bands count, as before.)
		return false
	}
	if e.ClusterQueue == s.Queue {
		return !e.Reclaim && s.Within && e.Priority < priority
	}
	limit, ok := s.Reclaim[e.ClusterQueue]
	return ok && e.Reclaim && e.Priority <= limit
}

// preemptionOption is the bands of one target whose preemption lets the
// workload in.
type preemptionOption struct {
	t *Target
	// bands are entries of the target's preemptible capacity, at most one
	// per queue.
	bands []int
	// workloads is how many workloads the bands hold; upTo their highest
	// priority.
	workloads, upTo int32
	a               *answer
}

// scopeBands returns, per queue whose workloads the scope lets go (the
// copy's own queue first, then its peers by name), its series of bands in
// scope: each a list of entries of the preemptible capacity in ascending
// priority, each cumulative (the next frees what the one before does and
// more). A queue has one series of all its workloads and, where they do
// not all hold the same resources, one per resource of those holding it
// (strata.PreemptibleCapacity.Holding); the series whose highest band in
// scope frees the most workloads comes first (the series of all of them
// on a tie).
func (s PreemptionScope) scopeBands(entries []strata.PreemptibleCapacity, priority int32) (queues []string, series [][][]int) {
	type key struct {
		queue   string
		holding corev1.ResourceName
	}
	at := map[key][]int{}
	var keys []key
	for i, e := range entries {
		if !s.allows(e, priority) {
			continue
		}
		k := key{e.ClusterQueue, e.Holding}
		if _, ok := at[k]; !ok {
			keys = append(keys, k)
		}
		at[k] = append(at[k], i)
	}
	widest := func(list []int) int32 { return entries[list[len(list)-1]].Workloads }
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(b2i(b.queue == s.Queue), b2i(a.queue == s.Queue)), cmp.Compare(a.queue, b.queue),
			cmp.Compare(widest(at[b]), widest(at[a])), cmp.Compare(a.holding, b.holding))
	})
	for _, k := range keys {
		if n := len(queues); n == 0 || queues[n-1] != k.queue {
			queues, series = append(queues, k.queue), append(series, nil)
		}
		series[len(series)-1] = append(series[len(series)-1], at[k])
	}
	return queues, series
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pickBands finds the bands of one target whose preemption lets the
// workload in, as try says of a set of bands (the quota they leave short,
// "" when none; whether the workload then fits the capacity), per queue
// its series of bands (scopeBands). The lowest band of each series that
// does on its own is an option. When no band does on its own, the agent
// may still find victims across queues (its own lower priorities and the
// borrowers it reclaims from, or several borrowers): every queue's
// highest band of its first series together, then, queue by queue
// (the copy's own first, so that, as Kueue, what the others borrow goes
// first), the lowest band of it (or none) that still lets it in. short is
// the quota still short with every band in scope gone.
func pickBands(series [][][]int, try func(sel []int) (short string, a *answer, err error)) (options [][]int, answers []*answer, short string, err error) {
	for _, qs := range series {
		for _, qb := range qs {
			for _, i := range qb {
				s, a, err := try([]int{i})
				if err != nil {
					return nil, nil, "", err
				}
				short = s
				if a != nil {
					options, answers = append(options, []int{i}), append(answers, a)
					break
				}
			}
		}
	}
	// Across queues, one series each: the widest.
	bands := make([][]int, len(series))
	for k, qs := range series {
		bands[k] = qs[0]
	}
	if len(options) > 0 || len(bands) < 2 {
		return options, answers, short, nil
	}
	sel := make([]int, len(bands))
	for k, qb := range bands {
		sel[k] = qb[len(qb)-1]
	}
	s, a, err := try(sel)
	if err != nil || a == nil {
		return nil, nil, s, err
	}
	const none = -1
	for k, qb := range bands {
		for _, lower := range append([]int{none}, qb[:len(qb)-1]...) {
			cand := slices.Clone(sel)
			cand[k] = lower
			_, b, err := try(slices.DeleteFunc(slices.Clone(cand), func(i int) bool { return i == none }))
			if err != nil {
				return nil, nil, "", err
			}
			if b != nil {
				sel, a = cand, b
				break
			}
		}
	}
	return [][]int{slices.DeleteFunc(sel, func(i int) bool { return i == none })}, []*answer{a}, "", nil
}

// DecidePreemption finds where wl fits once workloads of a lower priority
// are preempted, among targets of flavors; priorityOf is wl's priority on
// a target's worker (Target.Priority), in the terms of its bands, and
// false where the worker lacks its class (no preemption there). scopeOf says
// whose workloads a copy on a target may preempt, one scope per attempt
// of the agent's search (none when the hub does not know the worker's
// queues, or they preempt nothing for it). A target with a preemption in flight (ReservePreemption) is not
// considered: its next summary tells what that one freed. The choice,
// best first: fewest workloads in the bands (the most the worker may
// preempt), then the lowest priority, then the placement order of Decide
// (the smallest enclosing domain, then room).
// quota, when not nil, says why the landing queue on a target has no
// quota for wl once each queue of freed gives back what it holds there
// ("" when it has; within its nominal quota when nominal): bands must
// free both the capacity and the quota it needs.
// It returns nil and why not when nothing helps ("" when no target's
// queue preempts, so that preemption is not in question).
func (p *Policy) DecidePreemption(wl *strata.Workload, flavors []string, targets []*Target, priorityOf func(*Target) (int32, bool),
	scopeOf func(*Target) []PreemptionScope, quota func(t *Target, freed map[string]corev1.ResourceList, nominal bool) string) (*PreemptionChoice, string) {
	var options []preemptionOption
	var why []string
	for _, t := range targets {
		if !slices.Contains(flavors, t.Flavor) || t.Unavailable != "" || t.summary == nil {
			continue
		}
		scopes := slices.DeleteFunc(scopeOf(t), func(sc PreemptionScope) bool { return sc.Queue == "" || !sc.Within && len(sc.Reclaim) == 0 })
		if len(scopes) == 0 {
			continue
		}
		if t.Preempting() {
			why = append(why, fmt.Sprintf("%s/%s: a preemption is already under way there", t.Cluster, t.Flavor))
			continue
		}
		priority, ok := priorityOf(t)
		if !ok {
			why = append(why, fmt.Sprintf("%s/%s: %s", t.Cluster, t.Flavor, MissingClassMessage(wl)))
			continue
		}
		var whyHere string
		for k, sc := range scopes {
			opts, w := p.preemptionOptions(wl, t, sc, priority, quota)
			for _, o := range opts {
				if !slices.ContainsFunc(options, func(x preemptionOption) bool { return x.t == t && slices.Equal(x.bands, o.bands) }) {
					options = append(options, o)
				}
			}
			if k == 0 {
				whyHere = w
			}
			if len(opts) > 0 {
				whyHere = ""
			}
		}
		if whyHere != "" {
			why = append(why, whyHere)
		}
	}
	if len(options) == 0 {
		// "" when no target's queue preempts: nothing to say then.
		return nil, strings.Join(why, "; ")
	}
	flavorPos := func(f string) int { return slices.Index(flavors, f) }
	slices.SortStableFunc(options, func(a, b preemptionOption) int {
		return cmp.Or(cmp.Compare(a.workloads, b.workloads), cmp.Compare(a.upTo, b.upTo),
			cmp.Compare(leafDepth(a.t.Levels())-len(a.a.domain), leafDepth(b.t.Levels())-len(b.a.domain)), cmp.Compare(a.a.room, b.a.room),
			cmp.Compare(flavorPos(a.t.Flavor), flavorPos(b.t.Flavor)), cmp.Compare(a.t.Cluster, b.t.Cluster))
	})
	best := options[0]
	c := &PreemptionChoice{Cluster: best.t.Cluster, Flavor: best.t.Flavor, UpTo: best.upTo, Workloads: best.workloads}
	var bandWords []string
	for _, i := range best.bands {
		e := best.t.summary.Preemptible[i]
		c.Queues = append(c.Queues, e.ClusterQueue)
		words := fmt.Sprintf("workloads of ClusterQueue %s of priority ≤ %d", e.ClusterQueue, e.Priority)
		if e.Holding != "" {
			words += " holding " + string(e.Holding)
		}
		bandWords = append(bandWords, words)
	}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		c.PodSets = append(c.PodSets, PodSetPlacement{Name: ps.Name, Assignment: best.a.assignments[i], Requests: workload.Request(ps).PodRequests})
	}
	c.Reason = fmt.Sprintf("fits nowhere now; %s/%s %s once %s are preempted there (%d such workloads hold the flavor)",
		c.Cluster, c.Flavor, best.a.reason, strings.Join(bandWords, " and "), c.Workloads)
	if len(options) > 1 {
		var others []string
		for _, o := range options[1:] {
			others = append(others, fmt.Sprintf("%s/%s: up to priority %d, %d workloads", o.t.Cluster, o.t.Flavor, o.upTo, o.workloads))
		}
		c.Reason += "; also possible: " + strings.Join(others, "; ")
	}
	return c, ""
}

// preemptionOptions are the options on target t for a copy of scope sc,
// or why there is none.
func (p *Policy) preemptionOptions(wl *strata.Workload, t *Target, sc PreemptionScope, priority int32,
	quota func(t *Target, freed map[string]corev1.ResourceList, nominal bool) string) ([]preemptionOption, string) {
	entries := t.summary.Preemptible
	sc.roomy = p.place(t, t.free, wl, nil).fits
	queues, bands := sc.scopeBands(entries, priority)
	picks, answers, short, err := pickBands(bands, func(sel []int) (string, *answer, error) {
		if quota != nil {
			freed := make(map[string]corev1.ResourceList, len(sel))
			for _, i := range sel {
				freed[entries[i].ClusterQueue] = entries[i].Requests
			}
			if short := quota(t, freed, sc.Nominal); short != "" {
				return short, nil, nil
			}
		}
		s, err := t.preemptedSnapshot(sel)
		if err != nil {
			return "", nil, err
		}
		if a := p.place(t, s, wl, nil); a.fits {
			return "", a, nil
		}
		return "", nil, nil
	})
	q := sc.Queue
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s/%s: %v", t.Cluster, t.Flavor, err)
	case len(picks) > 0:
		var out []preemptionOption
		for k, sel := range picks {
			o := preemptionOption{t: t, bands: sel, a: answers[k], upTo: math.MinInt32}
			for _, i := range sel {
				o.workloads += entries[i].Workloads
				o.upTo = max(o.upTo, entries[i].Priority)
			}
			out = append(out, o)
		}
		return out, ""
	case len(queues) == 0 && sc.Short != nil && anyBand(sc, entries, priority):
		return nil, fmt.Sprintf("%s/%s: the workloads ClusterQueue %s may preempt there do not all hold %s, which it is short of (a preemption takes only those that do)",
			t.Cluster, t.Flavor, q, strings.Join(resourceNames(sc.Short), ", "))
	case len(queues) == 0 && len(sc.Reclaim) == 0:
		return nil, fmt.Sprintf("%s/%s: no workload of ClusterQueue %s there has a priority below %d", t.Cluster, t.Flavor, q, priority)
	case len(queues) == 0:
		return nil, fmt.Sprintf("%s/%s: no workload there that ClusterQueue %s may preempt for it (its own of a priority below %d, or those of its cohort's borrowing queues %s)",
			t.Cluster, t.Flavor, q, priority, strings.Join(slices.Sorted(maps.Keys(sc.Reclaim)), ", "))
	case short != "":
		// The highest bands free the most: the quota still falls short.
		return nil, fmt.Sprintf("%s/%s: with every workload ClusterQueue %s may preempt there preempted, %s", t.Cluster, t.Flavor, q, short)
	}
	holding := make([]corev1.ResourceName, len(bands))
	for k, qs := range bands {
		holding[k] = entries[qs[0][0]].Holding
	}
	return nil, fmt.Sprintf("%s/%s: it would not fit even with every workload of %s preempted", t.Cluster, t.Flavor, scopeWords(sc, queues, holding, priority))
}

// anyBand says whether some band would be in scope whatever its
// workloads hold.
func anyBand(sc PreemptionScope, entries []strata.PreemptibleCapacity, priority int32) bool {
	sc.Short = nil
	queues, _ := sc.scopeBands(entries, priority)
	return len(queues) > 0
}

// resourceNames are the names of rl, sorted.
func resourceNames(rl corev1.ResourceList) []string {
	out := make([]string, 0, len(rl))
	for r := range rl {
		out = append(out, string(r))
	}
	slices.Sort(out)
	return out
}

// scopeWords names the workloads a scope lets go, for a reason.
func scopeWords(sc PreemptionScope, queues []string, holding []corev1.ResourceName, priority int32) string {
	// The search takes only those holding what the copy is short of, where
	// the queue's workloads do not all hold it.
	holds := func(k int) string {
		if holding[k] == "" {
			return ""
		}
		return " holding " + string(holding[k])
	}
	if len(queues) == 1 && queues[0] == sc.Queue {
		return fmt.Sprintf("ClusterQueue %s of priority below %d%s", sc.Queue, priority, holds(0))
	}
	names := make([]string, len(queues))
	for k, q := range queues {
		names[k] = q + holds(k)
	}
	return "ClusterQueues " + strings.Join(names, ", ") + " it may preempt"
}

// preemptedSnapshot is the target's free capacity once preemptible
// entries sel are preempted (tas.PreemptibleStatus), less the in-flight
// reservations: built on first use for the target's current version.
func (t *Target) preemptedSnapshot(sel []int) (*tas.Snapshot, error) {
	if t.preempted == nil || t.preemptedVersion != t.version {
		t.preempted, t.preemptedVersion = map[string]*tas.Snapshot{}, t.version
	}
	key := fmt.Sprint(sel)
	if s, ok := t.preempted[key]; ok {
		return s, nil
	}
	view, err := tas.PreemptibleStatus(t.summary, sel...)
	if err != nil {
		return nil, err
	}
	s, err := tas.NewSnapshotFromSummary(view)
	if err != nil {
		return nil, fmt.Errorf("preemptible capacity %v: %w", sel, err)
	}
	for _, r := range t.reservations {
		if t.reflected[r.key] {
			continue
		}
		for k, a := range r.assignments {
			commitWhatIsLeft(s, a, r.requests[k]) // a domain gone holds nothing
		}
	}
	t.preempted[key] = s
	return s, nil
}

// ReservePreemption holds dispatch key as a preemption in flight on the
// target: it takes no capacity (what it needs is freed by its victims),
// and the target is offered for no other preemption until Release, or a
// summary that counts the dispatch (the worker admitted it).
func (t *Target) ReservePreemption(key string) {
	t.Release(key)
	r := &reservation{key: key, preempt: true}
	t.reservations[key] = r
	r.seq = t.bump()
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
// of targets); for a split (DecideSplitPreemption), the pod sets that fit
// now take their capacity on their own flavors' targets, under the same
// key.
func (c *PreemptionChoice) Reserve(targets []*Target, key string) error {
	t := Find(targets, c.Cluster, c.Flavor)
	if t == nil {
		return fmt.Errorf("no target %s/%s to reserve %s on", c.Cluster, c.Flavor, key)
	}
	if c.Split() {
		fitting := &Decision{Cluster: c.Cluster}
		for _, ps := range c.PodSets {
			if ps.Flavor != c.Flavor {
				fitting.PodSets = append(fitting.PodSets, ps)
			}
		}
		fitting.Flavor = fitting.PodSets[0].Flavor
		if err := fitting.Reserve(targets, key); err != nil {
			return err
		}
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
