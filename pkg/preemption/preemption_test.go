package preemption

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
)

const (
	rackLevel = "rack"
	hostLevel = strata.HostnameLabel
	flavor    = "gpu"
)

var t0 = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

func cpu(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
}

// cluster is racks × hosts nodes of 4 CPUs, named r<rack>h<host>.
func cluster(racks, hosts int) *tas.Snapshot {
	s := tas.NewSnapshot([]string{rackLevel, hostLevel}, nil)
	for r := range racks {
		for h := range hosts {
			name := fmt.Sprintf("r%dh%d", r, h)
			s.SetNode(tas.Node{Name: name, Labels: map[string]string{rackLevel: fmt.Sprintf("r%d", r), hostLevel: name},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}, Ready: true})
		}
	}
	return s
}

// running is an admitted workload filling whole hosts (4 CPUs each).
type running struct {
	name, queue string
	priority    int32
	// queued and admitted are minutes after t0.
	queued, admitted int
	hosts            []string
}

func cq(name, cohort string, nominal string, pre *strata.ClusterQueuePreemption, lending *string) *strata.ClusterQueue {
	rq := strata.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(nominal)}
	if lending != nil {
		rq.LendingLimit = ptr.To(resource.MustParse(*lending))
	}
	q := &strata.ClusterQueue{}
	q.Name = name
	q.Spec.Cohort = cohort
	q.Spec.Preemption = pre
	q.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
		Flavors: []strata.FlavorQuotas{{Name: flavor, Resources: []strata.ResourceQuota{rq}}}}}
	return q
}

