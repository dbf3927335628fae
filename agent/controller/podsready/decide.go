package podsready

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// condition is the PodsReady condition an admitted workload should have,
// as Kueue keeps it: ready says whether every admitted pod is ready or
// has succeeded, prev is the condition it has (nil: none; the scheduler
// writes False, WaitForStart, with each admission). Only its status and
// reason matter: the message is written with them.
func condition(prev *metav1.Condition, ready bool) (metav1.ConditionStatus, string) {
	switch {
	case ready && prev != nil && (prev.Reason == strata.PodsReadyWaitForRecovery || prev.Reason == strata.PodsReadyRecovered):
		return metav1.ConditionTrue, strata.PodsReadyRecovered
	case ready:
		return metav1.ConditionTrue, strata.PodsReadyStarted
	case prev != nil && (prev.Status == metav1.ConditionTrue || prev.Reason == strata.PodsReadyWaitForRecovery):
		return metav1.ConditionFalse, strata.PodsReadyWaitForRecovery
	}
	return metav1.ConditionFalse, strata.PodsReadyWaitForStart
}

// conditionMessage says what a PodsReady status and reason mean, with the
// counts of the moment.
func conditionMessage(reason string, ready, want int32) string {
	switch reason {
	case strata.PodsReadyStarted:
		return fmt.Sprintf("all %d pod(s) of the admission are ready or succeeded", want)
	case strata.PodsReadyRecovered:
		return fmt.Sprintf("all %d pod(s) are ready or succeeded again after one failed", want)
	case strata.PodsReadyWaitForRecovery:
		return fmt.Sprintf("a pod failed after all were ready: %d of %d ready or succeeded, waiting for recovery", ready, want)
	}
	return fmt.Sprintf("%d of %d pod(s) ready or succeeded, waiting for the rest", ready, want)
}

// due says whether an admitted workload whose pods are not all ready has
// a deadline, and how long is left of it at now (at most 0): timeout from
// its admission while it waits for its pods to start (the PodsReady
// condition the admission wrote, or the Admitted condition when there is
// none, as for a workload admitted before waitForPodsReady was on), recoveryTimeout
// from the PodsReady condition's change while it waits for a failed pod's
// replacement (none when recoveryTimeout is 0). limit is the timeout that
// applies.
func due(wl *strata.Workload, cfg *configv1beta1.WaitForPodsReady, now time.Time) (cause string, left, limit time.Duration) {
	if wl.Status.Admission == nil || workload.AwaitingChecks(wl) || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) || !workload.IsActive(wl) {
		return "", 0, 0
	}
	pr := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPodsReady)
	switch {
	case pr != nil && pr.Status == metav1.ConditionTrue:
		return "", 0, 0
	case pr == nil || pr.Reason == strata.PodsReadyWaitForStart:
		since := pr
		if since == nil {
			since = meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
		}
		if since == nil {
			return "", 0, 0
		}
		limit = cfg.Timeout.Duration
		return strata.PodsReadyWaitForStart, max(since.LastTransitionTime.Add(limit).Sub(now), 0), limit
	case pr.Reason == strata.PodsReadyWaitForRecovery && cfg.RecoveryTimeout.Duration > 0:
		limit = cfg.RecoveryTimeout.Duration
		return strata.PodsReadyWaitForRecovery, max(pr.LastTransitionTime.Add(limit).Sub(now), 0), limit
	}
	return "", 0, 0
}

