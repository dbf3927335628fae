package tas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommitAndRelease(t *testing.T) {
	for name, levels := range map[string][]string{
		"host lowest": {rack, host},
		"rack lowest": {block, rack},
	} {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(levels, node{"n1", "b1", "r1", "4"}, node{"n2", "b1", "r1", "2"})
			req := Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: rack}
			a, err := s.FindAssignment(req, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			u, err := s.Commit(a, req.PodRequests)
			if err != nil {
				t.Fatal(err)
			}
			total := int64(0)
			for _, rl := range u {
				total += rl.Cpu().MilliValue()
			}
			if total != 5000 {
				t.Errorf("committed %dm cpu, want 5000m", total)
			}
			if _, err := s.FindAssignment(Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack}, DefaultOptions()); err == nil {
				t.Error("2 more pods fit after committing 5 of 6")
			}
			s.Release(u)
			again, err := s.FindAssignment(req, DefaultOptions())
			if err != nil {
				t.Fatalf("after Release: %v", err)
			}
			if diff := cmp.Diff(a, again); diff != "" {
				t.Errorf("assignment after Release (-before,+after):\n%s", diff)
			}
		})
	}
}

// TestCommitDispatchedFragmentsAsTheAgent: a hub reservation on a summary
// goes onto the anonymous nodes as the agent's BestFit puts pods on real
// ones — a small pod on the tightest node that holds it — so that a large
// node stays whole for a large pod, as it does on the worker. Commit packs
// largest-free-first and would split it.
func TestCommitDispatchedFragmentsAsTheAgent(t *testing.T) {
	st, err := snapshotOf([]string{block, rack, host},
		node{"big", "b0", "r0", "4"}, node{"small", "b0", "r0", "2"}).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	small := Request{Count: 1, PodRequests: cpu("1500m"), Mode: Preferred, Level: rack}
	large := Request{Count: 1, PodRequests: cpu("3"), Mode: Preferred, Level: rack}
	for name, tc := range map[string]struct {
		commit    func(*Snapshot, *Assignment, Request) error
		largeFits bool
	}{
		"CommitReservation": {func(s *Snapshot, a *Assignment, r Request) error {
			_, err := s.CommitReservation(a, r.PodRequests)
			return err
		}, true},
		"Commit": {func(s *Snapshot, a *Assignment, r Request) error {
			_, err := s.Commit(a, r.PodRequests)
			return err
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			hub, err := NewSnapshotFromSummary(&st)
			if err != nil {
				t.Fatal(err)
			}
			a, err := hub.FindAssignment(small, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if a.Levels[len(a.Levels)-1] == host {
				t.Fatalf("the summary's assignment is at host level: %v", a)
			}
			if err := tc.commit(hub, a, small); err != nil {
				t.Fatal(err)
			}
			_, err = hub.FindAssignment(large, DefaultOptions())
			if fits := err == nil; fits != tc.largeFits {
				t.Errorf("a 3-CPU pod after a 1.5-CPU one fits: %t, want %t (%v)", fits, tc.largeFits, err)
			}
		})
	}
}

// TestAgentAdmitsWhatTheHubReservedInOrder: the hub reserves placements
// on a summary (CommitReservation) one after another, mixed pod sizes
// smaller than a node, until the racks are full; the agent, admitting the
// same requests in the same order on the real nodes, finds room for them
// (the hub's dispatch times give it that order, see queue.QueuedAt). Kept
// below 0.1% misses: among nodes the same request fits equally often, the
// summary's anonymous nodes cannot tell which one the agent's name order
// takes. In another order about 3% miss, which is why the order matters.
func TestAgentAdmitsWhatTheHubReservedInOrder(t *testing.T) {
	sizes := []string{"250m", "500m", "1", "1500m", "3"}
	levels := []string{block, rack, host}
	accepted, misses := 0, 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var nodes []node
		for r := range 2 {
			for h := range 4 {
				nodes = append(nodes, node{fmt.Sprintf("n%d-%d", r, h), "b0", fmt.Sprintf("r%d", r), []string{"4", "4", "8"}[rng.IntN(3)]})
			}
		}
		st, err := snapshotOf(levels, nodes...).Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			t.Fatal(err)
		}
		agent := snapshotOf(levels, nodes...)
		for range 40 {
			r := Request{Count: int32(1 + rng.IntN(3)), PodRequests: cpu(sizes[rng.IntN(len(sizes))]), Mode: Preferred, Level: rack}
			h, err := hub.FindAssignment(r, DefaultOptions())
			if err != nil {
				continue
			}
			if _, err := hub.CommitReservation(h, r.PodRequests); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			accepted++
			a, err := agent.FindAssignment(r, DefaultOptions())
			if err != nil {
				misses++
				continue
			}
			if _, err := agent.Commit(a, r.PodRequests); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
	if accepted < 5000 || misses*1000 > accepted {
		t.Errorf("the agent found no room for %d of the %d placements the hub reserved, want at most 0.1%%", misses, accepted)
	}
}

// A replacement keeps the pods of a deleted node that waits for its own
// replacement: CommitIfFree records them as Commit does, and still refuses
// a node that has no room.
func TestCommitIfFreeKeepsADeletedHost(t *testing.T) {
	s := snapshotOf([]string{rack, host}, node{"n1", "b1", "r1", "4"}, node{"n2", "b1", "r1", "2"})
	keep := &Assignment{Levels: []string{host}, Domains: []DomainAssignment{{Values: []string{"n1"}, Count: 2}, {Values: []string{"gone"}, Count: 2}}}
	if _, err := s.CommitIfFree(keep, cpu("1")); err != nil {
		t.Fatalf("CommitIfFree with a deleted host: %v", err)
	}
	tooMuch := &Assignment{Levels: []string{host}, Domains: []DomainAssignment{{Values: []string{"n2"}, Count: 3}, {Values: []string{"gone"}, Count: 1}}}
	if _, err := s.CommitIfFree(tooMuch, cpu("1")); err == nil {
		t.Error("CommitIfFree took 3 pods on a 2-CPU node")
	}
}
