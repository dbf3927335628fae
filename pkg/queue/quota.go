package queue

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Flavors returns a ClusterQueue's flavors with their quotas, in the order
// they are tried: spec.flavors as they are, or the flavors of
// spec.resourceGroups, group by group.
func Flavors(cq *strata.ClusterQueue) []strata.FlavorQuotas {
	if len(cq.Spec.ResourceGroups) == 0 {
		return cq.Spec.Flavors
	}
	var out []strata.FlavorQuotas
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			if !slices.ContainsFunc(out, func(o strata.FlavorQuotas) bool { return o.Name == f.Name }) {
				out = append(out, f)
			}
		}
	}
	return out
}

// FlavorsFor returns the flavors of the queue to try a workload on: all of
// them, in order, or only the one a hub pinned the workload to (the
// strata.dev/flavor annotation of its Job). When the queue does not have
// the pinned flavor it returns why, for an Inadmissible condition: nothing
// but a change of the ClusterQueue (whose event brings a pass) can let the
// workload in.
//
// A copy whose pod sets the hub pinned to different flavors (the
// strata.dev/pod-set-flavors annotation) is tried on those flavors, in the
// queue's order; each pod set only on its own (workload.FlavorRefusal).
func FlavorsFor(cq *strata.ClusterQueue, wl *strata.Workload) ([]strata.FlavorQuotas, string) {
	flavors := Flavors(cq)
	pins, err := workload.PinnedPodSetFlavors(wl)
	if err != nil {
		return nil, err.Error()
	}
	if pins != nil {
		var out []strata.FlavorQuotas
		for _, ps := range wl.Spec.PodSets {
			pinned := pins[ps.Name]
			i := slices.IndexFunc(flavors, func(fq strata.FlavorQuotas) bool { return fq.Name == pinned })
			if i < 0 {
				return nil, fmt.Sprintf("the hub placed pod set %s on flavor %q (annotation %s), which ClusterQueue %q does not have", ps.Name, pinned, strata.PodSetFlavorsAnnotation, cq.Name)
			}
		}
		for _, fq := range flavors {
			if slices.ContainsFunc(wl.Spec.PodSets, func(ps strata.PodSet) bool { return pins[ps.Name] == fq.Name }) {
				out = append(out, fq)
			}
		}
		return out, ""
	}
	pinned := workload.PinnedFlavor(wl)
	if pinned == "" {
		return flavors, ""
	}
	i := slices.IndexFunc(flavors, func(fq strata.FlavorQuotas) bool { return fq.Name == pinned })
	if i < 0 {
		return nil, fmt.Sprintf("the hub pinned flavor %q (annotation %s), which ClusterQueue %q does not have", pinned, strata.FlavorAnnotation, cq.Name)
	}
	return flavors[i : i+1], ""
}

// Fungibility returns a queue's flavorFungibility with Kueue's defaults
// (whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor).
func Fungibility(cq *strata.ClusterQueue) strata.FlavorFungibility {
	f := strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityTryNextFlavor}
	if cq == nil {
		return f
	}
	if ff := cq.Spec.FlavorFungibility; ff != nil {
		if ff.WhenCanBorrow != "" {
			f.WhenCanBorrow = ff.WhenCanBorrow
		}
		if ff.WhenCanPreempt != "" {
			f.WhenCanPreempt = ff.WhenCanPreempt
		}
	}
	return f
}

// WouldBorrow says how far up its cohort tree wl, at the head of cq,
// borrows on the flavor the walk takes (in cq's flavor order; under
// whenCanBorrow: TryNextFlavor, one where it fits without borrowing,
// else the lowest borrowing): 0 when it fits in its queue's nominal
// quota, else the height of the lowest of its cohorts whose quota holds
// it (Kueue's borrowing height: 1 for a cohort of queues alone, one more
// per level of cohorts below).
// When it fits nowhere now, the lowest such height among the flavors that
// could ever hold it, as Kueue's assignment of a workload that must
// preempt (or cannot be admitted) carries (0 when none could); 0 on a
// flavor whose nominal quota holds it when its queue may preempt (within
// itself or from borrowers), as an estimate of Kueue's height once its
// victims are gone (WouldBorrowAfter computes it). Kueue
// serves heads of lower height first, so in flat cohorts those that do
// not borrow before those that do. Quota alone decides; the topology is
// checked when it is served.
func (b *Books) WouldBorrow(cq *strata.ClusterQueue, wl *strata.Workload) int {
	return b.WouldBorrowAfter(cq, wl, nil)
}

