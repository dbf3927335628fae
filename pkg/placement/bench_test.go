package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// benchSummary is the summary of a GPU cluster of n nodes (8 CPU, 8 GPUs,
// 64 GiB; 16 nodes per rack, 16 racks per block) whose usage is drawn at
// random from whole pods of 1, 2, 4 or 8 GPUs with proportional CPU and
// memory, as BenchmarkFindAssignment's topology. One block in four is
// busy, so that a burst of block-sized workloads finds room for 1,000 ops.
func benchSummary(b *testing.B, rng *rand.Rand, n int) *strata.CapacitySummaryStatus {
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}
	busyBlock := map[int]bool{}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		if i%256 == 0 {
			busyBlock[i/256] = rng.IntN(4) == 0
		}
		s.SetNode(tas.Node{Name: name, Ready: true, Allocatable: alloc, Labels: map[string]string{
			block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: name,
		}})
		for free := int64(8); busyBlock[i/256] && free > 0 && rng.IntN(3) > 0; {
			g := []int64{1, 2, 4, 8}[rng.IntN(4)]
			if g > free {
				continue
			}
			free -= g
			s.AddUsage(name, tas.WithPod(corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(g, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(g<<33, resource.BinarySI),
				gpu:                   *resource.NewQuantity(g, resource.DecimalSI),
			}), 1)
		}
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		b.Fatal(err)
	}
	return &st
}

// BenchmarkPlace: one op is one complete decision over 50 clusters of
// 10,000 nodes plus its reservation, as in a burst; every 1,000 ops every
// summary is replaced by a new generation (which reflects the reserved
// workloads: their reservations end).
func BenchmarkPlace(b *testing.B) {
	const clusters, nodes, regenerate = 50, 10000, 1000
	rng := rand.New(rand.NewPCG(1, 1))
	summaries := make([]*strata.CapacitySummaryStatus, clusters)
	for i := range summaries {
		summaries[i] = benchSummary(b, rng, nodes)
	}
	shapes := []struct {
		name string
		ps   *testutil.PodSetWrapper
	}{
		{"rack-preferred-64x4cpu", testutil.MakePodSet("main", 64, "cpu", "4").Preferred(rack)},
		{"block-required-512x4cpu", testutil.MakePodSet("main", 512, "cpu", "4").Required(block)},
		{"rack-required-32x4cpu", testutil.MakePodSet("main", 32, "cpu", "4").Required(rack)},
		{"unconstrained-100x4cpu", testutil.MakePodSet("main", 100, "cpu", "4")},
	}
	for _, shape := range shapes {
		b.Run(fmt.Sprintf("clusters=%d/nodes=%d/%s", clusters, nodes, shape.name), func(b *testing.B) {
			targets := make([]*Target, clusters)
			for i, st := range summaries {
				targets[i] = target(b, fmt.Sprintf("worker-%02d", i), "gpu", st)
			}
			p := New("", tas.DefaultOptions(), 0)
			wl := testutil.MakeWorkload("w", "default").PodSets(shape.ps.Obj()).Obj()
			gen, placed, op := int64(1), 0, 0
			// The previous shape's 50 snapshots are garbage now: collect
			// them before the clock runs, not during this shape's ops.
			runtime.GC()
			b.ReportAllocs()
			for b.Loop() {
				if op++; op%regenerate == 0 {
					gen++
					for i, t := range targets {
						for k := range placed {
							t.Release(fmt.Sprint(k))
						}
						summaries[i].SummaryGeneration = gen
						if err := t.SetSummary(summaries[i]); err != nil {
							b.Fatal(err)
						}
					}
					placed = 0
				}
				d := p.Decide(wl, nil, targets)
				if d.Cluster == "" {
					b.Fatalf("op %d: %s", op, d.Reason)
				}
				if err := d.Reserve(targets, fmt.Sprint(placed)); err != nil {
					b.Fatal(err)
				}
				placed++
			}
		})
	}
}

// preemptibleTarget is a target of n GPU nodes (16 per rack, 16 racks per
// block), every node busy with one 8-GPU workload of queue "cq" whose
// priority is drawn per rack from 10, 100 and 1000; its summary carries
// the preemptible capacity of each priority, within budget bytes.
func preemptibleTarget(b *testing.B, rng *rand.Rand, name string, n, budget int) *Target {
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}
	var held []tas.Held
	var priority int32
	for i := range n {
		node := fmt.Sprintf("node-%05d", i)
		if i%16 == 0 {
			priority = []int32{10, 100, 1000}[rng.IntN(3)]
		}
		s.SetNode(tas.Node{Name: node, Ready: true, Allocatable: alloc, Labels: map[string]string{
			block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: node,
		}})
		u := tas.Usage{node: tas.WithPod(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8")})}
		s.AddUsage(node, u[node], 1)
		held = append(held, tas.Held{Queue: "cq", Priority: priority, Usage: u, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8")}})
	}
	st, err := s.CapturePreemptible(nil, held, tas.WithinAll(held)).Summarize(budget)
	if err != nil {
		b.Fatal(err)
	}
	st.SummaryGeneration = 1
	t, err := NewTarget(name, "f", &st)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkDecidePreemption: one op is the hub's fleet preemption search
// for a rack-required workload of 16 whole-GPU-node pods (priority 500)
// over 3 full clusters of 10,000 nodes, with summaries within the default
// 64 KiB budget. "rebuilt": every op follows a reservation (the worst
// case: each entry's snapshot is built again); "cached": it does not.
func BenchmarkDecidePreemption(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := 10000
	if testing.Short() {
		nodes = 512 // make bench-smoke
	}
	var targets []*Target
	for c := range 3 {
		targets = append(targets, preemptibleTarget(b, rng, fmt.Sprintf("c%d", c), nodes, 64<<10))
	}
	entries := 0
	for _, t := range targets {
		entries += len(t.summary.Preemptible)
	}
	wl := job(16, "8", func(ps *testutil.PodSetWrapper) { ps.Required(rack) })
	for _, mode := range []string{"rebuilt", "cached"} {
		b.Run(mode, func(b *testing.B) {
			p := New("", tas.Options{}, 0)
			for b.Loop() {
				if mode == "rebuilt" {
					for _, t := range targets {
						t.bump()
					}
				}
				c, why := p.DecidePreemption(wl, []string{"f"}, targets, everywhere(500), func(*Target) []PreemptionScope { return []PreemptionScope{{Queue: "cq", Within: true}} }, nil)
				if c == nil {
					b.Fatalf("no preemption found: %s", why)
				}
			}
			b.ReportMetric(float64(entries), "entries")
		})
	}
}
