// Package workload turns Jobs into Workloads: it reads and validates the
// pod-set topology annotations of KEP-2724 (with the strata.dev/ or the
// kueue.x-k8s.io/ prefix) and builds the engine's requests.
package workload

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// Annotation names after the prefix.
const (
	requiredName      = "podset-required-topology"
	preferredName     = "podset-preferred-topology"
	unconstrainedName = "podset-unconstrained-topology"
	sliceTopologyName = "podset-slice-required-topology"
	sliceSizeName     = "podset-slice-size"
	constraintsName   = "podset-slice-required-topology-constraints"
	groupName         = "podset-group-name"
)

var annotationNames = []string{requiredName, preferredName, unconstrainedName, sliceTopologyName, sliceSizeName, constraintsName, groupName, spreadingName}

// annotations reads the pod-set annotations under either prefix.
type annotations struct {
	values map[string]string // name after the prefix -> value
	keys   map[string]string // name after the prefix -> the key the user wrote
	path   *field.Path       // path of the annotations map
}

func readAnnotations(m map[string]string, path *field.Path) (annotations, field.ErrorList) {
	a := annotations{values: map[string]string{}, keys: map[string]string{}, path: path}
	var errs field.ErrorList
	for _, name := range annotationNames {
		sv, sok := m[strata.Prefix+name]
		kv, kok := m[strata.KueuePrefix+name]
		switch {
		case sok && kok && sv != kv:
			errs = append(errs, field.Invalid(path.Key(strata.KueuePrefix+name), kv,
				fmt.Sprintf("conflicts with %s=%q; set only one of them", strata.Prefix+name, sv)))
		case sok:
			a.values[name], a.keys[name] = sv, strata.Prefix+name
		case kok:
			a.values[name], a.keys[name] = kv, strata.KueuePrefix+name
		}
	}
	return a, errs
}

func (a annotations) get(name string) (string, bool) {
	v, ok := a.values[name]
	return v, ok
}

func (a annotations) field(name string) *field.Path { return a.path.Key(a.keys[name]) }

// ParseTopologyRequest reads the topology request of one pod template from
// its annotations, checking every rule that does not need the Topology.
// count is the pod set's size; defaultSliceSize, if not 0, is the slice size
// used when a slice level is given without one. path is the path of the
// annotations map, for error messages. It returns nil when the template has
// no topology annotation. Slice annotations without a required or preferred
// level (alone, or with podset-unconstrained-topology) ask, as in Kueue, for
// an unconstrained placement in whole slices. When it returns errors, the
// request still holds what could be read, for messages only: it may break
// the Workload schema.
func ParseTopologyRequest(m map[string]string, count, defaultSliceSize int32, path *field.Path) (*strata.PodSetTopologyRequest, field.ErrorList) {
	a, errs := readAnnotations(m, path)
	if len(a.values) == 0 {
		return nil, errs
	}
	req := &strata.PodSetTopologyRequest{}
	var modes []string
	if v, ok := a.get(requiredName); ok {
		if err := validLevel(v, a.field(requiredName)); err != nil {
			errs = append(errs, err)
		}
		req.Required = ptr.To(v)
		modes = append(modes, a.keys[requiredName])
	}
	if v, ok := a.get(preferredName); ok {
		if err := validLevel(v, a.field(preferredName)); err != nil {
			errs = append(errs, err)
		}
		req.Preferred = ptr.To(v)
		modes = append(modes, a.keys[preferredName])
	}
	if v, ok := a.get(unconstrainedName); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, field.Invalid(a.field(unconstrainedName), v, `must be "true" or "false"`))
		} else if b {
			req.Unconstrained = ptr.To(true)
		}
		// KEP-2724: the three annotations are mutually exclusive, whatever
		// their values ("false" beside a required level too, as Kueue).
		modes = append(modes, a.keys[unconstrainedName])
	}
	if len(modes) > 1 {
		errs = append(errs, field.Invalid(path, strings.Join(modes, ", "),
			"only one of podset-required-topology, podset-preferred-topology and podset-unconstrained-topology may be set"))
	}

	sliceLevel, hasSliceLevel := a.get(sliceTopologyName)
	sliceSize, hasSliceSize := a.get(sliceSizeName)
	constraints, hasConstraints := a.get(constraintsName)
	if hasConstraints && (hasSliceLevel || hasSliceSize) {
		errs = append(errs, field.Invalid(a.field(constraintsName), constraints,
			"cannot be combined with podset-slice-required-topology or podset-slice-size; put every layer in the constraints"))
	}
	if hasSliceLevel {
		if err := validLevel(sliceLevel, a.field(sliceTopologyName)); err != nil {
			errs = append(errs, err)
		}
		req.PodSetSliceRequiredTopology = ptr.To(sliceLevel)
		size := defaultSliceSize
		if hasSliceSize {
			size = 0
			if n, ok := parsePodCount(sliceSize); ok {
				size = n
			} else {
				errs = append(errs, field.Invalid(a.field(sliceSizeName), sliceSize, "must be a whole number of pods, at least 1"))
			}
		}
		if size >= 1 && count%size != 0 {
			errs = append(errs, unevenSlices(a.field(sliceSizeName), sliceSize, size, count))
		}
		if size < 1 && !hasSliceSize {
			// Named with the prefix the slice level was written with.
			prefix := strings.TrimSuffix(a.keys[sliceTopologyName], sliceTopologyName)
			errs = append(errs, field.Required(path.Key(prefix+sliceSizeName),
				"podset-slice-size is required with podset-slice-required-topology"))
		}
		if size >= 1 {
			req.PodSetSliceSize = ptr.To(size)
		}
	} else if hasSliceSize {
		errs = append(errs, field.Invalid(a.field(sliceSizeName), sliceSize,
			"needs podset-slice-required-topology to say which level each slice must fit in"))
	}
	if hasConstraints {
		layers, lerrs := parseConstraints(constraints, count, a.field(constraintsName))
		errs = append(errs, lerrs...)
		req.PodSetSliceRequiredTopologyConstraints = layers
	}
	if v, ok := a.get(groupName); ok {
		if v == "" || len(v) > maxGroupNameLength {
			errs = append(errs, field.Invalid(a.field(groupName), v, fmt.Sprintf("must be 1 to %d characters", maxGroupNameLength)))
		}
		req.PodSetGroupName = ptr.To(v)
	}
	if v, ok := a.get(spreadingName); ok {
		sp, serrs := parseSpreading(v, a.field(spreadingName))
		errs = append(errs, serrs...)
		if req.Required == nil && req.Preferred == nil {
			errs = append(errs, field.Invalid(a.field(spreadingName), v,
				"needs podset-required-topology or podset-preferred-topology: each pod set (or group) packs into one domain, and the domains are spread"))
		}
		req.TopologySpreading = sp
	}
	return req, errs
}

