package dispatch

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

func TestDispatchedIn(t *testing.T) {
	plan := &tas.Assignment{Levels: []string{"rack"}, Domains: []tas.DomainAssignment{{Values: []string{"r1"}, Count: 1}}}
	hint, err := workload.EncodeTopologyHints([]strata.PodSet{{Name: "main"}}, []*tas.Assignment{plan})
	if err != nil {
		t.Fatal(err)
	}
	wl := func(uid, cluster string, gen int64, finished bool) strata.Workload {
		w := strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
		w.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 1}}
		if gen > 0 {
			w.Status.Placement = &strata.Placement{Cluster: cluster, DispatchGeneration: gen}
			if cluster != "" {
				w.Status.Placement.TopologyHint = hint
			}
		}
		if finished {
			w.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
		}
		return w
	}
	items := []strata.Workload{
		wl("recorded", "w1", 1, false),
		wl("decided", "", 0, false),        // the informer does not show this process's decision yet
		wl("newer-record", "w1", 2, false), // the record is newer than the decision remembered
		wl("finished", "w2", 1, true),
		wl("ended", "", 3, false), // its dispatch ended
	}
	d := &Dispatcher{spread: map[types.UID]spreadEntry{
		"decided":      {namespace: "ns", generation: 1, cluster: "w2", hints: map[string]*tas.Assignment{"main": plan}},
		"newer-record": {namespace: "ns", generation: 1, cluster: "w3"},
		"ended":        {namespace: "ns", generation: 3, cluster: "w3"},
		"gone":         {namespace: "ns", generation: 1, cluster: "w3"},
		"elsewhere":    {namespace: "other", generation: 1, cluster: "w3"},
	}}
	got := map[string]string{}
	for _, x := range d.dispatchedIn("ns", items) {
		got[x.Workload.Name] = x.Cluster
		if x.Hints["main"] == nil {
			t.Errorf("%s: no plan", x.Workload.Name)
		}
	}
	if diff := cmp.Diff(map[string]string{"recorded": "w1", "decided": "w2", "newer-record": "w1"}, got); diff != "" {
		t.Errorf("dispatched (-want,+got):\n%s", diff)
	}
	var kept []types.UID
	for uid := range d.spread {
		kept = append(kept, uid)
	}
	if diff := cmp.Diff([]types.UID{"decided", "elsewhere"}, kept, cmpSortUIDs); diff != "" {
		t.Errorf("decisions kept (-want,+got):\n%s", diff)
	}
}

var cmpSortUIDs = cmp.Transformer("sort", func(in []types.UID) []string {
	out := make([]string, len(in))
	for i, u := range in {
		out[i] = string(u)
	}
	slices.Sort(out)
	return out
})

// Every dispatch is noted for spreading; the notes end as the records do.
func TestForgetSpreadShown(t *testing.T) {
	d := &Dispatcher{spread: map[types.UID]spreadEntry{
		"shown":   {generation: 2},
		"pending": {generation: 3},
		"gone":    {generation: 1},
	}}
	d.forgetSpreadShown([]*entry{{uid: "shown", generation: 2}, {uid: "pending", generation: 2}})
	var kept []types.UID
	for uid := range d.spread {
		kept = append(kept, uid)
	}
	if diff := cmp.Diff([]types.UID{"pending"}, kept); diff != "" {
		t.Errorf("kept (-want,+got):\n%s", diff)
	}
}
