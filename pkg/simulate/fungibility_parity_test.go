package simulate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// kueueFungibilityCase is one case of
// testdata/kueue-v0.19-fungibility-parity.json: a flat cohort "c" of one
// to three ClusterQueues, each with a cpu quota on two flavors f1 and f2
// (in its own order), preemption policies and a flavorFungibility; the
// one-pod workloads admitted on either flavor; a pending workload of the
// first queue; and which flavor Kueue v0.19.0's own flavor assigner chose
// for it, in which mode, and what its classical preemption would preempt
// there (hack/kueue-parity/generate-fungibility.sh).
type kueueFungibilityCase struct {
	ID int
	// Cohorts: Kueue Cohort objects with cpu quota per flavor, in the tree
	// corpus (testdata/kueue-v0.19-fungibility-parity-trees.json).
	Cohorts []struct {
		Name, Parent string
		Quotas       []struct {
			Flavor, Nominal, BorrowingLimit, LendingLimit string
		}
		Weight string
	}
	// FairSharing: Kueue's fair sharing was on with these strategies
	// (testdata/kueue-v0.19-fungibility-parity-fair.json).
	FairSharing   []configv1beta1.PreemptionStrategy
	Overcommitted bool // the admitted workloads were charged whether or not they fit
	Queues        []kueueFungibilityQueue
	Admitted      []kueueFungibilityWorkload
	Preemptor     kueueFungibilityWorkload
	Mode          string // Fit, Preempt or NoFit
	Flavor        string // "" for NoFit
	Borrows       bool
	Targets       []struct{ Name, Reason string }
	// Considered is Kueue's verdict on each flavor it looked at.
	Considered []struct {
		Flavor, Mode, Possibility string
		Borrow                    int
	}
	// FungibilityMatters: Kueue would answer otherwise were the
	// preemptor's queue's flavorFungibility another.
	FungibilityMatters bool
}

type kueueFungibilityQueue struct {
	Name, Cohort string
	Quotas       []struct {
		Flavor, Nominal, BorrowingLimit, LendingLimit string
	}
	WithinClusterQueue, ReclaimWithinCohort, BorrowWithinCohort string
	MaxPriorityThreshold                                        *int32
	// In Kueue v1beta1's (Strata's) names; "" is unset.
	WhenCanBorrow, WhenCanPreempt string
	// Weight is the fairSharing weight, in fair cases ("": unset).
	Weight string
}

// kueueFungibilityWorkload is a one-pod workload of CPU cpus; Created and
// Admitted (its quota reservation) are minutes after the corpus's origin.
type kueueFungibilityWorkload struct {
	Name, Queue, Flavor string
	Priority            int32
	Created, Admitted   int
	CPU                 string
}

// fungibilityKnownDifference is a class of cases where simulate is known
// to answer otherwise than Kueue's engine, and why.
type fungibilityKnownDifference struct {
	name, why string
	applies   func(kueueFungibilityCase) bool
}

// kueueFungibilityKnown lists the known differences from Kueue's engine:
// each is a class of inputs, said by a predicate on the case, where
// simulate may answer otherwise; a disagreement outside every class fails
// the test. There is none today.
var kueueFungibilityKnown []fungibilityKnownDifference

// fungibilityOrigin is the time the corpus's minutes count from.
var fungibilityOrigin = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fungibilityAt(m int) string {
	return fungibilityOrigin.Add(time.Duration(m) * time.Minute).Format(time.RFC3339)
}

