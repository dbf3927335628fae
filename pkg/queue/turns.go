package queue

import (
	"slices"

	strata "strata.dev/strata/api/v1beta1"
)

// Turn is one ClusterQueue's pending work in a pass: its items in the
// order the queue serves them (see Before).
type Turn[T any] struct {
	Queue *strata.ClusterQueue
	Items []T
}

// Serve serves the queues head by head, as the agent admits and the hub
// dispatches: each round takes the head of every queue still to serve,
// heads in the order one queue orders its workloads (priority, then age),
// so that no queue is served its whole backlog first because of its name.
// As in Kueue, heads that would borrow beyond their queue's nominal quota
// come after those that would not, whatever their priority, and in a
// tree of cohorts those that borrow higher up after those that borrow
// lower: borrows, when set, says how high each would as the round begins
// (Books.WouldBorrow; 0: not at all). Under fair sharing, pick, when set,
// chooses each next head of the round among those left (Books.Tournament
// on their Nominees): the first of them, in the order above, names the
// cohort tree that plays.
// roundEnd, when set, is called after each round (a pass's rounds are
// Kueue's scheduling cycles: what a round holds for its heads ends with it).
// serve handles one item and says whether it blocks: in a StrictFIFO
// queue the items behind a blocking head are not served in this pass, and
// blocked is told which they are. workload is the Workload of an item.
// A round costs O(q log q) for its q queues; a pass O(items log queues).
func Serve[T any](turns []*Turn[T], workload func(T) *strata.Workload, borrows func(q *strata.ClusterQueue, item T) int,
	pick func(queues []*strata.ClusterQueue, heads []T) int, roundEnd func(),
	serve func(q *strata.ClusterQueue, item T) (blocks bool), blocked func(q *strata.ClusterQueue, behind []T)) {
	live := make([]*Turn[T], 0, len(turns))
	for _, t := range turns {
		if len(t.Items) > 0 {
			live = append(live, t)
		}
	}
	for len(live) > 0 {
		if len(live) > 1 {
			borrowing := map[*Turn[T]]int{}
			if borrows != nil {
				for _, t := range live {
					borrowing[t] = borrows(t.Queue, t.Items[0])
				}
			}
			slices.SortFunc(live, func(a, b *Turn[T]) int {
				if ba, bb := borrowing[a], borrowing[b]; ba != bb {
					return ba - bb
				}
				return Compare(workload(a.Items[0]), workload(b.Items[0]))
			})
		}
		// step serves t's head and says whether t has more to serve.
		step := func(t *Turn[T]) bool {
			item := t.Items[0]
			t.Items = t.Items[1:]
			if serve(t.Queue, item) && t.Queue.Spec.QueueingStrategy == strata.StrictFIFO {
				if len(t.Items) > 0 {
					blocked(t.Queue, t.Items)
				}
				return false
			}
			return len(t.Items) > 0
		}
		var next []*Turn[T]
		if pick != nil && len(live) > 1 {
			// Asked again after each head is served: the caller's books
			// change as heads are admitted.
			left := slices.Clone(live)
			for len(left) > 0 {
				qs := make([]*strata.ClusterQueue, len(left))
				heads := make([]T, len(left))
				for i, t := range left {
					qs[i], heads[i] = t.Queue, t.Items[0]
				}
				i := pick(qs, heads)
				if i < 0 || i >= len(left) {
					i = 0
				}
				t := left[i]
				left = slices.Delete(left, i, i+1)
				if step(t) {
					next = append(next, t)
				}
			}
		} else {
			next = live[:0]
			for _, t := range live {
				if step(t) {
					next = append(next, t)
				}
			}
		}
		live = next
		if roundEnd != nil {
			roundEnd()
		}
	}
}
