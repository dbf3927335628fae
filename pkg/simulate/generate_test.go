package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"strata.dev/strata/pkg/tas"
)

// TestGenerateCluster: a generated cluster reads back as simulate's input,
// and its summary has the GPUs of its nodes less those of its busy pods.
func TestGenerateCluster(t *testing.T) {
	var buf strings.Builder
	if err := GenerateCluster(&buf, ClusterOptions{Name: "g", Nodes: 40, Busy: 0.5, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(buf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadClusters([]ClusterArg{{Name: "g", Path: path}})
	if err != nil {
		t.Fatal(err)
	}
	in := f.Clusters[0].In
	if len(in.Nodes) != 40 || len(in.Pods) == 0 || len(in.Pods) == 40 {
		t.Fatalf("%d nodes and %d busy pods; want 40 nodes and some busy", len(in.Nodes), len(in.Pods))
	}
	busy := int64(0)
	for _, p := range in.Pods {
		q := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		busy += q.Value()
	}
	sums, err := f.Summaries()
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Flavor != "gpu" || sums[0].Topology != "default" {
		t.Fatalf("summaries %+v; want the gpu flavor of topology default", sums)
	}
	s, err := tas.NewSnapshotFromSummary(sums[0].Summary)
	if err != nil {
		t.Fatal(err)
	}
	free, err := s.Room(nil, tas.Request{PodRequests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 40*8 - busy; free != want {
		t.Errorf("%d GPUs free; want %d (320 less %d busy)", free, want, busy)
	}
}

func TestGenerateClusterErrors(t *testing.T) {
	for _, o := range []ClusterOptions{{Nodes: 0}, {Nodes: 1, Busy: 2}} {
		if err := GenerateCluster(&strings.Builder{}, o); err == nil {
			t.Errorf("GenerateCluster(%+v) = nil, want an error", o)
		}
	}
}