// WouldBorrowAfter is WouldBorrow with Kueue's preemption oracle: on a
// flavor where wl (asking need) fits only by preempting, after (when set) says how high
// it borrows once the victims a search on quota alone finds are gone, or
// false when it finds none (or may not preempt there), and the height is
// then where it would borrow now (Kueue's borrowAfterPreemptions, and its
// height for no candidates). A head that must preempt and still borrows
// after it is served with the borrowers, not before them.
func (b *Books) WouldBorrowAfter(cq *strata.ClusterQueue, wl *strata.Workload, after func(flavor string, need corev1.ResourceList) (int, bool)) int {
	need := WorkloadRequests(wl)
	tryNext := Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	preempts := cq.Spec.Preemption != nil && (cq.Spec.Preemption.WithinClusterQueue != "" && cq.Spec.Preemption.WithinClusterQueue != strata.PreemptionNever ||
		cq.Spec.Cohort != "" && cq.Spec.Preemption.ReclaimWithinCohort != "" && cq.Spec.Preemption.ReclaimWithinCohort != strata.PreemptionNever)
	flavors, _ := FlavorsFor(cq, wl)
	lowestFit, lowest := -1, -1
	for _, fq := range flavors {
		fit := b.Check(cq.Name, fq.Name, need, false)
		switch {
		case fit.Err == nil && !fit.Borrows:
			return 0
		case fit.Err == nil && !tryNext:
			return b.borrowHeight(cq.Name, fq.Name, need)
		case fit.Err == nil:
			if h := b.borrowHeight(cq.Name, fq.Name, need); lowestFit < 0 || h < lowestFit {
				lowestFit = h
			}
		case !fit.Never:
			h := b.borrowHeight(cq.Name, fq.Name, need)
			if after != nil {
				if hp, ok := after(fq.Name, need); ok {
					h = hp
				}
			} else if preempts && b.NominalCovers(cq.Name, fq.Name, need) {
				h = 0
			}
			if lowest < 0 || h < lowest {
				lowest = h
			}
		}
	}
	if lowestFit >= 0 {
		return lowestFit
	}
	return max(lowest, 0)
}

// WouldBorrowByUnit is WouldBorrowAfter for a scheduler that admits a
// workload's flavor assignment units (pod sets, or PodSet groups:
// workload.FlavorUnits) each on its own flavor, as a worker's agent does:
// when the walk over the queue's flavors on quota alone (PlaceByUnit's,
// topology aside) puts the units on different flavors, the height is the
// most over those flavors of how high the pod sets put there borrow
// (Kueue's assignment borrows as its highest pod set does). Otherwise,
// and when some unit is within quota on no flavor (the one-flavor walk
// then decides, preemption included), it is WouldBorrowAfter's.
func (b *Books) WouldBorrowByUnit(cq *strata.ClusterQueue, wl *strata.Workload, after func(flavor string, need corev1.ResourceList) (int, bool)) int {
	if h, ok := b.unitHeight(cq, wl); ok {
		return h
	}
	return b.WouldBorrowAfter(cq, wl, after)
}

// unitHeight is WouldBorrowByUnit's height for a workload whose units
// the quota-only walk puts on different flavors; false otherwise.
func (b *Books) unitHeight(cq *strata.ClusterQueue, wl *strata.Workload) (int, bool) {
	flavors, _ := FlavorsFor(cq, wl)
	if len(flavors) < 2 || len(wl.Spec.PodSets) < 2 {
		return 0, false
	}
	units := workload.FlavorUnits(wl)
	if len(units) < 2 {
		return 0, false
	}
	names := make([]string, len(flavors))
	for i, fq := range flavors {
		names[i] = fq.Name
	}
	quota := b.UnitQuota(cq.Name, names)
	tryNext := Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	pins, _ := workload.PinnedPodSetFlavors(wl) // a hub's copy: each unit on its own
	onFlavor := map[int][]int{}
	for _, unit := range units {
		chosen, aside, asideHeight := -1, -1, 0
		for f := range flavors {
			if pins != nil && pins[wl.Spec.PodSets[unit[0]].Name] != names[f] {
				continue
			}
			q := quota(f, workload.WithPodSets(wl, slices.Concat(onFlavor[f], unit)))
			if !q.Fits {
				continue
			}
			if q.Borrows && tryNext {
				if aside < 0 || q.Height < asideHeight {
					aside, asideHeight = f, q.Height
				}
				continue
			}
			chosen = f
			break
		}
		if chosen < 0 {
			chosen = aside
		}
		if chosen < 0 {
			return 0, false
		}
		onFlavor[chosen] = append(onFlavor[chosen], unit...)
	}
	if len(onFlavor) < 2 {
		return 0, false
	}
	height := 0
	for f, podSets := range onFlavor {
		need := WorkloadRequests(workload.WithPodSets(wl, podSets))
		if b.Check(cq.Name, names[f], need, false).Borrows {
			height = max(height, b.borrowHeight(cq.Name, names[f], need))
		}
	}
	return height, true
}

