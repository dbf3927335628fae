package simulate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// kueueFairOrderCase is one case of
// testdata/kueue-v0.19-fairorder-parity.json: the queues of a cohort (flat,
// or a tree of Cohort objects) with fairSharing weights and two flavors,
// the workloads admitted already, one or two pending workloads per queue,
// and which of them Kueue v0.19.0's scheduler admitted, on which flavor,
// with fair sharing on, its scheduling cycles run until one admitted
// nothing (hack/kueue-parity/generate-fairorder.sh).
type kueueFairOrderCase struct {
	ID        int
	Classical bool
	Cohorts   []struct {
		Name, Parent string
		Quotas       []struct{ Flavor, Nominal, BorrowingLimit, LendingLimit string }
		Weight       string
	}
	Queues []struct {
		Name, Cohort  string
		Quotas        []struct{ Flavor, Nominal, BorrowingLimit, LendingLimit string }
		WhenCanBorrow string
		Weight        string
		// Within and Reclaim: the preemption policies of the preempting
		// corpora (PARITY_PREEMPT=1); "" is Never.
		Within, Reclaim string
	}
	Admitted, Pending []struct {
		Name, Queue, Flavor string
		Priority            int32
		Created             int
		CPU                 string
		Reserved            int // minutes; 0: 60
	}
	// Result: where the pending workloads Kueue admitted are, and those it
	// preempted and admitted again (the preempting corpora).
	Result map[string]string
	// Preempted: the workloads Kueue preempted (the preempting corpora).
	Preempted []string
	Cycles    int
}

