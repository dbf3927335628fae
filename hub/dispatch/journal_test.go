package dispatch

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/workload"
)

// TestJournalEntryRoundTrip: a dispatch read back from the journal writes
// on the Workload exactly the record the dispatcher made of it.
func TestJournalEntryRoundTrip(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC)
	base := func() *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-a", Namespace: "ml", UID: "u1"}, Spec: strata.WorkloadSpec{Active: ptr.To(true)}}
		return wl
	}
	cases := map[string]func() *strata.Workload{
		"first dispatch": base,
		"after a refusal, requeued after a stopped queue": func() *strata.Workload {
			wl := base()
			RecordDispatch(&wl.Status, "w0", "gpu", "first", now.Add(-time.Hour))
			RecordOutcome(&wl.Status, strata.PlacementRejected, "Rejected", "Inadmissible", "no room", now.Add(-time.Minute))
			workload.SetRequeued(wl, metav1.ConditionFalse, strata.EvictedByClusterQueueStopped, "stopped", now.Add(-time.Minute))
			return wl
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			for _, preempt := range []*int32{nil, ptr.To[int32](10)} {
				// As the dispatcher records a decision (place.go).
				want := mk().DeepCopy()
				RecordDispatch(&want.Status, "w1", "gpu", "fits in rack r1", now)
				workload.Requeue(want, true, now)
				want.Status.Placement.PreemptUpTo = preempt
				want.Status.Placement.TopologyHint = `{"main":{}}`
				e := entryOf(want)
				data, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				var back JournalEntry
				if err := json.Unmarshal(data, &back); err != nil {
					t.Fatal(err)
				}
				got := mk()
				ApplyEntry(got, &back)
				if diff := cmp.Diff(want.Status, got.Status); diff != "" {
					t.Errorf("preemptUpTo %v: status (-dispatcher's record,+the journal's):\n%s", preempt, diff)
				}
			}
		})
	}
}

// TestJournalApply: the journal's record applies to a Workload whose
// status shows an older dispatch only.
func TestJournalApply(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	j := NewJournal(nil, nil, "strata-system", "strata-hub")
	j.holdLocked("page-1", JournalEntry{UID: "u1", Namespace: "ml", Name: "job-a", Generation: 2, Cluster: "w2", Flavor: "gpu", Time: metav1.NewMicroTime(now)})
	shown := func(gen int64) *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-a", Namespace: "ml", UID: "u1"}}
		if gen > 0 {
			wl.Status.Placement = &strata.Placement{DispatchGeneration: gen}
		}
		return wl
	}
	type want struct {
		Applied bool
		Cluster string
		Gen     int64
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want want
	}{
		"its status shows the dispatch before": {wl: shown(1), want: want{Applied: true, Cluster: "w2", Gen: 2}},
		"its status shows none":                {wl: shown(0), want: want{Applied: true, Cluster: "w2", Gen: 2}},
		"its status shows this dispatch":       {wl: shown(2), want: want{Gen: 2}},
		"its status shows a later one":         {wl: shown(3), want: want{Gen: 3}},
		"another Workload": {wl: func() *strata.Workload {
			wl := shown(1)
			wl.UID = "u2"
			return wl
		}(), want: want{Gen: 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.wl.DeepCopy()
			out, since, ok := j.Apply(tc.wl)
			got := want{Applied: ok, Gen: Generation(out)}
			if c, _, _, placed := Placed(out); placed {
				got.Cluster = c
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Apply (-want,+got):\n%s", diff)
			}
			if ok != !since.IsZero() || ok && !since.Equal(now) {
				t.Errorf("since = %v, want %v when applied", since, now)
			}
			if diff := cmp.Diff(before, tc.wl); diff != "" {
				t.Errorf("Apply changed its argument:\n%s", diff)
			}
		})
	}
}

