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

// TestRestoreSwitch: a hub process that finds a switch in a WorkerCluster's
// status, and saw none itself, takes it back with the worst last renewal
// it can know: its own start. One it saw itself is kept as it is.
func TestRestoreSwitch(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	f := New(nil, "hub")
	f.SetClock(clk)
	started := f.startedAt
	clk.Step(time.Minute)
	f.SetClusterID("w1", "new") // a restarted hub: the new cluster first
	f.RestoreSwitch("w1", "old", "new", t0.Add(-time.Hour))
	got, ok := f.Switched("w1")
	if !ok {
		t.Fatal("want the switch restored")
	}
	want := ClusterSwitch{At: t0.Add(-time.Hour), LastRenewal: started, From: "old", To: "new"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored (-want,+got):\n%s", diff)
	}

	f.renewed["w2"] = t0
	f.SetClusterID("w2", "a")
	clk.Step(time.Second)
	f.SetClusterID("w2", "b") // seen by this process
	f.RestoreSwitch("w2", "a", "b", t0.Add(-time.Hour))
	got, _ = f.Switched("w2")
	if want := (ClusterSwitch{At: t0.Add(time.Minute + time.Second), LastRenewal: t0, From: "a", To: "b"}); !cmp.Equal(want, got) {
		t.Errorf("a switch this process saw was replaced: %+v", got)
	}
}
