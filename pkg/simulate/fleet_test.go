package simulate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/config"
)

const fleetExamples = "../../docs/examples/fleet"

func fleetClusters() []ClusterArg {
	var out []ClusterArg
	for _, name := range []string{"west", "east", "north"} {
		out = append(out, ClusterArg{Name: name, Path: filepath.Join(fleetExamples, name)})
	}
	return out
}

func runFleet(t *testing.T, clusters []ClusterArg, files ...string) ([]Result, error) {
	t.Helper()
	f, err := LoadFleet(clusters, files)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadHub("")
	if err != nil {
		t.Fatal(err)
	}
	return RunFleet(f, cfg)
}

// TestFleetExample: the hub's choices on docs/examples/fleet.
func TestFleetExample(t *testing.T) {
	results, err := runFleet(t, fleetClusters(), filepath.Join(fleetExamples, "hub"))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Cluster, Flavor string
		Domains         []Domain
		Candidates      int
	}
	got := map[string]outcome{}
	for _, r := range results {
		o := outcome{Cluster: *r.Cluster, Candidates: len(r.Candidates)}
		if r.Admitted {
			o.Flavor, o.Domains = r.PodSets[0].Flavor, r.PodSets[0].Domains
		}
		got[r.Name] = o
	}
	rack := func(b, r string, n int32) []Domain { return []Domain{{Values: []string{b, r}, Count: n}} }
	want := map[string]outcome{
		// A100s come first; west's rack-1 is the free rack.
		"rack-pretrain": {"west", "tas-a100", rack("block-1", "rack-1", 4), 3},
		// West has no free rack left; east is fragmented: north's H100s.
		"rack-pretrain-2": {"north", "tas-h100", rack("block-1", "rack-1", 4), 3},
		// Only north has a rack with room for it: a rack beats a block.
		"block-finetune": {"north", "tas-h100", rack("block-1", "rack-2", 5), 3},
		"sweep":          {"north", "tas-h100", rack("block-1", "rack-2", 3), 3},
		// Slices of 2 per rack: west's rack-2 has two free hosts.
		"sliced":  {"west", "tas-a100", rack("block-1", "rack-2", 4), 3},
		"too-big": {"", "", nil, 3},
		// KEP-2724's two-level JobSet: each Job's 4 pods on one host (a
		// host of each of two racks of east's block-1), the JobSet in one
		// block.
		"two-level": {"east", "tas-a100", []Domain{{Values: []string{"block-1", "rack-1"}, Count: 4}, {Values: []string{"block-1", "rack-2"}, Count: 4}}, 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("choices (-want,+got):\n%s", diff)
	}
	for _, r := range results {
		if r.Name == "too-big" && !strings.HasPrefix(r.Reason, "fits no cluster, even empty: ") {
			t.Errorf("too-big's reason: %s", r.Reason)
		}
	}
	// Every candidate of the first job says why.
	wantCands := []Candidate{
		{Cluster: "west", Flavor: "tas-a100", Fits: true, Level: "cloud.provider.com/topology-rack", Reason: "fits in rack block-1/rack-1, room for 0 more"},
		{Cluster: "north", Flavor: "tas-h100", Fits: true, Level: "cloud.provider.com/topology-rack", Reason: "fits in rack block-1/rack-1, room for 0 more"},
		{Cluster: "east", Flavor: "tas-a100", Reason: "rack required: the best rack fits 1 of 4 pods; limited by nvidia.com/gpu (4 nodes)"},
	}
	if diff := cmp.Diff(wantCands, results[0].Candidates); diff != "" {
		t.Errorf("candidates of %s (-want,+got):\n%s", results[0].Name, diff)
	}
}

