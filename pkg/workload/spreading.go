package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// spreadingName is Kueue v0.20's topology spreading annotation.
const spreadingName = "podset-topology-spreading"

// maxSpreadingRules is how many rules one annotation may have (Kueue's).
const maxSpreadingRules = 2

// parseSpreading reads the podset-topology-spreading JSON:
// {"workloadLabelSelectors": [{"key", "operator", "values"}],
// "rules": [{"topologyKey", "maxShareAllowingPlacement", "enforcementMode"}]}.
func parseSpreading(v string, path *field.Path) (*strata.TopologySpreading, field.ErrorList) {
	var sp strata.TopologySpreading
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, field.ErrorList{field.Invalid(path, v, `must be a JSON object like {"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["x"]}], `+
			`"rules": [{"topologyKey": "<level>", "maxShareAllowingPlacement": "0.5", "enforcementMode": "Required"}]}: `+err.Error())}
	}
	for i := range sp.Rules {
		if sp.Rules[i].EnforcementMode == "" {
			sp.Rules[i].EnforcementMode = strata.SpreadingRequired
		}
	}
	return &sp, ValidateSpreading(&sp, path, v)
}

// ValidateSpreading checks a topology spreading request: one or two rules
// on distinct levels, each share between 0 and 1 exclusive, Kueue's
// enforcement modes, and label selector requirements that parse. value is
// what errors show as the bad value.
func ValidateSpreading(sp *strata.TopologySpreading, path *field.Path, value any) field.ErrorList {
	var errs field.ErrorList
	if n := len(sp.Rules); n < 1 || n > maxSpreadingRules {
		errs = append(errs, field.Invalid(path, value, fmt.Sprintf("rules: must have 1 to %d rules, has %d", maxSpreadingRules, n)))
	}
	seen := map[string]int{}
	for i, r := range sp.Rules {
		if err := validLevel(r.TopologyKey, path); err != nil {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf("rules[%d].topologyKey: %s", i, err.Detail)))
		}
		if j, dup := seen[r.TopologyKey]; dup {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf("rules[%d].topologyKey: %q is already rule %d's; one rule per level", i, r.TopologyKey, j)))
		}
		seen[r.TopologyKey] = i
		if r.MaxShareAllowingPlacement.Sign() <= 0 || r.MaxShareAllowingPlacement.Cmp(resource.MustParse("1")) >= 0 {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf("rules[%d].maxShareAllowingPlacement: %s must be greater than 0 and less than 1", i, r.MaxShareAllowingPlacement.String())))
		}
		if m := r.EnforcementMode; m != "" && m != strata.SpreadingRequired && m != strata.SpreadingPreferred {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf("rules[%d].enforcementMode: %q must be Required or Preferred", i, m)))
		}
	}
	if _, err := spreadingSelector(sp.WorkloadLabelSelectors); err != nil {
		errs = append(errs, field.Invalid(path, value, "workloadLabelSelectors: "+err.Error()))
	}
	return errs
}

// spreadingSelector makes a selector of all the requirements.
func spreadingSelector(reqs []metav1.LabelSelectorRequirement) (labels.Selector, error) {
	sel := labels.NewSelector()
	for _, r := range reqs {
		var op selection.Operator
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			op = selection.In
		case metav1.LabelSelectorOpNotIn:
			op = selection.NotIn
		case metav1.LabelSelectorOpExists:
			op = selection.Exists
		case metav1.LabelSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		default:
			return nil, fmt.Errorf("operator %q of key %q must be In, NotIn, Exists or DoesNotExist", r.Operator, r.Key)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

// Spreads says whether a pod set of wl asks for topology spreading.
func Spreads(wl *strata.Workload) bool {
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].TopologyRequest.GetTopologySpreading() != nil {
			return true
		}
	}
	return false
}

// spreadingUnit is one pod set, or the pod sets of one group, of an
// admitted workload: the unit topology spreading counts.
func spreadingUnits(wl *strata.Workload) [][]string {
	var units [][]string
	groups := map[string]int{}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		if r := ps.TopologyRequest; r != nil && r.PodSetGroupName != nil {
			if u, ok := groups[*r.PodSetGroupName]; ok {
				units[u] = append(units[u], ps.Name)
				continue
			}
			groups[*r.PodSetGroupName] = len(units)
		}
		units = append(units, []string{ps.Name})
	}
	return units
}

// spreadMatches says whether admitted workload other counts for wl's
// spreading sp: the same namespace and, without selectors, the same
// controller; with them, labels that satisfy every one.
func spreadMatches(wl, other *strata.Workload, sp *strata.TopologySpreading) bool {
	if other.Namespace != wl.Namespace || other.UID == wl.UID && other.Name == wl.Name {
		return false
	}
	if len(sp.WorkloadLabelSelectors) == 0 {
		a, b := metav1.GetControllerOf(wl), metav1.GetControllerOf(other)
		// By UID; by kind and name where there is none (simulate's files).
		return a != nil && b != nil && a.UID == b.UID && (a.UID != "" || a.Kind == b.Kind && a.Name == b.Name)
	}
	sel, err := spreadingSelector(sp.WorkloadLabelSelectors)
	return err == nil && sel.Matches(labels.Set(other.Labels))
}

