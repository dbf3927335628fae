package dispatch

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// reasonQueue writes waiting reasons in the background, at most a few at
// a time, the latest reason of each Workload only. A backlog of thousands
// of new Workloads needs thousands of reason writes; a pass that waited
// for them would keep the workloads that fit from being dispatched. A
// reason written late is harmless: a Workload dispatched since is
// skipped (the dispatcher's records of its journalled dispatches), and
// its write carries the Workload's resourceVersion as the pass read it.
type reasonQueue struct {
	mu     sync.Mutex
	queued map[types.UID]queuedReason
	order  []types.UID // first queued first written
	// inflight is the reason being written for a Workload: a pass that
	// reads the Workload before that write lands must not queue it again
	// (a second write, and a second event), and no second writer takes a
	// newer reason for it until that write is done (written in order).
	inflight map[types.UID]written
	// ready wakes an idle writer when a reason is queued, and every
	// writer when the queue stops.
	ready   *sync.Cond
	stopped bool
}

type queuedReason struct {
	uid    types.UID
	reason written
	write  func() error
}

func newReasonQueue() *reasonQueue {
	q := &reasonQueue{queued: map[types.UID]queuedReason{}, inflight: map[types.UID]written{}}
	q.ready = sync.NewCond(&q.mu)
	return q
}

// add queues write, which writes reason on Workload uid, in place of any
// reason queued for it and not written yet.
func (q *reasonQueue) add(uid types.UID, reason written, write func() error) {
	q.mu.Lock()
	if _, ok := q.queued[uid]; !ok {
		q.order = append(q.order, uid)
	}
	q.queued[uid] = queuedReason{uid: uid, reason: reason, write: write}
	q.mu.Unlock()
	q.ready.Signal()
}

// has says whether reason is queued, or being written, for Workload uid
// (and no other reason is queued after it).
func (q *reasonQueue) has(uid types.UID, reason written) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.queued[uid]; ok {
		return r.reason == reason
	}
	w, ok := q.inflight[uid]
	return ok && w == reason
}

// len is the number of reasons queued.
func (q *reasonQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// next takes the first reason queued whose Workload has no write in
// flight, false when there is none; done must follow its write.
func (q *reasonQueue) next() (queuedReason, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nextLocked()
}

func (q *reasonQueue) nextLocked() (queuedReason, bool) {
	for n := len(q.order); n > 0; n-- {
		uid := q.order[0]
		q.order = q.order[1:]
		r, ok := q.queued[uid]
		if !ok {
			continue
		}
		if _, busy := q.inflight[uid]; busy {
			q.order = append(q.order, uid) // after the write in flight
			continue
		}
		delete(q.queued, uid)
		q.inflight[uid] = r.reason
		return r, true
	}
	return queuedReason{}, false
}

// done ends the write of r, taken by next: a newer reason queued for its
// Workload meanwhile may be taken now.
func (q *reasonQueue) done(r queuedReason) {
	q.mu.Lock()
	delete(q.inflight, r.uid)
	_, more := q.queued[r.uid]
	q.mu.Unlock()
	if more {
		q.ready.Signal()
	}
}

// wait takes the first reason queued, waiting for one; false once the
// queue stopped.
func (q *reasonQueue) wait() (queuedReason, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.stopped {
			return queuedReason{}, false
		}
		if r, ok := q.nextLocked(); ok {
			return r, true
		}
		q.ready.Wait()
	}
}

// run writes the queued reasons with workers writers until ctx ends;
// failed writes are dropped (the next pass queues the reason again, as it
// was not recorded written). An idle writer sleeps until a reason is
// queued.
func (q *reasonQueue) run(ctx context.Context, workers int) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.stopped = true
		q.mu.Unlock()
		q.ready.Broadcast()
	})
	defer stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r, ok := q.wait()
				if !ok {
					return
				}
				_ = r.write()
				q.done(r)
			}
		})
	}
	wg.Wait()
}