func TestFleetBadInput(t *testing.T) {
	west := filepath.Join(fleetExamples, "west")
	jobs := filepath.Join(fleetExamples, "hub", "jobs.yaml")
	if _, err := ParseClusterArgs([]string{"west"}); err == nil || err.Error() != `--cluster "west": want NAME=FILE_OR_DIR` {
		t.Errorf("--cluster without '=': %v", err)
	}
	if _, err := ParseClusterArgs([]string{"a=x", "a=y"}); err == nil || err.Error() != `cluster "a" is given twice (--cluster a=x and --cluster a=y)` {
		t.Errorf("a cluster twice: %v", err)
	}
	if _, err := ParseClusterArgs([]string{"=x"}); err == nil || !strings.Contains(err.Error(), "the cluster has no name") {
		t.Errorf("no name: %v", err)
	}
	cases := map[string]struct {
		clusters []ClusterArg
		files    func(t *testing.T) []string
		wantErr  string
		reason   string // of the first workload
	}{
		"a ClusterQueue flavor no cluster has": {
			clusters: []ClusterArg{{"west", west}},
			files: func(t *testing.T) []string {
				return []string{write(t, "q.yaml", "apiVersion: strata.dev/v1beta1\nkind: ClusterQueue\nmetadata:\n  name: q\nspec:\n  flavors:\n  - name: tas-b200\n"), jobs}
			},
			wantErr: `q.yaml: document 1: ClusterQueue q lists flavor "tas-b200", which no cluster has (clusters' topology-aware flavors: tas-a100)`,
		},
		"workloads in a cluster's files": {
			clusters: []ClusterArg{{"west", west}, {"more", jobs}},
			files:    func(*testing.T) []string { return []string{jobs} },
			wantErr:  "cluster more: " + jobs + ": document 1 (Job ml/rack-pretrain): workloads are placed by the hub; pass them with -f (or a trace), not in --cluster",
		},
		"cluster objects in the hub's files": {
			clusters: []ClusterArg{{"west", west}},
			files:    func(*testing.T) []string { return []string{filepath.Join(west, "cluster.yaml"), jobs} },
			wantErr:  "cluster.yaml: document 3: a Node in the hub's files (-f); a worker's cluster objects go in --cluster NAME=FILE_OR_DIR",
		},
		"a missing cluster path": {
			clusters: []ClusterArg{{"gone", filepath.Join(fleetExamples, "gone")}},
			files:    func(*testing.T) []string { return []string{jobs} },
			wantErr:  "cluster gone: stat ../../docs/examples/fleet/gone: no such file or directory",
		},
		"a topology without the requested level is no candidate": {
			clusters: []ClusterArg{{"flat", write(t, "flat.yaml", `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: hosts}
spec:
  levels:
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: tas-a100}
spec: {topologyName: hosts}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "8", nvidia.com/gpu: "8", pods: "110"}}
`)}},
			files:  func(*testing.T) []string { return []string{jobs} },
			reason: `no cluster can ever hold it: flat/tas-a100: pod set main: podset-required-topology: "cloud.provider.com/topology-rack" is not a level of Topology "hosts" (levels: kubernetes.io/hostname)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			results, err := runFleet(t, tc.clusters, tc.files(t)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if results[0].Reason != tc.reason {
				t.Errorf("reason:\n got %s\nwant %s", results[0].Reason, tc.reason)
			}
		})
	}
}

// TestFleetJobSets: the hub places every pod set of a JobSet on one
// worker and flavor, or says which pod set fits nowhere.
func TestFleetJobSets(t *testing.T) {
	// The hub's queues and Jobs, and the JobSets of jobsets.yaml (the hub's own
	// jobset.yaml has one of the same name).
	results, err := runFleet(t, fleetClusters(), filepath.Join(fleetExamples, "hub", "queue.yaml"), filepath.Join(fleetExamples, "hub", "jobs.yaml"), filepath.Join(examples, "jobsets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	two := byName["two-level"]
	if !two.Admitted || len(two.PodSets) != 1 || two.PodSets[0].Count != 8 || len(two.PodSets[0].Domains) == 0 {
		t.Fatalf("two-level: %+v", two)
	}
	for _, d := range two.PodSets[0].Domains {
		if d.Values[0] != two.PodSets[0].Domains[0].Values[0] {
			t.Errorf("two-level spans blocks: %+v", two.PodSets[0].Domains)
		}
	}
	lw := byName["leader-workers"]
	if lw.Admitted || !strings.Contains(lw.Reason, "pod set workers: rack required") {
		t.Errorf("leader-workers: admitted %t, reason %q; want it waiting, naming the pod set workers", lw.Admitted, lw.Reason)
	}
}

// TestFleetSummariesAsTheAgentPublishes: a cluster whose only rack holds
// the Job exactly, through its flavor's toleration of the nodes' taint,
// gets it, as the live hub would decide: simulate builds each cluster's
// summary as the agent publishes it (without the tolerated taints), not
// from the raw nodes.
func TestFleetSummariesAsTheAgentPublishes(t *testing.T) {
	dir := t.TempDir()
	nodes := func(cluster string, n int, taint string) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: NodeList\nitems:\n")
		for i := range n {
			fmt.Fprintf(&b, `- apiVersion: v1
  kind: Node
  metadata:
    name: %[1]s-h%[2]d
    labels: {kubernetes.io/hostname: %[1]s-h%[2]d, pool: gpu, rack: %[1]s-r0}
  spec:
    taints: %[3]s
  status:
    allocatable: {cpu: "1", pods: "110"}
    conditions: [{type: Ready, status: "True"}]
`, cluster, i, taint)
		}
		return b.String()
	}
	flavor := func(tolerations string) string {
		return `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: racks}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {pool: gpu}
  topologyName: racks
  tolerations: ` + tolerations + "\n---\n"
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// tight: one rack of 5 tainted hosts, the taint tolerated by its flavor;
	// loose: one rack of 8 untainted hosts.
	write(filepath.Join(dir, "tight", "cluster.yaml"), flavor(`[{key: dedicated, operator: Equal, value: training, effect: NoSchedule}]`)+
		nodes("tight", 5, `[{key: dedicated, value: training, effect: NoSchedule}]`))
	write(filepath.Join(dir, "loose", "cluster.yaml"), flavor("[]")+nodes("loose", 8, "[]"))
	write(filepath.Join(dir, "hub", "jobs.yaml"), `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  flavors: [{name: gpu}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: ml}
spec: {clusterQueue: q}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: five
  namespace: ml
  labels: {strata.dev/queue-name: q}
spec:
  parallelism: 5
  completions: 5
  template:
    metadata:
      annotations: {kueue.x-k8s.io/podset-required-topology: rack}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`)
	clusters := []ClusterArg{{Name: "loose", Path: filepath.Join(dir, "loose")}, {Name: "tight", Path: filepath.Join(dir, "tight")}}
	results, err := runFleet(t, clusters, filepath.Join(dir, "hub"))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	if r := results[0]; !r.Admitted || r.Cluster == nil || *r.Cluster != "tight" {
		t.Errorf("the Job went elsewhere (%s); want the tight cluster, whose rack holds it exactly through the flavor's toleration", r.Reason)
	}
}

// TestFleetMPIJob: after the hub examples' Jobs and JobSet, the hub places
// an MPIJob's launcher and workers, grouped in one rack, on one worker,
// flavor and rack.
func TestFleetMPIJob(t *testing.T) {
	results, err := runFleet(t, fleetClusters(), filepath.Join(fleetExamples, "hub"), filepath.Join(examples, "mpijobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pi Result
	for _, r := range results {
		if r.Name == "pi" {
			pi = r
		}
	}
	if !pi.Admitted || len(pi.PodSets) != 2 || pi.PodSets[0].Name != "launcher" || pi.PodSets[1].Name != "worker" {
		t.Fatalf("pi: %+v", pi)
	}
	if pi.Cluster == nil || *pi.Cluster == "" || pi.PodSets[0].Flavor != pi.PodSets[1].Flavor {
		t.Errorf("pi: cluster %v, launcher on flavor %s, workers on %s: want one cluster and flavor", pi.Cluster, pi.PodSets[0].Flavor, pi.PodSets[1].Flavor)
	}
	racks := map[string]bool{}
	for _, ps := range pi.PodSets {
		for _, d := range ps.Domains {
			racks[strings.Join(d.Values[:2], "/")] = true
		}
	}
	if len(racks) != 1 {
		t.Errorf("pi spans racks %v: want launcher and workers in one", racks)
	}
}

// TestFleetLeaderWorkerSet: with --cluster, a LeaderWorkerSet is placed as
// the hub places it: one workload of every group, on one cluster and
// flavor.
func TestFleetLeaderWorkerSet(t *testing.T) {
	results, err := runFleet(t, fleetClusters(), filepath.Join(fleetExamples, "hub"), filepath.Join(examples, "lws.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var set *Result
	for i := range results {
		if strings.HasPrefix(results[i].Name, "tas-example-lws") {
			if set != nil {
				t.Fatalf("the set is placed as more than one workload: %s and %s", set.Name, results[i].Name)
			}
			set = &results[i]
		}
	}
	if set == nil || !set.Admitted || set.Cluster == nil || *set.Cluster == "" {
		t.Fatalf("the set: %+v", set)
	}
	var names []string
	for _, ps := range set.PodSets {
		names = append(names, ps.Name)
		if ps.Flavor != set.PodSets[0].Flavor {
			t.Errorf("pod set %s on flavor %s, %s on %s: want one flavor", ps.Name, ps.Flavor, set.PodSets[0].Name, set.PodSets[0].Flavor)
		}
	}
	if diff := cmp.Diff([]string{"leader-0", "worker-0", "leader-1", "worker-1"}, names); diff != "" {
		t.Errorf("pod sets (-want,+got):\n%s", diff)
	}
}

// TestFleetPreemption: on docs/examples/fleet-preemption, a Job that fits
// nowhere goes to the one cluster where preempting frees a rack, marked
// to preempt the lowest priority there; the next finds that preemption
// under way and waits, saying why for each cluster.
func TestFleetPreemption(t *testing.T) {
	dir := "../../docs/examples/fleet-preemption"
	clusters := []ClusterArg{{Name: "a", Path: filepath.Join(dir, "a")}, {Name: "b", Path: filepath.Join(dir, "b")}}
	results, err := runFleet(t, clusters, filepath.Join(dir, "hub"))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Admitted    bool
		Cluster     string
		PreemptUpTo *int32
	}
	got := map[string]outcome{}
	for _, r := range results {
		got[r.Name] = outcome{Admitted: r.Admitted, Cluster: *r.Cluster, PreemptUpTo: r.PreemptUpTo}
	}
	one := int32(1)
	want := map[string]outcome{
		"urgent-1": {Cluster: "b", PreemptUpTo: &one},
		"urgent-2": {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
	for _, r := range results {
		switch r.Name {
		case "urgent-1":
			if !strings.Contains(r.Reason, "would preempt up to 2 workloads of priority ≤ 1 there") || !strings.Contains(r.Reason, "fits in rack r2") {
				t.Errorf("urgent-1: reason %q", r.Reason)
			}
		case "urgent-2":
			for _, part := range []string{"a/f: it would not fit even with every workload of ClusterQueue q of priority below 50 preempted", "b/f: a preemption is already under way there"} {
				if !strings.Contains(r.Reason, part) {
					t.Errorf("urgent-2: reason %q does not say %q", r.Reason, part)
				}
			}
		}
	}
}

// TestFleetWorkerQuota: as the hub, simulate sends no copy where the
// worker ClusterQueue it lands in has no quota left, and reclaims on a
// worker what a cohort peer borrows there for a queue that only reclaims.
func TestFleetWorkerQuota(t *testing.T) {
	dir := t.TempDir()
	cluster := func(name, queues, running string) ClusterArg {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		base := `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {rack: r1, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h2, labels: {rack: r1, kubernetes.io/hostname: h2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h3, labels: {rack: r2, kubernetes.io/hostname: h3}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
`
		if err := os.WriteFile(filepath.Join(p, "cluster.yaml"), []byte(base+queues+running), 0o644); err != nil {
			t.Fatal(err)
		}
		return ClusterArg{Name: name, Path: p}
	}
	queue := func(name, nominal, extra string) string {
		return fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  cohort: teams
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: %s}]}]
%s---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: %s, namespace: ml}
spec: {clusterQueue: %s}
---
`, name, nominal, extra, name, name)
	}
	running := func(name, q, host string) string {
		return fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: %s, namespace: ml}
spec:
  queueName: %s
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]}}
status:
  admission:
    clusterQueue: %s
    podSetAssignments:
    - {name: main, flavor: f, count: 1, topologyAssignment: {levels: [kubernetes.io/hostname], slices: [{domainCount: 1, valuesPerLevel: [{universal: %s}], podCounts: {universal: 1}}]}}
