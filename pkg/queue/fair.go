package queue

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// Fair sharing (Kueue's KEP-1714, with hierarchical cohorts): a node of a
// cohort tree (a ClusterQueue or a cohort) that uses more than its subtree
// quota of a resource borrows it; its share is the most, over resources,
// of what it borrows per mille of what its parent's subtree could let it
// have at most (every flavor of the resource together), divided by its
// weight. Heads are served from the lowest share and preemption takes
// from the highest (preemption.Find under a fair-sharing policy).

// Share is a node's dominant resource share.
type Share struct {
	weight float64
	// ratio is the unweighted share, per mille; 0 when the node borrows
	// nothing (or nothing its parent could lend).
	ratio float64
	// borrowed are where the node uses more than its subtree quota.
	borrowed []flavorResource
}

// negativeShare is below every share: a start for a maximum.
var negativeShare = Share{weight: 1, ratio: -1}

// Borrowing says whether the node uses more than its quota of anything.
func (s Share) Borrowing() bool { return len(s.borrowed) > 0 }

// Value is the weighted share: +Inf for a node of weight 0 that borrows.
func (s Share) Value() float64 {
	switch {
	case s.ratio == 0:
		return 0
	case s.weight == 0:
		return math.Inf(1)
	}
	return s.ratio / s.weight
}

// Rounded is the weighted share as a status shows it (Kueue's
// weightedShare): rounded up, math.MaxInt64 for a node of weight 0 that
// borrows.
func (s Share) Rounded() int64 {
	if s.zeroWeightBorrows() {
		return math.MaxInt64
	}
	return int64(math.Ceil(s.Value()))
}

func (s Share) zeroWeightBorrows() bool { return s.weight == 0 && s.ratio != 0 }

// CompareShares orders shares, lowest first: between nodes of weight 0
// that borrow, by their unweighted share.
func CompareShares(a, b Share) int {
	switch az, bz := a.zeroWeightBorrows(), b.zeroWeightBorrows(); {
	case az && bz:
		return cmp.Compare(a.ratio, b.ratio)
	case az:
		return 1
	case bz:
		return -1
	}
	return cmp.Compare(a.Value(), b.Value())
}

// borrowsOn says whether the share borrows on a flavor of need.
func (s Share) borrowsOn(flavor string, need corev1.ResourceList) bool {
	for _, fr := range s.borrowed {
		if v, ok := need[fr.resource]; ok && fr.flavor == flavor && v.Sign() > 0 {
			return true
		}
	}
	return false
}

// weightOf reads a fairSharing weight: 1 when unset, 0 for a negative one.
func weightOf(fs *strata.FairSharing) float64 {
	if fs == nil || fs.Weight == nil {
		return 1
	}
	return max(0, fs.Weight.AsApproximateFloat64())
}

// kueueUnits turns milli-units into the units Kueue divides in: milli for
// cpu, whole units (rounded up) otherwise.
func kueueUnits(r corev1.ResourceName, milli int64) int64 {
	if r == corev1.ResourceCPU {
		return milli
	}
	return (milli + 999) / 1000
}

// share is the node's share as its usage stands.
func (n *books) share() Share {
	s := Share{weight: n.weight}
	if n.parent == nil {
		return s
	}
	borrowing := map[corev1.ResourceName]int64{}
	for fr, q := range n.subtree {
		if b := n.usage[fr] - q; b > 0 {
			borrowing[fr.resource] += b
			s.borrowed = append(s.borrowed, fr)
		}
	}
	if len(borrowing) == 0 {
		return s
	}
	lendable := n.parent.lendableShares()
	for r, b := range borrowing {
		if l := kueueUnits(r, lendable[r]); l > 0 {
			s.ratio = max(s.ratio, float64(kueueUnits(r, b))*1000/float64(l))
		}
	}
	return s
}

// lendableShares is, per resource, the most the node's subtree could use of it
// on all flavors together, nothing being used anywhere (what a child's
// share is measured against). It depends on quotas alone: kept until the
// tree is rebuilt.
func (n *books) lendableShares() map[corev1.ResourceName]int64 {
	if n.lendableCache != nil {
		return n.lendableCache
	}
	out := map[corev1.ResourceName]int64{}
	for fr := range n.root().subtree {
		out[fr.resource] = saturatingAdd(out[fr.resource], n.potential(fr))
	}
	n.lendableCache = out
	return out
}

