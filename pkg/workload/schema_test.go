package workload

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	strata "strata.dev/strata/api/v1beta1"
)

// workloadCRD is the generated Workload CRD, whose schema the API server
// applies to every Workload the agent writes.
const workloadCRD = "../../charts/strata-agent/crds/strata.dev_workloads.yaml"

// crdSpecSchema loads the OpenAPI schema of the Workload's spec.
func crdSpecSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(workloadCRD)
	if err != nil {
		t.Fatalf("reading the Workload CRD: %v", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("parsing %s: %v", workloadCRD, err)
	}
	s := dig(crd, "spec", "versions")
	versions, _ := s.([]any)
	if len(versions) != 1 {
		t.Fatalf("%s: want one version, got %d", workloadCRD, len(versions))
	}
	spec, ok := dig(versions[0], "schema", "openAPIV3Schema", "properties", "spec").(map[string]any)
	if !ok {
		t.Fatalf("%s: no schema for spec", workloadCRD)
	}
	return spec
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// checkSchema lists where the JSON value v breaks the structural part of
// the OpenAPI schema s: required properties, string lengths, patterns and
// enums,
// list sizes and map keys, integer minimums. CEL rules
// (x-kubernetes-validations) are left to ValidateSpec's own cases.
func checkSchema(s map[string]any, v any, path string) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	switch x := v.(type) {
	case nil:
		if s["nullable"] != true {
			fail("must not be null")
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				fail("%s is required", r)
			}
		}
		for k, pv := range x {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, checkSchema(ps, pv, path+"."+k)...)
			} else if s["x-kubernetes-preserve-unknown-fields"] != true {
				fail("unknown field %s", k)
			}
		}
	case []any:
		if m, ok := s["maxItems"].(float64); ok && len(x) > int(m) {
			fail("%d items, at most %v", len(x), m)
		}
		if m, ok := s["minItems"].(float64); ok && len(x) < int(m) {
			fail("%d items, at least %v", len(x), m)
		}
		if s["x-kubernetes-list-type"] == "map" {
			seen := map[string]bool{}
			for _, item := range x {
				var key []any
				for _, k := range s["x-kubernetes-list-map-keys"].([]any) {
					key = append(key, dig(item, k.(string)))
				}
				ks := fmt.Sprint(key)
				if seen[ks] {
					fail("duplicate key %s", ks)
				}
				seen[ks] = true
			}
		}
		items, _ := s["items"].(map[string]any)
		for i, item := range x {
			errs = append(errs, checkSchema(items, item, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case string:
		n := len([]rune(x))
		if m, ok := s["maxLength"].(float64); ok && n > int(m) {
			fail("%d characters, at most %v", n, m)
		}
		if m, ok := s["minLength"].(float64); ok && n < int(m) {
			fail("%d characters, at least %v", n, m)
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			fail("%q does not match %s", x, p)
		}
		if e, ok := s["enum"].([]any); ok && !slices.Contains(e, any(x)) {
			fail("%q is not one of %v", x, e)
		}
	case float64:
		if m, ok := s["minimum"].(float64); ok && x < m {
			fail("%v, at least %v", x, m)
		}
	}
	return errs
}

// crdErrors checks a spec against the CRD's structural schema.
func crdErrors(t *testing.T, schema map[string]any, spec *strata.WorkloadSpec) []string {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return checkSchema(schema, v, "spec")
}

func TestValidateSpec(t *testing.T) {
	schema := crdSpecSchema(t)
	// A qualified name of 317 characters: 253 of prefix, "/", 63 of name.
	prefix := strings.Repeat(strings.Repeat("a", 62)+".", 4) + "b"
	long := prefix + "/" + strings.Repeat("c", 63)
	spec := func(reqs ...*strata.PodSetTopologyRequest) *strata.WorkloadSpec {
		s := &strata.WorkloadSpec{QueueName: "training"}
		for i, r := range reqs {
			s.PodSets = append(s.PodSets, strata.PodSet{Name: fmt.Sprintf("ps%d", i), Count: 4, TopologyRequest: r})
		}
		return s
	}
	layers := func(sizes ...int32) []strata.PodSetSliceTopologyConstraint {
		out := make([]strata.PodSetSliceTopologyConstraint, len(sizes))
		for i, n := range sizes {
			out[i] = strata.PodSetSliceTopologyConstraint{Topology: fmt.Sprintf("level-%d", i), Size: n}
		}
		return out
	}
	cases := map[string]struct {
		spec    *strata.WorkloadSpec
		celOnly bool // the CRD rejects it through a CEL rule, not its structure
		want    []string
	}{
		"no request": {spec: spec(nil)},
		"every field at its bound": {spec: spec(&strata.PodSetTopologyRequest{
			Required: ptr.To(long[1:]), PodIndexLabel: ptr.To(long[1:]), PodIndexOffset: ptr.To[int32](0),
			SubGroupIndexLabel: ptr.To(""), SubGroupCount: ptr.To[int32](1), PodSetGroupName: ptr.To(strings.Repeat("g", 63)),
			PodSetSliceRequiredTopologyConstraints: layers(8, 4, 2),
		})},
		"unconstrained false with a level": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(rack), Unconstrained: ptr.To(false)})},
		"eight pod sets":                   {spec: spec(nil, nil, nil, nil, nil, nil, nil, nil)},
		"no pod set":                       {spec: spec(), want: []string{"spec.podSets: Required value"}},
		"33 pod sets": {spec: spec(make([]*strata.PodSetTopologyRequest, MaxPodSets+1)...),
			want: []string{"spec.podSets: Too many: 33: must have at most 32 items"}},
		"empty queue": {spec: &strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main"}}}, want: []string{"spec.queueName: Required value"}},
		"WorkloadPriorityClass source": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "main"}},
			PriorityClassName: "high", PriorityClassSource: strata.WorkloadPriorityClassSource}},
		"PriorityClass source": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "main"}},
			PriorityClassName: "high", PriorityClassSource: strata.PodPriorityClassSource}},
		"unknown priority class source": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "main"}},
			PriorityClassName: "high", PriorityClassSource: "kueue.x-k8s.io/workloadpriorityclass"},
			want: []string{`spec.priorityClassSource: Unsupported value: "kueue.x-k8s.io/workloadpriorityclass": supported values: "", "scheduling.k8s.io/priorityclass", "strata.dev/workloadpriorityclass"`}},
		"bad pod set name": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "Main"}}},
			want: []string{`spec.podSets[0].name: Invalid value: "Main": a lowercase RFC 1123 label`}},
		"duplicate pod set names": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "a"}, {Name: "a"}}},
			want: []string{`spec.podSets[1].name: Duplicate value: "a"`}},
		"negative count": {spec: &strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "a", Count: -1}}},
			want: []string{"spec.podSets[0].count: Invalid value: -1: must be at least 0"}},
		"level too long": {spec: spec(&strata.PodSetTopologyRequest{Preferred: ptr.To(long)}),
			want: []string{"spec.podSets[0].topologyRequest.preferred: Too long: may not be more than 316 bytes"}},
		"empty level": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To("")}),
			want: []string{"spec.podSets[0].topologyRequest.required: Required value"}},
		"empty group name": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetGroupName: ptr.To("")}),
			want: []string{"spec.podSets[0].topologyRequest.podSetGroupName: Required value"}},
		"group name too long": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetGroupName: ptr.To(strings.Repeat("g", 64))}),
			want: []string{"spec.podSets[0].topologyRequest.podSetGroupName: Too long: may not be more than 63 bytes"}},
		"slice size 0": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(rack), PodSetSliceSize: ptr.To[int32](0)}),
			want: []string{"spec.podSets[0].topologyRequest.podSetSliceSize: Invalid value: 0: must be at least 1"}},
		"four layers": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: layers(8, 4, 2, 1)}),
			want: []string{"spec.podSets[0].topologyRequest.podSetSliceRequiredTopologyConstraints: Too many: 4: must have at most 3 items"}},
		"layer size 0": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: layers(0)}),
			want: []string{"spec.podSets[0].topologyRequest.podSetSliceRequiredTopologyConstraints[0].size: Invalid value: 0: must be at least 1"}},
		"required and preferred": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(rack), Preferred: ptr.To(block)}), celOnly: true,
			want: []string{"spec.podSets[0].topologyRequest: Invalid value: \"\": required, preferred and unconstrained are mutually exclusive"}},
		"preferred and unconstrained": {spec: spec(&strata.PodSetTopologyRequest{Preferred: ptr.To(block), Unconstrained: ptr.To(true)}), celOnly: true,
			want: []string{"spec.podSets[0].topologyRequest: Invalid value: \"\": required, preferred and unconstrained are mutually exclusive"}},
		"slice level without size": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(rack)}), celOnly: true,
			want: []string{"spec.podSets[0].topologyRequest: Invalid value: \"\": podSetSliceRequiredTopology and podSetSliceSize must be set together"}},
		"slice level with layers": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(rack), PodSetSliceSize: ptr.To[int32](2), PodSetSliceRequiredTopologyConstraints: layers(2)}), celOnly: true,
			want: []string{"spec.podSets[0].topologyRequest: Invalid value: \"\": podSetSliceRequiredTopologyConstraints cannot be combined with podSetSliceRequiredTopology and podSetSliceSize"}},
		"duplicate layers": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{{Topology: rack, Size: 4}, {Topology: rack, Size: 2}}}), celOnly: true,
			want: []string{`spec.podSets[0].topologyRequest.podSetSliceRequiredTopologyConstraints[1].topology: Duplicate value: "cloud.provider.com/topology-rack"`}},
		"layers that do not divide": {spec: spec(&strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: layers(8, 4, 3)}), celOnly: true,
			want: []string{`spec.podSets[0].topologyRequest.podSetSliceRequiredTopologyConstraints: Invalid value: "": the size of layer 1 must be a multiple of the size of layer 2`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range ValidateSpec(tc.spec, field.NewPath("spec")) {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ValidateSpec() = %q, want %d errors containing %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
			// ValidateSpec must agree with the CRD: accept what it accepts,
			// reject what it rejects.
			crd := crdErrors(t, schema, tc.spec)
			if wantCRD := len(tc.want) > 0 && !tc.celOnly; (len(crd) > 0) != wantCRD {
				t.Errorf("the CRD schema says %q; want errors: %v", crd, wantCRD)
			}
		})
	}
}