// fungibilityInput writes a case as simulate's input: the two flavors on
// a node each that holds any workload (quota alone decides), the queues
// (named directly by the workloads' queueName: no LocalQueues), the
// admitted workloads as Workloads admitted on their flavor, and the
// preemptor as a pending Workload, priorities as spec.priority.
func fungibilityInput(c kueueFungibilityCase) string {
	var b strings.Builder
	b.WriteString(`apiVersion: strata.dev/v1beta1
kind: Topology
metadata: {name: t}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
`)
	for _, f := range []string{"f1", "f2"} {
		pool := "p" + f[1:]
		fmt.Fprintf(&b, `---
apiVersion: strata.dev/v1beta1
kind: ResourceFlavor
metadata: {name: %s}
spec: {topologyName: t, nodeLabels: {pool: %s}}
---
apiVersion: v1
kind: Node
metadata: {name: %sh1, labels: {pool: %s, rack: r%s, kubernetes.io/hostname: %sh1}}
status: {allocatable: {cpu: "1000", pods: "1000"}}
`, f, pool, pool, pool, f[1:], pool)
	}
	for _, co := range c.Cohorts {
		fmt.Fprintf(&b, "---\napiVersion: strata.dev/v1beta1\nkind: Cohort\nmetadata: {name: %s}\nspec:\n  parentName: %q\n", co.Name, co.Parent)
		if co.Weight != "" {
			fmt.Fprintf(&b, "  fairSharing: {weight: %q}\n", co.Weight)
		}
		if len(co.Quotas) > 0 {
			b.WriteString("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n")
			for _, qt := range co.Quotas {
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
	}
	for _, q := range c.Queues {
		fmt.Fprintf(&b, `---
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  cohort: %s
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
`, q.Name, q.Cohort)
		for _, qt := range q.Quotas {
			fmt.Fprintf(&b, "    - name: %s\n      resources:\n      - {name: cpu, nominalQuota: %q", qt.Flavor, qt.Nominal)
			if qt.BorrowingLimit != "" {
				fmt.Fprintf(&b, ", borrowingLimit: %q", qt.BorrowingLimit)
			}
			if qt.LendingLimit != "" {
				fmt.Fprintf(&b, ", lendingLimit: %q", qt.LendingLimit)
			}
			b.WriteString("}\n")
		}
		if q.Weight != "" {
			fmt.Fprintf(&b, "  fairSharing: {weight: %q}\n", q.Weight)
		}
		fmt.Fprintf(&b, "  preemption:\n    withinClusterQueue: %s\n    reclaimWithinCohort: %s\n", q.WithinClusterQueue, q.ReclaimWithinCohort)
		if q.BorrowWithinCohort != "" {
			fmt.Fprintf(&b, "    borrowWithinCohort: {policy: %s", q.BorrowWithinCohort)
			if q.MaxPriorityThreshold != nil {
				fmt.Fprintf(&b, ", maxPriorityThreshold: %d", *q.MaxPriorityThreshold)
			}
			b.WriteString("}\n")
		}
		if q.WhenCanBorrow != "" || q.WhenCanPreempt != "" {
			b.WriteString("  flavorFungibility: {")
			var fs []string
			if q.WhenCanBorrow != "" {
				fs = append(fs, "whenCanBorrow: "+q.WhenCanBorrow)
			}
			if q.WhenCanPreempt != "" {
				fs = append(fs, "whenCanPreempt: "+q.WhenCanPreempt)
			}
			b.WriteString(strings.Join(fs, ", ") + "}\n")
		}
	}
	workload := func(w kueueFungibilityWorkload, admitted bool) {
		fmt.Fprintf(&b, `---
apiVersion: strata.dev/v1beta1
kind: Workload
metadata: {name: %s, namespace: ns, creationTimestamp: %q}
spec:
  queueName: %s
  priority: %d
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: %q}}}]}}
`, w.Name, fungibilityAt(w.Created), w.Queue, w.Priority, w.CPU)
		if admitted {
			fmt.Fprintf(&b, `status:
  conditions:
  - {type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: %q}
  admission:
    clusterQueue: %s
    podSetAssignments:
    - {name: main, flavor: %s, count: 1}
`, fungibilityAt(w.Admitted), w.Queue, w.Flavor)
		}
	}
	for _, w := range c.Admitted {
		workload(w, true)
	}
	workload(c.Preemptor, false)
	return b.String()
}

// TestKueueFungibilityParity replays every recorded case through Run and
// checks that simulate admits the preemptor where Kueue's engine would:
// on the same flavor without preempting when Kueue fits it, on the same
// flavor preempting exactly Kueue's targets when Kueue preempts, and not
// at all when Kueue answers NoFit or finds no targets.
func TestKueueFungibilityParity(t *testing.T) {
	replayKueueFungibility(t, "testdata/kueue-v0.19-fungibility-parity.json")
}

// TestKueueFungibilityParityTrees is TestKueueFungibilityParity on cohort
// trees (hack/kueue-parity/generate-fungibility-trees.sh): the queues in
// cohorts left and right under root, the cohorts with cpu quota of their
// own per flavor.
func TestKueueFungibilityParityTrees(t *testing.T) {
	replayKueueFungibility(t, "testdata/kueue-v0.19-fungibility-parity-trees.json")
}

// TestKueueFungibilityParityFair is TestKueueFungibilityParity with
// Kueue's fair sharing on (hack/kueue-parity/generate-fungibility-fair.sh):
// a strategy list and weights per case, half of them on cohort trees.
func TestKueueFungibilityParityFair(t *testing.T) {
	replayKueueFungibility(t, "testdata/kueue-v0.19-fungibility-parity-fair.json")
}

func replayKueueFungibility(t *testing.T, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []kueueFungibilityCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	agree, disagree, known := 0, 0, 0
	inClass := map[string]int{} // cases in a known-difference class, agreeing or not
	byMode := map[string]int{}
	matters := 0
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("case-%d", c.ID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "case.yaml"), []byte(fungibilityInput(c)), 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := Load(dir)
		if err != nil {
			t.Fatalf("case %d: %v", c.ID, err)
		}
		if c.FairSharing != nil {
			in.FairSharing = &configv1beta1.FairSharing{PreemptionStrategies: c.FairSharing}
		}
		results, err := Run(in, tas.DefaultOptions())
		if err != nil {
			t.Fatalf("case %d: %v", c.ID, err)
		}
		var running []string
		for _, w := range c.Admitted {
			running = append(running, w.Name)
		}
		r := preemptorRow(t, c.ID, results, c.Preemptor.Name, running)

		for _, k := range kueueFungibilityKnown {
			if k.applies(c) {
				inClass[k.name]++
			}
		}
		var targets []string
		for _, tg := range c.Targets {
			targets = append(targets, "ns/"+tg.Name)
		}
		sort.Strings(targets)
		want := "not admitted"
		mode := c.Mode
		switch {
		case c.Mode == "Fit":
			want = "admitted on " + c.Flavor
		case c.Mode == "Preempt" && len(targets) > 0:
			want = fmt.Sprintf("admitted on %s preempting %v", c.Flavor, targets)
		case c.Mode == "Preempt":
			mode = "Preempt (no targets)"
		}
		byMode[mode]++
		if c.FungibilityMatters {
			matters++
		}
		got := "not admitted"
		if r.Admitted {
			flavor := ""
			if len(r.PodSets) > 0 {
				flavor = r.PodSets[0].Flavor
			}
			got = "admitted on " + flavor
			if len(r.Preempts) > 0 {
				victims := slices.Clone(r.Preempts)
				sort.Strings(victims)
				got += fmt.Sprintf(" preempting %v", victims)
			}
		}
		if want == got {
			agree++
			continue
		}
		if k := slices.IndexFunc(kueueFungibilityKnown, func(k fungibilityKnownDifference) bool { return k.applies(c) }); k >= 0 {
			known++
			t.Logf("case %d (known difference: %s, %s): Kueue %s, simulate %s\n%s", c.ID, kueueFungibilityKnown[k].name, kueueFungibilityKnown[k].why, want, got, describeFungibilityCase(c))
			continue
		}
		disagree++
		t.Errorf("case %d: Kueue %s (%s), simulate %s (%s)\n%s", c.ID, want, describeKueueAnswer(c), got, r.Reason, describeFungibilityCase(c))
	}
	t.Logf("%d cases %v (%d where the flavorFungibility matters): %d agree, %d disagree, %d known differences (cases in known-difference classes, agreeing or not: %v)",
		len(cases), byMode, matters, agree, disagree, known, inClass)
}

// describeKueueAnswer is Kueue's mode and its verdict on each flavor.
func describeKueueAnswer(c kueueFungibilityCase) string {
	s := c.Mode
	if c.Borrows {
		s += " borrowing"
	}
	for _, tg := range c.Targets {
		s += " " + tg.Name + "/" + tg.Reason
	}
	var fs []string
	for _, a := range c.Considered {
		f := a.Flavor + ":" + a.Mode
		if a.Possibility != "" {
			f += "/" + a.Possibility
		}
		if a.Borrow > 0 {
			f += fmt.Sprintf(" borrow %d", a.Borrow)
		}
		fs = append(fs, f)
	}
	if len(fs) > 0 {
		s += "; considered " + strings.Join(fs, ", ")
	}
	return s
}

// describeFungibilityCase writes a case compactly: queues (quotas per
// flavor in order, policies, fungibility), admitted workloads (queue,
// flavor, priority, created, admitted, cpu), the preemptor.
func describeFungibilityCase(c kueueFungibilityCase) string {
	var b strings.Builder
	for _, q := range c.Queues {
		fmt.Fprintf(&b, "  queue %s", q.Name)
		for _, qt := range q.Quotas {
			fmt.Fprintf(&b, " %s=%s", qt.Flavor, qt.Nominal)
			if qt.BorrowingLimit != "" {
				fmt.Fprintf(&b, " borrow≤%s", qt.BorrowingLimit)
			}
			if qt.LendingLimit != "" {
				fmt.Fprintf(&b, " lend≤%s", qt.LendingLimit)
			}
		}
		fmt.Fprintf(&b, " within=%s reclaim=%s", q.WithinClusterQueue, q.ReclaimWithinCohort)
		if q.BorrowWithinCohort != "" {
			fmt.Fprintf(&b, " bwc=%s", q.BorrowWithinCohort)
			if q.MaxPriorityThreshold != nil {
				fmt.Fprintf(&b, "(max %d)", *q.MaxPriorityThreshold)
			}
		}
		fmt.Fprintf(&b, " whenCanBorrow=%s whenCanPreempt=%s\n", orDefault(q.WhenCanBorrow, "Borrow"), orDefault(q.WhenCanPreempt, "TryNextFlavor"))
	}
	for _, w := range c.Admitted {
		fmt.Fprintf(&b, "  running %s in %s on %s prio %d created %d admitted %d cpu=%s\n", w.Name, w.Queue, w.Flavor, w.Priority, w.Created, w.Admitted, w.CPU)
	}
	p := c.Preemptor
	fmt.Fprintf(&b, "  preemptor %s in %s prio %d created %d cpu=%s", p.Name, p.Queue, p.Priority, p.Created, p.CPU)
	if c.Overcommitted {
		b.WriteString(" (overcommitted)")
	}
	if c.FungibilityMatters {
		b.WriteString(" (the flavorFungibility matters)")
	}
	return b.String()
}

func orDefault(s, d string) string {
	if s == "" {
		return d + "(default)"
	}
	return s
}

// preemptorRow is the result of the case's one pending workload; the
// others must be of workloads the input showed running (its victims, back
// in their queues, and theirs when they are admitted again).
func preemptorRow(t *testing.T, id int, results []Result, name string, running []string) Result {
	t.Helper()
	var row *Result
	for i := range results {
		if results[i].Name == name {
			row = &results[i]
		}
	}
	if row == nil {
		t.Fatalf("case %d: no result for %s: %+v", id, name, results)
	}
	for _, r := range results {
		if r.Name != name && !slices.Contains(running, r.Name) {
			t.Fatalf("case %d: a result for %s, which was not running: %+v", id, r.Name, results)
		}
	}
	return *row
}
