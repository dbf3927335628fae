package workload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = "kubernetes.io/hostname"
)

func TestParseTopologyRequest(t *testing.T) {
	path := field.NewPath("spec", "template", "metadata", "annotations")
	cases := map[string]struct {
		annotations map[string]string
		count       int32
		defSlice    int32
		want        *strata.PodSetTopologyRequest
		wantErrs    []string
		// partialOnly: the errors are only a partial slice's, which
		// topologyAwareScheduling.partialSlices allows.
		partialOnly bool
	}{
		"no annotations": {count: 4},
		"required, strata prefix": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(rack)},
		},
		"preferred, kueue prefix": {
			annotations: map[string]string{"kueue.x-k8s.io/podset-preferred-topology": block},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Preferred: ptr.To(block)},
		},
		"both prefixes agreeing": {
			annotations: map[string]string{"kueue.x-k8s.io/podset-required-topology": rack, "strata.dev/podset-required-topology": rack},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(rack)},
		},
		"both prefixes disagreeing": {
			annotations: map[string]string{"kueue.x-k8s.io/podset-required-topology": block, "strata.dev/podset-required-topology": rack},
			count:       4,
			wantErrs:    []string{`spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Invalid value: "cloud.provider.com/topology-block": conflicts with strata.dev/podset-required-topology="cloud.provider.com/topology-rack"; set only one of them`},
		},
		"unconstrained true": {
			annotations: map[string]string{"strata.dev/podset-unconstrained-topology": "true"},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Unconstrained: ptr.To(true)},
		},
		"unconstrained not a boolean": {
			annotations: map[string]string{"strata.dev/podset-unconstrained-topology": "yes please"},
			count:       4,
			want:        &strata.PodSetTopologyRequest{},
			wantErrs:    []string{`spec.template.metadata.annotations[strata.dev/podset-unconstrained-topology]: Invalid value: "yes please": must be "true" or "false"`},
		},
		"unconstrained false alone": {
			annotations: map[string]string{"strata.dev/podset-unconstrained-topology": "false"},
			count:       4,
			want:        &strata.PodSetTopologyRequest{},
		},
		// KEP-2724: mutually exclusive, whatever the value.
		"unconstrained false beside a required level": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "kueue.x-k8s.io/podset-unconstrained-topology": "false"},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(rack)},
			wantErrs:    []string{`spec.template.metadata.annotations: Invalid value: "strata.dev/podset-required-topology, kueue.x-k8s.io/podset-unconstrained-topology": only one of podset-required-topology, podset-preferred-topology and podset-unconstrained-topology may be set`},
		},
		"required and preferred together": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "kueue.x-k8s.io/podset-preferred-topology": block},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(rack), Preferred: ptr.To(block)},
			wantErrs:    []string{`spec.template.metadata.annotations: Invalid value: "strata.dev/podset-required-topology, kueue.x-k8s.io/podset-preferred-topology": only one of podset-required-topology, podset-preferred-topology and podset-unconstrained-topology may be set`},
		},
		"a level that is not a label key": {
			annotations: map[string]string{"strata.dev/podset-required-topology": "the rack"},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To("the rack")},
			wantErrs:    []string{`spec.template.metadata.annotations[strata.dev/podset-required-topology]: Invalid value: "the rack": must be a node label key such as cloud.provider.com/topology-rack`},
		},
		"two-level slices": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host, "strata.dev/podset-slice-size": "4"},
			count:       16,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](4)},
		},
		"slice level without size and no default": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host},
			count:       16,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host)},
			wantErrs:    []string{`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Required value: podset-slice-size is required with podset-slice-required-topology`},
		},
		"slice level without size takes the default": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host},
			count:       16,
			defSlice:    8,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](8)},
		},
		// KEP-2724: the size must divide the pod set; Kueue v0.20's partial
		// slices (partialSlices) take the request as it is.
		"slice size that does not divide: a partial slice": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host, "strata.dev/podset-slice-size": "3"},
			count:       16,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](3)},
			wantErrs: []string{`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "3": the slice size 3 must evenly divide the pod count 16 (KEP-2724); ` +
				`for the last pod to form one partial slice (Kueue's TASPartialSlices), set topologyAwareScheduling.partialSlices in the hub's and the agents' configuration`},
			partialOnly: true,
		},
		"one layer of constraints that does not divide: a partial slice": {
			annotations: map[string]string{
				"kueue.x-k8s.io/podset-required-topology":                   block,
				"kueue.x-k8s.io/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": 16}]`,
			},
			count: 20,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: rack, Size: 16}}},
			wantErrs:    []string{"the slice size 16 must evenly divide the pod count 20 (KEP-2724); for the last 4 pods to form one partial slice"},
			partialOnly: true,
		},
		"several layers whose first size does not divide the count": {
			annotations: map[string]string{
				"kueue.x-k8s.io/podset-required-topology":                   block,
				"kueue.x-k8s.io/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": 16}, {"topology": "` + host + `", "size": 4}]`,
			},
			count: 20,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: rack, Size: 16}, {Topology: host, Size: 4}}},
			wantErrs: []string{`layer 0: size 16 must evenly divide the pod count 20 when more than one layer is given`},
		},
		"slice size not a number": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology": host, "strata.dev/podset-slice-size": "four"},
			count:       16,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host)},
			wantErrs:    []string{`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "four": must be a whole number of pods, at least 1`},
		},
		"slice size alone": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-size": "4"},
			count:       16,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block)},
			wantErrs:    []string{`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "4": needs podset-slice-required-topology to say which level each slice must fit in`},
		},
		// Kueue: slices alone are an unconstrained request with slices.
		"slices alone, kueue prefix": {
			annotations: map[string]string{"kueue.x-k8s.io/podset-slice-required-topology": host, "kueue.x-k8s.io/podset-slice-size": "4"},
			count:       16,
			want:        &strata.PodSetTopologyRequest{PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](4)},
		},
		"slices with unconstrained, kueue prefix": {
			annotations: map[string]string{
				"kueue.x-k8s.io/podset-unconstrained-topology":  "true",
				"kueue.x-k8s.io/podset-slice-required-topology": rack,
				"kueue.x-k8s.io/podset-slice-size":              "8",
			},
			count: 16,
			want:  &strata.PodSetTopologyRequest{Unconstrained: ptr.To(true), PodSetSliceRequiredTopology: ptr.To(rack), PodSetSliceSize: ptr.To[int32](8)},
		},
		"slices with unconstrained, strata prefix": {
			annotations: map[string]string{
				"strata.dev/podset-unconstrained-topology":  "true",
				"strata.dev/podset-slice-required-topology": host,
				"strata.dev/podset-slice-size":              "2",
			},
			count: 4,
			want:  &strata.PodSetTopologyRequest{Unconstrained: ptr.To(true), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](2)},
		},
		"slices alone still need a size": {
			annotations: map[string]string{"kueue.x-k8s.io/podset-slice-required-topology": host},
			count:       16,
			want:        &strata.PodSetTopologyRequest{PodSetSliceRequiredTopology: ptr.To(host)},
			// Named with the prefix the user wrote.
			wantErrs: []string{`spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: podset-slice-size is required with podset-slice-required-topology`},
		},
		"multi-layer constraints alone": {
			annotations: map[string]string{
				"kueue.x-k8s.io/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": "8"}, {"topology": "` + host + `", "size": "2"}]`,
			},
			count: 16,
			want: &strata.PodSetTopologyRequest{PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: rack, Size: 8}, {Topology: host, Size: 2}}},
		},
		"multi-layer constraints": {
			annotations: map[string]string{
				"strata.dev/podset-required-topology":                   block,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + block + `", "size": "32"}, {"topology": "` + rack + `", "size": "16"}]`,
			},
			count: 64,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: block, Size: 32}, {Topology: rack, Size: 16}}},
		},
		"multi-layer constraints with numeric sizes": {
			annotations: map[string]string{
				"strata.dev/podset-required-topology":                   block,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + block + `", "size": 32}, {"topology": "` + rack + `", "size": 16}]`,
			},
			count: 64,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: block, Size: 32}, {Topology: rack, Size: 16}}},
		},
		"multi-layer size beyond 32 bits": {
			annotations: map[string]string{
				"strata.dev/podset-required-topology":                   block,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + block + `", "size": 4294967296}]`,
			},
			count:    64,
			want:     &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{}},
			wantErrs: []string{`layer 0: "size" must be a whole number of pods, at least 1 and at most 2147483647`},
		},
		"multi-layer constraints with slice annotations": {
			annotations: map[string]string{
				"strata.dev/podset-required-topology":                   block,
				"strata.dev/podset-slice-required-topology":             host,
				"strata.dev/podset-slice-size":                          "4",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + rack + `", "size": "16"}]`,
			},
			count: 64,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](4),
				PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{{Topology: rack, Size: 16}}},
			wantErrs: []string{`cannot be combined with podset-slice-required-topology or podset-slice-size; put every layer in the constraints`},
		},
		"multi-layer sizes that do not divide": {
			annotations: map[string]string{
				"strata.dev/podset-required-topology":                   block,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "` + block + `", "size": "32"}, {"topology": "` + rack + `", "size": "12"}]`,
			},
			count: 96,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: block, Size: 32}, {Topology: rack, Size: 12}}},
			wantErrs: []string{`layer 1: size 12 must evenly divide the size 32 of layer 0 above it`},
		},
		"multi-layer malformed JSON": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology-constraints": `[{"topology": `},
			count:       4,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(block)},
			wantErrs:    []string{`must be a JSON list like [{"topology": "<node label>", "size": "<pods>"}]`},
		},
		"multi-layer with four layers and a missing size": {
			annotations: map[string]string{"strata.dev/podset-required-topology": block, "strata.dev/podset-slice-required-topology-constraints": `[{"topology":"a","size":"8"},{"topology":"b","size":"4"},{"topology":"c","size":"2"},{"topology":"d"}]`},
			count:       8,
			want: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: "a", Size: 8}, {Topology: "b", Size: 4}, {Topology: "c", Size: 2}}},
			wantErrs: []string{"must have 1 to 3 layers", `layer 3: "size" must be a whole number of pods, at least 1`},
		},
		"group name": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "kueue.x-k8s.io/podset-group-name": "replica"},
			count:       1,
			want:        &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetGroupName: ptr.To("replica")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParseTopologyRequest(tc.annotations, tc.count, tc.defSlice, path)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want,+got):\n%s", diff)
			}
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors = %v, want %d containing %q", errs, len(tc.wantErrs), tc.wantErrs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.wantErrs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), tc.wantErrs[i])
				}
			}
			if got, want := RequestUsable(errs), len(errs) == 0 || tc.partialOnly; got != want {
				t.Errorf("RequestUsable() = %v, want %v", got, want)
			}
			if got, want := len(AllowPartialSlices(errs, true)), len(errs); tc.partialOnly && got != 0 || !tc.partialOnly && got != want {
				t.Errorf("AllowPartialSlices(errs, true) kept %d of %d errors (partial only: %v)", got, want, tc.partialOnly)
			}
			if got := AllowPartialSlices(errs, false); len(got) != len(errs) {
				t.Errorf("AllowPartialSlices(errs, false) kept %d of %d errors", len(got), len(errs))
			}
		})
	}
}

func TestValidateAgainstTopology(t *testing.T) {
	levels := []string{block, rack, host}
	cases := map[string]struct {
		req     *strata.PodSetTopologyRequest
		wantErr string
	}{
		"nil":                           {},
		"required rack":                 {req: &strata.PodSetTopologyRequest{Required: ptr.To(rack)}},
		"unknown level":                 {req: &strata.PodSetTopologyRequest{Preferred: ptr.To("zone")}, wantErr: `podset-preferred-topology: "zone" is not a level of Topology "default" (levels: cloud.provider.com/topology-block, cloud.provider.com/topology-rack, kubernetes.io/hostname)`},
		"slice below":                   {req: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](2)}},
		"slice at the level":            {req: &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetSliceRequiredTopology: ptr.To(rack), PodSetSliceSize: ptr.To[int32](2)}},
		"slices alone at the top level": {req: &strata.PodSetTopologyRequest{PodSetSliceRequiredTopology: ptr.To(block), PodSetSliceSize: ptr.To[int32](2)}},
		"slices with unconstrained":     {req: &strata.PodSetTopologyRequest{Unconstrained: ptr.To(true), PodSetSliceRequiredTopology: ptr.To(rack), PodSetSliceSize: ptr.To[int32](2)}},
		"slice above": {
			req:     &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetSliceRequiredTopology: ptr.To(block), PodSetSliceSize: ptr.To[int32](2)},
			wantErr: `podset-slice-required-topology: "cloud.provider.com/topology-block" is above the pod set's level "cloud.provider.com/topology-rack"`,
		},
		"layers out of order": {
			req: &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: rack, Size: 8}, {Topology: block, Size: 4}}},
			wantErr: `layers must go from the coarsest level to the finest; layer 1 ("cloud.provider.com/topology-block") is not below layer 0`,
		},
		"layer above the main level": {
			req: &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{
				{Topology: block, Size: 8}}},
			wantErr: `layer 0 level "cloud.provider.com/topology-block" is above the pod set's level`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateAgainstTopology(tc.req, "default", levels)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidatePodSets(t *testing.T) {
	ps := func(name string, r *strata.PodSetTopologyRequest) strata.PodSet {
		return strata.PodSet{Name: name, Count: 1, TopologyRequest: r}
	}
	cases := map[string]struct {
		podSets  []strata.PodSet
		wantErrs []string
	}{
		"all required": {podSets: []strata.PodSet{ps("a", &strata.PodSetTopologyRequest{Required: ptr.To(rack)}), ps("b", &strata.PodSetTopologyRequest{Preferred: ptr.To(rack)})}},
		"none":         {podSets: []strata.PodSet{ps("a", nil), ps("b", nil)}},
		"one without": {
			podSets:  []strata.PodSet{ps("a", &strata.PodSetTopologyRequest{Required: ptr.To(rack)}), ps("b", nil)},
			wantErrs: []string{"pod sets b have no podset-required-topology or podset-preferred-topology while a do; set one on every pod set"},
		},
		// Kueue v0.20 (TASGroupedPodSetSlicing, on by default): the pod
		// sets of a group may have slices, and need not have the same ones.
		"a leader and workers in slices, grouped": {
			podSets: []strata.PodSet{
				ps("leader", &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetGroupName: ptr.To("g")}),
				ps("workers", &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetGroupName: ptr.To("g"),
					PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{{Topology: rack, Size: 2}}}),
			},
		},
		"a group with slices but neither required nor preferred": {
			podSets: []strata.PodSet{
				ps("leader", &strata.PodSetTopologyRequest{PodSetGroupName: ptr.To("g")}),
				ps("workers", &strata.PodSetTopologyRequest{PodSetGroupName: ptr.To("g"), PodSetSliceRequiredTopology: ptr.To(host), PodSetSliceSize: ptr.To[int32](1)}),
			},
			wantErrs: []string{`spec.podSets[0]: Required value: pod set group "g" needs podset-required-topology or podset-preferred-topology`},
		},
		"a group with different levels": {
			podSets: []strata.PodSet{
				ps("leader", &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetGroupName: ptr.To("g")}),
				ps("workers", &strata.PodSetTopologyRequest{Required: ptr.To(block), PodSetGroupName: ptr.To("g")}),
			},
			wantErrs: []string{`spec.podSets[1]: Invalid value: "workers": pod set group "g": every member must set the same podset-required-topology or podset-preferred-topology as pod set "leader"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := ValidatePodSets(tc.podSets, field.NewPath("spec", "podSets"))
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors = %v, want %q", errs, tc.wantErrs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.wantErrs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), tc.wantErrs[i])
				}
			}
		})
	}
}