// BorrowHeight is how high in its cohort tree a workload of queue asking
// need borrows on a flavor where it fits only by borrowing (see
// WouldBorrow): under whenCanBorrow: TryNextFlavor, Kueue takes the
// lowest among such flavors, the first on a tie.
func (b *Books) BorrowHeight(queue, flavor string, need corev1.ResourceList) int {
	return b.borrowHeight(queue, flavor, need)
}

// borrowHeight is the most, over need's resources, of the height of the
// lowest cohort of queue whose quota holds what it asks of it (each
// level counting only what the levels below do not keep); 0 for a
// resource the queue's nominal quota holds.
func (b *Books) borrowHeight(queue, flavor string, need corev1.ResourceList) int {
	q := b.queues[queue]
	if q == nil {
		return 0
	}
	height := 0
	for r, v := range need {
		fr := flavorResource{flavor, r}
		if _, ok := q.quota[fr]; !ok || v.IsZero() {
			continue
		}
		want := v.MilliValue()
		n := q
		for n.parent != nil && n.usage[fr]+want > n.subtree[fr] {
			want -= max(0, n.guaranteed(fr)-n.usage[fr])
			n = n.parent
		}
		if n != q {
			height = max(height, n.height())
		}
	}
	return height
}

// height is the distance from a cohort to its furthest leaf: 1 for a
// cohort of queues alone, one more per level of cohorts below.
func (n *books) height() int {
	h := 0
	for _, c := range n.children {
		if c.cohort {
			h = max(h, c.height()+1)
		} else {
			h = max(h, 1)
		}
	}
	return h
}

// Books keeps the quota of a set of ClusterQueues and what their admitted
// workloads use of it, and answers whether a workload fits: within its
// queue's nominal quota, or by borrowing what the other queues of its
// cohort do not use. Cohorts form trees (Kueue's hierarchical cohorts): a
// Cohort object gives a cohort quota of its own and a parent; what a
// subtree does not use is lent up, within each node's lendingLimit, and a
// queue borrows from every cohort on its path to the root, within each
// node's borrowingLimit. A cohort named by a queue without a Cohort object
// is a root without quota: Kueue's flat cohorts. Quantities are kept in
// milli-units.
type Books struct {
	queues  map[string]*books
	cohorts map[string]*books
}

// books is one node of a cohort tree: a ClusterQueue (a leaf) or a cohort.
type books struct {
	name string
	// cohort: this node is a cohort, not a ClusterQueue.
	cohort bool
	// parent is the cohort the node is in; nil at a root (a queue without
	// a cohort, or detached from it).
	parent   *books
	children []*books
	// cycle: a cohort on a cycle of parents (cut at one of them), or a
	// queue under one (taken out of its cohort).
	cycle bool
	// groups: the queue gives its quota as resourceGroups, which must
	// cover every resource a workload requests; covered says by which
	// group's flavors. With spec.flavors a resource a flavor does not list
	// is limited only by capacity.
	groups  bool
	covered map[corev1.ResourceName][]string
	quota   map[flavorResource]quota
	// subtree is the node's own nominal quota and what its children lend
	// it (each child's subtree beyond what it keeps: its guaranteed part).
	// A queue's is its nominal quota.
	subtree map[flavorResource]int64
	// usage is what counts against subtree: a queue's admitted workloads;
	// for a cohort, what its children use beyond their guaranteed parts.
	usage map[flavorResource]int64
	// weight is the node's fairSharing weight (1 unless set).
	weight float64
	// lendableCache is lendableShares' answer, until the tree is rebuilt.
	lendableCache map[corev1.ResourceName]int64
	// changes counts the changes of usage: what was computed from the
	// node's usage holds while it stays.
	changes uint64
}

type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// quota of one resource on one flavor, in milli-units; nil limits are
// unlimited (borrowing) or all of it (lending).
type quota struct {
	nominal            int64
	borrowing, lending *int64
	// as written, for messages
	written resource.Quantity
}

func newBooks(name string, cohort bool) *books {
	return &books{name: name, cohort: cohort, covered: map[corev1.ResourceName][]string{},
		quota: map[flavorResource]quota{}, subtree: map[flavorResource]int64{}, usage: map[flavorResource]int64{}, weight: 1}
}

// guaranteed is the part of the node's subtree quota it does not lend
// its parent.
func (n *books) guaranteed(fr flavorResource) int64 {
	l := n.quota[fr].lending
	if l == nil || n.parent == nil {
		return 0
	}
	return max(0, n.subtree[fr]-*l)
}

// lendable is the part of the node's subtree quota its parent may use.
func (n *books) lendable(fr flavorResource) int64 { return n.subtree[fr] - n.guaranteed(fr) }

// counts says whether the node's usage of fr counts in its parent: a
// queue's only where it has a quota of it (with spec.flavors a resource a
// flavor does not list is limited only by capacity, and is not the
// cohort's).
func (n *books) counts(fr flavorResource) bool {
	if n.cohort {
		return true
	}
	_, ok := n.quota[fr]
	return ok
}

