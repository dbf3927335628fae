package tas

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// FindReplacement finds a new node for the pods that an assignment put on a
// failed node, leaving every other pod where it is (KEP-2724 "Node
// failures"). It needs a topology whose lowest level is the host. The
// replacement lies inside the domain the request constrains the pods to:
// the required domain, the domain of the finest slice layer holding the
// failed node's pods, or, for preferred requests, the preferred domain if it
// has room and the smallest domain above it that has. A failed node that
// holds all of the assignment's pods (not of a group) may move them to
// another domain, as for a preferred request: they stay together. It is a node with
// room for all of the failed node's pods, not failed and not already used by
// the assignment; among those, the tightest. The result keeps the rank order:
// the new node takes the failed node's place.
func (s *Snapshot) FindReplacement(req Request, current *Assignment, failed string) (*Assignment, error) {
	return s.FindReplacementNear(req, current, failed, nil)
}

// FindReplacementNear is FindReplacement for a failed node that may be gone
// from the snapshot: failedValues, its topology values (highest level
// first) when known, tell which domain it was in when no other node of the
// assignment can.
func (s *Snapshot) FindReplacementNear(req Request, current *Assignment, failed string, failedValues []string) (*Assignment, error) {
	if !s.hostIsLowest || s.summary {
		return nil, fmt.Errorf("node replacement needs a topology whose lowest level is %s", s.levels[len(s.levels)-1])
	}
	pos := slices.IndexFunc(current.Domains, func(d DomainAssignment) bool { return d.Values[0] == failed })
	if pos < 0 {
		return nil, fmt.Errorf("node %q has no pods of this assignment", failed)
	}
	count := int64(current.Domains[pos].Count)
	used := map[string]bool{}
	for _, d := range current.Domains {
		used[d.Values[0]] = true
	}
	p := &plan{s: s, req: req, dem: s.res.newDemand(req.PodRequests)}
	p.selects = len(req.NodeSelector) > 0 || req.NodeAffinity != nil
	p.filter = p.selects || s.anyTaints()
	if p.selects {
		p.affinity = requiredAffinity(req.NodeSelector, req.NodeAffinity)
	}

	scopes, err := s.replacementScopes(req, current, pos, failedValues)
	if err != nil {
		return nil, err
	}
	unit, splitBelow := s.replacementUnit(req)
	var lastErr error
	for i, scope := range scopes {
		var free []freeNode
		best, biggest, total := -1, int64(0), int64(0)
		for _, leaf := range p.collectLeaves(scope.domain, nil) {
			for _, b := range leaf.bins {
				if used[leaf.values[len(leaf.values)-1]] || !b.usable || p.filter && !p.admits(b) {
					continue
				}
				f := p.dem.fit(s.binFree[int(b.slot)*s.stride : int(b.slot+1)*s.stride])
				if f == 0 {
					continue
				}
				// The node's hostname label, as every assignment names it
				// (and the ungater's node selector matches), not its name.
				free = append(free, freeNode{leaf.values[len(leaf.values)-1], f})
				biggest, total = max(biggest, f), total+f/unit*unit
				if f >= count && (best < 0 || f < free[best].fit || f == free[best].fit && free[len(free)-1].name < free[best].name) {
					best = len(free) - 1
				}
			}
		}
		if best >= 0 {
			return splice(current, pos, []DomainAssignment{{Values: []string{free[best].name}, Count: int32(count)}}), nil
		}
		// In the narrowest domain, several nodes may share the failed
		// node's pods (Kueue's replacement is a placement of those pods in
		// that domain), in whole host slices, when every slice stays in
		// its domain.
		if i == 0 && scope.domain.level >= splitBelow {
			if parts := splitReplacement(free, count, unit); parts != nil {
				return splice(current, pos, parts), nil
			}
			lastErr = &FitError{Reason: fmt.Sprintf("no replacement for node %s %s: the free nodes there fit %d of its %s",
				failed, scope.where, total, pods(count))}
			continue
		}
		lastErr = &FitError{Reason: fmt.Sprintf("no replacement for node %s %s: the best free node there fits %d of its %s",
			failed, scope.where, biggest, pods(count))}
	}
	return nil, lastErr
}

// freeNode is a node with room for fit more pods.
type freeNode struct {
	name string
	fit  int64
}

// replacementUnit is how many of a failed node's pods must go to one node
// (the size of a slice layer at the host level, else 1), and the level at
// or below which a replacement domain keeps the pods in one domain of the
// request's level and every slice of a coarser layer in its domain (-1:
// every level).
func (s *Snapshot) replacementUnit(req Request) (unit int64, splitBelow int) {
	unit, splitBelow = 1, -1
	if req.Mode != Unconstrained {
		if idx, err := s.levelIndex(req.Level); err == nil {
			splitBelow = idx
		}
	}
	for _, l := range req.Layers {
		idx, err := s.levelIndex(l.Level)
		if err != nil {
			continue
		}
		if idx >= s.depth-1 {
			unit = int64(l.Size)
		} else {
			splitBelow = max(splitBelow, idx)
		}
	}
	return unit, splitBelow
}

