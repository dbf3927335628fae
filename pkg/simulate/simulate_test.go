package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"

	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/tas"
)

const examples = "../../docs/examples/simulate"

func hostsOf(r Result) map[string]int32 {
	out := map[string]int32{}
	for _, ps := range r.PodSets {
		for _, d := range ps.Domains {
			out[d.Values[len(d.Values)-1]] += d.Count
		}
	}
	return out
}

func TestExamples(t *testing.T) {
	in, err := Load(examples)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(exampleOutcomes(), outcomes(results)); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
}

// outcomes are the hosts of each admitted result, the reason of the
// others, by name.
func outcomes(results []Result) map[string]any {
	got := map[string]any{}
	for _, r := range results {
		if r.Admitted {
			got[r.Name] = hostsOf(r)
		} else {
			got[r.Name] = r.Reason
		}
	}
	return got
}

// invalidKinds is one invalid job of each kind (a slice size that is not
// a number of pods), for simulate to mark as the intake does.
const invalidKinds = `apiVersion: batch/v1
kind: Job
metadata: {name: bad-job, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  parallelism: 2
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
        kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
        kueue.x-k8s.io/podset-slice-size: "two"
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "2"}}}]
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: bad-jobset, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 2
        template:
          metadata:
            annotations:
              kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
              kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
              kueue.x-k8s.io/podset-slice-size: "two"
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "2"}}}]
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: bad-lws, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
      metadata:
        annotations:
          kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
          kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
          kueue.x-k8s.io/podset-slice-size: "two"
      spec:
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: bad-mpijob, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: l, image: busybox, resources: {requests: {cpu: "1"}}}]
    Worker:
      replicas: 2
      template:
        metadata:
          annotations:
            kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
            kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
            kueue.x-k8s.io/podset-slice-size: "two"
        spec:
          containers: [{name: w, image: busybox, resources: {requests: {cpu: "1"}}}]
`

// TestInvalidJobsOfEveryKind: an invalid job of any kind is a row marked
// invalid, as the intake marks its Workload, and the jobs after it are
// placed as they would be without it.
func TestInvalidJobsOfEveryKind(t *testing.T) {
	in, err := Load(write(t, "invalid.yaml", invalidKinds), examples)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	const why = `invalid: spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: "two": must be a whole number of pods, at least 1`
	want := exampleOutcomes()
	invalid := map[string]bool{}
	for _, r := range results {
		if r.Invalid {
			invalid[r.Name] = true
		}
	}
	for _, name := range []string{"bad-job", "bad-jobset", "bad-lws-0", "bad-mpijob"} {
		if !invalid[name] {
			t.Errorf("%s: not marked invalid", name)
		}
	}
	got := outcomes(results)
	for name := range invalid {
		reason, _ := got[name].(string)
		if !strings.HasPrefix(reason, "invalid: ") || !strings.HasSuffix(reason, `Invalid value: "two": must be a whole number of pods, at least 1`) {
			t.Errorf("%s: reason %q, want %q (or its path in that kind)", name, reason, why)
		}
		delete(got, name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the valid jobs (-want,+got):\n%s", diff)
	}
	if n := Invalid(results); n != 4 {
		t.Errorf("Invalid(results) = %d, want 4", n)
	}
}

// exampleOutcomes is where docs/examples/simulate's workloads go.
func exampleOutcomes() map[string]any {
	return map[string]any{
		// Every rack has 32 GPUs; b1/rack-1 comes first among equals.
		"rack-pretrain": map[string]int32{"b1-r1-h1": 2, "b1-r1-h2": 2, "b1-r1-h3": 2, "b1-r1-h4": 2},
		// 48 GPUs: no rack, so the tightest block: block-2 (block-1 is half used).
		"block-finetune": map[string]int32{"b2-r1-h1": 2, "b2-r1-h2": 2, "b2-r1-h3": 2, "b2-r1-h4": 2, "b2-r2-h1": 2, "b2-r2-h2": 2},
		// Slices of 4 pods x 2 GPUs fill whole hosts; block-2 has the two left.
		"sliced":             map[string]int32{"b2-r2-h3": 4, "b2-r2-h4": 4},
		"too-big-for-a-rack": "flavor tas-gpu: rack required: the best rack fits 8 of 10 pods; limited by nvidia.com/gpu (4 nodes)",
		// jobsets.yaml, KEP-2724's two-level JobSet: one block (block-1 has
		// the free rack), each Job's 4 pods of 2 GPUs on one host.
		"two-level": map[string]int32{"b1-r2-h1": 4, "b1-r2-h2": 4},
		// A leader (CPU only) and 2 Jobs of 2 workers, each pod set in a
		// rack of its own: the leader in the tightest rack that holds it.
		"leader-workers": map[string]int32{"b2-r2-h3": 1, "b1-r2-h3": 2, "b1-r2-h4": 2},
		// lws.yaml, KEP-2724's LeaderWorkerSet: each group of a leader and
		// 2 workers (2 CPUs each) on one host, the hosts with exactly 6
		// CPUs left (b1-r1-h1 has 4: a DaemonSet pod and rack-pretrain's).
		"tas-example-lws-0": map[string]int32{"b1-r1-h2": 3},
		"tas-example-lws-1": map[string]int32{"b1-r1-h3": 3},
		// mpijobs.yaml, KEP-2724's MPIJob with runLauncherAsWorker: the
		// launcher and its 2 workers (2 CPUs each) grouped in one rack,
		// the one with the fewest workers beside the launcher that holds
		// all three (the rest of b1-r1 after the LeaderWorkerSet's
		// groups), all on b1-r1-h4, the host that holds them all.
		"pi": map[string]int32{"b1-r1-h4": 3},
	}
}

func TestJSONShape(t *testing.T) {
	in, err := Load(filepath.Join(examples, "cluster.yaml"), filepath.Join(examples, "jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, results[:1], "json"); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{
		"name": "rack-pretrain", "namespace": "ml", "admitted": true, "reason": "",
		"podSets": []any{map[string]any{
			"name": "main", "flavor": "tas-gpu", "count": float64(8),
			"levels": []any{"kubernetes.io/hostname"},
			"domains": []any{
				map[string]any{"values": []any{"b1-r1-h1"}, "count": float64(2)},
				map[string]any{"values": []any{"b1-r1-h2"}, "count": float64(2)},
				map[string]any{"values": []any{"b1-r1-h3"}, "count": float64(2)},
				map[string]any{"values": []any{"b1-r1-h4"}, "count": float64(2)},
			},
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want,+got):\n%s", diff)
	}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadInput(t *testing.T) {
	cluster := filepath.Join(examples, "cluster.yaml")
	cases := map[string]struct {
		files   func(t *testing.T) []string
		wantErr string // from Load or Run
		reason  string // of the only workload
	}{
		"an unknown kind": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n")}
			},
			wantErr: "svc.yaml: document 1: Service is not read by simulate",
		},
		"an unregistered kind": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "x.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: x\n")}
			},
			wantErr: "x.yaml: document 1: no kind \"Widget\" is registered",
		},
		"malformed YAML": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "bad.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata: [\n")}
			},
			wantErr: "bad.yaml: document 1:",
		},
		"a flavor whose topology is missing": {
			files: func(t *testing.T) []string {
				return []string{write(t, "f.yaml", "apiVersion: strata.dev/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: f\nspec:\n  nodeLabels: {a: b}\n  topologyName: nope\n")}
			},
			wantErr: `ResourceFlavor "f" uses Topology "nope", which is not in the input`,
		},
		"an invalid annotation": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "job.yaml", `apiVersion: batch/v1
kind: Job
metadata: {name: odd, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  parallelism: 3
  template:
    metadata:
      annotations:
        strata.dev/podset-required-topology: cloud.provider.com/topology-block
        strata.dev/podset-slice-required-topology: kubernetes.io/hostname
        strata.dev/podset-slice-size: "two"
    spec:
      containers: [{name: c, image: busybox}]
`)}
			},
			reason: `invalid: spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "two": must be a whole number of pods, at least 1`,
		},
		"a level the topology does not have": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "job.yaml", `apiVersion: batch/v1
kind: Job
metadata: {name: zone, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  template:
    metadata:
      annotations:
        strata.dev/podset-required-topology: topology.kubernetes.io/zone
    spec:
      containers: [{name: c, image: busybox}]
`)}
			},
			reason: `flavor tas-gpu: pod set main: podset-required-topology: "topology.kubernetes.io/zone" is not a level of Topology "default"`,
		},
		"an unknown queue": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "job.yaml", `apiVersion: batch/v1
kind: Job
metadata: {name: lost, namespace: ml, labels: {strata.dev/queue-name: nope}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
`)}
			},
			reason: `neither LocalQueue ml/nope nor ClusterQueue "nope" is in the input (ClusterQueues: training)`,
		},
		"a LocalQueue whose ClusterQueue is not in the input": {
			files: func(t *testing.T) []string {
				return []string{cluster, write(t, "job.yaml", `apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: team-a, namespace: ml}
spec: {clusterQueue: gone}
---
apiVersion: batch/v1
kind: Job
metadata: {name: lost, namespace: ml, labels: {strata.dev/queue-name: team-a}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
`)}
			},
			reason: `ClusterQueue "gone" of LocalQueue ml/team-a is not in the input (ClusterQueues: training)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := Load(tc.files(t)...)
			var results []Result
			if err == nil {
				results, err = Run(in, tas.DefaultOptions())
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 || results[0].Admitted || !strings.HasPrefix(results[0].Reason, tc.reason) {
				t.Fatalf("results = %+v, want one not admitted with reason %q", results, tc.reason)
			}
		})
	}
}

// TestLocalQueue checks that a Job's queue label names a LocalQueue of its
// namespace, which leads to its ClusterQueue's flavors.
func TestLocalQueue(t *testing.T) {
	cluster := filepath.Join("..", "..", "docs", "examples", "simulate", "cluster.yaml")
	jobs := write(t, "job.yaml", `apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: team-a, namespace: ml}
