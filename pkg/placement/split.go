package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// SplitQuota is what the quota says of the pod sets of a workload placed
// on one flavor of a cluster (placed holds them; workload.QuotaAnswer):
// its ClusterQueue's, and the worker queue's where it is known.
type SplitQuota func(cluster, flavor string, placed *strata.Workload) workload.QuotaAnswer

// DecideSplit places a workload of several flavor assignment units (pod
// sets, or PodSet groups: workload.FlavorUnits) with its units on
// different flavors of one cluster, as that cluster's agent admits a
// workload whose units fit on no one flavor: the units in order, each on
// the first of the cluster's targets, in the flavors' order, whose quota
// and free capacity hold it (workload.PlaceByUnit; under tryNextOnBorrow,
// Kueue's whenCanBorrow: TryNextFlavor, a flavor where it fits only by
// borrowing after those where it fits without). It is for a workload
// that fits on no one target: a cluster where the walk puts every unit
// on one flavor is no candidate. Of the clusters where it fits, the most
// compact wins, as Decide compares candidates: the lowest height above
// the leaf level of the domain that holds the unit placed least compactly,
// then the lowest sum of the units' heights, then the cluster's name. It
// returns nil when it fits on no cluster so, or has a single unit.
// Unavailable and unloaded targets are skipped; the caller filters the
// others (eligibility, backoffs). It does not reserve: call the
// decision's Reserve.
func (p *Policy) DecideSplit(wl *strata.Workload, flavors []string, targets []*Target, quota SplitQuota, tryNextOnBorrow bool) *Decision {
	if len(wl.Spec.PodSets) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil
	}
	clusters, byCluster := byClusterInOrder(flavors, targets)
	type option struct {
		cluster     string
		ts          []*Target
		flavors     []int
		assignments []*tas.Assignment
		worst, sum  int
		reasons     []string
	}
	var options []option
	for _, c := range clusters {
		ts := byCluster[c]
		if len(ts) < 2 {
			continue
		}
		units := unitFlavors(ts, func(t *Target) *tas.Snapshot { return t.free })
		placed, ok := workload.PlaceByUnit(wl, units, func(f int, placed *strata.Workload) workload.QuotaAnswer {
			return quota(c, ts[f].Flavor, placed)
		}, tryNextOnBorrow, p.opts)
		if !ok {
			continue
		}
		o := option{cluster: c, ts: ts, flavors: placed.Flavors, assignments: placed.Assignments}
		// Each pod set's domain on its flavor, while the walk's capacity
		// is still taken (as Decide measures a placement).
		for i := range wl.Spec.PodSets {
			t := ts[placed.Flavors[i]]
			domain := t.free.Enclosing([]*tas.Assignment{placed.Assignments[i]})
			height := leafDepth(t.Levels()) - len(domain)
			o.worst, o.sum = max(o.worst, height), o.sum+height
			where := fmt.Sprintf("spread over %s domains", tas.LevelName(t.Levels()[0]))
			if len(domain) > 0 {
				where = fmt.Sprintf("in %s %s", tas.LevelName(t.Levels()[len(domain)-1]), strings.Join(domain, "/"))
			}
			o.reasons = append(o.reasons, fmt.Sprintf("pod set %s on %s %s", wl.Spec.PodSets[i].Name, t.Flavor, where))
		}
		placed.Release(units)
		if placed.Distinct() < 2 {
			continue // all on one flavor: Decide's answer stands
		}
		options = append(options, o)
	}
	if len(options) == 0 {
		return nil
	}
	slices.SortStableFunc(options, func(a, b option) int {
		return cmp.Or(cmp.Compare(a.worst, b.worst), cmp.Compare(a.sum, b.sum), cmp.Compare(a.cluster, b.cluster))
	})
	best := options[0]
	d := &Decision{Cluster: best.cluster, Flavor: best.ts[best.flavors[0]].Flavor}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		d.PodSets = append(d.PodSets, PodSetPlacement{Name: ps.Name, Flavor: best.ts[best.flavors[i]].Flavor,
			Assignment: best.assignments[i], Requests: workload.Request(ps).PodRequests})
	}
	for _, o := range options {
		d.Candidates = append(d.Candidates, Candidate{Cluster: o.cluster, Flavor: d.flavorsOf(o.ts, o.flavors), Fits: true, Reason: strings.Join(o.reasons, ", ")})
	}
	d.Reason = fmt.Sprintf("%s: its pod sets fit on no one flavor of any worker, and on different flavors of %s, as its agent admits such a workload: %s",
		best.cluster, best.cluster, strings.Join(best.reasons, ", "))
	if len(options) > 1 {
		d.Reason += "; " + runnersUp(d.Candidates[1:])
	}
	return d
}

