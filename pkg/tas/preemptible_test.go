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

	strata "strata.dev/strata/api/v1beta1"
)

// randomHeld adds running workloads to a generated cluster: each of a
// random queue and priority, holding CPUs (and GPUs) on one to three
// nodes. It returns them as the agent's cache would.
func randomHeld(rng *rand.Rand, s *Snapshot) []Held {
	var names []string
	for _, l := range s.orderedLeaves() {
		for _, b := range l.bins {
			if b.node != nil {
				names = append(names, b.node.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	var held []Held
	for range rng.IntN(2 * len(names)) {
		h := Held{Queue: []string{"a", "b"}[rng.IntN(2)], Priority: []int32{-5, 0, 10, 100, 1000}[rng.IntN(5)], Usage: Usage{}}
		for range 1 + rng.IntN(3) {
			n := names[rng.IntN(len(names))]
			rl := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(1+rng.IntN(2)), resource.DecimalSI)}
			if rng.IntN(3) == 0 {
				rl[gpu] = *resource.NewQuantity(int64(1+rng.IntN(4)), resource.DecimalSI)
			}
			h.Usage[n] = rl
		}
		h.Requests = corev1.ResourceList{}
		for n, rl := range h.Usage {
			s.AddUsage(n, rl, 1)
			addTo(h.Requests, rl)
		}
		held = append(held, h)
	}
	return held
}

// TestHubAnswersAsTheAgentAfterPreempting: on generated clusters with
// running workloads of random queues and priorities, the hub's answer on
// a summary's preemptible capacity — "fits once the queue's workloads of
// priority below P are preempted" — is the agent's on its own nodes with
// exactly those workloads released: same fit or no fit, same leaf domains
// and counts. The summary leaves the agent's snapshot as it found it.
func TestHubAnswersAsTheAgentAfterPreempting(t *testing.T) {
	const clusters, requestsPerCluster = 300, 8
	fits, misses, helped := 0, 0, 0
	for seed := range uint64(clusters) {
		rng := rand.New(rand.NewPCG(seed, 11))
		agent, levels := randomCluster(rng)
		held := randomHeld(rng, agent)
		before, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		st, err := agent.CapturePreemptible(nil, held, WithinAll(held)).Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		after, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Fatalf("seed %d: CapturePreemptible changed the snapshot (-before,+after):\n%s", seed, diff)
		}
		for i := range requestsPerCluster {
			reqs := randomRequests(rng, levels)
			o := randomOptions(rng)
			q := []string{"a", "b"}[rng.IntN(2)]
			p := []int32{0, 50, 500, 5000}[rng.IntN(4)]
			name := fmt.Sprintf("seed %d request %d: queue %s priority %d: %s with %+v", seed, i, q, p, describe(reqs), o)
			// The hub: the entry of q with the highest priority below p.
			entry := -1
			for k, e := range st.Preemptible {
				if e.ClusterQueue == q && e.Holding == "" && e.Priority < p {
					entry = k
				}
			}
			view := &st
			if entry >= 0 {
				if view, err = PreemptibleStatus(&st, entry); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			hub, err := NewSnapshotFromSummary(view)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// The agent: those workloads released.
			var released []Usage
			for _, h := range held {
				if h.Queue == q && h.Priority < p {
					agent.Release(h.Usage)
					released = append(released, h.Usage)
				}
			}
			want, wantErr := agent.FindGroupAssignment(reqs, o)
			got, gotErr := hub.FindGroupAssignment(reqs, o)
			for _, u := range released {
				for n, rl := range u {
					agent.AddUsage(n, rl, 1)
				}
			}
			if (wantErr == nil) != (gotErr == nil) {
				t.Errorf("%s: agent error %v, hub error %v", name, wantErr, gotErr)
				continue
			}
			if wantErr != nil {
				misses++
				continue
			}
			fits++
			if len(released) > 0 {
				helped++
			}
			for j := range want {
				if diff := cmp.Diff(projectAgent(agent, want[j]), got[j], cmpopts.IgnoreFields(Assignment{}, "Tolerations", "NodeSelector", "NodeAffinity")); diff != "" {
					t.Errorf("%s: pod set %d (-agent,+hub):\n%s", name, j, diff)
				}
			}
		}
	}
	if total := fits + misses; fits < total/5 || misses < total/10 || helped < fits/5 {
		t.Errorf("%d of %d requests fit, %d with workloads released: the generated cases do not cover enough", fits, total, helped)
	}
	t.Logf("%d requests fit (%d with workloads released), %d did not", fits, helped, misses)
}

// TestPreemptibleCapacity: entries per queue and priority, cumulative,
// listing only the domains that change; left out in order when the
// budget is short.
func TestPreemptibleCapacity(t *testing.T) {
	s, use := threeNodes()
	quota := func(c string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c)}
	}
	held := []Held{
		{Queue: "b", Priority: 5, Usage: use("n2", "4"), Requests: quota("4")},
		{Queue: "a", Priority: 10, Usage: use("n0", "2"), Requests: quota("2")},
		{Queue: "a", Priority: 1, Usage: use("n1", "1"), Requests: quota("1")},
		{Queue: "a", Priority: 10, Usage: use("n1", "1"), Requests: quota("1")},
	}
	st, err := s.CapturePreemptible(nil, held, WithinAll(held)).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Queue     string
		Priority  int32
		Workloads int32
		CPUs      int64 // the quota the band's workloads hold
		Domains   []int32
		Free      [][]int64 // per listed domain, the free CPUs of its pairs' vectors
	}
	summarize := func(st strata.CapacitySummaryStatus) []entry {
		var out []entry
		for _, e := range st.Preemptible {
			got := entry{Queue: e.ClusterQueue, Priority: e.Priority, Workloads: e.Workloads, CPUs: e.Requests.Cpu().Value()}
			for _, d := range e.Domains {
				got.Domains = append(got.Domains, d.Index)
				var free []int64
				for k := 0; k < len(d.Free); k += 2 {
					for range d.Free[k+1] {
						free = append(free, st.Vectors[d.Free[k]][0]/1000)
					}
				}
				got.Free = append(got.Free, free)
			}
			out = append(out, got)
		}
		return out
	}
	if st.Resources[0] != corev1.ResourceCPU {
		t.Fatalf("resources %v: the test reads cpu first", st.Resources)
	}
	want := []entry{
		{Queue: "a", Priority: 1, Workloads: 1, CPUs: 1, Domains: []int32{0}, Free: [][]int64{{2, 3}}},
		{Queue: "b", Priority: 5, Workloads: 1, CPUs: 4, Domains: []int32{1}, Free: [][]int64{{4}}},
		{Queue: "a", Priority: 10, Workloads: 3, CPUs: 4, Domains: []int32{0}, Free: [][]int64{{4, 4}}},
	}
	if diff := cmp.Diff(want, summarize(st)); diff != "" {
		t.Errorf("preemptible (-want,+got):\n%s", diff)
	}
	// A budget that holds the summary and one entry.
	plain, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(plain)
	budget := len(data) + 200
	one, err := s.CapturePreemptible(nil, held, WithinAll(held)).Summarize(budget)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:1], summarize(one)); diff != "" {
		t.Errorf("preemptible within a short budget (-want,+got):\n%s", diff)
	}
	if data, _ := json.Marshal(one); len(data) > budget {
		t.Errorf("the summary takes %d bytes", len(data))
	}
	// A view with a bad index is refused.
	bad := st.DeepCopy()
	bad.Preemptible[0].Domains[0].Index = 7
	if _, err := PreemptibleStatus(bad, 0); err == nil {
		t.Errorf("PreemptibleStatus accepted a domain index beyond the domains")
	}
}

