package tas

import (
	"fmt"
	"slices"
)

// LeafDepth is the number of levels a summary of this snapshot reports
// domains for: every level above the host.
func (s *Snapshot) LeafDepth() int {
	switch {
	case s.summary:
		return s.leafDepth
	case s.hostIsLowest:
		return s.depth - 1
	}
	return s.depth
}

// Enclosing returns the smallest domain that holds every pod of the
// assignments (as FindAssignment returned them), capped at the leaf level:
// its values, one per level from the top, so len(values) is its depth (0:
// the pods spread over top-level domains; one host counts as its leaf
// domain). Assignments with no pods give nil.
func (s *Snapshot) Enclosing(as []*Assignment) []string {
	var common []string
	first := true
	for _, a := range as {
		for _, d := range a.Domains {
			values := s.leafValues(a, d)
			if first {
				common, first = slices.Clone(values), false
				continue
			}
			n := 0
			for n < len(common) && n < len(values) && common[n] == values[n] {
				n++
			}
			common = common[:n]
		}
	}
	return common
}

// leafValues returns the values, down to the leaf level, of an assignment
// entry.
func (s *Snapshot) leafValues(a *Assignment, d DomainAssignment) []string {
	leaf := s.LeafDepth()
	if s.hostLevel(a) {
		if l := s.hostLeaf(d.Values[0]); l != nil {
			return l.values[:leaf]
		}
		return nil
	}
	return d.Values[:min(leaf, len(d.Values))]
}

// Room is how many more pods of req's shape the domain named by values
// (highest level first; none for the whole flavor) could take now.
func (s *Snapshot) Room(values []string, req Request) (int64, error) {
	p, err := s.newPlan(Request{Count: 1, PodRequests: req.PodRequests, NodeSelector: req.NodeSelector,
		NodeAffinity: req.NodeAffinity, Tolerations: req.Tolerations}, Options{})
	if err != nil {
		return 0, err
	}
	p.computeCaps()
	if len(values) == 0 {
		return s.podCap[0], nil
	}
	d := s.domains[domainKey(values)]
	if d == nil {
		return 0, fmt.Errorf("domain %v is not in the topology", values)
	}
	return s.podCap[d.id], nil
}

// Unchecked lists what of req's node selector and required node affinity
// a summary snapshot cannot evaluate (see checkable): labels the summary
// does not list, the host level's, a node's fields; everything when the
// summary has no node labels. UncheckedReason says why.
func (s *Snapshot) Unchecked(req Request) []string {
	_, _, unchecked := s.checkable(req)
	return unchecked
}

// UncheckedReason says what of the union of some requests' Unchecked
// lists is not checked, and why; "" when nothing.
func (s *Snapshot) UncheckedReason(unchecked []string) string {
	if len(unchecked) == 0 {
		return ""
	}
	return s.uncheckedReason(unchecked)
}

// FindWithRoom is FindAssignment that also returns the smallest domain
// holding every pod (see Enclosing) and how many more pods of req's shape
// that domain could take after the placement, at the cost of one
// placement: the hub's ranking of a single pod set.
func (s *Snapshot) FindWithRoom(req Request, opts Options) (*Assignment, []string, int64, error) {
	a, err := s.findAssignment(req, opts)
	if err != nil {
		return nil, nil, 0, err
	}
	// The placement's capacity pass left every domain's pod capacity in
	// podCap; each pod placed takes exactly one of them.
	enclosing := s.Enclosing([]*Assignment{a})
	var room int64
	if len(enclosing) == 0 {
		room = s.podCap[0]
	} else if d := s.domains[domainKey(enclosing)]; d != nil {
		room = s.podCap[d.id]
	}
	room -= int64(req.Count)
	if s.summary {
		a = s.project(a, req)
	}
	return a, enclosing, room, nil
}
