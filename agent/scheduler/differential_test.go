package scheduler

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/simulate"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// TestAgentAgreesWithSimulate: on generated clusters (one or two flavors
// of racks of hosts, one to three ClusterQueues, in a cohort or not, each
// flavor's quota random, with borrowing and lending limits now and then,
// whenCanBorrow either way, BestEffortFIFO or StrictFIFO) and backlogs
// (one or two pod sets, required, preferred or unconstrained rack or host,
// a PodSet group, a minCount for partial admission, priorities),
// the agent's passes admit what `kubectl strata simulate` admits, on the
// same flavors and in the same domains. simulate is what users are told
// to trust for "what would the agent do"; the two are separate
// implementations of one walk (the agent's over its cache and client,
// simulate's over files), and any difference is a bug in one of them.
// STRATA_DIFF_SEEDS=1000 tries more cases (60 by default: the race
// detector slows them); STRATA_DIFF_VERBOSE=1 logs both sides' reasons.
func TestAgentAgreesWithSimulate(t *testing.T) {
	agreeing(t, generateCase)
}

// TestAgentAgreesWithSimulateOnTrees: as TestAgentAgreesWithSimulate,
// where the cohorts are a tree of Cohort objects (two under a root, with
// quota of their own now and then) and fair sharing is on in half the
// cases, with weights on queues and cohorts.
func TestAgentAgreesWithSimulateOnTrees(t *testing.T) {
	agreeing(t, func(seed uint64) *diffCase { return generateWith(rand.New(rand.NewPCG(seed, 4136)), false, true) })
}

func agreeing(t *testing.T, gen func(uint64) *diffCase) {
	for seed := range uint64(diffSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := gen(seed)
			agent := c.runAgent(t)
			sim, results := c.simulate(t)
			if why := mayHold(results); why != "" {
				// simulate holds, for the rest of a round, the quota a head
				// that must preempt and finds no victims could take back
				// (Kueue's reservation); the agent does not, by design
				// (docs/engine.md).
				t.Skip(why)
			}
			if diff := cmp.Diff(sim, agent); diff != "" {
				t.Errorf("%s\nagent against simulate (-simulate,+agent):\n%s", c.describe(), diff)
			}
		})
	}
}

// diffCase is one generated input.
type diffCase struct {
	flavors   []string // of "tas-flavor", "other"
	nodes     []*corev1.Node
	queues    []*strata.ClusterQueue
	cohorts   []*strata.Cohort
	fair      *configv1beta1.FairSharing // the agent's fairSharing; nil: off
	workloads []*strata.Workload
}

func generateCase(seed uint64) *diffCase {
	return generate(rand.New(rand.NewPCG(seed, 2724)), false)
}

// generate makes a case; with preempting, the queues' preemption
// policies are random too, and so are priorities up to 3.
func generate(r *rand.Rand, preempting bool) *diffCase {
	return generateWith(r, preempting, false)
}

