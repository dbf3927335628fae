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

// Bounds on the sizes a job's spec asks for, beyond the CRD's: each kind
// checks them where it reads the sizes (its PodSets, and a
// jobs.GroupedWorkloads kind's names of its groups), before it builds or
// loops over anything in proportion, so that a number a user typed
// (replicas: 2147483647) is Invalid, with a message naming the field,
// and never memory or work of that size on the hub or an agent, nor an
// int32 product that wraps.
const (
	// MaxPodSetPods is the most pods one pod set may count: Kubernetes'
	// own bound on an Indexed Job's parallelism and completions (10^5),
	// and about what one cluster runs in all (150,000 pods). A JobSet's
	// pod set counts replicas × the pods of each Job; a LeaderWorkerSet
	// group's pods (its size) are checked against it as a whole.
	// Workloads of 32 pod sets of that many pods sum to 3,200,000: no
	// sum over pod sets wraps.
	MaxPodSetPods = 100_000
	// MaxGroups is the most groups (replicas) of a LeaderWorkerSet. A
	// worker keeps a Workload per group, each with the group's pod
	// templates, and its agent builds and compares every group's Workload
	// at each change of the set or of one of its gated pods: with a small
	// template, 10 µs and 11 kB a group (measured), so 1,000 groups are
	// 10 ms and 11 MB of short-lived memory per reconcile, and 1,000
	// Workload objects in the worker's etcd and the agent's cache; 10,000
	// would be ten times that at every pod event. (Through the hub a set
	// has at most MaxPodSets/2 groups.)
	MaxGroups = 1_000
)

// priorityClassSources are the values of the Workload's
// priorityClassSource enum.
var priorityClassSources = sets.New("", strata.WorkloadPriorityClassSource, strata.PodPriorityClassSource)

// ValidatePodCount refuses n, the pods one pod set of a job asks for,
// when it is more than MaxPodSetPods: an error at path, showing the
// field's value, with how saying what n counts ("parallelism, capped by
// completions"). n is an int64 so that a product of sizes cannot wrap.
func ValidatePodCount(n int64, path *field.Path, value any, how string) field.ErrorList {
	if n <= MaxPodSetPods {
		return nil
	}
	return field.ErrorList{field.Invalid(path, value, fmt.Sprintf(
		"%s: %d pods, more than the %d one pod set may have under Strata; lower it, or split the workload",
		how, n, MaxPodSetPods))}
}

// ValidateSpec checks a WorkloadSpec against the Workload CRD schema: the
// bounds, patterns and CEL rules of api/v1beta1/workload_types.go. A spec
// that passes is not rejected by the API server. path is the path of the
// spec.
func ValidateSpec(spec *strata.WorkloadSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateString(spec.QueueName, 1, maxNameLength, path.Child("queueName"))...)
	errs = append(errs, validateString(spec.PriorityClassName, 0, maxNameLength, path.Child("priorityClassName"))...)
	if !priorityClassSources.Has(spec.PriorityClassSource) {
		errs = append(errs, field.NotSupported(path.Child("priorityClassSource"), spec.PriorityClassSource, sets.List(priorityClassSources)))
	}
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
	errs = append(errs, validateLayers(r.PodSetSliceRequiredTopologyConstraints, path.Child("podSetSliceRequiredTopologyConstraints"))...)
	if sp := r.TopologySpreading; sp != nil {
		errs = append(errs, ValidateSpreading(sp, path.Child("topologySpreading"), "")...)
	}
	return errs
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
