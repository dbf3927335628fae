package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestNextRequeueCount(t *testing.T) {
	copyMeta := func(count string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Labels:      map[string]string{strata.HubWorkloadUIDLabel: "u", strata.DispatchGenerationLabel: "2"},
			Annotations: map[string]string{strata.RequeueCountAnnotation: count}}
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want int32
	}{
		"never evicted": {wl: &strata.Workload{}, want: 1},
		"its own count": {wl: &strata.Workload{Status: strata.WorkloadStatus{RequeueState: &strata.RequeueState{Count: ptr.To[int32](3)}}}, want: 4},
		"a copy's carried count, before one of its own": {
			wl: &strata.Workload{ObjectMeta: copyMeta("2")}, want: 3},
		"a copy's own count wins": {
			wl: &strata.Workload{ObjectMeta: copyMeta("2"), Status: strata.WorkloadStatus{RequeueState: &strata.RequeueState{Count: ptr.To[int32](3)}}}, want: 4},
		"not a copy: the annotation is a user's": {
			wl: &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.RequeueCountAnnotation: "2"}}}, want: 1},
		"malformed":    {wl: &strata.Workload{ObjectMeta: copyMeta("two")}, want: 1},
		"negative":     {wl: &strata.Workload{ObjectMeta: copyMeta("-1")}, want: 1},
		"out of range": {wl: &strata.Workload{ObjectMeta: copyMeta("99999999999")}, want: 1},
		"at the bound": {wl: &strata.Workload{ObjectMeta: copyMeta("2147483647")}, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NextRequeueCount(tc.wl)); diff != "" {
				t.Errorf("NextRequeueCount() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRequeueBackoff(t *testing.T) {
	evicted := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	wl := func(reason string, at time.Time) *strata.Workload {
		w := &strata.Workload{}
		if !at.IsZero() {
			w.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](1), RequeueAt: ptr.To(metav1.NewTime(at))}
		}
		if reason != "" {
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
				Reason: reason, LastTransitionTime: metav1.NewTime(evicted)})
		}
		return w
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want time.Duration
	}{
		"no backoff":                          {wl: wl(strata.EvictedByPodsReadyTimeout, time.Time{})},
		"evicted, requeued two minutes later": {wl: wl(strata.EvictedByPodsReadyTimeout, evicted.Add(2*time.Minute)), want: 2 * time.Minute},
		"evicted for another reason":          {wl: wl("Preempted", evicted.Add(2*time.Minute))},
		"no eviction":                         {wl: wl("", evicted.Add(2*time.Minute))},
		"requeueAt before the eviction":       {wl: wl(strata.EvictedByPodsReadyTimeout, evicted.Add(-time.Minute))},
		"the backoff over, requeueAt cleared: until the Requeued condition's change": {wl: func() *strata.Workload {
			w := wl(strata.EvictedByPodsReadyTimeout, time.Time{})
			w.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](1)}
			SetRequeued(w, metav1.ConditionTrue, strata.RequeuedBackoffFinished, "", evicted.Add(3*time.Minute))
			return w
		}(), want: 3 * time.Minute},
		"requeued for another reason": {wl: func() *strata.Workload {
			w := wl(strata.EvictedByPodsReadyTimeout, time.Time{})
			w.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](1)}
			SetRequeued(w, metav1.ConditionTrue, strata.RequeuedReactivated, "", evicted.Add(3*time.Minute))
			return w
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RequeueBackoff(tc.wl)); diff != "" {
				t.Errorf("RequeueBackoff() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRequeue(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(now.Add(d))) }
	wl := func(reason string, requeueAt *metav1.Time, active bool) *strata.Workload {
		w := &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(active)}}
		if requeueAt != nil {
			w.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2), RequeueAt: requeueAt}
		}
		if reason != "" {
			SetRequeued(w, metav1.ConditionFalse, reason, "waits", now.Add(-time.Hour))
		}
		return w
	}
	type want struct {
		Changed   bool
		Status    metav1.ConditionStatus
		Reason    string
		RequeueAt *metav1.Time
		Count     *int32
	}
	cases := map[string]struct {
		wl        *strata.Workload
		queueRuns bool
		want      want
	}{
		"no condition":          {wl: wl("", at(-time.Minute), true), want: want{RequeueAt: at(-time.Minute), Count: ptr.To[int32](2)}},
		"in its backoff":        {wl: wl(strata.EvictedByPodsReadyTimeout, at(time.Minute), true), want: want{Status: "False", Reason: strata.EvictedByPodsReadyTimeout, RequeueAt: at(time.Minute), Count: ptr.To[int32](2)}},
		"its backoff just over": {wl: wl(strata.EvictedByPodsReadyTimeout, at(0), true), want: want{Changed: true, Status: "True", Reason: strata.RequeuedBackoffFinished, Count: ptr.To[int32](2)}},
		"its backoff over, but deactivated": {wl: wl(strata.EvictedByPodsReadyTimeout, at(-time.Minute), false),
			want: want{Status: "False", Reason: strata.EvictedByPodsReadyTimeout, RequeueAt: at(-time.Minute), Count: ptr.To[int32](2)}},
		"still deactivated":              {wl: wl(deactivatedReason, nil, false), want: want{Status: "False", Reason: deactivatedReason}},
		"active again":                   {wl: wl(deactivatedReason, nil, true), want: want{Changed: true, Status: "True", Reason: strata.RequeuedReactivated}},
		"its ClusterQueue still stopped": {wl: wl(strata.EvictedByClusterQueueStopped, nil, true), want: want{Status: "False", Reason: strata.EvictedByClusterQueueStopped}},
		"its ClusterQueue runs again": {wl: wl(strata.EvictedByClusterQueueStopped, nil, true), queueRuns: true,
			want: want{Changed: true, Status: "True", Reason: strata.RequeuedClusterQueueRestarted}},
		"its LocalQueue runs again": {wl: wl(strata.EvictedByLocalQueueStopped, nil, true), queueRuns: true,
			want: want{Changed: true, Status: "True", Reason: strata.RequeuedLocalQueueRestarted}},
		"its hub still fenced": {wl: wl(strata.EvictedByFencing, nil, true), want: want{Status: "False", Reason: strata.EvictedByFencing}},
		"its fence lifted": {wl: wl(strata.EvictedByFencing, nil, true), queueRuns: true,
			want: want{Changed: true, Status: "True", Reason: strata.RequeuedFenceLifted}},
		"already requeued": {wl: func() *strata.Workload {
			w := wl("", nil, true)
			SetRequeued(w, metav1.ConditionTrue, strata.EvictedByPreemption, "", now)
			return w
		}(), queueRuns: true, want: want{Status: "True", Reason: strata.EvictedByPreemption}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := want{Changed: Requeue(tc.wl, tc.queueRuns, now)}
			if c := meta.FindStatusCondition(tc.wl.Status.Conditions, strata.WorkloadRequeued); c != nil {
				got.Status, got.Reason = c.Status, c.Reason
				if got.Changed && !c.LastTransitionTime.Time.Equal(now) {
					t.Errorf("LastTransitionTime = %v, want %v", c.LastTransitionTime, now)
				}
			}
			if rs := tc.wl.Status.RequeueState; rs != nil {
				got.RequeueAt, got.Count = rs.RequeueAt, rs.Count
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Requeue() (-want,+got):\n%s", diff)
			}
		})
	}
}
