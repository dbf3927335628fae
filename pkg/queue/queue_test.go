package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		old               strata.LocalQueueStatus
		exists            bool
		pending, admitted int32
		want              strata.LocalQueueStatus
	}{
		"active": {exists: true, pending: 2, admitted: 1, want: strata.LocalQueueStatus{PendingWorkloads: 2, AdmittedWorkloads: 1,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training"}}}},
		"ClusterQueue missing": {pending: 3, want: strata.LocalQueueStatus{PendingWorkloads: 3,
			Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: "ClusterQueueDoesNotExist",
				Message: `ClusterQueue "training" does not exist; the queue's workloads wait until it is created`}}}},
		"keeps other conditions and the transition time": {
			old: strata.LocalQueueStatus{PendingWorkloads: 5, Conditions: []metav1.Condition{other,
				{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "old", LastTransitionTime: earlier}}},
			exists: true, admitted: 4,
			want: strata.LocalQueueStatus{AdmittedWorkloads: 4, Conditions: []metav1.Condition{other,
				{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "workloads are admitted by ClusterQueue training", LastTransitionTime: earlier}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Status(&tc.old, "training", tc.exists, tc.pending, tc.admitted)
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
	}
	wls[3].Status.Conditions = finished
	wls[4].Annotations = map[string]string{strata.InvalidAnnotation: ReasonLocalQueueNotFound}
	var c Counts
	for _, wl := range wls {
		c.Count(wl)
	}
	if diff := cmp.Diff(Counts{Pending: 2, Admitted: 2}, c); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}
