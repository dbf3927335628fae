package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// preemptingOutcomes runs simulate on one file of testdata/preempting: each
// result's name, and where it is admitted ("" when not) with the
// workloads it preempts.
func preemptingOutcomes(t *testing.T, file string) (map[string]string, map[string]Result) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", "preempting", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.yaml"), data, 0o600); err != nil {
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
	got, byName := map[string]string{}, map[string]Result{}
	for _, r := range results {
		byName[r.Name] = r
		if !r.Admitted {
			got[r.Name] = ""
			continue
		}
		var where []string
		for _, ps := range r.PodSets {
			where = append(where, ps.Name+"@"+ps.Flavor)
		}
		got[r.Name] = strings.Join(where, " ")
		if len(r.Preempts) > 0 {
			got[r.Name] += " preempting " + strings.Join(r.Preempts, ",")
		}
	}
	return got, byName
}

// TestVictimAdmittedInTheSimulation: a workload the simulation admits and
// a later one preempts is not reported admitted; it waits again, says
// so, and is served again (as on the agent, where it goes back to its
// queue). Found by the agent's differential check (agent/scheduler,
// TestAgentPreemptsAsSimulatesOnTrees, seed 544, whose input this is):
// w11 borrows quota of cohort c on flavor other, and w08, of a queue
// that takes it back (reclaimWithinCohort: Any), preempts it in the next
// round.
func TestVictimAdmittedInTheSimulation(t *testing.T) {
	got, byName := preemptingOutcomes(t, "victim-admitted-in-simulation.yaml")
	if diff := cmp.Diff("main@other preempting ns/w11", got["w08"]); diff != "" {
		t.Errorf("w08 (-want,+got):\n%s", diff)
	}
	if got["w11"] != "" {
		t.Errorf("w11 = %q, want not admitted: w08 preempted it", got["w11"])
	}
	if want := "admitted, then preempted to make room for ns/w08; "; !strings.HasPrefix(byName["w11"].Reason, want) {
		t.Errorf("w11's reason = %q, want it to start with %q", byName["w11"].Reason, want)
	}
}

// TestHoldDoesNotAddVictims: what an earlier head of a round holds
// (Kueue's reservation for a head that must preempt and finds no
// victims) does not make a later head preempt more: Kueue finds a
// cycle's preemption targets as it nominates the heads, before any
// reservation, and skips a head that no longer fits for the cycle. Found
// by TestAgentPreemptsAsSimulatesOnTrees (seed 910, this input): w08 of
// q1 (reclaimWithinCohort: Never) holds 4 cpu of its nominal quota in
// the round, and w05 of q0, which needs the capacity of w00's host,
// preempted w03 as well to make room for that hold.
func TestHoldDoesNotAddVictims(t *testing.T) {
	got, _ := preemptingOutcomes(t, "hold-and-preemption.yaml")
	if diff := cmp.Diff("main@tas-flavor preempting ns/w00", got["w05"]); diff != "" {
		t.Errorf("w05 (-want,+got):\n%s", diff)
	}
}

// TestClockStartsAfterTheInput: what the simulation admits is admitted
// after every time its input's Workloads record, so that preemption,
// which takes the most recently admitted first, takes it before a
// running workload of the input.
func TestClockStartsAfterTheInput(t *testing.T) {
	at := func(s string) metav1.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return metav1.NewTime(t)
	}
	running := &strata.Workload{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at("2026-01-01T00:00:00Z")}}
	running.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, LastTransitionTime: at("2026-01-02T03:04:05Z")}}
	pending := &strata.Workload{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at("2026-01-01T12:00:00Z")}}
	for _, tc := range []struct {
		name string
		in   *Input
		want time.Time
	}{
		{name: "no times", in: &Input{Workloads: []Item{{Workload: &strata.Workload{}}, {}}}, want: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "latest condition", in: &Input{Workloads: []Item{{Workload: pending}, {Workload: running}}}, want: at("2026-01-02T03:04:05Z").Time},
		{name: "latest creation", in: &Input{Workloads: []Item{{Workload: pending}}}, want: at("2026-01-01T12:00:00Z").Time},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clockStart(tc.in); !got.Equal(tc.want) {
				t.Errorf("clockStart() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRunningVictimsQueuedAgain: a workload the input shows running that a
// placement preempts goes back to its queue, as the agent and Kueue put
// it back (evicted, its admission cleared), says so, and is served again
// after the pass, as the agent's next pass serves it. Case 9 of Kueue's
// classical preempting corpus: q1-p1 preempts a4 and a5, and the 2 CPUs
// of f2 it leaves go, later in the pass, to q3-p1, which does not borrow
// there, as on the agent, whose pass frees a victim's quota beyond what
// the preemptor holds at once. (Kueue admits q2-p1 there: its preemption
// takes two cycles, and a5, back in q3 before q3-p1 by creation, is
// q3's head in the second.)
func TestRunningVictimsQueuedAgain(t *testing.T) {
	got, byName := preemptingOutcomes(t, "running-victims.yaml")
	want := map[string]string{
		"a4":    "",
		"a5":    "",
		"q1-p1": "main@f2 preempting ns/a5,ns/a4",
		"q2-p1": "",
		"q2-p2": "",
		"q3-p1": "main@f2",
		"q3-p2": "main@f1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want,+got):\n%s", diff)
	}
	for _, name := range []string{"a4", "a5"} {
		if want := "was running, preempted to make room for ns/q1-p1; flavor f1: "; !strings.HasPrefix(byName[name].Reason, want) {
			t.Errorf("%s's reason = %q, want it to start with %q", name, byName[name].Reason, want)
		}
	}
}

// TestNoVictimAdmittedInTheRound: a workload admitted in a round is no
// candidate for a preemption in that round: Kueue finds a cycle's targets
// as the cycle begins, and the agent takes no admission its informer does
// not show yet. Found by the agent's differential check
// (TestAgentPreemptsAsSimulates, seed 338, whose input this is): w07 is
// admitted in the round w05 is served in; simulate had w05 preempt it,
// where the agent admits 2 of w05's 4 pods on flavor other.
func TestNoVictimAdmittedInTheRound(t *testing.T) {
	got, _ := preemptingOutcomes(t, "victim-admitted-in-the-round.yaml")
	for name, want := range map[string]string{
		"w05": "main@other",
		"w07": "main@tas-flavor",
		"w08": "main@tas-flavor preempting ns/w00",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
}

// TestJobsQueuedAtTheirCreation: a job's Workload is queued when the job
// was created (its creationTimestamp in a cluster's dump, which lists by
// name), not in the input's order: of two Jobs of one priority where one
// fits, the older runs.
func TestJobsQueuedAtTheirCreation(t *testing.T) {
	cluster := write(t, "cluster.yaml", `apiVersion: strata.dev/v1beta1
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
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 100}]}]
`)
	job := func(name, created string) string {
		return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, creationTimestamp: %q, labels: {strata.dev/queue-name: q}}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "3"}}}]
---
`, name, created)
	}
	in, err := Load(cluster, write(t, "jobs.yaml", job("a-newer", "2026-02-01T00:00:00Z")+job("b-older", "2026-01-01T00:00:00Z")))
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s=%v", r.Name, r.Admitted))
	}
	if diff := cmp.Diff([]string{"a-newer=false", "b-older=true"}, got); diff != "" {
		t.Errorf("rows (-want,+got):\n%s", diff)
	}
}