// SpreadCounts counts, per domain of level on snap (its values joined by
// "/"), the units (spreadingUnits) of the admitted workloads that count
// for wl's spreading sp: a unit counts once in every domain its pods are
// in. Domains snap cannot tell are left out.
func SpreadCounts(snap *tas.Snapshot, admitted []*strata.Workload, wl *strata.Workload, sp *strata.TopologySpreading, level string) map[string]int {
	counts := map[string]int{}
	for _, other := range admitted {
		if other.Status.Admission == nil || !spreadMatches(wl, other, sp) {
			continue
		}
		for _, unit := range spreadingUnits(other) {
			in := map[string]bool{}
			for _, psa := range other.Status.Admission.PodSetAssignments {
				if !slices.Contains(unit, psa.Name) || psa.TopologyAssignment == nil {
					continue
				}
				a, err := tas.Decode(psa.TopologyAssignment)
				if err != nil {
					continue
				}
				for _, d := range a.Domains {
					if values, ok := snap.DomainAt(a.Levels, d.Values, level); ok {
						in[strings.Join(values, "/")] = true
					}
				}
			}
			for k := range in {
				counts[k]++
			}
		}
	}
	return counts
}

// SpreadAvoid turns a rule's counts into the domains a new unit must avoid:
// with N units counted, those whose count exceeds maxShareAllowingPlacement
// × N (none while N is 0). The check is made before the new unit counts.
func SpreadAvoid(rule strata.TopologySpreadingRule, counts map[string]int) []tas.Avoid {
	n := 0
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return nil
	}
	share := rule.MaxShareAllowingPlacement.MilliValue()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []tas.Avoid
	for _, k := range keys {
		if int64(counts[k])*1000 > share*int64(n) {
			out = append(out, tas.Avoid{Level: rule.TopologyKey, Values: strings.Split(k, "/"), Preferred: rule.EnforcementMode == strata.SpreadingPreferred})
		}
	}
	return out
}

// Dispatched is a workload the hub has sent to a worker, as topology
// spreading across the fleet counts it: the cluster and the placement the
// hub planned there, per pod set name, at the summary's leaf level.
type Dispatched struct {
	Workload *strata.Workload
	Cluster  string
	Hints    map[string]*tas.Assignment
}

// FleetSpreadCounts is SpreadCounts across a fleet: per (cluster, domain
// of level), keyed "<cluster>/<values joined by "/">", the units of the
// dispatched workloads that count for wl's spreading sp. A unit counts once
// in every domain its planned pods are in; a plan whose levels lack level
// (a summary that stops above it) tells nothing and is left out.
func FleetSpreadCounts(dispatched []Dispatched, wl *strata.Workload, sp *strata.TopologySpreading, level string) map[string]int {
	counts := map[string]int{}
	for _, d := range dispatched {
		if !spreadMatches(wl, d.Workload, sp) {
			continue
		}
		for _, unit := range spreadingUnits(d.Workload) {
			in := map[string]bool{}
			for _, name := range unit {
				a := d.Hints[name]
				if a == nil {
					continue
				}
				idx := slices.Index(a.Levels, level)
				if idx < 0 {
					continue
				}
				for _, dom := range a.Domains {
					if len(dom.Values) > idx {
						in[d.Cluster+"/"+strings.Join(dom.Values[:idx+1], "/")] = true
					}
				}
			}
			for k := range in {
				counts[k]++
			}
		}
	}
	return counts
}

// FleetSpreadAvoid turns fleet counts (FleetSpreadCounts) into the domains
// a new unit must avoid on each cluster, by SpreadAvoid's rule over the
// whole fleet: N counts every cluster's units.
func FleetSpreadAvoid(rule strata.TopologySpreadingRule, counts map[string]int) map[string][]tas.Avoid {
	out := map[string][]tas.Avoid{}
	for _, a := range SpreadAvoid(rule, counts) {
		cluster := a.Values[0]
		a.Values = a.Values[1:]
		out[cluster] = append(out[cluster], a)
	}
	return out
}

// DecodeHints reads hints as EncodeTopologyHints writes them.
func DecodeHints(v string) (map[string]*tas.Assignment, error) {
	var hints map[string]*strata.TopologyAssignment
	if err := json.Unmarshal([]byte(v), &hints); err != nil {
		return nil, err
	}
	out := make(map[string]*tas.Assignment, len(hints))
	for name, ta := range hints {
		if ta == nil {
			continue
		}
		a, err := tas.Decode(ta)
		if err != nil {
			return nil, fmt.Errorf("pod set %s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}
