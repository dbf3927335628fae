package tas

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
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
			// The leader on the first host, with the 2 workers that fit
			// beside it; the other 2 on the next (Kueue's walk).
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("c1", 1)},
				{Levels: []string{host}, Domains: hosts("c1", 2, "c2", 2)},
			},
		},
		"a group no rack holds": {
			reqs:    []Request{{Count: 1, PodRequests: cpu("4"), Mode: Required, Level: rack}, {Count: 6, PodRequests: cpu("1"), Mode: Required, Level: rack}},
			wantErr: "rack required: no rack holds all 2 pod sets of the group together",
		},
		"preferred climbs to the block that holds the group": {
			reqs: []Request{
				{Count: 1, PodRequests: cpu("4"), Mode: Preferred, Level: rack},
				{Count: 6, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			},
			// No rack holds the leader and 6 workers; block b1 does: rack
			// r2 takes the leader (on c1) and the 4 workers beside it (c2),
			// rack r1 the other 2.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("c1", 1)},
				{Levels: []string{host}, Domains: hosts("a1", 2, "c2", 4)},
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

// TestLeaderFirst: below the group's common domain, the leader and its
// workers are split host by host as Kueue's engine walks them.
func TestLeaderFirst(t *testing.T) {
	levels := []string{block, rack, host}
	lead := func(cpus string, mode Mode, level string) Request {
		return Request{Count: 1, PodRequests: cpu(cpus), Mode: mode, Level: level}
	}
	work := func(n int32, mode Mode, level string) Request {
		return Request{Count: n, PodRequests: cpu("1"), Mode: mode, Level: level}
	}
	cases := map[string]struct {
		nodes []node
		reqs  []Request
		opts  Options
		want  []*Assignment
	}{
		"one pod a host: the leader on the first host, the workers after it": {
			nodes: []node{{"h1", "b1", "r1", "1"}, {"h2", "b1", "r1", "1"}, {"h3", "b1", "r1", "1"}, {"h4", "b1", "r1", "1"}},
			reqs:  []Request{lead("1", Required, rack), work(3, Required, rack)},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("h1", 1)},
				{Levels: []string{host}, Domains: hosts("h2", 1, "h3", 1, "h4", 1)},
			},
		},
		"the leader with the workers that fit beside it on the largest host": {
			nodes: []node{{"h1", "b1", "r1", "3"}, {"h2", "b1", "r1", "1"}},
			reqs:  []Request{lead("1", Required, rack), work(3, Required, rack)},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("h1", 1)},
				{Levels: []string{host}, Domains: hosts("h1", 2, "h2", 1)},
			},
		},
		"the tightest host that holds the leader and every worker": {
			nodes: []node{{"x1", "b1", "r1", "8"}, {"x2", "b1", "r1", "5"}, {"x3", "b1", "r1", "4"}},
			reqs:  []Request{lead("1", Required, rack), work(3, Required, rack)},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("x3", 1)},
				{Levels: []string{host}, Domains: hosts("x3", 3)},
			},
		},
		"a leader only one host holds: alone there, the workers on the others": {
			nodes: []node{{"y1", "b1", "r1", "3"}, {"y2", "b1", "r1", "4"}},
			reqs:  []Request{lead("4", Required, rack), work(3, Required, rack)},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("y2", 1)},
				{Levels: []string{host}, Domains: hosts("y1", 3)},
			},
		},
		"the leader set second leads as well (Kueue: the smaller pod set)": {
			nodes: []node{{"h1", "b1", "r1", "1"}, {"h2", "b1", "r1", "1"}, {"h3", "b1", "r1", "1"}},
			reqs:  []Request{work(2, Required, rack), lead("1", Required, rack)},
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("h2", 1, "h3", 1)},
				{Levels: []string{host}, Domains: hosts("h1", 1)},
			},
		},
		"workers over two racks of the block: the leader in the rack with the most workers": {
			nodes: []node{{"a1", "b1", "r1", "2"}, {"a2", "b1", "r1", "2"}, {"c1", "b1", "r2", "2"}, {"c2", "b1", "r2", "1"}},
			reqs:  []Request{lead("1", Required, block), work(5, Required, block)},
			// Rack r1 (4 workers alone, 3 beside the leader) takes the
			// leader and 3 workers; rack r2 the other 2, on c1 that holds
			// them both.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("a1", 1)},
				{Levels: []string{host}, Domains: hosts("a1", 1, "a2", 2, "c1", 2)},
			},
		},
		"the common domain: the fewest workers beside the leader, ties in name order": {
			nodes: []node{{"a1", "b1", "r1", "4"}, {"c1", "b1", "r2", "2"}, {"c2", "b1", "r2", "2"}},
			reqs:  []Request{lead("1", Required, rack), work(3, Required, rack)},
			// r1: 4 alone, 3 beside the leader; r2: 4 alone, 3 beside it too,
			// ties in name order.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("a1", 1)},
				{Levels: []string{host}, Domains: hosts("a1", 3)},
			},
		},
		"below the common domain, the hosts of every chosen rack together (Kueue)": {
			nodes: []node{{"a1", "b1", "r1", "6"}, {"a2", "b1", "r1", "4"}, {"b1", "b1", "r2", "8"}, {"b2", "b1", "r2", "2"}, {"b3", "b1", "r2", "2"}},
			reqs: []Request{{Count: 1, PodRequests: cpu("2"), Mode: Required, Level: block},
				{Count: 7, PodRequests: cpu("2"), Mode: Required, Level: block}},
			// Racks: r2 the leader and 5, r1 2. The hosts of both together:
			// b1 the leader and 3, a1 3, b2 the last; splitting each rack's
			// count among its own hosts takes four.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("b1", 1)},
				{Levels: []string{host}, Domains: hosts("a1", 3, "b1", 3, "b2", 1)},
			},
		},
		"preferred, no block holds it: the leader where the most workers fit beside it (Kueue)": {
			nodes: []node{{"h1", "b1", "r1", "4"}, {"h2", "b2", "r2", "6"}, {"h3", "b2", "r3", "2"}},
			reqs: []Request{{Count: 1, PodRequests: cpu("2"), Mode: Preferred, Level: rack},
				{Count: 5, PodRequests: cpu("2"), Mode: Preferred, Level: rack}},
			// b2 the leader and 3 workers, b1 the other 2; then the racks of
			// both together.
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("h2", 1)},
				{Levels: []string{host}, Domains: hosts("h1", 2, "h2", 2, "h3", 1)},
			},
		},
		"LeastFreeCapacity keeps the group search's split": {
			nodes: []node{{"h1", "b1", "r1", "1"}, {"h2", "b1", "r1", "1"}, {"h3", "b1", "r1", "1"}, {"h4", "b1", "r1", "1"}},
			reqs:  []Request{lead("1", Required, rack), work(3, Required, rack)},
			opts:  opts(configv1beta1.LeastFreeCapacity, configv1beta1.BestFit, configv1beta1.BestFit),
			want: []*Assignment{
				{Levels: []string{host}, Domains: hosts("h4", 1)},
				{Levels: []string{host}, Domains: hosts("h1", 1, "h2", 1, "h3", 1)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(levels, tc.nodes...)
			o := tc.opts
			if o == (Options{}) {
				o = DefaultOptions()
			}
			got, err := s.FindGroupAssignment(tc.reqs, o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindGroupAssignment() (-want,+got):\n%s", diff)
			}
			// What it found can be committed: every host holds its pods.
			for i, a := range got {
				if _, err := s.Commit(a, tc.reqs[i].PodRequests); err != nil {
					t.Errorf("Commit(pod set %d): %v", i, err)
				}
			}
		})
	}
}

