package tas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFindGroupAssignment(t *testing.T) {
	levels := []string{block, rack, host}
	// rack-1 holds the 4 workers exactly but not the leader too; rack-2 holds both.
	nodes := []node{
		{"a1", "b1", "r1", "2"}, {"a2", "b1", "r1", "2"},
		{"c1", "b1", "r2", "4"}, {"c2", "b1", "r2", "4"},
	}
	leader := Request{Count: 1, PodRequests: cpu("2"), Mode: Required, Level: rack}
	workers := Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack}
	cases := map[string]struct {
		reqs    []Request
		want    []*Assignment
		wantErr string
	}{
		"leader and workers share the rack that holds both": {
			reqs: []Request{leader, workers},
			// The workers go first (the larger pod set) and fill c1; the leader takes c2.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("c2", 1)},
				{Levels: []string{host}, Domains: hosts("c1", 4)},
			},
		},
		"a group no rack holds": {
			reqs:    []Request{{Count: 1, PodRequests: cpu("4"), Mode: Required, Level: rack}, {Count: 6, PodRequests: cpu("1"), Mode: Required, Level: rack}},
			wantErr: "rack required: no rack holds all 2 pod sets of the group together",
		},
		"preferred falls back to spreading": {
			reqs: []Request{
				{Count: 1, PodRequests: cpu("4"), Mode: Preferred, Level: rack},
				{Count: 6, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("c1", 1)},
				{Levels: []string{host}, Domains: hosts("a1", 2, "a2", 2, "c2", 2)},
			},
		},
		// Kueue's TASGroupedPodSetSlicing: a group's pod sets may have slices.
		"a leader and workers in host slices share the block": {
			reqs: []Request{
				{Count: 1, PodRequests: cpu("2"), Mode: Required, Level: block},
				{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 4}}},
			},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("a1", 1)},
				{Levels: []string{host}, Domains: hosts("c1", 4, "c2", 4)},
			},
		},
		"a leader and workers with a partial host slice share the block": {
			reqs: []Request{
				{Count: 1, PodRequests: cpu("2"), Mode: Required, Level: block},
				{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 4}}},
			},
			// The workers' whole slice and partial one in rack r2, the
			// partial one last; the leader beside it.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("c2", 1)},
				{Levels: []string{host}, Domains: hosts("c1", 4, "c2", 2)},
			},
		},
		"a group whose workers' slices do not fit whole beside the leader": {
			reqs: []Request{
				{Count: 1, PodRequests: cpu("4"), Mode: Required, Level: rack},
				{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 4}}},
			},
			wantErr: "rack required: no rack holds all 2 pod sets of the group together",
		},
		"different levels": {
			reqs:    []Request{leader, {Count: 4, PodRequests: cpu("1"), Mode: Required, Level: block}},
			wantErr: "the pod sets of a group must ask for the same topology level",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(levels, nodes...)
			got, err := s.FindGroupAssignment(tc.reqs, DefaultOptions())
			if tc.wantErr != "" {
				if err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr {
					t.Fatalf("FindGroupAssignment() = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindGroupAssignment() (-want,+got):\n%s", diff)
			}
			// The snapshot is unchanged.
			if _, err := s.FindAssignment(Request{Count: 12, PodRequests: cpu("1"), Mode: Required, Level: block}, DefaultOptions()); err != nil {
				t.Errorf("capacity not given back: %v", err)
			}
		})
	}
}
