package placement

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// UnitPreemption says where sub (the pod sets a split puts on target t's
// flavor) fits on t once workloads are preempted there (DecidePreemption
// on t alone, with sub's need), or why not ("" when nothing on t may be
// preempted for it).
type UnitPreemption func(sub *strata.Workload, t *Target) (*PreemptionChoice, string)

// SplitPreemption is how DecideSplitPreemption walks a workload's units.
type SplitPreemption struct {
	// Quota is what the quota says of the pod sets placed on one flavor of
	// a cluster that fit there now (DecideSplit's).
	Quota SplitQuota
	// HubFits says whether the hub's queue holds the pod sets put on a
	// flavor that must preempt, and whether only by borrowing (nil: it
	// does, without); the worker queue's quota is the preemption's to
	// free.
	HubFits func(flavor string, placed *strata.Workload) (fits, borrows bool)
	// TryNextOnBorrow is whenCanBorrow: TryNextFlavor (DecideSplit's).
	TryNextOnBorrow bool
	// FirstPreempting is whenCanPreempt: Preempt. The failing unit's
	// flavor is the first (in the queue's order) where a preemption lets
	// it in without borrowing, else the first where it does by borrowing,
	// as preemption.ChooseFlavor ranks flavors (preemption.Better: the
	// hub does not see whose workloads the worker's search would take,
	// nor how high it borrows, and takes the hub queue's borrowing for
	// the worker queue's); under whenCanPreempt: Preempt with
	// whenCanBorrow: Borrow, the first where it does either way.
	FirstPreempting bool
	// Preempt is the preemption for the pod sets on one target.
	Preempt UnitPreemption
}

// DecideSplitPreemption chooses the one worker where a workload of
// several flavor assignment units (pod sets, or PodSet groups) that fits
// nowhere, on one flavor or split, fits once workloads are preempted on
// one of its flavors, the other units keeping the flavors where they fit
// now: as that worker's agent preempts for such a workload (each unit on
// the first flavor where it fits, workload.PlanByUnit; the first that
// fits on none on the flavor whose preemption lets it in, with the pod
// sets the walk put there before it; every later unit that fits nowhere
// on that same flavor). It is for workloads DecideSplit places nowhere
// and DecidePreemption finds no one flavor for. Of the clusters where it
// so fits, the one that preempts least wins (fewest workloads in the
// bands, then the lowest priority, then the cluster's name). The choice
// names every pod set's flavor (PodSetFlavors) and its Flavor is the one
// where it preempts; it returns nil and why not when nothing helps ("" when
// no cluster's queue preempts for it). It reserves nothing: call the
// choice's Reserve.
func (p *Policy) DecideSplitPreemption(wl *strata.Workload, flavors []string, targets []*Target, sp SplitPreemption) (*PreemptionChoice, string) {
	if len(wl.Spec.PodSets) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil, ""
	}
	hubFits := sp.HubFits
	if hubFits == nil {
		hubFits = func(string, *strata.Workload) (bool, bool) { return true, false }
	}
	clusters, byCluster := byClusterInOrder(flavors, targets)
	var options []*PreemptionChoice
	var why []string
	for _, c := range clusters {
		ts := byCluster[c]
		if len(ts) < 2 {
			continue
		}
		if choice, w := p.splitPreemptionOn(wl, ts, sp, hubFits); choice != nil {
			options = append(options, choice)
		} else if w != "" {
			why = append(why, w)
		}
	}
	if len(options) == 0 {
		return nil, strings.Join(why, "; ")
	}
	slices.SortStableFunc(options, func(a, b *PreemptionChoice) int {
		return cmp.Or(cmp.Compare(a.Workloads, b.Workloads), cmp.Compare(a.UpTo, b.UpTo), cmp.Compare(a.Cluster, b.Cluster))
	})
	best := options[0]
	if len(options) > 1 {
		var others []string
		for _, o := range options[1:] {
			others = append(others, fmt.Sprintf("%s/%s: up to priority %d, %d workloads", o.Cluster, o.Flavor, o.UpTo, o.Workloads))
		}
		best.Reason += "; also possible: " + strings.Join(others, "; ")
	}
	return best, ""
}

