package tas

import (
	"cmp"
	"fmt"
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
	// binUnit is the group size within one bin (a summarized host).
	binUnit int64
	// filter: node selector, affinity and taints apply to bins.
	filter   bool
	affinity nodeaffinity.RequiredNodeAffinity
	excluded int64
}

// FindAssignment places req in the snapshot without changing it. It returns
// a *FitError when the pods do not fit, and a plain error when the request
// is invalid for this topology.
func (s *Snapshot) FindAssignment(req Request, opts Options) (*Assignment, error) {
	if req.Count < 0 {
		return nil, fmt.Errorf("pod count %d is negative", req.Count)
	}
	p := &plan{s: s, req: req, alg: opts.algorithm(req.Mode), dem: s.res.newDemand(req.PodRequests)}
	if req.Count == 0 {
		return p.result(nil), nil
	}
	target := -1
	if req.Mode != Unconstrained {
		var err error
		if target, err = s.levelIndex(req.Level); err != nil {
			return nil, err
		}
	}
	layers, err := s.layerIndexes(req, target)
	if err != nil {
		return nil, err
	}
	p.filter = s.hostIsLowest && (len(req.NodeSelector) > 0 || req.NodeAffinity != nil || s.anyTaints())
	if p.filter {
		p.affinity = nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: corev1.PodSpec{
			NodeSelector: req.NodeSelector,
			Affinity:     affinityOf(req.NodeAffinity),
		}})
	}
	count := int64(req.Count)

	if target == s.depth {
		// The host level of a summarized snapshot: all pods in one host bin,
		// that is, one slice of the whole pod set at the host level.
		p.setUniformUnits(count)
		p.computeCaps()
		leaves, err := p.oneDomain(s.depth-1, req.Level, count)
		if err == nil || req.Mode == Required {
			return p.result(leaves), err
		}
		target = s.depth - 1
	}
	p.setUnits(layers)
	p.computeCaps()

	switch {
	case req.Mode == Required:
		leaves, err := p.oneDomain(target, req.Level, count)
		return p.result(leaves), err
	case req.Mode == Preferred:
		for lvl := target; lvl >= 0; lvl-- {
			if p.fitsOne(lvl, count) {
				leaves, err := p.oneDomain(lvl, s.levels[lvl], count)
				return p.result(leaves), err
			}
		}
		return p.spread(count)
	case len(layers) > 0:
		return p.spread(count)
	default:
		return p.unconstrained(count)
	}
}

