// Package queue resolves the queue of a workload as Kueue does: the
// strata.dev/queue-name label of a Job (the Workload's spec.queueName)
// names a LocalQueue in the Job's namespace, the LocalQueue names a
// ClusterQueue, and the ClusterQueue's namespaceSelector must select the
// namespace. It is plain Go, shared by the agent and the hub.
package queue

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Reasons a workload's queue does not admit it.
const (
	ReasonLocalQueueNotFound   = "LocalQueueNotFound"
	ReasonClusterQueueNotFound = "ClusterQueueNotFound"
	ReasonNamespaceNotAllowed  = "NamespaceNotAllowed"
)

// Key is the LocalQueue a workload is submitted to.
func Key(wl *strata.Workload) types.NamespacedName {
	return types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}
}

// Resolution is where a workload's queue leads: the ClusterQueue that
// admits it, or why none does.
type Resolution struct {
	// ClusterQueue is the LocalQueue's ClusterQueue, when the LocalQueue
	// exists (also when the ClusterQueue does not).
	ClusterQueue string
	// Reason is empty when the ClusterQueue exists and admits the
	// namespace; Message then is empty too.
	Reason, Message string
}

// OK says whether the ClusterQueue admits the workload.
func (r Resolution) OK() bool { return r.Reason == "" }

// Resolve follows the LocalQueue named name in namespace ns to its
// ClusterQueue. lq and cq are the LocalQueue and its ClusterQueue as read,
// nil when they do not exist; nsLabels are the namespace's labels.
func Resolve(ns, name string, nsLabels map[string]string, lq *strata.LocalQueue, cq *strata.ClusterQueue) Resolution {
	if lq == nil {
		return Resolution{Reason: ReasonLocalQueueNotFound, Message: fmt.Sprintf(
			"LocalQueue %q does not exist in namespace %q; create it (a LocalQueue whose spec.clusterQueue names a ClusterQueue) or fix the %s label",
			name, ns, strata.QueueNameLabel)}
	}
	r := Resolution{ClusterQueue: lq.Spec.ClusterQueue}
	if cq == nil {
		r.Reason, r.Message = ReasonClusterQueueNotFound, fmt.Sprintf(
			"ClusterQueue %q of LocalQueue %q does not exist; ask an admin to create it, or point the LocalQueue at another ClusterQueue",
			lq.Spec.ClusterQueue, ns+"/"+name)
		return r
	}
	if cq.Spec.NamespaceSelector == nil {
		r.Reason, r.Message = ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q admits no namespace (it has no namespaceSelector)", cq.Name)
		return r
	}
	sel, err := metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	if err != nil {
		r.Reason, r.Message = ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q has an invalid namespaceSelector: %v", cq.Name, err)
		return r
	}
	if !sel.Matches(labels.Set(nsLabels)) {
		r.Reason, r.Message = ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q does not admit namespace %q (namespaceSelector %s)", cq.Name, ns, sel)
	}
	return r
}

// Status is a LocalQueue's status given its workloads' counts and its
// ClusterQueue (nil when it does not exist); the other conditions of old
// are kept, and the Active condition's transition time when its status
// stays.
func Status(old *strata.LocalQueueStatus, lq *strata.LocalQueue, cq *strata.ClusterQueue, c Counts) strata.LocalQueueStatus {
	st := old.DeepCopy()
	st.PendingWorkloads, st.AdmittedWorkloads, st.ReservingWorkloads = c.Pending, c.Admitted, c.Reserving
	clusterQueue := lq.Spec.ClusterQueue
	active := metav1.Condition{Type: strata.LocalQueueActive, Status: metav1.ConditionTrue, Reason: strata.LocalQueueReady,
		Message: fmt.Sprintf("workloads are admitted by ClusterQueue %s", clusterQueue)}
	// Its own stopPolicy first (as Kueue), then its ClusterQueue.
	stop := StopOf(lq, cq)
	switch {
	case strata.Stopped(lq.Spec.StopPolicy):
		active = metav1.Condition{Type: strata.LocalQueueActive, Status: metav1.ConditionFalse, Reason: strata.QueueStopped, Message: stop.Message}
	case cq == nil:
		active = metav1.Condition{Type: strata.LocalQueueActive, Status: metav1.ConditionFalse, Reason: strata.LocalQueueClusterQueueMissing,
			Message: fmt.Sprintf("ClusterQueue %q does not exist; the queue's workloads wait until it is created", clusterQueue)}
	case stop.Stopped:
		active = metav1.Condition{Type: strata.LocalQueueActive, Status: metav1.ConditionFalse, Reason: strata.QueueStopped, Message: stop.Message}
	}
	meta.SetStatusCondition(&st.Conditions, active)
	return *st
}