spec: {clusterQueue: training}
---
apiVersion: batch/v1
kind: Job
metadata: {name: through-lq, namespace: ml, labels: {strata.dev/queue-name: team-a}}
spec:
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
    spec:
      containers: [{name: c, image: busybox}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: held, namespace: ml}
spec: {clusterQueue: training, stopPolicy: Hold}
---
apiVersion: batch/v1
kind: Job
metadata: {name: through-held-lq, namespace: ml, labels: {strata.dev/queue-name: held}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: other-namespace, namespace: web, labels: {strata.dev/queue-name: team-a}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
`)
	in, err := Load(cluster, jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name     string
		Admitted bool
		Reason   string
	}
	var got []outcome
	for _, r := range results {
		got = append(got, outcome{r.Name, r.Admitted, r.Reason})
	}
	want := []outcome{
		{Name: "through-lq", Admitted: true},
		{Name: "through-held-lq", Reason: "LocalQueue held is stopped (stopPolicy Hold); its workloads wait until the policy is None"},
		{Name: "other-namespace", Reason: `neither LocalQueue web/team-a nor ClusterQueue "team-a" is in the input (ClusterQueues: training)`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []Result{
		{Name: "a", Namespace: "ns", Admitted: true, PodSets: []PodSetResult{{Name: "main", Flavor: "f", Count: 3,
			Domains: []Domain{{Values: []string{"b1", "r1"}, Count: 2}, {Values: []string{"b1", "r2"}, Count: 1}}}}},
		{Name: "b", Namespace: "ns", Reason: "no room"},
	}, "table")
	if err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE  NAME  ADMITTED  FLAVOR  PODSET  PODS  PLACEMENT (DOMAIN=PODS [RANKS])
ns         a     true      f       main    3     b1/r1=2 [0-1], b1/r2=1 [2]
ns         b     false     -       -       -     no room
`
	if diff := cmp.Diff(want, buf.String(), cmpopts.AcyclicTransformer("lines", func(s string) []string { return strings.Split(s, "\n") })); diff != "" {
		t.Errorf("table (-want,+got):\n%s", diff)
	}
}

func TestPodSetGroup(t *testing.T) {
	wl := write(t, "lws.yaml", `apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: lws, namespace: ml}
spec:
  queueName: training
  podSets:
  - name: leader
    count: 1
    template:
      spec:
        containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "8"}}}]
    topologyRequest: {required: cloud.provider.com/topology-rack, podSetGroupName: replica}
  - name: workers
    count: 3
    template:
      spec:
        containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "8"}}}]
    topologyRequest: {required: cloud.provider.com/topology-rack, podSetGroupName: replica}
`)
	in, err := Load(filepath.Join(examples, "cluster.yaml"), wl)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if !r.Admitted {
		t.Fatalf("not admitted: %s", r.Reason)
	}
	racks := map[string]bool{}
	for _, ps := range r.PodSets {
		for _, d := range ps.Domains {
			racks[d.Values[0][:len("b1-r1")]] = true
		}
	}
	if len(racks) != 1 {
		t.Errorf("leader and workers are in racks %v, want one", racks)
	}
}