// PartialSliceOrigin marks the error of a single slice layer whose size
// does not divide the pod count (field.Error's Origin). KEP-2724 requires
// slice sizes to divide the pod set; with Kueue v0.20's TASPartialSlices
// (topologyAwareScheduling.partialSlices) the last count % size pods form
// one partial slice instead, and AllowPartialSlices drops the error.
const PartialSliceOrigin = "strata.dev/partial-slice"

// unevenSlices is the error of a single slice layer of size pods that does
// not divide count (see PartialSliceOrigin).
func unevenSlices(path *field.Path, value string, size, count int32) *field.Error {
	rest := fmt.Sprintf("the last %d pods", count%size)
	if count%size == 1 {
		rest = "the last pod"
	}
	return field.Invalid(path, value, fmt.Sprintf(
		"the slice size %d must evenly divide the pod count %d (KEP-2724); for %s to form one partial slice (Kueue's TASPartialSlices), set topologyAwareScheduling.partialSlices in the hub's and the agents' configuration",
		size, count, rest)).WithOrigin(PartialSliceOrigin)
}

// RequestUsable says whether a topology request read with errs may still
// go into a Workload: it fits the Workload schema when every error is only
// a partial slice (PartialSliceOrigin), which the cluster's configuration
// may allow (AllowPartialSlices); any other error may break the schema.
func RequestUsable(errs field.ErrorList) bool {
	for _, e := range errs {
		if e.Origin != PartialSliceOrigin {
			return false
		}
	}
	return true
}

// AllowPartialSlices returns errs without the errors of slice sizes that
// leave a partial slice (PartialSliceOrigin) when partial is true, and errs
// as they are otherwise.
func AllowPartialSlices(errs field.ErrorList, partial bool) field.ErrorList {
	if !partial {
		return errs
	}
	var out field.ErrorList
	for _, e := range errs {
		if e.Origin != PartialSliceOrigin {
			out = append(out, e)
		}
	}
	return out
}