---
`, name, q, q, host)
	}
	reclaim := "  preemption: {reclaimWithinCohort: Any}\n"
	clusters := []ClusterArg{
		// full: train's 4 CPUs are its own workload's; h2 and h3 are free,
		// but its queue is not, and nothing may be preempted for it.
		cluster("full", queue("train", "4", reclaim)+queue("other", "0", ""), running("mine", "train", "h1")),
		// lent: train's 8 CPUs are borrowed by other's two workloads.
		cluster("lent", queue("train", "8", reclaim)+queue("other", "0", ""), running("b1", "other", "h1")+running("b2", "other", "h2")),
	}
	hub := filepath.Join(dir, "hub.yaml")
	if err := os.WriteFile(hub, []byte(`apiVersion: batch/v1
kind: Job
metadata: {name: trainer, namespace: ml, labels: {strata.dev/queue-name: train}}
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := runFleet(t, clusters, hub)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	if *r.Cluster != "lent" || r.PreemptUpTo == nil || *r.PreemptUpTo != 0 {
		t.Errorf("cluster %q, preemptUpTo %v, want lent, 0: %s", *r.Cluster, r.PreemptUpTo, r.Reason)
	}
	for _, part := range []string{"once workloads of ClusterQueue other of priority ≤ 0 are preempted there (2 such workloads"} {
		if !strings.Contains(r.Reason, part) {
			t.Errorf("reason %q does not say %q", r.Reason, part)
		}
	}
	var said []string
	for _, c := range r.Candidates {
		if strings.Contains(c.Reason, "has no room for it") {
			said = append(said, c.Cluster)
		}
	}
	if diff := cmp.Diff([]string{"full", "lent"}, said); diff != "" {
		t.Errorf("clusters whose queue has no room (-want,+got):\n%s", diff)
	}
}

func TestFleetStopPolicy(t *testing.T) {
	dir := t.TempDir()
	cluster := func(name, stop string) ClusterArg {
		return oneRackCluster(t, dir, name, 1, "stopPolicy: "+stop, "8")
	}
	// a would be chosen (the first of two alike) but its queue is held.
	clusters := []ClusterArg{cluster("a", "Hold"), cluster("b", "None")}
	hub := filepath.Join(dir, "hub.yaml")
	job := func(name, q string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: %s}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
`, name, q)
	}
	if err := os.WriteFile(hub, []byte(job("trainer", "train")+job("waiter", "paused")+`apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: paused, namespace: ml}
spec: {clusterQueue: train, stopPolicy: HoldAndDrain}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := runFleet(t, clusters, hub)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name, Cluster string
		Admitted      bool
	}
	var got []outcome
	for _, r := range results {
		got = append(got, outcome{r.Name, ptr.Deref(r.Cluster, ""), r.Admitted})
	}
	if diff := cmp.Diff([]outcome{{"trainer", "b", true}, {"waiter", "", false}}, got); diff != "" {
		t.Fatalf("results (-want,+got):\n%s", diff)
	}
	for i, want := range []string{"a/f: ClusterQueue train is stopped (stopPolicy Hold)",
		"LocalQueue paused is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None"} {
		if !strings.Contains(results[i].Reason, want) {
			t.Errorf("%s: reason %q does not say %q", results[i].Name, results[i].Reason, want)
		}
	}
}

