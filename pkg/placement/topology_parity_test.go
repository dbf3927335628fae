package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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

// TestHubAnswersAsTheAgentOnTopology: on generated workers — two racks of
// two nodes, a cohort of two or three ClusterQueues with random quotas and
// policies, admitted workloads of random queues, priorities and sizes on
// random nodes — whenever the hub marks a copy to preempt there
// (DecidePreemption on the summary the agent publishes, bands of several
// queues included), the agent's own search (preemption.Find on its
// snapshot, the engine placing the copy) finds victims for the copy so
// marked. It may miss some (the summary does not say on which node of a
// domain each band frees capacity); it must never mark a copy the agent
// then cannot admit.
func TestHubAnswersAsTheAgentOnTopology(t *testing.T) {
	gpus := func(n int) corev1.ResourceList {
		return corev1.ResourceList{gpu: *resource.NewQuantity(int64(n), resource.DecimalSI)}
	}
	policies := []strata.PreemptionPolicy{strata.PreemptionNever, strata.PreemptionLowerPriority, strata.PreemptionAny}
	p := New(configv1beta1.Compact, tas.Options{}, 0)
	marked, missed, cases := 0, 0, 0
	for c := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		// Half the workers have a quota of CPUs too, on nodes of 8: some
		// workloads hold CPUs only.
		twoResources := c%2 == 1
		s := tas.NewSnapshot([]string{block, rack, host}, nil)
		var nodes []string
		for r := range 2 {
			for n := range 2 {
				node := fmt.Sprintf("r%d-n%d", r, n)
				nodes = append(nodes, node)
				s.SetNode(tas.Node{Name: node, Labels: map[string]string{block: "b0", rack: fmt.Sprintf("r%d", r), host: node}, Ready: true,
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}})
			}
		}
		n := 2 + rng.IntN(2)
		var cqs []*strata.ClusterQueue
		for i := range n {
			cq := &strata.ClusterQueue{}
			cq.Name, cq.Spec.Cohort = fmt.Sprintf("q%d", i), "teams"
			quotas := []strata.ResourceQuota{{Name: gpu, NominalQuota: gpus(rng.IntN(9))[gpu]}}
			covered := []corev1.ResourceName{gpu}
			if twoResources {
				quotas = append(quotas, strata.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: gpus(rng.IntN(17))[gpu]})
				covered = append(covered, corev1.ResourceCPU)
			}
			cq.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: covered,
				Flavors: []strata.FlavorQuotas{{Name: "f", Resources: quotas}}}}
			cqs = append(cqs, cq)
		}
		pre := &strata.ClusterQueuePreemption{
			WithinClusterQueue:  []strata.PreemptionPolicy{strata.PreemptionNever, strata.PreemptionLowerPriority}[rng.IntN(2)],
			ReclaimWithinCohort: policies[rng.IntN(3)],
		}
		if pre.ReclaimWithinCohort != strata.PreemptionNever && rng.IntN(3) == 0 {
			pre.BorrowWithinCohort = &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority}
		}
		cqs[0].Spec.Preemption = pre
		books := queue.NewBooks(cqs)
		base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		var held []tas.Held
		var running []preemption.Workload
		free, freeCPU := map[string]int{}, map[string]int{}
		for _, node := range nodes {
			free[node], freeCPU[node] = 4, 8
		}
		for k := range 10 {
			q := cqs[rng.IntN(n)].Name
			size, cpu := 1+rng.IntN(3), 0
			req := gpus(size)
			if twoResources {
				size, cpu = rng.IntN(3), 1+rng.IntN(3)
				req = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI)}
				if size > 0 {
					req[gpu] = gpus(size)[gpu]
				}
			}
			node := nodes[rng.IntN(len(nodes))]
			if books.Check(q, "f", req, false).Err != nil || free[node] < size || freeCPU[node] < cpu {
				continue
			}
			free[node] -= size
			freeCPU[node] -= cpu
			books.Charge(q, "f", req, 1)
			s.AddUsage(node, req, 1)
			at := base.Add(time.Duration(k/2) * time.Second) // two at a time: ties by key
			w := preemption.Workload{Key: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("w%d", k)}, Queue: q,
				Priority: []int32{0, 10, 100}[rng.IntN(3)], QueuedAt: at, AdmittedAt: at, Requests: req}
			running = append(running, w)
			held = append(held, tas.Held{Queue: q, Priority: w.Priority, Usage: tas.Usage{node: req}, Requests: req, AdmittedAt: at, Key: w.Key.String()})
		}
		priority := []int32{5, 10, 50, 100, 200}[rng.IntN(5)]
		wl := job(int32(1+rng.IntN(2)), fmt.Sprint(1+rng.IntN(4)), func(ps *testutil.PodSetWrapper) {
			if twoResources {
				ps.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = *resource.NewQuantity(int64(1+rng.IntN(4)), resource.DecimalSI)
			}
			switch rng.IntN(3) {
			case 0:
				ps.Required(rack)
			case 1:
				ps.Required(block)
			}
		})
		need := queue.WorkloadRequests(wl)
		// The agent's summary, as the agent makes it.
		victims := preemption.VictimQueues(cqs)
		usage := map[string]corev1.ResourceList{}
		for _, h := range held {
			queue.AddRequests(usage, h.Queue, h.Requests)
		}
		borrowed := map[string]corev1.ResourceList{}
		for q, cq := range victims.Reclaimed {
			if b := preemption.Borrowed(cq, "f", usage[q]); len(b) > 0 {
				borrowed[q] = b
			}
		}
		st, err := s.CapturePreemptible(nil, held, tas.Victims{Within: victims.Within, Borrowed: borrowed}).Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		st.SummaryGeneration = 1
		tg := target(t, "w", "f", &st)
		quotaShort, _ := QuotaShort(books, "q0", "f", need, nil, false)
		if quotaShort == "" && p.Decide(wl, []string{"f"}, []*Target{tg}).Cluster != "" {
			continue // it fits: nothing to preempt
		}
		cases++
		scopes := ScopesFor(cqs[0], "f", need, priority, books, false)
		choice, _ := p.DecidePreemption(wl, []string{"f"}, []*Target{tg}, everywhere(priority), func(*Target) []PreemptionScope { return scopes },
			func(_ *Target, freed map[string]corev1.ResourceList, nominal bool) string {
				why, _ := QuotaShort(books, "q0", "f", need, freed, nominal)
				return why
			})
		find := func(upTo *int32) preemption.Result {
			var cands []preemption.Workload
			var usages []tas.Usage
			for i, w := range running {
				if upTo == nil || w.Priority <= *upTo {
					cands = append(cands, w)
					usages = append(usages, held[i].Usage)
				}
			}
			capacity := &preemption.SnapshotCapacity{Snap: s, Usages: usages, Place: func(sn *tas.Snapshot) ([]tas.Usage, error) {
				_, taken, err := workload.Place(sn, "default", nil, wl, tas.Options{})
				return taken, err
			}}
			return preemption.Find(preemption.Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "copy"}, Queue: "q0", Priority: priority,
				QueuedAt: base.Add(time.Hour), Requests: need}, preemption.PolicyOf(cqs[0]), books, "f", cands, capacity)
		}
		if choice != nil {
			marked++
			if res := find(ptr.To(choice.UpTo)); len(res.Victims) == 0 {
				var rs []string
				for _, h := range held {
					rs = append(rs, fmt.Sprintf("%s p%d %v on %v", h.Queue, h.Priority, h.Requests.Name(gpu, resource.DecimalSI), keysOf(h.Usage)))
				}
				t.Errorf("case %d: the hub marks the copy (%s), the agent finds nothing (%s); policy %+v, priority %d, %d×%v %s; running %s",
					c, choice.Reason, res.Why, *pre, priority, wl.Spec.PodSets[0].Count, wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests.Name(gpu, resource.DecimalSI),
					fmt.Sprintf("%+v", wl.Spec.PodSets[0].TopologyRequest), strings.Join(rs, "; "))
			}
		} else if len(find(nil).Victims) > 0 {
			missed++
		}
	}
	t.Logf("%d cases need a preemption: the hub marked %d, each of which the agent could admit; it missed %d the agent would make unmarked", cases, marked, missed)
	if marked < cases/5 {
		t.Errorf("the hub marks %d of %d: the generated cases do not cover enough", marked, cases)
	}
	// Misses are on the safe side (the summary does not say on which node
	// a band frees what): 16 when a queue had only the series of all its
	// workloads, 6 with a series per resource (tas.QueueSeries).
	if missed*200 > cases {
		t.Errorf("the hub missed %d of %d preemptions the agent makes", missed, cases)
	}
}

func keysOf(u tas.Usage) []string {
	var out []string
	for k := range u {
		out = append(out, k)
	}
	return out
}
