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
// Strata splits each domain's pods among its own children (Kueue, above
// the hosts, walks the children of all chosen domains together), and when
// the walk cannot place everything it puts the leader where it costs the
// fewest workers, which always fits.

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
	lp, err := s.newPlan(reqs[li], opts)
	if err != nil {
		return nil, false, true, err
	}
	wp, err := s.newPlan(reqs[wi], opts)
	if err != nil {
		return nil, false, true, err
	}
	n := len(s.parentID)
	if len(s.leaderKnown) < n {
		s.leaderMemo, s.leaderKnown = make([]leaderRoom, n), make([]bool, n)
	}
	clear(s.leaderKnown)
	rooms := &leaderRooms{s: s, lp: lp, wp: wp, memo: s.leaderMemo, known: s.leaderKnown, free: make(Vector, max(s.stride, len(s.res.names)))}
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
	lost := mostLost(lp.dem, wp.dem)
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
	leaderLeaf, workerLeaves := rooms.descend(cand, count)
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

// descend splits the leader and count workers under d, level by level,
// and returns the leader's host and the workers' hosts in name order;
// a nil leader when they do not fit (d's room said they do).
func (r *leaderRooms) descend(d *domain, count int64) (*domain, []leafCount) {
	var leader *domain
	var workers []leafCount
	var walk func(d *domain, n int64, lead bool) bool
	walk = func(d *domain, n int64, lead bool) bool {
		if len(d.children) == 0 {
			if lead {
				leader = d
			}
			if n > 0 {
				workers = append(workers, leafCount{d, n})
			}
			return true
		}
		take, leadAt, ok := r.split(d.children, n, lead)
		if !ok {
			return false
		}
		for i, c := range d.children {
			if take[i] > 0 || leadAt == i {
				if !walk(c, take[i], leadAt == i) {
					return false
				}
			}
		}
		return true
	}
	if !walk(d, count, true) {
		return nil, nil
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
	// The most workers first; ties keep name order (insertion sort:
	// the children of one domain are few).
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && rooms[order[j]].alone > rooms[order[j-1]].alone; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
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
