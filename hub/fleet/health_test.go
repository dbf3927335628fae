package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbe: a worker is down after probeFailures failed probes in a row,
// back after one that succeeds, and each change is told once.
func TestProbe(t *testing.T) {
	defer func(i, to time.Duration) { probeInterval, probeTimeout = i, to }(probeInterval, probeTimeout)
	probeInterval, probeTimeout = time.Millisecond, time.Second

	f := New(nil, "hub")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.ctx = ctx
	r := &remote{}
	f.remotes["w"] = r
	var failing atomic.Bool
	answers := make(chan struct{})
	ready := func(context.Context) error {
		answers <- struct{}{}
		if failing.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	go f.probe(ctx, "w", r, ready)
	step := func() { <-answers }

	step()
	if got := f.Down("w"); got != "" {
		t.Fatalf("an answering worker is down: %s", got)
	}
	failing.Store(true)
	step() // the first failure: not down yet
	step() // let the first failure's state settle behind the next probe
	<-f.Changed()
	if got := f.Down("w"); got != "the worker's API server did not answer 2 health probes in a row: connection refused" {
		t.Errorf("Down() = %q", got)
	}
	failing.Store(false)
	step()
	step()
	<-f.Changed()
	if got := f.Down("w"); got != "" {
		t.Errorf("an answering worker is still down: %s", got)
	}
}