// TestPreemptibleBandsShared: the entries' bound is shared among the
// queues, each keeping bands from its lowest priority to its highest.
func TestPreemptibleBandsShared(t *testing.T) {
	cases := map[string]struct {
		counts []int
		want   []int
	}{
		"all fit":                       {counts: []int{3, 5}, want: []int{3, 5}},
		"equal shares":                  {counts: []int{40, 40}, want: []int{16, 16}},
		"a small queue leaves the rest": {counts: []int{2, 50, 40}, want: []int{2, 15, 15}},
		"more queues than bands":        {counts: []int{1, 1, 1}, want: []int{1, 1, 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bandsPerQueue(tc.counts, MaxPreemptible)); diff != "" {
				t.Errorf("bandsPerQueue (-want,+got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]int32{1, 4, 7, 10}, spreadBands([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4)); diff != "" {
		t.Errorf("spreadBands (-want,+got):\n%s", diff)
	}

	// Two queues of 40 priorities each on one node: 16 bands each, where
	// the first queue took all 32 before.
	s := NewSnapshot([]string{rack, host}, nil)
	s.SetNode(Node{Name: "n0", Labels: map[string]string{rack: "r0", host: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourcePods: resource.MustParse("110")}})
	var held []Held
	for _, q := range []string{"a", "b"} {
		for p := range int32(40) {
			u := Usage{"n0": {corev1.ResourceCPU: resource.MustParse("1")}}
			s.AddUsage("n0", u["n0"], 1)
			held = append(held, Held{Queue: q, Priority: p, Usage: u, Requests: u["n0"]})
		}
	}
	st, err := s.CapturePreemptible(nil, held, WithinAll(held)).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string][]int32{}
	for _, e := range st.Preemptible {
		per[e.ClusterQueue] = append(per[e.ClusterQueue], e.Priority)
	}
	for _, q := range []string{"a", "b"} {
		if got := per[q]; len(got) != 16 || got[0] != 0 || got[15] != 39 {
			t.Errorf("queue %s: bands %v, want 16 from priority 0 to 39", q, got)
		}
	}
	// A budget for a few entries: each queue keeps its lowest band, where
	// the queue last by name kept none.
	plain, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(plain)
	few, err := s.CapturePreemptible(nil, held, WithinAll(held)).Summarize(len(data) + 400)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]int32{}
	for _, e := range few.Preemptible {
		if _, ok := kept[e.ClusterQueue]; !ok {
			kept[e.ClusterQueue] = e.Priority
		}
	}
	if diff := cmp.Diff(map[string]int32{"a": 0, "b": 0}, kept); diff != "" || len(few.Preemptible) >= 32 {
		t.Errorf("%d entries within the budget; lowest band kept per queue (-want,+got):\n%s", len(few.Preemptible), diff)
	}
}

// TestReclaimBands: what the agent's search takes back from a queue that
// borrows, for a cohort peer: its workloads in Kueue's order (lower
// priority, then the most recently admitted, first), a band at each
// priority, and none after the queue stops borrowing what it borrows now.
func TestReclaimBands(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	both := func(c, m string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c), corev1.ResourceMemory: resource.MustParse(m)}
	}
	at := func(s int) time.Time { return time.Date(2026, 11, 30, 0, 0, s, 0, time.UTC) }
	type band struct {
		Priority, Workloads int32
		Requests            string
		First               string // the first workload taken
	}
	cases := map[string]struct {
		held     []Held
		borrowed corev1.ResourceList
		want     []band
	}{
		"borrows nothing": {
			held: []Held{{Key: "a", Priority: 1, Requests: cpus("1")}},
		},
		"a band per priority while it borrows": {
			held: []Held{
				{Key: "hi", Priority: 100, Requests: cpus("1")},
				{Key: "lo", Priority: 1, Requests: cpus("1")},
				{Key: "mid", Priority: 50, Requests: cpus("1")},
			},
			borrowed: cpus("5"),
			want: []band{{Priority: 1, Workloads: 1, Requests: "1", First: "lo"}, {Priority: 50, Workloads: 2, Requests: "2", First: "lo"},
				{Priority: 100, Workloads: 3, Requests: "3", First: "lo"}},
		},
		"the last band ends where it stops borrowing, and may give back more": {
			held: []Held{
				{Key: "old", Priority: 1, AdmittedAt: at(1), Requests: cpus("3")},
				{Key: "new", Priority: 1, AdmittedAt: at(2), Requests: cpus("1")},
				{Key: "later", Priority: 5, Requests: cpus("1")},
			},
			borrowed: cpus("2"),
			want:     []band{{Priority: 1, Workloads: 2, Requests: "4", First: "new"}},
		},
		"on two resources, it ends where the first is given back": {
			held: []Held{
				{Key: "a", Priority: 1, Requests: both("2", "1Gi")},
				{Key: "b", Priority: 2, Requests: both("2", "1Gi")},
				{Key: "c", Priority: 3, Requests: both("2", "1Gi")},
			},
			borrowed: both("6", "2Gi"),
			want:     []band{{Priority: 1, Workloads: 1, Requests: "2", First: "a"}, {Priority: 2, Workloads: 2, Requests: "4", First: "a"}},
		},
		"admitted at the same time: by key, as the agent's search": {
			held: []Held{
				{Key: "ns/b", Priority: 1, AdmittedAt: at(1), Requests: cpus("3")},
				{Key: "ns/a", Priority: 1, AdmittedAt: at(1), Requests: cpus("1")},
			},
			borrowed: cpus("1"),
			want:     []band{{Priority: 1, Workloads: 1, Requests: "1", First: "ns/a"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			held := slices.Clone(tc.held)
			var got []band
			for _, b := range ReclaimBands(held, tc.borrowed) {
				got = append(got, band{Priority: b.Priority, Workloads: b.Workloads, Requests: b.Requests.Cpu().String(), First: held[0].Key})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReclaimBands (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreemptibleReclaimEntries: a queue that preempts within itself and
// borrows gets both kinds of entries, the reclaim ones marked; and a view
// of entries together takes, where both list a domain, the first's.
func TestPreemptibleReclaimEntries(t *testing.T) {
	s, use := threeNodes()
	cpus := func(c string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c)}
	}
	held := []Held{
		{Queue: "a", Key: "a1", Priority: 1, Usage: use("n0", "4"), Requests: cpus("4")},
		{Queue: "a", Key: "a2", Priority: 9, Usage: use("n2", "4"), Requests: cpus("4")},
		{Queue: "b", Key: "b1", Priority: 1, Usage: use("n1", "4"), Requests: cpus("4")},
	}
	st, err := s.CapturePreemptible(nil, held, Victims{Within: map[string]bool{"a": true}, Borrowed: map[string]corev1.ResourceList{"a": cpus("2"), "b": cpus("8")}}).Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Queue               string
		Priority, Workloads int32
		Reclaim             bool
	}
	var got []entry
	for _, e := range st.Preemptible {
		got = append(got, entry{e.ClusterQueue, e.Priority, e.Workloads, e.Reclaim})
	}
	want := []entry{{"a", 1, 1, false}, {"a", 1, 1, true}, {"b", 1, 1, true}, {"a", 9, 2, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want,+got):\n%s", diff)
	}
	// a's first band frees n0, b's n1, both in r0 (one domain): together
	// the view takes the first's there.
	view, err := PreemptibleStatus(&st, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	first, err := PreemptibleStatus(&st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.Domains, view.Domains); diff != "" {
		t.Errorf("two bands on one domain: the view is not the first's (-first,+view):\n%s", diff)
	}
	// a's last band frees n0 and n2 (r0 and r1): with b's, r1 is a's and r0
	// the first listed.
	view, err = PreemptibleStatus(&st, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := PreemptibleStatus(&st, 3)
	bOnly, _ := PreemptibleStatus(&st, 2)
	if diff := cmp.Diff(bOnly.Domains[0], view.Domains[0]); diff != "" {
		t.Errorf("r0: not b's band's (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(last.Domains[1], view.Domains[1]); diff != "" {
		t.Errorf("r1: not a's band's (-want,+got):\n%s", diff)
	}
}

// threeNodes is a snapshot of nodes n0 and n1 in rack r0 and n2 in r1, of
// 4 CPUs each, and use, which has a workload take CPUs of a node.
func threeNodes() (*Snapshot, func(node, cpus string) Usage) {
	s := NewSnapshot([]string{rack, host}, nil)
	for i, r := range []string{"r0", "r0", "r1"} {
		name := fmt.Sprintf("n%d", i)
		s.SetNode(Node{Name: name, Labels: map[string]string{rack: r, host: name}, Ready: true,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}})
	}
	return s, func(node, c string) Usage {
		u := Usage{node: {corev1.ResourceCPU: resource.MustParse(c)}}
		s.AddUsage(node, u[node], 1)
		return u
	}
}

// TestQueueSeries: a queue's series of bands, one of all its workloads
// and, where they do not all hold the same resources, one per resource of
// those holding it; a series listing the same workloads as one before it
// only adds its resources to that one.
func TestQueueSeries(t *testing.T) {
	rl := func(cpu, gpus string) corev1.ResourceList {
		out := corev1.ResourceList{}
		if cpu != "" {
			out[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if gpus != "" {
			out[gpu] = resource.MustParse(gpus)
		}
		return out
	}
	at := func(s int) time.Time { return time.Date(2026, 11, 30, 0, 0, s, 0, time.UTC) }
	type band struct {
		Priority, Workloads int32
		Resources           []corev1.ResourceName
		Keys                []string
	}
	type series struct {
		Queue   string
		Reclaim bool
		Holding corev1.ResourceName
		Bands   []band
	}
	cpuGPU := []corev1.ResourceName{corev1.ResourceCPU, gpu}
	cases := map[string]struct {
		held    []Held
		victims Victims
		want    []series
	}{
		"the same resources: one series": {
			held: []Held{
				{Queue: "q", Key: "a", Priority: 0, Requests: rl("1", "1")},
				{Queue: "q", Key: "b", Priority: 10, Requests: rl("2", "1")},
			},
			victims: Victims{Within: map[string]bool{"q": true}},
			want: []series{{Queue: "q", Bands: []band{
				{Priority: 0, Workloads: 1, Resources: cpuGPU, Keys: []string{"a"}},
				{Priority: 10, Workloads: 2, Resources: cpuGPU, Keys: []string{"a", "b"}},
			}}},
		},
		"CPU-only work below GPU work: a series of those holding GPUs": {
			held: []Held{
				{Queue: "q", Key: "cpu", Priority: 0, Requests: rl("4", "")},
				{Queue: "q", Key: "g0", Priority: 0, Requests: rl("1", "2")},
				{Queue: "q", Key: "g10", Priority: 10, Requests: rl("1", "2")},
			},
			victims: Victims{Within: map[string]bool{"q": true}},
			want: []series{
				{Queue: "q", Bands: []band{
					{Priority: 0, Workloads: 2, Resources: []corev1.ResourceName{corev1.ResourceCPU}, Keys: []string{"cpu", "g0"}},
					{Priority: 10, Workloads: 3, Resources: []corev1.ResourceName{corev1.ResourceCPU}, Keys: []string{"cpu", "g0", "g10"}},
				}},
				{Queue: "q", Holding: gpu, Bands: []band{
					{Priority: 0, Workloads: 1, Resources: cpuGPU, Keys: []string{"g0"}},
					{Priority: 10, Workloads: 2, Resources: cpuGPU, Keys: []string{"g0", "g10"}},
				}},
			},
		},
		"GPU-only and CPU-only work: the series of all ends at once, one per resource": {
			held: []Held{
				{Queue: "q", Key: "c", Priority: 0, Requests: rl("4", "")},
				{Queue: "q", Key: "g", Priority: 5, Requests: rl("", "2")},
			},
			victims: Victims{Within: map[string]bool{"q": true}},
			want: []series{
				{Queue: "q", Bands: []band{{Priority: 0, Workloads: 1, Resources: []corev1.ResourceName{corev1.ResourceCPU}, Keys: []string{"c"}}}},
				{Queue: "q", Holding: gpu, Bands: []band{{Priority: 5, Workloads: 1, Resources: []corev1.ResourceName{gpu}, Keys: []string{"g"}}}},
			},
		},
		"a borrower of two resources: a reclaim series per resource, each while it borrows that one": {
			held: []Held{
				{Queue: "b", Key: "old", Priority: 0, AdmittedAt: at(1), Requests: rl("2", "2")},
				{Queue: "b", Key: "new", Priority: 0, AdmittedAt: at(2), Requests: rl("1", "2")},
			},
			victims: Victims{Borrowed: map[string]corev1.ResourceList{"b": rl("1", "4")}},
			want: []series{
				// Ends where it stops borrowing CPUs; the series of CPUs
				// is the same and is not listed twice.
				{Queue: "b", Reclaim: true, Bands: []band{{Priority: 0, Workloads: 1, Resources: cpuGPU, Keys: []string{"new"}}}},
				{Queue: "b", Reclaim: true, Holding: gpu, Bands: []band{{Priority: 0, Workloads: 2, Resources: []corev1.ResourceName{gpu}, Keys: []string{"new", "old"}}}},
			},
		},
		"a borrower of one resource every workload holds: one series": {
			held: []Held{
				{Queue: "b", Key: "x", Priority: 0, Requests: rl("1", "1")},
			},
			victims: Victims{Borrowed: map[string]corev1.ResourceList{"b": rl("1", "")}},
			want:    []series{{Queue: "b", Reclaim: true, Bands: []band{{Priority: 0, Workloads: 1, Resources: []corev1.ResourceName{corev1.ResourceCPU}, Keys: []string{"x"}}}}},
		},
		"queues neither within nor reclaimed from: none": {
			held: []Held{{Queue: "z", Key: "x", Requests: rl("1", "")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []series
			for _, s := range QueueSeries(tc.held, tc.victims) {
				out := series{Queue: s.Queue, Reclaim: s.Reclaim, Holding: s.Holding}
				for _, b := range s.Bands {
					var keys []string
					for _, h := range s.Held[:b.Workloads] {
						keys = append(keys, h.Key)
					}
					out.Bands = append(out.Bands, band{Priority: b.Priority, Workloads: b.Workloads, Resources: b.Resources, Keys: keys})
				}
				got = append(got, out)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("series (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSeriesShares: the entries' limit is shared among queues first, then
// among a queue's series (the series of all its workloads first), so that
// a queue with series per resource does not crowd others out.
func TestSeriesShares(t *testing.T) {
	bands := func(n int) []Band { return make([]Band, n) }
	series := []Series{
		{Queue: "a", Bands: bands(3)},
		{Queue: "a", Holding: gpu, Bands: bands(3)},
		{Queue: "b", Bands: bands(3)},
		{Queue: "b", Reclaim: true, Bands: bands(1)},
	}
	for limit, want := range map[int][]int{
		3:  {1, 0, 1, 1},
		4:  {1, 1, 1, 1},
		32: {3, 3, 3, 1},
	} {
		if diff := cmp.Diff(want, seriesShares(series, limit)); diff != "" {
			t.Errorf("limit %d (-want,+got):\n%s", limit, diff)
		}
	}
}
