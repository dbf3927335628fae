package placement

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = "kubernetes.io/hostname"
	gpu   = "nvidia.com/gpu"
)

// cluster builds a worker's summary: racks[b][r] is the free GPUs of each
// node of rack r of block b (8 GPUs allocatable per node).
func cluster(t testing.TB, racks [][][]int64) *strata.CapacitySummaryStatus {
	t.Helper()
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	i := 0
	for b, rs := range racks {
		for r, nodes := range rs {
			for _, free := range nodes {
				name := fmt.Sprintf("n%d", i)
				i++
				s.SetNode(tas.Node{
					Name:   name,
					Labels: map[string]string{block: fmt.Sprintf("b%d", b), rack: fmt.Sprintf("r%d", r), host: name},
					Allocatable: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
					},
					Ready: true,
				})
				if used := 8 - free; used > 0 {
					s.AddUsage(name, corev1.ResourceList{gpu: *resource.NewQuantity(used, resource.DecimalSI)}, 1)
				}
			}
		}
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	return &st
}

func target(t testing.TB, name, flavor string, st *strata.CapacitySummaryStatus) *Target {
	t.Helper()
	tg, err := NewTarget(name, flavor, st)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func job(count int32, gpus string, configure func(*testutil.PodSetWrapper)) *strata.Workload {
	ps := testutil.MakePodSet("main", count, gpu, gpus)
	if configure != nil {
		configure(ps)
	}
	return testutil.MakeWorkload("w", "default").PodSets(ps.Obj()).Obj()
}

func rackOf(n int, free int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = free
	}
	return out
}

