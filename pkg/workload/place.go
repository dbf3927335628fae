package workload

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// Place places every pod set of wl on one flavor's snapshot — pod sets of a
// group (podset-group-name) together in one domain — and takes their
// capacity. A pod set (not of a group) with a hub's topology hint goes
// into the hinted domains when they have room for it (see
// tas.Snapshot.FindAssignmentFollowingHint), else where the engine puts it. It
// returns the assignment of each pod set (in spec order) and the usage
// taken; Release the usage to undo. On error nothing is taken.
func Place(snap *tas.Snapshot, topologyName string, flavorTolerations []corev1.Toleration, wl *strata.Workload, opts tas.Options) ([]*tas.Assignment, []tas.Usage, error) {
	return PlaceSpread(snap, topologyName, flavorTolerations, wl, nil, opts)
}

// PlaceSpread is Place with topology spreading (podset-topology-spreading):
// a pod set that asks for it keeps out of the domains that hold more than
// their share of the units of admitted that count for it (SpreadCounts,
// SpreadAvoid). admitted are the workloads admitted on snap; nil counts
// none.
func PlaceSpread(snap *tas.Snapshot, topologyName string, flavorTolerations []corev1.Toleration, wl *strata.Workload, admitted []*strata.Workload, opts tas.Options) ([]*tas.Assignment, []tas.Usage, error) {
	return PlaceAvoiding(snap, topologyName, flavorTolerations, wl, func(ps *strata.PodSet) []tas.Avoid {
		var avoid []tas.Avoid
		if sp := ps.TopologyRequest.GetTopologySpreading(); sp != nil {
			for _, rule := range sp.Rules {
				// A level this topology lacks: the rule does not apply
				// here (Kueue's: the rule is ignored for the flavor).
				if slices.Contains(snap.Levels(), rule.TopologyKey) {
					avoid = append(avoid, SpreadAvoid(rule, SpreadCounts(snap, admitted, wl, sp, rule.TopologyKey))...)
				}
			}
		}
		return avoid
	}, opts)
}

// PlaceAvoiding is Place where each pod set also keeps out of the domains
// avoid gives for it (nil: none): topology spreading, counted by the
// caller.
func PlaceAvoiding(snap *tas.Snapshot, topologyName string, flavorTolerations []corev1.Toleration, wl *strata.Workload,
	avoid func(ps *strata.PodSet) []tas.Avoid, opts tas.Options) ([]*tas.Assignment, []tas.Usage, error) {
	podSets := wl.Spec.PodSets
	// A hint that does not parse is only a hint: the pods are placed
	// without it.
	hints, _ := TopologyHints(wl)
	assignments := make([]*tas.Assignment, len(podSets))
	var taken []tas.Usage
	fail := func(err error) ([]*tas.Assignment, []tas.Usage, error) {
		for _, u := range taken {
			snap.Release(u)
		}
		return nil, nil, err
	}
	for i := range podSets {
		if assignments[i] != nil {
			continue
		}
		members := groupMembers(podSets, i)
		reqs := make([]tas.Request, len(members))
		for k, m := range members {
			ps := &podSets[m]
			if err := ValidateAgainstTopology(ps.TopologyRequest, topologyName, snap.Levels()); err != nil {
				return fail(fmt.Errorf("pod set %s: %w", ps.Name, err))
			}
			reqs[k] = Request(ps)
			// A new slice: the pod set's may be shared with a cache.
			reqs[k].Tolerations = slices.Concat(reqs[k].Tolerations, flavorTolerations)
			if avoid != nil {
				reqs[k].Avoid = slices.Concat(reqs[k].Avoid, avoid(ps))
			}
		}
		var as, commit []*tas.Assignment
		if h := hints[podSets[i].Name]; h != nil && len(members) == 1 {
			if a, err := snap.FindAssignmentFollowingHint(reqs[0], h, opts); err == nil {
				as = []*tas.Assignment{a}
				commit = as
			}
		}
		var err error
		if as == nil {
			commit, as, err = snap.FindGroupAssignmentWithNodes(reqs, opts)
		}
		if err != nil {
			if len(podSets) > 1 {
				err = fmt.Errorf("pod set %s: %w", podSets[i].Name, err)
			}
			return fail(err)
		}
		for k, m := range members {
			u, err := snap.Commit(commit[k], reqs[k].PodRequests)
			if err != nil {
				return fail(err)
			}
			taken = append(taken, u)
			assignments[m] = as[k]
		}
	}
	return assignments, taken, nil
}

// groupMembers returns i and the later pod sets of its group, if it has one.
func groupMembers(podSets []strata.PodSet, i int) []int {
	r := podSets[i].TopologyRequest
	if r == nil || r.PodSetGroupName == nil {
		return []int{i}
	}
	members := []int{i}
	for k := i + 1; k < len(podSets); k++ {
		if o := podSets[k].TopologyRequest; o != nil && o.PodSetGroupName != nil && *o.PodSetGroupName == *r.PodSetGroupName {
			members = append(members, k)
		}
	}
	return members
}
