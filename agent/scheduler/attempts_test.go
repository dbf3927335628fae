package scheduler

import (
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
)

// TestRecordAttempt: a pass with pending workloads is an admission
// attempt, a success when it admitted one or more (Kueue's
// kueue_admission_attempts_total); a pass with nothing pending is none.
func TestRecordAttempt(t *testing.T) {
	cases := []struct {
		name              string
		tried, admitted   int
		success, rejected float64
	}{
		{name: "nothing pending", tried: 0, admitted: 0},
		{name: "none admitted", tried: 3, admitted: 0, rejected: 1},
		{name: "some admitted", tried: 3, admitted: 2, success: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			count := func(result string) float64 {
				return promtest.ToFloat64(metrics.AdmissionAttempts.WithLabelValues(result))
			}
			success, rejected := count(metrics.AttemptSuccess), count(metrics.AttemptInadmissible)
			recordAttempt(c.tried, c.admitted, time.Millisecond)
			if got := count(metrics.AttemptSuccess) - success; got != c.success {
				t.Errorf("success attempts counted: %v, want %v", got, c.success)
			}
			if got := count(metrics.AttemptInadmissible) - rejected; got != c.rejected {
				t.Errorf("inadmissible attempts counted: %v, want %v", got, c.rejected)
			}
		})
	}
}

// TestPendingStatus: a pending workload is inadmissible once a pass
// tried it and wrote why it waits (Kueue parks it), active otherwise, and
// always in a StrictFIFO queue (Kueue keeps those in its heap): the
// scheduler's reasons, as queue.PendingStatus classes them.
func TestPendingStatus(t *testing.T) {
	admitted := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: status, Reason: reason}}
	}
	cases := []struct {
		name       string
		conditions []metav1.Condition
		strict     bool
		want       string
	}{
		{name: "not tried yet", want: queue.PendingActive},
		{name: "waits for capacity", conditions: admitted(metav1.ConditionFalse, ReasonPending), want: queue.PendingInadmissible},
		{name: "cannot be admitted as written", conditions: admitted(metav1.ConditionFalse, ReasonInadmissible), want: queue.PendingInadmissible},
		{name: "in a stopped queue", conditions: admitted(metav1.ConditionFalse, ReasonStopped), want: queue.PendingInadmissible},
		{name: "an admission check is not ready", conditions: admitted(metav1.ConditionFalse, ReasonCheckNotReady), want: queue.PendingInadmissible},
		{name: "held by fencing", conditions: admitted(metav1.ConditionFalse, ReasonHeld), want: queue.PendingInadmissible},
		{name: "backing off after a PodsReady timeout", conditions: admitted(metav1.ConditionFalse, strata.EvictedByPodsReadyTimeout), want: queue.PendingInadmissible},
		{name: "its preemptions under way", conditions: admitted(metav1.ConditionFalse, ReasonPreempting), want: queue.PendingActive},
		{name: "requeued after it was preempted", conditions: admitted(metav1.ConditionFalse, strata.EvictedByPreemption), want: queue.PendingActive},
		{name: "waits for capacity, StrictFIFO", conditions: admitted(metav1.ConditionFalse, ReasonPending), strict: true, want: queue.PendingActive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wl := &strata.Workload{Status: strata.WorkloadStatus{Conditions: c.conditions}}
			if got := queue.PendingStatus(wl, c.strict, true); got != c.want {
				t.Errorf("PendingStatus: %q, want %q", got, c.want)
			}
		})
	}
}