func TestDecide(t *testing.T) {
	// free: one whole free rack of 4 nodes, and a fragmented one.
	free := func() *strata.CapacitySummaryStatus {
		return cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 2)}})
	}
	fragmented := func() *strata.CapacitySummaryStatus {
		return cluster(t, [][][]int64{{{8, 8, 0, 0}, {8, 8, 0, 0}}, {{8, 8, 8, 0}}})
	}
	cases := map[string]struct {
		targets   func() []*Target
		flavors   []string
		workload  *strata.Workload
		policy    configv1beta1.PlacementPolicy
		want      []Candidate
		wantNever bool
		reason    string
	}{
		"required rack lands on the cluster with a free rack": {
			targets: func() []*Target {
				return []*Target{target(t, "a-frag", "gpu", fragmented()), target(t, "b-free", "gpu", free())}
			},
			workload: job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "b-free", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 0, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "a-frag", Flavor: "gpu", Reason: "rack required: the best rack fits 3 of 4 pods; limited by nvidia.com/gpu (4 nodes)"},
			},
			reason: "b-free/gpu: fits in rack b0/r0, room for 0 more; a-frag/gpu: rack required: the best rack fits 3 of 4 pods; limited by nvidia.com/gpu (4 nodes)",
		},
		"the reason names three runners-up, then how many more": {
			targets: func() []*Target {
				var ts []*Target
				for i, name := range []string{"c1", "c2", "c3", "c4", "c5"} {
					ts = append(ts, target(t, name, "gpu", cluster(t, [][][]int64{{rackOf(4, int64(2+i))}})))
				}
				return ts
			},
			workload: job(4, "2", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "c1", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 0, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "c2", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 0, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "c3", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 4, Reason: "fits in rack b0/r0, room for 4 more"},
				{Cluster: "c4", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 4, Reason: "fits in rack b0/r0, room for 4 more"},
				{Cluster: "c5", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 8, Reason: "fits in rack b0/r0, room for 8 more"},
			},
			reason: "c1/gpu: fits in rack b0/r0, room for 0 more; c2/gpu: fits in rack b0/r0, room for 0 more; " +
				"c3/gpu: fits in rack b0/r0, room for 4 more; c4/gpu: fits in rack b0/r0, room for 4 more; and 1 more",
		},
		"a rack beats a block even with more room left": {
			targets: func() []*Target {
				return []*Target{
					target(t, "x", "gpu", cluster(t, [][][]int64{{rackOf(2, 8), rackOf(2, 8)}})),
					target(t, "y", "gpu", cluster(t, [][][]int64{{rackOf(8, 8)}})),
				}
			},
			workload: job(3, "8", func(p *testutil.PodSetWrapper) { p.Preferred(rack) }),
			want: []Candidate{
				{Cluster: "y", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 5, Reason: "fits in rack b0/r0, room for 5 more"},
				{Cluster: "x", Flavor: "gpu", Fits: true, Level: 1, Domain: []string{"b0"}, Room: 1, Reason: "fits in block b0, room for 1 more"},
			},
		},
		"the tighter rack wins": {
			targets: func() []*Target {
				return []*Target{target(t, "a-frag", "gpu", fragmented()), target(t, "b-free", "gpu", free())}
			},
			workload: job(5, "1", func(p *testutil.PodSetWrapper) { p.Preferred(rack) }),
			want: []Candidate{
				{Cluster: "b-free", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r1"}, Room: 3, Reason: "fits in rack b0/r1, room for 3 more"},
				{Cluster: "a-frag", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 11, Reason: "fits in rack b0/r0, room for 11 more"},
			},
		},
		"best fit: the least room left wins": {
			targets: func() []*Target {
				return []*Target{target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8)}})), target(t, "b", "gpu", cluster(t, [][][]int64{{rackOf(3, 8)}}))}
			},
			workload: job(3, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "b", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 0, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "a", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 1, Reason: "fits in rack b0/r0, room for 1 more"},
			},
		},
		"spread: the most room left wins": {
			targets: func() []*Target {
				return []*Target{target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8)}})), target(t, "b", "gpu", cluster(t, [][][]int64{{rackOf(3, 8)}}))}
			},
			policy:   configv1beta1.Spread,
			workload: job(3, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "a", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 1, Reason: "fits in rack b0/r0, room for 1 more"},
				{Cluster: "b", Flavor: "gpu", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Room: 0, Reason: "fits in rack b0/r0, room for 0 more"},
			},
		},
		"flavor order, then cluster name": {
			targets: func() []*Target {
				st := cluster(t, [][][]int64{{rackOf(2, 8)}})
				return []*Target{target(t, "b", "h100", st), target(t, "a", "a100", st), target(t, "c", "a100", st), target(t, "d", "b200", st)}
			},
			flavors:  []string{"a100", "h100"},
			workload: job(2, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "a", Flavor: "a100", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "c", Flavor: "a100", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Reason: "fits in rack b0/r0, room for 0 more"},
				{Cluster: "b", Flavor: "h100", Fits: true, Level: 2, Domain: []string{"b0", "r0"}, Reason: "fits in rack b0/r0, room for 0 more"},
			},
		},
		"an unavailable cluster gets no work": {
			targets: func() []*Target {
				stale := target(t, "a", "gpu", free())
				stale.Unavailable = "summary stale (observed 5m ago)"
				return []*Target{stale, target(t, "b", "gpu", fragmented())}
			},
			workload: job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "a", Flavor: "gpu", Reason: "summary stale (observed 5m ago)"},
				{Cluster: "b", Flavor: "gpu", Reason: "rack required: the best rack fits 3 of 4 pods; limited by nvidia.com/gpu (4 nodes)"},
			},
			reason: "fits nowhere now: a/gpu: summary stale (observed 5m ago); b/gpu: rack required: the best rack fits 3 of 4 pods; limited by nvidia.com/gpu (4 nodes)",
		},
		"fits no cluster even empty": {
			targets: func() []*Target {
				return []*Target{target(t, "a", "gpu", free()), target(t, "b", "gpu", fragmented())}
			},
			workload: job(5, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want: []Candidate{
				{Cluster: "a", Flavor: "gpu", Reason: "rack required: the best rack fits 4 of 5 pods; limited by nvidia.com/gpu (4 nodes) (also when empty)"},
				{Cluster: "b", Flavor: "gpu", Reason: "rack required: the best rack fits 3 of 5 pods; limited by nvidia.com/gpu (4 nodes) (also when empty)"},
			},
			wantNever: true,
		},
		"a topology without the requested level is no candidate": {
			targets: func() []*Target {
				s := tas.NewSnapshot([]string{rack, host}, nil)
				s.SetNode(tas.Node{Name: "n", Labels: map[string]string{rack: "r", host: "n"}, Ready: true,
					Allocatable: corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
				st, err := s.Summarize(math.MaxInt)
				if err != nil {
					t.Fatal(err)
				}
				return []*Target{target(t, "a", "gpu", &st)}
			},
			workload: job(1, "8", func(p *testutil.PodSetWrapper) { p.Required(block) }),
			want: []Candidate{
				{Cluster: "a", Flavor: "gpu", Reason: `pod set main: podset-required-topology: "cloud.provider.com/topology-block" is not a level of Topology "of flavor gpu" (levels: cloud.provider.com/topology-rack, kubernetes.io/hostname)`},
			},
			wantNever: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := New(tc.policy, tas.DefaultOptions(), 0)
			d := p.Decide(tc.workload, tc.flavors, tc.targets())
			if diff := cmp.Diff(tc.want, d.Candidates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
			if d.NeverFits != tc.wantNever {
				t.Errorf("NeverFits = %v, want %v", d.NeverFits, tc.wantNever)
			}
			if tc.reason != "" && d.Reason != tc.reason {
				t.Errorf("reason:\n got %s\nwant %s", d.Reason, tc.reason)
			}
			if best := tc.want[0]; best.Fits != (d.Cluster == best.Cluster && d.Flavor == best.Flavor && len(d.PodSets) == 1) {
				t.Errorf("decision %s/%s with %d pod sets, want %s/%s", d.Cluster, d.Flavor, len(d.PodSets), best.Cluster, best.Flavor)
			}
		})
	}
}

// TestBurstIsAdmittedOnce: reservations keep a burst of identical jobs
// from piling onto one cluster's stale summary, and end when released or
// when a new summary reflects the job.
func TestBurstIsAdmittedOnce(t *testing.T) {
	two := cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 8)}})
	one := cluster(t, [][][]int64{{rackOf(4, 8)}})
	targets := []*Target{target(t, "a", "gpu", two), target(t, "b", "gpu", one)}
	p := New("", tas.DefaultOptions(), 0)
	wl := job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	var got []string
	for i := range 4 {
		d := p.Decide(wl, nil, targets)
		got = append(got, d.Cluster)
		if d.Cluster == "" {
			continue
		}
		if err := d.Reserve(targets, fmt.Sprintf("job-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Every rack is as tight a fit as the others: a's two by name, then b.
	if diff := cmp.Diff([]string{"a", "a", "b", ""}, got); diff != "" {
		t.Errorf("clusters chosen (-want,+got):\n%s", diff)
	}
	// A new summary of a that reflects job-0 but not job-1 yet: job-1's
	// reservation stays until released.
	a := targets[0]
	reflected := cluster(t, [][][]int64{{rackOf(4, 0), rackOf(4, 8)}})
	reflected.SummaryGeneration = 2
	a.Release("job-0")
	if err := a.SetSummary(reflected); err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(wl, nil, targets); d.Cluster != "" {
		t.Errorf("after the summary: placed on %s; want nowhere, job-1 still holds a's second rack", d.Cluster)
	}
	a.Release("job-1")
	if d := p.Decide(wl, nil, targets); d.Cluster != "a" {
		t.Errorf("after job-1 is released: placed on %q, want a (%s)", d.Cluster, d.Reason)
	}
}

// TestUncheckedIsSaid: what a summary cannot evaluate is named: a
// selector on the hosts, which a summary does not list; any selector with
// a summary of an agent that publishes no labels.
func TestUncheckedIsSaid(t *testing.T) {
	noLabels := cluster(t, [][][]int64{{rackOf(2, 8)}})
	noLabels.NodeLabels = nil
	for name, tc := range map[string]struct {
		st       *strata.CapacitySummaryStatus
		selector map[string]string
		want     string
	}{
		"no labels": {noLabels, map[string]string{"pool": "training"},
			"a/gpu: fits in rack b0/r0, room for 1 more (node selector not checked: the summary has no node labels)"},
		"host": {cluster(t, [][][]int64{{rackOf(2, 8)}}), map[string]string{host: "n1"},
			"a/gpu: fits in rack b0/r0, room for 1 more (node selector on kubernetes.io/hostname not checked: the worker's summary does not carry it)"},
	} {
		t.Run(name, func(t *testing.T) {
			wl := job(1, "8", nil)
			wl.Spec.PodSets[0].Template.Spec.NodeSelector = tc.selector
			d := New("", tas.DefaultOptions(), 0).Decide(wl, nil, []*Target{target(t, "a", "gpu", tc.st)})
			if d.Reason != tc.want {
				t.Errorf("reason:\n got %s\nwant %s", d.Reason, tc.want)
			}
		})
	}
}

// TestSelectorsChooseTheCluster: the hub evaluates node selectors and
// required affinity on the summaries' node labels, as the workers would:
// the workload goes to the one cluster whose nodes match, never to one
// whose nodes cannot, and a selector no node of any cluster matches never
// fits (the dispatcher then says NoClusterFits, without a copy).
func TestSelectorsChooseTheCluster(t *testing.T) {
	labelled := func(model string) *strata.CapacitySummaryStatus {
		st := cluster(t, [][][]int64{{rackOf(4, 8)}})
		// Every node the same model: a common label.
		st.NodeLabels.Common = map[string]string{"gpu.example/model": model}
		return st
	}
	targets := []*Target{target(t, "east", "gpu", labelled("a100")), target(t, "west", "gpu", labelled("h100"))}
	p := New("", tas.DefaultOptions(), 0)
	for _, model := range []string{"a100", "h100"} {
		wl := job(2, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
		wl.Spec.PodSets[0].Template.Spec.NodeSelector = map[string]string{"gpu.example/model": model}
		want := map[string]string{"a100": "east", "h100": "west"}[model]
		if d := p.Decide(wl, nil, targets); d.Cluster != want || d.NeverFits {
			t.Errorf("%s: placed on %q (never fits: %t), want %s: %s", model, d.Cluster, d.NeverFits, want, d.Reason)
		}
	}
	wl := job(1, "8", nil)
	wl.Spec.PodSets[0].Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu.example/model", Operator: corev1.NodeSelectorOpIn, Values: []string{"b200"}}},
		}}}}}
	d := p.Decide(wl, nil, targets)
	if d.Cluster != "" || !d.NeverFits {
		t.Fatalf("a b200 pod placed on %q (never fits: %t): %s", d.Cluster, d.NeverFits, d.Reason)
	}
	if !strings.Contains(d.Reason, "node selector/affinity") {
		t.Errorf("the reason does not say the selector excluded the nodes: %s", d.Reason)
	}
}