// splitReplacement puts count pods, in groups of unit, on free nodes as
// BestFit does: the most room first, the last the tightest that holds the
// rest (ties in name order). It returns the nodes in name order, nil when
// they do not hold them all.
func splitReplacement(free []freeNode, count, unit int64) []DomainAssignment {
	slices.SortStableFunc(free, func(a, b freeNode) int {
		return cmp.Or(cmp.Compare(b.fit/unit, a.fit/unit), strings.Compare(a.name, b.name))
	})
	var out []DomainAssignment
	left := count
	for i := 0; i < len(free) && left > 0; i++ {
		take := free[i].fit / unit * unit
		if take == 0 {
			break
		}
		if take >= left {
			last := i
			for j := i + 1; j < len(free); j++ {
				if f := free[j].fit / unit * unit; f >= left && f < free[last].fit/unit*unit {
					last = j
				}
			}
			out = append(out, DomainAssignment{Values: []string{free[last].name}, Count: int32(left)})
			left = 0
			break
		}
		out = append(out, DomainAssignment{Values: []string{free[i].name}, Count: int32(take)})
		left -= take
	}
	if left > 0 {
		return nil
	}
	// In name order, but a part that is not whole slices last: it holds
	// the failed node's partial slice, which ends its ranks.
	slices.SortFunc(out, func(a, b DomainAssignment) int {
		partial := func(d DomainAssignment) int { return min(1, int(int64(d.Count)%unit)) }
		return cmp.Or(cmp.Compare(partial(a), partial(b)), strings.Compare(a.Values[0], b.Values[0]))
	})
	return out
}

// splice returns current with the domain at pos replaced by parts: the
// failed node's ranks go to them in order, every other pod keeps its rank.
func splice(current *Assignment, pos int, parts []DomainAssignment) *Assignment {
	out := &Assignment{Levels: current.Levels, Domains: make([]DomainAssignment, 0, len(current.Domains)+len(parts)-1)}
	out.Domains = append(out.Domains, current.Domains[:pos]...)
	out.Domains = append(out.Domains, parts...)
	out.Domains = append(out.Domains, current.Domains[pos+1:]...)
	return out
}

type scope struct {
	domain *domain
	where  string // "in rack rack-1", "in the flavor"
}

// replacementScopes lists the domains to search, narrowest first.
func (s *Snapshot) replacementScopes(req Request, current *Assignment, pos int, failedValues []string) ([]scope, error) {
	// The finest level whose domain the failed node's pods must stay in.
	level, mode := -1, req.Mode
	if mode != Unconstrained {
		var err error
		if level, err = s.levelIndex(req.Level); err != nil {
			return nil, err
		}
	}
	// Pods of the failed node that share a slice with pods elsewhere pin the
	// replacement to that slice's domain.
	sliceHosts := []int{}
	first := current.FirstRank()
	lo, hi := first[pos], first[pos]+current.Domains[pos].Count
	for _, l := range req.Layers {
		idx, err := s.levelIndex(l.Level)
		if err != nil {
			return nil, err
		}
		if idx >= s.depth-1 {
			continue // a host-level slice moves whole with the node
		}
		sLo, sHi := lo/l.Size*l.Size, (hi+l.Size-1)/l.Size*l.Size
		var others []int
		for i, d := range current.Domains {
			if i != pos && first[i] < sHi && first[i]+d.Count > sLo {
				others = append(others, i)
			}
		}
		// A slice at the request's own level pins a preferred request too:
		// the slice must stay in one domain, the request only prefers to.
		if len(others) > 0 && (idx > level || idx == level && mode != Required) {
			level, mode, sliceHosts = idx, Required, others
		}
	}
	if level < 0 {
		return []scope{{domain: s.root, where: "in the flavor"}}, nil
	}
	// A failed node that holds all of the pod set's pods keeps them in one
	// domain of every level wherever they go: its domain is then only a
	// preference, nearest first (Kueue requires no domain either). A pod
	// set of a group stays with the group's other pod sets.
	if len(current.Domains) == 1 && mode == Required && !req.Grouped {
		mode = Preferred
	}
	// Find the domain at level from a surviving node of the assignment.
	candidates := sliceHosts
	if len(candidates) == 0 {
		for i := range current.Domains {
			if i != pos {
				candidates = append(candidates, i)
			}
		}
		candidates = append(candidates, pos)
	}
	var anchor *domain
	for _, i := range candidates {
		if leaf := s.hostLeaf(current.Domains[i].Values[0]); leaf != nil {
			anchor = leaf
			break
		}
	}
	// Else the failed node's own domain, if other nodes are left in it (a
	// required domain that is gone has no replacement).
	for lvl := min(len(failedValues), s.depth) - 1; anchor == nil && lvl >= 0 && (mode != Required || lvl >= level); lvl-- {
		anchor = s.domains[domainKey(failedValues[:lvl+1])]
	}
	if anchor == nil {
		if mode == Required && len(failedValues) > level {
			return nil, &FitError{Reason: fmt.Sprintf("no replacement: %s %s has no node left", LevelName(s.levels[level]), strings.Join(failedValues[:level+1], "/"))}
		}
		if mode == Required {
			return nil, &FitError{Reason: fmt.Sprintf("no replacement: none of the workload's nodes is left to tell which %s it runs in", LevelName(s.levels[level]))}
		}
		return []scope{{domain: s.root, where: "in the flavor"}}, nil
	}
	var scopes []scope
	for d := anchor; d != s.root; d = d.parent {
		if d.level > level {
			continue
		}
		scopes = append(scopes, scope{domain: d, where: fmt.Sprintf("in %s %s", LevelName(s.levels[d.level]), strings.Join(d.values, "/"))})
		if mode == Required {
			break
		}
	}
	if mode != Required {
		scopes = append(scopes, scope{domain: s.root, where: "in the flavor"})
	}
	return scopes, nil
}
