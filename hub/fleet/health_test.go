package fleet

import (
	"context"
	"errors"
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
	exited := make(chan struct{})
	// The probe reads probeInterval and probeTimeout: it must be gone
	// before the deferred restore writes them.
	defer func() { cancel(); <-exited }()
	f.remotes["w"] = r
	// Each probe answers what the test hands it, so that no probe's
	// outcome depends on when its goroutine runs.
	answers := make(chan error)
	// It waits on the test's context, not the probe's: a probe timing
	// out while the test is slow to answer would count a failure.
	ready := func(context.Context) error {
		select {
		case err := <-answers:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	go func() {
		defer close(exited)
		f.probe(ctx, "w", r, ready)
	}()
	refused := errors.New("connection refused")

	answers <- nil
	if got := f.DownReason("w"); got != "" {
		t.Fatalf("an answering worker is down: %s", got)
	}
	answers <- refused // the first failure: not down yet
	answers <- refused // the second: down
	<-f.Changed()
	if got := f.DownReason("w"); got != "the worker's API server did not answer 2 health probes in a row: connection refused" {
		t.Errorf("Down() = %q", got)
	}
	answers <- nil
	<-f.Changed()
	if got := f.DownReason("w"); got != "" {
		t.Errorf("an answering worker is still down: %s", got)
	}
}