// backoff is the wait before a workload evicted for the n-th time may be
// admitted again: base doubled n-1 times, at most ceiling (Kueue's
// requeuing backoff, without its jitter).
func backoff(n int32, base, ceiling time.Duration) time.Duration {
	d := base
	for i := int32(1); i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// evict takes an admitted workload's admission back at now because its
// pods were not ready within limit (cause: WaitForStart or
// WaitForRecovery), as Kueue does: it counts the eviction in
// requeueState and sets when the workload may be admitted again. deactivate
// is true when that eviction would exceed backoffLimitCount: then nothing
// is changed, and the workload is to be deactivated instead (see
// deactivated).
func evict(wl *strata.Workload, cfg *configv1beta1.WaitForPodsReady, cause string, ready, want int32, limit time.Duration, now time.Time) (deactivate bool) {
	rs := &cfg.RequeuingStrategy
	count := workload.NextRequeueCount(wl)
	if rs.BackoffLimitCount != nil && count > *rs.BackoffLimitCount {
		return true
	}
	at := metav1.NewTime(now.Add(backoff(count, time.Duration(*rs.BackoffBaseSeconds)*time.Second, time.Duration(*rs.BackoffMaxSeconds)*time.Second)).Truncate(time.Second))
	wl.Status.RequeueState = &strata.RequeueState{Count: &count, RequeueAt: &at}
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, now)
	wl.Status.Admission = nil
	what := "its pods were not all ready within %s of its admission (%d of %d ready or succeeded)"
	if cause == strata.PodsReadyWaitForRecovery {
		what = "its pods were not all ready again within %s of a pod failing (%d of %d ready or succeeded)"
	}
	message := fmt.Sprintf("evicted: "+what+"; waitForPodsReady requeues it at %s", limit, ready, want, at.UTC().Format(time.RFC3339))
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: strata.EvictedByPodsReadyTimeout, Message: message, LastTransitionTime: t})
	// A second eviction for the same reason: the queue orders it from this
	// one (queue.QueuedAt).
	meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted).LastTransitionTime = t
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.EvictedByPodsReadyTimeout, Message: workload.BackoffMessage(wl), LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadPodsReady, Status: metav1.ConditionFalse,
		Reason: strata.PodsReadyWaitForStart, Message: "not admitted", LastTransitionTime: t})
	workload.SetRequeued(wl, metav1.ConditionFalse, strata.EvictedByPodsReadyTimeout, message, now)
	return false
}

// deactivated is what becomes of a Workload whose spec.active is false:
// its admission and its requeueState go (Kueue's), and the conditions say
// why. When it was deactivated for exceeding backoffLimitCount (its
// requeueState counts one eviction more, see Reconciler.timedOut) the
// message names RequeuingLimitExceeded; when it was deactivated for its
// maximum execution time (workload.MarkExecutionExceeded), the message
// names MaximumExecutionTimeExceeded, and the mark and the time it
// accumulated go. evicted says whether it was admitted, or exceeded a
// limit (the kind's controller may have taken the admission back first,
// saying only that it was deactivated); exceeded whether it exceeded one.
func deactivated(wl *strata.Workload, cfg *configv1beta1.WaitForPodsReady, now time.Time) (message string, evicted, exceeded bool) {
	limit := cfg.RequeuingStrategy.BackoffLimitCount
	exceeded = limit != nil && workload.RequeueCount(wl) > *limit
	message = "the Workload is deactivated (spec.active: false); it waits until spec.active is true"
	if exceeded {
		message = fmt.Sprintf("deactivated (%s): its pods were not ready in time after %d requeue(s), waitForPodsReady's backoffLimitCount; set spec.active to true to queue it again",
			strata.RequeuingLimitExceeded, *limit)
	}
	timeUp := workload.ExecutionExceeded(wl)
	if timeUp {
		message = workload.ExecutionExceededMessage(wl)
	}
	evicted = wl.Status.Admission != nil || exceeded || timeUp
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, now)
	wl.Status.Admission = nil
	wl.Status.RequeueState = nil
	if timeUp {
		workload.ClearExecutionExceeded(&wl.Status)
	}
	t := metav1.NewTime(now)
	if evicted {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
			Reason: reasonDeactivated, Message: message, LastTransitionTime: t})
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: reasonDeactivated, Message: message, LastTransitionTime: t})
	workload.SetRequeued(wl, metav1.ConditionFalse, reasonDeactivated, message, now)
	if meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPodsReady) != nil {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadPodsReady, Status: metav1.ConditionFalse,
			Reason: strata.PodsReadyWaitForStart, Message: "not admitted", LastTransitionTime: t})
	}
	return message, evicted, exceeded || timeUp
}

// reasonDeactivated is the Evicted and Admitted reason of a deactivated
// Workload (as the Job controller's).
const reasonDeactivated = "Deactivated"
