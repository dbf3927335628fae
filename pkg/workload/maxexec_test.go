package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestMaxExecTime(t *testing.T) {
	type result struct {
		Max    *int32
		Errors []string
	}
	const must = "must be a whole number of seconds from 1 to 2147483647"
	for name, tc := range map[string]struct {
		labels map[string]string
		want   result
	}{
		"none":                    {},
		"Strata's":                {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "3600"}, want: result{Max: ptr.To[int32](3600)}},
		"Kueue's":                 {labels: map[string]string{strata.KueueMaxExecTimeSecondsLabel: "60"}, want: result{Max: ptr.To[int32](60)}},
		"Strata's before Kueue's": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "10", strata.KueueMaxExecTimeSecondsLabel: "60"}, want: result{Max: ptr.To[int32](10)}},
		"the largest":             {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "2147483647"}, want: result{Max: ptr.To[int32](2147483647)}},
		"zero": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "0"},
			want: result{Errors: []string{`metadata.labels[strata.dev/max-exec-time-seconds]: Invalid value: "0": ` + must}}},
		"negative": {labels: map[string]string{strata.KueueMaxExecTimeSecondsLabel: "-5"},
			want: result{Errors: []string{`metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "-5": ` + must}}},
		"a duration, not seconds": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "1h"},
			want: result{Errors: []string{`metadata.labels[strata.dev/max-exec-time-seconds]: Invalid value: "1h": ` + must}}},
		"too large": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "2147483648"},
			want: result{Errors: []string{`metadata.labels[strata.dev/max-exec-time-seconds]: Invalid value: "2147483648": ` + must}}},
		"empty": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: ""},
			want: result{Errors: []string{`metadata.labels[strata.dev/max-exec-time-seconds]: Invalid value: "": ` + must}}},
	} {
		t.Run(name, func(t *testing.T) {
			m, errs := MaxExecTime(tc.labels, field.NewPath("metadata", "labels"))
			got := result{Max: m}
			for _, e := range errs {
				got.Errors = append(got.Errors, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MaxExecTime() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExecutionTime(t *testing.T) {
	t0 := time.Date(2026, time.December, 4, 12, 0, 0, 0, time.UTC)
	admitted := func(at time.Time, max, accumulated *int32) *strata.Workload {
		return &strata.Workload{
			Spec: strata.WorkloadSpec{MaximumExecutionTimeSeconds: max},
			Status: strata.WorkloadStatus{
				Admission:                           &strata.Admission{ClusterQueue: "q"},
				AccumulatedPastExecutionTimeSeconds: accumulated,
				Conditions: []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted",
					LastTransitionTime: metav1.NewTime(at)}},
			},
		}
	}
	type result struct {
		Left        time.Duration
		Running     bool
		Accumulated *int32
	}
	for name, tc := range map[string]struct {
		wl   *strata.Workload
		want result
	}{
		"no maximum: nothing counted": {
			wl: admitted(t0.Add(-time.Hour), nil, nil),
		},
		"admitted 40s of 100s": {
			wl:   admitted(t0.Add(-40*time.Second), ptr.To[int32](100), nil),
			want: result{Left: 60 * time.Second, Running: true, Accumulated: ptr.To[int32](40)},
		},
		"30s counted before, 40s now": {
			wl:   admitted(t0.Add(-40*time.Second), ptr.To[int32](100), ptr.To[int32](30)),
			want: result{Left: 30 * time.Second, Running: true, Accumulated: ptr.To[int32](70)},
		},
		"used up 20s ago": {
			wl:   admitted(t0.Add(-90*time.Second), ptr.To[int32](100), ptr.To[int32](30)),
			want: result{Left: -20 * time.Second, Running: true, Accumulated: ptr.To[int32](120)},
		},
		"part of a second: rounded down": {
			wl:   admitted(t0.Add(-1500*time.Millisecond), ptr.To[int32](100), nil),
			want: result{Left: 98500 * time.Millisecond, Running: true, Accumulated: ptr.To[int32](1)},
		},
		"not admitted: nothing counted": {
			wl: func() *strata.Workload {
				wl := admitted(t0.Add(-time.Minute), ptr.To[int32](100), ptr.To[int32](30))
				wl.Status.Admission = nil
				wl.Status.Conditions[0].Status = metav1.ConditionFalse
				return wl
			}(),
			want: result{Accumulated: ptr.To[int32](30)},
		},
		"deactivated: not running against it (its eviction counts it)": {
			wl: func() *strata.Workload {
				wl := admitted(t0.Add(-time.Minute), ptr.To[int32](100), nil)
				wl.Spec.Active = ptr.To(false)
				return wl
			}(),
			want: result{Accumulated: ptr.To[int32](60)},
		},
		"finished: not running against it": {
			wl: func() *strata.Workload {
				wl := admitted(t0.Add(-time.Minute), ptr.To[int32](100), nil)
				wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"})
				return wl
			}(),
			want: result{Accumulated: ptr.To[int32](60)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got result
			got.Left, got.Running = ExecutionLeft(tc.wl, t0)
			st := tc.wl.Status.DeepCopy()
			AccumulateExecution(tc.wl.Spec.MaximumExecutionTimeSeconds, st, t0)
			got.Accumulated = st.AccumulatedPastExecutionTimeSeconds
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExecutionExceededMark(t *testing.T) {
	wl := &strata.Workload{Spec: strata.WorkloadSpec{MaximumExecutionTimeSeconds: ptr.To[int32](100)},
		Status: strata.WorkloadStatus{AccumulatedPastExecutionTimeSeconds: ptr.To[int32](100)}}
	if ExecutionExceeded(wl) {
		t.Fatal("ExecutionExceeded() before the mark = true")
	}
	MarkExecutionExceeded(wl, time.Now())
	if !ExecutionExceeded(wl) {
		t.Fatal("ExecutionExceeded() after the mark = false")
	}
	ClearExecutionExceeded(&wl.Status)
	if ExecutionExceeded(wl) || wl.Status.AccumulatedPastExecutionTimeSeconds != nil {
		t.Errorf("after ClearExecutionExceeded: marked %v, accumulated %v; want neither", ExecutionExceeded(wl), wl.Status.AccumulatedPastExecutionTimeSeconds)
	}
}