// TestSummaryCountsReflectedReservations: a reservation takes nothing
// while a summary lists its dispatch — counted once by the reservation
// before, once by the summary then — and takes its capacity again from a
// summary that stops listing it (the agent gave the admission back), until
// Release. A dispatch a summary lists already is held without taking
// anything (a hub rebuilding its reservations after a restart).
func TestSummaryCountsReflectedReservations(t *testing.T) {
	p := New("", tas.DefaultOptions(), 0)
	wl := job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	a := target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 8)}}))
	targets := []*Target{a}
	decisions := map[string]*Decision{}
	for _, key := range []string{"uid-0/1", "uid-1/1"} {
		d := p.Decide(wl, nil, targets)
		if err := d.Reserve(targets, key); err != nil {
			t.Fatal(err)
		}
		decisions[key] = d
	}
	reserved := func() map[string]bool {
		return map[string]bool{"uid-0/1": a.TakesCapacity("uid-0/1"), "uid-1/1": a.TakesCapacity("uid-1/1")}
	}
	// Generation 2 counts uid-0's copy (its rack is used) and lists it;
	// uid-1's is not admitted yet.
	next := cluster(t, [][][]int64{{rackOf(4, 0), rackOf(4, 8)}})
	next.SummaryGeneration = 2
	next.Dispatches = []string{"uid-0/1"}
	if err := a.SetSummary(next); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"uid-0/1": false, "uid-1/1": true}, reserved()); diff != "" {
		t.Errorf("taking capacity after generation 2 (-want,+got):\n%s", diff)
	}
	if d := p.Decide(wl, nil, targets); d.Cluster != "" {
		t.Errorf("placed on %s; want nowhere: one rack used, the other reserved", d.Cluster)
	}
	if !a.HasReservation("uid-0/1") || a.Reservations() != 1 {
		t.Errorf("uid-0/1 held: %t, %d reservations taking capacity; want held, 1", a.HasReservation("uid-0/1"), a.Reservations())
	}

	// Generation 3: the agent gave uid-0's admission back (a failed
	// write): its rack is free in the summary, which no longer lists it.
	// The reservation takes the rack again.
	back := cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 8)}})
	back.SummaryGeneration = 3
	if err := a.SetSummary(back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"uid-0/1": true, "uid-1/1": true}, reserved()); diff != "" {
		t.Errorf("taking capacity after generation 3 (-want,+got):\n%s", diff)
	}
	if d := p.Decide(wl, nil, targets); d.Cluster != "" {
		t.Errorf("placed on %s; want nowhere: both racks reserved", d.Cluster)
	}
	a.Release("uid-0/1")
	if d := p.Decide(wl, nil, targets); d.Cluster != "a" {
		t.Errorf("after uid-0/1 is released: placed on %q, want a (%s)", d.Cluster, d.Reason)
	}

	// Reserving a dispatch the summary lists takes nothing.
	a.Release("uid-1/1")
	listed := cluster(t, [][][]int64{{rackOf(4, 0), rackOf(4, 8)}})
	listed.SummaryGeneration = 4
	listed.Dispatches = []string{"uid-0/1"}
	if err := a.SetSummary(listed); err != nil {
		t.Fatal(err)
	}
	if err := decisions["uid-0/1"].Reserve(targets, "uid-0/1"); err != nil {
		t.Fatal(err)
	}
	if a.TakesCapacity("uid-0/1") || !a.HasReservation("uid-0/1") || a.Reservations() != 0 {
		t.Errorf("uid-0/1 takes capacity again (%d reservations)", a.Reservations())
	}
}

