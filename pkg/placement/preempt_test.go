package placement

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// fullCluster builds a worker whose every node (8 GPUs) runs one workload
// of queue "cq" taking all its GPUs: priorities[r][n] is the priority of
// the workload on node n of rack r (one block).
func fullCluster(t *testing.T, name string, priorities [][]int32) *Target {
	t.Helper()
	return fullClusterOf(t, name, priorities, nil)
}

// fullClusterOf is fullCluster with queues[r][n] the queue of the
// workload on node n of rack r ("cq" where queues does not say).
func fullClusterOf(t *testing.T, name string, priorities [][]int32, queues [][]string) *Target {
	t.Helper()
	return fullClusterOn(t, name, "f", priorities, queues)
}

// fullClusterOn is fullClusterOf on flavor.
func fullClusterOn(t *testing.T, name, flavor string, priorities [][]int32, queues [][]string) *Target {
	t.Helper()
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	var held []tas.Held
	for r, nodes := range priorities {
		for n, p := range nodes {
			node := fmt.Sprintf("%s-r%d-n%d", name, r, n)
			s.SetNode(tas.Node{Name: node, Labels: map[string]string{block: "b0", rack: fmt.Sprintf("r%d", r), host: node}, Ready: true,
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
			u := tas.Usage{node: {gpu: resource.MustParse("8")}}
			s.AddUsage(node, u[node], 1)
			q := "cq"
			if r < len(queues) && n < len(queues[r]) {
				q = queues[r][n]
			}
			held = append(held, tas.Held{Queue: q, Priority: p, Usage: u, Requests: corev1.ResourceList{gpu: resource.MustParse("8")}})
		}
	}
	// Every queue preempts within itself, and borrows all it holds (a
	// cohort peer may reclaim it all).
	victims := tas.WithinAll(held)
	victims.Borrowed = map[string]corev1.ResourceList{}
	for q := range victims.Within {
		victims.Borrowed[q] = corev1.ResourceList{gpu: resource.MustParse("1000")}
	}
	st, err := s.CapturePreemptible(nil, held, victims).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	return target(t, name, flavor, &st)
}

func TestDecidePreemption(t *testing.T) {
	const hi, lo, mid = 1000, 10, 50
	cases := map[string]struct {
		clusters   map[string][][]int32
		preempting string // a cluster with a preemption in flight
		queue      string // the worker queue of copies ("" : none preempts)
		// room, when set, is the GPU quota the worker queue has left per
		// cluster (negative: over): a band must free what the job's 16
		// GPUs need beyond it.
		room map[string]int64
		// reclaim, when set, is the scope of a copy landing in queue
		// "mine", which only reclaims from cq, up to a priority.
		reclaim map[string]int32
		want    *PreemptionChoice
		why     string
	}{
		"only the worker whose rack holds lower priorities": {
			clusters: map[string][][]int32{
				"w1": {{hi, hi}, {hi, hi}},
				"w2": {{hi, lo}, {lo, hi}},
				"w3": {{hi, hi}, {lo, lo}},
			},
			want: &PreemptionChoice{Cluster: "w3", Flavor: "f", Queues: []string{"cq"}, UpTo: lo, Workloads: 2},
		},
		"fewest workloads first": {
			clusters: map[string][][]int32{
				"w1": {{lo, lo}, {lo, hi}},
				"w2": {{hi, hi}, {mid, mid}},
			},
			want: &PreemptionChoice{Cluster: "w2", Flavor: "f", Queues: []string{"cq"}, UpTo: mid, Workloads: 2},
		},
		"then the lowest priorities": {
			clusters: map[string][][]int32{
				"w1": {{mid, mid}, {hi, hi}},
				"w2": {{hi, hi}, {lo, lo}},
			},
			want: &PreemptionChoice{Cluster: "w2", Flavor: "f", Queues: []string{"cq"}, UpTo: lo, Workloads: 2},
		},
		"the lowest band that lets it in": {
			clusters: map[string][][]int32{
				"w1": {{lo, mid}, {hi, hi}},
			},
			want: &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"cq"}, UpTo: mid, Workloads: 2},
		},
		"nothing of lower priority": {
			clusters: map[string][][]int32{"w1": {{hi, hi}, {hi, hi}}},
			why:      "w1/f: no workload of ClusterQueue cq there has a priority below 100",
		},
		"spread over racks does not help a rack-required job": {
			clusters: map[string][][]int32{"w1": {{lo, hi}, {hi, lo}}},
			why:      "w1/f: it would not fit even with every workload of ClusterQueue cq of priority below 100 preempted",
		},
		"a preemption already under way": {
			clusters:   map[string][][]int32{"w1": {{lo, lo}, {hi, hi}}},
			preempting: "w1",
			why:        "w1/f: a preemption is already under way there",
		},
		"the queue's quota, not the capacity, decides the band": {
			clusters: map[string][][]int32{"w1": {{lo, lo}, {mid, mid}}},
			room:     map[string]int64{"w1": -16},
			want:     &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"cq"}, UpTo: mid, Workloads: 4},
		},
		"a band must free both the capacity and the quota": {
			clusters: map[string][][]int32{"w1": {{lo, hi}, {hi, hi}}, "w2": {{hi, hi}, {lo, lo}}},
			room:     map[string]int64{"w1": 0, "w2": 0},
			want:     &PreemptionChoice{Cluster: "w2", Flavor: "f", Queues: []string{"cq"}, UpTo: lo, Workloads: 2},
		},
		"the quota falls short even with every lower band": {
			clusters: map[string][][]int32{"w1": {{lo, lo}, {hi, hi}}},
			room:     map[string]int64{"w1": -16},
			why:      "w1/f: with every workload ClusterQueue cq may preempt there preempted, short by 16",
		},
		"reclaiming from a borrowing queue: its workloads of any priority up to the limit": {
			clusters: map[string][][]int32{"w1": {{hi, hi}, {lo, lo}}, "w2": {{lo, hi}, {hi, hi}}},
			reclaim:  map[string]int32{"cq": math.MaxInt32},
			want:     &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"cq"}, UpTo: lo, Workloads: 2},
		},
		"reclaiming up to a priority below the workload's": {
			clusters: map[string][][]int32{"w1": {{hi, hi}, {mid, mid}}},
			reclaim:  map[string]int32{"cq": lo},
			why:      "w1/f: no workload there that ClusterQueue mine may preempt for it (its own of a priority below 100, or those of its cohort's borrowing queues cq)",
		},
		"reclaiming beyond the workload's own priority": {
			clusters: map[string][][]int32{"w1": {{hi, hi}, {hi, hi}}},
			reclaim:  map[string]int32{"cq": math.MaxInt32},
			want:     &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"cq"}, UpTo: hi, Workloads: 4},
		},
		"no worker queue preempts": {
			clusters: map[string][][]int32{"w1": {{lo, lo}, {hi, hi}}},
			queue:    "-",
			why:      "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var targets []*Target
			for _, c := range []string{"w1", "w2", "w3"} {
				if ps, ok := tc.clusters[c]; ok {
					tg := fullCluster(t, c, ps)
					if c == tc.preempting {
						tg.ReservePreemption("other/1")
					}
					targets = append(targets, tg)
				}
			}
			wl := job(2, "8", func(ps *testutil.PodSetWrapper) { ps.Required(rack) })
			p := New(configv1beta1.Compact, tas.Options{}, 0)
			if d := p.Decide(wl, []string{"f"}, targets); d.Cluster != "" {
				t.Fatalf("it fits without preempting on %s", d.Cluster)
			}
			queue := "cq"
			if tc.queue == "-" {
				queue = ""
			}
			var quota func(*Target, map[string]corev1.ResourceList, bool) string
			if tc.room != nil {
				quota = func(t *Target, freed map[string]corev1.ResourceList, _ bool) string {
					f := freed["cq"][gpu]
					if left := tc.room[t.Cluster] + f.Value(); left < 16 {
						return fmt.Sprintf("short by %d", 16-left)
					}
					return ""
				}
			}
			scope := PreemptionScope{Queue: queue, Within: queue != ""}
			if tc.reclaim != nil {
				scope = PreemptionScope{Queue: "mine", Reclaim: tc.reclaim}
			}
			got, why := p.DecidePreemption(wl, []string{"f"}, targets, everywhere(100), func(*Target) []PreemptionScope { return []PreemptionScope{scope} }, quota)
			if got != nil {
				got = &PreemptionChoice{Cluster: got.Cluster, Flavor: got.Flavor, Queues: got.Queues, UpTo: got.UpTo, Workloads: got.Workloads}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecidePreemption (-want,+got):\n%s", diff)
			}
			if !strings.Contains(why, tc.why) || tc.why == "" && why != "" {
				t.Errorf("why = %q, want it to say %q", why, tc.why)
			}
		})
	}
}

