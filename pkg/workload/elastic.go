package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// Elastic Jobs (Kueue's KEP-77, with KEP-2724's unconstrained mode): a
// batch/v1 Job annotated kueue.x-k8s.io/elastic-job: "true" is resized
// while it runs without being stopped. Its Workload follows the Job's
// pod count; the agent's scheduler then brings the admission to it in
// place: down at once (the quota and the capacity of the pods gone are
// released, the pods that run keep their places), up once quota and
// capacity hold the added pods on the flavor the Job runs on (they are
// placed anywhere on it, unconstrained, and their gated pods released
// there). Kueue makes a Workload per size (a workload slice); Strata
// changes the one Workload.

// Elastic says whether a workload's job may be resized while it runs.
func Elastic(wl *strata.Workload) bool {
	return wl.Annotations[strata.ElasticJobAnnotation] == "true"
}

// ValidateElastic checks an elastic Job's pod set, as Kueue's webhook
// does: only unconstrained placement (KEP-2724's TAS supports no other
// for elastic Jobs yet), and not with partial admission (minCount), which
// owns the Job's parallelism.
func ValidateElastic(ps *strata.PodSet, annotations *field.Path) field.ErrorList {
	var errs field.ErrorList
	why := "a Job resized while it runs (" + strata.ElasticJobAnnotation + `: "true"`
	if r := ps.TopologyRequest; r != nil {
		for _, c := range []struct {
			key string
			set bool
		}{
			{strata.PodSetRequiredTopologyAnnotation, r.Required != nil},
			{strata.PodSetPreferredTopologyAnnotation, r.Preferred != nil},
			{strata.PodSetSliceRequiredTopologyAnnotation, r.PodSetSliceRequiredTopology != nil},
		} {
			if c.set {
				errs = append(errs, field.Forbidden(annotations,
					fmt.Sprintf("%s) is placed unconstrained: its pods may not name a topology (%s)", why, c.key)))
			}
		}
	}
	if ps.MinCount != nil {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(strata.JobMinParallelismAnnotation),
			why+") cannot also run with fewer pods (partial admission)"))
	}
	return errs
}

// Resize is a change of an admitted elastic workload's pod count.
type Resize struct {
	From, To int32
}

// ResizeOf says whether an admitted elastic workload's pod set asks for
// another count than its admission's, and so is to be resized in place:
// one pod set with a topology assignment, active, not finished, fully
// admitted (no check pending), with no failed node being replaced.
func ResizeOf(wl *strata.Workload) (Resize, bool) {
	a := wl.Status.Admission
	if !Elastic(wl) || a == nil || len(wl.Spec.PodSets) != 1 || len(a.PodSetAssignments) != 1 || !IsActive(wl) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) || AwaitingChecks(wl) || len(wl.Status.UnhealthyNodes) > 0 {
		return Resize{}, false
	}
	psa := a.PodSetAssignments[0]
	if psa.TopologyAssignment == nil || psa.Name != wl.Spec.PodSets[0].Name || psa.Count == wl.Spec.PodSets[0].Count || wl.Spec.PodSets[0].Count <= 0 {
		return Resize{}, false
	}
	return Resize{From: psa.Count, To: wl.Spec.PodSets[0].Count}, true
}

// GrowAssignment is a with the pods of added placed after its own: added's
// domains follow a's, so that the ranks a already has keep their domains
// and the new ranks go to the new places (a domain of both is listed
// twice unless it ends a and begins added).
func GrowAssignment(a, added *tas.Assignment) *tas.Assignment {
	out := &tas.Assignment{Levels: a.Levels, Domains: make([]tas.DomainAssignment, 0, len(a.Domains)+len(added.Domains))}
	for _, d := range a.Domains {
		out.Domains = append(out.Domains, tas.DomainAssignment{Values: d.Values, Count: d.Count})
	}
	for _, d := range added.Domains {
		if n := len(out.Domains); n > 0 && tas.DomainKey(out.Domains[n-1].Values) == tas.DomainKey(d.Values) {
			out.Domains[n-1].Count += d.Count
			continue
		}
		out.Domains = append(out.Domains, tas.DomainAssignment{Values: d.Values, Count: d.Count})
	}
	return out
}

// ShrinkAssignment is a for to pods. Ranked pods (an Indexed Job's) keep
// their ranks: the last ones go, as the Job controller removes the
// highest indexes. Otherwise each domain keeps the pods running there
// (live, by tas.DomainKey of its values), and the rest of to is kept in
// the order of a's domains.
func ShrinkAssignment(a *tas.Assignment, to int32, live map[string]int32, ranked bool) *tas.Assignment {
	keep := make([]int32, len(a.Domains))
	left := to
	if !ranked {
		for i, d := range a.Domains {
			k := min(d.Count, live[tas.DomainKey(d.Values)], left)
			keep[i], left = k, left-k
			live[tas.DomainKey(d.Values)] -= k // a domain listed twice is counted once
		}
	}
	for i, d := range a.Domains {
		k := min(d.Count-keep[i], left)
		keep[i], left = keep[i]+k, left-k
	}
	out := &tas.Assignment{Levels: a.Levels}
	for i, d := range a.Domains {
		if keep[i] > 0 {
			out.Domains = append(out.Domains, tas.DomainAssignment{Values: d.Values, Count: keep[i]})
		}
	}
	return out
}
