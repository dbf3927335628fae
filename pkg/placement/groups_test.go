package placement

import (
	"testing"

	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// TestGroupsOfOneWorkload: two pod set groups of one workload (a
// LeaderWorkerSet's groups through the hub), each required on one host,
// go to two hosts of a summary.
func TestGroupsOfOneWorkload(t *testing.T) {
	var sets []strata.PodSet
	for _, g := range []string{"0", "1"} {
		for _, ps := range []struct {
			name  string
			count int32
		}{{"leader-" + g, 1}, {"worker-" + g, 2}} {
			p := testutil.MakePodSet(ps.name, ps.count, gpu, "1").Required(host).Obj()
			p.TopologyRequest.PodSetGroupName = ptr.To("group-" + g)
			sets = append(sets, p)
		}
	}
	wl := testutil.MakeWorkload("w", "default").PodSets(sets...).Obj()
	st := cluster(t, [][][]int64{{{3, 3}}})
	d := New("", tas.DefaultOptions(), 0).Decide(wl, nil, []*Target{target(t, "a", "gpu", st)})
	if d.Cluster == "" {
		t.Fatalf("not placed: %s", d.Reason)
	}
}
