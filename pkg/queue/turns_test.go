package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestServe(t *testing.T) {
	strict := testutil.MakeClusterQueue("strict").Obj()
	strict.Spec.QueueingStrategy = strata.StrictFIFO
	best := testutil.MakeClusterQueue("best").Obj()
	best.Spec.QueueingStrategy = strata.BestEffortFIFO
	cases := map[string]struct {
		turns   func() []*Turn[*strata.Workload]
		blocks  map[string]bool // by workload name
		borrows map[string]int  // by workload name; nil: no borrows func
		want    []string        // served, in order
		blocked map[string][]string
	}{
		"queues take turns, heads by priority then age": {
			turns: func() []*Turn[*strata.Workload] {
				return []*Turn[*strata.Workload]{
					{Queue: best, Items: []*strata.Workload{queued("a", "b1", nil, 1), queued("a", "b2", nil, 2), queued("a", "b3", nil, 3)}},
					{Queue: strict, Items: []*strata.Workload{queued("a", "s1", ptr.To[int32](5), 9), queued("a", "s2", nil, 0)}},
				}
			},
			want: []string{"s1", "b1", "s2", "b2", "b3"},
		},
		"heads that would borrow come after those that would not, whatever their priority": {
			turns: func() []*Turn[*strata.Workload] {
				return []*Turn[*strata.Workload]{
					{Queue: best, Items: []*strata.Workload{queued("a", "b1", ptr.To[int32](10), 1), queued("a", "b2", ptr.To[int32](10), 2)}},
					{Queue: strict, Items: []*strata.Workload{queued("a", "s1", nil, 3), queued("a", "s2", nil, 4)}},
				}
			},
			borrows: map[string]int{"b1": 1},
			want:    []string{"s1", "b1", "b2", "s2"},
		},
		"a blocking head holds a StrictFIFO queue for the pass": {
			turns: func() []*Turn[*strata.Workload] {
				return []*Turn[*strata.Workload]{
					{Queue: strict, Items: []*strata.Workload{queued("a", "s1", nil, 1), queued("a", "s2", nil, 2), queued("a", "s3", nil, 3)}},
					{Queue: best, Items: []*strata.Workload{queued("a", "b1", nil, 4)}},
				}
			},
			blocks:  map[string]bool{"s1": true},
			want:    []string{"s1", "b1"},
			blocked: map[string][]string{"strict": {"s2", "s3"}},
		},
		"a BestEffortFIFO queue goes on past a blocking head": {
			turns: func() []*Turn[*strata.Workload] {
				return []*Turn[*strata.Workload]{
					{Queue: best, Items: []*strata.Workload{queued("a", "b1", nil, 1), queued("a", "b2", nil, 2)}},
				}
			},
			blocks: map[string]bool{"b1": true},
			want:   []string{"b1", "b2"},
		},
		"empty queues and a blocking last item": {
			turns: func() []*Turn[*strata.Workload] {
				return []*Turn[*strata.Workload]{
					{Queue: best},
					{Queue: strict, Items: []*strata.Workload{queued("a", "s1", nil, 1)}},
				}
			},
			blocks: map[string]bool{"s1": true},
			want:   []string{"s1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var served []string
			blocked := map[string][]string{}
			var borrows func(*strata.ClusterQueue, *strata.Workload) int
			if tc.borrows != nil {
				borrows = func(_ *strata.ClusterQueue, wl *strata.Workload) int { return tc.borrows[wl.Name] }
			}
			Serve(tc.turns(), func(wl *strata.Workload) *strata.Workload { return wl }, borrows,
				func(_ *strata.ClusterQueue, wl *strata.Workload) bool {
					served = append(served, wl.Name)
					return tc.blocks[wl.Name]
				},
				func(q *strata.ClusterQueue, behind []*strata.Workload) {
					for _, wl := range behind {
						blocked[q.Name] = append(blocked[q.Name], wl.Name)
					}
				})
			if diff := cmp.Diff(tc.want, served); diff != "" {
				t.Errorf("served (-want,+got):\n%s", diff)
			}
			if tc.blocked == nil {
				tc.blocked = map[string][]string{}
			}
			if diff := cmp.Diff(tc.blocked, blocked); diff != "" {
				t.Errorf("blocked (-want,+got):\n%s", diff)
			}
		})
	}
}
