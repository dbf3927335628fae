package placement

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/testutil"
)

// TestScopeFor: whose workloads a copy may preempt on a worker, from the
// queue it lands in, its policy and the worker's quota books.
func TestScopesFor(t *testing.T) {
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
		want  []PreemptionScope
	}{
		"no queue known":                {need: "1"},
		"a queue that preempts nothing": {cq: mk("train", "4", nil), need: "1"},
		"within itself":                 {cq: mk("train", "4", within), need: "1", want: []PreemptionScope{{Queue: "train", Within: true}}},
		"short of more than its nominal quota: nothing (Kueue's NoFit)": {cq: mk("train", "4", within), need: "6",
			usage: map[string]corev1.ResourceList{"infer": cpus("2"), "batch": cpus("1")}},
		"more than its nominal quota, which the cohort lends: only the capacity is short, as for Find": {cq: mk("train", "4", within), need: "6",
			want: []PreemptionScope{{Queue: "train", Within: true}}},
		"reclaim-only, from the peer that borrows": {
			cq: mk("train", "4", reclaimAny), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("3"), "batch": cpus("1")},
			want:  []PreemptionScope{{Queue: "train", Reclaim: map[string]int32{"infer": math.MaxInt32}}},
		},
		"reclaim-only and no peer borrows: nothing": {
			cq: mk("train", "4", reclaimAny), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("2"), "batch": cpus("1")},
		},
		"beyond its nominal quota it reclaims nothing without borrowWithinCohort (Kueue)": {
			cq: mk("train", "4", reclaimAny), need: "2",
			usage: map[string]corev1.ResourceList{"train": cpus("3"), "infer": cpus("3")},
		},
		"beyond its nominal quota, borrowWithinCohort: lower priorities up to the threshold": {
			cq: mk("train", "4", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny,
				BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority, MaxPriorityThreshold: ptr.To[int32](50)}}),
			need:  "2",
			usage: map[string]corev1.ResourceList{"train": cpus("3"), "infer": cpus("3")},
			want:  []PreemptionScope{{Queue: "train", Reclaim: map[string]int32{"infer": 50}}},
		},
		"reclaiming lower priorities, within too": {
			cq: mk("train", "4", reclaimLower), need: "2",
			usage: map[string]corev1.ResourceList{"infer": cpus("3"), "batch": cpus("2")},
			want:  []PreemptionScope{{Queue: "train", Within: true, Reclaim: map[string]int32{"infer": 99, "batch": 99}}},
		},
		"beyond its nominal quota, within itself: without borrowing once its own and the borrowers' go (Kueue's attempt without borrowing)": {
			cq: mk("train", "4", &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny}), need: "2",
			usage: map[string]corev1.ResourceList{"train": cpus("3"), "infer": cpus("3")},
			want: []PreemptionScope{{Queue: "train", Within: true},
				{Queue: "train", Within: true, Reclaim: map[string]int32{"infer": math.MaxInt32}, Nominal: true}},
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
			got := ScopesFor(tc.cq, "gpu", cpus(tc.need), 100, books, false)
			for _, sc := range got {
				if sc.Short == nil {
					t.Errorf("scope %+v: no resources the copy is short of", sc)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(PreemptionScope{}, "Short"), cmpopts.IgnoreUnexported(PreemptionScope{})); diff != "" {
				t.Errorf("ScopesFor (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestQuotaShortWithBands: a cohort peer's reclaim band gives back what
// the agent's search takes from it, which may cross its nominal quota
// (the last workload taken); within its nominal quota, the copy may not
// count on what the peer then leaves unused.
func TestQuotaShortWithBands(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	train := testutil.MakeClusterQueue("train").Cohort("teams").ResourceGroup("cpu").GroupFlavor("gpu", "4").Obj()
	infer := testutil.MakeClusterQueue("infer").Cohort("teams").ResourceGroup("cpu").GroupFlavor("gpu", "2").Obj()
	books := queue.NewBooks([]*strata.ClusterQueue{train, infer})
	books.Charge("infer", "gpu", cpus("5"), 1) // borrows 3 of train's 4
	books.Charge("train", "gpu", cpus("1"), 1)
	for _, tc := range []struct {
		need, band string
		nominal    bool
		fits       bool
	}{
		{need: "3", band: "3", fits: true},                 // 3 taken back, with 1 used: 4
		{need: "4", band: "3", fits: false},                // infer's 2 of nominal quota stay
		{need: "4", band: "4", fits: true},                 // the last workload taken crosses infer's nominal quota: train borrows 1 of it
		{need: "4", band: "4", nominal: true, fits: false}, // not within train's nominal quota
		{need: "1", band: "1", fits: true},
	} {
		why, never := QuotaShort(books, "train", "gpu", cpus(tc.need), map[string]corev1.ResourceList{"infer": cpus(tc.band)}, tc.nominal)
		if (why == "") != tc.fits || never {
			t.Errorf("need %s, band %s, nominal %v: why %q never %v, want fits %v", tc.need, tc.band, tc.nominal, why, never, tc.fits)
		}
	}
	if why, _ := QuotaShort(books, "train", "gpu", cpus("3"), nil, false); why == "" {
		t.Errorf("without the band: room, want none")
	}
	if _, never := QuotaShort(books, "train", "gpu", cpus("9"), nil, false); !never {
		t.Errorf("more than the whole quota: not never")
	}
}
