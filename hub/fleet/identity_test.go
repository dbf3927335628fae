package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// TestCheckCluster: a worker whose address reaches another cluster than
// the one recorded fails the check, every time until it reaches the
// recorded one again; SameCluster reuses a passed check for identityTTL,
// CheckCluster never. A renewal through that address writes nothing and
// fails for certain (ClusterChanged), and the health probe takes the
// worker as down, marked OtherCluster.
func TestCheckCluster(t *testing.T) {
	defer func(i, to time.Duration) { probeInterval, probeTimeout = i, to }(probeInterval, probeTimeout)
	probeInterval, probeTimeout = time.Millisecond, time.Second
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "A"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns).Build()
	reach := func(uid string) {
		t.Helper()
		var got corev1.Namespace
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ns), &got); err != nil {
			t.Fatal(err)
		}
		got.UID = types.UID(uid) // the fake client keeps what it is given
		if err := c.Update(context.Background(), &got); err != nil {
			t.Fatal(err)
		}
	}
	f := New(nil, "hub")
	f.SetClock(clk)
	f.remotes["w1"] = &remote{client: c}
	ctx := context.Background()
	if err := f.CheckCluster(ctx, "w1"); err != nil {
		t.Fatalf("no identity recorded yet: %v", err)
	}
	f.SetClusterID("w1", "A")
	if err := f.SameCluster(ctx, "w1"); err != nil {
		t.Fatalf("the recorded cluster: %v", err)
	}

	reach("B")
	if err := f.SameCluster(ctx, "w1"); err != nil {
		t.Errorf("SameCluster within identityTTL of a passed check read again: %v", err)
	}
	if err := f.CheckCluster(ctx, "w1"); !errors.Is(err, ErrClusterChanged) {
		t.Errorf("CheckCluster through an address reaching B: %v, want ErrClusterChanged", err)
	}
	if err := f.SameCluster(ctx, "w1"); !errors.Is(err, ErrClusterChanged) {
		t.Errorf("SameCluster after a failed check: %v, want ErrClusterChanged", err)
	}

	fc := &Fencing{Enabled: true, Namespace: "strata-system", FenceAfter: 10 * time.Minute}
	err := f.renewOnce(ctx, fc, "w1", f.remotes["w1"], true)
	if !errors.Is(err, ErrClusterChanged) {
		t.Fatalf("a renewal through an address reaching B: %v, want ErrClusterChanged", err)
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("a renewal through an address reaching B wrote a Lease there: %v", leases.Items)
	}
	if st, certain := renewalFailure(err); !certain || st.reason != ReasonClusterChanged {
		t.Errorf("renewalFailure = %+v, %t; want a certain failure, reason %s", st, certain, ReasonClusterChanged)
	}

	pctx, cancel := context.WithCancel(ctx)
	f.ctx = pctx
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		f.probe(pctx, "w1", f.remotes["w1"], func(context.Context) error { return nil })
	}()
	<-f.Changed()
	if !f.OtherCluster("w1") || f.DownReason("w1") == "" {
		t.Errorf("probe: OtherCluster %t, down %q; want the worker down for reaching another cluster", f.OtherCluster("w1"), f.DownReason("w1"))
	}
	reach("A")
	clk.Step(identityTTL)
	<-f.Changed()
	if f.OtherCluster("w1") || f.DownReason("w1") != "" {
		t.Errorf("probe once the address reaches A again: OtherCluster %t, down %q", f.OtherCluster("w1"), f.DownReason("w1"))
	}
	cancel()
	<-exited

	if err := f.renewOnce(ctx, fc, "w1", f.remotes["w1"], true); err != nil {
		t.Fatalf("a renewal on the recorded cluster: %v", err)
	}
}
