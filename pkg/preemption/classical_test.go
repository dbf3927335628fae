package preemption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

// quotaOnly is Capacity where the topology always fits: the cases below
// are about quota alone.
type quotaOnly struct{}

func (quotaOnly) Release(int) {}
func (quotaOnly) Take(int)    {}
func (quotaOnly) Fits() (bool, func(int) bool) {
	return true, func(int) bool { return true }
}

// cqOf is a ClusterQueue of cohort "c" with one flavor and the given
// nominal quotas.
func cqOf(name string, pre *strata.ClusterQueuePreemption, nominal corev1.ResourceList) *strata.ClusterQueue {
	q := &strata.ClusterQueue{}
	q.Name, q.Spec.Cohort, q.Spec.Preemption = name, "c", pre
	var covered []corev1.ResourceName
	var rqs []strata.ResourceQuota
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if n, ok := nominal[r]; ok {
			covered = append(covered, r)
			rqs = append(rqs, strata.ResourceQuota{Name: r, NominalQuota: n})
		}
	}
	q.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: covered, Flavors: []strata.FlavorQuotas{{Name: flavor, Resources: rqs}}}}
	return q
}

func res(cpu, mem string) corev1.ResourceList {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if mem != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return rl
}

// TestFindKueueClassical pins Find to Kueue v0.19's classical preemption
// on inputs where an earlier Find chose other victims (each case's Kueue
// answer was read from Kueue's own flavor assigner and preemptor on the
// same queues and workloads).
func TestFindKueueClassical(t *testing.T) {
	lower := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	type wl struct {
		name, queue string
		priority    int32
		admitted    int // minutes after t0
		holds       corev1.ResourceList
	}
	cases := map[string]struct {
		queues      []*strata.ClusterQueue
		running     []wl
		priority    int32
		needs       corev1.ResourceList
		want        []string
		wantBorrows bool
		wantWhy     string
	}{
		"a queue with no other queue's candidate preempts borrowing first: the small newer one, not the big one": {
			queues: []*strata.ClusterQueue{cqOf("a", lower, res("10", "")), cqOf("b", nil, res("10", ""))},
			running: []wl{
				{"a-big", "a", 0, 1, res("8", "")}, {"a-small", "a", 0, 2, res("2", "")}, {"b1", "b", 0, 3, res("8", "")},
			},
			priority: 10, needs: res("4", ""),
			want: []string{"a-small/InClusterQueue"}, wantBorrows: true,
		},
		"with borrowWithinCohort the borrowing attempt comes first: a borrower of the cohort, not its own": {
			queues: []*strata.ClusterQueue{
				cqOf("a", &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny,
					BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority}}, res("10", "")),
				cqOf("b", nil, res("10", "")), cqOf("cc", nil, res("10", "")),
			},
			running: []wl{
				{"a1", "a", 0, 1, res("8", "")}, {"b1", "b", 0, 9, res("6", "")}, {"b2", "b", 0, 2, res("6", "")}, {"b3", "b", 0, 3, res("10", "")},
			},
			priority: 10, needs: res("4", ""),
			want: []string{"b1/InCohortReclaimWhileBorrowing"}, wantBorrows: true,
		},
		"more than its nominal quota without borrowWithinCohort: nothing is preempted": {
			queues:   []*strata.ClusterQueue{cqOf("a", lower, res("10", "")), cqOf("b", nil, res("10", ""))},
			running:  []wl{{"a1", "a", 0, 1, res("6", "")}, {"b1", "b", 0, 2, res("6", "")}},
			priority: 10, needs: res("12", ""),
			wantWhy: "it asks for more than the nominal quota of its ClusterQueue, which may preempt only within it (borrowWithinCohort is Never)",
		},
		"only a queue that borrows what is short gives back: not one that borrows another resource": {
			queues: []*strata.ClusterQueue{
				cqOf("a", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}, res("10", "10Gi")),
				cqOf("b", nil, res("10", "10Gi")), cqOf("cc", nil, res("10", "10Gi")),
			},
			running: []wl{
				{"a1", "a", 0, 1, res("6", "")}, {"b1", "b", 0, 9, res("8", "14Gi")}, {"c1", "cc", 5, 2, res("16", "2Gi")},
			},
			priority: 10, needs: res("4", "1Gi"),
			want: []string{"c1/InCohortReclamation"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			books := queue.NewBooks(tc.queues)
			var admitted []Workload
			for _, w := range tc.running {
				books.Charge(w.queue, flavor, w.holds, 1)
				admitted = append(admitted, Workload{Key: types.NamespacedName{Namespace: "ns", Name: w.name}, Queue: w.queue, Priority: w.priority,
					QueuedAt: t0, AdmittedAt: t0.Add(time.Duration(w.admitted) * time.Minute), Requests: w.holds})
			}
			got := Find(Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "pre"}, Queue: "a", Priority: tc.priority, QueuedAt: t0.Add(time.Hour), Requests: tc.needs},
				PolicyOf(tc.queues[0]), books, flavor, admitted, quotaOnly{})
			var names []string
			for _, v := range got.Victims {
				names = append(names, v.Key.Name+"/"+v.Reason)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if got.Borrows != tc.wantBorrows {
				t.Errorf("Borrows = %v, want %v", got.Borrows, tc.wantBorrows)
			}
			if got.Why != tc.wantWhy {
				t.Errorf("Why = %q, want %q", got.Why, tc.wantWhy)
			}
		})
	}
}

// TestMayPreemptFor: without borrowWithinCohort a workload asking for
// more than its queue's nominal quota of a resource on the flavor may not
// preempt (the hub does not mark such a copy); with it, it may.
func TestMayPreemptFor(t *testing.T) {
	lower := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	borrowing := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny,
		BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority}}
	cases := map[string]struct {
		pre    *strata.ClusterQueuePreemption
		flavor string
		needs  corev1.ResourceList
		want   bool
	}{
		"within the nominal quota":                     {pre: lower, flavor: flavor, needs: res("8", ""), want: true},
		"more than the nominal quota":                  {pre: lower, flavor: flavor, needs: res("9", "")},
		"more than the nominal quota of one resource":  {pre: lower, flavor: flavor, needs: res("4", "9Gi")},
		"more, with borrowWithinCohort":                {pre: borrowing, flavor: flavor, needs: res("9", ""), want: true},
		"another flavor than the queue's: not its say": {pre: lower, flavor: "other", needs: res("9", ""), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := cqOf("a", tc.pre, res("8", "8Gi"))
			if got := MayPreemptFor(cq, tc.flavor, tc.needs); got != tc.want {
				t.Errorf("MayPreemptFor = %v, want %v", got, tc.want)
			}
		})
	}
}