// add adds d to what the node uses of fr, and to its parent what that
// changes of its use beyond its guaranteed part.
func (n *books) add(fr flavorResource, d int64) {
	if d == 0 {
		return
	}
	g := n.guaranteed(fr)
	before := max(0, n.usage[fr]-g)
	n.usage[fr] += d
	n.changes++
	if n.parent != nil && n.counts(fr) {
		n.parent.add(fr, max(0, n.usage[fr]-g)-before)
	}
}

// path returns the node's ancestors, its parent first.
func (n *books) path() []*books {
	var out []*books
	for p := n.parent; p != nil; p = p.parent {
		out = append(out, p)
	}
	return out
}

func (n *books) root() *books {
	for n.parent != nil {
		n = n.parent
	}
	return n
}

// NewBooks returns the books of the given queues, with nothing used, in
// the cohort trees the queues' cohorts and the given Cohort objects make.
func NewBooks(cqs []*strata.ClusterQueue, cohorts ...*strata.Cohort) *Books {
	b := &Books{queues: map[string]*books{}, cohorts: map[string]*books{}}
	cohortOf := func(name string) *books {
		c := b.cohorts[name]
		if c == nil {
			c = newBooks(name, true)
			b.cohorts[name] = c
		}
		return c
	}
	parents := map[*books]string{}
	for _, co := range cohorts {
		c := cohortOf(co.Name)
		c.weight = weightOf(co.Spec.FairSharing)
		for _, g := range co.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, r := range f.Resources {
					c.quota[flavorResource{f.Name, r.Name}] = quota{nominal: r.NominalQuota.MilliValue(), written: r.NominalQuota,
						borrowing: milli(r.BorrowingLimit), lending: milli(r.LendingLimit)}
				}
			}
		}
		if co.Spec.ParentName != "" && co.Spec.ParentName != co.Name {
			parents[c] = co.Spec.ParentName
		}
	}
	for c, p := range parents {
		c.parent = cohortOf(p)
	}
	// A cycle of parents is cut where it is found: its cohorts are
	// marked, and the queues under them admit nothing (Kueue makes them
	// inactive).
	names := make([]string, 0, len(b.cohorts))
	for name := range b.cohorts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		seen := map[*books]bool{}
		for c := b.cohorts[name]; c != nil; c = c.parent {
			if seen[c] {
				for m := c.parent; m != c; m = m.parent {
					m.cycle = true
				}
				c.cycle = true
				c.parent = nil
				break
			}
			seen[c] = true
		}
	}
	for _, name := range names {
		if c := b.cohorts[name]; c.parent != nil {
			c.parent.children = append(c.parent.children, c)
		}
	}
	for _, cq := range cqs {
		q := newBooks(cq.Name, false)
		q.weight = weightOf(cq.Spec.FairSharing)
		q.groups = len(cq.Spec.ResourceGroups) > 0
		for _, g := range cq.Spec.ResourceGroups {
			for _, r := range g.CoveredResources {
				for _, f := range g.Flavors {
					q.covered[r] = append(q.covered[r], f.Name)
				}
			}
		}
		for _, f := range Flavors(cq) {
			for _, r := range f.Resources {
				qt := quota{nominal: r.NominalQuota.MilliValue(), written: r.NominalQuota}
				if cq.Spec.Cohort != "" {
					qt.borrowing = milli(r.BorrowingLimit)
					qt.lending = milli(r.LendingLimit)
				}
				q.quota[flavorResource{f.Name, r.Name}] = qt
			}
		}
		b.queues[cq.Name] = q
		if cq.Spec.Cohort != "" {
			q.parent = cohortOf(cq.Spec.Cohort)
			q.parent.children = append(q.parent.children, q)
		}
	}
	for _, nodes := range []map[string]*books{b.queues, b.cohorts} {
		for _, n := range nodes {
			if n.parent == nil {
				n.sum()
			}
		}
	}
	for _, cq := range cqs {
		q := b.queues[cq.Name]
		q.cycle = slices.ContainsFunc(q.path(), func(c *books) bool { return c.cycle })
		if strata.Stopped(cq.Spec.StopPolicy) || cq.DeletionTimestamp != nil || q.cycle {
			b.Detach(cq.Name)
		}
	}
	return b
}

// sum sets the subtree quotas of the node's subtree, leaves first.
func (n *books) sum() {
	clear(n.subtree)
	n.lendableCache = nil
	for fr, qt := range n.quota {
		n.subtree[fr] = qt.nominal
	}
	for _, c := range n.children {
		c.sum()
		for fr, v := range c.subtree {
			n.subtree[fr] += v - c.guaranteed(fr)
		}
	}
}

// InCycle says whether a queue's cohort is on a cycle of Cohort parents:
// such a queue admits nothing until the cycle is broken.
func (b *Books) InCycle(queue string) bool {
	q := b.queues[queue]
	return q != nil && q.cycle
}