// TestDecidePreemptionAcrossQueues: when no one queue's workloads free
// enough, a copy may count on its own lower priorities and a borrower's
// workloads together (the agent's search takes both), by capacity or by
// quota.
func TestDecidePreemptionAcrossQueues(t *testing.T) {
	const hi, lo, mid = 1000, 10, 50
	p := New(configv1beta1.Compact, tas.Options{}, 0)
	scope := []PreemptionScope{{Queue: "mine", Within: true, Reclaim: map[string]int32{"cq": math.MaxInt32}}}
	// One block; rack r0 holds a workload of "mine", rack r1 one of the
	// borrower "cq", beside workloads of a high priority.
	racks := [][]int32{{lo, hi}, {lo, hi}}
	queues := [][]string{{"mine", "other"}, {"cq", "other"}}
	cases := map[string]struct {
		// level the job's pods of 8 GPUs require (block when ""), and
		// how many (2 when 0).
		level  string
		pods   int
		racks  [][]int32
		queues [][]string
		scope  []PreemptionScope
		// room is the GPU quota the copy's queue has left; a queue's band
		// gives back what its workloads hold (no limit when nil).
		room *int64
		want *PreemptionChoice
		why  string
	}{
		"a node of each queue, in two racks of the block": {
			scope: scope,
			want:  &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"mine", "cq"}, UpTo: lo, Workloads: 2},
		},
		"its own queue alone may not: nothing": {
			scope: []PreemptionScope{{Queue: "mine", Within: true}},
			why:   "w1/f: it would not fit even with every workload of ClusterQueue mine of priority below 100 preempted",
		},
		"three pods: the lowest band of each queue that together lets it in": {
			scope: scope, pods: 3,
			racks: [][]int32{{lo, mid}, {lo, lo}}, queues: [][]string{{"mine", "mine"}, {"cq", "cq"}},
			want: &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"mine", "cq"}, UpTo: lo, Workloads: 3},
		},
		"quota: the borrower's band and its own only together": {
			scope: scope, room: ptr.To[int64](0),
			want: &PreemptionChoice{Cluster: "w1", Flavor: "f", Queues: []string{"mine", "cq"}, UpTo: lo, Workloads: 2},
		},
		"quota short even with both": {
			scope: scope, room: ptr.To[int64](-8),
			why: "w1/f: with every workload ClusterQueue mine may preempt there preempted, short by 8",
		},
		// The summary says what each band frees in a domain, not on which
		// node: where both queues' workloads share one, the hub counts on
		// one band's there (the agent may still preempt for a copy
		// unmarked; none is marked that it cannot admit).
		"a node of each queue in one rack, for a rack: not counted on": {
			scope: scope,
			level: rack, racks: [][]int32{{lo, lo}, {hi, hi}}, queues: [][]string{{"mine", "cq"}, {"other", "other"}},
			why: "w1/f: it would not fit even with every workload of ClusterQueues mine, cq it may preempt preempted",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			level, rs, qs := tc.level, racks, queues
			if level == "" {
				level = block
			}
			if tc.racks != nil {
				rs, qs = tc.racks, tc.queues
			}
			wl := job(int32(max(tc.pods, 2)), "8", func(ps *testutil.PodSetWrapper) { ps.Required(level) })
			targets := []*Target{fullClusterOf(t, "w1", rs, qs)}
			var quota func(*Target, map[string]corev1.ResourceList, bool) string
			if tc.room != nil {
				quota = func(_ *Target, freed map[string]corev1.ResourceList, _ bool) string {
					left := *tc.room
					for _, r := range freed {
						f := r[gpu]
						left += f.Value()
					}
					if left < 16 {
						return fmt.Sprintf("short by %d", 16-left)
					}
					return ""
				}
			}
			got, why := p.DecidePreemption(wl, []string{"f"}, targets, everywhere(100), func(*Target) []PreemptionScope { return tc.scope }, quota)
			if got != nil {
				got = &PreemptionChoice{Cluster: got.Cluster, Flavor: got.Flavor, Queues: got.Queues, UpTo: got.UpTo, Workloads: got.Workloads}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecidePreemption (-want,+got):\n%s", diff)
			}
			if why != tc.why {
				t.Errorf("why = %q, want %q", why, tc.why)
			}
		})
	}
}

