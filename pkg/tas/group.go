package tas

import (
	"errors"
	"fmt"
	"slices"
)

// FindGroupAssignment places the pod sets of one pod set group (e.g. a
// leader and its workers, KEP-2724 "Cross-PodSet Topology Aware
// scheduling") so that they share one domain of the requested level. All
// requests must ask for the same mode and level. A leader and its workers
// are placed as Kueue's engine places them (leader.go). Other groups: the
// largest pod set picks the candidate domains, tightest first; a candidate
// is taken when every other pod set fits in it too, with the capacity the
// first ones took. The snapshot is unchanged afterwards; assignments are
// returned in the order of reqs.
func (s *Snapshot) FindGroupAssignment(reqs []Request, opts Options) ([]*Assignment, error) {
	_, out, err := s.FindGroupAssignmentWithNodes(reqs, opts)
	return out, err
}

// FindGroupAssignmentWithNodes is FindGroupAssignment, also returning the
// assignments to Commit: on a summary snapshot, the group's pods on the
// very nodes found (the reported assignments are projected to the
// summary's leaf level, and committing them pod set by pod set could put
// a group's pod sets on different nodes of a domain); elsewhere the same.
func (s *Snapshot) FindGroupAssignmentWithNodes(reqs []Request, opts Options) (commit, report []*Assignment, err error) {
	out, err := s.findGroupAssignment(reqs, opts)
	if err != nil || !s.summary {
		return out, out, err
	}
	report = make([]*Assignment, len(out))
	for i, a := range out {
		report[i] = s.project(a, reqs[i])
	}
	return out, report, nil
}

func (s *Snapshot) findGroupAssignment(reqs []Request, opts Options) ([]*Assignment, error) {
	strict := make([]Request, len(reqs))
	preferred := false
	for i, r := range reqs {
		var had bool
		strict[i], had = withoutPreferredAvoid(r)
		preferred = preferred || had
	}
	if preferred {
		// Preferred spreading: out of those domains if the group fits elsewhere.
		out, err := s.findGroupAssignment1(reqs, opts)
		var fit *FitError
		if err == nil || !errors.As(err, &fit) {
			return out, err
		}
		reqs = strict
	}
	return s.findGroupAssignment1(reqs, opts)
}

func (s *Snapshot) findGroupAssignment1(reqs []Request, opts Options) ([]*Assignment, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	for _, r := range reqs[1:] {
		if r.Mode != reqs[0].Mode || r.Level != reqs[0].Level {
			return nil, fmt.Errorf("the pod sets of a group must ask for the same topology level (%s %q and %s %q)",
				reqs[0].Mode, reqs[0].Level, r.Mode, r.Level)
		}
	}
	if len(reqs) == 1 {
		a, err := s.findAssignment(reqs[0], opts)
		if err != nil {
			return nil, err
		}
		return []*Assignment{a}, nil
	}
	if reqs[0].Mode == Unconstrained {
		return s.placeInOrder(reqs, opts)
	}
	// The largest pod set chooses; the others follow.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(reqs[b].Count - reqs[a].Count) })
	main := reqs[order[0]]
	target, err := s.levelIndex(main.Level)
	if err != nil {
		return nil, err
	}
	target = min(target, s.depth-1) // a summarized host level: its leaf above
	lastLevel := target
	if main.Mode == Preferred {
		lastLevel = 0
	}
	for lvl := target; lvl >= lastLevel; lvl-- {
		if li, wi, leader := s.leaderShape(reqs, opts); leader {
			out, ok, applies, err := s.groupWithLeader(reqs, li, wi, lvl, opts)
			if err != nil || ok {
				return out, err
			}
			if applies {
				continue
			}
		}
		if out, ok, err := s.groupAt(reqs, order, lvl, opts); err != nil || ok {
			return out, err
		}
	}
	if main.Mode == Preferred {
		if li, wi, leader := s.leaderShape(reqs, opts); leader {
			if out, ok, _, err := s.groupWithLeaderSpread(reqs, li, wi, opts); err != nil || ok {
				return out, err
			}
		}
		// Nothing holds the group in one domain: spread, one pod set after another.
		return s.placeInOrder(reqs, opts)
	}
	return nil, &FitError{Reason: fmt.Sprintf("%s required: no %s holds all %d pod sets of the group together",
		LevelName(main.Level), LevelName(main.Level), len(reqs))}
}

// groupAt tries the candidate domains of level lvl.
func (s *Snapshot) groupAt(reqs []Request, order []int, lvl int, opts Options) ([]*Assignment, bool, error) {
	mainReq := reqs[order[0]]
	p, err := s.newPlan(mainReq, opts)
	if err != nil {
		return nil, false, err
	}
	p.computeCaps()
	var cands []*domain
	for _, d := range s.byLevel[lvl] {
		if p.holds(d, int64(mainReq.Count)) {
			cands = append(cands, d)
		}
	}
	slices.SortFunc(cands, func(a, b *domain) int {
		if p.tighter(a, b) {
			return -1
		}
		if p.tighter(b, a) {
			return 1
		}
		return 0
	})
	for _, cand := range cands {
		out := make([]*Assignment, len(reqs))
		var taken []Usage
		ok := true
		for _, i := range order {
			q, err := s.newPlan(reqs[i], opts)
			if err != nil {
				s.releaseAll(taken)
				return nil, false, err
			}
			q.computeCaps()
			count := int64(reqs[i].Count)
			if !q.holds(cand, count) {
				ok = false
				break
			}
			s.assigned[cand.id] = count
			out[i] = q.result(q.descend([]*domain{cand}))
			u, err := s.Commit(out[i], reqs[i].PodRequests)
			if err != nil {
				s.releaseAll(taken)
				return nil, false, err
			}
			taken = append(taken, u)
		}
		s.releaseAll(taken)
		if ok {
			return out, true, nil
		}
	}
	return nil, false, nil
}

// placeInOrder places the requests one after another, each taking the
// capacity of the ones before, and gives the capacity back at the end.
func (s *Snapshot) placeInOrder(reqs []Request, opts Options) ([]*Assignment, error) {
	out := make([]*Assignment, len(reqs))
	var taken []Usage
	defer func() { s.releaseAll(taken) }()
	for i, r := range reqs {
		a, err := s.findAssignment(r, opts)
		if err != nil {
			return nil, err
		}
		u, err := s.Commit(a, r.PodRequests)
		if err != nil {
			return nil, err
		}
		out[i] = a
		taken = append(taken, u)
	}
	return out, nil
}

func (s *Snapshot) releaseAll(us []Usage) {
	for _, u := range us {
		s.Release(u)
	}
}
