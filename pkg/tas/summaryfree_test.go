package tas

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestMainResource(t *testing.T) {
	cases := map[string]struct {
		names []corev1.ResourceName
		want  corev1.ResourceName
	}{
		"a GPU first":                 {names: []corev1.ResourceName{"cpu", "pods", "example.com/fpga", "amd.com/gpu"}, want: "amd.com/gpu"},
		"else an extended resource":   {names: []corev1.ResourceName{"cpu", "pods", "hugepages-2Mi", "example.com/fpga"}, want: "example.com/fpga"},
		"else cpu":                    {names: []corev1.ResourceName{"memory", "pods", "cpu"}, want: "cpu"},
		"kubernetes.io names are not": {names: []corev1.ResourceName{"kubernetes.io/batch-cpu", "cpu"}, want: "cpu"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MainResource(tc.names); got != tc.want {
				t.Errorf("MainResource(%v) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}

// TestSummaryFree: the free GPUs in all and in the freest block and rack,
// from a summary the agent's summarizer writes.
func TestSummaryFree(t *testing.T) {
	s := NewSnapshot([]string{block, rack, host}, nil)
	gpu := corev1.ResourceName("nvidia.com/gpu")
	for i := range 8 {
		name := fmt.Sprintf("n%d", i)
		s.SetNode(Node{Name: name, Labels: map[string]string{block: fmt.Sprintf("b%d", i/4), rack: fmt.Sprintf("r%d", i/2), host: name},
			Allocatable: corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}, Ready: true})
	}
	// Block b0 loses 12 GPUs (n0 full, n2 half), rack r3 (in b1) 2.
	s.AddUsage("n0", corev1.ResourceList{gpu: resource.MustParse("8")}, 1)
	s.AddUsage("n2", corev1.ResourceList{gpu: resource.MustParse("4")}, 1)
	s.AddUsage("n6", corev1.ResourceList{gpu: resource.MustParse("2")}, 1)
	st, err := s.Summarize(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	total, largest := SummaryFree(&st, gpu)
	got := map[corev1.ResourceName]int64{}
	for i, n := range st.Resources {
		got[n] = total[i]
	}
	if got[gpu] != 50_000 {
		t.Errorf("free GPUs = %d milli, want 50000", got[gpu])
	}
	want := []LevelFree{{Level: block, Domain: "b1", Free: 30_000}, {Level: rack, Domain: "b1/r2", Free: 16_000}}
	if diff := cmp.Diff(want, largest); diff != "" {
		t.Errorf("largest free (-want,+got):\n%s", diff)
	}
	// SummaryCapacity counts every node, used or not: 8 nodes of 8 GPUs.
	capacity := SummaryCapacity(&st)
	for i, n := range st.Resources {
		if n == gpu && capacity[i] != 64_000 {
			t.Errorf("GPU capacity = %d milli, want 64000", capacity[i])
		}
	}
}
