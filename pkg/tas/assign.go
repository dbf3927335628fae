package tas

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// plan is the state of one FindAssignment call.
type plan struct {
	s   *Snapshot
	req Request
	alg configv1beta1.Algorithm
	dem demand
	// units[k] is the group size pods are placed in at domain level k: the
	// size of the coarsest slice layer at level k or below, else 1.
	units []int64
	// filter: node selector, affinity and taints apply to bins; selects:
	// the selector and affinity (what of them the snapshot can check).
	filter, selects bool
	affinity        nodeaffinity.RequiredNodeAffinity
	excluded        int64
	// target is the index of the required/preferred level, -1 if none.
	target int
	layers []layerIndex
	// avoidLeaf are the leaves under domains the request avoids (nil when
	// none); avoided counts the nodes they hold.
	avoidLeaf map[int32]bool
	avoided   int64
	// leastFirst: LeastFreeCapacity from the least free domain up, without
	// first looking for one domain that holds all (an unconstrained
	// request, once its single host or top-level domain is chosen).
	leastFirst bool
	// tail is the size of the partial slice (Kueue's TASPartialSlices):
	// with a single slice layer whose size does not divide the pod count,
	// the last Count % size pods form one shorter slice, held like the
	// whole ones by one domain of the slice level (sliceLvl). 0 when every
	// slice is whole.
	tail     int64
	sliceLvl int
	// tailCap[id], for domains at or above the slice level and the root:
	// the whole slices the domain holds while it also holds the partial
	// one, or -1 when it cannot hold the partial one.
	tailCap []int64
	// keepCounts: the frontier descend starts from holds the answer's
	// counts per domain (balanced placement, a hub's hint), each split
	// among its own children; else BestFit fills the children of all the
	// chosen domains together.
	keepCounts bool
}

// FindAssignment places req in the snapshot without changing it. It returns
// a *FitError when the pods do not fit, and a plain error when the request
// is invalid for this topology. On a summary snapshot the assignment is
// given at the summary's leaf level.
func (s *Snapshot) FindAssignment(req Request, opts Options) (*Assignment, error) {
	a, err := s.findAssignment(req, opts)
	if err != nil || !s.summary {
		return a, err
	}
	return s.project(a, req), nil
}

func (s *Snapshot) findAssignment(req Request, opts Options) (*Assignment, error) {
	if strict, ok := withoutPreferredAvoid(req); ok {
		// Preferred: out of those domains if the pods fit elsewhere.
		a, err := s.findAssignment1(req, opts)
		var fit *FitError
		if err == nil || !errors.As(err, &fit) {
			return a, err
		}
		req = strict
	}
	return s.findAssignment1(req, opts)
}

// withoutPreferredAvoid returns req without its preferred Avoid entries,
// and whether it had any.
func withoutPreferredAvoid(req Request) (Request, bool) {
	if !slices.ContainsFunc(req.Avoid, func(a Avoid) bool { return a.Preferred }) {
		return req, false
	}
	req.Avoid = slices.DeleteFunc(slices.Clone(req.Avoid), func(a Avoid) bool { return a.Preferred })
	return req, true
}

func (s *Snapshot) findAssignment1(req Request, opts Options) (*Assignment, error) {
	if req.Count == 0 {
		return (&plan{s: s}).result(nil), nil
	}
	p, err := s.newPlan(req, opts)
	if err != nil {
		return nil, err
	}
	target := p.target
	count := int64(req.Count)
	p.computeCaps()

	switch req.Mode {
	case Required:
		leaves, err := p.oneDomain(target, req.Level, count)
		return p.result(leaves), err
	case Preferred:
		if opts.BalancedPlacement {
			s.ensureOrder()
			if leaves, ok := p.balanced(count); ok {
				return p.result(leaves), nil
			}
			p.computeCaps() // balanced may have assigned before giving up
		}
		for lvl := target; lvl >= 0; lvl-- {
			if p.fitsOne(lvl, count) {
				leaves, err := p.oneDomain(lvl, s.levels[lvl], count)
				return p.result(leaves), err
			}
		}
		return p.spill(target, count)
	default:
		// Unconstrained, also with slice layers alone (Kueue: an
		// unconstrained request with slices of the given size).
		return p.unconstrained(count)
	}
}

// newPlan checks a request against the topology and prepares its state,
// with units set for its slice layers.
func (s *Snapshot) newPlan(req Request, opts Options) (*plan, error) {
	if req.Count < 0 {
		return nil, fmt.Errorf("pod count %d is negative", req.Count)
	}
	p := &plan{s: s, req: req, alg: opts.algorithm(req.Mode), dem: s.res.newDemand(req.PodRequests), target: -1}
	if req.Mode != Unconstrained {
		var err error
		if p.target, err = s.levelIndex(req.Level); err != nil {
			return nil, err
		}
	}
	var err error
	if p.layers, err = s.layerIndexes(req, p.target); err != nil {
		return nil, err
	}
	if len(p.layers) == 1 {
		p.tail, p.sliceLvl = int64(req.Count)%p.layers[0].size, p.layers[0].level
	}
	// A summary's nodes have the labels it lists (see checkable).
	selector, affinity, _ := s.checkable(req)
	p.selects = s.hostIsLowest && (len(selector) > 0 || affinity != nil)
	p.filter = p.selects || s.taintsCount()
	if p.selects {
		p.affinity = requiredAffinity(selector, affinity)
	}
	p.setUnits(p.layers)
	p.avoidLeaf = s.avoidLeaves(req.Avoid)
	return p, nil
}