// TestFleetInvalidJobsOfEveryKind: the hub marks an invalid job of any
// kind and places the others as it would without it.
func TestFleetInvalidJobsOfEveryKind(t *testing.T) {
	hub := filepath.Join(fleetExamples, "hub")
	without, err := runFleet(t, fleetClusters(), hub)
	if err != nil {
		t.Fatal(err)
	}
	with, err := runFleet(t, fleetClusters(), write(t, "invalid.yaml", invalidKinds), hub)
	if err != nil {
		t.Fatal(err)
	}
	var invalid []string
	var rest []Result
	for _, r := range with {
		if !r.Invalid {
			rest = append(rest, r)
			continue
		}
		invalid = append(invalid, r.Name)
		if r.Admitted || r.Cluster == nil || *r.Cluster != "" || !strings.HasPrefix(r.Reason, "invalid: ") {
			t.Errorf("%s: admitted %v, cluster %v, reason %q; want not admitted, no cluster, an invalid: reason", r.Name, r.Admitted, r.Cluster, r.Reason)
		}
	}
	if diff := cmp.Diff([]string{"bad-job", "bad-jobset", "bad-lws", "bad-mpijob"}, invalid); diff != "" {
		t.Errorf("invalid rows (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(without, rest, cmp.AllowUnexported(Result{})); diff != "" {
		t.Errorf("the valid jobs (-without,+with the invalid ones first):\n%s", diff)
	}
}

// TestFleetTakesJobsAsTheHub: simulate --cluster takes the hub's jobs in
// as the hub does (a finished job is not placed, a deactivated Workload
// waits, a LeaderWorkerSet of no group is invalid, the hub queue's
// namespaceSelector and StrictFIFO hold), sends no copy to a worker whose
// queue refuses the namespace, and counts nothing for a finished Workload
// on a worker.
func TestFleetTakesJobsAsTheHub(t *testing.T) {
	dir := t.TempDir()
	cluster := func(name, selector, nsLabels, running string) ClusterArg {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		in := fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: %s}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
---
%s`, nsLabels, selector, running)
		if err := os.WriteFile(filepath.Join(p, "cluster.yaml"), []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		return ClusterArg{Name: name, Path: p}
	}
	finished := `apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: over, namespace: ml}
spec:
  queueName: train
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]}}
status:
  conditions: [{type: Finished, status: "True", reason: Succeeded, message: done, lastTransitionTime: "2026-01-01T00:00:00Z"}]
  admission:
    clusterQueue: train
    podSetAssignments:
    - {name: main, flavor: f, count: 1, topologyAssignment: {levels: [kubernetes.io/hostname], slices: [{domainCount: 1, valuesPerLevel: [{universal: h1}], podCounts: {universal: 1}}]}}
`
	clusters := []ClusterArg{
		// a comes first, but its queue takes only team ml's namespaces.
		cluster("a", "{matchLabels: {team: ml}}", "{team: other}", ""),
		// b's 4 CPUs are free: its one Workload finished.
		cluster("b", "{}", "{}", finished),
	}
	job := func(name, ns, cpu, extra string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s, labels: {strata.dev/queue-name: train}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "%s"}}}]
%s---
`, name, ns, cpu, extra)
	}
	hub := job("done", "ml", "1", "status:\n  conditions: [{type: Complete, status: \"True\"}]\n") +
		job("first", "ml", "3", "") +
		job("stranger", "other", "1", "") +
		job("second", "ml", "2", "") + // b has 1 CPU left: waits, and holds the queue
		job("third", "ml", "1", "") + // fits on b, but behind second
		`apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: idle, namespace: ml}
spec:
  active: false
  queueName: train
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: empty, namespace: ml, labels: {strata.dev/queue-name: train}}
spec:
  replicas: 0
  leaderWorkerTemplate:
    size: 1
    workerTemplate:
      metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: kubernetes.io/hostname}}
      spec:
        schedulingGates: [{name: kueue.x-k8s.io/topology}]
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {team: ml}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: hub}
spec:
  namespaceSelector: {matchLabels: {team: ml}}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 100}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: hub}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: other}
spec: {clusterQueue: hub}
`
	results, err := runFleet(t, clusters, write(t, "hub.yaml", hub))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name, Cluster string
		Admitted      bool
		Invalid       bool
		Reason        string
	}
	var got []outcome
	for _, r := range results {
		reason := r.Reason
		if r.Admitted {
			reason = ""
		}
		got = append(got, outcome{r.Name, ptr.Deref(r.Cluster, ""), r.Admitted, r.Invalid, reason})
	}
	want := []outcome{
		{Name: "first", Cluster: "b", Admitted: true},
		{Name: "stranger", Reason: `ClusterQueue "hub" does not admit namespace "other" (namespaceSelector team=ml)`},
		{Name: "second", Reason: "fits nowhere now: b/f: the flavor fits only 0 of 1 pods"},
		{Name: "third", Reason: "waiting in StrictFIFO ClusterQueue hub behind workloads that fit nowhere yet"},
		{Name: "idle", Reason: "deactivated (spec.active: false): not dispatched until it is active again"},
		{Name: "empty", Invalid: true, Reason: "invalid: spec.replicas: Invalid value: 0: a LeaderWorkerSet of no groups has nothing to dispatch"},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(want, got string) bool { return strings.HasPrefix(got, want) || strings.HasPrefix(want, got) })); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
	for _, r := range results {
		if r.Name == "second" && !strings.Contains(r.Reason, `a/f: ClusterQueue "train" does not admit namespace "ml" (namespaceSelector team=ml) there`) {
			t.Errorf("second: reason %q does not say why a refuses it", r.Reason)
		}
	}
}

// TestFleetQueueOrder: as the hub, simulate --cluster serves its queue
// by priority, then in the input's order; the rows keep the input's order.
func TestFleetQueueOrder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(`apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(name, class string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: q%s}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "3"}}}]
---
`, name, class)
	}
	hub := job("low", "") + job("high", ", strata.dev/priority-class: high") + job("later", "") + `apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
`
	results, err := runFleet(t, []ClusterArg{{Name: "w", Path: filepath.Join(dir, "w.yaml")}}, write(t, "hub.yaml", hub))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s=%v", r.Name, r.Admitted))
	}
	if diff := cmp.Diff([]string{"low=false", "high=true", "later=false"}, got); diff != "" {
		t.Errorf("rows (-want,+got):\n%s", diff)
	}
}