// TestKueueSlicesAlone runs Kueue manifests whose only topology annotations
// are slices (alone, or with podset-unconstrained-topology): unconstrained
// requests in whole slices, each in the tightest rack that holds it.
func TestKueueSlicesAlone(t *testing.T) {
	jobs := write(t, "jobs.yaml", `apiVersion: batch/v1
kind: Job
metadata: {name: slices-alone, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
        kueue.x-k8s.io/podset-slice-size: "2"
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "4"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: slices-unconstrained, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-unconstrained-topology: "true"
        kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
        kueue.x-k8s.io/podset-slice-size: "2"
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "4"}}}]
`)
	in, err := Load(filepath.Join(examples, "cluster.yaml"), jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, r := range results {
		if r.Admitted {
			got[r.Name] = hostsOf(r)
		} else {
			got[r.Name] = r.Reason
		}
	}
	want := map[string]any{
		// No host holds two slices; all racks are equal, so rack-1 of block-1.
		"slices-alone": map[string]int32{"b1-r1-h1": 2, "b1-r1-h2": 2},
		// That rack now has exactly two slices left: the tightest fit.
		"slices-unconstrained": map[string]int32{"b1-r1-h3": 2, "b1-r1-h4": 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
}

// TestPreemption runs docs/examples/preemption, as the user guide shows it.
func TestPreemption(t *testing.T) {
	// r1h1 and r2h1 run low-priority work (one given where, one placed),
	// r1h2 high-priority work: a rack-required high Job of 8 pods can only
	// take rack r2, preempting the low work there and not r1's.
	in, err := Load(filepath.Join("..", "..", "docs", "examples", "preemption"))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name     string
		Admitted bool
		Preempts []string
		Hosts    map[string]int32
		Reason   string
	}
	var got []outcome
	for _, r := range results {
		o := outcome{Name: r.Name, Admitted: r.Admitted, Preempts: r.Preempts, Reason: r.Reason}
		if r.Admitted {
			o.Hosts = hostsOf(r)
		}
		got = append(got, o)
	}
	want := []outcome{
		{Name: "big-high", Admitted: true, Preempts: []string{"ml/low-placed"}, Hosts: map[string]int32{"r2h1": 4, "r2h2": 4}},
		// Quota and racks are full; only big-high's rack would do, and it
		// has a higher priority.
		{Name: "big-low", Reason: "flavor f: quota: cpu needs 8, more than is left of the quota of 16; cannot preempt: flavor f: would need to preempt 1 workload of priority ≥ own"},
		// The victim goes back to its queue, as on the agent, and waits:
		// big-high's rack was the room it had.
		{Name: "low-placed", Reason: "was running, preempted to make room for ml/big-high; flavor f: quota: cpu needs 4, more than is left of the quota of 16; cannot preempt: flavor f: would need to preempt 1 workload of priority ≥ own"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
	var table bytes.Buffer
	if err := Write(&table, results, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "would preempt ml/low-placed") {
		t.Errorf("the table does not say what big-high would preempt:\n%s", table.String())
	}
}

// TestFairSharingExample runs docs/examples/fair-sharing with the agent
// configuration of docs/examples/config/agent-fair-sharing.yaml, as the
// admin guide shows it, and without it.
func TestFairSharingExample(t *testing.T) {
	for _, fair := range []bool{true, false} {
		in, err := Load(filepath.Join("..", "..", "docs", "examples", "fair-sharing"))
		if err != nil {
			t.Fatal(err)
		}
		if fair {
			cfg, err := config.LoadAgent(filepath.Join("..", "..", "docs", "examples", "config", "agent-fair-sharing.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			in.FairSharing = cfg.FairSharing
		}
		results, err := Run(in, tas.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range results {
			switch {
			case r.Admitted:
				got[r.Name] = "preempts " + strings.Join(r.Preempts, ",")
			case strings.Contains(r.Reason, "fair sharing: once admitted, ClusterQueue team-a's share would not be below the share of team-b"):
				got[r.Name] = "refused by fair sharing"
			case strings.Contains(r.Reason, "may preempt only within it"):
				got[r.Name] = "may not preempt while borrowing"
			default:
				got[r.Name] = r.Reason
			}
		}
		want := map[string]string{"a1": "preempts ml/b3", "a2": "refused by fair sharing",
			// The victim waits in its queue again.
			"b3": "was running, preempted to make room for ml/a1; flavor f: quota: cpu needs 4, more than is left of the nominal quota of 6 and of what cohort fair lends"}
		if !fair {
			want = map[string]string{"a1": "may not preempt while borrowing", "a2": "may not preempt while borrowing"}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fair sharing %v: results (-want,+got):\n%s", fair, diff)
		}
	}
}

// TestAdmissionFairSharingExample runs docs/examples/admission-fair-sharing
// with the agent configuration of
// docs/examples/config/agent-admission-fair-sharing.yaml, as the admin
// guide shows it, and without it.
func TestAdmissionFairSharingExample(t *testing.T) {
	for _, afs := range []bool{true, false} {
		in, err := Load(filepath.Join("..", "..", "docs", "examples", "admission-fair-sharing"))
		if err != nil {
			t.Fatal(err)
		}
		if afs {
			cfg, err := config.LoadAgent(filepath.Join("..", "..", "docs", "examples", "config", "agent-admission-fair-sharing.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			in.AdmissionFairSharing = cfg.AdmissionFairSharing
		}
		results, err := Run(in, tas.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range results {
			got[r.Name] = r.Admitted
		}
		want := map[string]bool{"research-urgent": true, "research-big": false, "web-1": true, "web-2": true, "web-3": true}
		if !afs {
			want = map[string]bool{"research-urgent": true, "research-big": true, "web-1": true, "web-2": true, "web-3": false}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("admission fair sharing %v: admitted (-want,+got):\n%s", afs, diff)
		}
	}
}

// TestFlavorFungibility: simulate walks a ClusterQueue's flavors as the
// agent does. With whenCanPreempt Preempt and whenCanBorrow
// TryNextFlavor, preempting a lower-priority workload on the second flavor
// comes before borrowing on the first.
func TestFlavorFungibility(t *testing.T) {
	dir := t.TempDir()
	cluster := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: p2}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 2}]}, {name: f2, resources: [{name: cpu, nominalQuota: 10}]}]
  preemption: {withinClusterQueue: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 10}]}, {name: f2, resources: [{name: cpu, nominalQuota: 0}]}]
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: p1h1, labels: {pool: p1, rack: r1, kubernetes.io/hostname: p1h1}}, status: {allocatable: {cpu: "16", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: p2h1, labels: {pool: p2, rack: r2, kubernetes.io/hostname: p2h1}}, status: {allocatable: {cpu: "10", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: a1, namespace: ml}
spec:
  queueName: a
  podSets:
  - name: main
    count: 10
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, flavor: f2, count: 10}
---
apiVersion: batch/v1
kind: Job
metadata: {name: pre, namespace: ml, labels: {strata.dev/queue-name: a, strata.dev/priority-class: high}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r := resultNamed(t, results, "pre")
	// The victim, back in its queue, borrows f1 from b (TryNextFlavor:
	// f2 is pre's now, and a1 may not preempt it).
	if a1 := resultNamed(t, results, "a1"); !a1.Admitted || a1.PodSets[0].Flavor != "f1" || a1.Reason != "was running, preempted to make room for ml/pre, then admitted again" {
		t.Errorf("a1 = %+v, want admitted again on f1, saying so", a1)
	}
	var table bytes.Buffer
	if err := Write(&table, results, "table"); err != nil {
		t.Fatal(err)
	}
	if want := "p1h1=10 [0-9]; was running, preempted to make room for ml/pre, then admitted again"; !strings.Contains(table.String(), want) {
		t.Errorf("the table does not say a1 was admitted again (%q):\n%s", want, table.String())
	}
	var flavor string
	if len(r.PodSets) > 0 {
		flavor = r.PodSets[0].Flavor
	}
	type outcome struct {
		Admitted bool
		Flavor   string
		Preempts []string
	}
	if diff := cmp.Diff(outcome{Admitted: true, Flavor: "f2", Preempts: []string{"ml/a1"}}, outcome{r.Admitted, flavor, r.Preempts}); diff != "" {
		t.Errorf("pre (-want,+got):\n%s (reason %q)", diff, r.Reason)
	}
}

// TestDefaultPriorityClass: a Job that names no priority class takes the
// value of the PriorityClass marked globalDefault, as the agent's intake
// gives it: here it preempts a running workload of priority 0 in its
// queue (withinClusterQueue: LowerPriority).
func TestDefaultPriorityClass(t *testing.T) {
	dir := t.TempDir()
	cluster := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: cluster-default}
value: 1000
globalDefault: true
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: old, namespace: ml}
spec:
  queueName: q
  priority: 0
  podSets:
  - name: main
    count: 4
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: main, flavor: f, count: 4}
---
apiVersion: batch/v1
kind: Job
metadata: {name: plain, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if r := resultNamed(t, results, "plain"); !r.Admitted || !slices.Equal(r.Preempts, []string{"ml/old"}) {
		t.Errorf("results = %+v, want plain admitted, preempting ml/old", results)
	}
}

// TestFinishedAndInactive: as the agent, a Finished Workload holds no
// capacity though its admission stays, a completed Job is not placed, and
// a deactivated Workload is not admitted.
func TestFinishedAndInactive(t *testing.T) {
	dir := t.TempDir()
	cluster := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: finished, namespace: ml}
spec:
  queueName: q
  podSets:
  - name: main
    count: 4
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: main, flavor: f, count: 4}
  conditions:
  - {type: Finished, status: "True", reason: Succeeded, message: done, lastTransitionTime: "2026-12-01T10:00:00Z"}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: held, namespace: ml}
spec:
  queueName: q
  active: false
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: completed, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
status:
  conditions:
  - {type: Complete, status: "True"}
---
apiVersion: batch/v1
kind: Job
metadata: {name: next, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range results {
		got[r.Name] = r.Admitted
	}
	if diff := cmp.Diff(map[string]bool{"held": false, "next": true}, got); diff != "" {
		t.Errorf("admitted by name (-want,+got):\n%s\n%+v", diff, results)
	}
}

