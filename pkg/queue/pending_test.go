package queue

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// TestPendingStatus: the reasons of the hub's dispatcher and of a
// workload's queue (the agent scheduler's are in its own test).
func TestPendingStatus(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		status metav1.ConditionStatus
		strict bool
		// inactive: the queue cannot admit.
		inactive bool
		want     string
	}{
		{name: "hub: fits on no worker", reason: "NoClusterFits", status: metav1.ConditionFalse, want: PendingInadmissible},
		{name: "hub: waits for capacity", reason: "Pending", status: metav1.ConditionFalse, want: PendingInadmissible},
		{name: "hub: on its way to a worker", reason: "Dispatched", status: metav1.ConditionFalse, want: PendingActive},
		{name: "cohort on a cycle", reason: strata.QueueCohortCycle, status: metav1.ConditionFalse, want: PendingInadmissible},
		{name: "its LocalQueue missing", reason: ReasonLocalQueueNotFound, status: metav1.ConditionFalse, want: PendingInadmissible},
		{name: "namespace not allowed", reason: ReasonNamespaceNotAllowed, status: metav1.ConditionFalse, want: PendingInadmissible},
		{name: "a wait reason on a True condition is no wait", reason: "Pending", status: metav1.ConditionTrue, want: PendingActive},
		{name: "StrictFIFO", reason: "NoClusterFits", status: metav1.ConditionFalse, strict: true, want: PendingActive},
		{name: "its queue cannot admit, not tried yet", reason: "Dispatched", status: metav1.ConditionFalse, inactive: true, want: PendingInadmissible},
		{name: "its queue cannot admit, StrictFIFO", reason: "Pending", status: metav1.ConditionFalse, strict: true, inactive: true, want: PendingInadmissible},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wl := &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: c.status, Reason: c.reason}}}}
			if got := PendingStatus(wl, c.strict, !c.inactive); got != c.want {
				t.Errorf("PendingStatus: %q, want %q", got, c.want)
			}
		})
	}
	if !StrictFIFO(&strata.ClusterQueue{Spec: strata.ClusterQueueSpec{QueueingStrategy: strata.StrictFIFO}}) || StrictFIFO(nil) {
		t.Error("StrictFIFO: wrong for a StrictFIFO queue or for none")
	}
}
