package tas

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FindAssignmentFollowingHint places req the way hint divides it among domains — a
// hub's placement on this cluster's summary, at the summary's leaf level
// or above — putting each domain's pods onto its nodes as FindAssignment
// would there. It does not change the snapshot. It returns a *FitError
// when a domain has no room for its pods now, and a plain error when the
// hint does not suit the request or the topology (other levels, pods
// counted differently or not in whole slices, a required domain split, a
// required level below the hint's): the caller then places req on its
// own.
func (s *Snapshot) FindAssignmentFollowingHint(req Request, hint *Assignment, opts Options) (*Assignment, error) {
	if s.summary {
		return nil, errors.New("a hint is placed on a cluster's own nodes, not on a summary")
	}
	if hint == nil || len(hint.Levels) == 0 || len(hint.Levels) > s.depth || !slices.Equal(hint.Levels, s.levels[:len(hint.Levels)]) {
		return nil, fmt.Errorf("the hint's levels %v are not a prefix of the topology's %v", levelsOf(hint), s.levels)
	}
	if req.Count == 0 {
		return (&plan{s: s}).result(nil), nil
	}
	p, err := s.newPlan(req, opts)
	if err != nil {
		return nil, err
	}
	lvl := len(hint.Levels) - 1
	p.computeCaps()
	u := p.units[lvl]
	frontier := make([]*domain, 0, len(hint.Domains))
	total, partial := int64(0), false
	for _, d := range hint.Domains {
		dom := s.domains[domainKey(d.Values)]
		if dom == nil || dom.level != lvl {
			return nil, &FitError{Reason: fmt.Sprintf("%s %s of the hint has no nodes here", LevelName(hint.Levels[lvl]), d.Values[len(d.Values)-1])}
		}
		c := int64(d.Count)
		if c <= 0 || c%u != 0 && (c%u != p.tail || partial) || s.assigned[dom.id] != 0 {
			return nil, fmt.Errorf("the hint gives %s %v %d pods: not a positive number of whole slices of %d (and at most one partial slice of %d), or twice", LevelName(hint.Levels[lvl]), d.Values, c, u, p.tail)
		}
		partial = partial || c%u != 0
		if req.Mode == Required && p.target <= lvl && !slices.Equal(d.Values[:p.target+1], hint.Domains[0].Values[:p.target+1]) {
			return nil, fmt.Errorf("the hint spreads the pods over more than one %s, which the request requires", LevelName(req.Level))
		}
		if !p.holds(dom, c) {
			return nil, &FitError{Reason: fmt.Sprintf("%s %s has room for %d of the %d pods the hint gives it", LevelName(hint.Levels[lvl]), d.Values[len(d.Values)-1], s.unitCap[dom.id]*u, c)}
		}
		s.assigned[dom.id] = c
		frontier = append(frontier, dom)
		total += c
	}
	if total != int64(req.Count) {
		return nil, fmt.Errorf("the hint places %d pods, the request has %d", total, req.Count)
	}
	if err := p.hintKeepsSlices(hint, lvl); err != nil {
		return nil, err
	}
	p.keepCounts = true
	leaves := p.descend(frontier)
	if req.Mode == Required && p.target > lvl {
		// Required below the hint's level: the pods must have gone into one
		// domain of that level.
		for _, l := range leaves[1:] {
			if !slices.Equal(l.values[:p.target+1], leaves[0].values[:p.target+1]) {
				return nil, &FitError{Reason: fmt.Sprintf("%s required: no %s of the hint's %s holds all %d pods", LevelName(req.Level), LevelName(req.Level), LevelName(hint.Levels[lvl]), req.Count)}
			}
		}
	}
	return p.result(leaves), nil
}

// hintKeepsSlices checks the levels above the hint's (lvl): the domains
// of each domain there come together in the hint, and hold whole slices
// of that level (one of them, at most, also the partial slice), so that
// no slice of a coarser layer is split across them.
func (p *plan) hintKeepsSlices(hint *Assignment, lvl int) error {
	for l := range lvl {
		u := p.units[l]
		if u == 1 {
			continue
		}
		sums := map[string]int64{}
		var order []string
		for _, d := range hint.Domains {
			k := domainKey(d.Values[:l+1])
			if n := len(order); n == 0 || order[n-1] != k {
				if _, seen := sums[k]; seen {
					return fmt.Errorf("the hint does not keep the domains of %s %s together", LevelName(hint.Levels[l]), d.Values[l])
				}
				order = append(order, k)
			}
			sums[k] += int64(d.Count)
		}
		partial := false
		for _, k := range order {
			if r := sums[k] % u; r != 0 {
				if partial || r != p.tail || l > p.sliceLvl {
					return fmt.Errorf("the hint gives %s %s %d pods: not whole slices of %d", LevelName(hint.Levels[l]), k[strings.LastIndexByte(k, 0)+1:], sums[k], u)
				}
				partial = true
			}
		}
	}
	return nil
}

func levelsOf(a *Assignment) []string {
	if a == nil {
		return nil
	}
	return a.Levels
}