// TestNamespaceSelector: a ClusterQueue admits the namespaces its
// namespaceSelector selects, as the agent's intake: none without one; a
// namespace in the input by its labels; one not in the input is not
// checked against a selector that names labels.
func TestNamespaceSelector(t *testing.T) {
	base := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other, labels: {team: other}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: %s, labels: {strata.dev/queue-name: q}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
`
	cases := map[string]struct {
		namespace, selector string
		wantReason          string
	}{
		"no selector: no namespace":                      {namespace: "ml", wantReason: `ClusterQueue "q" admits no namespace (it has no namespaceSelector)`},
		"an empty selector: every namespace":             {namespace: "ml", selector: "namespaceSelector: {}"},
		"a namespace in the input, not selected":         {namespace: "other", selector: "namespaceSelector: {matchLabels: {team: ml}}", wantReason: `ClusterQueue "q" does not admit namespace "other" (namespaceSelector team=ml)`},
		"a namespace not in the input: not judged":       {namespace: "ml", selector: "namespaceSelector: {matchLabels: {team: ml}}"},
		"selected by the name label the API server sets": {namespace: "other", selector: "namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: other}}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), fmt.Appendf(nil, base, tc.namespace, tc.selector), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 || results[0].Admitted != (tc.wantReason == "") || tc.wantReason != "" && results[0].Reason != tc.wantReason {
				t.Errorf("results = %+v, want reason %q", results, tc.wantReason)
			}
		})
	}
}

// TestDuplicateObjects: an object given twice (a file named twice, or in
// two directories) is an error naming both places, not counted twice.
func TestDuplicateObjects(t *testing.T) {
	cluster := filepath.Join(examples, "cluster.yaml")
	_, err := Load(cluster, cluster)
	if err == nil || !strings.Contains(err.Error(), "is also in") {
		t.Errorf("Load(the same file twice) error = %v, want one saying the object is also in the first", err)
	}
	// Jobs named by generateName (Kueue's samples) have no name yet: each
	// is its own.
	dir := t.TempDir()
	job := "apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: sample-, namespace: ml, labels: {strata.dev/queue-name: q}}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox}]\n"
	if err := os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(job+"---\n"+job), 0o600); err != nil {
		t.Fatal(err)
	}
	if in, err := Load(dir); err != nil || len(in.Workloads) != 2 {
		t.Errorf("Load(two Jobs named by generateName) = %v, want both", err)
	}
}

// TestStrictFIFO: in a StrictFIFO ClusterQueue nothing goes ahead of a
// workload that does not fit, as the agent serves it; in BestEffortFIFO
// the next one does.
func TestStrictFIFO(t *testing.T) {
	base := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "8", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  queueingStrategy: %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: big, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 16
  completions: 16
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: small, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	for strategy, wantSmall := range map[string]bool{"StrictFIFO": false, "BestEffortFIFO": true} {
		t.Run(strategy, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), fmt.Appendf(nil, base, strategy), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 2 || results[0].Admitted || results[1].Admitted != wantSmall {
				t.Errorf("results = %+v, want big not admitted, small admitted %t", results, wantSmall)
			}
			if !wantSmall && !strings.Contains(results[1].Reason, "waiting in StrictFIFO ClusterQueue q") {
				t.Errorf("small's reason = %q", results[1].Reason)
			}
		})
	}
}

// TestClusterDump: a dump of a live cluster holds an admitted Workload,
// its Job and its running pods; as the agent, the pods count through the
// Workload's admission, once, and the Job is not placed again.
func TestClusterDump(t *testing.T) {
	dir := t.TempDir()
	cluster := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "8", pods: "110"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: job-train, namespace: ml}
spec:
  queueName: q
  podSets:
  - name: main
    count: 4
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: main, flavor: f, count: 4}
---
apiVersion: v1
kind: PodList
items:
%s
---
apiVersion: batch/v1
kind: Job
metadata: {name: next, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	var pods strings.Builder
	for i := range 4 {
		fmt.Fprintf(&pods, "- {apiVersion: v1, kind: Pod, metadata: {name: train-%d, namespace: ml, labels: {strata.dev/workload: job-train, strata.dev/tas: \"true\"}}, spec: {nodeName: h1, containers: [{name: c, image: busybox, resources: {requests: {cpu: \"1\"}}}]}, status: {phase: Running}}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), fmt.Appendf(nil, cluster, pods.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Name != "next" || !results[0].Admitted {
		t.Errorf("results = %+v, want next alone, admitted beside train", results)
	}
}

// TestJobWithoutQueueLabel: with queues in the input, a Job without the
// queue label is not Strata's: the agent leaves it alone, so it is
// neither placed nor invalid.
func TestJobWithoutQueueLabel(t *testing.T) {
	dir := t.TempDir()
	cluster := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "8", pods: "110"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: plain, namespace: ml}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Admitted || results[0].Invalid || !strings.Contains(results[0].Reason, "not Strata's") {
		t.Errorf("results = %+v, want plain neither admitted nor invalid, not Strata's", results)
	}
}

// TestHubCopies: simulate answers for a hub's copy as the agent does: it
// is tried on the flavor the hub pinned alone, and it preempts only when
// the hub marked it, up to the priority it marked.
func TestHubCopies(t *testing.T) {
	example := filepath.Join("..", "..", "docs", "examples", "preemption")
	copyJob := func(annotations string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: copy
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/priority-class: high, strata.dev/hub-workload-uid: u1}
  annotations: {%s}
spec:
  parallelism: 8
  completions: 8
  template:
    metadata:
      annotations: {strata.dev/podset-required-topology: rack}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`, annotations)
	}
	type outcome struct {
		Admitted bool
		Preempts []string
		Reason   string
	}
	for name, tc := range map[string]struct {
		annotations string
		want        outcome
	}{
		"not marked: it waits": {want: outcome{Reason: "flavor f: quota: cpu needs 8, more than is left of the quota of 16"}},
		"marked below the victims' priority: it waits": {annotations: "strata.dev/preempt-up-to: '0'",
			want: outcome{Reason: "flavor f: quota: cpu needs 8, more than is left of the quota of 16; cannot preempt: flavor f: "}},
		"marked up to the victims' priority: it preempts": {annotations: "strata.dev/preempt-up-to: '1'",
			want: outcome{Admitted: true, Preempts: []string{"ml/low-placed"}}},
	} {
		t.Run(name, func(t *testing.T) {
			in, err := Load(filepath.Join(example, "cluster.yaml"), filepath.Join(example, "running.yaml"), write(t, "copy.yaml", copyJob(tc.annotations)))
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			r := resultNamed(t, results, "copy")
			got := outcome{Admitted: r.Admitted, Preempts: r.Preempts, Reason: r.Reason}
			if strings.HasPrefix(got.Reason, tc.want.Reason) {
				got.Reason = tc.want.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}

	twoFlavors := twoFlavorsCluster
	pinned := func(name, flavor string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/hub-workload-uid: %s}
  annotations: {strata.dev/flavor: %s}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
`, name, name, flavor)
	}
	// A JobSet copy whose pod sets the hub placed on different flavors:
	// each on its own, though both fit on f1.
	split := func(name, flavors string) string {
		return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/hub-workload-uid: %s}
  annotations: {strata.dev/pod-set-flavors: "%s"}
spec:
  replicatedJobs:
  - name: launcher
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
  - name: workers
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
`, name, name, flavors)
	}
	in, err := Load(write(t, "pinned.yaml", twoFlavors+pinned("on-f2", "f2")+pinned("on-f3", "f3")+
		split("split", "launcher=f2,workers=f1")+split("split-f3", "launcher=f1,workers=f3")+split("split-partly", "launcher=f1")))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type placed struct {
		Name, Flavor, Reason string
	}
	var got []placed
	for _, r := range results {
		p := placed{Name: r.Name, Reason: r.Reason}
		if r.Admitted {
			var flavors []string
			for _, ps := range r.PodSets {
				flavors = append(flavors, ps.Flavor)
			}
			p.Flavor = strings.Join(flavors, ",")
		}
		got = append(got, p)
	}
	want := []placed{
		{Name: "on-f2", Flavor: "f2"}, // f1 comes first and is free
		{Name: "on-f3", Reason: `the hub pinned flavor "f3" (annotation strata.dev/flavor), which ClusterQueue "q" does not have`},
		{Name: "split", Flavor: "f2,f1"},
		{Name: "split-f3", Reason: `the hub placed pod set workers on flavor "f3" (annotation strata.dev/pod-set-flavors), which ClusterQueue "q" does not have`},
		{Name: "split-partly", Reason: `annotation strata.dev/pod-set-flavors="launcher=f1": no flavor for pod set workers`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pinned copies (-want,+got):\n%s", diff)
	}
}

// TestQueueOrder: simulate serves the queues as the agent does, and as
// Kueue: a ClusterQueue's workloads by priority, then in the order they
// were queued (the input's, without creation times); the heads of every
// queue in turn, not one queue's whole backlog first; and in a round, the
// heads that fit within their queue's nominal quota before those that
// must borrow. Rows stay in the input's order.
func TestQueueOrder(t *testing.T) {
	cluster := `apiVersion: strata.dev/v1beta1
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
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
`
	queueDoc := func(name, cohort, quota string) string {
		return fmt.Sprintf(`apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  cohort: %q
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: %s}]}]
---
`, name, cohort, quota)
	}
	job := func(name, queue, cpu string, high bool) string {
		class := ""
		if high {
			class = ", strata.dev/priority-class: high"
		}
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: %s%s}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "%s"}}}]
---
`, name, queue, class, cpu)
	}
	cases := map[string]struct {
		input string
		want  map[string]bool // admitted, by name
		order []string        // of the rows
	}{
		"within a queue, the higher priority first": {
			input: queueDoc("q", "", "8") + job("low", "q", "4", false) + job("high", "q", "4", true) + job("next", "q", "1", false),
			want:  map[string]bool{"low": false, "high": true, "next": false},
			order: []string{"low", "high", "next"},
		},
		"the heads of every queue in turn": {
			input: queueDoc("a", "", "4") + queueDoc("b", "", "4") + job("a1", "a", "2", false) + job("a2", "a", "2", false) + job("b1", "b", "2", false),
			want:  map[string]bool{"a1": true, "a2": false, "b1": true},
			order: []string{"a1", "a2", "b1"},
		},
		"in a round, a head within its nominal quota before one that must borrow": {
			input: queueDoc("a", "c", "2") + queueDoc("b", "c", "2") + job("a1", "a", "4", true) + job("b1", "b", "2", false),
			want:  map[string]bool{"a1": false, "b1": true},
			order: []string{"a1", "b1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := Load(write(t, "in.yaml", cluster+tc.input))
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			var order []string
			for _, r := range results {
				got[r.Name] = r.Admitted
				order = append(order, r.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.order, order); diff != "" {
				t.Errorf("rows (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFlavorNodeTaints: as in Kueue, a flavor whose nodeTaints a job does
// not tolerate (with the flavor's tolerations) cannot hold it: the next
// flavor is tried.
func TestFlavorNodeTaints(t *testing.T) {
	in := `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: tainted}
