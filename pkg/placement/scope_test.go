package placement

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/testutil"
)

// TestScopeFor: whose workloads a copy may preempt on a worker, from the
// queue it lands in, its policy and the worker's quota books.
func TestScopeFor(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	mk := func(name, nominal string, p *strata.ClusterQueuePreemption) *strata.ClusterQueue {
		cq := testutil.MakeClusterQueue(name).Cohort("teams").ResourceGroup("cpu").GroupFlavor("gpu", nominal).Obj()
		cq.Spec.Preemption = p
		return cq
	}
	within := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	reclaimAny := &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}
	reclaimLower := &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionLowerPriority, WithinClusterQueue: strata.PreemptionLowerPriority}
	cases := map[string]struct {
		cq    *strata.ClusterQueue
		usage map[string]corev1.ResourceList
		need  string
		want  PreemptionScope
	}{
		"no queue known":                {need: "1"},
		"a queue that preempts nothing": {cq: mk("train", "4", nil), need: "1"},
		"within itself":                 {cq: mk("train", "4", within), need: "1", want: PreemptionScope{Queue: "train", Within: true}},
		"asking more than its nominal quota: nothing (Kueue's NoFit)": {cq: mk("train", "4", within), need: "6"},
		"reclaim-only, from the peer that borrows": {
			cq: mk("train", "4", reclaimAny), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("3"), "batch": cpus("1")},
			want:  PreemptionScope{Queue: "train", Reclaim: map[string]int32{"infer": math.MaxInt32}},
		},
		"reclaim-only and no peer borrows: nothing": {
			cq: mk("train", "4", reclaimAny), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("2"), "batch": cpus("1")},
		},
		"reclaiming lower priorities, within too": {
			cq: mk("train", "4", reclaimLower), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("3"), "batch": cpus("2")},
			want:  PreemptionScope{Queue: "train", Within: true, Reclaim: map[string]int32{"infer": 99, "batch": 99}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cqs := []*strata.ClusterQueue{mk("infer", "2", nil), mk("batch", "1", nil)}
			if tc.cq != nil {
				cqs = append(cqs, tc.cq)
			}
			books := queue.NewBooks(cqs)
			for q, u := range tc.usage {
				books.Charge(q, "gpu", u, 1)
			}
			got := ScopeFor(tc.cq, "gpu", cpus(tc.need), 100, books)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ScopeFor (-want,+got):\n%s", diff)
			}
		})
	}
}
