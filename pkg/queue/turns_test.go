package queue

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
			Serve(tc.turns(), func(wl *strata.Workload) *strata.Workload { return wl }, borrows, nil, nil,
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

// TestServeFair: under fair sharing each next head of a round is the
// tournament's winner on the books as the heads before it left them: b,
// whose share stays the lower, is served first in each round though a's
// heads have the higher priority.
func TestServeFair(t *testing.T) {
	a, b := groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)
	books := NewBooks([]*strata.ClusterQueue{a, b, groupQueue("c", "t", nil, nil)})
	books.Charge("a", "h100", gpus("12"), 1)
	books.Charge("b", "h100", gpus("8"), 1)
	head := func(name string, prio int32, age int) *strata.Workload {
		wl := queued("ns", name, ptr.To(prio), age)
		wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: gpus("2")}}}}}}}
		return wl
	}
	turns := []*Turn[*strata.Workload]{
		{Queue: a, Items: []*strata.Workload{head("a1", 10, 1), head("a2", 10, 2), head("a3", 10, 3)}},
		{Queue: b, Items: []*strata.Workload{head("b1", 0, 4), head("b2", 0, 5)}},
	}
	var served []string
	Serve(turns, func(wl *strata.Workload) *strata.Workload { return wl }, nil,
		func(qs []*strata.ClusterQueue, heads []*strata.Workload) int {
			cs := make([]Contender, len(qs))
			for i := range qs {
				cs[i] = books.Nominee(qs[i], heads[i])
			}
			return books.Tournament(cs)
		}, nil,
		func(q *strata.ClusterQueue, wl *strata.Workload) bool {
			served = append(served, wl.Name)
			books.Charge(q.Name, "h100", WorkloadRequests(wl), 1)
			return false
		}, nil)
	// a: 12 + 2 per head; b: 8 + 2 per head. b1 (b at 10 of 8) before a1
	// (a at 14); then b2 (12) before a2 (16); a3 alone.
	if diff := cmp.Diff([]string{"b1", "a1", "b2", "a2", "a3"}, served); diff != "" {
		t.Errorf("served (-want,+got):\n%s", diff)
	}
}

// BenchmarkServeFair: a pass of 50 or 200 queues of one cohort, 20 heads
// each, served under fair sharing (each admitted head charged), against
// the classical order.
func BenchmarkServeFair(b *testing.B) {
	for _, n := range []int{50, 200} {
		for _, fair := range []bool{false, true} {
			b.Run(fmt.Sprintf("queues=%d/fair=%v", n, fair), func(b *testing.B) {
				var cqs []*strata.ClusterQueue
				for i := range n {
					cqs = append(cqs, groupQueue(fmt.Sprintf("q%03d", i), "t", nil, nil))
				}
				items := func(q int) []*strata.Workload {
					var out []*strata.Workload
					for k := range 20 {
						wl := queued("ns", fmt.Sprintf("q%03d-%02d", q, k), nil, k)
						wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
							Resources: corev1.ResourceRequirements{Requests: gpus("1")}}}}}}}
						out = append(out, wl)
					}
					return out
				}
				for b.Loop() {
					b.StopTimer()
					books := NewBooks(cqs)
					turns := make([]*Turn[*strata.Workload], n)
					for i, cq := range cqs {
						turns[i] = &Turn[*strata.Workload]{Queue: cq, Items: items(i)}
					}
					var pick func([]*strata.ClusterQueue, []*strata.Workload) int
					if fair {
						self := func(wl *strata.Workload) *strata.Workload { return wl }
						pick = FairPick(books, func(wl *strata.Workload) any { return wl }, self, nil)
					}
					b.StartTimer()
					Serve(turns, func(wl *strata.Workload) *strata.Workload { return wl }, nil, pick, nil,
						func(q *strata.ClusterQueue, wl *strata.Workload) bool {
							if books.Check(q.Name, "h100", gpus("1"), false).Err == nil {
								books.Charge(q.Name, "h100", gpus("1"), 1)
							}
							return false
						}, nil)
				}
			})
		}
	}
}
