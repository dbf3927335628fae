package replay

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// gpuCluster is a flavor of nodes 8-GPU hosts, 16 per rack, 8 racks per
// block, nothing running.
func gpuCluster(b testing.TB, name string, nodes int) Cluster {
	s := tas.NewSnapshot([]string{block, rack, strata.HostnameLabel}, nil)
	alloc := corev1.ResourceList{GPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	for i := range nodes {
		node := fmt.Sprintf("%s-%05d", name, i)
		s.SetNode(tas.Node{Name: node, Ready: true, Allocatable: alloc, Labels: map[string]string{
			block: fmt.Sprintf("b%d", i/128), rack: fmt.Sprintf("r%d", i/16), strata.HostnameLabel: node,
		}})
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		b.Fatal(err)
	}
	return Cluster{Name: name, Flavor: "gpu", Topology: "default", Summary: &st}
}

// BenchmarkReplay: one op replays 10,000 generated Jobs over 8 clusters of
// 2,000 8-GPU nodes under one policy.
// With -short (make bench-smoke): 300 Jobs over 2 clusters of 64 nodes.
func BenchmarkReplay(b *testing.B) {
	clusterCount, nodes, jobs, rate := 8, 2000, 10000, 20000.0
	if testing.Short() {
		clusterCount, nodes, jobs, rate = 2, 64, 300, 60
	}
	var clusters []Cluster
	for i := range clusterCount {
		clusters = append(clusters, gpuCluster(b, fmt.Sprintf("c%d", i), nodes))
	}
	trace := Generate(GenerateOptions{Jobs: jobs, Seed: 1, ArrivalsPerHour: rate})
	for _, p := range Policies {
		b.Run(string(p), func(b *testing.B) {
			for b.Loop() {
				r, err := Run(clusters, trace, p, Options{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				if r.Started+r.Never != len(trace) || r.Started == 0 {
					b.Fatalf("%d Jobs started and %d never, of %d: the replay lost Jobs", r.Started, r.Never, len(trace))
				}
				b.ReportMetric(r.Utilisation*100, "util%")
				b.ReportMetric(r.MeanWait, "mean-wait-s")
			}
		})
	}
}
