package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestResolve(t *testing.T) {
	lq := testutil.MakeLocalQueue("team-a", "ml", "training")
	all := testutil.MakeClusterQueue("training").Obj()
	all.Spec.NamespaceSelector = &metav1.LabelSelector{}
	mlOnly := all.DeepCopy()
	mlOnly.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}
	none := all.DeepCopy()
	none.Spec.NamespaceSelector = nil
	bad := all.DeepCopy()
	bad.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}

	cases := map[string]struct {
		lq       *strata.LocalQueue
		cq       *strata.ClusterQueue
		nsLabels map[string]string
		want     Resolution
	}{
		"admitted through the LocalQueue": {lq: lq, cq: all, want: Resolution{ClusterQueue: "training"}},
		"namespace selected": {lq: lq, cq: mlOnly, nsLabels: map[string]string{"team": "ml"},
			want: Resolution{ClusterQueue: "training"}},
		"no LocalQueue": {cq: all, want: Resolution{Reason: ReasonLocalQueueNotFound,
			Message: `LocalQueue "team-a" does not exist in namespace "ml"; create it (a LocalQueue whose spec.clusterQueue names a ClusterQueue) or fix the strata.dev/queue-name label`}},
		"no ClusterQueue": {lq: lq, want: Resolution{ClusterQueue: "training", Reason: ReasonClusterQueueNotFound,
			Message: `ClusterQueue "training" of LocalQueue "ml/team-a" does not exist; ask an admin to create it, or point the LocalQueue at another ClusterQueue`}},
		"namespace not selected": {lq: lq, cq: mlOnly, nsLabels: map[string]string{"team": "web"},
			want: Resolution{ClusterQueue: "training", Reason: ReasonNamespaceNotAllowed,
				Message: `ClusterQueue "training" does not admit namespace "ml" (namespaceSelector team=ml)`}},
		"no namespaceSelector": {lq: lq, cq: none, want: Resolution{ClusterQueue: "training", Reason: ReasonNamespaceNotAllowed,
			Message: `ClusterQueue "training" admits no namespace (it has no namespaceSelector)`}},
		"invalid namespaceSelector": {lq: lq, cq: bad, want: Resolution{ClusterQueue: "training", Reason: ReasonNamespaceNotAllowed,
			Message: `ClusterQueue "training" has an invalid namespaceSelector: "Near" is not a valid label selector operator`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Resolve("ml", "team-a", tc.nsLabels, tc.lq, tc.cq)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			if got.OK() != (tc.want.Reason == "") {
				t.Errorf("OK() = %v with reason %q", got.OK(), got.Reason)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	earlier := metav1.Unix(1000, 0)
	other := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: earlier}
	cases := map[string]struct {
		old                          strata.LocalQueueStatus
		exists                       bool
		lqStop, cqStop               *strata.StopPolicy
		pending, admitted, reserving int32
		want                         strata.LocalQueueStatus
	}{
		"active": {exists: true, pending: 2, admitted: 1, want: strata.LocalQueueStatus{PendingWorkloads: 2, AdmittedWorkloads: 1,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training"}}}},
		"two admitted, one more waiting for its admission checks": {exists: true, admitted: 2, reserving: 3, want: strata.LocalQueueStatus{AdmittedWorkloads: 2, ReservingWorkloads: 3,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training"}}}},
		"ClusterQueue missing": {pending: 3, want: strata.LocalQueueStatus{PendingWorkloads: 3,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "ClusterQueueDoesNotExist",
				Message: `ClusterQueue "training" does not exist; the queue's workloads wait until it is created`}}}},
		"stopped LocalQueue": {exists: true, lqStop: ptr.To(strata.StopHold), pending: 1, want: strata.LocalQueueStatus{PendingWorkloads: 1,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "Stopped",
				Message: "LocalQueue team is stopped (stopPolicy Hold); its workloads wait until the policy is None"}}}},
		"stopped ClusterQueue": {exists: true, cqStop: ptr.To(strata.StopHoldAndDrain), want: strata.LocalQueueStatus{
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "Stopped",
				Message: "ClusterQueue training is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None"}}}},
		"stopped LocalQueue whose ClusterQueue is missing: stopped first": {lqStop: ptr.To(strata.StopHold), pending: 1, want: strata.LocalQueueStatus{PendingWorkloads: 1,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "Stopped",
				Message: "LocalQueue team is stopped (stopPolicy Hold); its workloads wait until the policy is None"}}}},
		"None is not stopped": {exists: true, lqStop: ptr.To(strata.StopNone), cqStop: ptr.To(strata.StopNone), want: strata.LocalQueueStatus{
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training"}}}},
		"keeps other conditions and the transition time": {
			old: strata.LocalQueueStatus{PendingWorkloads: 5, Conditions: []metav1.Condition{other,
				{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "old", LastTransitionTime: earlier}}},
			exists: true, admitted: 4,
			want: strata.LocalQueueStatus{AdmittedWorkloads: 4, Conditions: []metav1.Condition{other,
				{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training", LastTransitionTime: earlier}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lq := &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: strata.LocalQueueSpec{ClusterQueue: "training", StopPolicy: tc.lqStop}}
			var cq *strata.ClusterQueue
			if tc.exists {
				cq = &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "training"}, Spec: strata.ClusterQueueSpec{StopPolicy: tc.cqStop}}
			}
			got := Status(&tc.old, lq, cq, Counts{Pending: tc.pending, Admitted: tc.admitted, Reserving: tc.reserving})
			// A new transition time is the current time.
			ignoreNewTime := cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")
			if tc.old.Conditions == nil {
				if diff := cmp.Diff(tc.want, got, ignoreNewTime); diff != "" {
					t.Errorf("Status (-want +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	admission := &strata.Admission{ClusterQueue: "training"}
	finished := []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
	wls := []*strata.Workload{
		testutil.MakeWorkload("a", "ml").Obj(),
		testutil.MakeWorkload("b", "ml").Admission(admission).Obj(),
		testutil.MakeWorkload("c", "ml").Admission(admission).Obj(),
		testutil.MakeWorkload("d", "ml").Obj(),
		testutil.MakeWorkload("e", "ml").Obj(),
		// Its quota reserved, waiting for an AdmissionCheck.
		testutil.MakeWorkload("f", "ml").Admission(admission).Obj(),
	}
	wls[3].Status.Conditions = finished
	wls[4].Annotations = map[string]string{strata.InvalidAnnotation: ReasonLocalQueueNotFound}
	wls[5].Status.AdmissionChecks = []strata.AdmissionCheckState{{Name: "budget", State: strata.CheckStatePending}}
	var c Counts
	for _, wl := range wls {
		c.Count(wl)
	}
	if diff := cmp.Diff(Counts{Pending: 2, Admitted: 2, Reserving: 3}, c); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

func TestStopOf(t *testing.T) {
	lq := func(p strata.StopPolicy) *strata.LocalQueue {
		return &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: strata.LocalQueueSpec{ClusterQueue: "training", StopPolicy: &p}}
	}
	cq := func(p strata.StopPolicy) *strata.ClusterQueue {
		return &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "training"}, Spec: strata.ClusterQueueSpec{StopPolicy: &p}}
	}
	deleting := func(cq *strata.ClusterQueue) *strata.ClusterQueue {
		cq.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		return cq
	}
	lqHeld := "LocalQueue team is stopped (stopPolicy Hold); its workloads wait until the policy is None"
	cqDrained := "ClusterQueue training is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None"
	cases := map[string]struct {
		lq   *strata.LocalQueue
		cq   *strata.ClusterQueue
		want Stop
	}{
		"neither set":     {lq: &strata.LocalQueue{}, cq: &strata.ClusterQueue{}},
		"missing queues":  {},
		"None":            {lq: lq(strata.StopNone), cq: cq(strata.StopNone)},
		"LocalQueue Hold": {lq: lq(strata.StopHold), cq: cq(strata.StopNone), want: Stop{Stopped: true, Message: lqHeld, Reason: strata.EvictedByLocalQueueStopped}},
		"ClusterQueue Hold": {lq: lq(strata.StopNone), cq: cq(strata.StopHold), want: Stop{Stopped: true, Reason: strata.EvictedByClusterQueueStopped,
			Message: "ClusterQueue training is stopped (stopPolicy Hold); its workloads wait until the policy is None"}},
		"ClusterQueue HoldAndDrain": {lq: lq(strata.StopNone), cq: cq(strata.StopHoldAndDrain), want: Stop{Stopped: true, Message: cqDrained, Drain: true, Reason: strata.EvictedByClusterQueueStopped}},
		"LocalQueue held, ClusterQueue drains": {lq: lq(strata.StopHold), cq: cq(strata.StopHoldAndDrain),
			want: Stop{Stopped: true, Message: lqHeld, Drain: true, Reason: strata.EvictedByClusterQueueStopped}},
		"ClusterQueue being deleted": {lq: lq(strata.StopNone), cq: deleting(cq(strata.StopNone)), want: Stop{Stopped: true, Terminating: true, Reason: strata.EvictedByClusterQueueStopped,
			Message: "ClusterQueue training is being deleted: it admits no more workloads; its workloads wait for a ClusterQueue of that name"}},
		"ClusterQueue being deleted, stopped: its policy says": {lq: lq(strata.StopNone), cq: deleting(cq(strata.StopHoldAndDrain)),
			want: Stop{Stopped: true, Message: cqDrained, Drain: true, Reason: strata.EvictedByClusterQueueStopped}},
		"both drain: the LocalQueue's reason": {lq: lq(strata.StopHoldAndDrain), cq: cq(strata.StopHoldAndDrain),
			want: Stop{Stopped: true, Message: "LocalQueue team is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None", Drain: true, Reason: strata.EvictedByLocalQueueStopped}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, StopOf(tc.lq, tc.cq)); diff != "" {
				t.Errorf("StopOf (-want +got):\n%s", diff)
			}
		})
	}
}
