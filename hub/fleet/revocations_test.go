package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
)

// TestRevocations: a dispatch is revoked only on the view of the last
// renewal (a renewal since means the worker answers), stuck copies are
// revoked, and revocations end once their copies are gone and they were
// written into the Lease; one whose copy no sweep ever found is held there
// revocationHold (a copy whose create had an unknown outcome may land
// meanwhile).
func TestRevocations(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f := New(nil, "hub")
	clk := testingclock.NewFakeClock(t0)
	f.SetClock(clk)
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
	// u1/1's copy not found: its revocation stays until a renewal wrote
	// it, then ends (a sweep found its copy before: it was there, and is
	// gone).
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	if diff := cmp.Diff([]string{"u1/1", "u3/2"}, f.Revoked("w1")); diff != "" {
		t.Errorf("after a sweep that finds no copy of u1/1, not written yet (-want,+got):\n%s", diff)
	}
	f.markWritten("w1", f.Revoked("w1"))
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	if diff := cmp.Diff([]string{"u3/2"}, f.Revoked("w1")); diff != "" {
		t.Errorf("after u1/1's copy is gone, written (-want,+got):\n%s", diff)
	}
	if got := revokedValue(f.Revoked("w1")); got != "u3/2" {
		t.Errorf("annotation %q", got)
	}
	// u5/1, whose copy no sweep ever found (its create's outcome
	// unknown: it may still land), stays revocationHold after its write.
	if !f.Revoke("w1", "u5/1", f.renewed["w1"]) {
		t.Fatal("Revoke u5/1: want it revoked")
	}
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	f.markWritten("w1", f.Revoked("w1"))
	clk.Step(revocationHold - time.Second)
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	if diff := cmp.Diff([]string{"u3/2", "u5/1"}, f.Revoked("w1")); diff != "" {
		t.Errorf("within revocationHold of its write (-want,+got):\n%s", diff)
	}
	clk.Step(time.Second)
	f.settle("w1", Sweep{Present: map[string]bool{"u3/2": true}})
	if diff := cmp.Diff([]string{"u3/2"}, f.Revoked("w1")); diff != "" {
		t.Errorf("revocationHold after its write (-want,+got):\n%s", diff)
	}
}

// TestRenewAdoptsRevocations: a renewal that is not current (the first of
// a connection: after a restart, or a leader's handover) keeps the
// revocations the Lease lists, which lived in the memory of the process
// that wrote them; sweeps then end those whose copies are gone.
func TestRenewAdoptsRevocations(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "strata-system", Name: strata.FencingLeasePrefix + "hub"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{strata.RevokedDispatchesAnnotation: "u9/1,u8/2"},
	}}).Build()
	f := New(nil, "hub") // a new process: nothing revoked in its memory
	clk := testingclock.NewFakeClock(t0)
	f.SetClock(clk)
	fc := &Fencing{Enabled: true, Namespace: key.Namespace, FenceAfter: 10 * time.Minute}
	r := &remote{client: c}
	listed := func() string {
		var l coordinationv1.Lease
		if err := c.Get(context.Background(), key, &l); err != nil {
			t.Fatal(err)
		}
		return l.Annotations[strata.RevokedDispatchesAnnotation]
	}

	if err := f.renewOnce(context.Background(), fc, "w1", r, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"u8/2", "u9/1"}, f.Revoked("w1")); diff != "" {
		t.Errorf("revoked after the first renewal (-want,+got):\n%s", diff)
	}
	if got := listed(); got != "u8/2,u9/1" {
		t.Errorf("the Lease lists %q after the first renewal, want both revocations kept", got)
	}
	// u8/2's copy is gone: a sweep revocationHold after the adoption
	// ends its revocation; a current renewal adopts nothing again.
	clk.Step(revocationHold)
	f.settle("w1", Sweep{Present: map[string]bool{"u9/1": true}})
	if err := f.renewOnce(context.Background(), fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "u9/1" {
		t.Errorf("the Lease lists %q, want u9/1", got)
	}
}

