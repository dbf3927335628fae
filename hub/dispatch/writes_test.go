package dispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

// TestPassWrites: a pass's writes run after it, at most maxPassWrites at a
// time, records first (the first maxPassWrites to start are records); a failed record is returned to
// release its reservation (with its error, none for errReleaseOnly), a
// failed waiting reason with its error only.
func TestPassWrites(t *testing.T) {
	var (
		w        passWrites
		inFlight atomic.Int32
		most     atomic.Int32
		mu       sync.Mutex
		order    []string
	)
	gate := make(chan struct{})
	step := func(name string, err error) func() error {
		return func() error {
			n := inFlight.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			<-gate
			inFlight.Add(-1)
			return err
		}
	}
	boom := errors.New("boom")
	w.do(step("wait-ok", nil))
	w.do(step("wait-failed", boom))
	for i := range 40 {
		var err error
		switch i {
		case 3:
			err = boom
		case 5:
			err = errReleaseOnly
		}
		w.record("w1", "f", fmt.Sprintf("key-%d", i), step(fmt.Sprintf("record-%d", i), err))
	}
	done := make(chan []failedRecord)
	go func() { done <- w.run() }()
	// The first maxPassWrites start and block on the gate; no more start
	// until one of them ends.
	for inFlight.Load() < maxPassWrites {
		runtime.Gosched()
	}
	for range 10000 {
		runtime.Gosched()
	}
	mu.Lock()
	started := len(order)
	mu.Unlock()
	if started != maxPassWrites {
		t.Errorf("%d writes started while %d were in flight, want %d", started, maxPassWrites, maxPassWrites)
	}
	close(gate)
	failed := <-done
	want := []failedRecord{
		{cluster: "w1", flavor: "f", key: "key-3", err: boom},
		{cluster: "w1", flavor: "f", key: "key-5"},
		{err: boom},
	}
	sortFailed := cmpopts.SortSlices(func(a, b failedRecord) bool { return a.key < b.key })
	if diff := cmp.Diff(want, failed, cmp.AllowUnexported(failedRecord{}), cmpopts.EquateErrors(), sortFailed); diff != "" {
		t.Errorf("failed writes (-want +got):\n%s", diff)
	}
	if m := most.Load(); m > maxPassWrites {
		t.Errorf("%d writes at once, want at most %d", m, maxPassWrites)
	}
	for _, name := range order[:maxPassWrites] {
		if name[:6] != "record" {
			t.Fatalf("%s started among the first %d: records go first (%v)", name, maxPassWrites, order)
		}
	}
	if len(w.writes) != 0 {
		t.Errorf("%d writes left after run", len(w.writes))
	}
}

// TestWaitWritesWhatChanged: a waiting reason is written when its meaning
// changes, not when only its numbers do, nor when the Workload already
// says it (a restarted hub); a Workload made again under the same name
// is another.
func TestWaitWritesWhatChanged(t *testing.T) {
	d := &Dispatcher{waiting: map[types.UID]written{}, reasons: newReasonQueue()}
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-a", UID: "1"}}
	var p pending
	// wrote runs as a successful write would: the reason is now recorded.
	wrote := func(o waitOutcome) { d.waiting[p.uid] = written{reason: o.reason, meaning: o.meaning} }
	steps := []struct {
		name            string
		reason, message string
		uid             types.UID
		condition       *metav1.Condition
		wantWrite       bool
	}{
		{name: "first reason", reason: ReasonPending, message: "fits nowhere now: w1/gpu: 3 of 8 GPUs free", uid: "1", wantWrite: true},
		{name: "numbers only", reason: ReasonPending, message: "fits nowhere now: w1/gpu: 5 of 8 GPUs free", uid: "1"},
		{name: "another meaning", reason: ReasonPending, message: "fits nowhere now: w1/gpu: summary stale", uid: "1", wantWrite: true},
		{name: "another reason", reason: ReasonNeverFits, message: "fits nowhere now: w1/gpu: summary stale", uid: "1", wantWrite: true},
		{name: "made again", reason: ReasonNeverFits, message: "fits nowhere now: w1/gpu: summary stale", uid: "2", wantWrite: true},
		{name: "said already, after a restart", reason: ReasonPending, message: "fits nowhere now: w2/gpu: 1 of 8 GPUs free", uid: "3",
			condition: &metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonPending, Message: "fits nowhere now: w2/gpu: 4 of 8 GPUs free"}},
	}
	for _, s := range steps {
		wl.UID = s.uid
		wl.Status.Conditions = nil
		if s.condition != nil {
			wl.Status.Conditions = []metav1.Condition{*s.condition}
		}
		p = pending{entry: newEntry(wl, nil)}
		o := newWait(s.reason, s.message)
		d.waitFor(t.Context(), p, o)
		// Asked again before it is written: still one write queued.
		d.waitFor(t.Context(), p, o)
		if got := d.reasons.len(); got != map[bool]int{true: 1}[s.wantWrite] {
			t.Errorf("%s: %d writes queued, want a write %v", s.name, got, s.wantWrite)
		}
		if r, ok := d.reasons.next(); ok {
			wrote(o)
			d.reasons.done(r)
		}
	}
}

// TestReasonQueue: the latest reason of a Workload replaces one not yet
// written, in its place; every reason queued is written by run.
func TestReasonQueue(t *testing.T) {
	q := newReasonQueue()
	var mu sync.Mutex
	var got []string
	write := func(s string) func() error {
		return func() error {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
			return nil
		}
	}
	q.add("a", written{reason: "Pending", meaning: "one"}, write("a1"))
	q.add("b", written{reason: "Pending", meaning: "one"}, write("b1"))
	q.add("a", written{reason: "Pending", meaning: "two"}, write("a2"))
	if !q.has("a", written{reason: "Pending", meaning: "two"}) || q.has("a", written{reason: "Pending", meaning: "one"}) {
		t.Error("has: want the latest reason of a only")
	}
	r, _ := q.next()
	if !q.has("a", written{reason: "Pending", meaning: "two"}) {
		t.Error("has: want the reason being written")
	}
	// A newer reason of a while a's write is in flight: b's goes first,
	// a's waits for the write in flight.
	q.add("a", written{reason: "Pending", meaning: "three"}, write("a3"))
	rb, _ := q.next()
	if _, ok := q.next(); ok {
		t.Error("next: took a's newer reason while its write is in flight")
	}
	_ = r.write()
	q.done(r)
	_ = rb.write()
	q.done(rb)
	if diff := cmp.Diff([]string{"a2", "b1"}, got); diff != "" {
		t.Errorf("first written (-want,+got):\n%s", diff)
	}
	q.add("c", written{reason: "Pending", meaning: "one"}, write("c1"))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { q.run(ctx, 2); close(done) }()
	waitWritten := func(n int) {
		for {
			mu.Lock()
			l := len(got)
			mu.Unlock()
			if l >= n {
				return
			}
			runtime.Gosched()
		}
	}
	waitWritten(4)
	// The writers are idle now (asleep, not spinning): a reason queued
	// later wakes one.
	q.add("d", written{reason: "Pending", meaning: "one"}, write("d1"))
	waitWritten(5)
	cancel()
	<-done
	if _, ok := q.wait(); ok {
		t.Error("wait on a stopped queue took a reason")
	}
	if diff := cmp.Diff([]string{"a2", "a3", "b1", "c1", "d1"}, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("written (-want,+got):\n%s", diff)
	}
}