// CohortCycleMessage says why a queue whose cohort is on a cycle of
// Cohort parents admits nothing.
func CohortCycleMessage(cq *strata.ClusterQueue) string {
	return fmt.Sprintf("ClusterQueue %s is inactive: its cohort %s is on a cycle of Cohort parents (spec.parentName)", cq.Name, cq.Spec.Cohort)
}

// Detach takes a queue that cannot admit (Kueue's inactive ClusterQueue:
// stopped, or a flavor it lists is missing) out of its cohort, as Kueue
// leaves such a queue out of its snapshot: its quota is not lent to the
// cohort, what it uses is not counted there, and its workloads are not
// reclaimed by the cohort's queues. Its own books stay, for its status.
func (b *Books) Detach(queue string) {
	q := b.queues[queue]
	if q == nil || q.parent == nil {
		return
	}
	for fr, u := range q.usage {
		q.add(fr, -u)
		q.usage[fr] = u
	}
	p := q.parent
	p.children = slices.DeleteFunc(p.children, func(m *books) bool { return m == q })
	q.parent = nil
	for fr, qt := range q.quota {
		qt.borrowing, qt.lending = nil, nil
		q.quota[fr] = qt
	}
	p.root().rebuild()
}

// rebuild sets the subtree quotas of a tree, and what its cohorts use from
// what its queues use.
func (n *books) rebuild() {
	n.sum()
	n.clearCohortUsage()
	n.recharge()
}

func (n *books) clearCohortUsage() {
	if n.cohort {
		clear(n.usage)
	}
	for _, c := range n.children {
		c.clearCohortUsage()
	}
}

func (n *books) recharge() {
	if !n.cohort {
		for fr, u := range n.usage {
			if n.parent != nil && n.counts(fr) {
				n.parent.add(fr, max(0, u-n.guaranteed(fr)))
			}
		}
	}
	for _, c := range n.children {
		c.recharge()
	}
}

func milli(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := q.MilliValue()
	return &v
}

// Charge adds (sign 1) or takes back (-1) what a workload admitted on a
// flavor through a queue holds.
func (b *Books) Charge(queue, flavor string, requests corev1.ResourceList, sign int64) {
	q := b.queues[queue]
	if q == nil {
		return
	}
	q.charge(flavor, requests, sign)
}

// charge is Charge without marking the tree changed: for a change undone
// before the caller returns.
func (q *books) charge(flavor string, requests corev1.ResourceList, sign int64) {
	for r, v := range requests {
		q.add(flavorResource{flavor, r}, sign*v.MilliValue())
	}
}

// SetFlavorUsage replaces what every queue holds on a flavor with usage
// (by queue; a queue it does not name holds nothing there).
func (b *Books) SetFlavorUsage(flavor string, usage map[string]corev1.ResourceList) {
	for _, nodes := range []map[string]*books{b.queues, b.cohorts} {
		for _, n := range nodes {
			for fr := range n.usage {
				if fr.flavor == flavor {
					delete(n.usage, fr)
				}
			}
		}
	}
	for name := range b.queues {
		b.Charge(name, flavor, usage[name], 1)
	}
}

// ChargeAll charges every queue's usage per flavor.
func (b *Books) ChargeAll(usage map[string]map[string]corev1.ResourceList) {
	for q, byFlavor := range usage {
		for f, rl := range byFlavor {
			b.Charge(q, f, rl, 1)
		}
	}
}

// Fit is the answer of Check.
type Fit struct {
	// Err says why the workload does not fit now; nil when it does.
	Err error
	// Never: no change of usage lets it in (it asks for more than the
	// queue could ever have, or for a resource the queue has no quota of
	// on the flavor).
	Never bool
	// Borrows: it fits, or would, only beyond the queue's nominal quota.
	Borrows bool
}