// avoidLeaves returns the leaves under the domains avoid names, nil when
// it names none the snapshot has.
func (s *Snapshot) avoidLeaves(avoid []Avoid) map[int32]bool {
	var out map[int32]bool
	for _, a := range avoid {
		lvl, err := s.levelIndex(a.Level)
		if err != nil || lvl >= s.depth || len(a.Values) != lvl+1 {
			continue
		}
		d := s.domains[domainKey(a.Values)]
		if d == nil {
			continue
		}
		if out == nil {
			out = map[int32]bool{}
		}
		var walk func(d *domain)
		walk = func(d *domain) {
			if len(d.children) == 0 {
				out[d.id] = true
				return
			}
			for _, c := range d.children {
				walk(c)
			}
		}
		walk(d)
	}
	return out
}

type layerIndex struct {
	level int
	size  int64
}

func (s *Snapshot) levelIndex(label string) (int, error) {
	for i, l := range s.levels {
		if l == label {
			return i, nil
		}
	}
	return -1, fmt.Errorf("level %q is not a level of the topology %v", label, s.levels)
}

// layerIndexes resolves and checks the slice layers of req.
func (s *Snapshot) layerIndexes(req Request, target int) ([]layerIndex, error) {
	out := make([]layerIndex, 0, len(req.Layers))
	for i, l := range req.Layers {
		idx, err := s.levelIndex(l.Level)
		if err != nil {
			return nil, fmt.Errorf("slice layer %d: %w", i, err)
		}
		if l.Size < 1 || len(req.Layers) > 1 && req.Count%l.Size != 0 {
			// One layer may end with a partial slice (Kueue's
			// TASPartialSlices); several must divide the count.
			return nil, fmt.Errorf("slice layer %d: size %d does not divide the pod count %d, as it must with more than one layer", i, l.Size, req.Count)
		}
		if idx < target {
			return nil, fmt.Errorf("slice layer %d: level %q is above the %s level %q", i, l.Level, req.Mode, req.Level)
		}
		if i > 0 {
			prev := out[i-1]
			if idx <= prev.level {
				return nil, fmt.Errorf("slice layer %d: level %q must be below the level of layer %d", i, l.Level, i-1)
			}
			if prev.size%int64(l.Size) != 0 {
				return nil, fmt.Errorf("slice layer %d: size %d does not divide the size %d of layer %d", i, l.Size, prev.size, i-1)
			}
		}
		out = append(out, layerIndex{level: idx, size: int64(l.Size)})
	}
	return out, nil
}

func (p *plan) setUnits(layers []layerIndex) {
	p.units = make([]int64, p.s.depth)
	for k := range p.units {
		p.units[k] = 1
		for _, l := range layers {
			if l.level >= k {
				p.units[k] = l.size
				break
			}
		}
	}
}

// computeCaps fills podCap and unitCap of every domain and clears assigned:
// one pass over the dense bin rows, then one over the domains per level.
func (p *plan) computeCaps() {
	s := p.s
	p.excluded, p.avoided = 0, 0
	clear(s.assigned)
	podCap, unitCap := s.podCap, s.unitCap
	if p.filter || p.avoidLeaf != nil {
		clear(podCap)
		clear(unitCap)
		stride := s.stride
		for slot, leaf := range s.binLeaf {
			if leaf < 0 || !s.binUsable[slot] {
				continue
			}
			if p.avoidLeaf[leaf] {
				p.avoided += s.binCount[slot]
				continue
			}
			if p.filter && !p.admits(s.binByID[slot]) {
				p.excluded += s.binCount[slot]
				continue
			}
			f := p.dem.fit(s.binFree[slot*stride : (slot+1)*stride])
			if f == 0 {
				continue
			}
			c := s.binCount[slot]
			podCap[leaf] += f * c
			unitCap[leaf] += f * c // pods, made groups below
		}
	} else {
		// Without a filter every domain's capacity depends on the demand
		// alone: kept per demand, brought up to date from the bins that
		// changed since. Without slice layers it is the answer.
		caps := s.domainCaps(p.dem)
		if !p.layered() {
			copy(podCap, caps)
			copy(unitCap, caps)
			return
		}
		clear(podCap)
		clear(unitCap)
		if s.depth > 0 {
			for _, id := range s.levelIDs[s.depth-1] {
				podCap[id], unitCap[id] = caps[id], caps[id] // pods, made groups below
			}
		}
	}
	if s.depth == 0 {
		return
	}
	defer p.computeTailCaps()
	last := s.depth - 1
	for _, id := range s.levelIDs[last] {
		unitCap[id] /= p.units[last]
	}
	for lvl := last; lvl >= 0; lvl-- {
		for _, id := range s.levelIDs[lvl] {
			parent := s.parentID[id]
			podCap[parent] += podCap[id]
			unitCap[parent] += unitCap[id]
		}
		// Parents summed groups of their children's unit; convert to theirs.
		if lvl > 0 && p.units[lvl] != p.units[lvl-1] {
			for _, id := range s.levelIDs[lvl-1] {
				unitCap[id] = unitCap[id] * p.units[lvl] / p.units[lvl-1]
			}
		}
	}
}