// TestPreemptionInFlightEnds: a preemption in flight takes no capacity
// and ends with a summary that counts the dispatch.
func TestPreemptionInFlightEnds(t *testing.T) {
	tg := fullCluster(t, "w1", [][]int32{{10, 10}, {1000, 1000}})
	tg.ReservePreemption("uid/1")
	if !tg.Preempting() || tg.Reservations() != 0 || tg.TakesCapacity("uid/1") {
		t.Fatalf("Preempting %v, Reservations %d, TakesCapacity %v: want a preemption that takes nothing", tg.Preempting(), tg.Reservations(), tg.TakesCapacity("uid/1"))
	}
	st := *tg.summary
	st.SummaryGeneration, st.Dispatches = 2, []string{"uid/1"}
	if err := tg.SetSummary(&st); err != nil {
		t.Fatal(err)
	}
	if tg.Preempting() {
		t.Errorf("a summary that counts the dispatch leaves the preemption in flight")
	}
}

// TestDecidePreemptionOnlyWhatTheSearchTakes: one node of 8 CPUs and 4
// GPUs; queue q0 (withinClusterQueue LowerPriority) runs a (1 CPU, 4
// GPUs) and b (7 CPUs, no GPU), both of priority 0. A copy of priority 100
// asks for 4 CPUs and 4 GPUs and is short of GPU quota. The agent's search
// takes only workloads that hold what the copy is short of (a), so the
// node's CPUs stay taken and it preempts nothing: the hub, whose band of
// all q0's workloads frees both, must not mark the copy (the band's
// resources, cpu only, say b holds no GPU); the series of q0's workloads
// holding GPUs (a alone) leaves the CPUs taken, and its reason says so.
func TestDecidePreemptionOnlyWhatTheSearchTakes(t *testing.T) {
	p := New(configv1beta1.Compact, tas.Options{}, 0)
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	s.SetNode(tas.Node{Name: "n0", Labels: map[string]string{block: "b0", rack: "r0", host: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}})
	cq := &strata.ClusterQueue{}
	cq.Name = "q0"
	cq.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, gpu},
		Flavors: []strata.FlavorQuotas{{Name: "f", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("100")}, {Name: gpu, NominalQuota: resource.MustParse("4")}}}}}}
	cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	books := queue.NewBooks([]*strata.ClusterQueue{cq})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reqA := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("4")}
	reqB := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}
	running := []preemption.Workload{
		{Key: types.NamespacedName{Namespace: "ns", Name: "a"}, Queue: "q0", AdmittedAt: base, Requests: reqA},
		{Key: types.NamespacedName{Namespace: "ns", Name: "b"}, Queue: "q0", AdmittedAt: base, Requests: reqB},
	}
	var held []tas.Held
	for _, w := range running {
		books.Charge("q0", "f", w.Requests, 1)
		s.AddUsage("n0", w.Requests, 1)
		held = append(held, tas.Held{Queue: "q0", Usage: tas.Usage{"n0": w.Requests}, Requests: w.Requests, AdmittedAt: base, Key: w.Key.String()})
	}
	wl := testutil.MakeWorkload("w", "default").PodSets(testutil.MakePodSet("main", 1, gpu, "4", "cpu", "4").Obj()).Obj()
	need := queue.WorkloadRequests(wl)
	v := preemption.VictimQueues([]*strata.ClusterQueue{cq})
	st, err := s.CapturePreemptible(nil, held, tas.Victims{Within: v.Within}).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	tg := target(t, "w", "f", &st)
	scopes := ScopesFor(cq, "f", need, 100, books, false)
	choice, why := p.DecidePreemption(wl, []string{"f"}, []*Target{tg}, everywhere(100), func(*Target) []PreemptionScope { return scopes },
		func(_ *Target, freed map[string]corev1.ResourceList, nominal bool) string {
			w, _ := QuotaShort(books, "q0", "f", need, freed, nominal)
			return w
		})
	if choice != nil {
		t.Errorf("the hub marks the copy: %s", choice.Reason)
	}
	if want := "w/f: it would not fit even with every workload of ClusterQueue q0 of priority below 100 holding nvidia.com/gpu preempted"; !strings.Contains(why, want) {
		t.Errorf("why = %q, want it to say %q", why, want)
	}
	capacity := &preemption.SnapshotCapacity{Snap: s, Usages: []tas.Usage{held[0].Usage, held[1].Usage}, Place: func(sn *tas.Snapshot) ([]tas.Usage, error) {
		_, taken, err := workload.Place(sn, "default", nil, wl, tas.Options{})
		return taken, err
	}}
	res := preemption.Find(preemption.Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "copy"}, Queue: "q0", Priority: 100, QueuedAt: base.Add(time.Hour), Requests: need},
		preemption.PolicyOf(cq), books, "f", running, capacity)
	if len(res.Victims) != 0 {
		t.Errorf("the agent's search preempts %v: the case no longer shows what it should", res.Victims)
	}
}

