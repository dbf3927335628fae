package podsready

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/workload"
)

var t0 = time.Date(2026, time.November, 30, 12, 0, 0, 0, time.UTC)

func cond(typ string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func TestCondition(t *testing.T) {
	type want struct {
		Status metav1.ConditionStatus
		Reason string
	}
	cases := map[string]struct {
		prev  *metav1.Condition
		ready bool
		want  want
	}{
		"no condition, not ready: waits for the start": {
			want: want{metav1.ConditionFalse, strata.PodsReadyWaitForStart},
		},
		"no condition, ready: started": {
			ready: true, want: want{metav1.ConditionTrue, strata.PodsReadyStarted},
		},
		"waiting for the start, ready: started": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForStart, t0)), ready: true,
			want: want{metav1.ConditionTrue, strata.PodsReadyStarted},
		},
		"started, a pod fails: waits for recovery": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionTrue, strata.PodsReadyStarted, t0)),
			want: want{metav1.ConditionFalse, strata.PodsReadyWaitForRecovery},
		},
		"waiting for recovery, still not ready": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForRecovery, t0)),
			want: want{metav1.ConditionFalse, strata.PodsReadyWaitForRecovery},
		},
		"waiting for recovery, ready: recovered": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForRecovery, t0)), ready: true,
			want: want{metav1.ConditionTrue, strata.PodsReadyRecovered},
		},
		"recovered, a pod fails again: waits for recovery": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionTrue, strata.PodsReadyRecovered, t0)),
			want: want{metav1.ConditionFalse, strata.PodsReadyWaitForRecovery},
		},
		"recovered stays recovered": {
			prev: ptr.To(cond(strata.WorkloadPodsReady, metav1.ConditionTrue, strata.PodsReadyRecovered, t0)), ready: true,
			want: want{metav1.ConditionTrue, strata.PodsReadyRecovered},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, reason := condition(tc.prev, tc.ready)
			if diff := cmp.Diff(tc.want, want{status, reason}); diff != "" {
				t.Errorf("condition() (-want,+got):\n%s", diff)
			}
		})
	}
}

// defaults is the agent's defaulted waitForPodsReady, changed by edit.
func defaults(edit func(*configv1beta1.WaitForPodsReady)) *configv1beta1.WaitForPodsReady {
	cfg := &configv1beta1.AgentConfiguration{}
	config.SetAgentDefaults(cfg)
	if edit != nil {
		edit(&cfg.WaitForPodsReady)
	}
	return &cfg.WaitForPodsReady
}