// potential is the most of fr the node's subtree could use, nothing being
// used anywhere: what it keeps and what its parent could give it, within
// its borrowingLimit.
func (n *books) potential(fr flavorResource) int64 {
	if n.parent == nil {
		return n.subtree[fr]
	}
	avail := saturatingAdd(n.guaranteed(fr), n.parent.potential(fr))
	if bl := n.quota[fr].borrowing; bl != nil {
		avail = min(avail, saturatingAdd(n.subtree[fr], *bl))
	}
	return avail
}

// saturatingAdd adds non-negative quantities, at most math.MaxInt64.
func saturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Share returns a queue's share as its usage stands.
func (b *Books) Share(queue string) Share {
	if q := b.queues[queue]; q != nil {
		return q.share()
	}
	return Share{weight: 1}
}

// CohortShares are every cohort's shares as its usage stands, by name (a
// root cohort, which borrows from no one, has none).
func (b *Books) CohortShares() map[string]Share {
	out := make(map[string]Share, len(b.cohorts))
	for name, c := range b.cohorts {
		out[name] = c.share()
	}
	return out
}

// Contender is a queue's head in a fair-sharing round: its workload, and
// the flavor and requests it would be charged (Books.Nominee).
type Contender struct {
	Queue    string
	Workload *strata.Workload
	Flavor   string
	Requests corev1.ResourceList
}

// Nominee returns what a head of cq would be charged in a fair-sharing
// round, by quota as the flavor walk chooses (Kueue's nominated
// assignment): the first of its flavors (the hub's pinned one only) where
// it fits without borrowing, or, where it fits only by borrowing, the
// first such one, the lowest borrowing first under whenCanBorrow:
// TryNextFlavor; when it fits nowhere now, the first flavor where
// preemption may let it in; nothing (no requests) when none may.
func (b *Books) Nominee(cq *strata.ClusterQueue, wl *strata.Workload) Contender {
	return b.NomineeAmong(cq, wl, nil)
}

// NomineeAmong is Nominee among the flavors usable says wl may use (its
// taints tolerated, say); all of them when usable is nil.
func (b *Books) NomineeAmong(cq *strata.ClusterQueue, wl *strata.Workload, usable func(flavor string) bool) Contender {
	need := WorkloadRequests(wl)
	c := Contender{Queue: cq.Name, Workload: wl}
	flavors, _ := FlavorsFor(cq, wl)
	if usable != nil {
		flavors = slices.DeleteFunc(slices.Clone(flavors), func(fq strata.FlavorQuotas) bool { return !usable(fq.Name) })
	}
	tryNext := Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	borrowing, preempting := "", ""
	height := 0
	for _, fq := range flavors {
		fit := b.Check(cq.Name, fq.Name, need, false)
		switch {
		case fit.Err == nil && !fit.Borrows:
			c.Flavor, c.Requests = fq.Name, need
			return c
		case fit.Err == nil && !tryNext:
			c.Flavor, c.Requests = fq.Name, need
			return c
		case fit.Err == nil:
			if h := b.borrowHeight(cq.Name, fq.Name, need); borrowing == "" || h < height {
				borrowing, height = fq.Name, h
			}
		case !fit.Never && preempting == "":
			preempting = fq.Name
		}
	}
	switch {
	case borrowing != "":
		c.Flavor, c.Requests = borrowing, need
	case preempting != "":
		c.Flavor, c.Requests = preempting, need
	}
	return c
}

// Tournament picks which of heads a round serves next under fair sharing
// (Kueue's fair-sharing iterator): the cohort tree of heads[0] (the first
// in the caller's order) plays; at each cohort, from the leaves up, the
// child whose share with its nominee admitted is lowest wins (one that
// would not borrow, on its nominee's flavor, before one that would; then
// the share; then priority; then age). A head whose queue has no cohort is
// taken as it is.
func (b *Books) Tournament(heads []Contender) int {
	return b.tournament(heads, nil, nil)
}

