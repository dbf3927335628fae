package workload

import (
	"fmt"
	"time"

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
// were not ready in time.
func RequeueCount(wl *strata.Workload) int32 {
	if rs := wl.Status.RequeueState; rs != nil && rs.Count != nil {
		return *rs.Count
	}
	return 0
}

// BackoffMessage is the Admitted=False message (reason PodsReadyTimeout)
// of a workload waiting for its requeueAt: the agent's eviction writes it,
// and the scheduler says the same while the backoff lasts.
func BackoffMessage(wl *strata.Workload) string {
	return fmt.Sprintf("evicted %d time(s) because its pods were not ready in time (waitForPodsReady); it queues again at %s",
		RequeueCount(wl), RequeueAt(wl).UTC().Format(time.RFC3339))
}
