package copies

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
)

// TestSetWaitingOnWorkerKeepsThePreemption: a copy the worker preempts
// for shows it on the hub Workload's Admitted condition, and its victims
// stay in the dispatch's attempt; a copy merely pending adds nothing
// there.
func TestSetWaitingOnWorkerKeepsThePreemption(t *testing.T) {
	copyWaiting := func(reason, message string) *strata.Workload {
		return &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: reason, Message: message}}}}
	}
	const victims = "preempting 2 workload(s) on flavor gpu; admitted once the pods of ns/a, ns/b are gone"
	for _, tc := range []struct {
		reason     string
		wantNoted  bool
		wantChange bool
	}{
		{reason: dispatch.WorkerPreempting, wantNoted: true, wantChange: true},
		{reason: "Pending", wantChange: true},
	} {
		var st strata.WorkloadStatus
		dispatch.RecordDispatch(&st, "w3", "gpu", "chosen", time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC))
		if got := setWaitingOnWorker(&st, "w3", "gpu", copyWaiting(tc.reason, victims), nil, time.Time{}); got != tc.wantChange {
			t.Errorf("%s: setWaitingOnWorker = %v, want %v", tc.reason, got, tc.wantChange)
		}
		noted := strings.Contains(dispatch.ChoiceReason(&strata.Workload{Status: st}), "ns/a, ns/b")
		if noted != tc.wantNoted {
			t.Errorf("%s: the attempt names the victims: %v, want %v", tc.reason, noted, tc.wantNoted)
		}
		if setWaitingOnWorker(&st, "w3", "gpu", copyWaiting(tc.reason, victims), nil, time.Time{}) {
			t.Errorf("%s: a second report of the same changed something", tc.reason)
		}
	}
}

// TestSetWaitingOnWorkerCountsTheAdmission: a copy the worker admitted,
// then evicted and kept queued, ends the hub's admission; its time counts
// towards the maximum execution time then, once, and a copy without a
// limit counts nothing.
func TestSetWaitingOnWorkerCountsTheAdmission(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	preempted := &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Preempted", Message: "preempted by ns/urgent"}}}}
	admittedAt := func(at time.Time) *strata.Workload {
		return &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq"}, Conditions: []metav1.Condition{
			{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.NewTime(at)}}}}
	}
	for name, tc := range map[string]struct {
		limit *int32
		want  *int32
	}{
		"with a maximum execution time": {limit: ptr.To[int32](600), want: ptr.To[int32](130)},
		"without one":                   {},
	} {
		t.Run(name, func(t *testing.T) {
			var st strata.WorkloadStatus
			dispatch.RecordDispatch(&st, "w3", "gpu", "chosen", t0)
			dispatch.RecordAdmission(&st, "cq", admittedAt(t0), t0.Add(10*time.Second))
			if !setWaitingOnWorker(&st, "w3", "gpu", preempted, tc.limit, t0.Add(110*time.Second)) {
				t.Fatal("setWaitingOnWorker changed nothing")
			}
			if setWaitingOnWorker(&st, "w3", "gpu", preempted, tc.limit, t0.Add(200*time.Second)) {
				t.Error("a second report of the same changed something")
			}
			// Admitted again, and evicted again: the second span adds.
			dispatch.RecordAdmission(&st, "cq", admittedAt(t0.Add(300*time.Second)), t0.Add(300*time.Second))
			if !setWaitingOnWorker(&st, "w3", "gpu", preempted, tc.limit, t0.Add(330*time.Second)) {
				t.Fatal("setWaitingOnWorker changed nothing the second time")
			}
			if diff := cmp.Diff(tc.want, st.AccumulatedPastExecutionTimeSeconds); diff != "" {
				t.Errorf("accumulatedPastExecutionTimeSeconds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetCopyGoing(t *testing.T) {
	going := func(pods string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"}}
		if pods != "" {
			j.Annotations = map[string]string{strata.GoingPodsAnnotation: pods}
		}
		return j
	}
	cases := map[string]struct {
		copy        *batchv1.Job
		wantReason  string
		wantMessage string
	}{
		"the agent reported no pod": {going(""), ReasonWaitingForCopy,
			"taking the copy back from w1: it is placed again once the copy and its pods are gone there"},
		"a pod stuck Terminating": {going("train-0 (Terminating since 2026-11-28T16:40:00Z, node n1)"), ReasonWaitingForPods,
			"taking the copy back from w1: it is placed again once its pods are gone there; waiting for train-0 (Terminating since 2026-11-28T16:40:00Z, node n1) " +
				"(a pod Terminating for long is on a node that does not answer: once that node is known gone, force-delete the pod there)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var st strata.WorkloadStatus
			if !setCopyGoing(&st, "w1", tc.copy) {
				t.Fatal("setCopyGoing changed nothing")
			}
			c := st.Conditions[0]
			if c.Type != ConditionCopyGoing || c.Status != metav1.ConditionTrue || c.Reason != tc.wantReason || c.Message != tc.wantMessage {
				t.Errorf("condition = %+v, want reason %s and message %q", c, tc.wantReason, tc.wantMessage)
			}
			if setCopyGoing(&st, "w1", tc.copy) {
				t.Error("setCopyGoing changed the status again with nothing new")
			}
		})
	}
}

// TestKeepRequeue: a copy's backoff is written on the hub Workload once,
// with Requeued=False; the same backoff again changes nothing, so the
// CopyGoing writes that follow do not repeat it.
func TestKeepRequeue(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	rq := func(n int32, at time.Time) *strata.RequeueState {
		return &strata.RequeueState{Count: &n, RequeueAt: &metav1.Time{Time: at}}
	}
	var ws strata.WorkloadStatus
	steps := []struct {
		name string
		rq   *strata.RequeueState
		want bool
	}{
		{name: "first", rq: rq(2, now.Add(time.Minute)), want: true},
		{name: "the same again", rq: rq(2, now.Add(time.Minute))},
		{name: "another backoff", rq: rq(3, now.Add(2*time.Minute)), want: true},
	}
	for _, s := range steps {
		if got := keepRequeue(&ws, s.rq, now); got != s.want {
			t.Errorf("%s: keepRequeue() = %t, want %t", s.name, got, s.want)
		}
		if ws.RequeueState == s.rq || *ws.RequeueState.Count != *s.rq.Count {
			t.Errorf("%s: requeueState %+v, want a copy of %+v", s.name, ws.RequeueState, s.rq)
		}
	}
	c := meta.FindStatusCondition(ws.Conditions, strata.WorkloadRequeued)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != strata.EvictedByPodsReadyTimeout || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Requeued = %+v, want False, PodsReadyTimeout, at %v", c, now)
	}
}