// admittedAt is a workload admitted at t with conds besides.
func admittedAt(t time.Time, conds ...metav1.Condition) *strata.Workload {
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl"}}
	wl.Status.Admission = &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Count: 4}}}
	wl.Status.Conditions = append([]metav1.Condition{cond(strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", t)}, conds...)
	return wl
}

func TestDue(t *testing.T) {
	type want struct {
		Cause       string
		Left, Limit time.Duration
	}
	cases := map[string]struct {
		wl   *strata.Workload
		cfg  *configv1beta1.WaitForPodsReady
		now  time.Time
		want want
	}{
		"admitted without a condition: the timeout runs from the admission": {
			wl: admittedAt(t0), cfg: defaults(nil), now: t0.Add(10 * time.Minute),
			want: want{strata.PodsReadyWaitForStart, 20 * time.Minute, 30 * time.Minute},
		},
		"waiting for the start: the timeout runs from the condition the admission wrote": {
			wl:  admittedAt(t0, cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForStart, t0.Add(time.Minute))),
			cfg: defaults(nil), now: t0.Add(10 * time.Minute),
			want: want{strata.PodsReadyWaitForStart, 21 * time.Minute, 30 * time.Minute},
		},
		"waiting for the start, past the timeout": {
			wl:  admittedAt(t0, cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForStart, t0)),
			cfg: defaults(nil), now: t0.Add(31 * time.Minute),
			want: want{strata.PodsReadyWaitForStart, 0, 30 * time.Minute},
		},
		"ready: no deadline": {
			wl:  admittedAt(t0, cond(strata.WorkloadPodsReady, metav1.ConditionTrue, strata.PodsReadyStarted, t0)),
			cfg: defaults(nil), now: t0.Add(time.Hour),
		},
		"waiting for recovery: recoveryTimeout from the condition's change": {
			wl: admittedAt(t0, cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForRecovery, t0.Add(time.Hour))),
			cfg: defaults(func(w *configv1beta1.WaitForPodsReady) {
				w.RecoveryTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			}),
			now:  t0.Add(time.Hour + time.Minute),
			want: want{strata.PodsReadyWaitForRecovery, 4 * time.Minute, 5 * time.Minute},
		},
		"waiting for recovery with recoveryTimeout 0s: no deadline": {
			wl:  admittedAt(t0, cond(strata.WorkloadPodsReady, metav1.ConditionFalse, strata.PodsReadyWaitForRecovery, t0)),
			cfg: defaults(func(w *configv1beta1.WaitForPodsReady) { w.RecoveryTimeout = &metav1.Duration{} }),
			now: t0.Add(10 * time.Hour),
		},
		"not admitted: no deadline": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0)
				wl.Status.Admission = nil
				return wl
			}(),
			cfg: defaults(nil), now: t0.Add(time.Hour),
		},
		"finished: no deadline": {
			wl:  admittedAt(t0, cond(strata.WorkloadFinished, metav1.ConditionTrue, "Succeeded", t0)),
			cfg: defaults(nil), now: t0.Add(time.Hour),
		},
		"deactivated: no deadline": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0)
				wl.Spec.Active = ptr.To(false)
				return wl
			}(),
			cfg: defaults(nil), now: t0.Add(time.Hour),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cause, left, limit := due(tc.wl, tc.cfg, tc.now)
			if diff := cmp.Diff(tc.want, want{cause, left, limit}); diff != "" {
				t.Errorf("due() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	base, ceiling := time.Minute, time.Hour
	got := []time.Duration{}
	for n := int32(1); n <= 8; n++ {
		got = append(got, backoff(n, base, ceiling))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff() (-want,+got):\n%s", diff)
	}
}

func TestEvict(t *testing.T) {
	type result struct {
		Deactivate bool
		Count      int32
		RequeueAt  time.Time
		Admitted   bool
		Reasons    map[string]string
		EvictedAt  time.Time
	}
	now := t0.Add(time.Hour)
	cases := map[string]struct {
		wl   *strata.Workload
		cfg  *configv1beta1.WaitForPodsReady
		want result
	}{
		"the first eviction: requeued after the base": {
			wl: admittedAt(t0), cfg: defaults(nil),
			want: result{Count: 1, RequeueAt: now.Add(time.Minute), Reasons: map[string]string{
				strata.WorkloadAdmitted: strata.EvictedByPodsReadyTimeout, strata.WorkloadEvicted: strata.EvictedByPodsReadyTimeout,
				strata.WorkloadPodsReady: strata.PodsReadyWaitForStart, strata.WorkloadRequeued: strata.EvictedByPodsReadyTimeout}, EvictedAt: now},
		},
		"the third: four times the base, from this eviction": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0, cond(strata.WorkloadEvicted, metav1.ConditionTrue, strata.EvictedByPodsReadyTimeout, t0))
				wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2)}
				return wl
			}(),
			cfg: defaults(nil),
			want: result{Count: 3, RequeueAt: now.Add(4 * time.Minute), Reasons: map[string]string{
				strata.WorkloadAdmitted: strata.EvictedByPodsReadyTimeout, strata.WorkloadEvicted: strata.EvictedByPodsReadyTimeout,
				strata.WorkloadPodsReady: strata.PodsReadyWaitForStart, strata.WorkloadRequeued: strata.EvictedByPodsReadyTimeout}, EvictedAt: now},
		},
		"a hub's copy counts on from the Job's earlier copies": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0)
				wl.Labels = map[string]string{strata.HubWorkloadUIDLabel: "hub-uid", strata.DispatchGenerationLabel: "3"}
				wl.Annotations = map[string]string{strata.RequeueCountAnnotation: "2"}
				return wl
			}(),
			cfg: defaults(nil),
			want: result{Count: 3, RequeueAt: now.Add(4 * time.Minute), Reasons: map[string]string{
				strata.WorkloadAdmitted: strata.EvictedByPodsReadyTimeout, strata.WorkloadEvicted: strata.EvictedByPodsReadyTimeout,
				strata.WorkloadPodsReady: strata.PodsReadyWaitForStart, strata.WorkloadRequeued: strata.EvictedByPodsReadyTimeout}, EvictedAt: now},
		},
		"a hub's copy at the limit with its earlier copies: deactivated": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0)
				wl.Labels = map[string]string{strata.HubWorkloadUIDLabel: "hub-uid", strata.DispatchGenerationLabel: "3"}
				wl.Annotations = map[string]string{strata.RequeueCountAnnotation: "1"}
				return wl
			}(),
			cfg:  defaults(func(w *configv1beta1.WaitForPodsReady) { w.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](1) }),
			want: result{Deactivate: true, Admitted: true, Reasons: map[string]string{strata.WorkloadAdmitted: "Admitted"}},
		},
		"past backoffLimitCount: deactivated instead, nothing changed": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0)
				wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2)}
				return wl
			}(),
			cfg:  defaults(func(w *configv1beta1.WaitForPodsReady) { w.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](2) }),
			want: result{Deactivate: true, Count: 2, Admitted: true, Reasons: map[string]string{strata.WorkloadAdmitted: "Admitted"}},
		},
		"backoffLimitCount 0: the first timeout deactivates": {
			wl:   admittedAt(t0),
			cfg:  defaults(func(w *configv1beta1.WaitForPodsReady) { w.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](0) }),
			want: result{Deactivate: true, Admitted: true, Reasons: map[string]string{strata.WorkloadAdmitted: "Admitted"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := tc.wl.DeepCopy()
			got := result{Deactivate: evict(wl, tc.cfg, strata.PodsReadyWaitForStart, 1, 4, 30*time.Minute, now), Admitted: wl.Status.Admission != nil,
				Reasons: map[string]string{}}
			if rs := wl.Status.RequeueState; rs != nil {
				got.Count = ptr.Deref(rs.Count, 0)
				if rs.RequeueAt != nil {
					got.RequeueAt = rs.RequeueAt.Time
				}
			}
			for _, c := range wl.Status.Conditions {
				got.Reasons[c.Type] = c.Reason
			}
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted); c != nil {
				got.EvictedAt = c.LastTransitionTime.Time
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("evict() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeactivated(t *testing.T) {
	limit3 := defaults(func(w *configv1beta1.WaitForPodsReady) { w.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](3) })
	withCount := func(wl *strata.Workload, n int32) *strata.Workload {
		wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To(n)}
		return wl
	}
	type result struct {
		Message           string
		Evicted, Exceeded bool
		Reasons           map[string]string
		Accumulated       *int32
	}
	timeUp := func(admittedFor time.Duration, evictedFirst bool) *strata.Workload {
		wl := admittedAt(t0.Add(-admittedFor))
		wl.Spec.Active = ptr.To(false)
		wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](100)
		workload.MarkExecutionExceeded(wl, t0)
		if evictedFirst {
			// The Job controller's deactivation: the time counted, the
			// mark left for this controller.
			workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, t0)
			wl.Status.Admission = nil
		}
		return wl
	}
	const timeExceeded = "deactivated (MaximumExecutionTimeExceeded): admitted for its maximum execution time of 100s (strata.dev/max-exec-time-seconds) in all; set spec.active to true to queue it again, with the whole time again"
	const exceeded = "deactivated (RequeuingLimitExceeded): its pods were not ready in time after 3 requeue(s), waitForPodsReady's backoffLimitCount; set spec.active to true to queue it again"
	const byUser = "the Workload is deactivated (spec.active: false); it waits until spec.active is true"
	cases := map[string]struct {
		wl   *strata.Workload
		cfg  *configv1beta1.WaitForPodsReady
		want result
	}{
		"past the limit (its count one more): evicted, saying so": {
			wl: withCount(admittedAt(t0), 4), cfg: limit3,
			want: result{Message: exceeded, Evicted: true, Exceeded: true,
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"past the limit, its admission already taken back by the Job controller: the message still says why": {
			wl: func() *strata.Workload {
				wl := withCount(admittedAt(t0), 4)
				wl.Status.Admission = nil
				return wl
			}(),
			cfg: limit3,
			want: result{Message: exceeded, Evicted: true, Exceeded: true,
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"its maximum execution time used up: evicted, saying so; the mark and the time go": {
			wl: timeUp(100*time.Second, false), cfg: defaults(nil),
			want: result{Message: timeExceeded, Evicted: true, Exceeded: true,
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"its maximum execution time used up, evicted first by the Job controller: the message still says why": {
			wl: timeUp(150*time.Second, true), cfg: defaults(nil),
			want: result{Message: timeExceeded, Evicted: true, Exceeded: true,
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"deactivated by its user with time left: the time it ran is kept": {
			wl: func() *strata.Workload {
				wl := admittedAt(t0.Add(-30 * time.Second))
				wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](100)
				return wl
			}(),
			cfg: defaults(nil),
			want: result{Message: byUser, Evicted: true, Accumulated: ptr.To[int32](30),
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"deactivated by its user at the limit's count: not the limit's doing": {
			wl: withCount(admittedAt(t0), 3), cfg: limit3,
			want: result{Message: byUser, Evicted: true,
				Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadEvicted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
		"deactivated by its user while it waited out a backoff: its requeueState goes": {
			wl: func() *strata.Workload {
				wl := withCount(admittedAt(t0), 1)
				wl.Status.Admission = nil
				wl.Status.Conditions = nil
				return wl
			}(),
			cfg:  defaults(nil),
			want: result{Message: byUser, Reasons: map[string]string{strata.WorkloadAdmitted: "Deactivated", strata.WorkloadRequeued: "Deactivated"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := tc.wl.DeepCopy()
			var got result
			got.Message, got.Evicted, got.Exceeded = deactivated(wl, tc.cfg, t0)
			got.Accumulated = wl.Status.AccumulatedPastExecutionTimeSeconds
			got.Reasons = map[string]string{}
			for _, c := range wl.Status.Conditions {
				got.Reasons[c.Type] = c.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("deactivated() (-want,+got):\n%s", diff)
			}
			if wl.Status.Admission != nil || wl.Status.RequeueState != nil {
				t.Errorf("deactivated() left admission %v, requeueState %v; want both gone", wl.Status.Admission, wl.Status.RequeueState)
			}
		})
	}
}

func TestReadyPods(t *testing.T) {
	pod := func(phase corev1.PodPhase, ready corev1.ConditionStatus, deleting bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
		if deleting {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		}
		return p
	}
	pods := []corev1.Pod{
		pod(corev1.PodRunning, corev1.ConditionTrue, false),    // ready
		pod(corev1.PodSucceeded, corev1.ConditionFalse, false), // succeeded
		pod(corev1.PodRunning, corev1.ConditionFalse, false),   // running, not ready
		pod(corev1.PodPending, corev1.ConditionFalse, false),   // gated or unscheduled
		pod(corev1.PodFailed, corev1.ConditionFalse, false),    // failed
		pod(corev1.PodRunning, corev1.ConditionTrue, true),     // ready, but going
	}
	if got := readyPods(pods); got != 2 {
		t.Errorf("readyPods() = %d, want 2", got)
	}
}
