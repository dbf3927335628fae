package placement

import (
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

// TestDecideSplit: a workload whose pod sets fit on no one target is
// placed with each on its own flavor of one cluster, as that cluster's
// agent admits it: each pod set (or PodSet group) on the first flavor, in
// the queue's order, whose quota and capacity hold it; the most compact
// cluster wins; the reservation takes each pod set's capacity on its own
// flavor's target, and releasing it on every flavor gives all back.
func TestDecideSplit(t *testing.T) {
	twoPodSets := func(driver, workers string, group bool) *strata.Workload {
		wl := testutil.MakeWorkload("w", "default").PodSets(
			testutil.MakePodSet("driver", 1, gpu, driver).Required(rack).Obj(),
			testutil.MakePodSet("workers", 2, gpu, workers).Required(rack).Obj()).Obj()
		if group {
			for i := range wl.Spec.PodSets {
				g := "g"
				wl.Spec.PodSets[i].TopologyRequest.PodSetGroupName = &g
			}
		}
		return wl
	}
	all := func(string, string, *strata.Workload) workload.QuotaAnswer { return workload.QuotaAnswer{Fits: true} }
	// Cluster a: f1 one node of 8 free GPUs, f2 a rack of two; cluster b:
	// the same, but f2's nodes in two racks (less compact); cluster c: f1
	// only.
	fleet := func(t *testing.T) []*Target {
		return []*Target{
			target(t, "a", "f1", cluster(t, [][][]int64{{{8}}})),
			target(t, "a", "f2", cluster(t, [][][]int64{{{8, 8}}})),
			target(t, "b", "f1", cluster(t, [][][]int64{{{8}}})),
			target(t, "b", "f2", cluster(t, [][][]int64{{{8}, {8}}})),
			target(t, "c", "f1", cluster(t, [][][]int64{{{8, 8}}})),
		}
	}
	type want struct {
		Cluster string
		Flavors map[string]string
	}
	cases := map[string]struct {
		wl      *strata.Workload
		flavors []string
		quota   SplitQuota
		want    *want
	}{
		"the driver on f1, the workers on f2 of the one cluster whose f2 has a rack for them": {
			wl: twoPodSets("6", "6", false), flavors: []string{"f1", "f2"}, quota: all,
			want: &want{Cluster: "a", Flavors: map[string]string{"driver": "f1", "workers": "f2"}},
		},
		"in the queue's flavor order: the driver first on f2, and the workers fit on neither then": {
			wl: twoPodSets("6", "6", false), flavors: []string{"f2", "f1"}, quota: all,
		},
		"f2's quota does not hold the workers: nowhere": {
			wl: twoPodSets("6", "6", false), flavors: []string{"f1", "f2"},
			quota: func(_, f string, placed *strata.Workload) workload.QuotaAnswer {
				return workload.QuotaAnswer{Fits: f == "f1" || len(placed.Spec.PodSets) == 1 && placed.Spec.PodSets[0].Name == "driver"}
			},
		},
		"a PodSet group stays on one flavor: no split": {
			wl: twoPodSets("6", "6", true), flavors: []string{"f1", "f2"}, quota: all,
		},
		"all on one flavor: no split (Decide's answer)": {
			wl: twoPodSets("1", "1", false), flavors: []string{"f1", "f2"}, quota: all,
		},
		"a flavor the queue does not list is not used": {
			wl: twoPodSets("6", "6", false), flavors: []string{"f1"}, quota: all,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			targets := fleet(t)
			p := New(configv1beta1.Compact, tas.DefaultOptions(), 0)
			d := p.DecideSplit(tc.wl, tc.flavors, targets, tc.quota, false)
			var got *want
			if d != nil {
				got = &want{Cluster: d.Cluster, Flavors: map[string]string{}}
				for _, f := range d.PodSetFlavors() {
					got.Flavors[f.Name] = f.Flavor
				}
				if d.Flavor != d.PodSets[0].Flavor {
					t.Errorf("decision flavor %s, want the first pod set's, %s", d.Flavor, d.PodSets[0].Flavor)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("DecideSplit() (-want,+got):\n%s", diff)
			}
			if d == nil {
				return
			}
			// Reserved: each pod set's GPUs on its own flavor.
			if err := d.Reserve(targets, "uid/1"); err != nil {
				t.Fatal(err)
			}
			free := func() map[string]int64 {
				out := map[string]int64{}
				for _, tg := range targets {
					if tg.Cluster == d.Cluster {
						n, err := tg.Snapshot().Room(nil, tas.Request{PodRequests: corev1.ResourceList{gpu: resource.MustParse("1")}})
						if err != nil {
							t.Fatal(err)
						}
						out[tg.Flavor] = n
					}
				}
				return out
			}
			wantFree := map[string]int64{"f1": 8 - 6, "f2": 16 - 12}
			if diff := cmp.Diff(wantFree, free()); diff != "" {
				t.Errorf("free GPUs after the reservation (-want,+got):\n%s", diff)
			}
			for _, tg := range targets {
				if tg.Cluster == d.Cluster {
					tg.Release("uid/1")
				}
			}
			if diff := cmp.Diff(map[string]int64{"f1": 8, "f2": 16}, free()); diff != "" {
				t.Errorf("free GPUs after the release (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDecideSplitMostCompact: of the clusters where a split fits, the
// one whose least compact pod set is the most compact wins, whatever the
// names.
func TestDecideSplitMostCompact(t *testing.T) {
	wl := testutil.MakeWorkload("w", "default").PodSets(
		testutil.MakePodSet("driver", 1, gpu, "6").Required(rack).Obj(),
		testutil.MakePodSet("workers", 2, gpu, "6").Preferred(rack).Obj()).Obj()
	// Cluster a: f2's two nodes in two racks (the workers spread over
	// the block); cluster b: f2's two nodes in one rack.
	targets := []*Target{
		target(t, "a", "f1", cluster(t, [][][]int64{{{8}}})),
		target(t, "a", "f2", cluster(t, [][][]int64{{{8}, {8}}})),
		target(t, "b", "f1", cluster(t, [][][]int64{{{8}}})),
		target(t, "b", "f2", cluster(t, [][][]int64{{{8, 8}}})),
	}
	all := func(string, string, *strata.Workload) workload.QuotaAnswer { return workload.QuotaAnswer{Fits: true} }
	d := New(configv1beta1.Compact, tas.DefaultOptions(), 0).DecideSplit(wl, []string{"f1", "f2"}, targets, all, false)
	if d == nil {
		t.Fatal("placed nowhere")
	}
	if d.Cluster != "b" {
		t.Errorf("placed on %s, want b, where the workers share a rack: %s", d.Cluster, d.Reason)
	}
	var names []string
	for _, c := range d.Candidates {
		names = append(names, c.Cluster+"/"+c.Flavor)
	}
	if diff := cmp.Diff([]string{"b/f1+f2", "a/f1+f2"}, names); diff != "" {
		t.Errorf("candidates (-want,+got):\n%s", diff)
	}
}
