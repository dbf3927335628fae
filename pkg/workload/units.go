package workload

import (
	"slices"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// FlavorUnits are a workload's flavor assignment units (KEP-2724,
// "the introduction of PodSet Group changes the flavor assignment unit to
// PodSet Group"): each pod set alone, or the pod sets of one PodSet group
// together, as indices into its pod sets, in the order of each unit's
// first pod set.
func FlavorUnits(wl *strata.Workload) [][]int {
	var units [][]int
	seen := make([]bool, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		if seen[i] {
			continue
		}
		members := groupMembers(wl.Spec.PodSets, i)
		for _, m := range members {
			seen[m] = true
		}
		units = append(units, members)
	}
	return units
}

// UnitFlavor is a flavor a unit may be placed on: its definition, its
// snapshot (nil: its Topology is missing, and nothing goes there) and the
// workloads admitted there that topology spreading counts.
type UnitFlavor struct {
	Def      *strata.ResourceFlavor
	Snapshot *tas.Snapshot
	// TopologyName is the flavor's Topology.
	TopologyName string
	// Admitted are the workloads topology spreading counts there (nil:
	// none).
	Admitted []*strata.Workload
}

// QuotaAnswer is what a ClusterQueue's quota says of the pod sets placed
// on one flavor: whether they fit, whether only by borrowing, and how
// high in the cohort tree (the borrowing height; 0 without borrowing).
type QuotaAnswer struct {
	Fits, Borrows bool
	Height        int
}

// UnitPlacement is where PlaceByUnit put a workload's pod sets.
type UnitPlacement struct {
	// Flavors is each pod set's flavor (an index into the flavors), in
	// spec order.
	Flavors []int
	// Assignments is each pod set's assignment, in spec order (nil for a
	// pod set that is Pending).
	Assignments []*tas.Assignment
	// Pending marks the pod sets PlanByUnit put on a flavor without room
	// for them now (its noFit).
	Pending []bool
	// Taken is the capacity taken on each flavor's snapshot, by flavor
	// index: Release it to undo.
	Taken map[int][]tas.Usage
}

// Release gives back what p took on the flavors' snapshots.
func (p *UnitPlacement) Release(flavors []UnitFlavor) {
	for i, us := range p.Taken {
		for _, u := range us {
			flavors[i].Snapshot.Release(u)
		}
	}
	p.Taken = nil
}

// Distinct is how many flavors p uses.
func (p *UnitPlacement) Distinct() int {
	seen := map[int]bool{}
	for _, f := range p.Flavors {
		seen[f] = true
	}
	return len(seen)
}

// PlaceByUnit assigns each flavor unit of wl (FlavorUnits) its own flavor,
// as Kueue's flavor assigner walks a ClusterQueue's flavors for each
// PodSet group: the units in order, and for each the flavors in order,
// the first where its pods fit — the queue's quota (quota is asked for
// every pod set the walk put on that flavor so far, this unit's
// included) and the flavor's topology, with the units placed before it
// taken — is its flavor. One where it fits only by borrowing is put
// aside when tryNextOnBorrow (whenCanBorrow: TryNextFlavor) and taken
// only when no flavor holds it without borrowing, the lowest borrowing
// first. A flavor whose taints a pod set does not tolerate, or whose
// topology lacks a level a pod set names, is skipped.
//
// It takes the placement's capacity on the snapshots (Release gives it
// back); ok is false when some unit fits on no flavor, and nothing is
// taken then. A unit with a hub topology hint follows it as Place does.
func PlaceByUnit(wl *strata.Workload, flavors []UnitFlavor, quota func(flavor int, placed *strata.Workload) QuotaAnswer,
	tryNextOnBorrow bool, opts tas.Options) (UnitPlacement, bool) {
	return PlanByUnit(wl, flavors, quota, tryNextOnBorrow, opts, nil)
}

// NoFit decides the flavor of a unit (its pod sets' indices) that fits on
// no flavor now, given the pod sets the walk put on each flavor so far
// (by flavor index, in the walk's order): ok false ends the walk.
type NoFit func(unit []int, onFlavor map[int][]int) (flavor int, ok bool)

// PlanByUnit is PlaceByUnit where a unit that fits on no flavor is put,
// unplaced, on the flavor noFit gives (nil: the walk ends there, as
// PlaceByUnit's): a preemption there is to make room for it. Such pod
// sets have no assignment and are Pending in the placement; the quota of
// the units after them counts them on their flavor (Kueue counts a pod
// set that must preempt in its assignment's usage).
func PlanByUnit(wl *strata.Workload, flavors []UnitFlavor, quota func(flavor int, placed *strata.Workload) QuotaAnswer,
	tryNextOnBorrow bool, opts tas.Options, noFit NoFit) (UnitPlacement, bool) {
	p := UnitPlacement{
		Flavors:     make([]int, len(wl.Spec.PodSets)),
		Assignments: make([]*tas.Assignment, len(wl.Spec.PodSets)),
		Pending:     make([]bool, len(wl.Spec.PodSets)),
		Taken:       map[int][]tas.Usage{},
	}
	onFlavor := map[int][]int{} // pod sets put on each flavor so far
	for _, unit := range FlavorUnits(wl) {
		sub := WithPodSets(wl, unit)
		place := func(f int) bool {
			fl := flavors[f]
			if fl.Snapshot == nil || FlavorRefusal(fl.Def, sub) != "" {
				return false
			}
			as, taken, err := PlaceSpread(fl.Snapshot, fl.TopologyName, fl.Def.Spec.Tolerations, sub, fl.Admitted, opts)
			if err != nil {
				return false
			}
			for k, m := range unit {
				p.Flavors[m], p.Assignments[m] = f, as[k]
			}
			p.Taken[f] = append(p.Taken[f], taken...)
			onFlavor[f] = append(onFlavor[f], unit...)
			return true
		}
		type borrowing struct{ flavor, height int }
		var aside []borrowing
		placed := false
		for f := range flavors {
			q := quota(f, WithPodSets(wl, slices.Concat(onFlavor[f], unit)))
			if !q.Fits {
				continue
			}
			if q.Borrows && tryNextOnBorrow {
				aside = append(aside, borrowing{f, q.Height})
				continue
			}
			if place(f) {
				placed = true
				break
			}
		}
		if !placed {
			slices.SortStableFunc(aside, func(a, b borrowing) int { return a.height - b.height })
			for _, b := range aside {
				if place(b.flavor) {
					placed = true
					break
				}
			}
		}
		if !placed && noFit != nil {
			if f, ok := noFit(unit, onFlavor); ok {
				for _, m := range unit {
					p.Flavors[m], p.Pending[m] = f, true
				}
				onFlavor[f] = append(onFlavor[f], unit...)
				placed = true
			}
		}
		if !placed {
			p.Release(flavors)
			return UnitPlacement{}, false
		}
	}
	return p, true
}

// OnFlavor are the indices of the pod sets p puts on flavor f.
func (p *UnitPlacement) OnFlavor(f int) []int {
	var out []int
	for i, g := range p.Flavors {
		if g == f {
			out = append(out, i)
		}
	}
	return out
}

// PendingFlavors are the flavors where p put a pod set that must wait
// for room (PlanByUnit's noFit), each once, in order.
func (p *UnitPlacement) PendingFlavors() []int {
	var out []int
	for i, pending := range p.Pending {
		if pending && !slices.Contains(out, p.Flavors[i]) {
			out = append(out, p.Flavors[i])
		}
	}
	slices.Sort(out)
	return out
}

// WithPodSets is wl with only the pod sets at the given indices (in
// their spec order), for quota and placement; its pod sets are shared
// with wl's.
func WithPodSets(wl *strata.Workload, indices []int) *strata.Workload {
	sorted := slices.Clone(indices)
	slices.Sort(sorted)
	out := *wl
	out.Spec.PodSets = make([]strata.PodSet, 0, len(sorted))
	for _, i := range sorted {
		out.Spec.PodSets = append(out.Spec.PodSets, wl.Spec.PodSets[i])
	}
	return &out
}

// QuotaPlan walks wl's flavor units (FlavorUnits) over n flavors by
// quota alone, as PlanByUnit does without capacity: each unit on the
// first flavor f whose quota holds the pod sets put there so far with it
// (fits(f, placed)). The first unit that fits on no flavor goes on the
// flavor noFit gives (false ends the walk: no plan), and so does every
// later unit that fits on no flavor; they count on that flavor for the
// quota of the units after them, as Kueue counts a pod set that must
// preempt in its assignment's usage. It returns that flavor and every pod
// set put on it, fitting or not; f is -1 when every unit fits, or noFit
// gave none.
func QuotaPlan(wl *strata.Workload, n int, fits func(f int, placed *strata.Workload) bool, noFit NoFit) (f int, on []int) {
	onFlavor := map[int][]int{}
	f = -1
	for _, unit := range FlavorUnits(wl) {
		placed := false
		for g := range n {
			if fits(g, WithPodSets(wl, slices.Concat(onFlavor[g], unit))) {
				onFlavor[g] = append(onFlavor[g], unit...)
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		if f < 0 {
			g, ok := noFit(unit, onFlavor)
			if !ok {
				return -1, nil
			}
			f = g
		}
		onFlavor[f] = append(onFlavor[f], unit...)
	}
	if f < 0 {
		return -1, nil
	}
	return f, onFlavor[f]
}