// layered says whether pods are placed in groups (slice layers) at some
// level.
func (p *plan) layered() bool {
	for _, u := range p.units {
		if u != 1 {
			return true
		}
	}
	return false
}

// admits applies the node selector, required affinity and taints.
func (p *plan) admits(b *bin) bool {
	if p.selects {
		if ok, _ := p.affinity.Match(b.node); !ok {
			return false
		}
	}
	return tolerates(b, p.req.Tolerations)
}

// tolerates says whether pods with the given tolerations may use node b:
// every NoSchedule and NoExecute taint of it is tolerated.
func tolerates(b *bin, tolerations []corev1.Toleration) bool {
	if len(b.taints) == 0 {
		return true
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Logger{}, b.taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

func (s *Snapshot) anyTaints() bool { return s.tainted > 0 }

// taintsCount says whether nodes' taints keep pods off them in placements:
// with the host as the lowest level (as on an agent), when any node has
// taints.
func (s *Snapshot) taintsCount() bool { return s.hostIsLowest && s.anyTaints() }

func requiredAffinity(selector map[string]string, required *corev1.NodeSelector) nodeaffinity.RequiredNodeAffinity {
	var affinity *corev1.Affinity
	if required != nil {
		affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}}
	}
	return nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: selector, Affinity: affinity}})
}

// computeTailCaps fills tailCap for a request with a partial slice: at the
// slice level what is left for whole slices once the partial one is in,
// above it the domain's whole slices less the fewest any one child gives up
// for holding the partial slice (the child that holds it).
func (p *plan) computeTailCaps() {
	if p.tail == 0 {
		return
	}
	s := p.s
	if cap(p.tailCap) < len(s.unitCap) {
		p.tailCap = make([]int64, len(s.unitCap))
	}
	p.tailCap = p.tailCap[:len(s.unitCap)]
	tc := p.tailCap
	size := p.units[p.sliceLvl]
	for _, d := range s.byLevel[p.sliceLvl] {
		tc[d.id] = -1
		if pc := s.podCap[d.id]; pc >= p.tail {
			tc[d.id] = (pc - p.tail) / size
		}
	}
	up := func(d *domain, children []*domain) {
		least := int64(-1)
		for _, c := range children {
			if tc[c.id] >= 0 && (least < 0 || s.unitCap[c.id]-tc[c.id] < least) {
				least = s.unitCap[c.id] - tc[c.id]
			}
		}
		tc[d.id] = -1
		if least >= 0 {
			tc[d.id] = s.unitCap[d.id] - least
		}
	}
	for lvl := p.sliceLvl - 1; lvl >= 0; lvl-- {
		for _, d := range s.byLevel[lvl] {
			up(d, d.children)
		}
	}
	up(s.root, s.byLevel[0])
}

// room says how a domain of level lvl (-1: the root) holding pods is
// checked: caps[id] >= need, in groups of the level's unit. At or above
// the slice level of a request with a partial slice, pods % unit is that
// slice and caps is tailCap (tail true). caps is nil when pods cannot be
// cut into whole groups and the partial slice.
func (p *plan) room(lvl int, pods int64) (caps []int64, need int64, tail bool) {
	u := int64(1)
	if len(p.units) > 0 {
		u = p.units[max(lvl, 0)]
	}
	t := pods % u
	if t == 0 {
		return p.s.unitCap, pods / u, false
	}
	if t == p.tail {
		return p.tailCap, pods / u, true
	}
	return nil, 0, false
}

// holds says whether domain d (of any level, or the root) has room for
// pods (see room).
func (p *plan) holds(d *domain, pods int64) bool {
	caps, need, _ := p.room(d.level, pods)
	return caps != nil && caps[d.id] >= need
}

func (p *plan) fitsOne(lvl int, count int64) bool {
	caps, need, _ := p.room(lvl, count)
	if caps == nil {
		return false
	}
	for _, id := range p.s.levelIDs[lvl] {
		if caps[id] >= need {
			return true
		}
	}
	return false
}

