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

// treeCQ is a ClusterQueue of cohort with a nominal quota of CPUs on the
// test flavor.
func treeCQ(name, cohort string, pre *strata.ClusterQueuePreemption, cpus string) *strata.ClusterQueue {
	q := cqOf(name, pre, res(cpus, ""))
	q.Spec.Cohort = cohort
	return q
}

// treeCohort is a Cohort under parent with a nominal quota of CPUs on
// the test flavor ("" for none) and a lendingLimit ("" for unset).
func treeCohort(name, parent, cpus, lending string) *strata.Cohort {
	c := &strata.Cohort{Spec: strata.CohortSpec{ParentName: parent}}
	c.Name = name
	if cpus != "" {
		rq := strata.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpus)}
		if lending != "" {
			rq.LendingLimit = new(resource.MustParse(lending))
		}
		c.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []strata.FlavorQuotas{{Name: flavor, Resources: []strata.ResourceQuota{rq}}}}}
	}
	return c
}

// TestFindHierarchical: Kueue's classical preemption in cohort trees
// (KEP-79's hierarchical cohorts). The preemptor is in queue a, of cohort
// left; left and right are under root.
func TestFindHierarchical(t *testing.T) {
	reclaim := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny}
	type wl struct {
		name, queue string
		priority    int32
		holds       string
	}
	branches := []*strata.Cohort{treeCohort("left", "root", "", ""), treeCohort("right", "root", "", "")}
	cases := map[string]struct {
		queues      []*strata.ClusterQueue
		cohorts     []*strata.Cohort
		running     []wl
		needs       string
		want        []string
		wantBorrows bool
		wantWhy     string
	}{
		"takes back what the other branch borrows": {
			queues:  []*strata.ClusterQueue{treeCQ("a", "left", reclaim, "4"), treeCQ("c", "right", nil, "4")},
			cohorts: append([]*strata.Cohort{treeCohort("root", "", "", "")}, branches...),
			running: []wl{{"c1", "c", 0, "4"}, {"c2", "c", 0, "4"}},
			needs:   "4",
			want:    []string{"c2/InCohortReclamation"},
		},
		"not from a queue whose cohort is within its own quota": {
			queues:  []*strata.ClusterQueue{treeCQ("a", "left", reclaim, "4"), treeCQ("c", "right", nil, "0")},
			cohorts: []*strata.Cohort{treeCohort("left", "root", "", ""), treeCohort("right", "root", "4", "0")},
			running: []wl{{"a1", "a", 0, "4"}, {"c1", "c", 0, "4"}},
			needs:   "2",
			want:    []string{"a1/InClusterQueue"}, wantBorrows: false,
		},
		"a cohort's own quota gives precedence over the other branch": {
			queues:  []*strata.ClusterQueue{treeCQ("a", "left", reclaim, "0"), treeCQ("c", "right", nil, "0")},
			cohorts: []*strata.Cohort{treeCohort("left", "root", "4", ""), treeCohort("right", "root", "", "")},
			running: []wl{{"c1", "c", 5, "4"}},
			needs:   "4",
			want:    []string{"c1/InCohortReclamation"}, wantBorrows: true,
		},
		"beyond every subtree's quota without borrowWithinCohort: nothing": {
			queues:  []*strata.ClusterQueue{treeCQ("a", "left", reclaim, "0"), treeCQ("c", "right", nil, "0")},
			cohorts: []*strata.Cohort{treeCohort("left", "root", "", ""), treeCohort("right", "root", "4", "")},
			running: []wl{{"c1", "c", 0, "4"}},
			needs:   "4",
			wantWhy: "it asks for more than the nominal quota of its ClusterQueue, which may preempt only within it (borrowWithinCohort is Never)",
		},
		"from both branches, lowest priority first; a queue no longer over its quota is skipped": {
			queues:  []*strata.ClusterQueue{treeCQ("a", "left", reclaim, "4"), treeCQ("b", "left", nil, "0"), treeCQ("c", "right", nil, "4")},
			cohorts: branches,
			running: []wl{{"b1", "b", 3, "2"}, {"c1", "c", 0, "4"}, {"c2", "c", 0, "2"}},
			needs:   "4",
			want:    []string{"c2/InCohortReclamation", "b1/InCohortReclamation"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			books := queue.NewBooks(tc.queues, tc.cohorts...)
			var admitted []Workload
			for i, w := range tc.running {
				books.Charge(w.queue, flavor, res(w.holds, ""), 1)
				admitted = append(admitted, Workload{Key: types.NamespacedName{Namespace: "ns", Name: w.name}, Queue: w.queue, Priority: w.priority,
					QueuedAt: t0, AdmittedAt: t0.Add(time.Duration(i) * time.Minute), Requests: res(w.holds, "")})
			}
			got := Find(Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "pre"}, Queue: "a", Priority: 1, QueuedAt: t0.Add(time.Hour), Requests: res(tc.needs, "")},
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
