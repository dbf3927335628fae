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
			wantErr: "no replacement for node h2 in rack b1/r1: the best free node there fits 1 of its 2 pods",
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
		"unconstrained looks everywhere": {
			req:     Request{Count: 4, PodRequests: cpu("2"), Mode: Unconstrained},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h1", 1, "h2", 1, "h5", 2)},
			failed:  "h5",
			change: func(s *Snapshot) {
				s.AddUsage("h3", cpu("4"), 1)
				s.AddUsage("h5", cpu("4"), 1)
			},
			wantErr: "no replacement for node h5 in the flavor: the best free node there fits 1 of its 2 pods",
		},
		"a slice layer pins the replacement to the slice's rack": {
			nodes: append(nodes[:len(nodes):len(nodes)], node{"h7", "b1", "r2", "2"}),
			req: Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: block,
				Layers: []Layer{{rack, 4}}},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h5", 2, "h7", 2)},
			failed:  "h7",
			// h3 in r1 has more room, but the slice lives in r2; h5 is used.
			wantErr: "no replacement for node h7 in rack b1/r2: the best free node there fits 0 of its 2 pods",
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
		"a node alone in the assignment, its rack full: its pods move to another rack": {
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			current: &Assignment{Levels: []string{host}, Domains: hosts("h3", 4)},
			failed:  "h3",
			change: func(s *Snapshot) {
				n := node{"h3", "b1", "r1", "4"}.engineNode()
				n.Ready = false
				s.SetNode(n)
			},
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