// shareMemo keeps, across the picks of a round, each head's shares on its
// path with its nominee charged, with the usage changes of the path they
// were computed at.
type shareMemo map[memoKey]memoShare

type memoKey struct {
	head any
	node *books
}

type memoShare struct {
	changes uint64
	share   Share
}

// tournament is Tournament; with memo, keys name the heads, and a head's
// shares are computed again only where the usage on its path changed.
func (b *Books) tournament(heads []Contender, keys []any, memo shareMemo) int {
	if len(heads) == 0 {
		return -1
	}
	q := b.queues[heads[0].Queue]
	if q == nil || q.parent == nil {
		return 0
	}
	root := q.root()
	byQueue := make(map[*books]int, len(heads))
	shares := make(map[shareKey]Share, 2*len(heads))
	for i, h := range heads {
		n := b.queues[h.Queue]
		if n == nil || n.root() != root {
			continue
		}
		if _, dup := byQueue[n]; dup {
			continue
		}
		byQueue[n] = i
		if memo != nil && keys[i] != nil {
			known := true
			var changes uint64
			for c := n; c.parent != nil; c = c.parent {
				changes += c.changes
				e, ok := memo[memoKey{keys[i], c}]
				if !ok || e.changes != changes {
					known = false
					break
				}
				shares[shareKey{c.parent, i}] = e.share
			}
			if known {
				continue
			}
		}
		var saved []uint64
		for c := n; c != nil; c = c.parent {
			saved = append(saved, c.changes)
		}
		n.charge(h.Flavor, h.Requests, 1)
		for c := n; c.parent != nil; c = c.parent {
			shares[shareKey{c.parent, i}] = c.share()
		}
		n.charge(h.Flavor, h.Requests, -1)
		k := 0
		for c := n; c != nil; c = c.parent {
			c.changes = saved[k] // a trial, undone
			k++
		}
		if memo != nil && keys[i] != nil {
			var changes uint64
			for c := n; c.parent != nil; c = c.parent {
				changes += c.changes
				memo[memoKey{keys[i], c}] = memoShare{changes, shares[shareKey{c.parent, i}]}
			}
		}
	}
	less := func(i, j int, parent *books) bool {
		si, sj := shares[shareKey{parent, i}], shares[shareKey{parent, j}]
		bi, bj := si.borrowsOn(heads[i].Flavor, heads[i].Requests), sj.borrowsOn(heads[j].Flavor, heads[j].Requests)
		if bi != bj {
			return !bi
		}
		if c := CompareShares(si, sj); c != 0 {
			return c < 0
		}
		return Compare(heads[i].Workload, heads[j].Workload) < 0
	}
	var play func(n *books) int
	play = func(n *books) int {
		best := -1
		for _, c := range n.children {
			i := -1
			if c.cohort {
				i = play(c)
			} else if k, ok := byQueue[c]; ok {
				i = k
			}
			if i >= 0 && (best < 0 || less(i, best, n)) {
				best = i
			}
		}
		return best
	}
	if w := play(root); w >= 0 {
		return w
	}
	return 0
}

// FairPick returns queue.Serve's pick under fair sharing on b: the
// Tournament of the heads, each head's Contender its Nominee as the books
// stood when its tree first played in the round (as Kueue nominates the
// heads of a scheduling cycle once, at its start, and recomputes only the
// shares as the cycle admits; a head served again in a later round is
// nominated again), computed only for the heads of the tree that plays. key names a head, workload gives its Workload; held, when
// set, says whether the books carry a head's requests already (a
// preemptor's hold): it is then charged nothing more.
func FairPick[T any](b *Books, key func(T) any, workload func(T) *strata.Workload, held func(T) bool) func([]*strata.ClusterQueue, []T) int {
	cache := map[any]Contender{}
	memo := shareMemo{}
	// Serve asks for each next head of a round with one head fewer (a
	// head served again in the next round comes back in it): any other
	// count starts a round.
	last := 0
	nominee := func(cq *strata.ClusterQueue, h T) Contender {
		c := b.Nominee(cq, workload(h))
		if held != nil && held(h) {
			c.Requests = nil
		}
		return c
	}
	return func(cqs []*strata.ClusterQueue, heads []T) int {
		if len(heads) != last-1 {
			clear(cache)
			clear(memo)
		}
		last = len(heads)
		if len(cqs) == 0 || cqs[0] == nil {
			return 0
		}
		first := b.queues[cqs[0].Name]
		if first == nil || first.parent == nil {
			return 0
		}
		root := first.root()
		cs := make([]Contender, len(heads))
		keys := make([]any, len(heads))
		for i, h := range heads {
			if cqs[i] == nil {
				continue
			}
			if n := b.queues[cqs[i].Name]; n == nil || n.root() != root {
				continue
			}
			k := key(h)
			keys[i] = k
			c, ok := cache[k]
			if !ok {
				c = nominee(cqs[i], h)
				cache[k] = c
			}
			cs[i] = c
		}
		return b.tournament(cs, keys, memo)
	}
}