// DecideAvoiding keeps each pod set out of the domains the avoider names
// on each target, and does not memoize those answers.
func TestDecideAvoiding(t *testing.T) {
	// a's rack is the tighter one: without avoiding, the job goes there.
	targets := []*Target{
		target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(2, 8)}})),
		target(t, "b", "gpu", cluster(t, [][][]int64{{rackOf(4, 8)}})),
	}
	wl := job(2, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	p := New(configv1beta1.Compact, tas.DefaultOptions(), 0)
	if d := p.DecideShape(wl, Shape(wl), nil, targets); d.Cluster != "a" {
		t.Fatalf("without avoiding: cluster %q, want a (%s)", d.Cluster, d.Reason)
	}
	avoidA := func(tg *Target, _ *strata.PodSet) []tas.Avoid {
		if tg.Cluster == "a" {
			return []tas.Avoid{{Level: block, Values: []string{"b0"}}}
		}
		return nil
	}
	d := p.DecideAvoiding(wl, Shape(wl), nil, targets, avoidA)
	if d.Cluster != "b" {
		t.Fatalf("avoiding a's block: cluster %q, want b (%s)", d.Cluster, d.Reason)
	}
	if !strings.Contains(d.Reason, "topology spreading") {
		t.Errorf("reason %q does not say a's nodes were skipped for topology spreading", d.Reason)
	}
	if d := p.DecideShape(wl, Shape(wl), nil, targets); d.Cluster != "a" {
		t.Errorf("after an avoiding decision: cluster %q, want a: the avoiding answer was memoized", d.Cluster)
	}
}