// generateWith is generate; with trees, queues in a cohort are in one of
// two cohorts under a root, given Cohort objects with quota of their own
// now and then, and fair sharing is on in half the cases, with weights on
// queues and cohorts.
func generateWith(r *rand.Rand, preempting, trees bool) *diffCase {
	c := &diffCase{flavors: []string{"tas-flavor"}}
	if r.IntN(2) == 0 {
		c.flavors = append(c.flavors, "other")
	}
	for _, f := range c.flavors {
		racks, hosts := 1+r.IntN(3), 1+r.IntN(3)
		for rk := range racks {
			for h := range hosts {
				cpu := []string{"2", "4", "8"}[r.IntN(3)]
				name := fmt.Sprintf("%s-r%d-h%d", f, rk, h)
				rack := fmt.Sprintf("%s-r%d", f, rk)
				if f == "other" {
					c.nodes = append(c.nodes, otherNode(name, rack, cpu))
				} else {
					c.nodes = append(c.nodes, tasNode(name, rack, cpu))
				}
			}
		}
	}
	nq := 1 + r.IntN(3)
	cohort := r.IntN(2) == 0
	for q := range nq {
		w := testutil.MakeClusterQueue(fmt.Sprintf("q%d", q)).ResourceGroup("cpu")
		for _, f := range c.flavors {
			w = w.GroupFlavor(f, fmt.Sprint(r.IntN(13)))
			if cohort && r.IntN(4) == 0 {
				// Limits of borrowing and lending, now and then.
				w = w.Limits("cpu", fmt.Sprint(r.IntN(5)), fmt.Sprint(r.IntN(5)))
			}
		}
		if cohort {
			name := "c"
			if trees && r.IntN(2) == 0 {
				name = "d"
			}
			w = w.Cohort(name)
		}
		cq := w.Obj()
		if trees && r.IntN(3) == 0 {
			cq.Spec.FairSharing = &strata.FairSharing{Weight: ptr.To(resource.MustParse([]string{"0.5", "1", "2"}[r.IntN(3)]))}
		}
		if r.IntN(2) == 0 {
			cq.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor}
		}
		if r.IntN(5) == 0 {
			cq.Spec.QueueingStrategy = strata.StrictFIFO
		}
		if preempting {
			cq.Spec.Preemption = &strata.ClusterQueuePreemption{
				WithinClusterQueue:  []strata.PreemptionPolicy{strata.PreemptionNever, strata.PreemptionLowerPriority}[r.IntN(2)],
				ReclaimWithinCohort: []strata.PreemptionPolicy{strata.PreemptionNever, strata.PreemptionLowerPriority, strata.PreemptionAny}[r.IntN(3)],
			}
		}
		c.queues = append(c.queues, cq)
	}
	if trees && cohort {
		if r.IntN(2) == 0 {
			c.fair = &configv1beta1.FairSharing{}
		}
		for _, name := range []string{"root", "c", "d"} {
			co := &strata.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if name != "root" {
				co.Spec.ParentName = "root"
			}
			if r.IntN(2) == 0 {
				// Quota of the cohort's own, now and then limited.
				rg := strata.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU}}
				for _, f := range c.flavors {
					q := strata.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(fmt.Sprint(r.IntN(7)))}
					if name != "root" && r.IntN(4) == 0 {
						q.LendingLimit = ptr.To(resource.MustParse(fmt.Sprint(r.IntN(4))))
					}
					if name != "root" && r.IntN(4) == 0 {
						q.BorrowingLimit = ptr.To(resource.MustParse(fmt.Sprint(r.IntN(4))))
					}
					rg.Flavors = append(rg.Flavors, strata.FlavorQuotas{Name: f, Resources: []strata.ResourceQuota{q}})
				}
				co.Spec.ResourceGroups = []strata.ResourceGroup{rg}
			}
			if name != "root" && c.fair != nil && r.IntN(2) == 0 {
				co.Spec.FairSharing = &strata.FairSharing{Weight: ptr.To(resource.MustParse([]string{"0.5", "1", "2"}[r.IntN(3)]))}
			}
			c.cohorts = append(c.cohorts, co)
		}
	}
	n := 3 + r.IntN(10)
	for i := range n {
		var podSets []strata.PodSet
		// A workload's pod sets all ask for a level, or none does (the
		// intake's rule, workload.ValidatePodSets).
		unconstrained := r.IntN(4) == 0
		for k := range 1 + r.IntN(2) {
			ps := testutil.MakePodSet([]string{"main", "second"}[k], int32(1+r.IntN(6)), "cpu", fmt.Sprint(1+r.IntN(2)))
			switch {
			case unconstrained:
				ps = ps.Unconstrained()
			case r.IntN(3) == 0:
				ps = ps.Required(rackLabel)
			case r.IntN(2) == 0:
				ps = ps.Preferred(rackLabel)
			default:
				ps = ps.Required(hostLabel)
			}
			podSets = append(podSets, ps.Obj())
		}
		switch {
		case len(podSets) == 2 && !unconstrained && r.IntN(4) == 0:
			// A PodSet group: one flavor, one domain level for both.
			for k := range podSets {
				podSets[k].TopologyRequest = &strata.PodSetTopologyRequest{Required: ptr.To(rackLabel), PodSetGroupName: ptr.To("g")}
			}
		case len(podSets) == 1 && podSets[0].Count > 1 && r.IntN(4) == 0:
			// Partial admission down to minCount.
			podSets[0].MinCount = ptr.To(int32(1 + r.IntN(int(podSets[0].Count))))
		}
		wl := testutil.MakeWorkload(fmt.Sprintf("w%02d", i), "ns").Queue(c.queues[r.IntN(nq)].Name).PodSets(podSets...).Obj()
		wl.Spec.Priority = ptr.To(int32(r.IntN(3)))
		if preempting {
			wl.Spec.Priority = ptr.To(int32(r.IntN(4)))
		}
		wl.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(i) * time.Second))
		c.workloads = append(c.workloads, wl)
	}
	return c
}

