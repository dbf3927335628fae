package tas

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// TestSummaryGivesTheAgentsAnswers checks that the hub's engine on a summary
// answers "does it fit, and in which rack" as the agent's engine does.
func TestSummaryGivesTheAgentsAnswers(t *testing.T) {
	var nodes []node
	for b := range 2 {
		for r := range 3 {
			for h := range 4 {
				nodes = append(nodes, node{fmt.Sprintf("b%d-r%d-h%d", b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), fmt.Sprint(2 + (b+r+h)%5)})
			}
		}
	}
	agent := snapshotOf([]string{block, rack, host}, nodes...)
	agent.AddUsage("b0-r0-h0", cpu("1"), 1)
	notReady := node{"b1-r2-h3", "b1", "r2", "6"}.engineNode()
	notReady.Ready = false
	agent.SetNode(notReady)

	st, err := agent.Summarize(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if st.Coarsened || st.Nodes != 23 || st.LeafLevels != 2 {
		t.Fatalf("summary: coarsened %v, nodes %d, leaf levels %d; want false, 23, 2", st.Coarsened, st.Nodes, st.LeafLevels)
	}
	hub, err := NewSnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range []Request{
		{Count: 10, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 18, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 19, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 6, PodRequests: cpu("2"), Mode: Required, Level: rack},
		{Count: 5, PodRequests: cpu("3"), Mode: Required, Level: block},
		{Count: 40, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
		{Count: 90, PodRequests: cpu("1"), Mode: Unconstrained},
		{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: host},
		{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: host},
		{Count: 12, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 3}}},
	} {
		a, aErr := agent.FindAssignment(shape, DefaultOptions())
		h, hErr := hub.FindAssignment(shape, DefaultOptions())
		if (aErr == nil) != (hErr == nil) {
			t.Errorf("%+v: agent error %v, hub error %v", shape, aErr, hErr)
			continue
		}
		if aErr != nil || shape.Mode != Required || shape.Level == host {
			continue
		}
		if a.PodCount() != h.PodCount() || h.PodCount() != shape.Count {
			t.Errorf("%+v: agent placed %d, hub %d", shape, a.PodCount(), h.PodCount())
		}
	}
}

func TestSummaryStaysInBudget(t *testing.T) {
	s := NewSnapshot([]string{block, rack, host}, nil)
	for i := range 4096 {
		name := fmt.Sprintf("node-%05d", i)
		s.SetNode(Node{
			Name:   name,
			Labels: map[string]string{block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: name},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(8000+i%997), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(1<<36+i*4099), resource.BinarySI),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Ready: true,
		})
	}
	exact, err := s.Summarize(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 64 * 1024
	st, err := s.Summarize(budget)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(st)
	if len(data) > budget || !st.Coarsened {
		t.Fatalf("summary is %d bytes (coarsened %v), want at most %d", len(data), st.Coarsened, budget)
	}
	// Never more than exists.
	for r := range st.Resources {
		if coarse, fine := totalFree(&st, r), totalFree(&exact, r); coarse > fine {
			t.Errorf("%s: coarse summary reports %d, more than the %d that exists", st.Resources[r], coarse, fine)
		}
	}
}

// totalFree is the summary's free amount of resource r over all nodes.
func totalFree(st *strata.CapacitySummaryStatus, r int) int64 {
	var n int64
	for _, d := range st.Domains {
		for i := 0; i < len(d.Free); i += 2 {
			n += st.Vectors[d.Free[i]][r] * int64(d.Free[i+1])
		}
	}
	return n
}