spec:
  topologyName: t
  nodeLabels: {pool: one}
  nodeTaints: [{key: reserved, value: "true", effect: NoSchedule}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: open}
spec: {topologyName: t, nodeLabels: {pool: two}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: tainted, resources: [{name: cpu, nominalQuota: 8}]}
    - {name: open, resources: [{name: cpu, nominalQuota: 8}]}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {pool: one, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h2, labels: {pool: two, kubernetes.io/hostname: h2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: plain, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: tolerant, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  template:
    spec:
      tolerations: [{key: reserved, operator: Exists}]
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	loaded, err := Load(write(t, "in.yaml", in))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		if r.Admitted {
			got[r.Name] = r.PodSets[0].Flavor
		}
	}
	if diff := cmp.Diff(map[string]string{"plain": "open", "tolerant": "tainted"}, got); diff != "" {
		t.Errorf("flavors (-want,+got):\n%s", diff)
	}
}

// TestCohorts: simulate reads Cohort objects as the agent does: a queue
// of no quota borrows its cohort's, through a tree; a cycle of parents
// admits nothing.
func TestCohorts(t *testing.T) {
	base := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "16", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: Cohort
metadata: {name: left}
spec:
  parentName: %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: strata.dev/v1beta1
kind: Cohort
metadata: {name: org}
spec:
  parentName: %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  cohort: left
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 0}]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: six, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 6
  completions: 6
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: one, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	cases := map[string]struct {
		leftParent, orgParent string
		want                  []bool
		wantReason            string
	}{
		"the tree's quota: 4 in left, 2 in org":   {leftParent: "org", orgParent: `""`, want: []bool{true, false}, wantReason: "what cohort left lends"},
		"a cycle of parents admits nothing":       {leftParent: "org", orgParent: "left", want: []bool{false, false}, wantReason: "is on a cycle of Cohort parents"},
		"left alone: 4 only, six does not fit it": {leftParent: `""`, orgParent: `""`, want: []bool{false, true}, wantReason: "more than the whole quota"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), fmt.Appendf(nil, base, tc.leftParent, tc.orgParent), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			var got []bool
			for _, r := range results {
				got = append(got, r.Admitted)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s\nresults: %+v", diff, results)
			}
			var reasons []string
			for _, r := range results {
				if !r.Admitted {
					reasons = append(reasons, r.Reason)
				}
			}
			if !strings.Contains(strings.Join(reasons, "; "), tc.wantReason) {
				t.Errorf("reasons = %q, want one containing %q", reasons, tc.wantReason)
			}
		})
	}
}

// TestCohortBorrowingLevel: under whenCanBorrow: TryNextFlavor, of two
// flavors where a workload fits only by borrowing, the one it borrows
// lower in its cohort tree is taken (Kueue's borrowing level), not the
// first; with Borrow, the first.
func TestCohortBorrowingLevel(t *testing.T) {
	base := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: p2}}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p1, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "8", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: h2, labels: {pool: p2, kubernetes.io/hostname: h2}}
status: {allocatable: {cpu: "8", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: Cohort
metadata: {name: team}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 0}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 4}]}
---
apiVersion: strata.dev/v1beta1
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 4}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 0}]}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  cohort: team
  flavorFungibility: {whenCanBorrow: %s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 0}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 0}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: four, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	for policy, want := range map[string]string{"TryNextFlavor": "f2", "Borrow": "f1"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), fmt.Appendf(nil, base, policy), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 || !results[0].Admitted || results[0].PodSets[0].Flavor != want {
				t.Errorf("results = %+v, want admitted on %s", results, want)
			}
		})
	}
}

// TestPreemptorOrderAfterVictims: a head that must preempt is ordered by
// how high it still borrows once its victims are gone (Kueue's preemption
// oracle), not as if it then fit its nominal quota. p must preempt in a
// (its nominal 8 is full) and, with only low2 gone, still borrows 2 of
// b's: it ties with d1, which borrows too, and d1's priority goes first.
// p then preempts low1 and low2 and fits its nominal quota. Served
// first, p took b's 2 CPUs with one victim and left d1 pending.
func TestPreemptorOrderAfterVictims(t *testing.T) {
	const in = `
apiVersion: strata.dev/v1beta1
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
status: {allocatable: {cpu: "32", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: d}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 0}]}]
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: zero}
value: 0
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: ten}
value: 10
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: fifty}
value: 50
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: hundred}
value: 100
`
	running := func(name, class string, cpus int) string {
		return fmt.Sprintf(`---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: %[1]s, namespace: ml}
spec:
  queueName: a
  priorityClassName: %[2]s
  priorityClassSource: strata.dev/workloadpriorityclass
  podSets:
  - name: main
    count: %[3]d
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
status:
  admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, flavor: f, count: %[3]d}
`, name, class, cpus)
	}
	job := func(name, queue, class string, pods int) string {
		return fmt.Sprintf(`---
apiVersion: batch/v1
kind: Job
metadata: {name: %[1]s, namespace: ml, labels: {strata.dev/queue-name: %[2]s, strata.dev/priority-class: %[3]s}}
spec:
  parallelism: %[4]d
  completions: %[4]d
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`, name, queue, class, pods)
	}
	all := in + running("hi", "fifty", 4) + running("low1", "zero", 2) + running("low2", "zero", 2) +
		job("p", "a", "ten", 4) + job("d1", "d", "hundred", 2)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(all), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Name     string
		Admitted bool
		Preempts []string
	}
	var got []outcome
	for _, r := range results {
		p := slices.Clone(r.Preempts)
		slices.Sort(p)
		got = append(got, outcome{r.Name, r.Admitted, p})
	}
	want := []outcome{
		// The victims wait in their queue again.
		{Name: "low1"},
		{Name: "low2"},
		{Name: "p", Admitted: true, Preempts: []string{"ml/low1", "ml/low2"}},
		{Name: "d1", Admitted: true},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("results (-want,+got):\n%s\nresults: %+v", diff, results)
	}
}

