package fleet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// TestRevocations: a dispatch is revoked only on the view of the last
// renewal (a renewal since means the worker answers), stuck copies are
// revoked, and revocations end once their copies are gone.
func TestRevocations(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f := New(nil, "hub")
	f.SetClock(testingclock.NewFakeClock(t0))
	f.renewed["w1"] = t0

	if !f.Revoke("w1", "u1/1", t0) {
		t.Fatal("Revoke on the current view: want it revoked")
	}
	f.renewed["w1"] = t0.Add(time.Minute) // a renewal reached w1 since
	if f.Revoke("w1", "u2/1", t0) {
		t.Error("Revoke on a view older than the last renewal: want it refused")
	}
	if diff := cmp.Diff([]string{"u1/1"}, f.Revoked("w1")); diff != "" {
		t.Errorf("Revoked (-want,+got):\n%s", diff)
	}
	f.settle("w1", Sweep{Present: map[string]bool{"u1/1": true, "u3/2": true}, Stuck: []string{"u3/2"}})
	if diff := cmp.Diff([]string{"u1/1", "u3/2"}, f.Revoked("w1")); diff != "" {
		t.Errorf("after a sweep with a stuck copy (-want,+got):\n%s", diff)
	}
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	if diff := cmp.Diff([]string{"u3/2"}, f.Revoked("w1")); diff != "" {
		t.Errorf("after u1/1's copy is gone (-want,+got):\n%s", diff)
	}
	if got := revokedValue(f.Revoked("w1")); got != "u3/2" {
		t.Errorf("annotation %q", got)
	}
}