// InFlight sums, per leaf domain, what the reservations that take
// capacity hold: not those a summary counts already.
func TestInFlight(t *testing.T) {
	p := New("", tas.DefaultOptions(), 0)
	a := target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8)}, {rackOf(4, 8)}}))
	targets := []*Target{a}
	reserve := func(key string, wl *strata.Workload) {
		t.Helper()
		d := p.Decide(wl, nil, targets)
		if d.Cluster != "a" {
			t.Fatalf("%s not placed: %s", key, d.Reason)
		}
		if err := d.Reserve(targets, key); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]strata.InFlightDomain{}, a.InFlight()); diff != "" {
		t.Errorf("in flight before any reservation (-want,+got):\n%s", diff)
	}
	// Two 2-pod jobs of 4 GPUs a pod, each in one rack: the most compact
	// placement puts both in the same rack.
	twoPods := func() *strata.Workload { return job(2, "4", func(p *testutil.PodSetWrapper) { p.Required(rack) }) }
	reserve("uid-0/1", twoPods())
	reserve("uid-1/1", twoPods())
	got := a.InFlight()
	want := []strata.InFlightDomain{{Values: []string{"b0", "r0"}, Workloads: 2, Pods: 4, Requests: corev1.ResourceList{gpu: resource.MustParse("16")}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("in flight (-want,+got):\n%s", diff)
	}

	// A summary that counts uid-0's dispatch: only uid-1 is in flight.
	next := cluster(t, [][][]int64{{rackOf(4, 8)}, {rackOf(4, 8)}})
	next.SummaryGeneration = 2
	next.Dispatches = []string{"uid-0/1"}
	if err := a.SetSummary(next); err != nil {
		t.Fatal(err)
	}
	want[0].Workloads, want[0].Pods, want[0].Requests = 1, 2, corev1.ResourceList{gpu: resource.MustParse("8")}
	if diff := cmp.Diff(want, a.InFlight()); diff != "" {
		t.Errorf("in flight once the summary counts uid-0/1 (-want,+got):\n%s", diff)
	}
	a.Release("uid-1/1")
	if got := a.InFlight(); len(got) != 0 {
		t.Errorf("in flight after every release: %v", got)
	}
}