// TestJournalPages: a page is to be deleted once each of its dispatches
// is shown in its Workload's status, dispatched again, or gone; a newer
// dispatch of a Workload replaces its older one.
func TestJournalPages(t *testing.T) {
	j := NewJournal(nil, nil, "strata-system", "strata-hub")
	entry := func(uid types.UID, gen int64, cluster string) JournalEntry {
		return JournalEntry{UID: uid, Namespace: "ml", Name: string(uid), Generation: gen, Cluster: cluster}
	}
	gone := func() []string {
		var out []string
		for p := range j.gone {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
	j.holdLocked("p1", entry("a", 1, "w1"))
	j.holdLocked("p1", entry("b", 1, "w2"))
	j.holdLocked("p2", entry("c", 1, "w1"))
	if diff := cmp.Diff([]types.NamespacedName{{Namespace: "ml", Name: "a"}, {Namespace: "ml", Name: "c"}}, sorted(j.On("w1"))); diff != "" {
		t.Errorf("On(w1) (-want,+got):\n%s", diff)
	}
	j.Forget("a", 0) // its status shows an older dispatch: kept
	j.Forget("a", 1)
	if got := gone(); len(got) != 0 {
		t.Errorf("pages to delete with b still held: %v", got)
	}
	j.Forget("b", -1) // its Workload is gone
	if diff := cmp.Diff([]string{"p1"}, gone()); diff != "" {
		t.Errorf("pages to delete (-want,+got):\n%s", diff)
	}
	j.holdLocked("p3", entry("c", 2, "w2")) // dispatched again
	if diff := cmp.Diff([]string{"p1", "p2"}, gone()); diff != "" {
		t.Errorf("pages to delete (-want,+got):\n%s", diff)
	}
	j.holdLocked("p1", entry("c", 1, "w1")) // an older page read late: ignored
	if e, _ := j.Held("c"); e.Generation != 2 || e.Cluster != "w2" {
		t.Errorf("Held(c) = %+v, want generation 2 on w2", e)
	}
	// The gauges: c's dispatch, held by p3; p1 and p2 still to delete.
	j.gauge()
	if got, want := []float64{promtest.ToFloat64(metrics.HubJournalDispatches), promtest.ToFloat64(metrics.HubJournalPages)}, []float64{1, 3}; !slices.Equal(got, want) {
		t.Errorf("gauges (dispatches, pages) = %v, want %v", got, want)
	}
}

func sorted(keys []types.NamespacedName) []types.NamespacedName {
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		if a.String() < b.String() {
			return -1
		}
		if a.String() > b.String() {
			return 1
		}
		return 0
	})
	return keys
}

// TestPastBurned: a dispatch after a failed journal write of generation
// g takes g+1 or later, its attempt too, so that a page that landed
// unseen never holds the same dispatch as a later one.
func TestPastBurned(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		burned  map[types.UID]int64
		shown   int64 // the generation the status shows
		wantGen int64
	}{
		"nothing burned":               {shown: 1, wantGen: 2},
		"the generation it would take": {burned: map[types.UID]int64{"u1": 2}, shown: 1, wantGen: 3},
		"a later one burned":           {burned: map[types.UID]int64{"u1": 5}, shown: 1, wantGen: 6},
		"an earlier one burned":        {burned: map[types.UID]int64{"u1": 1}, shown: 3, wantGen: 4},
		"another Workload's burned":    {burned: map[types.UID]int64{"u2": 9}, shown: 0, wantGen: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &Dispatcher{burned: tc.burned}
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
			if tc.shown > 0 {
				wl.Status.Placement = &strata.Placement{DispatchGeneration: tc.shown}
			}
			gen := d.pastBurned(wl, RecordDispatch(&wl.Status, "w1", "gpu", "fits", now))
			p := wl.Status.Placement
			got := []int64{gen, p.DispatchGeneration, p.Attempts[len(p.Attempts)-1].DispatchGeneration}
			if diff := cmp.Diff([]int64{tc.wantGen, tc.wantGen, tc.wantGen}, got); diff != "" {
				t.Errorf("generation, placement's, attempt's (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestForgetIfGone: the dispatcher drops the journal's dispatch of a
// Workload it no longer reads only when the Workload is gone (or another
// took its name); a finished one keeps it until its status has it.
func TestForgetIfGone(t *testing.T) {
	wl := func(name string, uid types.UID) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: uid}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(wl("finished", "u1"), wl("renamed", "other")).Build()
	j := NewJournal(nil, nil, "strata-system", "strata-hub")
	for _, e := range []JournalEntry{
		{UID: "u1", Namespace: "ml", Name: "finished", Generation: 1, Cluster: "w1"},
		{UID: "u2", Namespace: "ml", Name: "renamed", Generation: 1, Cluster: "w1"},
		{UID: "u3", Namespace: "ml", Name: "deleted", Generation: 1, Cluster: "w1"},
	} {
		j.holdLocked("p1", e)
	}
	d := &Dispatcher{client: c, journal: j}
	for _, uid := range []types.UID{"u1", "u2", "u3"} {
		d.forgetIfGone(uid)
	}
	var held []types.UID
	for _, uid := range []types.UID{"u1", "u2", "u3"} {
		if _, ok := j.Held(uid); ok {
			held = append(held, uid)
		}
	}
	if diff := cmp.Diff([]types.UID{"u1"}, held); diff != "" {
		t.Errorf("held after forgetIfGone (-want,+got):\n%s", diff)
	}
}
