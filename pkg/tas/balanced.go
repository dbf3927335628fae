package tas

import (
	"cmp"
	"math"
	"slices"
)

// maxCombinations bounds the exhaustive subset searches of balanced
// placement; larger searches use a greedy choice.
const maxCombinations = 20000

// balanced is KEP-2724's BalancedPlacement for a preferred request at level
// L: it finds, within one domain of level L-1, the fewest domains of levels
// L and L+1 that hold the pods and spreads the pods evenly over the latter.
// It returns false when it does not apply (no level below L, slice layers
// above L+1, a partial slice, or no domain of L-1 holds the request); the caller then uses
// the standard algorithm.
func (p *plan) balanced(count int64) ([]*domain, bool) {
	s := p.s
	L := p.target
	if L+1 >= s.depth || p.tail != 0 {
		return nil, false
	}
	u := p.units[L+1]
	for k := 0; k <= L; k++ {
		if p.units[k] != u {
			return nil, false
		}
	}
	need := count / u
	var parents []*domain
	if L == 0 {
		parents = []*domain{s.root}
	} else {
		parents = s.byLevel[L-1]
	}
	// Steps 1-3: the parent that maximizes T, the least number of pods on a
	// chosen domain of level L+1, then needs the fewest domains of level L.
	var best *domain
	bestT, bestN := int64(-1), 0
	for _, d := range parents {
		if s.unitCap[d.id] < need {
			continue
		}
		t := balancedT(p.grandchildCaps(d), need)
		n := len(p.fewest(d.children, t, need))
		if n == 0 {
			continue
		}
		if t > bestT || t == bestT && n < bestN || t == bestT && n == bestN && s.order[d.id] < s.order[best.id] {
			best, bestT, bestN = d, t, n
		}
	}
	if best == nil {
		return nil, false
	}
	t := bestT
	// Steps 4-5: children of the parent with room from domains of at least
	// T; the fewest of them, then the least total room, then the most even.
	pruned := func(d *domain) int64 { return p.prunedCap(d, t) }
	mids := p.subset(best.children, bestN, need, pruned, func(set []*domain) float64 { return -p.entropy(set, t) })
	// Step 6: their children of at least T: the fewest, then the least room.
	var cands []*domain
	for _, m := range mids {
		for _, c := range m.children {
			if s.unitCap[c.id] >= t {
				cands = append(cands, c)
			}
		}
	}
	k := len(p.fewest(cands, 0, need))
	leaves := p.subset(cands, k, need, func(d *domain) int64 { return s.unitCap[d.id] }, nil)
	if len(leaves) == 0 {
		return nil, false
	}
	// Step 7: T (or an even share) on each; the rest, which the KEP lets
	// go anywhere, as Kueue gives it: to the domains from the most room
	// down (then in order), each taking all it holds of it.
	t = min(t, need/int64(len(leaves)))
	left := need
	for _, l := range leaves {
		s.assigned[l.id] = t
		left -= t
	}
	byRoom := slices.Clone(leaves)
	slices.SortStableFunc(byRoom, func(a, b *domain) int {
		if c := cmp.Compare(s.unitCap[b.id], s.unitCap[a.id]); c != 0 {
			return c
		}
		return cmp.Compare(s.order[a.id], s.order[b.id])
	})
	for _, l := range byRoom {
		take := min(s.unitCap[l.id]-s.assigned[l.id], left)
		s.assigned[l.id] += take
		left -= take
	}
	if left > 0 {
		return nil, false
	}
	for _, l := range leaves {
		s.assigned[l.id] *= u
	}
	slices.SortFunc(leaves, func(a, b *domain) int { return int(s.order[a.id] - s.order[b.id]) })
	p.keepCounts = true
	return p.descend(leaves), true
}

// grandchildCaps lists the group capacity of the domains two levels below d.
func (p *plan) grandchildCaps(d *domain) []int64 {
	var caps []int64
	for _, c := range d.children {
		for _, g := range c.children {
			caps = append(caps, p.s.unitCap[g.id])
		}
	}
	return caps
}

