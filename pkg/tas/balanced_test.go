package tas

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBalancedPlacementKEPTable reproduces every row of KEP-2724's
// "Balanced placement" example (levels block/rack/host, preferred rack).
// Capacities and assignments are blocks of racks of hosts.
func TestBalancedPlacementKEPTable(t *testing.T) {
	type blocks = [][][]int
	cases := []struct {
		caps      blocks
		request   int32
		sliceSize int32
		want      blocks
	}{
		{blocks{{{15}, {15}}}, 25, 1, blocks{{{13}, {12}}}},
		{blocks{{{15, 13, 10}}}, 23, 1, blocks{{{12, 11, 0}}}},
		{blocks{{{20, 10}, {15, 15}}}, 22, 1, blocks{{{0, 0}, {11, 11}}}},
		{blocks{{{20, 10}, {15, 15}}}, 20, 1, blocks{{{20, 0}, {0, 0}}}},
		{blocks{{{10, 5}, {5, 5, 5}}}, 15, 1, blocks{{{0, 0}, {5, 5, 5}}}},
		{blocks{{{15}, {15}}, {{15, 15}}}, 25, 1, blocks{{{0}, {0}}, {{13, 12}}}},
		{blocks{{{15}, {15}, {15, 15}}}, 25, 5, blocks{{{0}, {0}, {15, 10}}}},
	}
	opts := DefaultOptions()
	opts.BalancedPlacement = true
	for i, tc := range cases {
		t.Run(fmt.Sprintf("row %d: %v request %d", i+1, tc.caps, tc.request), func(t *testing.T) {
			var nodes []node
			name := func(b, r, h int) string { return fmt.Sprintf("b%d-r%d-h%d", b, r, h) }
			for b, racks := range tc.caps {
				for r, hs := range racks {
					for h, c := range hs {
						nodes = append(nodes, node{name(b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), fmt.Sprint(c)})
					}
				}
			}
			s := snapshotOf([]string{block, rack, host}, nodes...)
			req := Request{Count: tc.request, PodRequests: cpu("1"), Mode: Preferred, Level: rack}
			if tc.sliceSize > 1 {
				req.Layers = []Layer{{host, tc.sliceSize}}
			}
			a, err := s.FindAssignment(req, opts)
			if err != nil {
				t.Fatal(err)
			}
			placed := map[string]int32{}
			for _, d := range a.Domains {
				placed[d.Values[0]] = d.Count
			}
			got := blocks{}
			for b, racks := range tc.caps {
				got = append(got, [][]int{})
				for r, hs := range racks {
					got[b] = append(got[b], []int{})
					for h := range hs {
						got[b][r] = append(got[b][r], int(placed[name(b, r, h)]))
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("assignment (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBalancedPlacementFallsBack(t *testing.T) {
	opts := DefaultOptions()
	opts.BalancedPlacement = true
	// No block holds 40 pods: the standard algorithm spreads them.
	s := snapshotOf([]string{block, rack, host}, node{"a", "b1", "r1", "20"}, node{"b", "b2", "r1", "20"})
	a, err := s.FindAssignment(Request{Count: 40, PodRequests: cpu("1"), Mode: Preferred, Level: rack}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hosts("a", 20, "b", 20), a.Domains); diff != "" {
		t.Errorf("assignment (-want,+got):\n%s", diff)
	}
}

// TestBalancedPlacementRest: the pods beyond T on each domain, which the
// KEP lets go anywhere, go as Kueue gives them: to the domains from the
// most room down, each taking all it holds of them.
func TestBalancedPlacementRest(t *testing.T) {
	opts := DefaultOptions()
	opts.BalancedPlacement = true
	cases := map[string]struct {
		nodes []node
		count int32
		want  []DomainAssignment
	}{
		// T = 8 on three hosts of 12; the 2 left go to the first.
		"equal rooms: the first in order takes the rest": {
			nodes: []node{{"a", "b1", "r1", "12"}, {"b", "b1", "r1", "12"}, {"c", "b1", "r1", "12"}},
			count: 26,
			want:  hosts("a", 10, "b", 8, "c", 8),
		},
		// T = 8 on hosts of 8, 12 and 12; the 4 left go to the first
		// host of 12, which holds them all.
		"the most room first, all it holds": {
			nodes: []node{{"a", "b1", "r1", "8"}, {"b", "b1", "r1", "12"}, {"c", "b1", "r1", "12"}},
			count: 28,
			want:  hosts("a", 8, "b", 12, "c", 8),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf([]string{block, rack, host}, tc.nodes...)
			a, err := s.FindAssignment(Request{Count: tc.count, PodRequests: cpu("1"), Mode: Preferred, Level: rack}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, a.Domains); diff != "" {
				t.Errorf("assignment (-want,+got):\n%s", diff)
			}
		})
	}
}
