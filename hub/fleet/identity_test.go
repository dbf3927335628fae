package fleet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// TestSetClusterID: a worker name that comes to stand for another cluster
// is remembered with the hub's last renewal of the old one; the first
// identity, or the same again, is no switch.
func TestSetClusterID(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	f := New(nil, "hub")
	f.SetClock(clk)
	f.SetClusterID("w1", "old")
	f.SetClusterID("w1", "old")
	if _, ok := f.Switched("w1"); ok {
		t.Fatal("a first identity, then the same again: want no switch")
	}
	f.renewed["w1"] = t0.Add(-time.Minute)
	clk.Step(time.Second)
	f.SetClusterID("w1", "new")
	got, ok := f.Switched("w1")
	if !ok {
		t.Fatal("a new identity: want a switch")
	}
	want := ClusterSwitch{At: t0.Add(time.Second), LastRenewal: t0.Add(-time.Minute), From: "old", To: "new"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Switched (-want,+got):\n%s", diff)
	}
}
