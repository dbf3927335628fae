package inuse

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestDecide(t *testing.T) {
	obj := func(deleting bool, finalizers ...string) *strata.ResourceFlavor {
		rf := &strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "a100", Finalizers: finalizers}}
		if deleting {
			rf.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return rf
	}
	cases := map[string]struct {
		obj   *strata.ResourceFlavor
		users []string
		want  Action
	}{
		"live, without it":                          {obj: obj(false), want: Add},
		"live, with another controller's only":      {obj: obj(false, "example.com/other"), want: Add},
		"live, with it":                             {obj: obj(false, Finalizer), want: None},
		"live, with it, used":                       {obj: obj(false, Finalizer), users: []string{"cq"}, want: None},
		"deleted, unused":                           {obj: obj(true, Finalizer), want: Remove},
		"deleted, unused, another finalizer too":    {obj: obj(true, "example.com/other", Finalizer), want: Remove},
		"deleted, used":                             {obj: obj(true, Finalizer), users: []string{"cq"}, want: Wait},
		"deleted without it: not added again":       {obj: obj(true), want: None},
		"deleted without it, used: not added again": {obj: obj(true, "example.com/other"), users: []string{"cq"}, want: None},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Decide(tc.obj, tc.users); got != tc.want {
				t.Errorf("Decide = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestQueueUsers(t *testing.T) {
	admitted := func(name, cq string) *strata.Workload {
		wl := testutil.MakeWorkload(name, "team").Obj()
		wl.Status.Admission = &strata.Admission{ClusterQueue: cq}
		return wl
	}
	finished := admitted("done", "training")
	finished.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
	evicted := admitted("evicted", "training")
	evicted.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue}}
	wls := []*strata.Workload{
		admitted("b", "training"),
		admitted("a", "training"),
		admitted("other", "inference"),
		testutil.MakeWorkload("pending", "team").Obj(),
		finished,
		evicted,
	}
	want := []string{"team/a", "team/b", "team/evicted"}
	if diff := cmp.Diff(want, QueueUsers("training", wls)); diff != "" {
		t.Errorf("QueueUsers (-want +got):\n%s", diff)
	}
	if got := QueueUsers("empty", wls); got != nil {
		t.Errorf("QueueUsers of a queue nobody uses = %v", got)
	}
}

func TestFlavorUsers(t *testing.T) {
	cqs := []strata.ClusterQueue{
		*testutil.MakeClusterQueue("groups").ResourceGroup("cpu").GroupFlavor("spot", "8").GroupFlavor("a100", "8").Obj(),
		*testutil.MakeClusterQueue("flat").Flavor("a100").Obj(),
		*testutil.MakeClusterQueue("another").Flavor("h100").Obj(),
	}
	if diff := cmp.Diff([]string{"flat", "groups"}, FlavorUsers("a100", cqs)); diff != "" {
		t.Errorf("FlavorUsers (-want +got):\n%s", diff)
	}
	if got := FlavorUsers("b200", cqs); got != nil {
		t.Errorf("FlavorUsers of an unused flavor = %v", got)
	}
}

func TestTopologyUsers(t *testing.T) {
	rfs := []strata.ResourceFlavor{
		*testutil.MakeResourceFlavor("b").TopologyName("dc").Obj(),
		*testutil.MakeResourceFlavor("a").TopologyName("dc").Obj(),
		*testutil.MakeResourceFlavor("other").TopologyName("lab").Obj(),
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: strata.ResourceFlavorSpec{TopologyName: ptr.To("")}},
	}
	if diff := cmp.Diff([]string{"a", "b"}, TopologyUsers("dc", rfs)); diff != "" {
		t.Errorf("TopologyUsers (-want +got):\n%s", diff)
	}
}

func TestWaitMessage(t *testing.T) {
	cases := map[string]struct {
		users []string
		want  string
	}{
		"one": {users: []string{"cq"},
			want: "ResourceFlavor a100 is being deleted and is still used by 1 ClusterQueue(s) (cq): it goes once none is left (finalizer strata.dev/resource-in-use)"},
		"more than five": {users: []string{"a", "b", "c", "d", "e", "f", "g"},
			want: "ResourceFlavor a100 is being deleted and is still used by 7 ClusterQueue(s) (a, b, c, d, e and 2 more): it goes once none is left (finalizer strata.dev/resource-in-use)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WaitMessage("ResourceFlavor", "a100", "ClusterQueue(s)", tc.users)); diff != "" {
				t.Errorf("WaitMessage (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdleFor: a finalizer goes only once nothing has used its object for
// settle, however often it is reconciled meanwhile; once forgotten (the
// finalizer went, or Reconcile saw a user), the wait starts again.
func TestIdleFor(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	r := NewReconciler(nil, nil, "ClusterQueue", "workloads", nil, nil)
	r.clock = clk
	var got []time.Duration
	got = append(got, r.idleFor("a")) // first seen unused
	clk.Step(400 * time.Millisecond)
	got = append(got, r.idleFor("a"))
	clk.Step(600 * time.Millisecond)
	got = append(got, r.idleFor("a")) // a second later: it may go
	r.forget("a")
	got = append(got, r.idleFor("a")) // forgotten: waits again
	want := []time.Duration{settle, 600 * time.Millisecond, 0, settle}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("idleFor (-want +got):\n%s", diff)
	}
}
