package clusterqueue

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestStatus(t *testing.T) {
	cq := testutil.MakeClusterQueue("cq").Flavor("a100").Flavor("h100").Obj()
	wl := func(name, cluster, flavor string, admitted, finished bool) *strata.Workload {
		w := testutil.MakeWorkload(name, "ml").PodSets(testutil.MakePodSet("main", 2, "cpu", "4", "nvidia.com/gpu", "8").PodSet).Obj()
		if cluster != "" {
			w.Status.Placement = &strata.Placement{Cluster: cluster, Flavor: flavor, DispatchGeneration: 1}
		}
		if admitted {
			w.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
		}
		if finished {
			w.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
		}
		return w
	}
	usage := func(pods int64) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:                    *resource.NewQuantity(4*pods, resource.DecimalSI),
			corev1.ResourceName("nvidia.com/gpu"): *resource.NewQuantity(8*pods, resource.DecimalSI),
		}
	}
	active := metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "dispatches to the workers its clusterSelector takes"}
	cohortCQ := testutil.MakeClusterQueue("cq").Cohort("fleet").ResourceGroup("cpu", "nvidia.com/gpu").GroupFlavor("a100", "8", "16").Obj()
	peer := testutil.MakeClusterQueue("peer").Cohort("fleet").ResourceGroup("cpu", "nvidia.com/gpu").GroupFlavor("a100", "64", "128").Obj()
	peer.Status.FlavorsUsage = []strata.FlavorUsage{{Name: "a100", Resources: usage(1)}}
	cases := map[string]struct {
		cq    *strata.ClusterQueue
		peers []*strata.ClusterQueue
		wls   []*strata.Workload
		want  strata.ClusterQueueStatus
	}{
		"a queue that borrows from its cohort": {
			cq:    cohortCQ,
			peers: []*strata.ClusterQueue{peer},
			wls:   []*strata.Workload{wl("big", "w1", "a100", true, false), wl("big-too", "w2", "a100", true, false)},
			want: strata.ClusterQueueStatus{
				Conditions:        []metav1.Condition{active},
				AdmittedWorkloads: 2, ReservingWorkloads: 2,
				FlavorsUsage: []strata.FlavorUsage{{Name: "a100", Resources: usage(4)}},
				FlavorsReservation: []strata.FlavorReservation{{Name: "a100", Resources: []strata.ResourceReservation{
					{Name: corev1.ResourceCPU, Total: resource.MustParse("16"), Borrowed: resource.MustParse("8")},
					{Name: "nvidia.com/gpu", Total: resource.MustParse("32"), Borrowed: resource.MustParse("16")},
				}}},
			},
		},
		"an empty queue": {
			cq:   cq,
			want: strata.ClusterQueueStatus{Conditions: []metav1.Condition{active}},
		},
		"waiting, dispatched, admitted and finished Workloads": {
			cq: cq,
			wls: []*strata.Workload{
				wl("waits", "", "", false, false),
				wl("dispatched", "w1", "h100", false, false),
				wl("admitted", "w2", "a100", true, false),
				wl("admitted-too", "w1", "a100", true, false),
				wl("done", "w1", "a100", true, true),
			},
			want: strata.ClusterQueueStatus{
				Conditions:        []metav1.Condition{active},
				PendingWorkloads:  2, // waiting and dispatched, not admitted yet
				AdmittedWorkloads: 2, ReservingWorkloads: 2,
				FlavorsUsage: []strata.FlavorUsage{ // in the queue's flavor order; the finished one uses nothing
					{Name: "a100", Resources: usage(4)},
					{Name: "h100", Resources: usage(2)},
				},
			},
		},
		"an elastic Job granted 4 pods, its worker still running 2: charged 4": {
			cq: cq,
			wls: []*strata.Workload{func() *strata.Workload {
				w := wl("elastic", "w1", "a100", true, false)
				w.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
				w.Spec.PodSets[0].Count = 4
				w.Status.Admission.PodSetAssignments = []strata.PodSetAssignment{{Name: "main", Flavor: "a100", Count: 2}}
				return w
			}()},
			want: strata.ClusterQueueStatus{
				Conditions:        []metav1.Condition{active},
				AdmittedWorkloads: 1, ReservingWorkloads: 1,
				FlavorsUsage: []strata.FlavorUsage{{Name: "a100", Resources: usage(4)}},
			},
		},
		"a Workload reserved at the hub while the queue's admission checks decide: reserving, its quota used": {
			cq: cq,
			wls: []*strata.Workload{func() *strata.Workload {
				w := wl("reserved", "", "", false, false)
				w.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "h100", Count: 2}}}
				w.Status.AdmissionChecks = []strata.AdmissionCheckState{{Name: "budget", State: strata.CheckStatePending}}
				return w
			}()},
			want: strata.ClusterQueueStatus{
				Conditions:         []metav1.Condition{active},
				ReservingWorkloads: 1,
				FlavorsUsage:       []strata.FlavorUsage{{Name: "h100", Resources: usage(2)}},
			},
		},
		"an invalid clusterSelector": {
			cq: func() *strata.ClusterQueue {
				c := cq.DeepCopy()
				c.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near"}}}
				return c
			}(),
			want: strata.ClusterQueueStatus{Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "InvalidClusterSelector",
				Message: `"Near" is not a valid label selector operator`}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Status(tc.cq, tc.wls, tc.peers...)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
				cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("Status() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestStatusFairSharing: with the hub's fairSharing on, a hub queue's
// status carries its weighted share of what it borrows in its cohort, as
// the agent's does; off, none.
func TestStatusFairSharing(t *testing.T) {
	usage := func(pods int64) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:                    *resource.NewQuantity(4*pods, resource.DecimalSI),
			corev1.ResourceName("nvidia.com/gpu"): *resource.NewQuantity(8*pods, resource.DecimalSI),
		}
	}
	cq := testutil.MakeClusterQueue("cq").Cohort("fleet").ResourceGroup("cpu", "nvidia.com/gpu").GroupFlavor("a100", "8", "16").Obj()
	peer := testutil.MakeClusterQueue("peer").Cohort("fleet").ResourceGroup("cpu", "nvidia.com/gpu").GroupFlavor("a100", "64", "128").Obj()
	peer.Status.FlavorsUsage = []strata.FlavorUsage{{Name: "a100", Resources: usage(1)}}
	wls := make([]*strata.Workload, 4)
	for i := range wls {
		wls[i] = testutil.MakeWorkload(fmt.Sprintf("w%d", i), "ml").PodSets(testutil.MakePodSet("main", 1, "cpu", "4", "nvidia.com/gpu", "8").PodSet).Obj()
		wls[i].Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "a100", DispatchGeneration: 1}
		wls[i].Status.Admission = &strata.Admission{ClusterQueue: "cq"}
	}
	cases := map[string]struct {
		fair bool
		wls  []*strata.Workload
		want *strata.FairSharingStatus
	}{
		"off":                          {wls: wls},
		"on, within its nominal quota": {fair: true, wls: wls[:2], want: &strata.FairSharingStatus{WeightedShare: 0}},
		// 4 of the 72 CPUs (and 8 of the 144 GPUs) the cohort lends, per
		// thousand, rounded up as Kueue does.
		"on, borrowing half its nominal": {fair: true, wls: wls[:3], want: &strata.FairSharingStatus{WeightedShare: 56}},
		"on, borrowing its nominal":      {fair: true, wls: wls, want: &strata.FairSharingStatus{WeightedShare: 112}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := statusInTree(cq, tc.wls, nil, tc.fair, peer)
			if diff := cmp.Diff(tc.want, got.FairSharing); diff != "" {
				t.Errorf("status.fairSharing (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusTerminating: a hub queue held by another controller's
// finalizer while it is deleted dispatches nothing, and says so.
func TestStatusTerminating(t *testing.T) {
	cq := testutil.MakeClusterQueue("cq").Flavor("a100").Obj()
	cq.DeletionTimestamp = &metav1.Time{}
	got := Status(cq, nil)
	want := []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueTerminating, Message: "being deleted: dispatches no workloads"}}
	if diff := cmp.Diff(want, got.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestHolds: what keeps a hub ClusterQueue being deleted: a Workload
// dispatched to a worker, or admitted there, until it finishes.
func TestHolds(t *testing.T) {
	wl := func(placed, admitted, finished bool) *strata.Workload {
		w := testutil.MakeWorkload("w", "ml").PodSets(testutil.MakePodSet("main", 1, "cpu", "1").PodSet).Obj()
		if placed {
			w.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "a100", DispatchGeneration: 1}
		}
		if admitted {
			w.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
		}
		if finished {
			w.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
		}
		return w
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want bool
	}{
		"pending":            {wl: wl(false, false, false)},
		"dispatched":         {wl: wl(true, false, false), want: true},
		"admitted on worker": {wl: wl(true, true, false), want: true},
		"finished":           {wl: wl(true, true, true)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Holds(tc.wl); got != tc.want {
				t.Errorf("Holds = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChargedTo: a hub Workload may hold the quota of its admission's
// queue, whatever its LocalQueue points at now, and of its LocalQueue's.
func TestChargedTo(t *testing.T) {
	admitted := func(cq string) *strata.Workload {
		w := testutil.MakeWorkload("w", "ml").Obj()
		w.Status.Admission = &strata.Admission{ClusterQueue: cq}
		return w
	}
	cases := map[string]struct {
		wl   *strata.Workload
		lq   string
		want []string
	}{
		"placed, not admitted":              {wl: testutil.MakeWorkload("w", "ml").Obj(), lq: "a", want: []string{"a"}},
		"admitted through its LocalQueue's": {wl: admitted("a"), lq: "a", want: []string{"a"}},
		"its LocalQueue pointed elsewhere":  {wl: admitted("a"), lq: "b", want: []string{"a", "b"}},
		"its LocalQueue deleted":            {wl: admitted("a"), want: []string{"a"}},
		"neither":                           {wl: testutil.MakeWorkload("w", "ml").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, chargedTo(tc.wl, tc.lq)); diff != "" {
				t.Errorf("chargedTo (-want +got):\n%s", diff)
			}
		})
	}
}