// oneDomain puts all pods in the tightest domain of level lvl that holds
// them and distributes them below it. label names the level in errors.
func (p *plan) oneDomain(lvl int, label string, count int64) ([]*domain, error) {
	s := p.s
	best := p.tightest(s.byLevel[lvl], count)
	if best == nil {
		var biggest *domain
		for _, d := range s.byLevel[lvl] {
			u, pc := s.unitCap[d.id], s.podCap[d.id]
			if biggest == nil || u > s.unitCap[biggest.id] || u == s.unitCap[biggest.id] && pc > s.podCap[biggest.id] {
				biggest = d
			}
		}
		return nil, p.noDomainError(lvl, label, biggest, count)
	}
	s.assigned[best.id] = count
	return p.descend([]*domain{best}), nil
}

// tightest returns the tightest of ds (domains of one level) that holds
// pods (see tighter), or nil when none does.
func (p *plan) tightest(ds []*domain, pods int64) *domain {
	if len(ds) == 0 {
		return nil
	}
	caps, need, tail := p.room(ds[0].level, pods)
	if caps == nil {
		return nil
	}
	var best *domain
	for _, d := range ds {
		if caps[d.id] >= need && (best == nil || p.tighter2(d, best, tail)) {
			best = d
		}
	}
	return best
}

// tighter orders fitting domains: fewest groups, then fewest pods, then by name.
func (p *plan) tighter(a, b *domain) bool { return p.tighter2(a, b, false) }

// tighter2 is tighter, first by the whole slices left beside the partial
// one when tail says the domain is to hold it.
func (p *plan) tighter2(a, b *domain, tail bool) bool {
	s := p.s
	if tail && p.tailCap[a.id] != p.tailCap[b.id] {
		return p.tailCap[a.id] < p.tailCap[b.id]
	}
	if s.unitCap[a.id] != s.unitCap[b.id] {
		return s.unitCap[a.id] < s.unitCap[b.id]
	}
	if s.podCap[a.id] != s.podCap[b.id] {
		return s.podCap[a.id] < s.podCap[b.id]
	}
	s.ensureOrder()
	return s.order[a.id] < s.order[b.id]
}

// unconstrained places a request without a required or preferred level.
//
// With LeastFreeCapacity (the default for it), as KEP-2724 defines the
// algorithm, "as many domains as needed starting from the one with the
// least free capacity", so that small holes fill first and large free hosts
// stay for topology-sensitive work:
//   - without slices: the tightest lowest-level domain (host) that holds all
//     pods, else the lowest-level domains of the whole flavor from the least
//     free up, whatever racks and blocks they are in;
//   - with slice layers alone: the tightest top-level domain that holds all
//     slices (counted in slices), inside it the domains of the coarsest
//     slice level from the fewest free slices up, and inside each of those
//     the domains below from the least free up; when no top-level domain
//     holds them, the slice-level domains of the whole flavor the same way.
//
// With BestFit, the tightest domain of the lowest level where one domain
// holds them all, climbing the levels, and when none does the leaves of
// the flavor, the largest first.
func (p *plan) unconstrained(count int64) (*Assignment, error) {
	s := p.s
	if s.depth == 0 || !p.holds(s.root, count) {
		return nil, p.flavorError(count)
	}
	if p.alg == configv1beta1.LeastFreeCapacity {
		// The first choice: one lowest-level domain, or with slices one
		// top-level domain; below it (or without it), least free first.
		first, lvl := 0, s.depth-1
		if len(p.layers) == 0 {
			first = lvl
		} else {
			lvl = min(lvl, p.layers[0].level) // a summarized host level: its leaf above
		}
		if len(p.layers) == 0 && !p.filter && p.avoidLeaf == nil && leafBucketsOn {
			if b := s.leafBuckets(p.dem); b != nil {
				return p.leastFreeLeaves(b, count)
			}
		}
		d := p.tightest(s.byLevel[first], count)
		p.leastFirst = true
		if d == nil {
			if first == lvl {
				return p.fillLevel(lvl, count)
			}
			return p.leastFirstDown(s.root.children, count, lvl) // in name order: ties by name
		}
		s.assigned[d.id] = count
		if first == lvl {
			return p.result(p.descend([]*domain{d})), nil
		}
		return p.leastFirstDown(d.children, count, lvl)
	}
	for lvl := s.depth - 1; lvl >= 0; lvl-- {
		if d := p.tightest(s.byLevel[lvl], count); d != nil {
			s.assigned[d.id] = count
			return p.result(p.descend([]*domain{d})), nil
		}
	}
	lvl := s.depth - 1
	if len(p.layers) > 0 {
		lvl = min(lvl, p.layers[0].level) // a summarized host level: its leaf above
	}
	return p.fillLevel(lvl, count)
}