// TestSummaryKeepsCounts: a summary of 60,000 GPU nodes whose memory
// differs node by node fits the default budget with every GPU and pod
// count exact; only memory is rounded.
func TestSummaryKeepsCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := gpuCluster(rng, gpuClusterOptions{nodes: 60000, hostLowest: true, busy: 0.7, memoryJitter: true, notReady: 0.01})
	exact, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 512*1024 - 1024
	st, err := s.Summarize(budget)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(st); len(data) > budget {
		t.Fatalf("summary is %d bytes, budget %d", len(data), budget)
	}
	if !st.Coarsened || st.Nodes != exact.Nodes {
		t.Errorf("coarsened %v, nodes %d; want true, %d", st.Coarsened, st.Nodes, exact.Nodes)
	}
	if got := CountsUnderstated(&st); len(got) != 0 {
		t.Errorf("counts understated: %v", got)
	}
	for r, name := range st.Resources {
		coarse, fine := totalFree(&st, r), totalFree(&exact, r)
		switch {
		case coarse > fine:
			t.Errorf("%s: the summary reports %d, more than the %d that exists", name, coarse, fine)
		case isCounted(name) && coarse != fine:
			t.Errorf("%s: the summary reports %d, want exactly %d", name, coarse, fine)
		}
	}
	var names []corev1.ResourceName
	for _, u := range st.Understated {
		names = append(names, u.Name)
	}
	if diff := cmp.Diff([]corev1.ResourceName{corev1.ResourceMemory}, names); diff != "" {
		t.Errorf("understated resources (-want,+got):\n%s", diff)
	}
}

// TestSummarySaysWhenCountsGiveWay: a budget that cannot hold the counts
// exactly gives them up conservatively and says so.
func TestSummarySaysWhenCountsGiveWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := gpuCluster(rng, gpuClusterOptions{nodes: 4096, hostLowest: true, busy: 0.9})
	exact, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Summarize(20 * 1024)
	if err != nil {
		t.Fatal(err)
	}
	counts := CountsUnderstated(&st)
	if len(counts) == 0 {
		t.Fatalf("no counts understated in a summary of %d domains within 20 KiB", len(st.Domains))
	}
	for r, name := range st.Resources {
		if coarse, fine := totalFree(&st, r), totalFree(&exact, r); coarse > fine {
			t.Errorf("%s: the summary reports %d, more than the %d that exists", name, coarse, fine)
		}
	}
	for _, u := range counts {
		r := slices.Index(st.Resources, u.Name)
		if got, want := u.Amount.MilliValue(), totalFree(&exact, r)-totalFree(&st, r); got != want {
			t.Errorf("%s: understated by %d, want %d", u.Name, got, want)
		}
	}
	if _, err := s.Summarize(1024); err == nil {
		t.Error("a summary of 256 racks fit in 1 KiB")
	}
}

// TestSummarySnapshotKeepsState: placements reserved on a summary snapshot
// count against later ones, and a clone does not share them.
func TestSummarySnapshotKeepsState(t *testing.T) {
	for name, levels := range map[string][]string{"host lowest": {block, rack, host}, "rack lowest": {block, rack}} {
		t.Run(name, func(t *testing.T) {
			var nodes []node
			for r := range 2 {
				for h := range 4 {
					nodes = append(nodes, node{fmt.Sprintf("r%d-h%d", r, h), "b0", fmt.Sprintf("r%d", r), "2"})
				}
			}
			st, err := snapshotOf(levels, nodes...).Summarize(math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			hub, err := NewSnapshotFromSummary(&st)
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: rack}
			trial := hub.Clone()
			for i, want := range []string{"r0", "r1"} {
				a, err := trial.FindAssignment(req, DefaultOptions())
				if err != nil {
					t.Fatalf("placement %d: %v", i, err)
				}
				if diff := cmp.Diff([]DomainAssignment{{Values: []string{"b0", want}, Count: 8}}, a.Domains); diff != "" {
					t.Errorf("placement %d (-want,+got):\n%s", i, diff)
				}
				if _, err := trial.Commit(a, req.PodRequests); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := trial.FindAssignment(req, DefaultOptions()); err == nil {
				t.Error("a third 8-pod rack placement fits in two racks")
			}
			// The original is untouched; Release gives capacity back.
			a, err := hub.FindAssignment(req, DefaultOptions())
			if err != nil {
				t.Fatalf("the clone's reservations show in the original: %v", err)
			}
			u, err := hub.Commit(a, req.PodRequests)
			if err != nil {
				t.Fatal(err)
			}
			hub.Release(u)
			if got, err := hub.FindAssignment(req, DefaultOptions()); err != nil || !cmp.Equal(a, got) {
				t.Errorf("after Release: %v, %v; want %v", got, err, a)
			}
		})
	}
}

// TestSummaryRoundTrip: a hub snapshot summarizes to the summary it came from.
func TestSummaryRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, hostLowest := range []bool{true, false} {
		agent := gpuCluster(rng, gpuClusterOptions{nodes: 700, hostLowest: hostLowest, busy: 0.8, notReady: 0.05})
		st, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			t.Fatal(err)
		}
		again, err := hub.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		// The hub sees only schedulable nodes, so its capacity lists are
		// its free lists.
		for i := range st.Domains {
			st.Domains[i].Capacity = nil
			again.Domains[i].Capacity = nil
		}
		if diff := cmp.Diff(totalsOf(&st), totalsOf(&again)); diff != "" {
			t.Errorf("host lowest %v: totals after a round trip (-want,+got):\n%s", hostLowest, diff)
		}
	}
}

