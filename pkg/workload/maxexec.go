package workload

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// MaxExecTime is the maximum execution time a job's labels ask for
// (strata.dev/max-exec-time-seconds, else Kueue's
// kueue.x-k8s.io/max-exec-time-seconds): nil without one. A value that is
// not the base-10 form of an integer from 1 to 2147483647 is an error at
// path (the job's metadata.labels).
func MaxExecTime(labels map[string]string, path *field.Path) (*int32, field.ErrorList) {
	for _, key := range []string{strata.MaxExecTimeSecondsLabel, strata.KueueMaxExecTimeSecondsLabel} {
		v, ok := labels[key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return nil, field.ErrorList{field.Invalid(path.Key(key), v, "must be a whole number of seconds from 1 to 2147483647")}
		}
		return ptr.To(int32(n)), nil
	}
	return nil, nil
}

// admittedSince is when the workload's current admission began (its
// Admitted condition's transition), and whether it has one that counts
// towards its maximum execution time.
func admittedSince(limit *int32, st *strata.WorkloadStatus) (time.Time, bool) {
	if limit == nil || st.Admission == nil {
		return time.Time{}, false
	}
	c := meta.FindStatusCondition(st.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// Accumulated is the time the workload was admitted in its earlier
// admissions (status.accumulatedPastExecutionTimeSeconds).
func Accumulated(st *strata.WorkloadStatus) time.Duration {
	return time.Duration(ptr.Deref(st.AccumulatedPastExecutionTimeSeconds, 0)) * time.Second
}

// AccumulateExecution adds the time the current admission lasted until
// now to status.accumulatedPastExecutionTimeSeconds, for a workload with
// a maximum execution time (limit, spec.maximumExecutionTimeSeconds) whose admission is about to be taken
// back; callers call it before they clear the admission and its Admitted
// condition. Whole seconds, rounded down, as Kueue counts them.
func AccumulateExecution(limit *int32, st *strata.WorkloadStatus, now time.Time) {
	since, ok := admittedSince(limit, st)
	if !ok {
		return
	}
	total := int64(Accumulated(st)/time.Second) + int64(max(now.Sub(since), 0)/time.Second)
	st.AccumulatedPastExecutionTimeSeconds = ptr.To(int32(min(total, math.MaxInt32)))
}

// ExecutionLeft is how much of its maximum execution time an admitted,
// active, unfinished workload has left at now (0 or less once it is used
// up: how long ago, negated); ok is false for a workload without one, or
// not running against it.
func ExecutionLeft(wl *strata.Workload, now time.Time) (left time.Duration, ok bool) {
	since, ok := admittedSince(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status)
	if !ok || !IsActive(wl) || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return 0, false
	}
	limit := time.Duration(*wl.Spec.MaximumExecutionTimeSeconds) * time.Second
	return limit - Accumulated(&wl.Status) - now.Sub(since), true
}

// ExecutionUsedUp says whether a workload with a maximum execution time
// has used it all up in its earlier admissions
// (status.accumulatedPastExecutionTimeSeconds): admitted again, it would
// be deactivated at once.
func ExecutionUsedUp(wl *strata.Workload) bool {
	m := wl.Spec.MaximumExecutionTimeSeconds
	return m != nil && Accumulated(&wl.Status) >= time.Duration(*m)*time.Second
}

// MarkExecutionExceeded records on an admitted workload whose maximum
// execution time is used up that it is to be deactivated for it (Kueue's
// DeactivationTarget condition): the status write that comes before its
// spec.active is set to false, so that the eviction that follows says
// why, whoever makes it.
func MarkExecutionExceeded(wl *strata.Workload, now time.Time) {
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadDeactivationTarget, Status: metav1.ConditionTrue,
		Reason: strata.MaximumExecutionTimeExceeded, LastTransitionTime: metav1.NewTime(now),
		Message: fmt.Sprintf("admitted for its maximum execution time, %ds (%s)", *wl.Spec.MaximumExecutionTimeSeconds, strata.MaxExecTimeSecondsLabel)})
}

// ExecutionExceeded says whether the workload carries the mark
// MarkExecutionExceeded writes.
func ExecutionExceeded(wl *strata.Workload) bool {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadDeactivationTarget)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == strata.MaximumExecutionTimeExceeded
}

// ExecutionExceededMessage is what a workload deactivated for its maximum
// execution time says: the Admitted and Evicted conditions' message.
func ExecutionExceededMessage(wl *strata.Workload) string {
	limit := "its maximum execution time"
	if m := wl.Spec.MaximumExecutionTimeSeconds; m != nil {
		limit = fmt.Sprintf("its maximum execution time of %ds (%s)", *m, strata.MaxExecTimeSecondsLabel)
	}
	return fmt.Sprintf("deactivated (%s): admitted for %s in all; set spec.active to true to queue it again, with the whole time again",
		strata.MaximumExecutionTimeExceeded, limit)
}

// ClearExecutionExceeded ends the mark once the workload's deactivation
// has evicted it: the mark goes, and so does the time it accumulated
// (Kueue's: activated again, it has its whole maximum execution time).
func ClearExecutionExceeded(st *strata.WorkloadStatus) {
	meta.RemoveStatusCondition(&st.Conditions, strata.WorkloadDeactivationTarget)
	st.AccumulatedPastExecutionTimeSeconds = nil
}