// TestDecidePreemptionOfThoseHoldingWhatItNeeds: one node of 16 CPUs and
// 4 GPUs; queue q0 (withinClusterQueue LowerPriority) runs c (4 CPUs, no
// GPU) at priority 0 and g (1 CPU, 4 GPUs) at priority 10. A copy of
// priority 100 asking for 1 CPU and 4 GPUs is short of GPU quota. The
// agent's search takes g alone (c holds no GPU). The band of all q0's
// workloads counts only for a copy short of CPUs (c holds no GPU), so
// the hub counts on the series of those holding GPUs: it marks the copy
// up to priority 10, one workload, and the agent's search so bounded
// preempts g.
func TestDecidePreemptionOfThoseHoldingWhatItNeeds(t *testing.T) {
	p := New(configv1beta1.Compact, tas.Options{}, 0)
	s := tas.NewSnapshot([]string{block, rack, host}, nil)
	s.SetNode(tas.Node{Name: "n0", Labels: map[string]string{block: "b0", rack: "r0", host: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), gpu: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}})
	cq := &strata.ClusterQueue{}
	cq.Name = "q0"
	cq.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, gpu},
		Flavors: []strata.FlavorQuotas{{Name: "f", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("100")}, {Name: gpu, NominalQuota: resource.MustParse("4")}}}}}}
	cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	books := queue.NewBooks([]*strata.ClusterQueue{cq})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := []preemption.Workload{
		{Key: types.NamespacedName{Namespace: "ns", Name: "c"}, Queue: "q0", Priority: 0, AdmittedAt: base, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		{Key: types.NamespacedName{Namespace: "ns", Name: "g"}, Queue: "q0", Priority: 10, AdmittedAt: base,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("4")}},
	}
	var held []tas.Held
	var usages []tas.Usage
	for _, w := range running {
		books.Charge("q0", "f", w.Requests, 1)
		s.AddUsage("n0", w.Requests, 1)
		held = append(held, tas.Held{Queue: "q0", Priority: w.Priority, Usage: tas.Usage{"n0": w.Requests}, Requests: w.Requests, AdmittedAt: base, Key: w.Key.String()})
		usages = append(usages, tas.Usage{"n0": w.Requests})
	}
	wl := testutil.MakeWorkload("w", "default").PodSets(testutil.MakePodSet("main", 1, gpu, "4", "cpu", "1").Obj()).Obj()
	need := queue.WorkloadRequests(wl)
	v := preemption.VictimQueues([]*strata.ClusterQueue{cq})
	st, err := s.CapturePreemptible(nil, held, tas.Victims{Within: v.Within}).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = 1
	scopes := ScopesFor(cq, "f", need, 100, books, false)
	choice, why := p.DecidePreemption(wl, []string{"f"}, []*Target{target(t, "w", "f", &st)}, everywhere(100), func(*Target) []PreemptionScope { return scopes },
		func(_ *Target, freed map[string]corev1.ResourceList, nominal bool) string {
			w, _ := QuotaShort(books, "q0", "f", need, freed, nominal)
			return w
		})
	if choice == nil {
		t.Fatalf("the hub does not mark the copy: %s", why)
	}
	if diff := cmp.Diff([]any{int32(10), int32(1), []string{"q0"}}, []any{choice.UpTo, choice.Workloads, choice.Queues}); diff != "" {
		t.Errorf("choice (-want +got) [upTo, workloads, queues]:\n%s", diff)
	}
	var cands []preemption.Workload
	var candUsages []tas.Usage
	for i, w := range running {
		if w.Priority <= choice.UpTo {
			cands, candUsages = append(cands, w), append(candUsages, usages[i])
		}
	}
	capacity := &preemption.SnapshotCapacity{Snap: s, Usages: candUsages, Place: func(sn *tas.Snapshot) ([]tas.Usage, error) {
		_, taken, err := workload.Place(sn, "default", nil, wl, tas.Options{})
		return taken, err
	}}
	res := preemption.Find(preemption.Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "copy"}, Queue: "q0", Priority: 100, QueuedAt: base.Add(time.Hour), Requests: need},
		preemption.PolicyOf(cq), books, "f", cands, capacity)
	var victims []string
	for _, v := range res.Victims {
		victims = append(victims, v.Key.Name)
	}
	if diff := cmp.Diff([]string{"g"}, victims); diff != "" {
		t.Errorf("the agent's victims (-want +got):\n%s (%s)", diff, res.Why)
	}
}

