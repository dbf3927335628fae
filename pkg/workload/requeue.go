package workload

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

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
func RequeueBackoff(wl *strata.Workload) time.Duration {
	at := RequeueAt(wl)
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
	if at.IsZero() || c == nil || c.Reason != strata.EvictedByPodsReadyTimeout {
		return 0
	}
	return max(at.Sub(c.LastTransitionTime.Time), 0)
}

// BackoffMessage is the Admitted=False message (reason PodsReadyTimeout)
// of a workload waiting for its requeueAt: the agent's eviction writes it,
// and the scheduler says the same while the backoff lasts.
func BackoffMessage(wl *strata.Workload) string {
	return fmt.Sprintf("evicted %d time(s) because its pods were not ready in time (waitForPodsReady); it queues again at %s",
		RequeueCount(wl), RequeueAt(wl).UTC().Format(time.RFC3339))
}