// Stop is what the stopPolicy of a workload's LocalQueue and ClusterQueue
// (Kueue's field) does to it.
type Stop struct {
	// Stopped: the workload is not admitted (Hold or HoldAndDrain on
	// either queue, or its ClusterQueue being deleted); Message says
	// which queue, for its pending condition.
	Stopped bool
	Message string
	// Drain: an admitted workload is evicted (HoldAndDrain on either
	// queue).
	Drain bool
	// Terminating: what holds it is its ClusterQueue being deleted, not
	// a stopPolicy.
	Terminating bool
	// Reason is the Evicted reason of a workload the stop takes back
	// (strata.EvictedBy*Stopped): the LocalQueue's when it drains, else
	// the ClusterQueue's when it drains; without a drain, the queue's
	// that stops it (the LocalQueue's first). Empty when not stopped.
	Reason string
}

// StopOf is what the stopPolicy of lq and cq (either may be nil), and
// cq's deletion, do to their workloads.
func StopOf(lq *strata.LocalQueue, cq *strata.ClusterQueue) Stop {
	var s Stop
	switch {
	case lq != nil && strata.Stopped(lq.Spec.StopPolicy):
		s.Stopped, s.Reason = true, strata.EvictedByLocalQueueStopped
		s.Message = fmt.Sprintf("LocalQueue %s is stopped (stopPolicy %s); its workloads wait until the policy is None", lq.Name, *lq.Spec.StopPolicy)
	case cq != nil && strata.Stopped(cq.Spec.StopPolicy):
		s.Stopped, s.Reason = true, strata.EvictedByClusterQueueStopped
		s.Message = fmt.Sprintf("ClusterQueue %s is stopped (stopPolicy %s); its workloads wait until the policy is None", cq.Name, *cq.Spec.StopPolicy)
	case cq != nil && cq.DeletionTimestamp != nil:
		// Being deleted (Kueue's terminating queue): it admits nothing
		// more, and its admitted workloads run on.
		s.Stopped, s.Terminating, s.Reason = true, true, strata.EvictedByClusterQueueStopped
		s.Message = fmt.Sprintf("ClusterQueue %s is being deleted: it admits no more workloads; its workloads wait for a ClusterQueue of that name", cq.Name)
	}
	switch {
	case lq != nil && strata.Drains(lq.Spec.StopPolicy):
		s.Drain, s.Reason = true, strata.EvictedByLocalQueueStopped
	case cq != nil && strata.Drains(cq.Spec.StopPolicy):
		s.Drain, s.Reason = true, strata.EvictedByClusterQueueStopped
	}
	return s
}

// DrainMessage is the Evicted message of a workload a stopped queue
// evicts (policy: the stopPolicy of the queue reason names).
func DrainMessage(reason string, policy strata.StopPolicy, lq, cq string) string {
	if reason == strata.EvictedByLocalQueueStopped {
		return fmt.Sprintf("evicted: LocalQueue %s is stopped (stopPolicy %s); the workload waits in it until the policy is None", lq, policy)
	}
	return fmt.Sprintf("evicted: ClusterQueue %s is stopped (stopPolicy %s); the workload waits in it until the policy is None", cq, policy)
}

// Counts are a LocalQueue's workloads.
type Counts struct{ Pending, Admitted, Reserving int32 }

// Count adds a workload to the counts of its LocalQueue: reserving while
// it holds an admission (quota reserved) and has not finished, admitted
// too unless it waits for its AdmissionChecks, pending while it has
// neither.
func (c *Counts) Count(wl *strata.Workload) {
	switch {
	case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
	case wl.Status.Admission != nil:
		c.Reserving++
		if !workload.AwaitingChecks(wl) {
			c.Admitted++
		}
	default:
		c.Pending++
	}
}