// splitPreemptionOn is DecideSplitPreemption on one cluster's targets
// (in the flavors' order).
func (p *Policy) splitPreemptionOn(wl *strata.Workload, ts []*Target, sp SplitPreemption, hubFits func(string, *strata.Workload) (bool, bool)) (*PreemptionChoice, string) {
	c := ts[0].Cluster
	units := unitFlavors(ts, func(t *Target) *tas.Snapshot { return t.free })
	quota := func(f int, placed *strata.Workload) workload.QuotaAnswer { return sp.Quota(c, ts[f].Flavor, placed) }
	// The first unit that fits nowhere now, and the pod sets the walk put
	// on each flavor before it.
	var failed []int
	var before map[int][]int
	if plan, ok := workload.PlanByUnit(wl, units, quota, sp.TryNextOnBorrow, p.opts, func(unit []int, onFlavor map[int][]int) (int, bool) {
		failed, before = unit, maps.Clone(onFlavor)
		return 0, false
	}); ok {
		plan.Release(units)
		return nil, "" // it fits: DecideSplit's
	}
	if failed == nil {
		return nil, ""
	}
	// Its flavor: where a preemption lets it in with the pod sets put
	// there before it.
	chosen, borrowing := -1, -1
	var found, borrowingChoice *PreemptionChoice
	var why []string
	for f, t := range ts {
		sub := workload.WithPodSets(wl, slices.Concat(before[f], failed))
		if workload.FlavorRefusal(units[f].Def, sub) != "" {
			continue
		}
		fits, borrows := hubFits(t.Flavor, sub)
		if !fits {
			continue
		}
		choice, w := sp.Preempt(sub, t)
		if choice == nil {
			if w != "" {
				why = append(why, w)
			}
			continue
		}
		if !borrows || sp.FirstPreempting && !sp.TryNextOnBorrow {
			chosen, found = f, choice
			break
		}
		if borrowing < 0 {
			borrowing, borrowingChoice = f, choice
		}
	}
	if chosen < 0 {
		chosen, found = borrowing, borrowingChoice
	}
	if chosen < 0 {
		return nil, strings.Join(why, "; ")
	}
	// The whole walk, every unit that fits nowhere on that flavor.
	plan, ok := workload.PlanByUnit(wl, units, quota, sp.TryNextOnBorrow, p.opts, func(unit []int, _ map[int][]int) (int, bool) {
		return chosen, workload.FlavorRefusal(units[chosen].Def, workload.WithPodSets(wl, unit)) == ""
	})
	if !ok {
		return nil, ""
	}
	plan.Release(units)
	if plan.Distinct() < 2 || !slices.Equal(plan.PendingFlavors(), []int{chosen}) {
		return nil, "" // all on one flavor: DecidePreemption's
	}
	onChosen := plan.OnFlavor(chosen)
	if len(onChosen) != len(before[chosen])+len(failed) {
		// Units after the failing one joined it there: the preemption is
		// for all of them.
		sub := workload.WithPodSets(wl, onChosen)
		if fits, _ := hubFits(ts[chosen].Flavor, sub); !fits {
			return nil, ""
		}
		if found, _ = sp.Preempt(sub, ts[chosen]); found == nil {
			return nil, ""
		}
	}
	out := *found
	out.PodSets = nil
	var words []string
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		f := ts[plan.Flavors[i]].Flavor
		place := PodSetPlacement{Name: ps.Name, Flavor: f, Assignment: plan.Assignments[i], Requests: workload.Request(ps).PodRequests}
		if plan.Flavors[i] == chosen {
			k := slices.IndexFunc(found.PodSets, func(x PodSetPlacement) bool { return x.Name == ps.Name })
			if k < 0 {
				return nil, ""
			}
			place.Assignment = found.PodSets[k].Assignment
			words = append(words, fmt.Sprintf("pod set %s on %s once others are preempted", ps.Name, f))
		} else {
			words = append(words, fmt.Sprintf("pod set %s on %s now", ps.Name, f))
		}
		out.PodSets = append(out.PodSets, place)
	}
	out.Reason = fmt.Sprintf("its pod sets fit on no one flavor, nor on different flavors now; on %s: %s, as its agent preempts for such a workload (%s)",
		c, strings.Join(words, ", "), found.Reason)
	return &out, ""
}

// Split says whether the choice places the workload's pod sets on
// different flavors (DecideSplitPreemption).
func (c *PreemptionChoice) Split() bool { return splitPodSets(c.Flavor, c.PodSets) }

// PodSetFlavors are the pod sets' flavors of a split choice
// (status.placement.podSetFlavors), nil for a choice on one flavor.
func (c *PreemptionChoice) PodSetFlavors() []strata.PodSetFlavor {
	return podSetFlavorsOf(c.Flavor, c.PodSets)
}

// splitPodSets says whether pod sets placed on flavor (their own, where
// named) are on different flavors.
func splitPodSets(flavor string, podSets []PodSetPlacement) bool {
	for _, ps := range podSets {
		if ps.Flavor != "" && ps.Flavor != flavor {
			return true
		}
	}
	return false
}

// podSetFlavorsOf are the flavors of pod sets placed on flavor (their
// own, where named), nil when all are on it.
func podSetFlavorsOf(flavor string, podSets []PodSetPlacement) []strata.PodSetFlavor {
	if !splitPodSets(flavor, podSets) {
		return nil
	}
	out := make([]strata.PodSetFlavor, len(podSets))
	for i, ps := range podSets {
		out[i] = strata.PodSetFlavor{Name: ps.Name, Flavor: cmp.Or(ps.Flavor, flavor)}
	}
	return out
}