// leastFirstDown places count pods over cands (domains of one level, in
// name order) from the least free up, then over the children of the
// chosen ones together, level by level down to lvl, as Kueue's engine
// walks the levels above the slice level; below lvl each domain's among
// its own children.
func (p *plan) leastFirstDown(cands []*domain, count int64, lvl int) (*Assignment, error) {
	for {
		l := cands[0].level
		if !p.pick(cands, count, p.units[l]) {
			return nil, p.flavorError(count)
		}
		chosen := p.withPods(cands)
		if l >= lvl {
			return p.result(p.descend(chosen)), nil
		}
		cands = cands[:0:0]
		for _, d := range chosen {
			cands = append(cands, d.children...)
		}
	}
}

// leafBucketsOn: unconstrained LeastFreeCapacity reads the leaves grouped
// by capacity; off, it orders them (tests compare the two).
var leafBucketsOn = true

// leastFreeLeaves is unconstrained's LeastFreeCapacity without slices or
// a filter, read from the leaves grouped by capacity (b): the tightest
// leaf that holds all pods, else the leaves from the least free up, ties
// in name order — what tightest and fillLevel give, without ordering
// every leaf of the flavor.
func (p *plan) leastFreeLeaves(b *capBuckets, count int64) (*Assignment, error) {
	s := p.s
	p.leastFirst = true
	i, _ := slices.BinarySearch(b.values, count)
	for ; i < len(b.values); i++ {
		if b.counts[i] > 0 {
			d := s.leafOrder[b.first(i)]
			s.assigned[d.id] = count
			return p.result([]*domain{d}), nil
		}
	}
	ranks := s.ranks[:0]
	n := count
	for i := 0; i < len(b.values) && n > 0; i++ {
		if b.counts[i] == 0 {
			continue
		}
		v := b.values[i]
		for w, word := range b.sets[i] {
			for ; word != 0 && n > 0; word &= word - 1 {
				r := w*64 + bits.TrailingZeros64(word)
				take := min(v, n)
				s.assigned[s.leafOrder[r].id] = take
				n -= take
				ranks = append(ranks, r)
			}
			if n == 0 {
				break
			}
		}
	}
	s.ranks = ranks
	if n > 0 {
		// unconstrained checked the flavor's room first.
		panic(fmt.Sprintf("tas: the flavor holds %d pods but its leaves do not", count))
	}
	slices.Sort(ranks)
	leaves := make([]*domain, len(ranks))
	for j, r := range ranks {
		leaves[j] = s.leafOrder[r]
	}
	return p.result(leaves), nil
}

// fillLevel distributes the pods over the domains of level lvl across the
// whole flavor with pick, then below them; the domains above lvl are
// whatever the chosen ones belong to. With BestFit that is the fewest
// domains of lvl (the largest first, the last the tightest that holds the
// rest), then the fewest below each.
func (p *plan) fillLevel(lvl int, count int64) (*Assignment, error) {
	leaves, err := p.fillLevelLeaves(lvl, count)
	if err != nil {
		return nil, err
	}
	return p.result(leaves), nil
}

func (p *plan) fillLevelLeaves(lvl int, count int64) ([]*domain, error) {
	if lvl < 0 {
		return nil, p.flavorError(count)
	}
	cands := p.inOrder(lvl)
	if !p.pick(cands, count, p.units[lvl]) {
		return nil, p.flavorError(count)
	}
	return p.descend(p.withPods(cands)), nil
}

// spill places a preferred request that no domain of any level holds: as
// few domains of the preferred level (lvl) as the algorithm gives, taken
// across the whole flavor. With BestFit, Kueue's placement as well (the
// top-level domains, the largest first, then level by level below them
// together), and Kueue's unless the first has fewer domains of lvl, or as
// many and fewer of the levels from the top down: never less compact than
// Kueue's, and Kueue's where they are as compact.
func (p *plan) spill(lvl int, count int64) (*Assignment, error) {
	s := p.s
	first, err := p.fillLevelLeaves(lvl, count)
	if err != nil {
		return nil, err
	}
	if lvl == 0 || p.alg != configv1beta1.BestFit || p.tail != 0 {
		return p.result(first), nil
	}
	counts := make([]int64, len(first))
	for i, l := range first {
		counts[i] = s.assigned[l.id]
	}
	p.computeCaps()
	if second, err := p.fillLevelLeaves(0, count); err == nil && !s.moreCompact(first, second, lvl) {
		return p.result(second), nil
	}
	p.computeCaps()
	for i, l := range first {
		s.assigned[l.id] = counts[i]
	}
	return p.result(first), nil
}

// moreCompact says whether the placement on leaves a uses fewer domains
// than the one on leaves b: of level lvl first, then of each level from
// the top down.
func (s *Snapshot) moreCompact(a, b []*domain, lvl int) bool {
	ka, kb := s.domainsPerLevel(a), s.domainsPerLevel(b)
	if ka[lvl] != kb[lvl] {
		return ka[lvl] < kb[lvl]
	}
	return slices.Compare(ka, kb) < 0
}

