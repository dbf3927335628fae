package tas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
					d, err := hub.CommitDispatched(a, req.PodRequests)
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
				if _, err := clone.CommitDispatched(a, req.PodRequests); err != nil {
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
