package dispatch

import (
	"context"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// TestRebuildReservesWhereRecorded: a restarted hub reserves a dispatch
// where its record says it planned it (the copy's hint, where the agent
// places it), not where it would decide now; a record whose domain the
// summary no longer has reserves nothing (it is decided again).
func TestRebuildReservesWhereRecorded(t *testing.T) {
	s := tas.NewSnapshot([]string{"rack", strata.HostnameLabel}, nil)
	for _, n := range []struct{ name, rack string }{{"a", "r0"}, {"b", "r1"}} {
		s.SetNode(tas.Node{Name: n.name, Ready: true, Labels: map[string]string{"rack": n.rack, strata.HostnameLabel: n.name},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	target, err := placement.NewTarget("w1", "cpu", &st)
	if err != nil {
		t.Fatal(err)
	}
	wl := testutil.MakeWorkload("w", "ns").PodSets(testutil.MakePodSet("main", 8, "cpu", "1").Required("rack").Obj()).Obj()
	policy := placement.New("", tas.DefaultOptions(), 0)
	// Decided now, it would take r0; it was planned on r1.
	if d := policy.Decide(wl, []string{"cpu"}, []*placement.Target{target}); d.Cluster != "w1" || d.PodSets[0].Assignment.Domains[0].Values[0] != "r0" {
		t.Fatalf("decided now: %s %v", d.Reason, d.PodSets)
	}
	hint, err := workload.EncodeTopologyHints(wl.Spec.PodSets, []*tas.Assignment{{Levels: []string{"rack"}, Domains: []tas.DomainAssignment{{Values: []string{"r1"}, Count: 8}}}})
	if err != nil {
		t.Fatal(err)
	}
	wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "cpu", TopologyHint: hint}
	if got := reserveRecorded(target, wl, "uid/1"); got == nil || got[0].Domains[0].Values[0] != "r1" {
		t.Fatalf("reserveRecorded: %v, want r1", got)
	}
	if !target.HasReservation("uid/1") || !target.TakesCapacity("uid/1") {
		t.Fatalf("uid/1 is not held")
	}
	if d := policy.Decide(wl, []string{"cpu"}, []*placement.Target{target}); d.Cluster != "w1" || d.PodSets[0].Assignment.Domains[0].Values[0] != "r0" {
		t.Errorf("after the rebuild, a second job: %s %v; want r0, r1 held", d.Reason, d.PodSets)
	}
	both := testutil.MakeWorkload("both", "ns").PodSets(testutil.MakePodSet("main", 16, "cpu", "1").Obj()).Obj()
	if d := policy.Decide(both, []string{"cpu"}, []*placement.Target{target}); d.Cluster != "" {
		t.Errorf("16 pods fit beside the rebuilt reservation: %v", d.PodSets)
	}
	target.Release("uid/1")
	gone, err := workload.EncodeTopologyHints(wl.Spec.PodSets, []*tas.Assignment{{Levels: []string{"rack"}, Domains: []tas.DomainAssignment{{Values: []string{"r9"}, Count: 8}}}})
	if err != nil {
		t.Fatal(err)
	}
	wl.Status.Placement.TopologyHint = gone
	if got := reserveRecorded(target, wl, "uid/1"); got != nil || target.HasReservation("uid/1") {
		t.Errorf("a record on a domain gone: reserved %v", got)
	}
}

// TestRebuildSplitPreemption: a restarted hub holds a split preemption's
// record as it was dispatched: the pod set that fit takes its capacity on
// its own flavor where the record's hint says, and only the flavor where
// the worker preempts holds a preemption in flight.
func TestRebuildSplitPreemption(t *testing.T) {
	targetOf := func(flavor string) *placement.Target {
		s := tas.NewSnapshot([]string{"rack", strata.HostnameLabel}, nil)
		for _, n := range []string{"r0", "r1"} {
			name := flavor + "-" + n
			s.SetNode(tas.Node{Name: name, Ready: true, Labels: map[string]string{"rack": n, strata.HostnameLabel: name},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
		}
		st, err := s.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := placement.NewTarget("w1", flavor, &st)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	cpu, gpu := targetOf("cpu"), targetOf("gpu")
	wl := testutil.MakeWorkload("w", "ns").PodSets(
		testutil.MakePodSet("driver", 8, "cpu", "1").Required("rack").Obj(),
		testutil.MakePodSet("workers", 8, "cpu", "1").Required("rack").Obj()).Obj()
	wl.UID = "uid"
	hint, err := workload.EncodeTopologyHints(wl.Spec.PodSets, []*tas.Assignment{{Levels: []string{"rack"}, Domains: []tas.DomainAssignment{{Values: []string{"r1"}, Count: 8}}}, nil})
	if err != nil {
		t.Fatal(err)
	}
	wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, PreemptUpTo: ptr.To[int32](10), TopologyHint: hint,
		PodSetFlavors: []strata.PodSetFlavor{{Name: "driver", Flavor: "cpu"}, {Name: "workers", Flavor: "gpu"}}}
	key := Key(wl.UID, 1)
	d := &Dispatcher{rebuilt: map[*placement.Target]bool{}, policy: placement.New("", tas.DefaultOptions(), 0)}
	d.rebuild(context.Background(), []*placement.Target{cpu, gpu}, func() []*strata.Workload { return []*strata.Workload{wl} })
	if !cpu.TakesCapacity(key) || cpu.Preempting() {
		t.Errorf("cpu: takes capacity %v, preempting %v; want the driver's capacity held, no preemption", cpu.TakesCapacity(key), cpu.Preempting())
	}
	if !gpu.HasReservation(key) || gpu.TakesCapacity(key) || !gpu.Preempting() {
		t.Errorf("gpu: held %v, takes capacity %v, preempting %v; want a preemption in flight only", gpu.HasReservation(key), gpu.TakesCapacity(key), gpu.Preempting())
	}
	// The driver holds r1 on cpu, as recorded: a rack-required 8-pod
	// workload fits r0 only.
	other := testutil.MakeWorkload("o", "ns").PodSets(testutil.MakePodSet("main", 8, "cpu", "1").Required("rack").Obj()).Obj()
	if dec := d.policy.Decide(other, []string{"cpu"}, []*placement.Target{cpu}); dec.Cluster != "w1" || dec.PodSets[0].Assignment.Domains[0].Values[0] != "r0" {
		t.Errorf("another rack-required workload on cpu: %s %v; want r0, r1 held", dec.Reason, dec.PodSets)
	}
}