// domainsPerLevel counts, per level, the domains the leaves are in.
func (s *Snapshot) domainsPerLevel(leaves []*domain) []int {
	n := make([]int, s.depth)
	seen := map[*domain]bool{}
	for _, l := range leaves {
		for d := l; d != nil && d != s.root && !seen[d]; d = d.parent {
			seen[d] = true
			n[d.level]++
		}
	}
	return n
}

// withPods returns the domains of ds that were assigned pods, in order.
func (p *plan) withPods(ds []*domain) []*domain {
	var chosen []*domain
	for _, d := range ds {
		if p.s.assigned[d.id] > 0 {
			chosen = append(chosen, d)
		}
	}
	return chosen
}

// inOrder returns the domains of level lvl in name order.
func (p *plan) inOrder(lvl int) []*domain {
	s := p.s
	if lvl == s.depth-1 {
		return s.orderedLeaves()
	}
	return p.inOrderUnder(s.root, lvl)
}

// inOrderUnder returns the domains of level lvl under d in name order.
func (p *plan) inOrderUnder(d *domain, lvl int) []*domain {
	var out []*domain
	var walk func(d *domain)
	walk = func(d *domain) {
		if d.level == lvl {
			out = append(out, d)
			return
		}
		for _, c := range d.children {
			walk(c)
		}
	}
	walk(d)
	return out
}

// collectLeaves appends the leaves under d in name order.
func (p *plan) collectLeaves(d *domain, out []*domain) []*domain {
	if len(d.children) == 0 {
		if d != p.s.root {
			out = append(out, d)
		}
		return out
	}
	for _, c := range d.children {
		out = p.collectLeaves(c, out)
	}
	return out
}

// descend distributes each selected domain's pods among its children, level
// by level, and returns the leaves with pods in rank order.
func (p *plan) descend(frontier []*domain) []*domain {
	s := p.s
	for len(frontier) > 0 && frontier[0].level < s.depth-1 {
		var next []*domain
		if len(frontier) > 1 && p.together(frontier[0].level) {
			var cands []*domain
			var pods int64
			for _, d := range frontier {
				cands = append(cands, d.children...)
				pods += s.assigned[d.id]
			}
			if !p.pick(cands, pods, p.units[frontier[0].level+1]) {
				panic(fmt.Sprintf("tas: %d domains hold %d pods but their children do not", len(frontier), pods))
			}
			for _, c := range cands {
				if s.assigned[c.id] > 0 {
					next = append(next, c)
				}
			}
			frontier = next
			continue
		}
		for _, d := range frontier {
			u := p.units[d.level+1]
			if !p.pick(d.children, s.assigned[d.id], u) {
				panic(fmt.Sprintf("tas: domain %v holds %d pods but its children do not", d.values, s.assigned[d.id]))
			}
			for _, c := range d.children {
				if s.assigned[c.id] > 0 {
					next = append(next, c)
				}
			}
		}
		frontier = next
	}
	return frontier
}

// together says whether descend fills the children of the domains of level
// lvl it holds together rather than each domain's among its own: with
// BestFit, as Kueue's engine does, down to the outermost slice level (to
// the leaves without slices); not where counts are fixed per domain
// (keepCounts), for an unconstrained request, or with a partial slice.
func (p *plan) together(lvl int) bool {
	if p.alg != configv1beta1.BestFit || p.keepCounts || p.req.Mode == Unconstrained || p.tail != 0 {
		return false
	}
	return len(p.layers) == 0 || lvl < p.layers[0].level
}

// pick assigns pods, in groups of u, among cands (in name order, all of
// one level) with the plan's algorithm; pods % u is a partial slice (see
// pickTail). The algorithm: LeastFreeCapacity puts them all in the tightest domain
// that holds them (KEP-2724: "a tight fit among all domains that could
// fit") and, when none does or for an unconstrained request's pods below
// its first choice (leastFirst), fills the smallest domains first; BestFit
// fills the largest first but takes the tightest domain that holds what is
// left as the last one (so a single domain when one holds all). Ties keep
// name order.
func (p *plan) pick(cands []*domain, pods, u int64) bool {
	if pods%u != 0 {
		return p.pickTail(cands, pods, u)
	}
	n := pods / u
	if n == 0 {
		return true
	}
	s := p.s
	lfc := p.alg == configv1beta1.LeastFreeCapacity
	if lfc && !p.leastFirst {
		if d := p.tightest(cands, pods); d != nil {
			s.assigned[d.id] += n * u
			return true
		}
	}
	ordered := p.order(cands, !lfc, u != 1)
	if lfc {
		for _, d := range ordered {
			if n == 0 {
				break
			}
			take := min(s.unitCap[d.id], n)
			s.assigned[d.id] += take * u
			n -= take
		}
		return n == 0
	}
	for i, d := range ordered {
		c := s.unitCap[d.id]
		if c == 0 {
			break
		}
		if c >= n {
			best := d
			for _, e := range ordered[i+1:] {
				ec := s.unitCap[e.id]
				if ec < n {
					break
				}
				if ec < s.unitCap[best.id] || ec == s.unitCap[best.id] && s.podCap[e.id] < s.podCap[best.id] {
					best = e
				}
			}
			s.assigned[best.id] += n * u
			return true
		}
		s.assigned[d.id] += c * u
		n -= c
	}
	return false
}

