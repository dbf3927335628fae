package queue

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// The statuses of a pending workload, Kueue's (kueue_pending_workloads).
const (
	// PendingActive: no pass has found that the workload cannot be
	// admitted now (not tried yet, requeued, preempting, or in a
	// StrictFIFO queue).
	PendingActive = "active"
	// PendingInadmissible: a pass tried it and wrote why it waits.
	PendingInadmissible = "inadmissible"
)

// waitReasons are the Admitted=False reasons the agent's scheduler and
// the hub's dispatcher write when they find a workload cannot be admitted
// (or dispatched) now, and say why: waiting for capacity or quota
// (Pending; the hub's NoClusterFits), not admissible as written
// (Inadmissible), its queue stopped, missing, not allowed or on a cohort
// cycle, an admission check not ready, held by fencing, or backing off
// (WaitingForPodsReady, PodsReadyTimeout). Not among them: Preempting
// (Kueue retries such a workload at once), the hub's Dispatched (on its
// way to a worker), and the reasons of an eviction (requeued).
var waitReasons = map[string]bool{
	"Pending": true, "Inadmissible": true, "NoClusterFits": true,
	strata.QueueStopped: true, strata.QueueAdmissionCheckNotReady: true, strata.QueueCohortCycle: true,
	ReasonLocalQueueNotFound: true, ReasonClusterQueueNotFound: true, ReasonNamespaceNotAllowed: true,
	strata.EvictedByFencing: true, strata.WaitingForPodsReady: true, strata.EvictedByPodsReadyTimeout: true,
}

// PendingStatus classes a pending workload as Kueue's
// kueue_pending_workloads does: every one is PendingInadmissible while its
// queue cannot admit (active false: stopped, a flavor or admission check
// missing, a cohort cycle); else PendingInadmissible once a pass tried
// it, found it cannot be admitted now and wrote why in its Admitted
// condition (Kueue parks such a workload until something changes),
// PendingActive otherwise. In a StrictFIFO queue (strict) that can admit,
// every one is active, as Kueue keeps them all in its queue's heap.
func PendingStatus(wl *strata.Workload, strict, active bool) string {
	switch {
	case !active:
		return PendingInadmissible
	case strict:
		return PendingActive
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	if c != nil && c.Status == metav1.ConditionFalse && waitReasons[c.Reason] {
		return PendingInadmissible
	}
	return PendingActive
}

// StrictFIFO says whether cq (nil: none) orders its workloads StrictFIFO.
func StrictFIFO(cq *strata.ClusterQueue) bool {
	return cq != nil && cq.Spec.QueueingStrategy == strata.StrictFIFO
}