type shareKey struct {
	parent *books
	head   int
}

// FairCandidate is a workload a fair-sharing preemption may take: its
// queue and what it holds on the flavor. Candidates are given in the
// order they are taken within a queue.
type FairCandidate struct {
	Queue    string
	Requests corev1.ResourceList
}

// FairStrategy is a fair-sharing preemption rule: whether a preemptor
// whose share, once admitted, is preemptor may take a workload from a
// target whose share is before, and after the workload is gone.
type FairStrategy func(preemptor, before, after Share) bool

// LessThanOrEqualToFinalShare lets the preemptor take a workload when its
// share is at most the target's once the workload is gone (Kueue's rule
// S2-a).
func LessThanOrEqualToFinalShare(preemptor, _, after Share) bool {
	return CompareShares(preemptor, after) <= 0
}

// LessThanInitialShare lets the preemptor take a workload when its share
// is below the target's as it is (Kueue's rule S2-b).
func LessThanInitialShare(preemptor, before, _ Share) bool {
	return CompareShares(preemptor, before) < 0
}

// FairStep is one removal of a fair-sharing preemption: the candidate's
// index and why it may be taken.
type FairStep struct {
	Index int
	// Reason is strata.PreemptedInClusterQueue (the preemptor's own
	// queue), strata.PreemptedInCohortReclamation (the preemptor stays
	// within its nominal quota) or strata.PreemptedInCohortFairSharing.
	Reason string
}

// FairSequence returns, in order, the removals a fair-sharing preemption
// of a workload of queue pre asking need on flavor would make if it never
// fitted (Kueue's fair preemption: the target queue is found from the
// root down, through the child of highest share that borrows, the
// preemptor's own queue and cohorts always in play; each strategy tried
// in turn, the second only on the candidates the first refused). The
// caller stops at the shortest prefix after which the preemptor fits.
// short are the resources that must be freed. The books are left as
// they were.
func (b *Books) FairSequence(pre, flavor string, need, short corev1.ResourceList, cands []FairCandidate, strategies []FairStrategy) []FairStep {
	q := b.queues[pre]
	if q == nil || len(strategies) == 0 {
		return nil
	}
	b.Charge(pre, flavor, need, 1)
	var removed []int
	defer func() {
		for _, i := range removed {
			b.Charge(cands[i].Queue, flavor, cands[i].Requests, 1)
		}
		b.Charge(pre, flavor, need, -1)
	}()
	remove := func(i int) {
		b.Charge(cands[i].Queue, flavor, cands[i].Requests, -1)
		removed = append(removed, i)
	}
	withinNominal := !b.Borrowing(pre, flavor, short)
	all := make([]int, len(cands))
	for i := range all {
		all[i] = i
	}
	var steps, retry []int
	var reasons []string
	o := b.newTargetOrder(q, cands, all)
	for t := o.next(); t != nil; t = o.next() {
		switch {
		case t == q:
			i := o.pop(t)
			remove(i)
			steps, reasons = append(steps, i), append(reasons, strata.PreemptedInClusterQueue)
			continue
		case withinNominal:
			i := o.pop(t)
			remove(i)
			steps, reasons = append(steps, i), append(reasons, strata.PreemptedInCohortReclamation)
			continue
		}
		pa, ta := almostLCAs(q, t)
		preShare, before := pa.share(), ta.share()
		for o.has(t) {
			i := o.pop(t)
			b.Charge(cands[i].Queue, flavor, cands[i].Requests, -1)
			after := ta.share()
			b.Charge(cands[i].Queue, flavor, cands[i].Requests, 1)
			if strategies[0](preShare, before, after) {
				remove(i)
				steps, reasons = append(steps, i), append(reasons, strata.PreemptedInCohortFairSharing)
				break
			}
			retry = append(retry, i)
		}
	}
	if len(strategies) > 1 && len(retry) > 0 {
		o := b.newTargetOrder(q, cands, retry)
		for t := o.next(); t != nil; t = o.next() {
			pa, ta := almostLCAs(q, t)
			preShare, before := pa.share(), ta.share()
			i := o.pop(t)
			if strategies[1](preShare, before, Share{}) {
				remove(i)
				steps, reasons = append(steps, i), append(reasons, strata.PreemptedInCohortFairSharing)
			}
			o.drop(t)
		}
	}
	out := make([]FairStep, len(steps))
	for k, i := range steps {
		out[k] = FairStep{Index: i, Reason: reasons[k]}
	}
	return out
}