// malformedAnnotations are pod-template annotations that ParseTopologyRequest
// must reject without panicking, each with an error it must report.
var malformedAnnotations = map[string]struct {
	annotations map[string]string
	count       int32
	wantErr     string
}{
	"required and preferred": {
		annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-preferred-topology": block},
		count:       4, wantErr: "only one of podset-required-topology, podset-preferred-topology and podset-unconstrained-topology may be set",
	},
	"required and unconstrained": {
		annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-unconstrained-topology": "true"},
		count:       4, wantErr: "only one of",
	},
	"slice level with a size that is not a number": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": rack, "strata.dev/podset-slice-size": "four"},
		count:       4, wantErr: `Invalid value: "four": must be a whole number of pods, at least 1`,
	},
	"slice level with size 0": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": rack, "strata.dev/podset-slice-size": "0"},
		count:       4, wantErr: `Invalid value: "0": must be a whole number of pods, at least 1`,
	},
	"slice size beyond 32 bits": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": rack, "strata.dev/podset-slice-size": "4294967296"},
		count:       4, wantErr: `Invalid value: "4294967296": must be a whole number of pods, at least 1`,
	},
	"slice level without a size": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": rack},
		count:       4, wantErr: "podset-slice-size is required",
	},
	"slice level that is not a label key": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": "the rack", "strata.dev/podset-slice-size": "2"},
		count:       4, wantErr: "must be a node label key",
	},
	"constraints with a slice level": {
		annotations: map[string]string{
			"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host, "strata.dev/podset-slice-size": "2",
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": "4"}]`,
		},
		count: 8, wantErr: "cannot be combined with podset-slice-required-topology or podset-slice-size",
	},
	"four layers": {
		annotations: map[string]string{"strata.dev/podset-required-topology": "a",
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"a","size":"8"},{"topology":"b","size":"4"},{"topology":"c","size":"2"},{"topology":"d","size":"1"}]`},
		count: 8, wantErr: "must have 1 to 3 layers",
	},
	"no layer": {
		annotations: map[string]string{"strata.dev/podset-required-topology": "a", "strata.dev/podset-slice-required-topology-constraints": `[]`},
		count:       8, wantErr: "must have 1 to 3 layers",
	},
	"duplicate layers": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": "4"}, {"topology": "` + rack + `", "size": "2"}]`},
		count: 8, wantErr: `layer 1: level "cloud.provider.com/topology-rack" is already layer 0; each level may appear in one layer only`,
	},
	"numeric layer size beyond 32 bits": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": 4294967296}]`},
		count: 8, wantErr: `layer 0: "size" must be a whole number of pods, at least 1 and at most 2147483647`,
	},
	"string layer size beyond 32 bits": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": "4294967296"}]`},
		count: 8, wantErr: `layer 0: "size" must be a whole number`,
	},
	"fractional layer size": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": 2.5}]`},
		count: 8, wantErr: `layer 0: "size" must be a whole number`,
	},
	"negative layer size": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": -4}]`},
		count: 8, wantErr: `layer 0: "size" must be a whole number`,
	},
	"null layer": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology-constraints": `[null]`},
		count:       8, wantErr: `layer 0: "topology" must be a node label key`,
	},
	"layers that do not divide": {
		annotations: map[string]string{"strata.dev/podset-required-topology": block,
			"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + block + `", "size": "8"}, {"topology": "` + rack + `", "size": "3"}]`},
		count: 24, wantErr: "layer 1: size 3 must evenly divide the size 8 of layer 0 above it",
	},
	"empty group name": {
		annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-group-name": ""},
		count:       4, wantErr: "must be 1 to 63 characters",
	},
	"group name of 64 characters": {
		annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-group-name": strings.Repeat("g", 64)},
		count:       4, wantErr: "must be 1 to 63 characters",
	},
	"empty level": {
		annotations: map[string]string{"strata.dev/podset-preferred-topology": ""},
		count:       4, wantErr: "must name a topology level",
	},
	"level of 317 characters": {
		annotations: map[string]string{"strata.dev/podset-required-topology": strings.Repeat(strings.Repeat("a", 62)+".", 4) + "b/" + strings.Repeat("c", 63)},
		count:       4, wantErr: "must be at most 316 characters",
	},
	"level with an uppercase prefix": {
		annotations: map[string]string{"strata.dev/podset-required-topology": "Cloud.Provider.com/rack"},
		count:       4, wantErr: "must be a node label key",
	},
}

func TestParseTopologyRequestMalformed(t *testing.T) {
	path := field.NewPath("spec", "template", "metadata", "annotations")
	for name, tc := range malformedAnnotations {
		t.Run(name, func(t *testing.T) {
			_, errs := ParseTopologyRequest(tc.annotations, tc.count, 0, path)
			if errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
				t.Errorf("errors = %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

func TestFromJobMalformedIsSchemaValid(t *testing.T) {
	schema := crdSpecSchema(t)
	for name, tc := range malformedAnnotations {
		t.Run(name, func(t *testing.T) {
			wl, errs := FromJob(job(tc.count, tc.count, tc.annotations))
			if len(errs) == 0 {
				t.Fatal("FromJob() returned no error")
			}
			if got := wl.Spec.PodSets[0].TopologyRequest; got != nil {
				t.Errorf("topology request = %+v, want none on an invalid Job", got)
			}
			if diff := cmp.Diff(field.ErrorList(nil), ValidateSpec(&wl.Spec, field.NewPath("spec"))); diff != "" {
				t.Errorf("ValidateSpec() (-want,+got):\n%s", diff)
			}
			if crd := crdErrors(t, schema, &wl.Spec); len(crd) > 0 {
				t.Errorf("the CRD schema rejects the Workload: %q", crd)
			}
		})
	}
}