// TestFleetPartialAdmission: as the hub, simulate places a Job that may
// run with fewer pods (job-min-parallelism) and fits nowhere whole with
// the most pods that fit on one worker whose queue has quota for them.
func TestFleetPartialAdmission(t *testing.T) {
	cases := []struct {
		name      string
		nominal   string // the worker queue's CPU quota on "big"
		wantCount int32
	}{
		{name: "the most pods that fit", nominal: "100", wantCount: 12},
		{name: "the most pods its worker queue's quota holds", nominal: "6", wantCount: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cluster := func(name, nominal string, nodes int) ClusterArg {
				return oneRackCluster(t, dir, name, nodes, "", nominal)
			}
			clusters := []ClusterArg{cluster("big", tc.nominal, 3), cluster("small", "100", 1)}
			hub := filepath.Join(dir, "hub.yaml")
			if err := os.WriteFile(hub, []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: trainer
  namespace: ml
  labels: {strata.dev/queue-name: train}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "2"}
spec:
  parallelism: 16
  completions: 16
  template:
    metadata:
      annotations: {strata.dev/podset-required-topology: rack}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`), 0o644); err != nil {
				t.Fatal(err)
			}
			results, err := runFleet(t, clusters, hub)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 {
				t.Fatalf("%d results, want 1", len(results))
			}
			r := results[0]
			if !r.Admitted || *r.Cluster != "big" || len(r.PodSets) != 1 || r.PodSets[0].Count != tc.wantCount {
				t.Fatalf("admitted %v on %q with %+v, want %d pods on big: %s", r.Admitted, *r.Cluster, r.PodSets, tc.wantCount, r.Reason)
			}
			if want := fmt.Sprintf("with %d of the 16 pods of pod set main (partial admission", tc.wantCount); !strings.Contains(r.Reason, want) {
				t.Errorf("reason %q does not say %q", r.Reason, want)
			}
		})
	}
}

// oneRackCluster writes a worker cluster of nodes 4-CPU nodes in rack r1,
// flavor f of topology t, and ClusterQueue train (cqSpec added to its
// spec) of nominal CPUs with LocalQueue train in namespace ml.
func oneRackCluster(t *testing.T, dir, name string, nodes int, cqSpec, nominal string) ClusterArg {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	var items []string
	for i := range nodes {
		items = append(items, fmt.Sprintf(`- {apiVersion: v1, kind: Node, metadata: {name: h%d, labels: {rack: r1, kubernetes.io/hostname: h%d}}, status: {allocatable: {cpu: "4", pods: "110"}}}`, i+1, i+1))
	}
	if cqSpec != "" {
		cqSpec = "\n  " + cqSpec
	}
	in := fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}
---
apiVersion: v1
kind: NodeList
items:
%s
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}%s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: %s}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
`, strings.Join(items, "\n"), cqSpec, nominal)
	if err := os.WriteFile(filepath.Join(p, "cluster.yaml"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	return ClusterArg{Name: name, Path: p}
}

// TestFleetHubQuota: the hub's ClusterQueues' quota holds workloads back
// as the hub does: one the quota left does not hold waits, one that may
// run with fewer pods runs with what it holds, and a workload of another
// hub queue (unlimited: spec.flavors) is placed beside them.
func TestFleetHubQuota(t *testing.T) {
	dir := t.TempDir()
	clusters := []ClusterArg{oneRackCluster(t, dir, "w", 4, "", "100")}
	hub := filepath.Join(dir, "hub.yaml")
	if err := os.WriteFile(hub, []byte(oneCPUJob("first", "train", 6, "")+oneCPUJob("whole", "train", 6, "")+oneCPUJob("fewer", "train", 6, "2")+oneCPUJob("other", "other", 6, "")+`apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 10}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: other}
spec:
  namespaceSelector: {}
  flavors: [{name: f}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: other, namespace: ml}
spec: {clusterQueue: other}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := runFleet(t, clusters, hub)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name     string
		Admitted bool
		Pods     int32
	}
	var got []outcome
	for _, r := range results {
		o := outcome{Name: r.Name, Admitted: r.Admitted}
		for _, ps := range r.PodSets {
			o.Pods += ps.Count
		}
		got = append(got, o)
	}
	want := []outcome{{"first", true, 6}, {"whole", false, 0}, {"fewer", true, 4}, {"other", true, 6}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("results (-want,+got):\n%s", diff)
	}
	for i, want := range []string{"",
		"no flavor of ClusterQueue train has quota left: flavor f: quota: cpu",
		"with 4 of the 6 pods of pod set main (partial admission", ""} {
		if !strings.Contains(results[i].Reason, want) {
			t.Errorf("%s: reason %q does not say %q", results[i].Name, results[i].Reason, want)
		}
	}
}

// TestFleetHubReclaim: as the hub, simulate preempts at the hub what its
// queue's policy allows when no flavor of its queue's quota holds a
// workload: a queue reclaims its nominal quota from the cohort peer's
// newest borrower, which waits again, for all of its pods, or for the
// most of them when it may run with fewer.
func TestFleetHubReclaim(t *testing.T) {
	// Four one-CPU pods on nodes labelled gpu: yes, which no worker has.
	unplaceable := strings.Replace(oneCPUJob("b1", "b", 4, ""), "  template:\n    spec:\n", "  template:\n    spec:\n      nodeSelector: {gpu: \"yes\"}\n", 1)
	cases := []struct {
		name string
		// b1's pods, and its job-min-parallelism ("": none)
		pods     int
		minPods  string
		a2       int    // a2's pods (4 unless set)
		a2Min    string // a2's job-min-parallelism
		b1       string // b1's Job, when not oneCPUJob's
		wantRows []string
	}{
		// As the hub serves its queues, a head of each in every round, and
		// a head that borrows after those that do not: a1 (within a's
		// nominal 2 CPUs) and b0 in the first round, b0b then a2 in the
		// second, a2 borrowing what b's 6 have left (4), and b1 in the
		// third.
		{name: "for all of its pods", pods: 4,
			wantRows: []string{"a1=true/2", "a2=false/0", "b0=true/1", "b0b=true/1", "b1=true/4"}},
		{name: "for the most of them", pods: 8, minPods: "2", a2: 2,
			// Its fewest fit in b's 2 left; reclaiming a2 frees 2 more:
			// 4 of its 8 pods; a1 is not reclaimable.
			wantRows: []string{"a1=true/2", "a2=false/0", "b0=true/1", "b0b=true/1", "b1=true/4"}},
		{name: "for the most of them, when not even its fewest fit before", pods: 8, minPods: "2",
			wantRows: []string{"a1=true/2", "a2=false/0", "b0=true/1", "b0b=true/1", "b1=true/4"}},
		{name: "not for all of them: none", pods: 8,
			wantRows: []string{"a1=true/2", "a2=true/4", "b0=true/1", "b0b=true/1", "b1=false/0"}},
		{name: "what the preemption freed held for a preemptor that fits no worker", b1: unplaceable,
			// b1 selects nodes no worker has: it reclaims a2 at the hub
			// and is placed nowhere; its quota stays held, and a2 waits.
			wantRows: []string{"a1=true/2", "a2=false/0", "b0=true/1", "b0b=true/1", "b1=false/0"}},
		{name: "the victim placed again by the next pass with what is left", pods: 2, a2Min: "1",
			// b1 takes 2 of the 4 CPUs a2 borrowed; a2, back in its queue,
			// runs with the 2 left.
			wantRows: []string{"a1=true/2", "a2=true/2", "b0=true/1", "b0b=true/1", "b1=true/2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clusters := []ClusterArg{oneRackCluster(t, dir, "w", 4, "", "100")}
			queues := `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohort: teams
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohort: teams
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 6}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: a, namespace: ml}
spec: {clusterQueue: a}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: b, namespace: ml}
spec: {clusterQueue: b}
`
			a2 := tc.a2
			if a2 == 0 {
				a2 = 4
			}
			b1 := tc.b1
			if b1 == "" {
				b1 = oneCPUJob("b1", "b", tc.pods, tc.minPods)
			}
			hub := write(t, "hub.yaml", oneCPUJob("a1", "a", 2, "")+oneCPUJob("a2", "a", a2, tc.a2Min)+oneCPUJob("b0", "b", 1, "")+oneCPUJob("b0b", "b", 1, "")+
				b1+queues)
			results, err := runFleet(t, clusters, hub)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range results {
				var pods int32
				for _, ps := range r.PodSets {
					pods += ps.Count
				}
				got = append(got, fmt.Sprintf("%s=%v/%d", r.Name, r.Admitted, pods))
			}
			if diff := cmp.Diff(tc.wantRows, got); diff != "" {
				t.Fatalf("rows (-want,+got):\n%s\n%+v", diff, results)
			}
			for _, r := range results {
				if r.Name == "a2" && r.Admitted && tc.a2Min != "" && (!strings.Contains(r.Reason, "preempted at the hub to free quota of ClusterQueue b for ml/b1") ||
					!strings.Contains(r.Reason, ", then placed again: ")) {
					t.Errorf("a2: reason %q does not say it was preempted at the hub, then placed again", r.Reason)
				}
				if !strings.HasPrefix(r.Name, "b") && !r.Admitted && !strings.Contains(r.Reason, "preempted at the hub to free quota of ClusterQueue b for ml/") {
					t.Errorf("%s: reason %q does not say it was preempted at the hub", r.Name, r.Reason)
				}
			}
		})
	}
}

// oneCPUJob is a Job of namespace ml in queue q of pods one-CPU pods, that
// may run with minPods ("": all of them).
func oneCPUJob(name, q string, pods int, minPods string) string {
	ann := ""
	if minPods != "" {
		ann = fmt.Sprintf(", annotations: {kueue.x-k8s.io/job-min-parallelism: %q}", minPods)
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: %s}%s}
spec:
  parallelism: %d
  completions: %d
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
`, name, q, ann, pods, pods)
}

// TestFleetHubDispatched: a hub Workload the input shows dispatched
// (status.placement) is not placed again and holds its queue's quota;
// a preemption at the hub may take it.
func TestFleetHubDispatched(t *testing.T) {
	dir := t.TempDir()
	clusters := []ClusterArg{oneRackCluster(t, dir, "w", 4, "", "100")}
	dispatched := `apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: running, namespace: ml}
spec:
  queueName: train
  podSets:
  - name: main
    count: 6
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  placement: {cluster: w, flavor: f}
---
`
	queues := func(preemption string) string {
		return `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
` + preemption + `  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 10}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
`
	}
	high := strings.Replace(oneCPUJob("urgent", "train", 6, ""), "strata.dev/queue-name: train}", "strata.dev/queue-name: train, strata.dev/priority-class: high}", 1)
	// urgent's equal, queued before running (created in 2026).
	equal := strings.Replace(oneCPUJob("urgent", "train", 6, ""), "metadata: {name: urgent,", "metadata: {creationTimestamp: \"2025-01-01T00:00:00Z\", name: urgent,", 1)
	for name, tc := range map[string]struct {
		preemption string
		job        string // the pending Job (high unless set)
		want       []string
	}{
		"it holds the quota":               {want: []string{"running=true", "urgent=false"}},
		"a preemption at the hub takes it": {preemption: "  preemption: {withinClusterQueue: LowerPriority}\n", want: []string{"running=false", "urgent=true"}},
		"a preemption at the hub takes it when it was queued after the preemptor, of equal priority": {
			preemption: "  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n", job: equal, want: []string{"running=false", "urgent=true"}},
		"nor when it was queued before it": {
			preemption: "  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n", job: strings.Replace(equal, "2025-", "2027-", 1), want: []string{"running=true", "urgent=false"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := high
			if tc.job != "" {
				job = tc.job
			}
			running := strings.Replace(dispatched, "metadata: {name: running,", "metadata: {creationTimestamp: \"2026-01-01T00:00:00Z\", name: running,", 1)
			results, err := runFleet(t, clusters, write(t, "hub.yaml", running+job+queues(tc.preemption)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range results {
				got = append(got, fmt.Sprintf("%s=%v", r.Name, r.Admitted))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("rows (-want,+got):\n%s\n%+v", diff, results)
			}
			if !strings.Contains(results[0].Reason, "dispatched already to w (flavor f)") && !strings.Contains(results[0].Reason, "preempted at the hub") {
				t.Errorf("running: reason %q", results[0].Reason)
			}
			// The table has a row for each, whether or not it has an
			// assignment to show.
			var table bytes.Buffer
			if err := Write(&table, results, "table"); err != nil {
				t.Fatal(err)
			}
			rows := map[string]bool{}
			for line := range strings.Lines(table.String()) {
				if f := strings.Fields(line); len(f) > 1 {
					rows[f[1]] = true
				}
			}
			for _, name := range []string{"running", "urgent"} {
				if !rows[name] {
					t.Errorf("no row for %s in\n%s", name, table.String())
				}
			}
		})
	}
}

// TestFleetServesQueuesInTurn: as the hub serves its ClusterQueues (a head
// of each per round, then the next), a low-priority Job of one queue is
// dispatched before the second high-priority Job of another; under
// admission fair sharing, a hub queue serves first the LocalQueue that
// consumed less.
func TestFleetServesQueuesInTurn(t *testing.T) {
	dir := t.TempDir()
	// 16 CPUs: two 6-pod Jobs fit, a third does not.
	clusters := []ClusterArg{oneRackCluster(t, dir, "w", 4, "", "100")}
	withPriority := func(job string) string {
		return strings.Replace(job, "labels: {", "labels: {strata.dev/priority-class: high, ", 1)
	}
	queues := `apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  flavors: [{name: f}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  flavors: [{name: f}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: a, namespace: ml}
spec: {clusterQueue: a}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: b, namespace: ml}
spec: {clusterQueue: b}
`
	rows := func(results []Result) []string {
		var got []string
		for _, r := range results {
			got = append(got, fmt.Sprintf("%s=%v", r.Name, r.Admitted))
		}
		return got
	}
	hub := write(t, "hub.yaml", withPriority(oneCPUJob("a1", "a", 6, ""))+withPriority(oneCPUJob("a2", "a", 6, ""))+withPriority(oneCPUJob("a3", "a", 6, ""))+
		oneCPUJob("b1", "b", 6, "")+queues)
	results, err := runFleet(t, clusters, hub)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1=true", "a2=false", "a3=false", "b1=true"}, rows(results)); diff != "" {
		t.Errorf("two queues: rows (-want,+got):\n%s", diff)
	}

	// Admission fair sharing at the hub: LocalQueue lq-x consumed 100 CPUs,
	// lq-y one; one Job fits.
	afsQueues := `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  flavors: [{name: f}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: lq-x, namespace: ml}
spec: {clusterQueue: shared}
status:
  fairSharing: {admissionFairSharingStatus: {consumedResources: {cpu: "100"}, lastUpdate: "2026-12-06T00:00:00Z"}}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: lq-y, namespace: ml}
spec: {clusterQueue: shared}
status:
  fairSharing: {admissionFairSharingStatus: {consumedResources: {cpu: "1"}, lastUpdate: "2026-12-06T00:00:00Z"}}
`
	hub = write(t, "hub-afs.yaml", oneCPUJob("x1", "lq-x", 10, "")+oneCPUJob("y1", "lq-y", 10, "")+afsQueues)
	f, err := LoadFleet(clusters, []string{hub})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		afs  *v1beta1.AdmissionFairSharing
		want []string
	}{
		{name: "admission fair sharing off: the older first", want: []string{"x1=true", "y1=false"}},
		{name: "admission fair sharing on: the LocalQueue that consumed less first", afs: &v1beta1.AdmissionFairSharing{},
			want: []string{"x1=false", "y1=true"}},
	} {
		cfg, err := config.LoadHub("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.AdmissionFairSharing = tc.afs
		results, err := RunFleet(f, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, rows(results)); diff != "" {
			t.Errorf("%s: rows (-want,+got):\n%s", tc.name, diff)
		}
	}
}

// TestFleetPodSetsOnDifferentFlavors: as the hub, simulate places a
// workload whose pod sets fit on no one flavor of any worker with each on
// its own flavor of one worker (as that worker's agent admits it), within
// each flavor's quota, and charges each flavor: a later workload finds
// the quota and capacity taken on both.
func TestFleetPodSetsOnDifferentFlavors(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	// Flavor small: one 2-CPU node; flavor big: a rack of two 4-CPU nodes.
	cluster := splitCluster("")
	if err := os.WriteFile(filepath.Join(w, "cluster.yaml"), []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	jobSet := func(name string) string { return splitJobSetYAML(name, "") }
	hubQueue := func(bigQuota string) string {
		return fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: small, resources: [{name: cpu, nominalQuota: 2}]}
    - {name: big, resources: [{name: cpu, nominalQuota: %s}]}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
---
`, bigQuota)
	}
	type outcome struct {
		Name     string
		Admitted bool
		Flavors  string
	}
	for name, tc := range map[string]struct {
		bigQuota string
		want     []outcome
		reasons  []string
	}{
		"each pod set on its flavor; the second waits": {
			bigQuota: "100",
			want:     []outcome{{"first", true, "small,big"}, {"second", false, ""}},
			reasons: []string{"its pod sets fit on no one flavor of any worker, and on different flavors of w",
				"its pod sets fit on no one flavor, but on different flavors of w once each has room there and in its quota"},
		},
		"the big flavor's quota is short of the workers: it waits": {
			bigQuota: "4",
			want:     []outcome{{"first", false, ""}, {"second", false, ""}},
			reasons:  []string{"no flavor of ClusterQueue train has quota left", "no flavor of ClusterQueue train has quota left"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			hub := filepath.Join(t.TempDir(), "hub.yaml")
			if err := os.WriteFile(hub, []byte(hubQueue(tc.bigQuota)+jobSet("first")+jobSet("second")), 0o644); err != nil {
				t.Fatal(err)
			}
			results, err := runFleet(t, []ClusterArg{{Name: "w", Path: w}}, hub)
			if err != nil {
				t.Fatal(err)
			}
			var got []outcome
			for _, r := range results {
				o := outcome{Name: r.Name, Admitted: r.Admitted}
				var flavors []string
				for _, ps := range r.PodSets {
					flavors = append(flavors, ps.Flavor)
				}
				o.Flavors = strings.Join(flavors, ",")
				got = append(got, o)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("results (-want,+got):\n%s", diff)
			}
			for i, want := range tc.reasons {
				if !strings.Contains(results[i].Reason, want) {
					t.Errorf("%s: reason %q does not say %q", results[i].Name, results[i].Reason, want)
				}
			}
		})
	}
}

// TestFleetPodSetsOnDifferentFlavorsPreempting: as the hub, a JobSet whose
// driver fits now only on one flavor and whose workers fit only on
// another, full of lower priorities, goes to the one worker that preempts
// there, each pod set on its own flavor.
func TestFleetPodSetsOnDifferentFlavorsPreempting(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	// Flavor small: one free 2-CPU node; flavor big: a rack of two 4-CPU
	// nodes, each running a workload of priority 1.
	cluster := splitCluster("  preemption: {withinClusterQueue: LowerPriority}\n") + `---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 1
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 50
`
	for _, node := range []string{"b1", "b2"} {
		cluster += fmt.Sprintf(`---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: low-%s, namespace: ml}
spec:
  queueName: train
  priorityClassName: low
  priorityClassSource: strata.dev/workloadpriorityclass
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]}}
status:
  admission:
    clusterQueue: train
    podSetAssignments:
    - name: main
      flavor: big
      count: 1
      topologyAssignment: {levels: [kubernetes.io/hostname], slices: [{domainCount: 1, valuesPerLevel: [{universal: %s}], podCounts: {universal: 1}}]}