func totalsOf(st *strata.CapacitySummaryStatus) []int64 {
	out := []int64{int64(st.Nodes), int64(len(st.Domains))}
	for r := range st.Resources {
		out = append(out, totalFree(st, r))
	}
	return out
}

func TestSummaryErrors(t *testing.T) {
	good := func() *strata.CapacitySummaryStatus {
		return &strata.CapacitySummaryStatus{
			Levels: []string{rack, host}, LeafLevels: 1, Resources: []corev1.ResourceName{"cpu", "pods"},
			Vectors: []strata.ResourceVector{{8000, 110000}},
			Domains: []strata.SummaryDomain{{Values: []string{"r1"}, Free: []int32{0, 2}, Capacity: []int32{0, 2}}},
		}
	}
	cases := map[string]struct {
		mutate func(*strata.CapacitySummaryStatus)
		want   string
	}{
		"no levels":        {func(st *strata.CapacitySummaryStatus) { st.Levels = nil }, "the summary has no levels"},
		"wrong leaf level": {func(st *strata.CapacitySummaryStatus) { st.LeafLevels = 2 }, "the summary's domains cover 2 levels, want 1 for levels cloud.provider.com/topology-rack, kubernetes.io/hostname"},
		"short vector":     {func(st *strata.CapacitySummaryStatus) { st.Vectors[0] = st.Vectors[0][:1] }, "vectors[0]: 1 amounts for 2 resources"},
		"odd pairs":        {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Free = []int32{0} }, "domains[0].free: 1 numbers, want pairs of a vector position and a node count"},
		"unknown vector":   {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Free = []int32{3, 1} }, "domains[0].free[0]: vector 3 does not exist (1 vectors)"},
		"no nodes":         {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Free = []int32{0, 0} }, "domains[0]: domain [r1]: node count 0 must be positive"},
		"too many values":  {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Values = []string{"b", "r"} }, "domains[0]: domain [b r] has 2 values, want 1 (one per level [cloud.provider.com/topology-rack])"},
		"free taints for another number of pairs": {func(st *strata.CapacitySummaryStatus) { st.Domains[0].FreeTaints = []int32{0, 0} }, "domains[0].freeTaints: 2 numbers for 1 pairs of free"},
		"unknown taint set":                       {func(st *strata.CapacitySummaryStatus) { st.Domains[0].FreeTaints = []int32{1} }, "domains[0].freeTaints[0]: taint set 1 does not exist (0 taint sets, counted from 1)"},
		"empty taint set": {func(st *strata.CapacitySummaryStatus) {
			st.TaintSets = []strata.TaintSet{{}}
			st.Domains[0].FreeTaints = []int32{1}
		}, "taintSets[0] is empty"},
		"two billion nodes in one domain": {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Free = []int32{0, 2_000_000_000} },
			"domains[0].free[1]: more than 131072 nodes in the summary's free lists"},
		"too many nodes over many domains": {func(st *strata.CapacitySummaryStatus) {
			for i := range 3 {
				st.Domains = append(st.Domains, strata.SummaryDomain{Values: []string{fmt.Sprint("x", i)}, Free: []int32{0, 50_000}})
			}
		}, "domains[3].free[1]: more than 131072 nodes in the summary's free lists"},
		"too many nodes in capacity": {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Capacity = []int32{0, 1 << 20} },
			"domains[0].capacity[1]: more than 131072 nodes in the summary's capacity lists"},
		"a negative count in capacity": {func(st *strata.CapacitySummaryStatus) { st.Domains[0].Capacity = []int32{0, -1} },
			"domains[0]: domain [r1]: node count -1 must be positive"},
		"too many levels": {func(st *strata.CapacitySummaryStatus) { st.Levels = make([]string, 17) }, "levels: 17 levels, at most 16"},
		"too many taints in a set": {func(st *strata.CapacitySummaryStatus) {
			st.TaintSets = []strata.TaintSet{{Taints: make([]corev1.Taint, 33)}}
		}, "taintSets[0]: 33 taints, at most 32"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := good()
			tc.mutate(st)
			if err := ValidateSummary(st); err == nil || err.Error() != tc.want {
				t.Errorf("ValidateSummary() = %v, want %q", err, tc.want)
			}
			_, err := NewSnapshotFromSummary(st)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := NewSnapshotFromSummary(good()); err != nil {
		t.Errorf("a good summary: %v", err)
	}
}