// setUniformUnits makes every level, and every bin, hold groups of size.
func (p *plan) setUniformUnits(size int64) {
	p.units = make([]int64, p.s.depth)
	for i := range p.units {
		p.units[i] = size
	}
	p.binUnit = size
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
		if l.Size < 1 || req.Count%l.Size != 0 {
			return nil, fmt.Errorf("slice layer %d: size %d does not divide the pod count %d", i, l.Size, req.Count)
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
	p.binUnit = 1
	if p.s.binsAreHosts {
		for _, l := range layers {
			if l.level >= p.s.depth {
				p.binUnit = l.size
				break
			}
		}
	}
}

// computeCaps fills podCap, unitCap and clears assigned on every domain.
func (p *plan) computeCaps() {
	s := p.s
	p.excluded = 0
	last := s.depth - 1
	for _, leaf := range s.leaves {
		var podCap, groups int64
		for _, b := range leaf.bins {
			if !b.usable {
				continue
			}
			if p.filter && !p.admits(b) {
				p.excluded += b.count
				continue
			}
			f := p.dem.fit(b.free)
			if f == 0 {
				continue
			}
			podCap += f * b.count
			groups += f / p.binUnit * b.count
		}
		leaf.podCap, leaf.assigned = podCap, 0
		leaf.unitCap = groups * p.binUnit / p.units[last]
	}
	for lvl := last - 1; lvl >= 0; lvl-- {
		for _, d := range s.byLevel[lvl] {
			p.sumChildren(d, p.units[lvl+1], p.units[lvl])
		}
	}
	if s.depth > 0 {
		p.sumChildren(s.root, p.units[0], p.units[0])
	}
}

func (p *plan) sumChildren(d *domain, childUnit, unit int64) {
	var podCap, units int64
	for _, c := range d.children {
		podCap += c.podCap
		units += c.unitCap
	}
	d.podCap, d.assigned = podCap, 0
	d.unitCap = units * childUnit / unit
}

// admits applies the node selector, required affinity and taints.
func (p *plan) admits(b *bin) bool {
	if len(p.req.NodeSelector) > 0 || p.req.NodeAffinity != nil {
		if ok, _ := p.affinity.Match(b.node); !ok {
			return false
		}
	}
	if len(b.taints) == 0 {
		return true
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Logger{}, b.taints, p.req.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

func (s *Snapshot) anyTaints() bool {
	for _, b := range s.nodes {
		if len(b.taints) > 0 {
			return true
		}
	}
	return false
}

func affinityOf(ns *corev1.NodeSelector) *corev1.Affinity {
	if ns == nil {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
}

func (p *plan) fitsOne(lvl int, count int64) bool {
	need := count / p.units[lvl]
	for _, d := range p.s.byLevel[lvl] {
		if d.unitCap >= need {
			return true
		}
	}
	return false
}

// oneDomain puts all pods in the tightest domain of level lvl that holds
// them and distributes them below it. label names the level in errors.
func (p *plan) oneDomain(lvl int, label string, count int64) ([]*domain, error) {
	need := count / p.units[lvl]
	var best, biggest *domain
	for _, d := range p.s.byLevel[lvl] {
		if biggest == nil || d.unitCap > biggest.unitCap || d.unitCap == biggest.unitCap && d.podCap > biggest.podCap {
			biggest = d
		}
		if d.unitCap < need {
			continue
		}
		if best == nil || tighter(d, best) {
			best = d
		}
	}
	if best == nil {
		return nil, p.noDomainError(lvl, label, biggest, count)
	}
	best.assigned = count
	return p.descend([]*domain{best}), nil
}

// tighter orders fitting domains: fewest groups, then fewest pods, then by name.
func tighter(a, b *domain) bool {
	if a.unitCap != b.unitCap {
		return a.unitCap < b.unitCap
	}
	if a.podCap != b.podCap {
		return a.podCap < b.podCap
	}
	return pathLess(a, b)
}

func pathLess(a, b *domain) bool {
	for i := range a.values {
		if a.values[i] != b.values[i] {
			return naturalLess(a.values[i], b.values[i])
		}
	}
	return false
}

// spread distributes the pods over the top-level domains and below.
func (p *plan) spread(count int64) (*Assignment, error) {
	root := p.s.root
	need := count / p.units[0]
	if p.s.depth == 0 || root.unitCap < need {
		return nil, p.flavorError(count)
	}
	if !p.pick(root.children, need, p.units[0]) {
		return nil, p.flavorError(count)
	}
	var top []*domain
	for _, c := range root.children {
		if c.assigned > 0 {
			top = append(top, c)
		}
	}
	return p.result(p.descend(top)), nil
}

// unconstrained picks leaf domains across the whole tree.
func (p *plan) unconstrained(count int64) (*Assignment, error) {
	last := p.s.depth - 1
	if p.s.depth == 0 || p.s.root.unitCap*p.units[0] < count {
		return nil, p.flavorError(count)
	}
	leaves := p.collectLeaves(p.s.root, p.scratch()[:0])
	if !p.pick(leaves, count/p.units[last], p.units[last]) {
		return nil, p.flavorError(count)
	}
	out := leaves[:0]
	for _, l := range p.collectLeaves(p.s.root, nil) {
		if l.assigned > 0 {
			out = append(out, l)
		}
	}
	return p.result(out), nil
}

func (p *plan) scratch() []*domain {
	if cap(p.s.scratch) < len(p.s.leaves) {
		p.s.scratch = make([]*domain, 0, len(p.s.leaves))
	}
	return p.s.scratch
}

// collectLeaves appends the leaves under d in natural order.
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
	for len(frontier) > 0 && frontier[0].level < p.s.depth-1 {
		var next []*domain
		for _, d := range frontier {
			u := p.units[d.level+1]
			if !p.pick(d.children, d.assigned/u, u) {
				panic(fmt.Sprintf("tas: domain %v holds %d pods but its children do not", d.values, d.assigned))
			}
			for _, c := range d.children {
				if c.assigned > 0 {
					next = append(next, c)
				}
			}
		}
		frontier = next
	}
	return frontier
}

// pick assigns n groups of u pods among cands with the plan's algorithm.
// cands must be in natural order; their order is not changed.
func (p *plan) pick(cands []*domain, n, u int64) bool {
	if n == 0 {
		return true
	}
	ordered := append(p.orderBuf(len(cands)), cands...)
	if p.alg == configv1beta1.LeastFreeCapacity {
		slices.SortStableFunc(ordered, func(a, b *domain) int {
			return cmp.Or(cmp.Compare(a.unitCap, b.unitCap), cmp.Compare(a.podCap, b.podCap))
		})
		for _, d := range ordered {
			if n == 0 {
				break
			}
			take := min(d.unitCap, n)
			d.assigned += take * u
			n -= take
		}
		return n == 0
	}
	// BestFit: most groups first, but the last domain is the tightest one
	// that holds what is left.
	slices.SortStableFunc(ordered, func(a, b *domain) int {
		return cmp.Or(cmp.Compare(b.unitCap, a.unitCap), cmp.Compare(a.podCap, b.podCap))
	})
	for i, d := range ordered {
		if d.unitCap == 0 {
			break
		}
		if d.unitCap >= n {
			best := d
			for _, e := range ordered[i+1:] {
				if e.unitCap < n {
					break
				}
				if e.unitCap < best.unitCap || e.unitCap == best.unitCap && e.podCap < best.podCap {
					best = e
				}
			}
			best.assigned += n * u
			return true
		}
		d.assigned += d.unitCap * u
		n -= d.unitCap
	}
	return false
}

func (p *plan) orderBuf(n int) []*domain {
	if n > 64 {
		return make([]*domain, 0, n)
	}
	var buf [64]*domain
	return buf[:0]
}

func (p *plan) result(leaves []*domain) *Assignment {
	s := p.s
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
		a.Domains = append(a.Domains, DomainAssignment{Values: values, Count: int32(l.assigned)})
	}
	return a
}

// noDomainError explains why no domain of level lvl holds count pods.
func (p *plan) noDomainError(lvl int, label string, biggest *domain, count int64) error {
	name := LevelName(label)
	if biggest == nil {
		return &FitError{Reason: fmt.Sprintf("%s %s: the flavor has no nodes with the topology's labels", name, p.req.Mode)}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: the best %s fits %d of %d pods", name, p.req.Mode, name, biggest.unitCap*p.units[lvl], count)
	if len(p.req.Layers) > 0 && biggest.podCap >= count {
		fmt.Fprintf(&b, " in slices of %d per %s (it has room for %d pods, but not in whole slices)",
			p.req.Layers[len(p.req.Layers)-1].Size, LevelName(p.req.Layers[len(p.req.Layers)-1].Level), biggest.podCap)
	}
	p.explain(&b, biggest)
	return &FitError{Reason: b.String()}
}

// flavorError explains why the pods fit nowhere in the flavor.
func (p *plan) flavorError(count int64) error {
	var b strings.Builder
	fits := int64(0)
	if p.s.depth > 0 {
		fits = p.s.root.unitCap * p.units[0]
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
		fmt.Fprintf(b, "; %d nodes skipped: untolerated taints or node selector/affinity", p.excluded)
	}
}

// bottlenecks lists the resources that limit the usable nodes of d, with
// the number of nodes each one limits, most first.
func (p *plan) bottlenecks(d *domain) string {
	nodes := map[int]int64{}
	for _, leaf := range p.collectLeaves(d, nil) {
		for _, bn := range leaf.bins {
			if !bn.usable || p.filter && !p.admits(bn) {
				continue
			}
			if idx := p.dem.limiting(bn.free); idx >= 0 {
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
