package tas

import (
	"cmp"
	"slices"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// A leader-and-workers group (two pod sets, one of a single pod: an LWS
// leader, an MPI launcher) is placed as Kueue's engine places it — KEP-2724
// asks only for a common domain, and leaves the split below it open:
//
//   - every domain counts the workers it holds alone, whether the leader
//     fits on one of its hosts, and the workers it holds beside the leader
//     (on a host: the workers that fit in what the leader leaves; above:
//     the sum of its children's, less the fewest any child that holds the
//     leader gives up for it);
//   - the common domain is the one of the level that holds the leader and
//     every worker with the fewest workers beside the leader, ties in
//     name order;
//   - below it, level by level, the children are walked from the most
//     workers they hold down (ties in name order): the first child that
//     holds the leader takes it and as many workers as fit beside it,
//     unless a child holds the leader and every worker left (then the
//     tightest such child takes them all); the workers left go as a single
//     pod set's, the last child the tightest that holds what is left.
//
// Each level is walked over the children of all the domains chosen at the
// level above together, as Kueue's engine does. When the walk cannot place
// everything, Strata puts the leader where it costs the fewest workers,
// which always fits (Kueue gives up).

// leaderShape says whether reqs is a leader-and-workers group placed this
// way, and which request leads (Kueue's choice: the second unless it is
// the larger). Groups of another shape, slices, avoided domains,
// LeastFreeCapacity, balanced placement and topologies without hosts keep
// the group search of group.go.
func (s *Snapshot) leaderShape(reqs []Request, opts Options) (li, wi int, ok bool) {
	if !s.hostIsLowest || len(reqs) != 2 {
		return 0, 0, false
	}
	li, wi = 1, 0
	if reqs[1].Count > reqs[0].Count {
		li, wi = 0, 1
	}
	l, w := reqs[li], reqs[wi]
	if l.Count != 1 || w.Count == 0 || len(l.Layers)+len(w.Layers) > 0 || len(l.Avoid)+len(w.Avoid) > 0 ||
		opts.algorithm(w.Mode) != configv1beta1.BestFit || w.Mode == Preferred && opts.BalancedPlacement {
		return 0, 0, false
	}
	return li, wi, true
}

// leaderRoom is what one domain holds of a leader-and-workers group.
type leaderRoom struct {
	alone, withLeader int64
	leads             bool
}

// leaderRooms computes the rooms of domains, memoized by domain id.
type leaderRooms struct {
	s      *Snapshot
	lp, wp *plan
	memo   []leaderRoom
	known  []bool
	free   Vector
	// odd: a host with other than one node (not a tree this walks).
	odd bool
}

func (r *leaderRooms) of(d *domain) leaderRoom {
	if r.known[d.id] {
		return r.memo[d.id]
	}
	var room leaderRoom
	s := r.s
	if d.level == s.depth-1 {
		if len(d.bins) != 1 || d.bins[0].count != 1 {
			r.odd = true
		} else if b := d.bins[0]; b.usable {
			clear(r.free) // resources the snapshot does not hold yet: none free
			copy(r.free, s.binFree[int(b.slot)*s.stride:int(b.slot+1)*s.stride])
			workersMay := !r.wp.filter || r.wp.admits(b)
			if workersMay {
				room.alone = r.wp.dem.fit(r.free)
			}
			room.withLeader = room.alone
			if (!r.lp.filter || r.lp.admits(b)) && r.lp.dem.fit(r.free) >= 1 {
				room.leads = true
				for _, n := range r.lp.dem {
					r.free[n.idx] -= n.amount
				}
				room.withLeader = 0
				if workersMay {
					room.withLeader = r.wp.dem.fit(r.free)
				}
			}
		}
	} else {
		fewest := int64(-1)
		for _, c := range d.children {
			cr := r.of(c)
			room.alone += cr.alone
			if cr.leads {
				room.leads = true
				if lost := cr.alone - cr.withLeader; fewest < 0 || lost < fewest {
					fewest = lost
				}
			}
		}
		if room.leads {
			room.withLeader = room.alone - fewest
		}
	}
	r.memo[d.id], r.known[d.id] = room, true
	return room
}

// groupWithLeader places a leader-and-workers group (leaderShape) in one
// domain of level lvl; false when no domain of it holds the group. It
// returns applies false, having done nothing, for a tree it does not walk
// (a host with other than one node).
func (s *Snapshot) groupWithLeader(reqs []Request, li, wi, lvl int, opts Options) (out []*Assignment, ok, applies bool, err error) {
	rooms, err := s.newLeaderRooms(reqs, li, wi, opts)
	if err != nil {
		return nil, false, true, err
	}
	wp := rooms.wp
	count := int64(reqs[wi].Count)
	// The domain with the fewest workers beside the leader, ties in
	// name order. A domain holds at most as many beside the leader as
	// alone (podCap, kept per demand) and at least that less the most a
	// host loses to the leader (lost): domains are looked at from the
	// fewest workers alone up, and one that cannot beat the best so far
	// is not walked down to its hosts.
	wp.computeCaps()
	type candidate struct {
		d   *domain
		pos int // in name order
	}
	var cands []candidate
	for _, d := range wp.inOrder(lvl) {
		if d.level == lvl && s.podCap[d.id] >= count {
			cands = append(cands, candidate{d, len(cands)})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(s.podCap[a.d.id], s.podCap[b.d.id]) })
	lost := mostLost(rooms.lp.dem, wp.dem)
	var cand *domain
	var fewest int64
	candPos := 0
	for _, c := range cands {
		if lb := s.podCap[c.d.id] - lost; cand != nil && (lb > fewest || lb == fewest && c.pos > candPos) {
			continue
		}
		r := rooms.of(c.d)
		if r.leads && r.withLeader >= count && (cand == nil || r.withLeader < fewest || r.withLeader == fewest && c.pos < candPos) {
			cand, fewest, candPos = c.d, r.withLeader, c.pos
		}
	}
	if rooms.odd {
		return nil, false, false, nil
	}
	if cand == nil {
		return nil, false, true, nil
	}
	return s.leaderResult(rooms, []leaderPart{{cand, count, true}}, li, wi)
}

// groupWithLeaderSpread places a leader-and-workers group (leaderShape)
// that no domain holds, as Kueue's engine places a preferred group then:
// the leader in the top-level domain with the most workers beside it
// (ties in name order), with those workers; the workers left in the other
// top-level domains, the most first and the last the tightest that holds
// the rest; then level by level below them all together. ok is false
// when they do not fit so (the caller then places the pod sets one after
// the other); applies as for groupWithLeader.
func (s *Snapshot) groupWithLeaderSpread(reqs []Request, li, wi int, opts Options) (out []*Assignment, ok, applies bool, err error) {
	rooms, err := s.newLeaderRooms(reqs, li, wi, opts)
	if err != nil || s.depth == 0 {
		return nil, false, true, err
	}
	tops := s.root.children // in name order: ties go to the first by name
	rs := make([]leaderRoom, len(tops))
	lead := -1
	for i, d := range tops {
		rs[i] = rooms.of(d)
		if rs[i].leads && (lead < 0 || rs[i].withLeader > rs[lead].withLeader) {
			lead = i
		}
	}
	if rooms.odd {
		return nil, false, false, nil
	}
	if lead < 0 {
		return nil, false, true, nil
	}
	count := int64(reqs[wi].Count)
	first := min(rs[lead].withLeader, count)
	rs[lead].alone = 0
	take, _, fits := walkLeaderFirst(rs, count-first, false)
	if !fits {
		return nil, false, true, nil
	}
	take[lead] += first
	var parts []leaderPart
	for i, d := range tops {
		if take[i] > 0 || i == lead {
			parts = append(parts, leaderPart{d, take[i], i == lead})
		}
	}
	return s.leaderResult(rooms, parts, li, wi)
}

// newLeaderRooms makes the plans of a leader-and-workers group and their
// rooms.
func (s *Snapshot) newLeaderRooms(reqs []Request, li, wi int, opts Options) (*leaderRooms, error) {
	lp, err := s.newPlan(reqs[li], opts)
	if err != nil {
		return nil, err
	}
	wp, err := s.newPlan(reqs[wi], opts)
	if err != nil {
		return nil, err
	}
	n := len(s.parentID)
	if len(s.leaderKnown) < n {
		s.leaderMemo, s.leaderKnown = make([]leaderRoom, n), make([]bool, n)
	}
	clear(s.leaderKnown)
	return &leaderRooms{s: s, lp: lp, wp: wp, memo: s.leaderMemo, known: s.leaderKnown, free: make(Vector, max(s.stride, len(s.res.names)))}, nil
}

// leaderResult walks the group down from parts (domains of one level) to
// the hosts and returns the assignments; applies false when the walk
// meets a tree it does not walk.
func (s *Snapshot) leaderResult(rooms *leaderRooms, parts []leaderPart, li, wi int) (out []*Assignment, ok, applies bool, err error) {
	leaderLeaf, workerLeaves := rooms.descend(parts)
	if rooms.odd || leaderLeaf == nil {
		return nil, false, false, nil
	}
	out = make([]*Assignment, 2)
	res := &plan{s: s}
	s.assigned[leaderLeaf.id] = 1
	out[li] = res.result([]*domain{leaderLeaf})
	s.assigned[leaderLeaf.id] = 0
	leaves := make([]*domain, 0, len(workerLeaves))
	for _, lc := range workerLeaves {
		s.assigned[lc.d.id] = lc.n
		leaves = append(leaves, lc.d)
	}
	out[wi] = res.result(leaves)
	for _, d := range leaves {
		s.assigned[d.id] = 0
	}
	return out, true, true, nil
}

// mostLost bounds the workers (demand w) a host can hold less beside a
// leader (demand l): for each resource both ask for, the workers that
// the leader's share of it would have held.
func mostLost(l, w demand) int64 {
	most := int64(0)
	for _, wn := range w {
		for _, ln := range l {
			if ln.idx == wn.idx {
				most = max(most, (ln.amount+wn.amount-1)/wn.amount)
			}
		}
	}
	return most
}

// leafCount is n pods on leaf d.
type leafCount struct {
	d *domain
	n int64
}

// leaderPart is n workers, and the leader when lead, in domain d.
type leaderPart struct {
	d    *domain
	n    int64
	lead bool
}

// descend splits the leader and the workers of frontier (domains of one
// level, one of them leading) level by level and returns the leader's
// host and the workers' hosts in name order; a nil leader when they do
// not fit (the rooms said they do). Each level splits over the children of
// all the domains the level above chose together, as Kueue's engine does.
func (r *leaderRooms) descend(frontier []leaderPart) (*domain, []leafCount) {
	for len(frontier[0].d.children) > 0 {
		var cands []*domain
		var n int64
		lead := false
		for _, p := range frontier {
			cands = append(cands, p.d.children...)
			n += p.n
			lead = lead || p.lead
		}
		take, at, ok := r.split(cands, n, lead)
		if !ok {
			return nil, nil
		}
		next := frontier[:0:0]
		for i, c := range cands {
			if take[i] > 0 || at == i {
				next = append(next, leaderPart{c, take[i], at == i})
			}
		}
		frontier = next
	}
	var leader *domain
	var workers []leafCount
	for _, p := range frontier {
		if p.lead {
			leader = p.d
		}
		if p.n > 0 {
			workers = append(workers, leafCount{p.d, p.n})
		}
	}
	return leader, workers
}

// split divides n workers, and the leader when lead, among children (in
// name order): the walk described above; when it cannot place them
// all, the leader goes to the child where it costs the fewest workers and
// the workers are walked around it. It returns the workers per child, the
// leader's child (-1: none) and whether everything was placed.
func (r *leaderRooms) split(children []*domain, n int64, lead bool) ([]int64, int, bool) {
	rooms := make([]leaderRoom, len(children))
	for i, c := range children {
		rooms[i] = r.of(c)
	}
	if take, at, ok := walkLeaderFirst(rooms, n, lead); ok || !lead {
		return take, at, ok
	}
	at := -1
	for i, room := range rooms {
		if room.leads && (at < 0 || room.alone-room.withLeader < rooms[at].alone-rooms[at].withLeader) {
			at = i
		}
	}
	if at < 0 {
		return nil, -1, false
	}
	rest := make([]leaderRoom, len(rooms))
	copy(rest, rooms)
	rest[at].alone = rooms[at].withLeader
	take, _, ok := walkLeaderFirst(rest, n, false)
	return take, at, ok
}

// walkLeaderFirst is the walk over one domain's children, given their
// rooms in name order.
func walkLeaderFirst(rooms []leaderRoom, n int64, lead bool) ([]int64, int, bool) {
	order := make([]int, len(rooms))
	for i := range order {
		order[i] = i
	}
	// The most workers first; ties keep name order.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rooms[b].alone, rooms[a].alone) })
	take := make([]int64, len(rooms))
	at := -1
	// tightest is the first of order[from:] with the fewest (of) >= need
	// among those ok accepts; -1 when none.
	tightest := func(from int, need int64, of func(leaderRoom) int64, ok func(leaderRoom) bool) int {
		best := -1
		for _, i := range order[from:] {
			if ok(rooms[i]) && of(rooms[i]) >= need && (best < 0 || of(rooms[i]) < of(rooms[best])) {
				best = i
			}
		}
		return best
	}
	withLeader := func(r leaderRoom) int64 { return r.withLeader }
	alone := func(r leaderRoom) int64 { return r.alone }
	leads := func(r leaderRoom) bool { return r.leads }
	every := func(leaderRoom) bool { return true }
	for k, i := range order {
		if n == 0 && !lead {
			break
		}
		room := rooms[i]
		if lead {
			if room.leads && room.withLeader >= n {
				t := tightest(k, n, withLeader, leads)
				take[t], at = n, t
				return take, at, true
			}
			if room.leads {
				at, lead = i, false
			}
			take[i] = min(room.withLeader, n)
			n -= take[i]
			continue
		}
		if room.alone >= n {
			t := tightest(k, n, alone, every)
			take[t] += n
			return take, at, true
		}
		take[i] = room.alone
		n -= room.alone
	}
	return take, at, n == 0 && !lead
}
