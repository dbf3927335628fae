package dispatch

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