// TestSummaryRefresh: a snapshot refreshed with a newer summary of the same
// shape answers as one built from it; another shape is refused.
func TestSummaryRefresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	opts := gpuClusterOptions{nodes: 600, hostLowest: true, busy: 0.6}
	summary := func(seed uint64, o gpuClusterOptions) *strata.CapacitySummaryStatus {
		st, err := gpuCluster(rand.New(rand.NewPCG(seed, 1)), o).Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		return &st
	}
	old, next := summary(1, opts), summary(2, opts)
	refreshed, err := NewSnapshotFromSummary(old)
	if err != nil {
		t.Fatal(err)
	}
	refreshed.AddUsage("#0", WithPod(gpuPod(8)), 1) // dropped by Refresh
	if !refreshed.Refresh(next) {
		t.Fatal("Refresh refused a summary of the same shape")
	}
	sameAnswers := func(next *strata.CapacitySummaryStatus) {
		t.Helper()
		built, err := NewSnapshotFromSummary(next)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			reqs := randomRequests(rng, []string{block, rack, host})
			req := reqs[len(reqs)-1]
			req.PodRequests = gpuPod(int64(1 + rng.IntN(8)))
			a, aErr := built.FindAssignment(req, DefaultOptions())
			b, bErr := refreshed.FindAssignment(req, DefaultOptions())
			if (aErr == nil) != (bErr == nil) || !cmp.Equal(a, b) {
				t.Fatalf("request %d %+v: built %v, %v; refreshed %v, %v", i, req, a, aErr, b, bErr)
			}
		}
	}
	sameAnswers(next)
	// Nodes tainted since, then no longer: the same nodes, other taints.
	tainted := opts
	tainted.tainted = 0.4
	for seed, o := range []gpuClusterOptions{tainted, opts} {
		next := summary(uint64(4+seed), o)
		if o.tainted > 0 && len(next.TaintSets) == 0 {
			t.Fatal("the tainted cluster's summary has no taint sets")
		}
		if !refreshed.Refresh(next) {
			t.Fatalf("Refresh refused a summary of the same shape with tainted %v", o.tainted)
		}
		sameAnswers(next)
	}
	built, err := NewSnapshotFromSummary(next)
	if err != nil {
		t.Fatal(err)
	}
	fewer := opts
	fewer.nodes = 590
	if refreshed.Refresh(summary(3, fewer)) {
		t.Error("Refresh took a summary with fewer nodes")
	}
	clone := built.Clone()
	if built.Refresh(next) || clone.Refresh(next) {
		t.Error("Refresh changed a snapshot that shares its nodes with a clone")
	}
}