// diffOutcome is each workload's outcome, as both report it: "" when not
// admitted, else per pod set its flavor and domains.
type diffOutcome map[string]string

func (c *diffCase) runAgent(t *testing.T) diffOutcome {
	t.Helper()
	e := c.env(t, c.workloads)
	var last diffOutcome
	for range 8 {
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
		got := e.placements(t)
		if cmp.Equal(got, last) {
			break
		}
		last = got
	}
	return last
}

// placements are the workloads' admissions.
func (e *schedEnv) placements(t *testing.T) diffOutcome {
	t.Helper()
	var wls strata.WorkloadList
	if err := e.c.List(t.Context(), &wls); err != nil {
		t.Fatal(err)
	}
	out := diffOutcome{}
	for _, wl := range wls.Items {
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && os.Getenv("STRATA_DIFF_VERBOSE") != "" {
			t.Logf("agent %s: %s", wl.Name, c.Message)
		}
		a := wl.Status.Admission
		if a == nil {
			out[wl.Name] = ""
			continue
		}
		var parts []string
		for _, psa := range a.PodSetAssignments {
			var doms []string
			if psa.TopologyAssignment != nil {
				ta, err := tas.Decode(psa.TopologyAssignment)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ta.Domains {
					doms = append(doms, fmt.Sprintf("%s:%d", d.Values[len(d.Values)-1], d.Count))
				}
			}
			slices.Sort(doms)
			parts = append(parts, fmt.Sprintf("%s@%s[%s]", psa.Name, psa.Flavor, strings.Join(doms, " ")))
		}
		out[wl.Name] = strings.Join(parts, " ")
	}
	return out
}