// byClusterInOrder groups the available, loaded targets of flavors by
// cluster, each cluster's in the flavors' order; clusters in the order
// first met.
func byClusterInOrder(flavors []string, targets []*Target) ([]string, map[string][]*Target) {
	byCluster := map[string][]*Target{}
	var clusters []string
	for _, f := range flavors {
		for _, t := range targets {
			if t.Flavor != f || t.Unavailable != "" || !t.Loaded() {
				continue
			}
			if _, ok := byCluster[t.Cluster]; !ok {
				clusters = append(clusters, t.Cluster)
			}
			byCluster[t.Cluster] = append(byCluster[t.Cluster], t)
		}
	}
	return clusters, byCluster
}

// unitFlavors are a cluster's targets as flavors a unit may be placed on
// (workload.PlaceByUnit), on snapshot's view of each (nil: nothing goes
// there).
func unitFlavors(ts []*Target, snapshot func(*Target) *tas.Snapshot) []workload.UnitFlavor {
	units := make([]workload.UnitFlavor, len(ts))
	for i, t := range ts {
		units[i] = workload.UnitFlavor{Def: &strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: t.Flavor}},
			Snapshot: snapshot(t), TopologyName: cmp.Or(t.Topology, "of flavor "+t.Flavor)}
	}
	return units
}

// splitWhenEmpty are the clusters where wl's units would fit on
// different flavors with nothing running, quota not looked at.
func (p *Policy) splitWhenEmpty(wl *strata.Workload, flavors []string, targets []*Target) []string {
	return p.splitClusters(wl, flavors, targets, func(t *Target) *tas.Snapshot {
		s, err := t.emptySnapshot()
		if err != nil {
			return nil
		}
		return s
	})
}

// SplitLater amends d, a decision that fits nowhere even empty on one
// flavor of flavors, for a workload whose units (pod sets, or PodSet
// groups) would fit on different flavors (of all of its queue's, flavors
// here) of a worker among targets when that worker is empty: waiting
// helps, as DecideSplit places it once each has room within its quota.
func (p *Policy) SplitLater(d *Decision, wl *strata.Workload, flavors []string, targets []*Target) {
	if !d.NeverFits {
		return
	}
	if split := p.splitWhenEmpty(wl, flavors, targets); len(split) > 0 {
		d.NeverFits = false
		d.Reason = fmt.Sprintf("its pod sets fit on no one flavor, but on different flavors of %s once each has room there and in its quota; on one flavor: %s",
			strings.Join(split, ", "), d.Reason)
	}
}

// flavorsOf names the distinct flavors of a split, in the pod sets'
// order: "f1+f2".
func (d *Decision) flavorsOf(ts []*Target, flavors []int) string {
	var names []string
	for _, f := range flavors {
		if !slices.Contains(names, ts[f].Flavor) {
			names = append(names, ts[f].Flavor)
		}
	}
	return strings.Join(names, "+")
}

// Split says whether the decision places the workload's pod sets on
// different flavors (DecideSplit).
func (d *Decision) Split() bool { return splitPodSets(d.Flavor, d.PodSets) }

// PodSetFlavors are the pod sets' flavors of a split decision
// (status.placement.podSetFlavors), nil for a decision on one flavor.
func (d *Decision) PodSetFlavors() []strata.PodSetFlavor { return podSetFlavorsOf(d.Flavor, d.PodSets) }

// Reserve takes the decision's capacity on its chosen target (one of
// targets), or, for a split, on each of its flavors' targets, under key,
// until Target.Release (every flavor of the cluster: fleet.Release).
func (d *Decision) Reserve(targets []*Target, key string) error {
	var flavors []string
	for _, ps := range d.PodSets {
		if f := cmp.Or(ps.Flavor, d.Flavor); !slices.Contains(flavors, f) {
			flavors = append(flavors, f)
		}
	}
	if len(flavors) == 0 {
		flavors = []string{d.Flavor}
	}
	var done []*Target
	for _, f := range flavors {
		t := Find(targets, d.Cluster, f)
		if t == nil {
			for _, r := range done {
				r.Release(key)
			}
			return fmt.Errorf("no target %s/%s to reserve %s on", d.Cluster, f, key)
		}
		var assignments []*tas.Assignment
		var requests []corev1.ResourceList
		for _, ps := range d.PodSets {
			if cmp.Or(ps.Flavor, d.Flavor) == f {
				assignments, requests = append(assignments, ps.Assignment), append(requests, ps.Requests)
			}
		}
		if err := t.Reserve(key, assignments, requests); err != nil {
			for _, r := range done {
				r.Release(key)
			}
			return err
		}
		done = append(done, t)
	}
	return nil
}