// TestSummaryTaints: nodes with NoSchedule or NoExecute taints are
// summarized with their taints, so that the hub places only pods that
// tolerate them there, and keeps its reservations of other pods off them.
func TestSummaryTaints(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	agent := snapshotOf([]string{rack, host}, node{"n1", "", "r1", "4"}, node{"n2", "", "r1", "4"}, node{"n3", "", "r1", "4"})
	for name, taints := range map[string][]corev1.Taint{
		"n2": {gpuTaint, {Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{}}},
		"n3": {{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
	} {
		n := node{name, "", "r1", "4"}.engineNode()
		n.Taints = taints
		agent.SetNode(n)
	}
	st, err := agent.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]strata.TaintSet{{Taints: []corev1.Taint{gpuTaint}}}, st.TaintSets); diff != "" {
		t.Errorf("taint sets (-want,+got):\n%s", diff)
	}
	// n1 and n3 (a soft taint keeps no pod away) in one bucket, n2 alone.
	if diff := cmp.Diff([]strata.SummaryDomain{{Values: []string{"r1"}, Free: []int32{0, 2, 0, 1}, FreeTaints: []int32{0, 1}, Capacity: []int32{0, 3}}}, st.Domains); diff != "" {
		t.Errorf("domains (-want,+got):\n%s", diff)
	}
	hub, err := NewSnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	tolerating := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	request := func(count int32, tol []corev1.Toleration) Request {
		return Request{Count: count, PodRequests: cpu("1"), Mode: Required, Level: rack, Tolerations: tol}
	}
	fits := func(s *Snapshot, r Request) bool {
		_, err := s.FindAssignment(r, DefaultOptions())
		return err == nil
	}
	for _, s := range []*Snapshot{agent, hub} {
		if !fits(s, request(8, nil)) || fits(s, request(9, nil)) || !fits(s, request(12, tolerating)) {
			t.Errorf("summary %t: 8 pods that do not tolerate the taint fit, 9 do not, 12 that do fit: got %t, %t, %t",
				s.summary, fits(s, request(8, nil)), fits(s, request(9, nil)), fits(s, request(12, tolerating)))
		}
	}
	// The flavor's tolerations (which every pod of it gets) leave the taint
	// out: n2 is like the others.
	c := agent.Capture()
	c.Tolerate([]corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}})
	tolerated, err := c.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]strata.SummaryDomain{{Values: []string{"r1"}, Free: []int32{0, 3}, Capacity: []int32{0, 3}}}, tolerated.Domains); diff != "" || tolerated.TaintSets != nil {
		t.Errorf("with the flavor's tolerations: taint sets %v, domains (-want,+got):\n%s", tolerated.TaintSets, diff)
	}

	// A reservation of pods that do not tolerate the taint stays off n2.
	a, err := hub.FindAssignment(request(2, nil), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hub.CommitReservation(a, cpu("1")); err != nil {
		t.Fatal(err)
	}
	if fits(hub, request(7, nil)) || !fits(hub, request(6, nil)) || !fits(hub, request(4, tolerating)) || fits(hub, request(11, tolerating)) {
		t.Errorf("after reserving 2 pods off n2: 7 more that do not tolerate fit %t (want false), 6 %t, 4 that tolerate %t, 11 %t (want false)",
			fits(hub, request(7, nil)), fits(hub, request(6, nil)), fits(hub, request(4, tolerating)), fits(hub, request(11, tolerating)))
	}
}

// TestSummaryTaintSetsBounded: nodes with unique taint values (an
// autoscaler's deletion marks) make as many taint sets as nodes; beyond
// the API's 64, the nodes whose sets cannot be listed are left out of the
// free capacity rather than listed without their taints.
func TestSummaryTaintSetsBounded(t *testing.T) {
	var nodes []node
	for i := range 70 {
		nodes = append(nodes, node{fmt.Sprintf("n%02d", i), "", "r1", "4"})
	}
	s := snapshotOf([]string{rack, host}, nodes...)
	for i := range 70 {
		n := nodes[i].engineNode()
		n.Taints = []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Value: fmt.Sprint(1700000000 + i), Effect: corev1.TaintEffectNoSchedule}}
		s.SetNode(n)
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.TaintSets) != 64 || st.Nodes != 64 {
		t.Errorf("%d taint sets, %d nodes in the free capacity; want 64 and 64", len(st.TaintSets), st.Nodes)
	}
	if _, err := NewSnapshotFromSummary(&st); err != nil {
		t.Errorf("the summary does not decode: %v", err)
	}
}