func TestFind(t *testing.T) {
	lower := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	cases := []struct {
		name         string
		racks, hosts int
		queues       []*strata.ClusterQueue
		running      []running
		// preemptor: in queue "a" unless preQueue says otherwise.
		preQueue  string
		priority  int32
		queued    int
		pods      int32
		rackBound bool
		want      []string // victims as name/reason
		wantWhy   string
		borrows   bool
	}{
		{
			name: "lower priority first, then the most recently admitted", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{cq("a", "", "16", lower, nil)},
			running: []running{
				{name: "p1-old", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "p1-new", queue: "a", priority: 1, admitted: 2, hosts: []string{"r0h1"}},
				{name: "p2", queue: "a", priority: 2, admitted: 3, hosts: []string{"r0h2"}},
				{name: "p5", queue: "a", priority: 5, admitted: 4, hosts: []string{"r0h3"}},
			},
			priority: 10, pods: 1,
			want: []string{"p1-new/InClusterQueue"},
		},
		{
			name: "two victims, lowest priority ones", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{cq("a", "", "16", lower, nil)},
			running: []running{
				{name: "p1-old", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "p1-new", queue: "a", priority: 1, admitted: 2, hosts: []string{"r0h1"}},
				{name: "p2", queue: "a", priority: 2, admitted: 3, hosts: []string{"r0h2"}},
				{name: "p5", queue: "a", priority: 5, admitted: 4, hosts: []string{"r0h3"}},
			},
			priority: 10, pods: 2,
			want: []string{"p1-new/InClusterQueue", "p1-old/InClusterQueue"},
		},
		{
			name: "LowerPriority never preempts equal or higher priority", racks: 1, hosts: 2,
			queues: []*strata.ClusterQueue{cq("a", "", "8", lower, nil)},
			running: []running{
				{name: "eq", queue: "a", priority: 10, admitted: 1, hosts: []string{"r0h0"}},
				{name: "hi", queue: "a", priority: 20, admitted: 2, hosts: []string{"r0h1"}},
			},
			priority: 10, pods: 1,
			wantWhy: "would need to preempt 1 workload of priority ≥ own",
		},
		{
			name: "LowerOrNewerEqualPriority takes an equal one queued later, not one queued earlier", racks: 1, hosts: 2,
			queues: []*strata.ClusterQueue{cq("a", "", "8", &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerOrNewerEqualPriority}, nil)},
			running: []running{
				{name: "older", queue: "a", priority: 10, queued: 1, admitted: 5, hosts: []string{"r0h0"}},
				{name: "newer", queue: "a", priority: 10, queued: 9, admitted: 4, hosts: []string{"r0h1"}},
			},
			priority: 10, queued: 3, pods: 1,
			want: []string{"newer/InClusterQueue"},
		},
		{
			name: "reclaim from a borrower of the cohort, whatever its priority (Any)", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "8", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}, nil),
				cq("b", "team", "8", nil, nil),
			},
			running: []running{
				{name: "b1", queue: "b", priority: 100, admitted: 1, hosts: []string{"r0h0"}},
				{name: "b2", queue: "b", priority: 100, admitted: 2, hosts: []string{"r0h1"}},
				{name: "b3", queue: "b", priority: 100, admitted: 3, hosts: []string{"r0h2"}},
				{name: "b4", queue: "b", priority: 100, admitted: 4, hosts: []string{"r0h3"}},
			},
			priority: 1, pods: 2,
			// b borrows 8; after two go it borrows none: a takes its two.
			want: []string{"b4/InCohortReclamation", "b3/InCohortReclamation"},
		},
		{
			name: "reclaim takes only from queues that borrow", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "4", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}, nil),
				cq("b", "team", "8", nil, nil),
				cq("c", "team", "4", nil, nil),
			},
			running: []running{
				{name: "b1", queue: "b", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "b2", queue: "b", priority: 1, admitted: 2, hosts: []string{"r0h1"}},
				{name: "c1", queue: "c", priority: 1, admitted: 9, hosts: []string{"r0h2"}},
				{name: "c2", queue: "c", priority: 1, admitted: 8, hosts: []string{"r0h3"}},
			},
			priority: 1, pods: 1,
			// b holds its nominal 8; c borrows 4: c's newest goes.
			want: []string{"c1/InCohortReclamation"},
		},
		{
			name: "borrowWithinCohort preempts lower priority up to the threshold", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "4", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionLowerPriority, BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority, MaxPriorityThreshold: ptr.To[int32](20)}}, nil),
				cq("b", "team", "4", nil, nil),
				cq("c", "team", "8", nil, nil),
			},
			running: []running{
				{name: "a1", queue: "a", priority: 100, admitted: 1, hosts: []string{"r0h0"}},
				{name: "b-10-old", queue: "b", priority: 10, admitted: 2, hosts: []string{"r0h1"}},
				{name: "b-30", queue: "b", priority: 30, admitted: 5, hosts: []string{"r0h2"}},
				{name: "b-10-new", queue: "b", priority: 10, admitted: 3, hosts: []string{"r0h3"}},
			},
			priority: 50, pods: 1,
			want:    []string{"b-10-new/InCohortReclaimWhileBorrowing"},
			borrows: true,
		},
		{
			name: "borrowWithinCohort does not go above the threshold", racks: 1, hosts: 3,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "4", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionLowerPriority, BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority, MaxPriorityThreshold: ptr.To[int32](20)}}, nil),
				cq("b", "team", "4", nil, nil),
				cq("c", "team", "4", nil, nil),
			},
			running: []running{
				{name: "a1", queue: "a", priority: 100, admitted: 1, hosts: []string{"r0h0"}},
				{name: "b-30", queue: "b", priority: 30, admitted: 2, hosts: []string{"r0h1"}},
				{name: "b-40", queue: "b", priority: 40, admitted: 3, hosts: []string{"r0h2"}},
			},
			priority: 50, pods: 1,
			wantWhy: "would need to preempt 1 workload of other ClusterQueues that its policy or their quota protects",
		},
		{
			name: "lendingLimit: what a queue does not lend cannot be borrowed, so the preemptor preempts in its own queue", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "12", lower, nil),
				cq("b", "team", "4", nil, ptr.To("0")),
			},
			running: []running{
				{name: "a1", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "a2", queue: "a", priority: 2, admitted: 2, hosts: []string{"r0h1"}},
				{name: "a3", queue: "a", priority: 3, admitted: 3, hosts: []string{"r0h2"}},
			},
			priority: 10, pods: 1,
			want: []string{"a1/InClusterQueue"},
		},
		{
			name: "a queue that borrows already goes straight to the borrowing attempt, which needs fewer victims", racks: 1, hosts: 4,
			queues: []*strata.ClusterQueue{
				cq("a", "team", "8", lower, nil),
				cq("b", "team", "8", nil, nil),
			},
			running: []running{
				{name: "a1", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "a2", queue: "a", priority: 1, admitted: 2, hosts: []string{"r0h1"}},
				{name: "a3", queue: "a", priority: 1, admitted: 3, hosts: []string{"r0h2"}},
				{name: "b1", queue: "b", priority: 1, admitted: 4, hosts: []string{"r0h3"}},
			},
			// a uses 12 of its 8: within nominal it would need two victims,
			// by borrowing one.
			priority: 10, pods: 1,
			want:    []string{"a3/InClusterQueue"},
			borrows: true,
		},
		{
			name: "a rack-required preemptor takes victims only in the rack where it then fits", racks: 2, hosts: 2,
			queues: []*strata.ClusterQueue{cq("a", "", "16", lower, nil)},
			running: []running{
				{name: "r0-low", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
				{name: "r0-mid", queue: "a", priority: 5, admitted: 9, hosts: []string{"r0h1"}},
				{name: "r1-low", queue: "a", priority: 2, admitted: 2, hosts: []string{"r1h0"}},
				{name: "r1-mid", queue: "a", priority: 5, admitted: 3, hosts: []string{"r1h1"}},
			},
			priority: 10, pods: 2, rackBound: true,
			// The two lowest (r0-low, r1-low) free one host in each rack:
			// no rack. Adding the newest priority-5 one frees rack r0, and
			// r1-low is put back.
			want: []string{"r0-low/InClusterQueue", "r0-mid/InClusterQueue"},
		},
		{
			name: "a workload spanning racks frees capacity in both", racks: 2, hosts: 2,
			queues: []*strata.ClusterQueue{cq("a", "", "16", lower, nil)},
			running: []running{
				{name: "wide", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0", "r1h0"}},
				{name: "r0", queue: "a", priority: 5, admitted: 2, hosts: []string{"r0h1"}},
				{name: "r1", queue: "a", priority: 5, admitted: 3, hosts: []string{"r1h1"}},
			},
			priority: 10, pods: 2, rackBound: true,
			want: []string{"wide/InClusterQueue", "r1/InClusterQueue"},
		},
		{
			name: "no victim set helps", racks: 1, hosts: 2,
			queues: []*strata.ClusterQueue{cq("a", "", "16", lower, nil)},
			running: []running{
				{name: "x", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
			},
			priority: 10, pods: 3,
			wantWhy: "it would not fit even with every workload on the flavor preempted",
		},
		{
			name: "preemption off", racks: 1, hosts: 1,
			queues: []*strata.ClusterQueue{cq("a", "", "16", nil, nil)},
			running: []running{
				{name: "x", queue: "a", priority: 1, admitted: 1, hosts: []string{"r0h0"}},
			},
			priority: 10, pods: 1,
			wantWhy: "preemption is not enabled for its ClusterQueue",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := cluster(tc.racks, tc.hosts)
			books := queue.NewBooks(tc.queues)
			var admitted []Workload
			var usages []tas.Usage
			for _, r := range tc.running {
				u := tas.Usage{}
				for _, h := range r.hosts {
					u[h] = tas.WithPod(cpu("4"))
					snap.AddUsage(h, u[h], 1)
				}
				req := cpu(fmt.Sprint(4 * len(r.hosts)))
				books.Charge(r.queue, flavor, req, 1)
				admitted = append(admitted, Workload{Key: types.NamespacedName{Namespace: "ns", Name: r.name}, Queue: r.queue, Priority: r.priority,
					QueuedAt: t0.Add(time.Duration(r.queued) * time.Minute), AdmittedAt: t0.Add(time.Duration(r.admitted) * time.Minute), Requests: req})
				usages = append(usages, u)
			}
			preQueue := tc.preQueue
			if preQueue == "" {
				preQueue = "a"
			}
			req := tas.Request{Count: tc.pods, PodRequests: cpu("4")}
			if tc.rackBound {
				req.Mode, req.Level = tas.Required, rackLevel
			}
			capacity := &SnapshotCapacity{Snap: snap, Usages: usages, Place: func(s *tas.Snapshot) ([]tas.Usage, error) {
				a, err := s.FindAssignment(req, tas.DefaultOptions())
				if err != nil {
					return nil, err
				}
				u, err := s.Commit(a, req.PodRequests)
				return []tas.Usage{u}, err
			}}
			var policyOf *strata.ClusterQueue
			for _, q := range tc.queues {
				if q.Name == preQueue {
					policyOf = q
				}
			}
			before := snapFree(snap)
			got := Find(Preemptor{Key: types.NamespacedName{Namespace: "ns", Name: "pre"}, Queue: preQueue, Priority: tc.priority,
				QueuedAt: t0.Add(time.Duration(tc.queued) * time.Minute), Requests: cpu(fmt.Sprint(4 * tc.pods))},
				PolicyOf(policyOf), books, flavor, admitted, capacity)
			var names []string
			for _, v := range got.Victims {
				names = append(names, v.Key.Name+"/"+v.Reason)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if got.Why != tc.wantWhy {
				t.Errorf("Why = %q, want %q", got.Why, tc.wantWhy)
			}
			if got.Borrows != tc.borrows {
				t.Errorf("Borrows = %v, want %v", got.Borrows, tc.borrows)
			}
			if diff := cmp.Diff(before, snapFree(snap)); diff != "" {
				t.Errorf("Find changed the snapshot (-before +after):\n%s", diff)
			}
		})
	}
}

// snapFree is what one 4-CPU pod finds per rack: a fingerprint of the
// snapshot's free capacity.
func snapFree(s *tas.Snapshot) string {
	a, err := s.FindAssignment(tas.Request{Count: 1, PodRequests: cpu("1"), Mode: tas.Unconstrained}, tas.DefaultOptions())
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(a.Domains)
}

func TestOrder(t *testing.T) {
	pre := Preemptor{Queue: "a", Priority: 10}
	cands := []Workload{
		{Key: types.NamespacedName{Name: "own-low-old"}, Queue: "a", Priority: 1, AdmittedAt: t0},
		{Key: types.NamespacedName{Name: "other-high"}, Queue: "b", Priority: 50, AdmittedAt: t0},
		{Key: types.NamespacedName{Name: "own-low-new"}, Queue: "a", Priority: 1, AdmittedAt: t0.Add(time.Minute)},
		{Key: types.NamespacedName{Name: "own-mid"}, Queue: "a", Priority: 5, AdmittedAt: t0.Add(time.Hour)},
		{Key: types.NamespacedName{Name: "other-low"}, Queue: "b", Priority: 2, AdmittedAt: t0},
	}
	Order(pre, cands)
	var got []string
	for _, c := range cands {
		got = append(got, c.Key.Name)
	}
	want := []string{"other-low", "other-high", "own-low-new", "own-low-old", "own-mid"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Order (-want +got):\n%s", diff)
	}
}

// TestOrderByLocalQueueUsage: under admission fair sharing, of one
// ClusterQueue's candidates, those of the LocalQueue that consumed more
// come first, before priority (Kueue's candidate ordering); candidates
// without a usage keep the classical order.
func TestOrderByLocalQueueUsage(t *testing.T) {
	usage := func(v float64) *float64 { return &v }
	pre := Preemptor{Queue: "a", Priority: 10}
	cands := []Workload{
		{Key: types.NamespacedName{Name: "light-low"}, Queue: "a", Priority: 1, AdmittedAt: t0, LocalQueueUsage: usage(1)},
		{Key: types.NamespacedName{Name: "heavy-high"}, Queue: "a", Priority: 5, AdmittedAt: t0, LocalQueueUsage: usage(8)},
		{Key: types.NamespacedName{Name: "other-queue"}, Queue: "b", Priority: 9, AdmittedAt: t0, LocalQueueUsage: usage(0)},
		{Key: types.NamespacedName{Name: "heavy-low"}, Queue: "a", Priority: 2, AdmittedAt: t0, LocalQueueUsage: usage(8)},
	}
	Order(pre, cands)
	var got []string
	for _, c := range cands {
		got = append(got, c.Key.Name)
	}
	want := []string{"other-queue", "heavy-low", "heavy-high", "light-low"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Order (-want +got):\n%s", diff)
	}
}

// TestVictimQueues: the queues a summary lists preemptible capacity of.
func TestVictimQueues(t *testing.T) {
	mk := func(name, cohort string, p *strata.ClusterQueuePreemption) *strata.ClusterQueue {
		cq := &strata.ClusterQueue{}
		cq.Name, cq.Spec.Cohort, cq.Spec.Preemption = name, cohort, p
		return cq
	}
	within := &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	reclaim := &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}
	got := VictimQueues([]*strata.ClusterQueue{
		mk("alone-within", "", within),
		mk("alone", "", nil),
		mk("lone-reclaimer", "solo", reclaim), // no other queue in its cohort
		mk("train", "teams", reclaim),
		mk("infer", "teams", nil),
		mk("batch", "teams", reclaim),
		mk("idle", "quiet", nil),
		mk("idle2", "quiet", nil),
		// Stopped: out of their cohorts, neither reclaimed nor reclaiming.
		func() *strata.ClusterQueue {
			cq := mk("held", "teams", within)
			cq.Spec.StopPolicy = ptr.To(strata.StopHold)
			return cq
		}(),
		mk("lent", "paused", nil),
		func() *strata.ClusterQueue {
			cq := mk("paused-reclaimer", "paused", reclaim)
			cq.Spec.StopPolicy = ptr.To(strata.StopHold)
			return cq
		}(),
		// A tree: a reclaimer in one branch reclaims from the other.
		mk("research", "left", reclaim),
		mk("serving", "right", nil),
	}, &strata.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "left"}, Spec: strata.CohortSpec{ParentName: "org"}},
		&strata.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "right"}, Spec: strata.CohortSpec{ParentName: "org"}})
	names := map[string][]string{"within": slices.Sorted(maps.Keys(got.Within)), "reclaimed": slices.Sorted(maps.Keys(got.Reclaimed))}
	want := map[string][]string{"within": {"alone-within"}, "reclaimed": {"batch", "infer", "serving", "train"}}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("VictimQueues (-want,+got):\n%s", diff)
	}
}