// Check says whether a workload requesting need in all fits on a flavor of
// a queue. With withinNominal it must fit in the queue's nominal quota
// (Kueue's reclaim: the preemptor does not borrow).
func (b *Books) Check(queue, flavor string, need corev1.ResourceList, withinNominal bool) Fit {
	q := b.queues[queue]
	if q == nil {
		return Fit{Err: fmt.Errorf("quota: ClusterQueue %s is not known", queue), Never: true}
	}
	names := make([]corev1.ResourceName, 0, len(need))
	for r := range need {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	var fit Fit
	for _, r := range names {
		n := need[r]
		if n.IsZero() {
			continue
		}
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			if !q.groups {
				continue // spec.flavors: limited only by capacity
			}
			if r == corev1.ResourcePods {
				// Pods count only on a flavor with a quota of them: a
				// resource group of pods alone has flavors of its own, and
				// a workload is admitted on one flavor here (Kueue would
				// assign that group's flavor besides).
				continue
			}
			if fl, covered := q.covered[r]; covered {
				return Fit{Err: fmt.Errorf("quota: flavor %s has no quota for %s in ClusterQueue %s (its resource group lists flavors %s; a workload is admitted on one flavor)",
					flavor, r, queue, strings.Join(fl, ", ")), Never: true}
			}
			return Fit{Err: fmt.Errorf("quota: %s is not covered by any resource group of ClusterQueue %s", r, queue), Never: true}
		}
		want := n.MilliValue()
		used := q.usage[fr]
		if want > most(q, fr) {
			return Fit{Err: fmt.Errorf("quota: %s needs %s, more than the whole quota of %s%s", r, n.String(), qt.written.String(), cohortNote(q, fr)), Never: true}
		}
		if used+want > qt.nominal {
			fit.Borrows = true
			if withinNominal {
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the nominal quota of %s", r, n.String(), qt.written.String())
				continue
			}
		}
		if want > available(q, fr) && fit.Err == nil {
			if q.parent == nil {
				// No live usage in the message: it would change, and be
				// written again with an event, whenever any workload of the
				// queue is admitted or finishes. The ClusterQueue's status
				// has the usage.
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the quota of %s", r, n.String(), qt.written.String())
			} else {
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the nominal quota of %s and of what cohort %s lends", r, n.String(), qt.written.String(), q.parent.name)
			}
		}
	}
	return fit
}

func cohortNote(q *books, fr flavorResource) string {
	if q.parent == nil {
		return ""
	}
	return fmt.Sprintf(" with all that cohort %s could lend (%s)", q.parent.name, resource.NewMilliQuantity(most(q, fr), resource.DecimalSI).String())
}

// most is the most a node could ever use of a flavor's resource, were
// nothing else used: what it keeps, plus the most its parent could give
// it, within its borrowing limit.
func most(n *books, fr flavorResource) int64 {
	if n.parent == nil {
		return n.subtree[fr]
	}
	m := n.guaranteed(fr) + most(n.parent, fr)
	if bl := n.quota[fr].borrowing; bl != nil {
		m = min(m, n.subtree[fr]+*bl)
	}
	return m
}

// available is what a node may still take of a flavor's resource: what is
// left of the part of its subtree quota it does not lend, plus what its
// parent has left for it, within its borrowing limit. A tree overdrawn
// (quotas lowered under running workloads) has negative room, which eats
// into the parts its nodes keep, as in Kueue: what is left may be
// negative.
func available(n *books, fr flavorResource) int64 {
	if n.parent == nil {
		return n.subtree[fr] - n.usage[fr]
	}
	g := n.guaranteed(fr)
	up := available(n.parent, fr)
	if bl := n.quota[fr].borrowing; bl != nil {
		// What it lends up, less what it takes there, plus the limit.
		up = min(up, n.subtree[fr]-g-max(0, n.usage[fr]-g)+*bl)
	}
	return max(0, g-n.usage[fr]) + up
}

// Borrowing says whether a queue uses more than its nominal quota of any
// of the given resources on a flavor.
func (b *Books) Borrowing(queue, flavor string, resources corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil || q.parent == nil {
		return false
	}
	for r := range resources {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr] > qt.nominal {
			return true
		}
	}
	return false
}

// Short returns the resources of need that a queue has a quota of on a
// flavor and cannot take now, even by borrowing: the resources a
// preemption must free (Kueue's flavor-resources that need preemption).
func (b *Books) Short(queue, flavor string, need corev1.ResourceList) corev1.ResourceList {
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	short := corev1.ResourceList{}
	for r, n := range need {
		fr := flavorResource{flavor, r}
		if _, ok := q.quota[fr]; ok && !n.IsZero() && n.MilliValue() > available(q, fr) {
			short[r] = n
		}
	}
	return short
}

// NominalCovers says whether a queue's nominal quota on a flavor holds
// each of need on its own (whatever is used): only then may a workload
// preempt for it without borrowing within the cohort.
func (b *Books) NominalCovers(queue, flavor string, need corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r, n := range need {
		if qt, ok := q.quota[flavorResource{flavor, r}]; ok && n.MilliValue() > qt.nominal {
			return false
		}
	}
	return true
}

// WithinNominal says whether need fits in what is left of a queue's
// nominal quota on a flavor, whatever the cohort lends or borrows.
func (b *Books) WithinNominal(queue, flavor string, need corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r, n := range need {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr]+n.MilliValue() > qt.nominal {
			return false
		}
	}
	return true
}