// TestLimitsAsRequests: a GPU asked for only as a limit is requested, as
// the API server makes the pods (and Kueue counts it): 4 pods of 8 GPUs
// take the four 8-GPU hosts of the rack, not one host.
func TestLimitsAsRequests(t *testing.T) {
	in := `
apiVersion: strata.dev/v1beta1
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
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: f, resources: [{name: nvidia.com/gpu, nominalQuota: 64}]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: gpus, namespace: ml, labels: {strata.dev/queue-name: q}}
spec:
  parallelism: 4
  completions: 4
  template:
    metadata:
      annotations: {strata.dev/podset-required-topology: rack}
    spec:
      containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "8"}}}]
`
	for r := 1; r <= 2; r++ {
		for h := 1; h <= 4; h++ {
			in += fmt.Sprintf(`---
apiVersion: v1
kind: Node
metadata: {name: r%[1]dh%[2]d, labels: {rack: r%[1]d, kubernetes.io/hostname: r%[1]dh%[2]d}}
status: {allocatable: {cpu: "64", nvidia.com/gpu: "8", pods: "110"}}
`, r, h)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || !results[0].Admitted {
		t.Fatalf("results: %+v", results)
	}
	if diff := cmp.Diff(map[string]int32{"r1h1": 1, "r1h2": 1, "r1h3": 1, "r1h4": 1}, hostsOf(results[0])); diff != "" {
		t.Errorf("hosts (-want,+got):\n%s", diff)
	}
}

// TestNoPodsToRun: objects their own API validation refuses — a JobSet
// without replicated jobs, an MPIJob without replica specs, a Job of
// negative parallelism — are invalid, not admitted with nothing to run.
func TestNoPodsToRun(t *testing.T) {
	const objs = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: empty-jobset, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  replicatedJobs: []
---
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: empty-mpijob, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  mpiReplicaSpecs: {}
---
apiVersion: batch/v1
kind: Job
metadata: {name: negative, namespace: ml, labels: {strata.dev/queue-name: training}}
spec:
  parallelism: -3
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`
	in, err := Load(write(t, "empty.yaml", objs), filepath.Join(examples, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		if !r.Invalid {
			t.Errorf("%s: not invalid: %+v", r.Name, r)
		}
		got[r.Name] = r.Reason
	}
	want := map[string]string{
		"empty-jobset": "invalid: spec.podSets: Required value: the object has no pod template to run: no pod set",
		"empty-mpijob": "invalid: spec.podSets: Required value: the object has no pod template to run: no pod set",
		"negative":     "invalid: spec.parallelism: Invalid value: -3: must be greater than or equal to 0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want,+got):\n%s", diff)
	}
}

// TestPartialAdmission: a Job with job-min-parallelism that does not fit
// is admitted, as by the agent, with the most pods that fit, at least that
// many; one whose minimum does not fit waits.
func TestPartialAdmission(t *testing.T) {
	cluster := filepath.Join("..", "..", "docs", "examples", "simulate", "cluster.yaml")
	job := func(name string, minParallelism int) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: ml
  labels: {strata.dev/queue-name: training}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "%d"}
spec:
  parallelism: 40
  completions: 40
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "1"}}}]
`, name, minParallelism)
	}
	// A rack has 4 hosts of 8 GPUs: 32 of the 40 pods fit in one.
	jobs := write(t, "jobs.yaml", job("at-least-10", 10)+"---\n"+job("at-least-33", 33))
	in, err := Load(cluster, jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("results: %+v", results)
	}
	if r := results[0]; !r.Admitted || len(r.PodSets) != 1 || r.PodSets[0].Count != 32 || len(r.PodSets[0].Domains) != 4 {
		t.Errorf("at-least-10: want 32 pods admitted on the 4 hosts of a rack, got %+v", r)
	}
	if r := results[1]; r.Admitted {
		t.Errorf("at-least-33: want it to wait, got %+v", r)
	}
}