`, node, node)
	}
	if err := os.WriteFile(filepath.Join(w, "cluster.yaml"), []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	hub := filepath.Join(dir, "hub.yaml")
	if err := os.WriteFile(hub, []byte(`apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 50
---
`+splitJobSetYAML("train", ", strata.dev/priority-class: urgent")), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := runFleet(t, []ClusterArg{{Name: "w", Path: w}}, hub)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("results: %+v", results)
	}
	r := results[0]
	if r.Admitted || r.Cluster == nil || *r.Cluster != "w" || r.PreemptUpTo == nil || *r.PreemptUpTo != 1 {
		t.Fatalf("result: admitted %v, cluster %v, preempt up to %v; want a preemption up to 1 on w: %s", r.Admitted, r.Cluster, r.PreemptUpTo, r.Reason)
	}
	for _, part := range []string{"pod set driver on small now", "pod set workers on big once others are preempted", "would preempt up to 2 workloads of priority ≤ 1 there"} {
		if !strings.Contains(r.Reason, part) {
			t.Errorf("reason %q does not say %q", r.Reason, part)
		}
	}
}

// splitCluster is a worker's files where flavor small has one 2-CPU node
// and flavor big a rack of two 4-CPU nodes, with ClusterQueue train (its
// spec ending with queueSpec) over both and LocalQueue ml/train.
func splitCluster(queueSpec string) string {
	return `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: small}