// simulate runs kubectl strata simulate's engine on c: the placements, and
// its results.
func (c *diffCase) simulate(t *testing.T) (diffOutcome, []simulate.Result) {
	t.Helper()
	var docs []any
	docs = append(docs, testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
	for _, f := range c.flavors {
		pool := "tas"
		if f == "other" {
			pool = "other"
		}
		docs = append(docs, testutil.MakeResourceFlavor(f).NodeLabel("pool", pool).TopologyName("default").Obj())
	}
	docs = append(docs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	for _, q := range c.queues {
		docs = append(docs, q, testutil.MakeLocalQueue(q.Name, "ns", q.Name))
	}
	for _, co := range c.cohorts {
		docs = append(docs, co)
	}
	for _, n := range c.nodes {
		docs = append(docs, n)
	}
	for _, wl := range c.workloads {
		docs = append(docs, wl)
	}
	var b strings.Builder
	for _, d := range docs {
		o := d.(client.Object)
		gvk, err := apiutilGVK(o)
		if err != nil {
			t.Fatal(err)
		}
		o = o.DeepCopyObject().(client.Object)
		o.GetObjectKind().SetGroupVersionKind(gvk)
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("STRATA_DIFF_VERBOSE") != "" {
		t.Logf("simulate's input: %s", filepath.Join(dir, "in.yaml"))
		_ = os.WriteFile(filepath.Join(os.TempDir(), "strata-diff-"+strings.ReplaceAll(t.Name(), "/", "-")+".yaml"), []byte(b.String()), 0o600)
	}
	in, err := simulate.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	in.FairSharing = c.fair
	results, err := simulate.Run(in, tas.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	out := diffOutcome{}
	for _, r := range results {
		if os.Getenv("STRATA_DIFF_VERBOSE") != "" {
			t.Logf("simulate %s: %s (preempts %v)", r.Name, r.Reason, r.Preempts)
		}
		if !r.Admitted {
			out[r.Name] = ""
			continue
		}
		var parts []string
		for _, ps := range r.PodSets {
			var doms []string
			for _, d := range ps.Domains {
				doms = append(doms, fmt.Sprintf("%s:%d", d.Values[len(d.Values)-1], d.Count))
			}
			slices.Sort(doms)
			parts = append(parts, fmt.Sprintf("%s@%s[%s]", ps.Name, ps.Flavor, strings.Join(doms, " ")))
		}
		out[r.Name] = strings.Join(parts, " ")
	}
	return out, results
}

func (c *diffCase) describe() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "node %s cpu %s\n", n.Name, n.Status.Allocatable.Cpu())
	}
	for _, q := range c.queues {
		var quotas []string
		for _, f := range q.Spec.ResourceGroups[0].Flavors {
			quotas = append(quotas, fmt.Sprintf("%s=%s", f.Name, f.Resources[0].NominalQuota.String()))
		}
		fung := ""
		if q.Spec.FlavorFungibility != nil {
			fung = " TryNextFlavor"
		}
		if q.Spec.FairSharing != nil {
			fung += " weight " + q.Spec.FairSharing.Weight.String()
		}
		if p := q.Spec.Preemption; p != nil {
			fung += fmt.Sprintf(" within %s reclaim %s", p.WithinClusterQueue, p.ReclaimWithinCohort)
		}
		for _, f := range q.Spec.ResourceGroups[0].Flavors {
			if r := f.Resources[0]; r.BorrowingLimit != nil || r.LendingLimit != nil {
				fung += fmt.Sprintf(" %s limits borrowing %v lending %v", f.Name, r.BorrowingLimit, r.LendingLimit)
			}
		}
		fmt.Fprintf(&b, "queue %s cohort %q %s%s\n", q.Name, q.Spec.Cohort, strings.Join(quotas, " "), fung)
	}
	for _, co := range c.cohorts {
		y, _ := yaml.Marshal(co.Spec)
		fmt.Fprintf(&b, "cohort %s: %s\n", co.Name, strings.ReplaceAll(string(y), "\n", " "))
	}
	if c.fair != nil {
		b.WriteString("fair sharing on\n")
	}
	for _, wl := range c.workloads {
		var ps []string
		for _, p := range wl.Spec.PodSets {
			req := "none"
			if tr := p.TopologyRequest; tr != nil {
				switch {
				case tr.Required != nil:
					req = "required " + *tr.Required
				case tr.Preferred != nil:
					req = "preferred " + *tr.Preferred
				default:
					req = "unconstrained"
				}
			}
			if p.MinCount != nil {
				req += fmt.Sprintf(", minCount %d", *p.MinCount)
			}
			ps = append(ps, fmt.Sprintf("%s %dx%s (%s)", p.Name, p.Count, p.Template.Spec.Containers[0].Resources.Requests.Cpu(), req))
		}
		fmt.Fprintf(&b, "workload %s queue %s priority %d: %s\n", wl.Name, wl.Spec.QueueName, *wl.Spec.Priority, strings.Join(ps, ", "))
	}
	return b.String()
}

// apiutilGVK is o's kind in the scheme the agent uses.
func apiutilGVK(o client.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := scheme.New().ObjectKinds(o)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}

// diffSeeds is how many cases TestAgentAgreesWithSimulate generates.
var diffSeeds = envInt("STRATA_DIFF_SEEDS", 60)

// envInt is the environment's integer name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// mayHold names a workload simulate served in a round where an earlier
// head held quota it found no victims for (Kueue's reservation, which the
// agent does not make); "" when none.
func mayHold(results []simulate.Result) string {
	for _, r := range results {
		if r.UnderRoundHold {
			return fmt.Sprintf("%s was served in simulate under a round's hold", r.Name)
		}
	}
	return ""
}

// TestAgentPreemptsAsSimulates: as TestAgentAgreesWithSimulate, with
// preemption. The queues' policies are random (withinClusterQueue Never
// or LowerPriority, reclaimWithinCohort Never, LowerPriority or Any); the
// agent admits the first half of the backlog, and the second half (of
// priorities up to 3) then comes to a cluster running what it admitted.
// The agent and simulate, given those running workloads, admit the same
// second half in the same places and preempt the same workloads; a
// victim goes back to its queue and both place it again in the same
// place, or neither.
func TestAgentPreemptsAsSimulates(t *testing.T) {
	preempting(t, func(seed uint64) *diffCase { return generate(rand.New(rand.NewPCG(seed, 5732)), true) })
}

// TestAgentPreemptsAsSimulatesOnTrees: as TestAgentPreemptsAsSimulates,
// on the cohort trees and fair sharing of
// TestAgentAgreesWithSimulateOnTrees.
func TestAgentPreemptsAsSimulatesOnTrees(t *testing.T) {
	preempting(t, func(seed uint64) *diffCase { return generateWith(rand.New(rand.NewPCG(seed, 1714)), true, true) })
}

func preempting(t *testing.T, gen func(uint64) *diffCase) {
	for seed := range uint64(diffSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := gen(seed)
			half := len(c.workloads) / 2
			first, second := c.workloads[:half], c.workloads[half:]
			e := c.env(t, first)
			c.passes(t, e, nil)
			var wls strata.WorkloadList
			if err := e.c.List(t.Context(), &wls); err != nil {
				t.Fatal(err)
			}
			var running, waiting []*strata.Workload
			for i := range wls.Items {
				wl := &wls.Items[i]
				if wl.Status.Admission == nil {
					waiting = append(waiting, wl.DeepCopy())
					continue
				}
				// Admitted a second apart (in the order of names): the
				// candidates for preemption order by admission time, and
				// those of one pass differ by nanoseconds in the agent's
				// memory and tie in the API's seconds.
				c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
				c.LastTransitionTime = metav1.NewTime(created.Add(time.Hour + time.Duration(len(running))*time.Second))
				if err := e.c.Status().Update(t.Context(), wl); err != nil {
					t.Fatal(err)
				}
				running = append(running, wl.DeepCopy())
			}
			for _, wl := range second {
				if err := e.c.Create(t.Context(), wl.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			e.informed(t)
			agent := c.passes(t, e, running)

			in := &diffCase{flavors: c.flavors, nodes: c.nodes, queues: c.queues, cohorts: c.cohorts, fair: c.fair}
			for _, wl := range running {
				// As an agent's informer shows it, without what the fake
				// client adds.
				w := wl.DeepCopy()
				w.ResourceVersion = ""
				in.workloads = append(in.workloads, w)
			}
			// What waits from the first half waits still, as written
			// (its status says why; simulate places it afresh).
			for _, wl := range waiting {
				w := wl.DeepCopy()
				w.ResourceVersion, w.Status = "", strata.WorkloadStatus{}
				in.workloads = append(in.workloads, w)
			}
			in.workloads = append(in.workloads, second...)
			sim, results := in.runSimulatePreempting(t, running)
			if why := mayHold(results); why != "" {
				t.Skip(why)
			}
			if diff := cmp.Diff(sim, agent); diff != "" {
				t.Errorf("%s\nrunning: %s\nagent against simulate (-simulate,+agent):\n%s", c.describe(), names(running), diff)
			}
		})
	}
}

// env is the agent's test environment of c with workloads pending.
func (c *diffCase) env(t *testing.T, workloads []*strata.Workload) *schedEnv {
	t.Helper()
	objs := []client.Object{}
	for _, q := range c.queues {
		objs = append(objs, q.DeepCopy())
	}
	for _, co := range c.cohorts {
		objs = append(objs, co.DeepCopy())
	}
	for _, wl := range workloads {
		objs = append(objs, wl.DeepCopy())
	}
	setup := tasSetup
	if len(c.flavors) > 1 {
		setup = twoFlavors
	}
	e := newSchedEnv(t, objs, func(cc *cache.Cache) { setup(cc) }, c.nodes, interceptor.Funcs{})
	if c.fair != nil {
		e.s.WithFairSharing(c.fair)
	}
	return e
}

// passes runs the agent's passes until they change nothing (at most 8),
// and returns the placements, running's as "running" until a pass evicts
// them (then where the agent placed them again, if it did).
func (c *diffCase) passes(t *testing.T, e *schedEnv, running []*strata.Workload) diffOutcome {
	t.Helper()
	isRunning := map[string]bool{}
	for _, wl := range running {
		isRunning[wl.Name] = true
	}
	evicted := map[string]bool{}
	var last diffOutcome
	for range 8 {
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		var wls strata.WorkloadList
		if err := e.c.List(t.Context(), &wls); err != nil {
			t.Fatal(err)
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			if isRunning[wl.Name] && wl.Status.Admission == nil {
				evicted[wl.Name] = true
			}
		}
		e.informed(t)
		got := e.placements(t)
		for name := range isRunning {
			if !evicted[name] && got[name] != "" {
				got[name] = "running"
			}
		}
		if cmp.Equal(got, last) {
			break
		}
		last = got
	}
	return last
}

// runSimulatePreempting is runSimulate where the workloads of running are
// admitted already: "running" while simulate keeps them, and once a
// placement preempts them where simulate places them again ("" for
// nowhere).
func (c *diffCase) runSimulatePreempting(t *testing.T, running []*strata.Workload) (diffOutcome, []simulate.Result) {
	t.Helper()
	out, results := c.simulate(t)
	for _, wl := range running {
		if _, placedAgain := out[wl.Name]; !placedAgain {
			out[wl.Name] = "running" // simulate gives no row to one it keeps
		}
	}
	return out, results
}

func names(wls []*strata.Workload) string {
	var out []string
	for _, wl := range wls {
		out = append(out, wl.Name)
	}
	return strings.Join(out, ", ")
}