// TestReleaseAfterAViewDropped: a summary whose reading panicked drops
// the view; the reservations it held can still be released (each copy
// finished, refused or gone), and the next summary's view is built
// without them.
func TestReleaseAfterAViewDropped(t *testing.T) {
	st := cluster(t, [][][]int64{{rackOf(4, 8)}})
	tg := target(t, "a", "gpu", st)
	p := New("", tas.DefaultOptions(), 0)
	wl := job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	if d := p.Decide(wl, nil, []*Target{tg}); d.Cluster != "a" {
		t.Fatalf("placed on %q, want a", d.Cluster)
	} else if err := d.Reserve([]*Target{tg}, "job-0"); err != nil {
		t.Fatal(err)
	}
	tg.free = nil // as SetSummary's recovery leaves it
	tg.Release("job-0")
	next := cluster(t, [][][]int64{{rackOf(4, 8)}})
	next.SummaryGeneration = 2
	if err := tg.SetSummary(next); err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(wl, nil, []*Target{tg}); d.Cluster != "a" {
		t.Errorf("after the release and a new summary: placed on %q, want a (%s)", d.Cluster, d.Reason)
	}
}

// TestTargetsMadeAnewMeetNoOldAnswer: a target made anew for the same
// cluster, flavor and summary (a WorkerCluster deleted and created again)
// never reuses an answer memoized for the old one, whose reservations
// differ, after as many changes: versions are unique across targets.
func TestTargetsMadeAnewMeetNoOldAnswer(t *testing.T) {
	st := cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 8)}})
	p := New("", tas.DefaultOptions(), 0)
	full := job(4, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	tiny := job(1, "1", func(p *testutil.PodSetWrapper) { p.Required(rack) })
	reserve := func(tg *Target, wl *strata.Workload, key string) {
		t.Helper()
		if err := p.Decide(wl, nil, []*Target{tg}).Reserve([]*Target{tg}, key); err != nil {
			t.Fatal(err)
		}
	}
	old := target(t, "a", "gpu", st)
	reserve(old, full, "job-0")
	reserve(old, full, "job-1")
	if d := p.Decide(full, nil, []*Target{old}); d.Cluster != "" {
		t.Fatalf("the old target, both racks full: placed on %q", d.Cluster)
	}
	anew := target(t, "a", "gpu", st)
	reserve(anew, tiny, "tiny-0") // as many changes as the old one
	reserve(anew, tiny, "tiny-1")
	if d := p.Decide(full, nil, []*Target{anew}); d.Cluster != "a" {
		t.Errorf("the new target, a rack free: placed on %q, want a (%s)", d.Cluster, d.Reason)
	}
}

// TestEveryChangeMovesTheVersion: each reservation made or ended, a
// preemption's included, gives the target a version no other state had.
func TestEveryChangeMovesTheVersion(t *testing.T) {
	tg := target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8)}}))
	seen := map[uint64]bool{}
	note := func(what string) {
		t.Helper()
		if _, v := tg.Version(); seen[v] {
			t.Errorf("%s: version %d again", what, v)
		} else {
			seen[v] = true
		}
	}
	note("the summary")
	tg.ReservePreemption("pre")
	note("a preemption")
	if err := tg.Reserve("job", nil, nil); err != nil {
		t.Fatal(err)
	}
	note("a reservation")
	tg.Release("pre")
	note("a release")
}