// pickTail is pick for whole slices of u pods and one partial slice
// (pods % u). One domain holds them all when one can (the tightest, for
// both algorithms). Else the whole slices are picked as usual and the
// partial one goes, as Kueue places it, to a domain already given whole
// slices that has room for it beside them, else to the tightest unused
// domain that holds it. When neither has room (the whole slices took it),
// the partial slice goes first to the domain where it costs the fewest
// whole slices, and the whole slices are picked around it: the parent's
// tailCap says that always fits.
func (p *plan) pickTail(cands []*domain, pods, u int64) bool {
	s := p.s
	n, tail := pods/u, pods%u
	if d := p.tightest(cands, pods); d != nil {
		s.assigned[d.id] += pods
		return true
	}
	if p.pick(cands, n*u, u) {
		var unused *domain
		for _, d := range cands {
			switch a := s.assigned[d.id]; {
			case a > 0 && p.tailCap[d.id] >= a/u:
				s.assigned[d.id] += tail
				return true
			case a == 0 && p.tailCap[d.id] >= 0 && (unused == nil || p.tighter2(d, unused, true)):
				unused = d
			}
		}
		if unused != nil {
			s.assigned[unused.id] = tail
			return true
		}
	}
	for _, d := range cands {
		s.assigned[d.id] = 0
	}
	var home *domain
	for _, d := range cands {
		if p.tailCap[d.id] >= 0 && (home == nil || s.unitCap[d.id]-p.tailCap[d.id] < s.unitCap[home.id]-p.tailCap[home.id]) {
			home = d
		}
	}
	if home == nil {
		return false
	}
	whole := s.unitCap[home.id]
	s.unitCap[home.id] = p.tailCap[home.id]
	ok := p.pick(cands, n*u, u)
	s.unitCap[home.id] = whole
	s.assigned[home.id] += tail
	return ok
}

// order sorts the cands that hold a group (unitCap > 0; pick takes
// nothing from the others) by unitCap (descending if desc), then podCap
// ascending, stable, into a reused buffer. Large lists use a counting
// sort; without groups (grouped false: unitCap is podCap) the counting
// sort is the whole order.
func (p *plan) order(cands []*domain, desc, grouped bool) []*domain {
	s := p.s
	out := p.s.scratch[:0]
	for _, d := range cands {
		if s.unitCap[d.id] > 0 {
			out = append(out, d)
		}
	}
	p.s.scratch = out
	cands = out
	if len(cands) > 256 {
		// The counting sort below reads cands while it writes out.
		s.scratch2 = append(s.scratch2[:0], cands...)
		cands = s.scratch2
	}
	cmpDomains := func(a, b *domain) int {
		c := cmp.Compare(s.unitCap[a.id], s.unitCap[b.id])
		if desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(s.podCap[a.id], s.podCap[b.id]))
	}
	if len(cands) <= 256 {
		slices.SortStableFunc(out, cmpDomains)
		return out
	}
	maxCap := int64(0)
	for _, d := range cands {
		maxCap = max(maxCap, s.unitCap[d.id])
	}
	if maxCap > int64(4*len(cands)) {
		slices.SortStableFunc(out, cmpDomains)
		return out
	}
	// Counting sort by unitCap, then a stable podCap sort of each run of
	// equal unitCap that is not already ordered.
	counts := make([]int, maxCap+1)
	for _, d := range cands {
		counts[s.unitCap[d.id]]++
	}
	start := make([]int, maxCap+1)
	next := 0
	for i := range maxCap + 1 {
		c := i
		if desc {
			c = maxCap - i
		}
		start[c] = next
		next += counts[c]
	}
	for _, d := range cands {
		c := s.unitCap[d.id]
		out[start[c]] = d
		start[c]++
	}
	if !grouped {
		return out
	}
	for lo := 0; lo < len(out); {
		hi := lo + 1
		for hi < len(out) && s.unitCap[out[hi].id] == s.unitCap[out[lo].id] {
			hi++
		}
		run := out[lo:hi]
		if !slices.IsSortedFunc(run, cmpDomains) {
			slices.SortStableFunc(run, cmpDomains)
		}
		lo = hi
	}
	return out
}

func (p *plan) result(leaves []*domain) *Assignment {
	s := p.s
	p.tailLast(leaves)
	a := &Assignment{Levels: s.levels[:s.depth]}
	if s.hostIsLowest {
		a.Levels = s.levels[s.depth-1:]
	}
	a.Domains = make([]DomainAssignment, 0, len(leaves))
	for _, l := range leaves {
		values := l.values
		if s.hostIsLowest {
			values = values[len(values)-1:]
		}
		a.Domains = append(a.Domains, DomainAssignment{Values: values, Count: int32(s.assigned[l.id])})
	}
	return a
}