// TestPartialAdmissionPreempts: a Job with job-min-parallelism whose
// pods do not all fit, even by preempting, preempts for the most pods a
// preemption makes room for, as the agent and Kueue do, rather than
// taking the few that fit now.
func TestPartialAdmissionPreempts(t *testing.T) {
	examples := filepath.Join("..", "..", "docs", "examples", "preemption")
	// 16 CPUs of quota; 12 taken, 4 by high-priority work that stays.
	jobs := write(t, "jobs.yaml", `apiVersion: batch/v1
kind: Job
metadata:
  name: wide-high
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/priority-class: high}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "2"}
spec:
  parallelism: 14
  completions: 14
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`)
	in, err := Load(filepath.Join(examples, "cluster.yaml"), filepath.Join(examples, "running.yaml"), jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("results: %+v", results)
	}
	r := resultNamed(t, results, "wide-high")
	if !r.Admitted || len(r.PodSets) != 1 {
		t.Fatalf("wide-high: want it admitted, got %+v", r)
	}
	for _, victim := range []string{"low-placed", "low-r1"} {
		if v := resultNamed(t, results, victim); v.Admitted || !strings.HasPrefix(v.Reason, "was running, preempted to make room for ml/wide-high; ") {
			t.Errorf("%s: want it waiting in its queue again, got %+v", victim, v)
		}
	}
	if diff := cmp.Diff([]string{"ml/low-placed", "ml/low-r1"}, slices.Sorted(slices.Values(r.Preempts))); diff != "" {
		t.Errorf("preempted (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"r1h1": 4, "r2h1": 4, "r2h2": 4}, hostsOf(r)); diff != "" {
		t.Errorf("hosts of its 12 pods (-want,+got):\n%s", diff)
	}
}

// TestAdmissionFairSharing: with the agent configuration's
// admissionFairSharing, a ClusterQueue whose admissionScope asks for it
// serves first the LocalQueue that consumed less (its status), and what
// the simulation admits counts against its LocalQueue.
func TestAdmissionFairSharing(t *testing.T) {
	base := `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {topologyName: t, nodeLabels: {pool: p}}
---
apiVersion: v1
kind: Node
metadata: {name: h1, labels: {pool: p, kubernetes.io/hostname: h1}}
status: {allocatable: {cpu: "4", pods: "110"}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: a, namespace: ml}
spec: {clusterQueue: q}
%s
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: b, namespace: ml}
spec: {clusterQueue: q}
`
	job := func(name, lq string, pods int) string {
		return fmt.Sprintf(`---
apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, labels: {strata.dev/queue-name: %s}}
spec:
  parallelism: %d
  completions: %d
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`, name, lq, pods, pods)
	}
	used := "status: {fairSharing: {admissionFairSharingStatus: {consumedResources: {cpu: \"10\"}, lastUpdate: \"2026-12-04T12:00:00Z\"}}}"
	afs := &configv1beta1.AdmissionFairSharing{UsageSamplingInterval: &metav1.Duration{Duration: time.Minute}}
	cases := map[string]struct {
		status string
		jobs   string
		afs    *configv1beta1.AdmissionFairSharing
		want   map[string]bool
	}{
		"the LocalQueue that consumed less first": {
			status: used, jobs: job("a1", "a", 4) + job("b1", "b", 4), afs: afs,
			want: map[string]bool{"a1": false, "b1": true},
		},
		"without admissionFairSharing in the configuration: input order": {
			status: used, jobs: job("a1", "a", 4) + job("b1", "b", 4),
			want: map[string]bool{"a1": true, "b1": false},
		},
		"an admission counts against its LocalQueue": {
			jobs: job("a1", "a", 2) + job("a2", "a", 2) + job("b1", "b", 2), afs: afs,
			want: map[string]bool{"a1": true, "a2": false, "b1": true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(fmt.Sprintf(base, tc.status)+tc.jobs), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			in.AdmissionFairSharing = tc.afs
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, r := range results {
				got[r.Name] = r.Admitted
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPerPodSetFlavors: as on the agent, each pod set of a workload takes
// its own flavor (Kueue's flavor assignment unit is the pod set, or its
// PodSet group): the first pod set fills flavor f1's 4 CPUs, the second
// goes on f2; a PodSet group stays on one flavor. A running workload on
// both flavors that is preempted frees both.
func TestPerPodSetFlavors(t *testing.T) {
	const cluster = `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: p2}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 4}]}, {name: f2, resources: [{name: cpu, nominalQuota: 8}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: q}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: p1h1, labels: {pool: p1, rack: r1, kubernetes.io/hostname: p1h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: p2h1, labels: {pool: p2, rack: r2, kubernetes.io/hostname: p2h1}}, status: {allocatable: {cpu: "8", pods: "110"}}}
`
	podSet := func(name string, count int, group string) string {
		if group != "" {
			group = ", podSetGroupName: " + group
		}
		return fmt.Sprintf(`  - name: %s
    count: %d
    topologyRequest: {required: rack%s}
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
`, name, count, group)
	}
	wl := func(name string, priority int, podSets ...string) string {
		return fmt.Sprintf(`---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: %s, namespace: ml, creationTimestamp: "2026-01-01T00:00:%02dZ"}
spec:
  queueName: lq
  priority: %d
  podSets:
%s`, name, 10-priority/10, priority, strings.Join(podSets, ""))
	}
	// low runs with pod set a on f1 and b on f2, filling both.
	const low = `---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: low, namespace: ml}
spec:
  queueName: lq
  podSets:
  - {name: a, count: 4, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
  - {name: b, count: 8, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: a, flavor: f1, count: 4}
    - {name: b, flavor: f2, count: 8}
`
	type placed map[string]string // pod set → flavor
	cases := map[string]struct {
		workloads string
		want      map[string]placed
	}{
		"each pod set on its own flavor": {
			workloads: wl("w", 0, podSet("a", 3, ""), podSet("b", 3, "")),
			want:      map[string]placed{"w": {"a": "f1", "b": "f2"}},
		},
		"a PodSet group on one flavor": {
			workloads: wl("w", 0, podSet("a", 3, "g"), podSet("b", 3, "g")),
			want:      map[string]placed{"w": {"a": "f2", "b": "f2"}},
		},
		"all on the first flavor when they fit there": {
			workloads: wl("w", 0, podSet("a", 2, ""), podSet("b", 2, "")),
			want:      map[string]placed{"w": {"a": "f1", "b": "f1"}},
		},
		"preempting for the pod set that fits nowhere, on its own flavor": {
			workloads: `---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: low, namespace: ml}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 8, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: main, flavor: f2, count: 8}
` + wl("pre", 10, podSet("main", 3, ""), podSet("second", 4, "")),
			want: map[string]placed{"pre": {"main": "f1", "second": "f2"}},
		},
		"a victim on two flavors frees both": {
			workloads: low + wl("high", 10, podSet("main", 8, "")) + wl("after", 0, podSet("main", 4, "")),
			want:      map[string]placed{"high": {"main": "f2"}, "after": {"main": "f1"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(cluster+tc.workloads), 0o600); err != nil {
				t.Fatal(err)
			}
			in, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]placed{}
			for _, r := range results {
				if !r.Admitted {
					// A victim waits in its queue again.
					if _, ok := tc.want[r.Name]; ok || !strings.HasPrefix(r.Reason, "was running, preempted") {
						t.Errorf("%s not admitted: %s", r.Name, r.Reason)
					}
					continue
				}
				got[r.Name] = placed{}
				for _, ps := range r.PodSets {
					got[r.Name][ps.Name] = ps.Flavor
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("flavors (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSplitWorkloadOrderedByItsAssignment: a workload whose pod sets are
// admitted on different flavors, each within its queue's nominal quota,
// does not borrow, and is served before a later workload of another
// queue of its cohort, as Kueue orders heads by their assignment's
// borrowing; on one flavor as a whole it would borrow, and come after.
func TestSplitWorkloadOrderedByItsAssignment(t *testing.T) {
	const in = `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: p2}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohort: c
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 2}]}, {name: f2, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 4}]}]
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
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: p1h1, labels: {pool: p1, rack: r1, kubernetes.io/hostname: p1h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: p2h1, labels: {pool: p2, rack: r2, kubernetes.io/hostname: p2h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: split, namespace: ml, creationTimestamp: "2026-01-01T00:00:01Z"}
spec:
  queueName: a
  podSets:
  - {name: driver, count: 2, topologyRequest: {required: rack}, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
  - {name: workers, count: 4, topologyRequest: {required: rack}, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: later, namespace: ml, creationTimestamp: "2026-01-01T00:00:02Z"}
spec:
  queueName: b
  podSets:
  - {name: main, count: 4, topologyRequest: {required: rack}, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		var flavors []string
		for _, ps := range r.PodSets {
			flavors = append(flavors, ps.Name+"="+ps.Flavor)
		}
		got[r.Name] = fmt.Sprint(r.Admitted, " ", strings.Join(flavors, ","))
	}
	want := map[string]string{"split": "true driver=f1,workers=f2", "later": "false "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// TestWaitingServedAgainAfterPreemption: a workload served before a
// preemption freed what it needs, in the same pass, is served again once
// the pass is over, as the agent's next pass serves it (and Kueue's
// requeue of inadmissible workloads when one of their cohort goes).
func TestWaitingServedAgainAfterPreemption(t *testing.T) {
	const in = `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohort: c
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohort: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 0}]}]
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
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {pool: p1, rack: r1, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "8", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: borrower, namespace: ml, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: b
  podSets:
  - {name: main, count: 4, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
status:
  admission:
    clusterQueue: b
    podSetAssignments:
    - {name: main, flavor: f1, count: 4}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: too-big, namespace: ml, creationTimestamp: "2026-01-01T00:00:01Z"}
spec:
  queueName: a
  priority: 5
  podSets:
  - {name: main, count: 8, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: waiting, namespace: ml, creationTimestamp: "2026-01-01T00:00:02Z"}
spec:
  queueName: b
  podSets:
  - {name: main, count: 2, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: reclaimer, namespace: ml, creationTimestamp: "2026-01-01T00:00:03Z"}
spec:
  queueName: a
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		got[r.Name] = fmt.Sprint(r.Admitted, " ", r.Preempts)
	}
	// The victim waits in its queue again.
	want := map[string]string{"too-big": "false []", "waiting": "true []", "reclaimer": "true [ml/borrower]", "borrower": "false []"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// TestRunningPartialAdmission: a running workload admitted with fewer pods
// than it asks for (partial admission) holds the quota and capacity of the
// pods it was admitted with, as on the agent.
func TestRunningPartialAdmission(t *testing.T) {
	const in = `
apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: p1}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f1, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: q}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {pool: p1, rack: r1, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "8", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: partial, namespace: ml, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 8, minCount: 2, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - {name: main, flavor: f1, count: 4}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: next, namespace: ml, creationTimestamp: "2026-01-01T00:00:01Z"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 4, template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(loaded, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Name == "next" && !r.Admitted {
			t.Errorf("next not admitted beside the 4 pods partial runs with: %s", r.Reason)
		}
	}
}

// resultNamed is the result of the workload named name.
func resultNamed(t *testing.T, results []Result, name string) Result {
	t.Helper()
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", name, results)
	return Result{}
}

// TestHubCopySplitPreempting: a hub's copy pinned per pod set and marked
// to preempt is admitted with each pod set on its own flavor, preempting
// only on the flavor of the one that does not fit now.
func TestHubCopySplitPreempting(t *testing.T) {
	cluster := `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: one}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: two}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  flavors: [{name: f1}, {name: f2}]
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 1
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {pool: one, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h2, labels: {pool: two, kubernetes.io/hostname: h2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: low, namespace: ml}
spec:
  queueName: q
  priorityClassName: low
  priorityClassSource: strata.dev/workloadpriorityclass
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]}}
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - name: main
      flavor: f2
      count: 1
      topologyAssignment: {levels: [kubernetes.io/hostname], slices: [{domainCount: 1, valuesPerLevel: [{universal: h2}], podCounts: {universal: 1}}]}
---
`
	copyOf := func(upTo string) string {
		return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: split
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/priority-class: high, strata.dev/hub-workload-uid: u1}
  annotations: {strata.dev/pod-set-flavors: "launcher=f1,workers=f2"%s}
spec:
  replicatedJobs:
  - name: launcher
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
  - name: workers
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: c, image: busybox, resources: {requests: {cpu: "4"}}}]
`, upTo)
	}
	type outcome struct {
		Admitted bool
		Flavors  string
		Preempts []string
	}
	for name, tc := range map[string]struct {
		upTo string
		want outcome
	}{
		"marked: the workers preempt on f2, the launcher keeps f1": {upTo: `, strata.dev/preempt-up-to: "1"`,
			want: outcome{Admitted: true, Flavors: "f1,f2", Preempts: []string{"ml/low"}}},
		"not marked: it waits": {},
	} {
		t.Run(name, func(t *testing.T) {
			in, err := Load(write(t, "cluster.yaml", cluster+copyOf(tc.upTo)))
			if err != nil {
				t.Fatal(err)
			}
			results, err := Run(in, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			r := resultNamed(t, results, "split")
			got := outcome{Admitted: r.Admitted, Preempts: r.Preempts}
			if r.Admitted {
				var flavors []string
				for _, ps := range r.PodSets {
					flavors = append(flavors, ps.Flavor)
				}
				got.Flavors = strings.Join(flavors, ",")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want,+got):\n%s\nreason: %s", diff, r.Reason)
			}
		})
	}
}

// twoFlavorsCluster is a worker's files: flavors f1 and f2, one 4-CPU
// node each, and ClusterQueue q of 8 CPUs on each.
const twoFlavorsCluster = `apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: {topologyName: t, nodeLabels: {pool: one}}
---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
spec: {topologyName: t, nodeLabels: {pool: two}}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 8}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 8}]}
---
apiVersion: v1
kind: NodeList
items:
- {apiVersion: v1, kind: Node, metadata: {name: h1, labels: {pool: one, kubernetes.io/hostname: h1}}, status: {allocatable: {cpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: h2, labels: {pool: two, kubernetes.io/hostname: h2}}, status: {allocatable: {cpu: "4", pods: "110"}}}
---
`

// TestHubCopyLeaderWorkerSetSplit: a hub's copy of a LeaderWorkerSet
// whose pod sets the hub placed on different flavors: each group's
// Workload is admitted with its pod sets on theirs (its part of the
// copy's strata.dev/pod-set-flavors, by the group's names).
func TestHubCopyLeaderWorkerSetSplit(t *testing.T) {
	in, err := Load(write(t, "lws.yaml", twoFlavorsCluster+`apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: serve
  namespace: ml
  labels: {strata.dev/queue-name: q, strata.dev/hub-workload-uid: u1}
  annotations: {strata.dev/pod-set-flavors: "leader-0=f2,worker-0=f1,leader-1=f1,worker-1=f2"}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
    workerTemplate:
      spec:
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		var flavors []string
		for _, ps := range r.PodSets {
			flavors = append(flavors, ps.Name+"="+ps.Flavor)
		}
		got[r.Name] = strings.Join(flavors, ",") + r.Reason
	}
	want := map[string]string{"serve-0": "leader=f2,worker=f1", "serve-1": "leader=f1,worker=f2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
}

// TestAdmissionChecks: a workload of a ClusterQueue with AdmissionChecks
// for its flavor is admitted as if every check were Ready, and its row
// says that on the cluster it waits for them after its reservation.
func TestAdmissionChecks(t *testing.T) {
	cluster := filepath.Join("..", "..", "docs", "examples", "simulate", "cluster.yaml")
	jobs := write(t, "job.yaml", `apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: checked}
spec:
  namespaceSelector: {}
  flavors: [{name: tas-gpu}]
  admissionChecksStrategy:
    admissionChecks:
    - {name: budget}
    - {name: capacity, onFlavors: [tas-gpu]}
    - {name: other-flavor, onFlavors: [spot]}
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: checked, namespace: ml}
spec: {clusterQueue: checked}
---
apiVersion: batch/v1
kind: Job
metadata: {name: checked, namespace: ml, labels: {strata.dev/queue-name: checked}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
`)
	in, err := Load(cluster, jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s %v %s", r.Name, r.Admitted, r.Reason))
	}
	want := []string{"checked true quota reserved; starts once admission checks budget, capacity are Ready (taken as Ready here)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
}

// TestProvisioningRequestCheck: on a flavor whose ClusterQueue has a
// ProvisioningRequest check, a workload reserves quota alone (KEP-2724's
// delayed topology assignment), as the agent's first pass: the nodes
// there now need not hold it, and its pods are placed on the nodes the
// autoscaler provisions (not simulated). Quota still bounds it, and a
// preemptor there finds its victims on quota alone.
func TestProvisioningRequestCheck(t *testing.T) {
	cluster := filepath.Join("..", "..", "docs", "examples", "simulate", "cluster.yaml")
	jobs := write(t, "job.yaml", `apiVersion: strata.dev/v1beta1
kind: ProvisioningRequestConfig
metadata: {name: scale-up}
spec: {provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io}
---
apiVersion: strata.dev/v1beta1
kind: AdmissionCheck
metadata: {name: autoscaler}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: strata.dev, kind: ProvisioningRequestConfig, name: scale-up}
---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: scaled}
spec:
  namespaceSelector: {}
  admissionChecks: [autoscaler]
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: tas-gpu, resources: [{name: nvidia.com/gpu, nominalQuota: "96"}]}]
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata: {name: scaled, namespace: ml}
spec: {clusterQueue: scaled}
---
apiVersion: strata.dev/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
# Reserved earlier, its topology waiting for the autoscaler: quota alone.
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: waiting, namespace: ml}
spec:
  queueName: scaled
  podSets:
  - name: main
    count: 4
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "8"}}}]}}
status:
  admission:
    clusterQueue: scaled
    podSetAssignments:
    - {name: main, flavor: tas-gpu, count: 4, delayedTopologyRequest: Pending}