// TestReservationKeepsTheDomainsLeft: when a summary no longer has one of
// the domains a reservation spans (its nodes left), the reservation still
// holds its pods in the others.
func TestReservationKeepsTheDomainsLeft(t *testing.T) {
	p := New("", tas.DefaultOptions(), 0)
	a := target(t, "a", "gpu", cluster(t, [][][]int64{{rackOf(4, 8), rackOf(4, 8)}}))
	targets := []*Target{a}
	// 6 pods of a whole node each in block b0: 4 in one rack, 2 in the other.
	d := p.Decide(job(6, "8", func(p *testutil.PodSetWrapper) { p.Required(block) }), nil, targets)
	if d.Cluster != "a" {
		t.Fatalf("not placed: %s", d.Reason)
	}
	if err := d.Reserve(targets, "uid-0/1"); err != nil {
		t.Fatal(err)
	}
	full := d.PodSets[0].Assignment.Domains[0]
	if full.Count != 4 {
		t.Fatalf("the first domain holds %d pods, want 4: %v", full.Count, d.PodSets[0].Assignment.Domains)
	}
	// Generation 2 has only the rack the reservation fills.
	next := cluster(t, [][][]int64{{rackOf(4, 8)}})
	next.SummaryGeneration = 2
	if err := a.SetSummary(next); err != nil {
		t.Fatal(err)
	}
	if got := p.Decide(job(1, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }), nil, targets); got.Cluster != "" {
		t.Errorf("placed on %s in %v; want nowhere: the rack that is left is reserved", got.Cluster, got.PodSets[0].Assignment.Domains)
	}
}

// TestSplitHint: a workload whose pod sets fit on a cluster only on
// different flavors fits on no one target; Decide's reason says where
// they would fit split (DecideSplit places them so, quota permitting).
func TestSplitHint(t *testing.T) {
	const hint = "its pod sets would fit on different flavors of a, capacity alone considered"
	twoPodSets := func(group bool) *strata.Workload {
		wl := testutil.MakeWorkload("w", "default").PodSets(
			testutil.MakePodSet("driver", 1, gpu, "6").Required(rack).Obj(),
			testutil.MakePodSet("workers", 1, gpu, "6").Required(rack).Obj()).Obj()
		if group {
			for i := range wl.Spec.PodSets {
				g := "g"
				wl.Spec.PodSets[i].TopologyRequest.PodSetGroupName = &g
			}
		}
		return wl
	}
	cases := map[string]struct {
		wl       *strata.Workload
		wantHint bool
	}{
		"two pod sets, one per flavor":       {twoPodSets(false), true},
		"a PodSet group stays on one flavor": {twoPodSets(true), false},
		"one pod set":                        {job(2, "6", func(ps *testutil.PodSetWrapper) { ps.Required(rack) }), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Cluster a: flavors f1 and f2, one node of 8 free GPUs each;
			// cluster b: f1 only.
			targets := []*Target{
				target(t, "a", "f1", cluster(t, [][][]int64{{{8}}})),
				target(t, "a", "f2", cluster(t, [][][]int64{{{8}}})),
				target(t, "b", "f1", cluster(t, [][][]int64{{{8}}})),
			}
			d := New(configv1beta1.Compact, tas.DefaultOptions(), 0).Decide(tc.wl, []string{"f1", "f2"}, targets)
			if d.Cluster != "" {
				t.Fatalf("placed on %s/%s, want nowhere", d.Cluster, d.Flavor)
			}
			if got := strings.Contains(d.Reason, hint); got != tc.wantHint {
				t.Errorf("reason %q: hint %v, want %v", d.Reason, got, tc.wantHint)
			}
			// The hint takes nothing: the targets hold what they did.
			one := job(1, "8", nil)
			for _, tg := range targets {
				if a := New(configv1beta1.Compact, tas.DefaultOptions(), 0).Decide(one, []string{tg.Flavor}, []*Target{tg}); a.Cluster == "" {
					t.Errorf("%s/%s: a pod of 8 GPUs no longer fits: %s", tg.Cluster, tg.Flavor, a.Reason)
				}
			}
		})
	}
}
