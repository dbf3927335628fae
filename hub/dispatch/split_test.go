package dispatch

import (
	"testing"

	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/testutil"
)

// TestSplittable: which waiting workloads the hub may place with their
// pod sets on different flavors.
func TestSplittable(t *testing.T) {
	two := func(configure func(*strata.Workload)) *strata.Workload {
		wl := testutil.MakeWorkload("w", "ns").PodSets(testutil.MakePodSet("driver", 1, "cpu", "1").Obj(),
			testutil.MakePodSet("workers", 2, "cpu", "1").Obj()).Obj()
		if configure != nil {
			configure(wl)
		}
		return wl
	}
	cases := map[string]struct {
		wl     *strata.Workload
		kind   jobs.Kind
		counts []int32
		want   bool
	}{
		"two pod sets": {wl: two(nil), kind: jobset.Kind, want: true},
		"one pod set":  {wl: testutil.MakeWorkload("w", "ns").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Obj()).Obj(), kind: jobset.Kind},
		"one PodSet group": {wl: two(func(wl *strata.Workload) {
			for i := range wl.Spec.PodSets {
				wl.Spec.PodSets[i].TopologyRequest = &strata.PodSetTopologyRequest{PodSetGroupName: ptr.To("g")}
			}
		}), kind: jobset.Kind},
		"with fewer pods": {wl: two(nil), kind: jobset.Kind, counts: []int32{1, 1}},
		"a LeaderWorkerSet: its worker admits a Workload per group, each on its pod sets' flavors": {wl: two(nil), kind: lws.SetKind, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pending{entry: &entry{wl: tc.wl, kind: tc.kind}, counts: tc.counts}
			if got := splittable(p); got != tc.want {
				t.Errorf("splittable() = %v, want %v", got, tc.want)
			}
		})
	}
}