func (c kueueFairOrderCase) input() string {
	var b strings.Builder
	b.WriteString("apiVersion: strata.dev/v1beta1\nkind: Topology\nmetadata: {name: t}\nspec:\n  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]\n")
	for _, f := range []string{"f1", "f2"} {
		pool := "p" + f[1:]
		fmt.Fprintf(&b, "---\napiVersion: strata.dev/v1beta1\nkind: ResourceFlavor\nmetadata: {name: %s}\nspec: {topologyName: t, nodeLabels: {pool: %s}}\n", f, pool)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Node\nmetadata: {name: %sh1, labels: {pool: %s, rack: r%s, kubernetes.io/hostname: %sh1}}\nstatus: {allocatable: {cpu: \"1000\", pods: \"1000\"}}\n", pool, pool, f[1:], pool)
	}
	quotas := func(qts []struct{ Flavor, Nominal, BorrowingLimit, LendingLimit string }) {
		b.WriteString("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n")
		for _, qt := range qts {
			fmt.Fprintf(&b, "    - name: %s\n      resources:\n      - {name: cpu, nominalQuota: %q", qt.Flavor, qt.Nominal)
			if qt.BorrowingLimit != "" {
				fmt.Fprintf(&b, ", borrowingLimit: %q", qt.BorrowingLimit)
			}
			if qt.LendingLimit != "" {
				fmt.Fprintf(&b, ", lendingLimit: %q", qt.LendingLimit)
			}
			b.WriteString("}\n")
		}
	}
	for _, co := range c.Cohorts {
		fmt.Fprintf(&b, "---\napiVersion: strata.dev/v1beta1\nkind: Cohort\nmetadata: {name: %s}\nspec:\n  parentName: %q\n", co.Name, co.Parent)
		if co.Weight != "" {
			fmt.Fprintf(&b, "  fairSharing: {weight: %q}\n", co.Weight)
		}
		if len(co.Quotas) > 0 {
			quotas(co.Quotas)
		}
	}
	for _, q := range c.Queues {
		fmt.Fprintf(&b, "---\napiVersion: strata.dev/v1beta1\nkind: ClusterQueue\nmetadata: {name: %s}\nspec:\n  namespaceSelector: {}\n  cohort: %s\n", q.Name, q.Cohort)
		if q.Weight != "" {
			fmt.Fprintf(&b, "  fairSharing: {weight: %q}\n", q.Weight)
		}
		if q.WhenCanBorrow != "" {
			fmt.Fprintf(&b, "  flavorFungibility: {whenCanBorrow: %s}\n", q.WhenCanBorrow)
		}
		if q.Within != "" || q.Reclaim != "" {
			fmt.Fprintf(&b, "  preemption: {withinClusterQueue: %s, reclaimWithinCohort: %s}\n", cmp.Or(q.Within, "Never"), cmp.Or(q.Reclaim, "Never"))
		}
		quotas(q.Quotas)
	}
	workload := func(name, queue, flavor string, priority int32, created, reserved int, cpu string) {
		fmt.Fprintf(&b, "---\napiVersion: strata.dev/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: ns, creationTimestamp: %q}\nspec:\n  queueName: %s\n  priority: %d\n  podSets:\n  - name: main\n    count: 1\n    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: %q}}}]}}\n",
			name, fungibilityAt(created), queue, priority, cpu)
		if flavor != "" {
			fmt.Fprintf(&b, "status:\n  conditions:\n  - {type: Admitted, status: \"True\", reason: Admitted, message: \"\", lastTransitionTime: %q}\n  admission:\n    clusterQueue: %s\n    podSetAssignments:\n    - {name: main, flavor: %s, count: 1}\n",
				fungibilityAt(cmp.Or(reserved, 60)), queue, flavor)
		}
	}
	for _, w := range c.Admitted {
		workload(w.Name, w.Queue, w.Flavor, w.Priority, w.Created, w.Reserved, w.CPU)
	}
	for _, w := range c.Pending {
		workload(w.Name, w.Queue, "", w.Priority, w.Created, 0, w.CPU)
	}
	return b.String()
}

// TestKueueFairOrderParity replays each recorded case through Run with
// fair sharing on and checks that simulate admits the pending workloads
// Kueue's scheduler admitted, on the same flavors.
func TestKueueFairOrderParity(t *testing.T) {
	replayKueueOrder(t, "testdata/kueue-v0.19-fairorder-parity.json")
}

// TestKueueClassicOrderParity is TestKueueFairOrderParity with fair
// sharing off: Kueue's classical order of heads (PARITY_CLASSICAL=1).
func TestKueueClassicOrderParity(t *testing.T) {
	replayKueueOrder(t, "testdata/kueue-v0.19-classicorder-parity.json")
}

// TestKueueClassicOrderPreemptParity is TestKueueClassicOrderParity where
// the queues preempt (random withinClusterQueue and reclaimWithinCohort,
// PARITY_PREEMPT=1): simulate admits the pending workloads Kueue's
// scheduler admitted, on the same flavors, and preempts the same
// workloads.
//
// Not all agree yet: the cases of knownDifferences differ (docs/engine.md,
// "Whole scheduling cycles"), and the test fails on any other case that
// differs, and says when one of those comes to agree.
func TestKueueClassicOrderPreemptParity(t *testing.T) {
	replayKueueOrder(t, "testdata/kueue-v0.19-classicorder-preempt-parity.json", 9, 18, 28, 33, 36)
}

// TestKueueFairOrderPreemptParity is TestKueueClassicOrderPreemptParity
// with fair sharing on.
func TestKueueFairOrderPreemptParity(t *testing.T) {
	replayKueueOrder(t, "testdata/kueue-v0.19-fairorder-preempt-parity.json", 3, 4, 9, 10, 23, 32, 40, 42, 52, 56, 59, 62, 83, 90, 96)
}

// replayKueueOrder replays a corpus of file; the cases known (by ID)
// differ: they are reported, not failed.
func replayKueueOrder(t *testing.T, file string, known ...int) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []kueueFairOrderCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	agree, contended := 0, 0
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("case-%d", c.ID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "case.yaml"), []byte(c.input()), 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := Load(dir)
		if err != nil {
			t.Fatalf("case %d: %v", c.ID, err)
		}
		if !c.Classical {
			in.FairSharing = &configv1beta1.FairSharing{PreemptionStrategies: []configv1beta1.PreemptionStrategy{
				configv1beta1.LessThanOrEqualToFinalShare, configv1beta1.LessThanInitialShare}}
		}
		results, err := Run(in, tas.DefaultOptions())
		if err != nil {
			t.Fatalf("case %d: %v", c.ID, err)
		}
		got := map[string]string{}
		preempted := map[string]bool{}
		for _, r := range results {
			if r.Admitted && len(r.PodSets) > 0 {
				got[r.Name] = r.PodSets[0].Flavor
			}
			for _, v := range r.Preempts {
				_, name, _ := strings.Cut(v, "/")
				preempted[name] = true
			}
		}
		want := map[string]bool{}
		for _, name := range c.Preempted {
			want[name] = true
		}
		for _, w := range c.Pending {
			if _, ok := c.Result[w.Name]; !ok {
				contended++
				break
			}
		}
		if maps.Equal(got, c.Result) && maps.Equal(preempted, want) {
			agree++
			if slices.Contains(known, c.ID) {
				t.Errorf("case %d agrees now: take it out of the known differences", c.ID)
			}
			continue
		}
		report := t.Errorf
		if slices.Contains(known, c.ID) {
			report = t.Logf
		}
		report("case %d: Kueue admitted %v preempting %v, simulate %v preempting %v\n%s", c.ID, sortedPairs(c.Result), slices.Sorted(maps.Keys(want)),
			sortedPairs(got), slices.Sorted(maps.Keys(preempted)), c.input())
	}
	t.Logf("%d cases (%d where some pending workload is not admitted): %d agree", len(cases), contended, agree)
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"@"+v)
	}
	slices.Sort(out)
	return out
}
