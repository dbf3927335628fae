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

// TestReclaim: the flavor a hub queue preempts on for its fleet quota,
// quota alone: one where it fits once the victims going are gone wins;
// under whenCanPreempt: Preempt the first with victims; else the best by
// Better (a tie keeps the earlier); none with why on each flavor.
func TestReclaim(t *testing.T) {
	const b = "b"
	// Queue b (preempts lower priorities within itself) holds 4 CPUs on
	// flavors x and y each.
	queueB := func(fung *strata.FlavorFungibility) *strata.ClusterQueue {
		q := &strata.ClusterQueue{}
		q.Name = b
		q.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
		q.Spec.FlavorFungibility = fung
		q.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU}, Flavors: []strata.FlavorQuotas{
			{Name: "x", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}},
			{Name: "y", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}},
		}}}
		return q
	}
	w := func(name string, priority int32, cpus string, minute int) Workload {
		return Workload{Key: types.NamespacedName{Namespace: "ns", Name: name}, Queue: b, Priority: priority, AdmittedAt: t0.Add(time.Duration(minute) * time.Minute), Requests: cpu(cpus)}
	}
	cases := []struct {
		name         string
		fung         *strata.FlavorFungibility
		flavors      []ReclaimFlavor
		want         int
		wantFits     bool
		wantVictims  []string
		wantWhyCount int
	}{
		{
			name: "a tie keeps the earlier flavor; the most recently admitted go first",
			flavors: []ReclaimFlavor{
				{Name: "x", Cands: []Workload{w("x1", 0, "2", 1), w("x2", 0, "2", 2)}},
				{Name: "y", Cands: []Workload{w("y1", 0, "4", 1)}},
			},
			want: 0, wantVictims: []string{"x2", "x1"},
		},
		{
			name: "whenCanPreempt: Preempt takes the first flavor with victims",
			fung: &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityPreempt},
			flavors: []ReclaimFlavor{
				{Name: "x", Cands: []Workload{w("x1", 9, "4", 1)}},
				{Name: "y", Cands: []Workload{w("y1", 0, "4", 1)}},
			},
			want: 1, wantVictims: []string{"y1"}, wantWhyCount: 1,
		},
		{
			name: "fits once those going are gone: no victim more",
			flavors: []ReclaimFlavor{
				{Name: "x", Cands: []Workload{w("x1", 0, "4", 1)}},
				{Name: "y", Going: []Workload{w("y1", 0, "4", 1)}},
			},
			want: 1, wantFits: true,
		},
		{
			name: "none: a higher priority holds each flavor",
			flavors: []ReclaimFlavor{
				{Name: "x", Cands: []Workload{w("x1", 9, "4", 1)}},
				{Name: "y", Cands: []Workload{w("y1", 9, "4", 1)}},
			},
			want: -1, wantWhyCount: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := queueB(tc.fung)
			books := queue.NewBooks([]*strata.ClusterQueue{q})
			usage := map[string]map[string]corev1.ResourceList{b: {}}
			for _, f := range tc.flavors {
				for _, v := range append(append([]Workload{}, f.Going...), f.Cands...) {
					queue.AddRequests(usage[b], f.Name, v.Requests)
				}
			}
			books.ChargeAll(usage)
			pre := Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "pre"}, Queue: b, Priority: 5, QueuedAt: t0, Requests: cpu("4")}
			i, fits, r, whys := Reclaim(pre, PolicyOf(q), queue.Fungibility(q), books, tc.flavors)
			var victims []string
			for _, v := range r.Victims {
				victims = append(victims, v.Key.Name)
			}
			if i != tc.want || fits != tc.wantFits || len(whys) != tc.wantWhyCount {
				t.Errorf("got flavor %d, fits %v, %d whys %q; want %d, %v, %d", i, fits, len(whys), whys, tc.want, tc.wantFits, tc.wantWhyCount)
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			// The books are left as they were.
			for _, f := range tc.flavors {
				if fit := books.Check(b, f.Name, cpu("1"), false); fit.Err == nil {
					t.Errorf("flavor %s: 1 CPU fits after Reclaim: the books changed", f.Name)
				}
			}
		})
	}
}