// FuzzSummarySnapshot: whatever a worker writes into a summary, reading it
// never panics nor takes unbounded memory, and what reads places.
func FuzzSummarySnapshot(f *testing.F) {
	f.Add([]byte(`{"levels":["r","kubernetes.io/hostname"],"leafLevels":1,"resources":["cpu"],"vectors":[[8000]],"domains":[{"values":["r1"],"free":[0,2],"capacity":[0,2]}]}`))
	f.Add([]byte(`{"levels":["b","r"],"leafLevels":2,"resources":["cpu","pods"],"vectors":[[8000,110000],[0,0]],"taintSets":[{"taints":[{"key":"k","effect":"NoSchedule"}]}],"domains":[{"values":["b1","r1"],"free":[0,2,1,1],"freeTaints":[0,1],"capacity":[0,3]}]}`))
	f.Add([]byte(`{"levels":["r"],"leafLevels":1,"resources":["cpu"],"vectors":[[1]],"domains":[{"values":["r1"],"free":[0,2000000000]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st strata.CapacitySummaryStatus
		if json.Unmarshal(data, &st) != nil {
			return
		}
		s, err := NewSnapshotFromSummary(&st)
		if err != nil {
			return
		}
		if n := s.NodeCount(); n > MaxSummaryNodes {
			t.Fatalf("%d nodes expanded, more than %d", n, MaxSummaryNodes)
		}
		_, _ = s.FindAssignment(Request{Count: 3, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}, DefaultOptions())
		if _, err := NewEmptySnapshotFromSummary(&st); err != nil {
			return
		}
		s.Refresh(&st)
	})
}

// TestSummaryLeavesOutResourcesNoNodeHas: a resource only a pod on
// another flavor's node requests is not a column of the summary (the API
// takes at most 32), and to the hub there is none of it.
func TestSummaryLeavesOutResourcesNoNodeHas(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"h0", "b0", "r0", "4"}, node{"h1", "b0", "r0", "4"})
	for i := range 40 {
		widget := corev1.ResourceName(fmt.Sprintf("example.com/widget-%d", i))
		s.AddUsage("elsewhere", corev1.ResourceList{widget: resource.MustParse("1")}, 1)
	}
	st, err := s.Summarize(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.ResourceName{corev1.ResourceCPU, PodsResource}, st.Resources, cmpopts.SortSlices(func(a, b corev1.ResourceName) bool { return a < b })); diff != "" {
		t.Errorf("resources (-want,+got):\n%s", diff)
	}
	for i, v := range st.Vectors {
		if len(v) != len(st.Resources) {
			t.Errorf("vector %d has %d amounts for %d resources", i, len(v), len(st.Resources))
		}
	}
	hub, err := NewSnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hub.FindAssignment(Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack}, DefaultOptions()); err != nil {
		t.Errorf("cpu: %v", err)
	}
	if _, err := hub.FindAssignment(Request{Count: 1, PodRequests: corev1.ResourceList{"example.com/widget-0": resource.MustParse("1")}, Mode: Required, Level: rack}, DefaultOptions()); err == nil {
		t.Errorf("a widget fits, though no node has one")
	}
}

// TestSummaryToleratedTaintsBeforeTheBound: the flavor's tolerations apply
// before taint sets are counted: 100 nodes with a distinct value of a
// tolerated taint are all free capacity, not 64 of them.
func TestSummaryToleratedTaintsBeforeTheBound(t *testing.T) {
	var nodes []node
	for i := range 100 {
		nodes = append(nodes, node{fmt.Sprintf("n%03d", i), "", "r1", "4"})
	}
	s := snapshotOf([]string{rack, host}, nodes...)
	for i := range 100 {
		n := nodes[i].engineNode()
		n.Taints = []corev1.Taint{{Key: "maintenance-window", Value: fmt.Sprint(i), Effect: corev1.TaintEffectNoSchedule}}
		s.SetNode(n)
	}
	st, err := s.CaptureForFlavor([]corev1.Toleration{{Key: "maintenance-window", Operator: corev1.TolerationOpExists}}).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.TaintSets) != 0 || st.Nodes != 100 {
		t.Errorf("%d taint sets, %d nodes in the free capacity; want 0 and 100", len(st.TaintSets), st.Nodes)
	}
}

// TestSummaryOfNoNodes: a flavor without nodes (yet) is summarized, with
// its resources, and without a column less.
func TestSummaryOfNoNodes(t *testing.T) {
	s := snapshotOf([]string{rack, host})
	s.AddUsage("elsewhere", cpu("1"), 1)
	done := make(chan struct{})
	var st strata.CapacitySummaryStatus
	var err error
	go func() {
		defer close(done)
		st, err = s.Summarize(1 << 20)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Summarize of no nodes does not return")
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes != 0 || len(st.Domains) != 0 || len(st.Resources) == 0 {
		t.Errorf("nodes %d, domains %v, resources %v; want 0, none, some", st.Nodes, st.Domains, st.Resources)
	}
}