// everywhere is a workload's priority on every target: its classes have
// the same values on the hub and every worker.
func everywhere(p int32) func(*Target) (int32, bool) {
	return func(*Target) (int32, bool) { return p, true }
}

// TestTargetPriority: a workload's priority on a worker is the value its
// class has there, as the summary lists the worker's classes; the hub's
// otherwise.
func TestTargetPriority(t *testing.T) {
	classes := []strata.SummaryPriorityClass{
		{Source: strata.PodPriorityClassSource, Name: "high", Value: 7},
		{Source: strata.WorkloadPriorityClassSource, Name: "high", Value: 5000},
	}
	cases := map[string]struct {
		name, source string
		listed       []strata.SummaryPriorityClass
		want         int32
		lacks        bool
	}{
		"a WorkloadPriorityClass the worker lists":           {name: "high", source: strata.WorkloadPriorityClassSource, listed: classes, want: 5000},
		"a PriorityClass of the same name":                   {name: "high", source: strata.PodPriorityClassSource, listed: classes, want: 7},
		"no source, written before sources: a PriorityClass": {name: "high", listed: classes, want: 7},
		"a class the worker does not have":                   {name: "urgent", source: strata.WorkloadPriorityClassSource, listed: classes, want: 100, lacks: true},
		"no class: the hub's":                                {listed: classes, want: 100},
		"no list (an older agent): the hub's value":          {name: "high", source: strata.WorkloadPriorityClassSource, want: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tas.NewSnapshot([]string{block, rack, host}, nil)
			s.SetNode(tas.Node{Name: "n0", Labels: map[string]string{block: "b0", rack: "r0", host: "n0"}, Ready: true,
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}})
			st, err := s.Summarize(math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			st.SummaryGeneration, st.PriorityClasses = 1, tc.listed
			tg := target(t, "w", "f", &st)
			wl := testutil.MakeWorkload("w", "default").Obj()
			wl.Spec.Priority = ptr.To[int32](100)
			wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource = tc.name, tc.source
			if got, ok := tg.Priority(wl); got != tc.want || ok == tc.lacks {
				t.Errorf("Priority = %d, %t; want %d, %t", got, ok, tc.want, !tc.lacks)
			}
			wantMissing := ""
			if tc.lacks {
				wantMissing = "its priority class " + tc.name + " does not exist there"
			}
			if got := tg.MissingClass(wl); got != wantMissing {
				t.Errorf("MissingClass = %q, want %q", got, wantMissing)
			}
		})
	}
}

