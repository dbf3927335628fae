package tas

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
)

// benchSnapshot is an empty cluster of n nodes: 16 nodes per rack, 16 racks
// per block, every node 8 CPU and 110 pods allocatable.
func benchSnapshot(n int) *Snapshot {
	s := NewSnapshot([]string{block, rack, host}, nil)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		s.SetNode(Node{
			Name: name,
			Labels: map[string]string{
				block: fmt.Sprintf("block-%d", i/256),
				rack:  fmt.Sprintf("rack-%d", i/16%16),
				host:  name,
			},
			Allocatable: alloc,
			Ready:       true,
		})
	}
	return s
}

var benchSizes = []int{4096, 16384, 65536}

func BenchmarkFindAssignment(b *testing.B) {
	shapes := []struct {
		name string
		req  Request
	}{
		{"rack-preferred-64x4cpu", Request{Count: 64, PodRequests: cpu("4"), Mode: Preferred, Level: rack}},
		{"block-required-512x4cpu", Request{Count: 512, PodRequests: cpu("4"), Mode: Required, Level: block}},
		{"rack-required-32x4cpu", Request{Count: 32, PodRequests: cpu("4"), Mode: Required, Level: rack}},
		{"unconstrained-100x4cpu", Request{Count: 100, PodRequests: cpu("4"), Mode: Unconstrained}},
	}
	for _, n := range benchSizes {
		s := benchSnapshot(n)
		for _, shape := range shapes {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, shape.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					a, err := s.FindAssignment(shape.req, DefaultOptions())
					if err != nil || a.PodCount() != shape.req.Count {
						b.Fatalf("FindAssignment() = %v, %v", a, err)
					}
				}
			})
		}
	}
}

// BenchmarkFindGroupAssignment places a leader and its workers (an LWS
// group) in one rack: one 8-CPU pod a node, so the group takes a rack's
// 16 nodes.
func BenchmarkFindGroupAssignment(b *testing.B) {
	reqs := []Request{
		{Count: 1, PodRequests: cpu("8"), Mode: Required, Level: rack},
		{Count: 15, PodRequests: cpu("8"), Mode: Required, Level: rack},
	}
	for _, n := range benchSizes {
		s := benchSnapshot(n)
		b.Run(fmt.Sprintf("nodes=%d/lws-rack-required-1+15x8cpu", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := s.FindGroupAssignment(reqs, DefaultOptions())
				if err != nil || out[0].PodCount() != 1 || out[1].PodCount() != 15 {
					b.Fatalf("FindGroupAssignment() = %v, %v", out, err)
				}
			}
		})
	}
}

// BenchmarkUpdateNode is the cost of bringing the snapshot up to date after
// the usage of one node changes (a pod bound or finished).
func BenchmarkUpdateNode(b *testing.B) {
	usage := cpu("1")
	for _, n := range benchSizes {
		s := benchSnapshot(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				name := fmt.Sprintf("node-%05d", i%n)
				s.AddUsage(name, usage, 1)
				s.AddUsage(name, usage, -1)
				i++
			}
		})
	}
}

// BenchmarkSummarize: one summary of a 10,000-node GPU cluster with usage
// from whole pods of 1, 2, 4 or 8 GPUs, and its size; "jitter" gives every
// node a different memory size, which only rounding memory keeps small.
func BenchmarkSummarize(b *testing.B) {
	for _, c := range []struct {
		name     string
		jitter   bool
		labelled bool
		budget   int
	}{
		{"nodes=10000", false, false, math.MaxInt},
		{"nodes=10000/labelled", false, true, math.MaxInt},
		{"nodes=10000/memory-jitter", true, false, 64 * 1024},
	} {
		s := gpuCluster(rand.New(rand.NewPCG(1, 1)), gpuClusterOptions{nodes: 10000, hostLowest: true, busy: 0.7, memoryJitter: c.jitter, labelled: c.labelled})
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var st strata.CapacitySummaryStatus
			for b.Loop() {
				var err error
				if st, err = s.Summarize(c.budget); err != nil {
					b.Fatal(err)
				}
			}
			data, _ := json.Marshal(st)
			b.ReportMetric(float64(len(data)), "summary-bytes")
			if len(CountsUnderstated(&st)) > 0 {
				b.Fatalf("counts understated: %v", st.Understated)
			}
		})
	}
}

// BenchmarkSummarySnapshot: the hub's view of a 10,000-node flavor from a
// summary, built anew or refreshed in place from a newer summary of the
// same shape.
func BenchmarkSummarySnapshot(b *testing.B) {
	s := gpuCluster(rand.New(rand.NewPCG(1, 1)), gpuClusterOptions{nodes: 10000, hostLowest: true, busy: 0.7})
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("nodes=10000/build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := NewSnapshotFromSummary(&st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nodes=10000/refresh", func(b *testing.B) {
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if !hub.Refresh(&st) {
				b.Fatal("Refresh refused the same summary")
			}
		}
	})
}

// BenchmarkCapture: the copy the agent takes under its cache's lock before
// summarizing, of a 10,000-node GPU cluster, without taints and with
// every node tainted (taint sets are worked out when taints change, not
// here).
func BenchmarkCapture(b *testing.B) {
	for _, c := range []struct {
		name    string
		tainted float64
	}{{"nodes=10000", 0}, {"nodes=10000/tainted", 1}} {
		s := gpuCluster(rand.New(rand.NewPCG(1, 1)), gpuClusterOptions{nodes: 10000, hostLowest: true, busy: 0.7, tainted: c.tainted})
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Capture()
			}
		})
	}
}
