package tas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// fullCaps is domainCaps worked out from scratch: every bin's pods of dem,
// summed into its leaf and up the levels.
func fullCaps(s *Snapshot, dem demand) []int64 {
	out := make([]int64, len(s.podCap))
	for slot, leaf := range s.binLeaf {
		if leaf < 0 || !s.binUsable[slot] {
			continue
		}
		out[leaf] += dem.fit(s.binFree[slot*s.stride:(slot+1)*s.stride]) * s.binCount[slot]
	}
	for lvl := s.depth - 1; lvl >= 0; lvl-- {
		for _, id := range s.levelIDs[lvl] {
			out[s.parentID[id]] += out[id]
		}
	}
	return out
}

// TestDomainCapsStayExact: the per-demand capacity kept up to date from
// the changed bins equals the capacity worked out from scratch, after
// every kind of change an agent's or a hub's snapshot sees — usage added
// and removed, nodes set, changed and removed, reservations made and
// released, a newer summary, a clone — with more demands in turn than a
// snapshot keeps.
func TestDomainCapsStayExact(t *testing.T) {
	demands := []corev1.ResourceList{
		{corev1.ResourceCPU: resource.MustParse("1")},
		{corev1.ResourceCPU: resource.MustParse("2")},
		{gpu: resource.MustParse("4")},
		{corev1.ResourceCPU: resource.MustParse("500m"), gpu: resource.MustParse("1")},
		{corev1.ResourceCPU: resource.MustParse("4"), gpu: resource.MustParse("8")},
		{},
	}
	check := func(t *testing.T, name string, s *Snapshot, rng *rand.Rand) {
		t.Helper()
		for range 3 {
			dem := s.res.newDemand(demands[rng.IntN(len(demands))])
			if len(s.res.names) != s.stride {
				s.restride()
			}
			if diff := cmp.Diff(fullCaps(s, dem), s.domainCaps(dem)); diff != "" {
				t.Fatalf("%s: kept capacity differs from a full count (-full +kept):\n%s", name, diff)
			}
		}
	}
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 11))
		agent, levels := randomCluster(rng)
		check(t, fmt.Sprintf("seed %d: agent", seed), agent, rng)
		for step := range 40 {
			name := fmt.Sprintf("seed %d step %d: agent", seed, step)
			node := fmt.Sprintf("n-%03d", rng.IntN(30))
			switch rng.IntN(4) {
			case 0, 1:
				sign := []int64{1, -1}[rng.IntN(2)]
				agent.AddUsage(node, corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(1+rng.Int64N(2), resource.DecimalSI)}, sign)
			case 2:
				labels := map[string]string{host: node}
				for _, l := range levels {
					if l != host {
						labels[l] = fmt.Sprintf("%s-%d", l, rng.IntN(3))
					}
				}
				agent.SetNode(Node{Name: node, Labels: labels, Ready: rng.IntN(5) > 0, Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewQuantity(int64(2+rng.IntN(8)), resource.DecimalSI), gpu: resource.MustParse("8"),
					corev1.ResourcePods: resource.MustParse("20"),
				}})
			default:
				agent.RemoveNode(node)
			}
			check(t, name, agent, rng)
		}

		st, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			t.Fatal(err)
		}
		var held []*Dispatched
		for step := range 30 {
			name := fmt.Sprintf("seed %d step %d: hub", seed, step)
			switch {
			case rng.IntN(3) > 0:
				req := randomRequests(rng, levels)[0]
				if a, err := hub.FindAssignment(req, randomOptions(rng)); err == nil {
					d, err := hub.CommitReservation(a, req.PodRequests)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					held = append(held, d)
				}
			case len(held) > 0:
				i := rng.IntN(len(held))
				hub.ReleaseDispatched(held[i])
				held = append(held[:i], held[i+1:]...)
			}
			check(t, name, hub, rng)
		}
		clone := hub.Clone()
		if req := randomRequests(rng, levels)[0]; true {
			if a, err := clone.FindAssignment(req, Options{}); err == nil {
				if _, err := clone.CommitReservation(a, req.PodRequests); err != nil {
					t.Fatal(err)
				}
			}
		}
		check(t, fmt.Sprintf("seed %d: clone", seed), clone, rng)
		check(t, fmt.Sprintf("seed %d: hub after its clone changed", seed), hub, rng)
		if hub.Refresh(&st) {
			held = nil
			check(t, fmt.Sprintf("seed %d: refreshed hub", seed), hub, rng)
		}
	}
}