// parseConstraints reads the multi-layer JSON:
// [{"topology": "<level>", "size": "<n>"}, ...], coarsest first.
func parseConstraints(v string, count int32, path *field.Path) ([]strata.PodSetSliceTopologyConstraint, field.ErrorList) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, field.ErrorList{field.Invalid(path, v,
			`must be a JSON list like [{"topology": "<node label>", "size": "<pods>"}]: `+err.Error())}
	}
	var errs field.ErrorList
	if len(raw) == 0 || len(raw) > maxLayers {
		errs = append(errs, field.Invalid(path, v, fmt.Sprintf("must have 1 to %d layers", maxLayers)))
	}
	out := make([]strata.PodSetSliceTopologyConstraint, 0, len(raw))
	seen := map[string]int{} // level -> its layer
	for i, entry := range raw {
		var level string
		if err := json.Unmarshal(entry["topology"], &level); err != nil || level == "" {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: \"topology\" must be a node label key", i)))
			continue
		}
		if err := validLevel(level, path); err != nil {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: %s", i, err.Detail)))
		}
		if j, dup := seen[level]; dup {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: level %q is already layer %d; each level may appear in one layer only", i, level, j)))
		}
		seen[level] = i
		size, ok := parseLayerSize(entry["size"])
		if !ok {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: \"size\" must be a whole number of pods, at least 1 and at most %d", i, math.MaxInt32)))
			continue
		}
		switch {
		case i > 0 || count%size == 0:
		case len(raw) > 1:
			// With partial slices, one layer may leave a partial slice;
			// with more, the inner layers assume whole slices (the sizes
			// below divide this one).
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: size %d must evenly divide the pod count %d when more than one layer is given", i, size, count)))
		default:
			errs = append(errs, unevenSlices(path, v, size, count))
		}
		if n := len(out); n > 0 && out[n-1].Size%size != 0 {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("layer %d: size %d must evenly divide the size %d of layer %d above it", i, size, out[n-1].Size, n-1)))
		}
		out = append(out, strata.PodSetSliceTopologyConstraint{Topology: level, Size: size})
	}
	return out, errs
}

// parseLayerSize reads the "size" of a layer, a JSON string ("4") or
// number (4). It reports false unless the size is a whole number from 1
// to math.MaxInt32.
func parseLayerSize(raw json.RawMessage) (int32, bool) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return parsePodCount(text)
	}
	var n int32 // rejects fractions and anything beyond 32 bits
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// parsePodCount reads a decimal number of pods. It reports false unless the
// number is from 1 to math.MaxInt32.
func parsePodCount(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, false
	}
	return int32(n), true
}

// validLevel checks that v is a node label key the Workload API accepts.
func validLevel(v string, path *field.Path) *field.Error {
	switch {
	case v == "":
		return field.Invalid(path, v, "must name a topology level (a node label key)")
	case len(validation.IsQualifiedName(v)) > 0:
		return field.Invalid(path, v, "must be a node label key such as cloud.provider.com/topology-rack")
	case len(v) > maxLevelLength:
		return field.Invalid(path, v, fmt.Sprintf("must be at most %d characters", maxLevelLength))
	}
	return nil
}

// unhealthyNodesThresholdName is the name, after either prefix, of the
// annotation that bounds the failed nodes a workload keeps running with.
var unhealthyNodesThresholdName = strings.TrimPrefix(strata.UnhealthyNodesEvictionThresholdAnnotation, strata.Prefix)

// Bounds of the unhealthy-nodes eviction threshold, as in Kueue.
const (
	MinUnhealthyNodesThreshold = 1
	MaxUnhealthyNodesThreshold = 8
)

// UnhealthyNodesThreshold reads the unhealthy-nodes eviction threshold
// (strata.dev/ or kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold)
// from an object's annotations: the number and true when it is set and
// valid; 0 and false when it is not set; errors, pointing into path (the
// annotations map), when it is not an integer between 1 and 8 or the two
// prefixes disagree.
func UnhealthyNodesThreshold(m map[string]string, path *field.Path) (int, bool, field.ErrorList) {
	key, v, ok, errs := prefixed(m, unhealthyNodesThresholdName, path)
	if len(errs) > 0 || !ok {
		return 0, false, errs
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < MinUnhealthyNodesThreshold || n > MaxUnhealthyNodesThreshold {
		return 0, false, field.ErrorList{field.Invalid(path.Key(key), v,
			fmt.Sprintf("must be an integer between %d and %d", MinUnhealthyNodesThreshold, MaxUnhealthyNodesThreshold))}
	}
	return n, true, nil
}

// carryUnhealthyNodesThreshold copies to dst the threshold annotations src
// has under either prefix, and says whether dst changed.
func carryUnhealthyNodesThreshold(dst, src *metav1.ObjectMeta) bool {
	changed := false
	for _, k := range []string{strata.Prefix + unhealthyNodesThresholdName, strata.KueuePrefix + unhealthyNodesThresholdName} {
		if v, ok := src.Annotations[k]; ok {
			if old, had := dst.Annotations[k]; !had || old != v {
				metav1.SetMetaDataAnnotation(dst, k, v)
				changed = true
			}
		}
	}
	return changed
}
