package tas

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
)

func TestChooseLabels(t *testing.T) {
	levels := []string{block, rack, host}
	many := func(n int, f func(i int) map[string]string) []map[string]string {
		out := make([]map[string]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := []struct {
		name  string
		nodes []map[string]string
		want  *strata.SummaryNodeLabels
		sets  []int32
	}{{
		name:  "levels only",
		nodes: []map[string]string{{block: "b", rack: "r", host: "h1"}, {block: "b", rack: "r", host: "h2"}},
		want:  &strata.SummaryNodeLabels{},
		sets:  []int32{0, 0},
	}, {
		name: "common, listed and absent",
		nodes: []map[string]string{
			{host: "h1", "pool": "gpu", "model": "a100"},
			{host: "h2", "pool": "gpu"},
			{host: "h3", "pool": "gpu", "model": "h100", "spot": "true"},
			{host: "h4", "pool": "gpu", "model": "a100"},
		},
		want: &strata.SummaryNodeLabels{
			Common: map[string]string{"pool": "gpu"},
			Keys:   []string{"model", "spot"},
			Sets: []strata.LabelSet{
				{Labels: map[string]string{"model": "a100"}},
				{Labels: map[string]string{"model": "h100", "spot": "true"}},
			},
		},
		sets: []int32{1, 0, 2, 1},
	}, {
		name: "a key with a value per node is omitted, the others kept",
		nodes: many(100, func(i int) map[string]string {
			return map[string]string{host: fmt.Sprint("h", i), "id": fmt.Sprint(i), "model": []string{"a100", "h100"}[i%2]}
		}),
		want: &strata.SummaryNodeLabels{
			Keys:        []string{"model"},
			OmittedKeys: []string{"id"},
			Sets:        []strata.LabelSet{{Labels: map[string]string{"model": "a100"}}, {Labels: map[string]string{"model": "h100"}}},
		},
		sets: many100(func(i int) int32 { return int32(1 + i%2) }),
	}, {
		name: "keys whose combinations exceed the sets: the later, wider one omitted",
		nodes: many(100, func(i int) map[string]string {
			return map[string]string{"a": fmt.Sprint(i % 8), "b": fmt.Sprint(i % 9), "c": fmt.Sprint(i % 2)}
		}),
		want: func() *strata.SummaryNodeLabels {
			out := &strata.SummaryNodeLabels{Keys: []string{"a", "c"}, OmittedKeys: []string{"b"}}
			for i := range 8 {
				out.Sets = append(out.Sets, strata.LabelSet{Labels: map[string]string{"a": fmt.Sprint(i), "c": fmt.Sprint(i % 2)}})
			}
			return out
		}(),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := chooseLabels(tc.nodes, levels)
			if diff := cmp.Diff(tc.want, got.out); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			if tc.sets != nil {
				if diff := cmp.Diff(tc.sets, got.nodeSet); diff != "" {
					t.Errorf("node sets (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func many100(f func(i int) int32) []int32 {
	out := make([]int32, 100)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// TestSummaryLabelsSelect: a summary's labels let the hub place pods with
// a node selector or affinity only where the agent would, keep the
// nodes' labels apart in buckets and in the empty view, and name what
// they cannot check.
func TestSummaryLabelsSelect(t *testing.T) {
	agent := NewSnapshot([]string{rack, host}, nil)
	for i, model := range []string{"a100", "a100", "h100", "h100", ""} {
		labels := map[string]string{rack: fmt.Sprint("r", i/2), host: fmt.Sprint("n", i), "node-id": fmt.Sprint(i)}
		if model != "" {
			labels["model"] = model
		}
		alloc := cpu("4")
		alloc[corev1.ResourcePods] = resource.MustParse("110")
		agent.SetNode(Node{Name: fmt.Sprint("n", i), Labels: labels, Allocatable: alloc, Ready: true})
	}
	st, err := agent.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := NewSnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := NewEmptySnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		req       Request
		want      []DomainAssignment // nil: does not fit
		unchecked string
	}{{
		name: "selector on a listed key",
		req:  Request{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: rack, NodeSelector: map[string]string{"model": "h100"}},
		want: []DomainAssignment{{Values: []string{"r1"}, Count: 6}},
	}, {
		name: "selector on a value no node has",
		req:  Request{Count: 1, PodRequests: cpu("1"), NodeSelector: map[string]string{"model": "b200"}},
	}, {
		name: "selector on a key no node has",
		req:  Request{Count: 1, PodRequests: cpu("1"), NodeSelector: map[string]string{"gpu.example/model": "b200"}},
	}, {
		name: "affinity DoesNotExist: the one unlabelled node",
		req: Request{Count: 4, PodRequests: cpu("1"), NodeAffinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "model", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}},
		want: []DomainAssignment{{Values: []string{"r2"}, Count: 4}},
	}, {
		name:      "a selector on the host is not checked",
		req:       Request{Count: 2, PodRequests: cpu("4"), NodeSelector: map[string]string{host: "n1", "model": "a100"}},
		want:      []DomainAssignment{{Values: []string{"r0"}, Count: 2}},
		unchecked: "node selector on kubernetes.io/hostname not checked: the worker's summary does not carry it",
	}, {
		name: "a term of fields only may match anything",
		req: Request{Count: 5, PodRequests: cpu("4"), NodeAffinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "model", Operator: corev1.NodeSelectorOpIn, Values: []string{"b200"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}},
		}}},
		want:      []DomainAssignment{{Values: []string{"r0"}, Count: 2}, {Values: []string{"r1"}, Count: 2}, {Values: []string{"r2"}, Count: 1}},
		unchecked: "node affinity on fields not checked: the worker's summary does not carry it",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unchecked == "" {
				// Only what the summary checks agrees with the agent exactly.
				_, agentErr := agent.FindAssignment(tc.req, Options{})
				if (agentErr == nil) != (tc.want != nil) {
					t.Fatalf("the agent's answer is %v, the case expects fit=%t", agentErr, tc.want != nil)
				}
			}
			a, err := hub.FindAssignment(tc.req, Options{})
			if tc.want == nil {
				if err == nil {
					t.Fatalf("fits at %v, want no fit", a.Domains)
				}
				if _, err := empty.FindAssignment(tc.req, Options{}); err == nil {
					t.Errorf("fits the empty cluster: the hub would wait instead of saying it never fits")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, a.Domains); diff != "" {
				t.Errorf("domains (-want,+got):\n%s", diff)
			}
			if got := hub.UncheckedReason(hub.Unchecked(tc.req)); got != tc.unchecked {
				t.Errorf("unchecked: %q, want %q", got, tc.unchecked)
			}
			// The reservation goes onto the selected nodes: what is left
			// for the others is intact.
			u, err := hub.CommitReservation(a, tc.req.PodRequests)
			if err != nil {
				t.Fatal(err)
			}
			defer hub.ReleaseDispatched(u)
			if tc.req.NodeSelector["model"] == "h100" {
				other := Request{Count: 8, PodRequests: cpu("1"), NodeSelector: map[string]string{"model": "a100"}}
				if _, err := hub.FindAssignment(other, Options{}); err != nil {
					t.Errorf("after reserving h100 nodes, a100 pods no longer fit: %v", err)
				}
			}
		})
	}
}

func TestValidateNodeLabels(t *testing.T) {
	base := func() strata.CapacitySummaryStatus {
		return strata.CapacitySummaryStatus{
			Levels: []string{rack}, LeafLevels: 1, Resources: []corev1.ResourceName{"cpu"}, Vectors: []strata.ResourceVector{{1000}},
			Domains:    []strata.SummaryDomain{{Values: []string{"r0"}, Free: []int32{0, 2}, Capacity: []int32{0, 2}, FreeLabels: []int32{1}, CapacityLabels: []int32{1}}},
			NodeLabels: &strata.SummaryNodeLabels{Keys: []string{"model"}, Sets: []strata.LabelSet{{Labels: map[string]string{"model": "a100"}}}},
		}
	}
	cases := map[string]struct {
		change func(*strata.CapacitySummaryStatus)
		want   string
	}{
		"valid":            {func(*strata.CapacitySummaryStatus) {}, ""},
		"no node labels":   {func(st *strata.CapacitySummaryStatus) { st.NodeLabels = nil }, "label references without nodeLabels"},
		"unknown set":      {func(st *strata.CapacitySummaryStatus) { st.Domains[0].FreeLabels = []int32{2} }, "label set 2 does not exist"},
		"one per pair":     {func(st *strata.CapacitySummaryStatus) { st.Domains[0].CapacityLabels = []int32{1, 1} }, "capacityLabels: 2 numbers for 1 pairs"},
		"key not listed":   {func(st *strata.CapacitySummaryStatus) { st.NodeLabels.Sets[0].Labels["zone"] = "z" }, `key "zone" is not one of nodeLabels.keys`},
		"empty set":        {func(st *strata.CapacitySummaryStatus) { st.NodeLabels.Sets[0].Labels = nil }, "nodeLabels.sets[0] is empty"},
		"too many sets":    {func(st *strata.CapacitySummaryStatus) { st.NodeLabels.Sets = make([]strata.LabelSet, 65) }, "65 sets, at most 64"},
		"negative set":     {func(st *strata.CapacitySummaryStatus) { st.Domains[0].FreeLabels = []int32{-1} }, "label set -1 does not exist"},
		"too many keys":    {func(st *strata.CapacitySummaryStatus) { st.NodeLabels.Keys = make([]string, 33) }, "33 keys, at most 32"},
		"too many omitted": {func(st *strata.CapacitySummaryStatus) { st.NodeLabels.OmittedKeys = make([]string, 257) }, "257 keys, at most 256"},
		"too many common": {func(st *strata.CapacitySummaryStatus) {
			st.NodeLabels.Common = map[string]string{}
			for i := range 65 {
				st.NodeLabels.Common[fmt.Sprint(i)] = "x"
			}
		}, "65 labels, at most 64"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := base()
			tc.change(&st)
			err := ValidateSummary(&st)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := NewSnapshotFromSummary(&st); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if _, err := NewSnapshotFromSummary(&st); err == nil {
				t.Error("NewSnapshotFromSummary read it")
			}
		})
	}
}

// TestSummaryLabelsRoundTrip: a summary with node labels reads back from
// its JSON (as the API server stores it) semantically equal, so that the
// agent does not publish an unchanged summary as a new generation.
func TestSummaryLabelsRoundTrip(t *testing.T) {
	s := gpuCluster(rand.New(rand.NewPCG(1, 1)), gpuClusterOptions{nodes: 600, hostLowest: true, busy: 0.5, labelled: true})
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeLabels == nil || len(st.NodeLabels.Sets) != 2 || len(st.NodeLabels.OmittedKeys) != 1 {
		t.Fatalf("node labels: %+v", st.NodeLabels)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back strata.CapacitySummaryStatus
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(st, back) {
		t.Errorf("read back differently:\n%s", cmp.Diff(st, back))
	}
	plain := gpuCluster(rand.New(rand.NewPCG(1, 1)), gpuClusterOptions{nodes: 32, hostLowest: true})
	st, err = plain.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	back = strata.CapacitySummaryStatus{}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(st, back) || back.NodeLabels == nil {
		t.Errorf("a summary without labels beyond the topology's reads back as %+v, want an empty nodeLabels", back.NodeLabels)
	}
}