---
apiVersion: batch/v1
kind: Job
metadata: {name: wide, namespace: ml, labels: {strata.dev/queue-name: scaled}}
spec:
  parallelism: 10
  completions: 10
  template:
    metadata:
      annotations: {kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "8"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: over-quota, namespace: ml, labels: {strata.dev/queue-name: scaled}}
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "8"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: urgent, namespace: ml, labels: {strata.dev/queue-name: scaled, kueue.x-k8s.io/priority-class: high}}
spec:
  parallelism: 10
  completions: 10
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "8"}}}]
`)
	in, err := Load(cluster, jobs)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		line := fmt.Sprintf("%s %v", r.Name, r.Admitted)
		for _, ps := range r.PodSets {
			line += fmt.Sprintf(" %s=%d delayed=%v domains=%d", ps.Flavor, ps.Count, ps.DelayedTopology, len(ps.Domains))
		}
		if len(r.Preempts) > 0 {
			line += " preempts " + strings.Join(r.Preempts, ",")
		}
		got = append(got, line)
	}
	want := []string{
		// Reserved (32 GPUs of quota, no node), preempted for urgent.
		"waiting false",
		// Ten 8-GPU pods in one rack of four hosts would reserve quota
		// alone; urgent took it.
		"wide false",
		"over-quota false",
		// Served first (priority): 80 GPUs of quota and the waiting
		// one's 32 are more than 96; preempting it, of lower priority,
		// frees its quota (its nodes are none), and urgent reserves
		// quota alone.
		"urgent true tas-gpu=10 delayed=true domains=0 preempts ml/waiting",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want,+got):\n%s", diff)
	}
	urgent := resultNamed(t, results, "urgent")
	if !strings.Contains(urgent.Reason, "quota reserved without a topology: admission checks autoscaler include a ProvisioningRequest check") {
		t.Errorf("reason %q does not say its topology waits for the provisioned nodes", urgent.Reason)
	}
}