// TestLeastFreeLeavesAsOrdered: unconstrained LeastFreeCapacity read from
// the leaves grouped by capacity (leastFreeLeaves) gives what ordering
// every leaf gives — the same leaves, counts, errors and room — on agents'
// and hubs' snapshots, as usage, nodes and reservations change between
// placements (the groups follow the changes rather than being built
// anew).
func TestLeastFreeLeavesAsOrdered(t *testing.T) {
	opts := Options{Required: configv1beta1.BestFit, Preferred: configv1beta1.BestFit, Unconstrained: configv1beta1.LeastFreeCapacity}
	demands := []corev1.ResourceList{cpu("1"), cpu("2"), {corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("1")}, {gpu: resource.MustParse("4")}}
	compare := func(t *testing.T, name string, s *Snapshot, rng *rand.Rand) {
		t.Helper()
		for range 4 {
			req := Request{Count: int32(1 + rng.IntN(40)), PodRequests: demands[rng.IntN(len(demands))]}
			fast, fastEnclosing, fastRoom, fastErr := s.FindWithRoom(req, opts)
			leafBucketsOn = false
			slow, slowEnclosing, slowRoom, slowErr := s.FindWithRoom(req, opts)
			leafBucketsOn = true
			if diff := cmp.Diff(fmt.Sprint(slowErr), fmt.Sprint(fastErr)); diff != "" {
				t.Fatalf("%s: %d x %v: errors differ (-ordered +grouped):\n%s", name, req.Count, req.PodRequests, diff)
			}
			if diff := cmp.Diff(slow, fast); diff != "" {
				t.Fatalf("%s: %d x %v: assignments differ (-ordered +grouped):\n%s", name, req.Count, req.PodRequests, diff)
			}
			if diff := cmp.Diff([]any{slowEnclosing, slowRoom}, []any{fastEnclosing, fastRoom}); diff != "" {
				t.Fatalf("%s: %d x %v: room differs (-ordered +grouped):\n%s", name, req.Count, req.PodRequests, diff)
			}
		}
	}
	grouped := 0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 13))
		agent, levels := randomCluster(rng)
		for step := range 30 {
			name := fmt.Sprintf("seed %d step %d: agent", seed, step)
			node := fmt.Sprintf("n-%03d", rng.IntN(30))
			switch rng.IntN(4) {
			case 0, 1:
				sign := []int64{1, -1}[rng.IntN(2)]
				agent.AddUsage(node, corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(1+rng.Int64N(2), resource.DecimalSI)}, sign)
			case 2:
				labels := map[string]string{host: node}
				for _, l := range levels {
					if l != host {
						labels[l] = fmt.Sprintf("%s-%d", l, rng.IntN(3))
					}
				}
				agent.SetNode(Node{Name: node, Labels: labels, Ready: rng.IntN(5) > 0, Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewQuantity(int64(2+rng.IntN(8)), resource.DecimalSI), gpu: resource.MustParse("8"),
					corev1.ResourcePods: resource.MustParse("20"),
				}})
			default:
				agent.RemoveNode(node)
			}
			compare(t, name, agent, rng)
		}
		st, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			t.Fatal(err)
		}
		var held []*Dispatched
		for step := range 30 {
			name := fmt.Sprintf("seed %d step %d: hub", seed, step)
			compare(t, name, hub, rng)
			if len(hub.caps) > 0 && hub.caps[0].buckets.built {
				grouped++
			}
			req := Request{Count: int32(1 + rng.IntN(20)), PodRequests: demands[rng.IntN(len(demands))]}
			switch {
			case rng.IntN(3) > 0:
				if a, err := hub.FindAssignment(req, opts); err == nil {
					d, err := hub.CommitReservation(a, req.PodRequests)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					held = append(held, d)
				}
			case len(held) > 0:
				i := rng.IntN(len(held))
				hub.ReleaseDispatched(held[i])
				held = append(held[:i], held[i+1:]...)
			}
		}
		if hub.Refresh(&st) {
			compare(t, fmt.Sprintf("seed %d: refreshed hub", seed), hub, rng)
		}
	}
	if grouped == 0 {
		t.Fatal("no placement read the grouped leaves")
	}
}

// TestLeafBucketsTooManyCapacities: past maxBucketValues distinct leaf
// capacities the leaves are not grouped (a set costs a bit per leaf), and
// a change that makes one more drops the groups; placements give what
// ordering every leaf gives either way.
func TestLeafBucketsTooManyCapacities(t *testing.T) {
	s := NewSnapshot([]string{rack, host}, nil)
	for i := range maxBucketValues {
		name := fmt.Sprintf("n-%03d", i)
		s.SetNode(Node{Name: name, Ready: true, Labels: map[string]string{rack: fmt.Sprintf("r-%d", i/16), host: name}, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(int64(i+1), resource.DecimalSI), corev1.ResourcePods: resource.MustParse("1000"),
		}})
	}
	opts := DefaultOptions()
	dem := s.res.newDemand(cpu("1"))
	place := func(name string, count int32) {
		t.Helper()
		req := Request{Count: count, PodRequests: cpu("1")}
		fast, fastErr := s.FindAssignment(req, opts)
		leafBucketsOn = false
		slow, slowErr := s.FindAssignment(req, opts)
		leafBucketsOn = true
		if diff := cmp.Diff(fmt.Sprint(slowErr), fmt.Sprint(fastErr)); diff != "" {
			t.Fatalf("%s: errors differ (-ordered +grouped):\n%s", name, diff)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("%s: assignments differ (-ordered +grouped):\n%s", name, diff)
		}
	}
	if s.leafBuckets(dem) == nil {
		t.Fatalf("%d distinct capacities: not grouped", maxBucketValues)
	}
	place("grouped", 300)
	// Node 0 (1 CPU) with 999 CPUs more free: the groups kept would need
	// one set more (that of the capacity it leaves is kept), so they are
	// dropped, and made again without it.
	s.AddUsage("n-000", cpu("999"), -1)
	s.domainCaps(dem)
	if s.caps[0].buckets.built {
		t.Fatal("groups kept past their bound")
	}
	place("one capacity more", 300)
	if b := s.leafBuckets(dem); b == nil || len(b.values) != maxBucketValues {
		t.Fatalf("%d distinct capacities again: not grouped as many", maxBucketValues)
	}
	// A node more, with a capacity of its own: too many.
	s.SetNode(Node{Name: "n-999", Ready: true, Labels: map[string]string{rack: "r-99", host: "n-999"}, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2000"), corev1.ResourcePods: resource.MustParse("5000"),
	}})
	if b := s.leafBuckets(dem); b != nil {
		t.Fatalf("%d distinct capacities: grouped in %d sets", maxBucketValues+1, len(b.values))
	}
	place("too many to group", 5000)
}