// TestDecidePreemptionInTheWorkersTerms: two full workers whose workloads
// hold priority 10; the Job's class is worth 100 on the hub, 5 on w1 (its
// copy could preempt nothing there) and 1000 on w2. The hub chooses w2,
// though w1 comes first otherwise.
func TestDecidePreemptionInTheWorkersTerms(t *testing.T) {
	p := New(configv1beta1.Compact, tas.Options{}, 0)
	w1 := fullCluster(t, "w1", [][]int32{{10}})
	w2 := fullCluster(t, "w2", [][]int32{{10}})
	wl := testutil.MakeWorkload("w", "default").PodSets(testutil.MakePodSet("main", 1, gpu, "8").Obj()).Obj()
	wl.Spec.Priority = ptr.To[int32](100)
	values := map[string]int32{"w1": 5, "w2": 1000}
	scope := []PreemptionScope{{Queue: "cq", Within: true}}
	for _, tc := range []struct {
		name     string
		priority func(*Target) (int32, bool)
		want     string
	}{
		{name: "the hub's value everywhere", priority: everywhere(100), want: "w1"},
		{name: "each worker's value", priority: func(t *Target) (int32, bool) { return values[t.Cluster], true }, want: "w2"},
		{name: "w1 lacks the class", priority: func(t *Target) (int32, bool) { return 100, t.Cluster != "w1" }, want: "w2"},
	} {
		got, why := p.DecidePreemption(wl, []string{"f"}, []*Target{w1, w2}, tc.priority, func(*Target) []PreemptionScope { return scope }, nil)
		if got == nil {
			t.Fatalf("%s: no choice: %s", tc.name, why)
		}
		if got.Cluster != tc.want {
			t.Errorf("%s: chose %s, want %s", tc.name, got.Cluster, tc.want)
		}
	}
}