// TestRenewAdoptsAnotherProcessRevocations: a hub process whose renewals
// are current still adopts the revocations another process of the hub
// wrote into the Lease since its own last write (a leader that took over
// while it was paused): it would otherwise write the Lease without them,
// and the worker's agent could resume a copy the new leader placed
// elsewhere.
func TestRenewAdoptsAnotherProcessRevocations(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "strata-system", Name: strata.FencingLeasePrefix + "hub"}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	fc := &Fencing{Enabled: true, Namespace: key.Namespace, FenceAfter: 10 * time.Minute}
	r := &remote{client: c}
	listed := func() string {
		var l coordinationv1.Lease
		if err := c.Get(context.Background(), key, &l); err != nil {
			t.Fatal(err)
		}
		return l.Annotations[strata.RevokedDispatchesAnnotation]
	}
	clk := testingclock.NewFakeClock(t0)
	process := func() *Fleet {
		f := New(nil, "hub")
		f.SetClock(clk)
		f.renewed["w1"] = t0
		return f
	}
	old, leader := process(), process()

	if err := old.renewOnce(context.Background(), fc, "w1", r, true); err != nil {
		t.Fatal(err)
	}
	if !old.Revoke("w1", "u1/1", t0) {
		t.Fatal("Revoke on the current view: want it revoked")
	}
	if err := old.renewOnce(context.Background(), fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	// The old leader pauses; the new one adopts u1/1 and revokes u2/1.
	if err := leader.renewOnce(context.Background(), fc, "w1", r, true); err != nil {
		t.Fatal(err)
	}
	if !leader.Revoke("w1", "u2/1", t0) {
		t.Fatal("Revoke on the new leader's view: want it revoked")
	}
	if err := leader.renewOnce(context.Background(), fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "u1/1,u2/1" {
		t.Fatalf("the new leader's renewal lists %q, want u1/1,u2/1", got)
	}
	// The old one resumes with a renewal it takes for current.
	if err := old.renewOnce(context.Background(), fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "u1/1,u2/1" {
		t.Errorf("the paused process's renewal lists %q, want the new leader's u2/1 kept", got)
	}
	// Its own renewals again: nothing new to adopt; an ended revocation
	// is written out.
	clk.Step(revocationHold)
	old.settle("w1", Sweep{Present: map[string]bool{"u2/1": true}})
	if err := old.renewOnce(context.Background(), fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "u2/1" {
		t.Errorf("after u1/1's copy is gone the Lease lists %q, want u2/1", got)
	}
}

// TestRevocationWritten: a revocation asks for a renewal at once, and
// counts as written only once a renewal that landed listed it; one the
// Lease listed when adopted is written already.
func TestRevocationWritten(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "strata-system", Name: strata.FencingLeasePrefix + "hub"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{strata.RevokedDispatchesAnnotation: "u9/1"},
	}}).Build()
	f := New(nil, "hub")
	clk := testingclock.NewFakeClock(t0)
	f.SetClock(clk)
	if !f.RevocationWritten("w1", "u1/1") {
		t.Error("without fencing there is no Lease to wait for")
	}
	fc := Fencing{Enabled: true, Namespace: key.Namespace, FenceAfter: 10 * time.Minute, ReplaceAfter: 15 * time.Minute}
	f.SetFencing(fc)
	f.renewed["w1"] = t0
	wake := f.wakeChan("w1")

	if !f.Revoke("w1", "u1/1", t0) {
		t.Fatal("Revoke on the current view: want it revoked")
	}
	select {
	case <-wake:
	default:
		t.Error("a new revocation asks for no renewal")
	}
	if f.RevocationWritten("w1", "u1/1") {
		t.Error("written before any renewal")
	}
	if !f.Revoke("w1", "u1/1", t0) {
		t.Fatal("Revoke again: want it revoked")
	}
	select {
	case <-wake:
		t.Error("a revocation listed already asks for another renewal")
	default:
	}
	failing := &remote{client: fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()} // no Lease kind: every write fails
	if err := f.renewOnce(context.Background(), &fc, "w1", failing, false); err == nil {
		t.Fatal("renewOnce on a client without Leases succeeded")
	}
	if f.RevocationWritten("w1", "u1/1") {
		t.Error("written by a renewal that failed")
	}
	// Renewals that keep failing hold the dispatch until the worker's
	// agent has certainly fenced the hub's copies: replaceAfter after the
	// last renewal that may have landed (t0), and revocationWriteWait
	// after the revocation at least.
	clk.Step(10 * time.Minute)
	if !f.Revoke("w1", "u5/1", t0) {
		t.Fatal("Revoke u5/1: want it revoked")
	}
	clk.Step(revocationWriteWait - time.Second)
	if f.RevocationWritten("w1", "u5/1") {
		t.Error("given up before revocationWriteWait")
	}
	clk.Step(time.Second)
	if f.RevocationWritten("w1", "u5/1") {
		t.Error("given up before replaceAfter since the last renewal: the agent may not have fenced yet")
	}
	clk.Step(15*time.Minute - 10*time.Minute - revocationWriteWait)
	if !f.RevocationWritten("w1", "u5/1") {
		t.Error("still waited for once the agent has certainly fenced")
	}
	// With fencing Disabled the Lease has no duration: nothing but the
	// revocation stops the copy, and it is waited for.
	disabled := New(nil, "hub")
	disabled.SetClock(clk)
	disabled.SetFencing(Fencing{Namespace: key.Namespace})
	disabled.renewed["w1"] = clk.Now()
	disabled.Revoke("w1", "u6/1", clk.Now())
	clk.Step(time.Hour)
	if disabled.RevocationWritten("w1", "u6/1") {
		t.Error("given up with fencing Disabled")
	}
	if err := f.renewOnce(context.Background(), &fc, "w1", &remote{client: c}, true); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"u1/1", "u9/1"} {
		if !f.RevocationWritten("w1", k) {
			t.Errorf("%s not written after a renewal that landed", k)
		}
	}
	f.settle("w1", Sweep{Present: map[string]bool{"u1/1": true, "u9/1": true, "u7/3": true}, Stuck: []string{"u7/3", "u1/1"}})
	if f.RevocationWritten("w1", "u7/3") {
		t.Error("a stuck copy's revocation written before the renewal after the sweep")
	}
	if !f.RevocationWritten("w1", "u1/1") {
		t.Error("a sweep that finds a written revocation stuck forgets it was written")
	}
}