spec: {topologyName: t, nodeLabels: {pool: small}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: big}
spec: {topologyName: t, nodeLabels: {pool: big}}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: s1, labels: {pool: small, rack: r1, kubernetes.io/hostname: s1}}, status: {allocatable: {cpu: "2", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: b1, labels: {pool: big, rack: r2, kubernetes.io/hostname: b1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: b2, labels: {pool: big, rack: r2, kubernetes.io/hostname: b2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
  flavors: [{name: small}, {name: big}]
` + queueSpec + `---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
`
}

// splitJobSetYAML is JobSet ml/name of queue train (labels adds to its
// labels: ", key: value"): a driver of one 2-CPU pod and workers of two
// 4-CPU pods, each in a rack.
func splitJobSetYAML(name, labels string) string {
	return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: train%s}}
spec:
  replicatedJobs:
  - name: driver
    replicas: 1
    template:
      spec:
        template:
          metadata:
            annotations: {kueue.x-k8s.io/podset-required-topology: rack}
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "2"}}}]
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          metadata:
            annotations: {kueue.x-k8s.io/podset-required-topology: rack}
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]
---
`, name, labels)
}

// TestFleetPodSetsOnDifferentFlavorsReclaiming: as the hub, a JobSet whose
// queue's quota holds its pod sets on different flavors only once a
// lower-priority workload of the queue gives back its quota on one of
// them reclaims it there, and is placed split.
func TestFleetPodSetsOnDifferentFlavorsReclaiming(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	// A second rack of two 4-CPU big nodes: the capacity is not what
	// keeps it out.
	cluster := splitCluster("") + `---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: b3, labels: {pool: big, rack: r3, kubernetes.io/hostname: b3}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: b4, labels: {pool: big, rack: r3, kubernetes.io/hostname: b4}}, status: {allocatable: {cpu: "4", pods: "110"}}}
`
	if err := os.WriteFile(filepath.Join(w, "cluster.yaml"), []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		preemption string
		want       []string
	}{
		"the running workload's big quota is reclaimed for the workers": {
			preemption: "  preemption: {withinClusterQueue: LowerPriority}\n",
			want:       []string{"running=false", "train=true/small,big"},
		},
		"a queue that preempts nothing: it waits": {
			want: []string{"running=true", "train=false/"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			hub := write(t, "hub.yaml", `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
`+tc.preemption+`  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: small, resources: [{name: cpu, nominalQuota: 2}]}
    - {name: big, resources: [{name: cpu, nominalQuota: 8}]}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {creationTimestamp: "2026-01-01T00:00:00Z", name: running, namespace: ml}
spec:
  queueName: train
  podSets:
  - name: main
    count: 2
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]}}
status:
  placement: {cluster: w, flavor: big}
---
`+splitJobSetYAML("train", ", strata.dev/priority-class: high"))
			results, err := runFleet(t, []ClusterArg{{Name: "w", Path: w}}, hub)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range results {
				row := fmt.Sprintf("%s=%v", r.Name, r.Admitted)
				if r.Name == "train" {
					var flavors []string
					for _, ps := range r.PodSets {
						flavors = append(flavors, ps.Flavor)
					}
					row += "/" + strings.Join(flavors, ",")
				}
				got = append(got, row)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("rows (-want,+got):\n%s\n%+v", diff, results)
			}
			if tc.preemption != "" && !strings.Contains(results[0].Reason, "preempted at the hub") {
				t.Errorf("running: reason %q does not say it was preempted at the hub", results[0].Reason)
			}
		})
	}
}

// TestFleetProvisioningWorker: a Job that fits no worker's nodes now goes
// to the worker whose queue for it has a ProvisioningRequest check on the
// flavor, as the hub (placement.DecideProvisional): it reserves quota
// there alone, with no topology hint; one whose quota is short there
// waits.
func TestFleetProvisioningWorker(t *testing.T) {
	dir := t.TempDir()
	cluster := func(name, checks string) ClusterArg {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		content := `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {rack: r1, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h2, labels: {rack: r1, kubernetes.io/hostname: h2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: AdmissionCheck
metadata: {name: autoscaler}
spec: {controllerName: kueue.x-k8s.io/provisioning-request}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: train}
spec:
  namespaceSelector: {}
` + checks + `  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: "24"}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: train, namespace: ml}
spec: {clusterQueue: train}
`
		if err := os.WriteFile(filepath.Join(p, "cluster.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return ClusterArg{Name: name, Path: p}
	}
	clusters := []ClusterArg{cluster("a", ""), cluster("b", "  admissionChecks: [autoscaler]\n")}
	job := func(name string, pods int) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: train}}
spec:
  parallelism: %d
  completions: %d
  template:
    metadata:
      annotations: {kueue.x-k8s.io/podset-required-topology: rack}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]
---
`, name, pods, pods)
	}
	hub := filepath.Join(dir, "hub.yaml")
	// small fits a's nodes now; wide (16 CPUs in one rack of 8) fits no
	// worker's nodes: b provisions; wider is beyond what is left of b's
	// quota (24 - 16).
	if err := os.WriteFile(hub, []byte(job("small", 2)+job("wide", 4)+job("wider", 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := runFleet(t, clusters, hub)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		line := fmt.Sprintf("%s -> %s", r.Name, ptr.Deref(r.Cluster, ""))
		for _, ps := range r.PodSets {
			line += fmt.Sprintf(" delayed=%v domains=%d", ps.DelayedTopology, len(ps.Domains))
		}
		got = append(got, line)
	}
	want := []string{"small -> a delayed=false domains=1", "wide -> b delayed=true domains=0", "wider -> "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
	if r := results[1]; !strings.Contains(r.Reason, "b/f: its nodes cannot hold it now, and its ClusterQueue there provisions nodes for it") {
		t.Errorf("reason %q does not say b provisions nodes for it", r.Reason)
	}
}
