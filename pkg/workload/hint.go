package workload

import (
	"encoding/json"
	"fmt"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// EncodeTopologyHints is the strata.dev/topology-hint annotation of the
// placement a hub reserved: the assignment of each pod set (in spec
// order), by pod set name.
func EncodeTopologyHints(podSets []strata.PodSet, assignments []*tas.Assignment) (string, error) {
	if len(podSets) != len(assignments) {
		return "", fmt.Errorf("%d assignments for %d pod sets", len(assignments), len(podSets))
	}
	hints := make(map[string]*strata.TopologyAssignment, len(podSets))
	for i, ps := range podSets {
		if assignments[i] != nil {
			hints[ps.Name] = tas.Encode(assignments[i])
		}
	}
	data, err := json.Marshal(hints)
	return string(data), err
}

// TopologyHints reads a Workload's strata.dev/topology-hint annotation: the
// hub's placement per pod set name. It returns nil without one, and an
// error for one that does not parse.
func TopologyHints(wl *strata.Workload) (map[string]*tas.Assignment, error) {
	v, ok := wl.Annotations[strata.TopologyHintAnnotation]
	if !ok {
		return nil, nil
	}
	out, err := DecodeHints(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", strata.TopologyHintAnnotation, err)
	}
	return out, nil
}
