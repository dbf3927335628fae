package placement

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// TestDecideSplitPreemption: a workload whose pod sets fit nowhere, on one
// flavor or split, goes to the one worker where those that fit now keep
// their flavors and the others fit on theirs once workloads are preempted
// there, as that worker's agent preempts for it; the worker that preempts
// least wins; the reservation takes the fitting pod sets' capacity on
// their flavors and holds a preemption in flight on the other.
func TestDecideSplitPreemption(t *testing.T) {
	const hi, lo, mid = 1000, 10, 50
	// The driver (6 GPUs) fits on f1's free node; the workers (2 × 8 GPUs,
	// one rack) fit only on f2, whose nodes run workloads of priorities
	// given per rack.
	wl := func() *strata.Workload {
		return testutil.MakeWorkload("w", "default").PodSets(
			testutil.MakePodSet("driver", 1, gpu, "6").Required(rack).Obj(),
			testutil.MakePodSet("workers", 2, gpu, "8").Required(rack).Obj()).Obj()
	}
	all := func(string, string, *strata.Workload) workload.QuotaAnswer { return workload.QuotaAnswer{Fits: true} }
	type want struct {
		Cluster, Flavor string
		UpTo, Workloads int32
		Flavors         []strata.PodSetFlavor
	}
	split := []strata.PodSetFlavor{{Name: "driver", Flavor: "f1"}, {Name: "workers", Flavor: "f2"}}
	// withExtra adds a third pod set (one pod of 8 GPUs) that fits only on
	// f2 once preempted there too.
	withExtra := func(w *strata.Workload) *strata.Workload {
		w.Spec.PodSets = append(w.Spec.PodSets, testutil.MakePodSet("extra", 1, gpu, "8").Required(rack).Obj())
		return w
	}
	cases := map[string]struct {
		wl      func(*strata.Workload) *strata.Workload
		f2      map[string][][]int32 // per cluster, f2's priorities
		f1Free  map[string]int64     // per cluster, f1's one node's free GPUs
		f3      [][]int32            // cluster a's f3's priorities (none: no f3)
		tryNext bool
		flavors []string
		hubFits func(string, *strata.Workload) (bool, bool)
		first   bool
		want    *want
		why     string
	}{
		"the driver on f1 now, the workers on f2 once a rack of lower priorities goes": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2"},
			want:    &want{Cluster: "a", Flavor: "f2", UpTo: lo, Workloads: 2, Flavors: split},
		},
		"a later pod set that fits nowhere joins the preempting flavor: the preemption is for both": {
			wl:      withExtra,
			f2:      map[string][][]int32{"a": {{lo, hi}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2"},
			want: &want{Cluster: "a", Flavor: "f2", UpTo: lo, Workloads: 3,
				Flavors: append(slices.Clone(split), strata.PodSetFlavor{Name: "extra", Flavor: "f2"})},
		},
		"a flavor where the workers fit only by borrowing comes after one where they do not": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f3:      [][]int32{{hi, hi}, {mid, mid}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2", "f3"},
			hubFits: func(f string, _ *strata.Workload) (bool, bool) { return true, f == "f2" },
			want:    &want{Cluster: "a", Flavor: "f3", UpTo: mid, Workloads: 2, Flavors: []strata.PodSetFlavor{{Name: "driver", Flavor: "f1"}, {Name: "workers", Flavor: "f3"}}},
		},
		"under whenCanPreempt: Preempt and whenCanBorrow: Borrow, the first where a preemption lets them in": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f3:      [][]int32{{hi, hi}, {mid, mid}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2", "f3"},
			hubFits: func(f string, _ *strata.Workload) (bool, bool) { return true, f == "f2" },
			first:   true,
			want:    &want{Cluster: "a", Flavor: "f2", UpTo: lo, Workloads: 2, Flavors: split},
		},
		"... and whenCanBorrow: TryNextFlavor: the first where they do not borrow": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f3:      [][]int32{{hi, hi}, {mid, mid}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2", "f3"},
			hubFits: func(f string, _ *strata.Workload) (bool, bool) { return true, f == "f2" },
			first:   true,
			tryNext: true,
			want:    &want{Cluster: "a", Flavor: "f3", UpTo: mid, Workloads: 2, Flavors: []strata.PodSetFlavor{{Name: "driver", Flavor: "f1"}, {Name: "workers", Flavor: "f3"}}},
		},
		"the worker that preempts least": {
			f2:      map[string][][]int32{"a": {{mid, mid}, {hi, hi}}, "b": {{hi, hi}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 8, "b": 8},
			flavors: []string{"f1", "f2"},
			want:    &want{Cluster: "b", Flavor: "f2", UpTo: lo, Workloads: 2, Flavors: split},
		},
		"nothing of a lower priority on f2": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {hi, hi}}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2"},
			why:     "a/f2: no workload of ClusterQueue cq there has a priority below 100",
		},
		"the hub queue's quota on f2 does not hold the workers": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f1", "f2"},
			hubFits: func(f string, _ *strata.Workload) (bool, bool) { return f != "f2", false },
			why:     "a/f1: no workload of ClusterQueue cq there has a priority below 100",
		},
		"the driver fits nowhere now either: on f2 with the workers, all on one flavor (DecidePreemption's)": {
			f2:      map[string][][]int32{"a": {{lo, lo}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 2},
			flavors: []string{"f1", "f2"},
		},
		"f2 first in the queue's order: the driver still fits on f1 alone, under whenCanPreempt: Preempt too": {
			f2:      map[string][][]int32{"a": {{hi, hi}, {lo, lo}}},
			f1Free:  map[string]int64{"a": 8},
			flavors: []string{"f2", "f1"},
			first:   true,
			want:    &want{Cluster: "a", Flavor: "f2", UpTo: lo, Workloads: 2, Flavors: split},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var targets []*Target
			for _, c := range []string{"a", "b"} {
				if ps, ok := tc.f2[c]; ok {
					targets = append(targets, target(t, c, "f1", cluster(t, [][][]int64{{{tc.f1Free[c]}}})), fullClusterOn(t, c, "f2", ps, nil))
					if c == "a" && tc.f3 != nil {
						targets = append(targets, fullClusterOn(t, c, "f3", tc.f3, nil))
					}
				}
			}
			w := wl()
			if tc.wl != nil {
				w = tc.wl(w)
			}
			p := New(configv1beta1.Compact, tas.Options{}, 0)
			if d := p.DecideSplit(w, tc.flavors, targets, all, false); d != nil {
				t.Fatalf("it fits split on %s", d.Cluster)
			}
			scope := func(*Target) []PreemptionScope { return []PreemptionScope{{Queue: "cq", Within: true}} }
			got, why := p.DecideSplitPreemption(w, tc.flavors, targets, SplitPreemption{
				Quota: all, HubFits: tc.hubFits, FirstPreempting: tc.first, TryNextOnBorrow: tc.tryNext,
				Preempt: func(sub *strata.Workload, t *Target) (*PreemptionChoice, string) {
					return p.DecidePreemption(sub, []string{t.Flavor}, []*Target{t}, everywhere(100), scope, nil)
				},
			})
			var g *want
			if got != nil {
				g = &want{Cluster: got.Cluster, Flavor: got.Flavor, UpTo: got.UpTo, Workloads: got.Workloads, Flavors: got.PodSetFlavors()}
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Fatalf("DecideSplitPreemption (-want,+got):\n%s\nwhy: %s", diff, why)
			}
			if !strings.Contains(why, tc.why) || tc.why == "" && why != "" {
				t.Errorf("why = %q, want it to say %q", why, tc.why)
			}
			if got == nil {
				return
			}
			if !got.Split() || len(got.PodSets) != len(w.Spec.PodSets) || slices.ContainsFunc(got.PodSets, func(ps PodSetPlacement) bool { return ps.Assignment == nil }) {
				t.Fatalf("pod sets = %+v, want all placed, on different flavors", got.PodSets)
			}
			if !strings.Contains(got.Reason, "pod set driver on f1 now") || !strings.Contains(got.Reason, "pod set workers on "+got.Flavor+" once others are preempted") {
				t.Errorf("reason = %q, want it to say where each pod set goes", got.Reason)
			}
			// The driver's capacity is taken on f1; the workers' flavor
			// holds a preemption.
			f1, f2 := Find(targets, got.Cluster, "f1"), Find(targets, got.Cluster, got.Flavor)
			room := func() int64 {
				n, err := f1.Snapshot().Room(nil, tas.Request{PodRequests: corev1.ResourceList{gpu: resource.MustParse("1")}})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := room()
			if err := got.Reserve(targets, "k"); err != nil {
				t.Fatal(err)
			}
			if !f2.Preempting() || f1.Preempting() {
				t.Errorf("preempting: f1 %v, %s %v; want %s only", f1.Preempting(), got.Flavor, f2.Preempting(), got.Flavor)
			}
			if after := room(); before-after != 6 {
				t.Errorf("f1's free GPUs %d → %d, want 6 taken", before, after)
			}
			f1.Release("k")
			f2.Release("k")
			if f2.Preempting() {
				t.Errorf("%s still preempting after Release", got.Flavor)
			}
		})
	}
}
