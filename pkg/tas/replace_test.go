package tas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFindReplacement(t *testing.T) {
	levels := []string{block, rack, host}
	nodes := []node{
		{"h1", "b1", "r1", "2"}, {"h2", "b1", "r1", "2"}, {"h3", "b1", "r1", "4"}, {"h4", "b1", "r1", "2"},
		{"h5", "b1", "r2", "8"}, {"h6", "b2", "r1", "2"},
	}
	onH1H2 := &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h2", 2)}
	cases := map[string]struct {
		nodes   []node
		req     Request
		current *Assignment
		failed  string
		// failedValues are the failed node's topology values, remembered
		// by the caller after the node was deleted.
		failedValues []string
		change       func(s *Snapshot)
		want         *Assignment
		wantErr      string
	}{
		"required rack: the tightest free node of the same rack takes the failed node's place": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: onH1H2, failed: "h1",
			change: func(s *Snapshot) { s.RemoveNode("h1") },
			want:   &Assignment{Levels: []string{host}, Domains: hosts("h4", 2, "h2", 2)},
		},
		"required rack with the rack full: no replacement, and why": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: onH1H2, failed: "h2",
			change: func(s *Snapshot) {
				s.AddUsage("h3", cpu("3"), 1)
				s.AddUsage("h4", cpu("2"), 1)
			},
			wantErr: "no replacement for node h2 in rack b1/r1: the free nodes there fit 1 of its 2 pods",
		},
		"a NotReady node is not a replacement": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: onH1H2, failed: "h2",
			change: func(s *Snapshot) {
				n := node{"h4", "b1", "r1", "2"}.engineNode()
				n.Ready = false
				s.SetNode(n)
			},
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h3", 2)},
		},
		"preferred rack with the rack full climbs to the block": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			current: onH1H2, failed: "h2",
			change: func(s *Snapshot) {
				s.AddUsage("h3", cpu("4"), 1)
				s.AddUsage("h4", cpu("2"), 1)
			},
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h5", 2)},
		},
		"unconstrained looks everywhere, and two nodes may share the failed node's pods": {
			req:     Request{Count: 4, PodRequests: cpu("2"), Mode: Unconstrained},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h1", 1, "h2", 1, "h5", 2)},
			failed:  "h5",
			change: func(s *Snapshot) {
				s.AddUsage("h3", cpu("4"), 1)
				s.AddUsage("h5", cpu("4"), 1)
			},
			// No node has room for both; h4 and h6 one each, in h5's ranks.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 1, "h2", 1, "h4", 1, "h6", 1)},
		},
		"required rack: no node holds the failed node's pods, two of the rack do (Kueue)": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: onH1H2, failed: "h2",
			change: func(s *Snapshot) {
				s.AddUsage("h3", cpu("3"), 1)
				s.AddUsage("h4", cpu("1"), 1)
			},
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h3", 1, "h4", 1)},
		},
		"host slices: shared by whole slices only": {
			req: Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: block,
				Layers: []Layer{{host, 2}}},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h3", 4, "h5", 4)},
			failed:  "h3",
			change: func(s *Snapshot) {
				s.AddUsage("h1", cpu("1"), 1)
				s.AddUsage("h5", cpu("4"), 1)
			},
			// h1 has room for 1 pod, no slice: h2 and h4 take one slice each.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h2", 2, "h4", 2, "h5", 4)},
		},
		"a rack slice on one node: shared only inside the slice's rack": {
			req: Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: block,
				Layers: []Layer{{rack, 4}}},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h3", 4, "h5", 4)},
			failed:  "h5",
			// h5's slice lives in r2 alone: the block's other nodes would
			// split it over racks, and no node there holds all four.
			wantErr: "no replacement for node h5 in block b1: the best free node there fits 2 of its 4 pods",
		},
		"a slice layer pins the replacement to the slice's rack": {
			nodes: append(nodes[:len(nodes):len(nodes)], node{"h7", "b1", "r2", "2"}),
			req: Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: block,
				Layers: []Layer{{rack, 4}}},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h5", 2, "h7", 2)},
			failed:  "h7",
			// h3 in r1 has more room, but the slice lives in r2; h5 is used.
			wantErr: "no replacement for node h7 in rack b1/r2: the free nodes there fit 0 of its 2 pods",
		},
		"a deleted node alone in the assignment, its rack unknown: its pods stay together on the tightest node of the flavor": {
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2)},
			failed:  "h1",
			change:  func(s *Snapshot) { s.RemoveNode("h1") },
			want:    &Assignment{Levels: []string{host}, Domains: hosts("h2", 2)},
		},
		"a grouped pod set's deleted node alone in the assignment: no node is left to tell its rack": {
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack, Grouped: true},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2)},
			failed:  "h1",
			change:  func(s *Snapshot) { s.RemoveNode("h1") },
			wantErr: "no replacement: none of the workload's nodes is left to tell which rack it runs in",
		},
		"a node alone in the assignment: its rack's nodes share its pods first (Kueue)": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h3", 4)},
			failed:  "h3",
			change: func(s *Snapshot) {
				n := node{"h3", "b1", "r1", "4"}.engineNode()
				n.Ready = false
				s.SetNode(n)
			},
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h2", 2)},
		},
		"a node alone in the assignment, its rack full: its pods move to another rack": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h3", 4)},
			failed:  "h3",
			change: func(s *Snapshot) {
				n := node{"h3", "b1", "r1", "4"}.engineNode()
				n.Ready = false
				s.SetNode(n)
				s.AddUsage("h1", cpu("2"), 1)
				s.AddUsage("h2", cpu("1"), 1)
			},
			// r1 has room for 3 of the 4 pods; the tightest node that holds
			// them all together is h5 in r2.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h5", 4)},
		},
		"a deleted node alone in the assignment, its rack remembered: replaced in that rack": {
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2)},
			failed:  "h1", failedValues: []string{"b1", "r1", "h1"},
			change: func(s *Snapshot) { s.RemoveNode("h1") },
			want:   &Assignment{Levels: []string{host}, Domains: hosts("h2", 2)},
		},
		"a deleted node alone in its rack, rack required: the rack is gone, its pods go elsewhere together": {
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h6", 2)},
			failed:  "h6", failedValues: []string{"b2", "r1", "h6"},
			change: func(s *Snapshot) { s.RemoveNode("h6") },
			want:   &Assignment{Levels: []string{host}, Domains: hosts("h1", 2)},
		},
		"a deleted node alone in its rack, rack required, the rack gone: no nodes share its pods outside a rack": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h5", 4)},
			failed:  "h5", failedValues: []string{"b1", "r2", "h5"},
			change: func(s *Snapshot) {
				s.RemoveNode("h5")
				s.AddUsage("h3", cpu("3"), 1)
			},
			wantErr: "no replacement for node h5 in the flavor: the best free node there fits 2 of its 4 pods",
		},
		"a grouped pod set's deleted node alone in its rack, rack required: the rack is gone, no replacement": {
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack, Grouped: true},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h6", 2)},
			failed:  "h6", failedValues: []string{"b2", "r1", "h6"},
			change:  func(s *Snapshot) { s.RemoveNode("h6") },
			wantErr: "no replacement: rack b2/r1 has no node left",
		},
		"a deleted node alone in its rack, rack preferred: replaced in the block": {
			nodes:   append(nodes[:len(nodes):len(nodes)], node{"h7", "b2", "r2", "2"}),
			req:     Request{Count: 2, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h6", 2)},
			failed:  "h6", failedValues: []string{"b2", "r1", "h6"},
			change: func(s *Snapshot) { s.RemoveNode("h6") },
			want:   &Assignment{Levels: []string{host}, Domains: hosts("h7", 2)},
		},
		"a node that is not in the assignment": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: onH1H2, failed: "h9",
			wantErr: `node "h9" has no pods of this assignment`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes
			}
			s := snapshotOf(levels, ns...)
			if tc.change != nil {
				tc.change(s)
			}
			got, err := s.FindReplacementNear(tc.req, tc.current, tc.failed, tc.failedValues)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("FindReplacement() = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindReplacement() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindReplacement() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFindReplacementNeedsHosts(t *testing.T) {
	s := snapshotOf([]string{block, rack}, node{"h1", "b1", "r1", "2"})
	_, err := s.FindReplacement(Request{Count: 1, PodRequests: cpu("1")},
		&Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{{Values: []string{"b1", "r1"}, Count: 1}}}, "h1")
	if err == nil {
		t.Fatal("FindReplacement() on a rack-level topology succeeded")
	}
}
