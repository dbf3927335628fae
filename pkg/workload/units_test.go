package workload

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

func TestFlavorUnits(t *testing.T) {
	grouped := func(name, group string) strata.PodSet {
		ps := testutil.MakePodSet(name, 1, "cpu", "1").Required("rack").Obj()
		ps.TopologyRequest.PodSetGroupName = ptr.To(group)
		return ps
	}
	alone := func(name string) strata.PodSet { return testutil.MakePodSet(name, 1, "cpu", "1").Obj() }
	cases := map[string]struct {
		podSets []strata.PodSet
		want    [][]int
	}{
		"one pod set":              {[]strata.PodSet{alone("a")}, [][]int{{0}}},
		"each pod set alone":       {[]strata.PodSet{alone("a"), alone("b"), alone("c")}, [][]int{{0}, {1}, {2}}},
		"a group":                  {[]strata.PodSet{grouped("leader", "g"), grouped("workers", "g")}, [][]int{{0, 1}}},
		"a group around a pod set": {[]strata.PodSet{grouped("leader", "g"), alone("x"), grouped("workers", "g")}, [][]int{{0, 2}, {1}}},
		"two groups":               {[]strata.PodSet{grouped("a", "g1"), grouped("b", "g2"), grouped("c", "g1")}, [][]int{{0, 2}, {1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := testutil.MakeWorkload("w", "ns").PodSets(tc.podSets...).Obj()
			if diff := cmp.Diff(tc.want, FlavorUnits(wl)); diff != "" {
				t.Errorf("units (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPlaceByUnit: each pod set (or PodSet group) takes the first flavor
// where the queue's quota, with what the walk already put there, and the
// flavor's nodes hold it; TryNextFlavor puts borrowing flavors aside.
func TestPlaceByUnit(t *testing.T) {
	const rack, host = "rack", strata.HostnameLabel
	// Two flavors of one rack each: "a" with 4 CPUs on one node, "b" with
	// 8 on one node.
	flavors := func() []UnitFlavor {
		var out []UnitFlavor
		for _, f := range []struct{ name, cpu string }{{"a", "4"}, {"b", "8"}} {
			s := tas.NewSnapshot([]string{rack, host}, nil)
			s.SetNode(tas.Node{Name: f.name + "-n", Ready: true, Labels: map[string]string{rack: f.name + "-r", host: f.name + "-n"},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(f.cpu), corev1.ResourcePods: resource.MustParse("110")}})
			out = append(out, UnitFlavor{Def: testutil.MakeResourceFlavor(f.name).Obj(), Snapshot: s, TopologyName: "t"})
		}
		return out
	}
	ps := func(name string, pods int32) strata.PodSet {
		return testutil.MakePodSet(name, pods, "cpu", "1").Required(rack).Obj()
	}
	group := func(p strata.PodSet) strata.PodSet {
		p.TopologyRequest.PodSetGroupName = ptr.To("g")
		return p
	}
	// quota: "a" and "b" hold up to their nodes' CPUs; borrowing on the
	// flavors listed (height 1) beyond borrowAbove CPUs.
	type quota struct {
		borrowAbove map[int]int64
		height      map[int]int // 1 when not given
	}
	cases := map[string]struct {
		podSets     []strata.PodSet
		quota       quota
		tryNext     bool
		wantFlavors []int
		wantOK      bool
	}{
		"both fit on the first flavor": {
			podSets: []strata.PodSet{ps("a", 2), ps("b", 2)}, wantFlavors: []int{0, 0}, wantOK: true,
		},
		"the second pod set goes on the next flavor": {
			podSets: []strata.PodSet{ps("a", 3), ps("b", 3)}, wantFlavors: []int{0, 1}, wantOK: true,
		},
		"the first pod set goes where it fits; the second comes back to the first flavor": {
			podSets: []strata.PodSet{ps("a", 6), ps("b", 4)}, wantFlavors: []int{1, 0}, wantOK: true,
		},
		"a PodSet group stays on one flavor": {
			podSets: []strata.PodSet{group(ps("leader", 1)), group(ps("workers", 3)), ps("x", 4)}, wantFlavors: []int{0, 0, 1}, wantOK: true,
		},
		"a group that fits only on the second flavor": {
			podSets: []strata.PodSet{group(ps("leader", 1)), group(ps("workers", 4))}, wantFlavors: []int{1, 1}, wantOK: true,
		},
		"a pod set that fits nowhere": {
			podSets: []strata.PodSet{ps("a", 3), ps("b", 9)}, wantOK: false,
		},
		"the second fits nowhere once the first is placed": {
			podSets: []strata.PodSet{ps("a", 8), ps("b", 5)}, wantOK: false,
		},
		"Borrow: the first flavor though it borrows": {
			podSets: []strata.PodSet{ps("a", 3), ps("b", 1)}, quota: quota{borrowAbove: map[int]int64{0: 2}},
			wantFlavors: []int{0, 0}, wantOK: true,
		},
		"TryNextFlavor: a flavor without borrowing first, for each pod set": {
			podSets: []strata.PodSet{ps("a", 3), ps("b", 1)}, quota: quota{borrowAbove: map[int]int64{0: 2}}, tryNext: true,
			wantFlavors: []int{1, 0}, wantOK: true,
		},
		"TryNextFlavor: the first borrowing flavor when every flavor borrows": {
			podSets: []strata.PodSet{ps("a", 3), ps("b", 1)}, quota: quota{borrowAbove: map[int]int64{0: 2, 1: 2}}, tryNext: true,
			wantFlavors: []int{0, 1}, wantOK: true,
		},
		"TryNextFlavor: the lowest borrowing first": {
			podSets: []strata.PodSet{ps("a", 3)}, quota: quota{borrowAbove: map[int]int64{0: 2, 1: 2}, height: map[int]int{0: 2, 1: 1}}, tryNext: true,
			wantFlavors: []int{1}, wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fl := flavors()
			wl := testutil.MakeWorkload("w", "ns").PodSets(tc.podSets...).Obj()
			q := func(f int, placed *strata.Workload) QuotaAnswer {
				var cpu int64
				for _, p := range placed.Spec.PodSets {
					cpu += int64(p.Count)
				}
				limit := map[int]int64{0: 4, 1: 8}[f]
				above, borrows := tc.quota.borrowAbove[f]
				ans := QuotaAnswer{Fits: cpu <= limit}
				if borrows && cpu > above {
					ans.Borrows, ans.Height = true, 1
					if h, ok := tc.quota.height[f]; ok {
						ans.Height = h
					}
				}
				return ans
			}
			got, ok := PlaceByUnit(wl, fl, q, tc.tryNext, tas.Options{})
			if ok != tc.wantOK {
				t.Fatalf("ok %v, want %v (flavors %v)", ok, tc.wantOK, got.Flavors)
			}
			if !ok {
				// Nothing was kept: each flavor still holds its whole node.
				for i, pods := range []int32{4, 8} {
					full := testutil.MakeWorkload("full", "ns").PodSets(ps("all", pods)).Obj()
					if _, _, err := Place(fl[i].Snapshot, "t", nil, full, tas.Options{}); err != nil {
						t.Errorf("flavor %d: %d pods no longer fit: %v", i, pods, err)
					}
				}
				return
			}
			if diff := cmp.Diff(tc.wantFlavors, got.Flavors); diff != "" {
				t.Errorf("flavors (-want,+got):\n%s", diff)
			}
			for i, a := range got.Assignments {
				var pods int32
				for _, d := range a.Domains {
					pods += d.Count
					if want := fl[got.Flavors[i]].Def.Name + "-n"; d.Values[len(d.Values)-1] != want {
						t.Errorf("pod set %d on %v, want node %s", i, d.Values, want)
					}
				}
				if pods != tc.podSets[i].Count {
					t.Errorf("pod set %d: %d pods assigned, want %d", i, pods, tc.podSets[i].Count)
				}
			}
			got.Release(fl)
		})
	}
}

// TestQuotaPlan: units go on the first flavor whose quota holds them; the
// first on none goes where noFit says (told what the walk put on each
// flavor so far), later ones on none go there too, and count there for
// the units after them.
func TestQuotaPlan(t *testing.T) {
	wl := testutil.MakeWorkload("w", "ns").PodSets(
		testutil.MakePodSet("driver", 1, "cpu", "2").Obj(),
		testutil.MakePodSet("workers", 2, "cpu", "4").Obj(),
		testutil.MakePodSet("extra", 1, "cpu", "1").Obj(),
		testutil.MakePodSet("more", 1, "cpu", "6").Obj()).Obj()
	// quota is each flavor's CPUs left.
	type want struct {
		Flavor int
		On     []int
		Told   map[int][]int // what noFit was told the walk put on each flavor
	}
	cases := map[string]struct {
		quota []int64
		noFit int // -1: no flavor helps
		want  want
	}{
		"all within quota, each on the first flavor that holds it": {quota: []int64{3, 20}, want: want{Flavor: -1}},
		"the workers on none: with what was put on the chosen flavor before them, and what goes there after": {
			quota: []int64{3, 7}, noFit: 1,
			// extra (1) joins the driver on flavor 0 (2+1 of 3); more (6) fits on
			// neither, the workers counting on flavor 1: it goes on 1 too.
			want: want{Flavor: 1, On: []int{1, 3}, Told: map[int][]int{0: {0}}},
		},
		"later units on none go on the same flavor": {
			quota: []int64{2, 1}, noFit: 0,
			want: want{Flavor: 0, On: []int{0, 1, 3}, Told: map[int][]int{0: {0}}},
		},
		"the first on none, where no flavor helps": {quota: []int64{1, 1}, noFit: -1, want: want{Flavor: -1, Told: map[int][]int{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got want
			got.Flavor, got.On = QuotaPlan(wl, len(tc.quota), func(f int, placed *strata.Workload) bool {
				var cpus int64
				for _, ps := range placed.Spec.PodSets {
					q := ps.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
					cpus += q.Value() * int64(ps.Count)
				}
				return cpus <= tc.quota[f]
			}, func(unit []int, onFlavor map[int][]int) (int, bool) {
				got.Told = maps.Clone(onFlavor)
				return tc.noFit, tc.noFit >= 0
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("QuotaPlan (-want,+got):\n%s", diff)
			}
		})
	}
}
