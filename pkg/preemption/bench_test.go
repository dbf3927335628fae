package preemption

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
)

// BenchmarkFind is one rack-required preemptor (16 pods of 7 CPUs, a
// whole rack) on 16,384 nodes of 8 CPUs (16 per rack, 16 racks per block)
// that 2,000 admitted workloads of random priority fill, each placed by
// the engine as the agent admitted it (4 to 12 whole-node pods, rack
// preferred); the nodes left free run a 2-CPU pod each, which is not preemptible.
func BenchmarkFind(b *testing.B) {
	const nodes, workloads = 16384, 2000
	snap := tas.NewSnapshot([]string{"block", rackLevel, hostLevel}, nil)
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i)
		snap.SetNode(tas.Node{Name: name, Labels: map[string]string{"block": fmt.Sprintf("b%d", i/256), rackLevel: fmt.Sprintf("r%d", i/16), hostLevel: name},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}, Ready: true})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	books := queue.NewBooks([]*strata.ClusterQueue{cq("a", "", "1000000", nil, nil)})
	var admitted []Workload
	var usages []tas.Usage
	for i := range workloads {
		pods := int32(4 + rng.IntN(9))
		req := tas.Request{Count: pods, PodRequests: cpu("8"), Mode: tas.Preferred, Level: rackLevel}
		a, err := snap.FindAssignment(req, tas.DefaultOptions())
		if err != nil {
			req.Count = 1
			if a, err = snap.FindAssignment(req, tas.DefaultOptions()); err != nil {
				b.Fatalf("workload %d: %v", i, err)
			}
		}
		u, err := snap.Commit(a, req.PodRequests)
		if err != nil {
			b.Fatal(err)
		}
		total := cpu(fmt.Sprint(8 * req.Count))
		books.Charge("a", flavor, total, 1)
		admitted = append(admitted, Workload{Key: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("w%04d", i)}, Queue: "a",
			Priority: int32(rng.IntN(10)), AdmittedAt: t0.Add(time.Duration(i) * time.Second), Requests: total})
		usages = append(usages, u)
	}
	used := map[string]bool{}
	for _, u := range usages {
		for n := range u {
			used[n] = true
		}
	}
	for i := range nodes {
		if name := fmt.Sprintf("n%05d", i); !used[name] {
			snap.AddUsage(name, cpu("2"), 1)
		}
	}
	req := tas.Request{Count: 16, PodRequests: cpu("7"), Mode: tas.Required, Level: rackLevel}
	if _, err := snap.FindAssignment(req, tas.DefaultOptions()); err == nil {
		b.Fatal("the preemptor fits without preemption")
	}
	capacity := &SnapshotCapacity{Snap: snap, Usages: usages, Place: func(s *tas.Snapshot) ([]tas.Usage, error) {
		a, err := s.FindAssignment(req, tas.DefaultOptions())
		if err != nil {
			return nil, err
		}
		u, err := s.Commit(a, req.PodRequests)
		return []tas.Usage{u}, err
	}}
	pre := Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "pre"}, Queue: "a", Priority: 100, Requests: cpu("112")}
	policy := Policy{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionNever, BorrowWithinCohort: strata.BorrowWithinCohortNever}
	b.ReportAllocs()
	var victims int
	for b.Loop() {
		r := Find(pre, policy, books, flavor, admitted, capacity)
		if len(r.Victims) == 0 {
			b.Fatalf("no victims: %s", r.Why)
		}
		victims = len(r.Victims)
	}
	b.ReportMetric(float64(victims), "victims")
}
