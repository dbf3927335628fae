package placement

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// summaryOf builds a worker's summary on levels (host last) of free
// 8-GPU nodes, each given by its labels' values above the host.
func summaryOf(t *testing.T, levels []string, nodes ...[]string) *strata.CapacitySummaryStatus {
	t.Helper()
	s := tas.NewSnapshot(levels, nil)
	for i, values := range nodes {
		name := fmt.Sprintf("n%d", i)
		labels := map[string]string{host: name}
		for l, v := range values {
			labels[levels[l]] = v
		}
		s.SetNode(tas.Node{Name: name, Labels: labels, Ready: true, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	return &st
}

// TestCompactnessAcrossTopologyDepths: compactness is compared at the
// summaries' leaf level, not counted from their top: a cluster with a
// level more above its racks does not win by it.
func TestCompactnessAcrossTopologyDepths(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	rackOfN := func(n int, values ...string) [][]string {
		out := make([][]string, n)
		for i := range out {
			out[i] = values
		}
		return out
	}
	cases := map[string]struct {
		targets func() []*Target
		mode    func(*strata.Workload)
		want    string
	}{
		// Both a single rack: the tighter one (no room left) wins, not
		// the one whose rack is one level deeper from its top.
		"a rack in each: the tighter": {
			targets: func() []*Target {
				return []*Target{
					target(t, "a-tight", "gpu", summaryOf(t, []string{rack, host}, rackOfN(4, "r0")...)),
					target(t, "b-loose", "gpu", summaryOf(t, []string{block, rack, host}, rackOfN(8, "b0", "r0")...)),
				}
			},
			mode: func(wl *strata.Workload) {
				wl.Spec.PodSets[0].TopologyRequest = &strata.PodSetTopologyRequest{Required: ptr.To(rack)}
			},
			want: "a-tight",
		},
		// One rack beats two racks of one block of a deeper topology.
		"a rack against a block": {
			targets: func() []*Target {
				return []*Target{
					target(t, "a-rack", "gpu", summaryOf(t, []string{rack, host}, rackOfN(4, "r0")...)),
					target(t, "b-spread", "gpu", summaryOf(t, []string{zone, block, rack, host},
						append(rackOfN(2, "z0", "b0", "r0"), rackOfN(2, "z0", "b0", "r1")...)...)),
				}
			},
			mode: func(wl *strata.Workload) {
				wl.Spec.PodSets[0].TopologyRequest = &strata.PodSetTopologyRequest{Preferred: ptr.To(rack)}
			},
			want: "a-rack",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := job(4, "8", nil)
			tc.mode(wl)
			d := New("", tas.DefaultOptions(), 0).Decide(wl, []string{"gpu"}, tc.targets())
			if d.Cluster != tc.want {
				t.Errorf("Decide() chose %q, want %q: %s", d.Cluster, tc.want, d.Reason)
			}
		})
	}
}

// TestNeverFitsOfASummaryMadeAnew: a summary made anew (its flavor
// deleted and created again, its WorkerCluster registered again) restarts
// its generations at 1; what the flavor held when empty is not taken
// from the answer for the old summary's generation 1.
func TestNeverFitsOfASummaryMadeAnew(t *testing.T) {
	p := New("", tas.DefaultOptions(), 0)
	wl := job(4, "8", nil)
	wl.Spec.PodSets[0].TopologyRequest = &strata.PodSetTopologyRequest{Required: ptr.To(rack)}
	small := summaryOf(t, []string{rack, host}, [][]string{{"r0"}, {"r0"}}...)
	if d := p.Decide(wl, []string{"gpu"}, []*Target{target(t, "w", "gpu", small)}); !d.NeverFits {
		t.Fatalf("a rack of 2 nodes: NeverFits = false, want true: %s", d.Reason)
	}
	// Four nodes in the rack now, all busy: it fits once they are free.
	busy := tas.NewSnapshot([]string{rack, host}, nil)
	for i := range 4 {
		name := fmt.Sprintf("n%d", i)
		busy.SetNode(tas.Node{Name: name, Labels: map[string]string{rack: "r0", host: name}, Ready: true, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
		busy.AddUsage(name, corev1.ResourceList{gpu: resource.MustParse("8")}, 1)
	}
	st, err := busy.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	if d := p.Decide(wl, []string{"gpu"}, []*Target{target(t, "w", "gpu", &st)}); d.NeverFits || d.Cluster != "" {
		t.Errorf("a busy rack of 4 nodes: NeverFits = %t, cluster %q; want false, none: %s", d.NeverFits, d.Cluster, d.Reason)
	}
}