// UnreclaimableHold is what a scheduling round holds of a queue's quota on
// a flavor for a head asking need that needs preemption there but finds
// no victims, so that the heads after it in the round do not borrow that
// quota (Kueue's reservation for an unreclaimable preemption): what is
// left of its nominal quota, up to need; when need does not fit in it,
// up to its nominal quota and borrowingLimit (need when unlimited).
// Nothing when the queue takes back with reclaimWithinCohort: Any (it
// always can), or has no cohort.
func (b *Books) UnreclaimableHold(cq *strata.ClusterQueue, flavor string, need corev1.ResourceList) corev1.ResourceList {
	q := b.queues[cq.Name]
	if q == nil || q.parent == nil || cq.Spec.Preemption != nil && cq.Spec.Preemption.ReclaimWithinCohort == strata.PreemptionAny {
		return nil
	}
	borrows := !b.WithinNominal(cq.Name, flavor, need)
	out := corev1.ResourceList{}
	for r, n := range need {
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			continue
		}
		v := n.MilliValue()
		switch {
		case borrows && qt.borrowing == nil:
		case borrows:
			v = min(v, qt.nominal+*qt.borrowing-q.usage[fr])
		default:
			v = min(v, qt.nominal-q.usage[fr])
		}
		if v > 0 {
			out[r] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// UnderNominal says whether a queue uses strictly less than its nominal
// quota of each of the given resources on a flavor.
func (b *Books) UnderNominal(queue, flavor string, resources corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r := range resources {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr] >= qt.nominal {
			return false
		}
	}
	return true
}

// Cohort returns a queue's cohort, "" when it has none or is not known.
func (b *Books) Cohort(queue string) string {
	if q := b.queues[queue]; q != nil && q.parent != nil {
		return q.parent.name
	}
	return ""
}

// Borrowed returns, of each of resources, the part a queue uses beyond
// its nominal quota on a flavor (at most the given amount): what its
// cohort may take back from it.
func (b *Books) Borrowed(queue, flavor string, resources corev1.ResourceList) corev1.ResourceList {
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for r, v := range resources {
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			continue
		}
		if over := min(q.usage[fr]-qt.nominal, v.MilliValue()); over > 0 {
			out[r] = *resource.NewMilliQuantity(over, v.Format)
		}
	}
	return out
}

