package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	strata "strata.dev/strata/api/v1beta1"
)

// Bounds of the Workload CRD schema (api/v1beta1/workload_types.go).
const (
	// MaxPodSets is the most pod sets a Workload holds: 8 in Kueue; 32
	// here, so that the hub's Workload of a whole LeaderWorkerSet (two
	// pod sets per group) holds 16 groups.
	MaxPodSets         = 32
	maxNameLength      = 253 // queueName, priorityClassName
	maxLevelLength     = 316 // a node label key: the levels and the index labels
	maxGroupNameLength = 63
	maxLayers          = 3
)

// ValidateSpec checks a WorkloadSpec against the Workload CRD schema: the
// bounds, patterns and CEL rules of api/v1beta1/workload_types.go. A spec
// that passes is not rejected by the API server. path is the path of the
// spec.
func ValidateSpec(spec *strata.WorkloadSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateString(spec.QueueName, 1, maxNameLength, path.Child("queueName"))...)
	errs = append(errs, validateString(spec.PriorityClassName, 0, maxNameLength, path.Child("priorityClassName"))...)
	psPath := path.Child("podSets")
	switch n := len(spec.PodSets); {
	case n == 0:
		errs = append(errs, field.Required(psPath, "a Workload needs at least one pod set"))
	case n > MaxPodSets:
		errs = append(errs, field.TooMany(psPath, n, MaxPodSets))
	}
	names := sets.New[string]()
	for i := range spec.PodSets {
		ps := &spec.PodSets[i]
		p := psPath.Index(i)
		for _, msg := range validation.IsDNS1123Label(ps.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ps.Name, msg))
		}
		if names.Has(ps.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), ps.Name))
		}
		names.Insert(ps.Name)
		if ps.Count < 0 {
			errs = append(errs, field.Invalid(p.Child("count"), ps.Count, "must be at least 0"))
		}
		errs = append(errs, validateTopologyRequest(ps.TopologyRequest, p.Child("topologyRequest"))...)
	}
	return errs
}

// validateTopologyRequest checks a pod set's topology request against the
// schema of PodSetTopologyRequest.
func validateTopologyRequest(r *strata.PodSetTopologyRequest, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, s := range []struct {
		name     string
		v        *string
		min, max int
	}{
		{"required", r.Required, 1, maxLevelLength},
		{"preferred", r.Preferred, 1, maxLevelLength},
		{"podIndexLabel", r.PodIndexLabel, 0, maxLevelLength},
		{"subGroupIndexLabel", r.SubGroupIndexLabel, 0, maxLevelLength},
		{"podSetGroupName", r.PodSetGroupName, 1, maxGroupNameLength},
		{"podSetSliceRequiredTopology", r.PodSetSliceRequiredTopology, 1, maxLevelLength},
	} {
		if s.v != nil {
			errs = append(errs, validateString(*s.v, s.min, s.max, path.Child(s.name))...)
		}
	}
	for _, n := range []struct {
		name string
		v    *int32
		min  int32
	}{
		{"podIndexOffset", r.PodIndexOffset, 0},
		{"subGroupCount", r.SubGroupCount, 1},
		{"podSetSliceSize", r.PodSetSliceSize, 1},
	} {
		if n.v != nil && *n.v < n.min {
			errs = append(errs, field.Invalid(path.Child(n.name), *n.v, fmt.Sprintf("must be at least %d", n.min)))
		}
	}
	modes := 0
	for _, set := range []bool{r.Required != nil, r.Preferred != nil, r.Unconstrained != nil && *r.Unconstrained} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		errs = append(errs, field.Invalid(path, "", "required, preferred and unconstrained are mutually exclusive"))
	}
	if (r.PodSetSliceRequiredTopology != nil) != (r.PodSetSliceSize != nil) {
		errs = append(errs, field.Invalid(path, "", "podSetSliceRequiredTopology and podSetSliceSize must be set together"))
	}
	if len(r.PodSetSliceRequiredTopologyConstraints) > 0 && r.PodSetSliceRequiredTopology != nil {
		errs = append(errs, field.Invalid(path, "", "podSetSliceRequiredTopologyConstraints cannot be combined with podSetSliceRequiredTopology and podSetSliceSize"))
	}
	return append(errs, validateLayers(r.PodSetSliceRequiredTopologyConstraints, path.Child("podSetSliceRequiredTopologyConstraints"))...)
}

// validateLayers checks slice layers against the schema of
// podSetSliceRequiredTopologyConstraints. An empty list is left out of the
// object, so it is valid.
func validateLayers(layers []strata.PodSetSliceTopologyConstraint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(layers) > maxLayers {
		errs = append(errs, field.TooMany(path, len(layers), maxLayers))
	}
	levels := sets.New[string]()
	for i, c := range layers {
		errs = append(errs, validateString(c.Topology, 1, maxLevelLength, path.Index(i).Child("topology"))...)
		if levels.Has(c.Topology) {
			errs = append(errs, field.Duplicate(path.Index(i).Child("topology"), c.Topology))
		}
		levels.Insert(c.Topology)
		if c.Size < 1 {
			errs = append(errs, field.Invalid(path.Index(i).Child("size"), c.Size, "must be at least 1"))
		}
	}
	for i := 1; i < len(layers) && i < maxLayers; i++ {
		if above, size := layers[i-1].Size, layers[i].Size; size >= 1 && above%size != 0 {
			errs = append(errs, field.Invalid(path, "", fmt.Sprintf("the size of layer %d must be a multiple of the size of layer %d", i-1, i)))
		}
	}
	return errs
}

// validateString checks the length of a string field, in characters as
// OpenAPI counts them.
func validateString(v string, minLen, maxLen int, path *field.Path) field.ErrorList {
	n := len([]rune(v))
	switch {
	case n < minLen && n == 0:
		return field.ErrorList{field.Required(path, "")}
	case n < minLen:
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("must be at least %d characters", minLen))}
	case n > maxLen:
		return field.ErrorList{field.TooLong(path, "", maxLen)}
	}
	return nil
}

// DropTopologyRequests removes the topology request of every pod set. The
// agent writes the Workload of an invalid Job this way: an invalid request
// may break the schema and make the API server reject the whole Workload,
// while the Invalid condition already says what to fix and an invalid
// Workload is not admitted.
func DropTopologyRequests(spec *strata.WorkloadSpec) {
	for i := range spec.PodSets {
		spec.PodSets[i].TopologyRequest = nil
	}
}