// almostLCAs returns, for queues p and t of one tree, the nodes on their
// paths just below their lowest common cohort.
func almostLCAs(p, t *books) (*books, *books) {
	lca := lowestCommon(p, t)
	below := func(n *books) *books {
		for n.parent != lca {
			n = n.parent
		}
		return n
	}
	return below(p), below(t)
}

// targetOrder walks a cohort tree for the next queue to take a candidate
// from (Kueue's target ClusterQueue ordering).
type targetOrder struct {
	pre    *books
	onPath map[*books]bool
	queued map[*books][]int // candidates per queue, in order
	pruned map[*books]bool
}

func (b *Books) newTargetOrder(pre *books, cands []FairCandidate, idx []int) *targetOrder {
	o := &targetOrder{pre: pre, onPath: map[*books]bool{}, queued: map[*books][]int{}, pruned: map[*books]bool{}}
	for _, c := range pre.path() {
		o.onPath[c] = true
	}
	for _, i := range idx {
		if n := b.queues[cands[i].Queue]; n != nil {
			o.queued[n] = append(o.queued[n], i)
		}
	}
	return o
}

func (o *targetOrder) has(n *books) bool { return len(o.queued[n]) > 0 }

func (o *targetOrder) pop(n *books) int {
	i := o.queued[n][0]
	o.queued[n] = o.queued[n][1:]
	return i
}

func (o *targetOrder) drop(n *books) { o.pruned[n] = true }

func (o *targetOrder) next() *books {
	if o.pre.parent == nil {
		if !o.pruned[o.pre] && o.has(o.pre) {
			return o.pre
		}
		return nil
	}
	root := o.pre.root()
	for !o.pruned[root] {
		if t := o.nextIn(root); t != nil {
			return t
		}
	}
	return nil
}

// nextIn descends from cohort n through the child of highest share
// (a cohort on a tie) that still may yield candidates, pruning those that
// cannot; nil when it only pruned.
func (o *targetOrder) nextIn(n *books) *books {
	var hq, hc *books
	hqs, hcs := negativeShare, negativeShare
	for _, c := range n.children {
		if c.cohort || o.pruned[c] {
			continue
		}
		s := c.share()
		switch cmpS := CompareShares(s, hqs); {
		case !s.Borrowing() && c != o.pre || !o.has(c):
			o.pruned[c] = true
		case cmpS > 0:
			hq, hqs = c, s
		case cmpS == 0 && o.queued[c][0] < o.queued[hq][0]:
			hq = c
		}
	}
	for _, c := range n.children {
		if !c.cohort || o.pruned[c] {
			continue
		}
		s := c.share()
		switch {
		case !s.Borrowing() && !o.onPath[c]:
			o.pruned[c] = true
		case hc == nil || CompareShares(s, hcs) > 0:
			hc, hcs = c, s
		}
	}
	if hq == nil && hc == nil {
		o.pruned[n] = true
		return nil
	}
	if hc != nil && CompareShares(hcs, hqs) >= 0 {
		return o.nextIn(hc)
	}
	return hq
}