// Peers returns the other queues of a queue's cohort tree, by name: those
// its workloads may reclaim quota from.
func (b *Books) Peers(queue string) []string {
	q := b.queues[queue]
	if q == nil || q.parent == nil {
		return nil
	}
	var out []string
	var walk func(n *books)
	walk = func(n *books) {
		if !n.cohort && n != q {
			out = append(out, n.name)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(q.root())
	slices.Sort(out)
	return out
}

// Reservation is a queue's quota held per flavor and resource that has a
// quota, in the order of its flavors: the total, the part borrowed, and the part of its
// unused nominal quota that other queues of its cohort use (what they
// borrow in all, shared among the lenders in proportion to what each has
// unused to lend).
func (b *Books) Reservation(cq *strata.ClusterQueue) []strata.FlavorReservation {
	q := b.queues[cq.Name]
	if q == nil {
		return nil
	}
	var out []strata.FlavorReservation
	for _, f := range Flavors(cq) {
		fr := strata.FlavorReservation{Name: f.Name}
		for _, r := range f.Resources {
			k := flavorResource{f.Name, r.Name}
			qt := q.quota[k]
			used := q.usage[k]
			rr := strata.ResourceReservation{Name: r.Name,
				Total:    *resource.NewMilliQuantity(used, r.NominalQuota.Format),
				Borrowed: *resource.NewMilliQuantity(max(0, used-qt.nominal), r.NominalQuota.Format),
				Lent:     *resource.NewMilliQuantity(b.lent(q, k), r.NominalQuota.Format),
			}
			fr.Resources = append(fr.Resources, rr)
		}
		if len(fr.Resources) > 0 {
			out = append(out, fr)
		}
	}
	return out
}

// lent is q's share of what its cohort borrows of a flavor's resource:
// what the cohort's other members (queues and cohorts) use beyond their
// subtree quotas, shared among the members with quota unused in
// proportion to it.
func (b *Books) lent(q *books, fr flavorResource) int64 {
	if q.parent == nil {
		return 0
	}
	unused := func(m *books) int64 {
		return min(m.lendable(fr), max(0, m.subtree[fr]-m.usage[fr]))
	}
	var borrowed, offered int64
	for _, m := range q.parent.children {
		if _, ok := m.subtree[fr]; !ok {
			continue
		}
		borrowed += max(0, m.usage[fr]-m.subtree[fr])
		offered += unused(m)
	}
	if borrowed == 0 || offered == 0 {
		return 0
	}
	own := unused(q)
	if borrowed >= offered {
		return own
	}
	// own*borrowed/offered without overflowing on large memory quotas.
	return int64(float64(own) * float64(borrowed) / float64(offered))
}

// lowestCommon is the lowest cohort two nodes share; nil when they are in
// different trees (or either has no cohort).
func lowestCommon(a, c *books) *books {
	above := map[*books]bool{}
	for _, n := range a.path() {
		above[n] = true
	}
	for _, n := range c.path() {
		if above[n] {
			return n
		}
	}
	return nil
}

// overQuota says whether a node uses more than its subtree quota (a
// queue's: its nominal quota) of any of resources on a flavor.
func (n *books) overQuota(flavor string, resources corev1.ResourceList) bool {
	for r := range resources {
		fr := flavorResource{flavor, r}
		if !n.cohort {
			if _, ok := n.quota[fr]; !ok {
				continue
			}
		}
		if n.usage[fr] > n.subtree[fr] {
			return true
		}
	}
	return false
}

// Reclaimable says whether a workload of pre may take back from the
// workloads of queue, on a flavor, the given resources (those it needs
// preempted): the two queues are in one cohort tree, and queue and each
// cohort on its path below the lowest cohort they share use more than
// their quota of one of them (Kueue's hierarchical reclaim: a subtree
// within its quota lends nothing that can be taken back).
func (b *Books) Reclaimable(pre, queue, flavor string, resources corev1.ResourceList) bool {
	p, q := b.queues[pre], b.queues[queue]
	if p == nil || q == nil || p == q {
		return false
	}
	lca := lowestCommon(p, q)
	if lca == nil {
		return false
	}
	for n := q; n != lca; n = n.parent {
		if !n.overQuota(flavor, resources) {
			return false
		}
	}
	return true
}

// Advantage says whether a workload of pre needing need on a flavor comes
// before the workloads of queue, of the same tree, in a reclaim (Kueue's
// hierarchical advantage): it fits in what is left of its own queue's
// nominal quota, or of the quota of one of its cohorts below the lowest
// one it shares with queue, counting at each level only what the levels
// below do not keep for it.
func (b *Books) Advantage(pre, queue, flavor string, need corev1.ResourceList) bool {
	p, q := b.queues[pre], b.queues[queue]
	if p == nil || q == nil {
		return false
	}
	lca := lowestCommon(p, q)
	if lca == nil {
		return false
	}
	remaining := map[flavorResource]int64{}
	for r, v := range need {
		fr := flavorResource{flavor, r}
		if _, ok := p.quota[fr]; ok {
			remaining[fr] = v.MilliValue()
		}
	}
	fits := func(n *books) bool {
		ok := true
		for fr, v := range remaining {
			if n.usage[fr]+v > n.subtree[fr] {
				ok = false
			}
			remaining[fr] = max(0, v-max(0, n.guaranteed(fr)-n.usage[fr]))
		}
		return ok
	}
	if fits(p) {
		return true
	}
	for n := p.parent; n != lca; n = n.parent {
		if fits(n) {
			return true
		}
	}
	return false
}

// Peer says whether two queues are in one cohort tree.
func (b *Books) Peer(a, c string) bool {
	p, q := b.queues[a], b.queues[c]
	return p != nil && q != nil && lowestCommon(p, q) != nil
}

// ReclaimMayHelp says, of each of resources on a flavor, whether a
// workload of queue asking for need could be let in by a reclaim without
// borrowing beyond its tree's means: need fits in the queue's nominal
// quota, or in the quota of one of its cohorts below the root with what
// is used there (Kueue's condition for preempting when a queue may not
// preempt while borrowing). In flat cohorts it is the nominal quota alone.
func (b *Books) ReclaimMayHelp(queue, flavor string, need, resources corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r := range resources {
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			continue
		}
		v := need[r]
		want := v.MilliValue()
		if want <= qt.nominal || q.fitsBelowRoot(fr, want) {
			continue
		}
		return false
	}
	return true
}

// fitsBelowRoot says whether want fits in the node or in one of its
// cohorts below the root, each counting what the levels below keep.
func (n *books) fitsBelowRoot(fr flavorResource, want int64) bool {
	for ; n != nil; n = n.parent {
		if n.usage[fr]+want <= n.subtree[fr] {
			return n.parent != nil
		}
		want -= max(0, n.guaranteed(fr)-n.usage[fr])
	}
	return false
}

// AnyInCohort says whether a ClusterQueue of cqs names a cohort: without
// one, no Cohort object changes any queue's quota.
func AnyInCohort(cqs []*strata.ClusterQueue) bool {
	return slices.ContainsFunc(cqs, func(cq *strata.ClusterQueue) bool { return cq != nil && cq.Spec.Cohort != "" })
}

// UnitQuota is what queue's quota says, for workload.PlaceByUnit's walk
// over flavors (by index), of the pod sets placed on one of them.
func (b *Books) UnitQuota(queue string, flavors []string) func(flavor int, placed *strata.Workload) workload.QuotaAnswer {
	return func(f int, placed *strata.Workload) workload.QuotaAnswer {
		need := WorkloadRequests(placed)
		fit := b.Check(queue, flavors[f], need, false)
		if fit.Err != nil {
			return workload.QuotaAnswer{}
		}
		return workload.QuotaAnswer{Fits: true, Borrows: fit.Borrows, Height: b.BorrowHeight(queue, flavors[f], need)}
	}
}
