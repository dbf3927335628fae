package replay

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
)

// cluster is a flavor of one block of racks of 8-GPU hosts; busy[r][h]
// GPUs are in use on host h of rack r.
func cluster(t testing.TB, name string, busy [][]int64) Cluster {
	s := tas.NewSnapshot([]string{block, rack, strata.HostnameLabel}, nil)
	for r, hosts := range busy {
		for h, used := range hosts {
			node := fmt.Sprintf("%s-r%d-h%d", name, r, h)
			s.SetNode(tas.Node{Name: node, Ready: true, Allocatable: corev1.ResourceList{
				GPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
			}, Labels: map[string]string{block: "b0", rack: fmt.Sprintf("r%d", r), strata.HostnameLabel: node}})
			if used > 0 {
				s.AddUsage(node, tas.WithPod(corev1.ResourceList{GPU: *resource.NewQuantity(used, resource.DecimalSI)}), 1)
			}
		}
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	return Cluster{Name: name, Flavor: "gpu", Topology: "default", Summary: &st}
}

// outcome is what the tests compare of a Result.
type outcome struct {
	Started, Never                 int
	MeanWait, P90Wait, Makespan    float64
	Required, RequiredFragmented   int
	PreferredStarted, PreferredOne int
}

func outcomeOf(r *Result) outcome {
	return outcome{r.Started, r.Never, r.MeanWait, r.P90Wait, r.Makespan, r.Required, r.RequiredFragmented, r.PreferredStarted, r.PreferredOneDomain}
}

func rackJob(name string, arrival float64, pods int32, mode string) Job {
	return Job{Name: name, Arrival: arrival, Duration: 100, Pods: pods, GPUsPerPod: 8, Mode: mode, Level: "rack"}
}

// TestPolicies replays, under each policy, four rack-required Jobs of 8
// GPUs per pod arriving at once on two clusters: a, 2 racks of 2 empty
// hosts; b, the same with one host of rack r1 busy. j1 is one pod, j2–j4
// two (a whole rack).
//
//   - compact puts j1 on b's half-busy rack (the tightest: room for none
//     more), which leaves a whole rack for each of j2, j3 (a) and j4 (b):
//     nobody waits.
//   - spread puts j1 where the most room is left, a rack of a (cluster
//     order breaks the tie with b's free rack); j2 takes a's other rack, j3
//     b's free rack, and j4 finds only half-racks: it waits until t=100,
//     although a and b hold 8 GPUs each (no cluster has its 16).
//   - first-fit takes a for j1 and j2, b for j3: the same as spread.
//   - no-topology sends j1 to a (32 free GPUs against b's 24), j2 to a
//     (24 against 24: the first), j3 to b (8 against 24), and j4 nowhere
//     (8 and 8): the same waits.
func TestPolicies(t *testing.T) {
	clusters := []Cluster{
		cluster(t, "a", [][]int64{{0, 0}, {0, 0}}),
		cluster(t, "b", [][]int64{{0, 0}, {8, 0}}),
	}
	trace := []Job{rackJob("j1", 0, 1, Required), rackJob("j2", 0, 2, Required), rackJob("j3", 0, 2, Required), rackJob("j4", 0, 2, Required)}
	tight := outcome{Started: 4, Makespan: 100, Required: 4}
	loose := outcome{Started: 4, MeanWait: 25, P90Wait: 100, Makespan: 200, Required: 4}
	for policy, want := range map[Policy]outcome{Compact: tight, Spread: loose, FirstFit: loose, NoTopology: loose} {
		t.Run(string(policy), func(t *testing.T) {
			r, err := Run(clusters, trace, policy, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, outcomeOf(r)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if r.TotalGPUs != 56 {
				t.Errorf("TotalGPUs = %d, want 56", r.TotalGPUs)
			}
		})
	}
}

// TestAnyFit: a one-pod Job that fits both clusters goes to either, drawn
// with the seed: the same seed gives the same replay, and over seeds both
// clusters are drawn; a Job that fits one cluster only goes there.
func TestAnyFit(t *testing.T) {
	clusters := []Cluster{cluster(t, "a", [][]int64{{0}}), cluster(t, "b", [][]int64{{0, 0}})}
	seen := map[string]int{}
	for seed := range uint64(20) {
		trace := []Job{
			{Name: "either", Duration: 10, Pods: 1, GPUsPerPod: 8},
			{Name: "only-b", Arrival: 20, Duration: 10, Pods: 2, GPUsPerPod: 8, Mode: Required, Level: "rack"},
		}
		r, err := Run(clusters, trace, AnyFit, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(outcome{Started: 2, Makespan: 30, Required: 1}, outcomeOf(r)); diff != "" {
			t.Fatalf("seed %d: outcome (-want +got):\n%s", seed, diff)
		}
		// Used GPUs right after t=0 tell nothing of where: ask the series
		// of a replay whose second Job needs b's whole rack at t=0.
		trace[1].Arrival = 0
		r, err = Run(clusters, trace, AnyFit, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if r.MeanWait == 0 {
			seen["a"]++ // either went to a: only-b started at once
		} else {
			seen["b"]++ // either took half of b's rack: only-b waited
		}
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("over 20 seeds any-fit drew %v; want both clusters", seen)
	}
}

// TestFragmentedAndPreferred: on one cluster of three racks of two 8-GPU
// hosts, r0 and r1 with one host busy for good, a rack-required Job of two
// pods takes r2 until t=50; a second one waits for it, fragmented (16 GPUs
// free, 8 in each of r0 and r1), and starts at t=50. At t=200 two
// rack-preferred Jobs of two pods arrive: the first lands in one rack
// (r2, free again), the second over r0 and r1.
func TestFragmentedAndPreferred(t *testing.T) {
	clusters := []Cluster{cluster(t, "c", [][]int64{{8, 0}, {8, 0}, {0, 0}})}
	filler := rackJob("filler", 0, 2, Required)
	filler.Duration = 50
	trace := []Job{
		filler,
		rackJob("required", 0, 2, Required),
		rackJob("preferred", 200, 2, Preferred),
		rackJob("preferred-split", 200, 2, Preferred),
	}
	r, err := Run(clusters, trace, Compact, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := outcome{Started: 4, MeanWait: 12.5, P90Wait: 50, Makespan: 300, Required: 2, RequiredFragmented: 1, PreferredStarted: 2, PreferredOne: 1}
	if diff := cmp.Diff(want, outcomeOf(r)); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}

// TestNoTopologyStuck: no-topology sends a rack-required Job of two 8-GPU
// pods to a, which has the most GPUs free (three racks of one host) but no
// rack that holds it; it waits there to the end, while b (one rack of two
// hosts) would have taken it at once. Its wait counts until the replay
// ends (t=100, when the other Job ends).
func TestNoTopologyStuck(t *testing.T) {
	clusters := []Cluster{cluster(t, "a", [][]int64{{0}, {0}, {0}}), cluster(t, "b", [][]int64{{0, 0}})}
	trace := []Job{rackJob("rack", 0, 2, Required), {Name: "short", Duration: 100, Pods: 1, GPUsPerPod: 8}}
	r, err := Run(clusters, trace, NoTopology, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcome{Started: 1, Never: 1, MeanWait: 50, P90Wait: 100, Makespan: 100, Required: 1, RequiredFragmented: 1}, outcomeOf(r)); diff != "" {
		t.Errorf("no-topology outcome (-want +got):\n%s", diff)
	}
	r, err = Run(clusters, trace, Compact, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcome{Started: 2, Makespan: 100, Required: 1}, outcomeOf(r)); diff != "" {
		t.Errorf("compact outcome (-want +got):\n%s", diff)
	}
}

func TestNeverFits(t *testing.T) {
	clusters := []Cluster{cluster(t, "a", [][]int64{{0, 0}})}
	r, err := Run(clusters, []Job{rackJob("huge", 0, 3, Required), rackJob("ok", 5, 1, Required)}, FirstFit, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcome{Started: 1, Never: 1, Makespan: 105, Required: 2, RequiredFragmented: 0}, outcomeOf(r)); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}

func TestRunErrors(t *testing.T) {
	clusters := []Cluster{cluster(t, "a", [][]int64{{0}})}
	cases := map[string]struct {
		clusters []Cluster
		trace    []Job
		policy   Policy
		want     string
	}{
		"unknown policy": {clusters, []Job{{Name: "j", Pods: 1, GPUsPerPod: 1}}, "best", `unknown policy "best"`},
		"no clusters":    {nil, []Job{{Name: "j", Pods: 1, GPUsPerPod: 1}}, Compact, "no clusters"},
		"unknown level":  {clusters, []Job{{Name: "j", Pods: 1, GPUsPerPod: 1, Mode: Required, Level: "zone"}}, Compact, `job j: topology level "zone" is none of the clusters' levels`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Run(tc.clusters, tc.trace, tc.policy, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCSV(t *testing.T) {
	jobs := Generate(GenerateOptions{Jobs: 200, Seed: 7, ArrivalsPerHour: 120})
	var buf bytes.Buffer
	if err := WriteCSV(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	if diff := cmp.Diff(jobs, Generate(GenerateOptions{Jobs: 200, Seed: 7, ArrivalsPerHour: 120})); diff != "" {
		t.Errorf("the same seed drew another trace:\n%s", diff)
	}
}

func TestReadCSVErrors(t *testing.T) {
	header := "name,arrival_seconds,duration_seconds,pods,gpus_per_pod,topology\n"
	cases := map[string]struct{ in, want string }{
		"no header":      {"", "reading the trace's header"},
		"wrong header":   {"a,b,c,d,e,f\n", `the trace's header is "a,b,c,d,e,f"`},
		"no jobs":        {header, "the trace has no Jobs"},
		"bad number":     {header + "j,x,1,1,1,none\n", `trace line 2: arrival_seconds "x": not a number`},
		"negative":       {header + "j,-1,1,1,1,none\n", `trace line 2: arrival_seconds "-1": want a number of at least 0`},
		"no pods":        {header + "j,0,1,0,1,none\n", `trace line 2: pods "0": want a whole number of at least 1`},
		"half a gpu":     {header + "j,0,1,1,0.5,none\n", `trace line 2: gpus_per_pod "0.5"`},
		"bad topology":   {header + "j,0,1,1,1,rack\n", `trace line 2: topology "rack": want none, required:LEVEL or preferred:LEVEL`},
		"twice":          {header + "j,0,1,1,1,none\nj,5,1,1,1,none\n", `trace line 3: Job "j" appears twice`},
		"missing fields": {header + "j,0,1\n", "wrong number of fields"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadCSV() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestPreemption: a high-priority rack-required Job of two 8-GPU pods
// arrives at t=10 on a full fleet: a, one rack of 4 hosts, each held by a
// one-pod low-priority Job; b, one rack of 2 hosts held by one two-pod
// low-priority Job (compact put it there: b's rack was the tightest).
//
//   - none: it waits for the first end, t=1000.
//   - first-cluster: it preempts on a, the first cluster where preempting
//     helps: two of the one-pod Jobs (the minimal set), which restart when
//     it ends at t=110.
//   - fleet: it preempts on b, where one Job is enough.
func TestPreemption(t *testing.T) {
	clusters := []Cluster{
		cluster(t, "a", [][]int64{{0, 0, 0, 0}}),
		cluster(t, "b", [][]int64{{0, 0}}),
	}
	low := func(name string, pods int32, mode string) Job {
		return Job{Name: name, Duration: 1000, Pods: pods, GPUsPerPod: 8, Mode: mode, Level: "rack"}
	}
	trace := []Job{
		low("l1", 2, Required), low("l2", 1, ""), low("l3", 1, ""), low("l4", 1, ""), low("l5", 1, ""),
		{Name: "high", Arrival: 10, Duration: 100, Pods: 2, GPUsPerPod: 8, Mode: Required, Level: "rack", Priority: 100},
	}
	type got struct {
		Started, Preempted, HighPriority int
		HighMeanWait, Makespan           float64
		LostGPUSeconds                   float64
	}
	cases := map[Preemption]got{
		NoPreemption:    {Started: 6, HighPriority: 1, HighMeanWait: 990, Makespan: 1100},
		FirstPreempting: {Started: 6, Preempted: 2, HighPriority: 1, HighMeanWait: 0, Makespan: 1110, LostGPUSeconds: 2 * 8 * 10},
		FleetPreemption: {Started: 6, Preempted: 1, HighPriority: 1, HighMeanWait: 0, Makespan: 1110, LostGPUSeconds: 16 * 10},
	}
	for mode, want := range cases {
		t.Run(string(mode), func(t *testing.T) {
			r, err := Run(clusters, trace, Compact, Options{Preemption: mode})
			if err != nil {
				t.Fatal(err)
			}
			g := got{r.Started, r.Preempted, r.HighPriority, r.HighMeanWait, r.Makespan, math.Round(r.LostGPUHours * 3600)}
			if diff := cmp.Diff(want, g); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriorityColumn(t *testing.T) {
	in := "name,arrival_seconds,duration_seconds,pods,gpus_per_pod,topology,priority\nlow,0,10,1,1,none,0\nhigh,5,10,2,8,required:rack,100\n"
	jobs, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Name: "low", Duration: 10, Pods: 1, GPUsPerPod: 1},
		{Name: "high", Arrival: 5, Duration: 10, Pods: 2, GPUsPerPod: 8, Mode: Required, Level: "rack", Priority: 100},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("ReadCSV (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := WriteCSV(&out, jobs); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("WriteCSV:\n%s\nwant:\n%s", out.String(), in)
	}
	if _, err := ReadCSV(strings.NewReader("name,arrival_seconds,duration_seconds,pods,gpus_per_pod,topology,priority\nx,0,1,1,1,none,high\n")); err == nil ||
		!strings.Contains(err.Error(), `priority "high": want a whole number`) {
		t.Errorf("a priority that is not a number: err = %v", err)
	}
}
