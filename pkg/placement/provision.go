package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// DecideProvisional places wl, which fits no target now, on a target whose
// worker provisions nodes for it: provisions says of a target that the
// worker queue the workload's copy lands in has a ProvisioningRequest
// check on the target's flavor (KEP-2724's delayed topology assignment:
// its agent reserves quota alone, asks the cluster autoscaler for nodes
// and assigns the topology on them). The nodes there now need not hold
// it; the topology must have every level the workload names, as the
// second pass places it on that topology. Of such targets, the first of
// flavors' order wins, then the first cluster by name: what the nodes
// there hold now says nothing of the nodes to come. The decision's pod
// sets carry no assignment: its reservation takes no capacity, its copy
// goes with no topology hint.
//
// The caller offers it only targets where quota holds the workload (the
// worker's agent reserves quota first) and only after it fits nowhere
// now, all pod sets on one flavor or split: a workload that can start at
// once goes where it can. A Decision without Cluster when no target
// provisions; its Reason says why only when one would but for the
// topology.
func (p *Policy) DecideProvisional(wl *strata.Workload, flavors []string, targets []*Target, provisions func(*Target) bool) *Decision {
	d := &Decision{}
	var mismatches []string
	for _, t := range targets {
		if !slices.Contains(flavors, t.Flavor) || t.Unavailable != "" || !t.Loaded() || !provisions(t) {
			continue
		}
		c := Candidate{Cluster: t.Cluster, Flavor: t.Flavor}
		if why := missingLevels(t, wl); why != "" {
			mismatches = append(mismatches, label(c)+": "+why)
			continue
		}
		c.Fits = true
		c.Reason = "provisions nodes for it (a ProvisioningRequest admission check)"
		d.Candidates = append(d.Candidates, c)
	}
	if len(d.Candidates) == 0 {
		if len(mismatches) > 0 {
			d.Reason = "no cluster that provisions nodes has its topology levels: " + strings.Join(mismatches, "; ")
		}
		return d
	}
	flavorPos := func(f string) int { return slices.Index(flavors, f) }
	slices.SortStableFunc(d.Candidates, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(flavorPos(a.Flavor), flavorPos(b.Flavor)), cmp.Compare(a.Cluster, b.Cluster))
	})
	best := d.Candidates[0]
	d.Cluster, d.Flavor, d.Provisional = best.Cluster, best.Flavor, true
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		d.PodSets = append(d.PodSets, PodSetPlacement{Name: ps.Name, Flavor: best.Flavor, Requests: workload.Request(ps).PodRequests})
	}
	d.Reason = fmt.Sprintf("%s: its nodes cannot hold it now, and its ClusterQueue there provisions nodes for it (a ProvisioningRequest admission check): "+
		"quota is reserved there at once, the topology assigned on the nodes provisioned", label(best))
	if len(d.Candidates) > 1 {
		d.Reason += "; " + runnersUp(d.Candidates[1:])
	}
	return d
}

// missingLevels says which topology level a pod set of wl names that t's
// topology lacks ("" when it has them all).
func missingLevels(t *Target, wl *strata.Workload) string {
	topology := cmp.Or(t.Topology, "of flavor "+t.Flavor)
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		if err := workload.ValidateAgainstTopology(ps.TopologyRequest, topology, t.Levels()); err != nil {
			return fmt.Sprintf("pod set %s: %v", ps.Name, err)
		}
	}
	return ""
}