// TestLeaderFirstWhereTheLeaderCostsLeast: when the walk cannot place every
// worker (the first host's leader leaves too little beside it), the leader
// goes to the host where it costs the fewest workers.
func TestLeaderFirstWhereTheLeaderCostsLeast(t *testing.T) {
	s := NewSnapshot([]string{block, rack, host}, map[string]string{"pool": "tas"})
	for _, n := range []struct{ name, cpu, mem string }{{"p1", "4", "4Gi"}, {"p2", "3", "8Gi"}} {
		s.SetNode(Node{Name: n.name, Labels: map[string]string{"pool": "tas", block: "b1", rack: "r1", host: n.name}, Ready: true,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n.cpu), corev1.ResourceMemory: resource.MustParse(n.mem),
				corev1.ResourcePods: resource.MustParse("110")}})
	}
	leader := Request{Count: 1, PodRequests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}, Mode: Required, Level: rack}
	workers := Request{Count: 6, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Mode: Required, Level: rack}
	// The walk: p1 first (4 workers alone), the leader and 2 workers
	// there, 3 on p2, 1 left over. On p2 the leader costs no worker.
	got, err := s.FindGroupAssignment([]Request{leader, workers}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []*Assignment{
		{Levels: []string{host}, Domains: hosts("p2", 1)},
		{Levels: []string{host}, Domains: hosts("p1", 4, "p2", 2)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FindGroupAssignment() (-want,+got):\n%s", diff)
	}
}

// TestLeaderFirstUnknownResource: a leader asking for a resource no node
// has fits nowhere, and says so.
func TestLeaderFirstUnknownResource(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"h1", "b1", "r1", "4"}, node{"h2", "b1", "r1", "4"})
	leader := Request{Count: 1, PodRequests: corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}, Mode: Required, Level: rack}
	workers := Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack}
	got, err := s.FindGroupAssignment([]Request{leader, workers}, DefaultOptions())
	var fit *FitError
	if !errors.As(err, &fit) {
		t.Fatalf("FindGroupAssignment() = %v, %v; want a FitError", got, err)
	}
}