// balancedT is the largest T such that some set of domains, each holding
// at least T, holds need with at least T on each: with the fewest domains
// whose largest capacities reach need, k, it is min(need/k, k-th largest).
func balancedT(caps []int64, need int64) int64 {
	sorted := slices.Clone(caps)
	slices.SortFunc(sorted, func(a, b int64) int { return int(b - a) })
	sum := int64(0)
	for k, c := range sorted {
		sum += c
		if sum >= need {
			return min(need/int64(k+1), c)
		}
	}
	return 0
}

// prunedCap is d's room counting only children that hold at least t.
func (p *plan) prunedCap(d *domain, t int64) int64 {
	sum := int64(0)
	for _, c := range d.children {
		if v := p.s.unitCap[c.id]; v >= t {
			sum += v
		}
	}
	return sum
}

// fewest returns the fewest domains (largest first) whose room, counted as
// prunedCap(t) when t > 0, reaches need; nil when all together do not.
func (p *plan) fewest(ds []*domain, t, need int64) []*domain {
	room := func(d *domain) int64 {
		if t > 0 {
			return p.prunedCap(d, t)
		}
		return p.s.unitCap[d.id]
	}
	sorted := slices.Clone(ds)
	slices.SortStableFunc(sorted, func(a, b *domain) int { return int(room(b) - room(a)) })
	sum := int64(0)
	for i, d := range sorted {
		sum += room(d)
		if sum >= need {
			return sorted[:i+1]
		}
	}
	return nil
}

// entropy of the room of the domains below set that hold at least t: the
// higher, the more even.
func (p *plan) entropy(set []*domain, t int64) float64 {
	var caps []float64
	total := 0.0
	for _, d := range set {
		for _, c := range d.children {
			if v := p.s.unitCap[c.id]; v >= t && v > 0 {
				caps = append(caps, float64(v))
				total += float64(v)
			}
		}
	}
	h := 0.0
	for _, c := range caps {
		q := c / total
		h -= q * math.Log(q)
	}
	return h
}

// subset picks size domains of ds whose room reaches need with the least
// total room, ties broken by the smallest penalty, then name order. It
// tries every combination when there are few, else takes the size-1 largest
// and the smallest domain that completes them.
func (p *plan) subset(ds []*domain, size int, need int64, room func(*domain) int64, penalty func([]*domain) float64) []*domain {
	if size <= 0 || size > len(ds) {
		return nil
	}
	if binomial(len(ds), size) > maxCombinations {
		sorted := slices.Clone(ds)
		slices.SortStableFunc(sorted, func(a, b *domain) int { return int(room(b) - room(a)) })
		out := slices.Clone(sorted[:size-1])
		sum := int64(0)
		for _, d := range out {
			sum += room(d)
		}
		for i := len(sorted) - 1; i >= size-1; i-- {
			if sum+room(sorted[i]) >= need {
				return append(out, sorted[i])
			}
		}
		return nil
	}
	var best []*domain
	bestRoom, bestPenalty := int64(-1), 0.0
	idx := make([]int, size)
	for i := range idx {
		idx[i] = i
	}
	set := make([]*domain, size)
	for {
		sum := int64(0)
		for i, j := range idx {
			set[i] = ds[j]
			sum += room(ds[j])
		}
		if sum >= need {
			pen := 0.0
			if penalty != nil {
				pen = penalty(set)
			}
			if best == nil || sum < bestRoom || sum == bestRoom && pen < bestPenalty-1e-12 {
				best, bestRoom, bestPenalty = slices.Clone(set), sum, pen
			}
		}
		// next combination
		i := size - 1
		for i >= 0 && idx[i] == len(ds)-size+i {
			i--
		}
		if i < 0 {
			return best
		}
		idx[i]++
		for j := i + 1; j < size; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

func binomial(n, k int) int {
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > maxCombinations {
			return r
		}
	}
	return r
}