// TestReplaceWait: how long after the last renewal that may have landed
// the worker's agent has certainly stopped the hub's copies, given what
// that Lease carried.
func TestReplaceWait(t *testing.T) {
	const replaceAfter, fenceAfter = 15 * time.Minute, 10 * time.Minute
	cases := map[string]struct {
		published  time.Duration
		known      bool
		wantWait   time.Duration
		wantFenced bool
	}{
		"not known (never renewed, nothing recorded)": {wantWait: replaceAfter, wantFenced: true},
		"the hub's own fenceAfter":                    {published: fenceAfter, known: true, wantWait: replaceAfter, wantFenced: true},
		"a shorter one":                               {published: time.Minute, known: true, wantWait: replaceAfter, wantFenced: true},
		"a longer one (lowered since)":                {published: 30 * time.Minute, known: true, wantWait: replaceAfter + 20*time.Minute, wantFenced: true},
		"none (fencing was Disabled)":                 {published: 0, known: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wait, fenced := ReplaceWait(replaceAfter, fenceAfter, tc.published, tc.known)
			if wait != tc.wantWait || fenced != tc.wantFenced {
				t.Errorf("ReplaceWait() = %s, %v; want %s, %v", wait, fenced, tc.wantWait, tc.wantFenced)
			}
		})
	}
}

// TestPublished: a renewal that may have landed records the duration it
// wrote; what a WorkerCluster recorded seeds it until this process
// renews the worker.
func TestPublished(t *testing.T) {
	f := New(nil, "hub")
	f.SetClock(testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)))
	f.SetFencing(Fencing{Enabled: true, Namespace: "strata-system", FenceAfter: 10*time.Minute + 500*time.Millisecond, ReplaceAfter: 15 * time.Minute})
	if _, ok := f.Published("w1"); ok {
		t.Fatal("known before anything")
	}
	f.SeedPublished("w1", 0) // an earlier hub ran with fencing Disabled
	if d, ok := f.Published("w1"); !ok || d != 0 {
		t.Errorf("seeded: %s, %v; want 0, true", d, ok)
	}
	f.noteRenewal(context.Background(), "w1", fenceState{}, f.clock.Now())
	if d, _ := f.Published("w1"); d != 10*time.Minute {
		t.Errorf("after a renewal: %s; want the whole seconds of fenceAfter, 10m", d)
	}
	f.SeedPublished("w1", time.Hour)
	if d, _ := f.Published("w1"); d != 10*time.Minute {
		t.Errorf("a seed after a renewal replaced it: %s", d)
	}
	f.noteRenewal(context.Background(), "w2", fenceState{reason: "Forbidden", failed: "refused"}, time.Time{})
	if _, ok := f.Published("w2"); ok {
		t.Error("a renewal that certainly failed recorded a duration")
	}
}

// TestRevocationOfNoCopyIsWritten: a dispatch revoked though no copy of it
// is found on the worker (its create had an unknown outcome: it may land
// later) is written by the renewal after the sweep, not ended by that
// sweep: ended unwritten, the take-back waiting for its write would wait
// for ever, and the workload with it.
func TestRevocationOfNoCopyIsWritten(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "strata-system", Name: strata.FencingLeasePrefix + "hub"}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	f := New(nil, "hub")
	clk := testingclock.NewFakeClock(t0)
	f.SetClock(clk)
	fc := Fencing{Enabled: true, Namespace: key.Namespace, FenceAfter: 10 * time.Minute, ReplaceAfter: 15 * time.Minute}
	f.SetFencing(fc)
	f.renewed["w1"] = t0
	r := &remote{client: c}
	if err := f.renewOnce(context.Background(), &fc, "w1", r, true); err != nil {
		t.Fatal(err)
	}

	if !f.Revoke("w1", "u4/1", t0) {
		t.Fatal("Revoke on the current view: want it revoked")
	}
	// The renewal loop's order: the sweep (no copy of u4/1 there), then
	// the write.
	f.settle("w1", Sweep{Present: map[string]bool{}})
	if err := f.renewOnce(context.Background(), &fc, "w1", r, false); err != nil {
		t.Fatal(err)
	}
	if !f.RevocationWritten("w1", "u4/1") {
		t.Error("a revocation of a dispatch with no copy found is never written")
	}
	var l coordinationv1.Lease
	if err := c.Get(context.Background(), key, &l); err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[strata.RevokedDispatchesAnnotation]; got != "u4/1" {
		t.Errorf("the Lease lists %q, want u4/1", got)
	}
	// Still no copy revocationHold after the write: it ends.
	clk.Step(revocationHold)
	f.settle("w1", Sweep{Present: map[string]bool{}})
	if got := f.Revoked("w1"); len(got) != 0 {
		t.Errorf("revoked %v revocationHold after the write with no copy there, want none", got)
	}
}
