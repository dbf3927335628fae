package workload

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// RequeueAt is when a workload evicted because its pods were not ready in
// time may be admitted again (status.requeueState.requeueAt); zero when
// it has no backoff.
func RequeueAt(wl *strata.Workload) time.Time {
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil {
		return rs.RequeueAt.Time
	}
	return time.Time{}
}

// RequeueCount is how many times a workload was evicted because its pods
// were not ready in time: its requeueState's count.
func RequeueCount(wl *strata.Workload) int32 {
	if rs := wl.Status.RequeueState; rs != nil && rs.Count != nil {
		return *rs.Count
	}
	return 0
}

// NextRequeueCount is the count the workload's next such eviction makes:
// one more than its requeueState's, or, before it has one, than what a
// hub's copy carries of the Job's earlier copies (strata.dev/requeue-count).
func NextRequeueCount(wl *strata.Workload) int32 {
	if rs := wl.Status.RequeueState; rs != nil && rs.Count != nil {
		return *rs.Count + 1
	}
	return carriedRequeueCount(wl) + 1
}

// carriedRequeueCount is a hub copy's strata.dev/requeue-count; 0 for a
// Workload that is not a copy, or a value that does not parse.
func carriedRequeueCount(wl *strata.Workload) int32 {
	if DispatchKey(wl) == "" {
		return 0
	}
	n, err := strconv.ParseInt(wl.Annotations[strata.RequeueCountAnnotation], 10, 32)
	if err != nil || n < 0 || n >= math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// RequeueBackoff is the backoff of a workload's last eviction for pods
// not ready in time: from that eviction to its requeueAt, both on the
// clock of the cluster that evicted it; 0 when it has none. A hub
// measures the wait on its own clock from it, so that a worker's clock
// ahead or behind does not lengthen or shorten it.
//
// Once the backoff is over (Requeued True, BackoffFinished, requeueAt
// cleared), it is measured from the eviction to then: at least the
// backoff, on the same clock.
func RequeueBackoff(wl *strata.Workload) time.Duration {
	at := RequeueAt(wl)
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
	if c == nil || c.Reason != strata.EvictedByPodsReadyTimeout {
		return 0
	}
	if at.IsZero() {
		rq := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
		if RequeueCount(wl) == 0 || rq == nil || rq.Status != metav1.ConditionTrue || rq.Reason != strata.RequeuedBackoffFinished {
			return 0
		}
		at = rq.LastTransitionTime.Time
	}
	return max(at.Sub(c.LastTransitionTime.Time), 0)
}

// SetRequeued sets a workload's Requeued condition at now (Kueue's): False
// with the reason of an eviction or deactivation it must wait out, True
// with the reason it queues again. It returns whether the condition
// changed.
func SetRequeued(wl *strata.Workload, status metav1.ConditionStatus, reason, message string, now time.Time) bool {
	return meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadRequeued, Status: status,
		Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)})
}

// Requeue marks at now a workload that waited out why its Requeued
// condition is False as queued again, when that is over: its backoff
// (requeueAt passed, and cleared; the count stays), its deactivation
// (spec.active is true), its stopped queue or its fenced hub (queueRuns:
// the caller found its queues admitting, and it is not held). It returns whether the workload changed.
// A workload with no Requeued condition, or one already True, is left
// alone.
func Requeue(wl *strata.Workload, queueRuns bool, now time.Time) bool {
	reason, message := requeueAs(wl, queueRuns, now)
	if reason == "" {
		return false
	}
	if reason == strata.RequeuedBackoffFinished && wl.Status.RequeueState != nil {
		wl.Status.RequeueState.RequeueAt = nil
	}
	return SetRequeued(wl, metav1.ConditionTrue, reason, message, now)
}

// RequeueDue says whether Requeue would change wl, without changing it.
func RequeueDue(wl *strata.Workload, queueRuns bool, now time.Time) bool {
	reason, _ := requeueAs(wl, queueRuns, now)
	return reason != ""
}

// requeueAs is the Requeued=True reason and message wl takes at now; ""
// when it keeps its condition.
func requeueAs(wl *strata.Workload, queueRuns bool, now time.Time) (reason, message string) {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued)
	if c == nil || c.Status != metav1.ConditionFalse || !IsActive(wl) {
		return "", ""
	}
	switch c.Reason {
	case strata.EvictedByPodsReadyTimeout:
		if RequeueAt(wl).After(now) {
			return "", ""
		}
		return strata.RequeuedBackoffFinished, "the backoff of waitForPodsReady is over"
	case deactivatedReason:
		return strata.RequeuedReactivated, "spec.active is true again"
	case strata.EvictedByClusterQueueStopped:
		if queueRuns {
			return strata.RequeuedClusterQueueRestarted, "its ClusterQueue admits again (stopPolicy None)"
		}
	case strata.EvictedByLocalQueueStopped:
		if queueRuns {
			return strata.RequeuedLocalQueueRestarted, "its LocalQueue admits again (stopPolicy None)"
		}
	case strata.EvictedByFencing:
		// The caller asks only for a copy its agent no longer holds (the
		// scheduler does not requeue a held one).
		if queueRuns {
			return strata.RequeuedFenceLifted, "its hub renews its fencing Lease again"
		}
	}
	return "", ""
}

// BackoffMessage is the Admitted=False message (reason PodsReadyTimeout)
// of a workload waiting for its requeueAt: the agent's eviction writes it,
// and the scheduler says the same while the backoff lasts.
func BackoffMessage(wl *strata.Workload) string {
	return fmt.Sprintf("evicted %d time(s) because its pods were not ready in time (waitForPodsReady); it queues again at %s",
		RequeueCount(wl), RequeueAt(wl).UTC().Format(time.RFC3339))
}

// deactivatedReason is the eviction and Requeued reason of a deactivated
// workload (the agent's and the hub's).
const deactivatedReason = "Deactivated"