// tailLast puts the leaves of the domain holding the partial slice last in
// rank order, level by level down to the slice level, so that every slice
// is a run of consecutive ranks and only the last slice-level domain of the
// assignment holds a partial one (as Kueue orders it).
func (p *plan) tailLast(leaves []*domain) {
	if p.tail == 0 || len(leaves) < 2 {
		return
	}
	s := p.s
	lo := 0
	var rest, run []*domain
	// What each domain holds is read from the leaves: a descent that walks
	// the children of several domains together may leave a coarser
	// domain's own count as its level's pass set it.
	held := map[*domain]int64{}
	for _, l := range leaves {
		for a := l; a != nil; a = a.parent {
			held[a] += s.assigned[l.id]
		}
	}
	for lvl := 0; lvl <= p.sliceLvl; lvl++ {
		rest, run = rest[:0], run[:0]
		for _, l := range leaves[lo:] {
			a := l
			for a != nil && a.level > lvl {
				a = a.parent
			}
			if a != nil && a.level == lvl && held[a]%p.units[lvl] != 0 {
				run = append(run, l)
			} else {
				rest = append(rest, l)
			}
		}
		if len(run) == 0 {
			continue
		}
		copy(leaves[lo:], rest)
		copy(leaves[lo+len(rest):], run)
		lo += len(rest)
	}
}

// noDomainError explains why no domain of level lvl holds count pods.
func (p *plan) noDomainError(lvl int, label string, biggest *domain, count int64) error {
	name := LevelName(label)
	if biggest == nil {
		return &FitError{Reason: fmt.Sprintf("%s %s: the flavor has no nodes with the topology's labels", name, p.req.Mode)}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: the best %s fits %d of %d pods", name, p.req.Mode, name, p.s.unitCap[biggest.id]*p.units[lvl], count)
	if len(p.req.Layers) > 0 && p.s.podCap[biggest.id] >= count {
		fmt.Fprintf(&b, " in slices of %d per %s (it has room for %d pods, but not in whole slices)",
			p.req.Layers[len(p.req.Layers)-1].Size, LevelName(p.req.Layers[len(p.req.Layers)-1].Level), p.s.podCap[biggest.id])
	}
	p.explain(&b, biggest)
	return &FitError{Reason: b.String()}
}

// flavorError explains why the pods fit nowhere in the flavor.
func (p *plan) flavorError(count int64) error {
	var b strings.Builder
	fits := int64(0)
	if p.s.depth > 0 {
		fits = p.s.unitCap[0] * p.units[0]
	}
	if p.req.Mode == Preferred {
		fmt.Fprintf(&b, "%s preferred: no single %s holds %s and the whole flavor fits only %d", LevelName(p.req.Level), LevelName(p.req.Level), pods(count), fits)
	} else {
		fmt.Fprintf(&b, "the flavor fits only %d of %d pods", fits, count)
	}
	p.explain(&b, p.s.root)
	return &FitError{Reason: b.String()}
}

// explain adds which resources limit the nodes of d, and skipped nodes.
func (p *plan) explain(b *strings.Builder, d *domain) {
	if d != nil {
		if r := p.bottlenecks(d); r != "" {
			fmt.Fprintf(b, "; limited by %s", r)
		}
	}
	if p.excluded > 0 {
		fmt.Fprintf(b, "; %s skipped: untolerated taints or node selector/affinity", nodes(p.excluded))
	}
	if p.avoided > 0 {
		fmt.Fprintf(b, "; %s skipped: topology spreading (their domains are above their share)", nodes(p.avoided))
	}
}

// bottlenecks lists the resources that limit the usable nodes of d, with
// the number of nodes each one limits, most first.
func (p *plan) bottlenecks(d *domain) string {
	nodes := map[int]int64{}
	for _, leaf := range p.collectLeaves(d, nil) {
		if p.avoidLeaf[leaf.id] {
			continue
		}
		for _, bn := range leaf.bins {
			if !bn.usable || p.filter && !p.admits(bn) {
				continue
			}
			if idx := p.dem.limiting(p.s.binFree[int(bn.slot)*p.s.stride : int(bn.slot+1)*p.s.stride]); idx >= 0 {
				nodes[idx] += bn.count
			}
		}
	}
	idxs := make([]int, 0, len(nodes))
	for idx := range nodes {
		idxs = append(idxs, idx)
	}
	slices.SortFunc(idxs, func(a, b int) int {
		return cmp.Or(cmp.Compare(nodes[b], nodes[a]), cmp.Compare(p.s.res.names[a], p.s.res.names[b]))
	})
	parts := make([]string, 0, len(idxs))
	for _, idx := range idxs {
		unit := "nodes"
		if nodes[idx] == 1 {
			unit = "node"
		}
		parts = append(parts, fmt.Sprintf("%s (%d %s)", p.s.res.names[idx], nodes[idx], unit))
	}
	return strings.Join(parts, ", ")
}
