package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// KEP-2724's support for ProvisioningRequests: on a flavor a
// ProvisioningRequest check applies to, the scheduler reserves quota only
// (each pod set's delayedTopologyRequest Pending, no topologyAssignment);
// once every check is Ready, its second pass assigns the topology on the
// same flavor, counting the nodes provisioned meanwhile, and admits the
// workload in the same write.

// DelayedPodSets are the pod sets of a reserved workload whose topology
// assignment waits for the second pass: delayedTopologyRequest Pending and
// no topologyAssignment.
func DelayedPodSets(wl *strata.Workload) []string {
	if wl.Status.Admission == nil {
		return nil
	}
	var out []string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment == nil && psa.DelayedTopologyRequest != nil && *psa.DelayedTopologyRequest == strata.DelayedTopologyRequestPending {
			out = append(out, psa.Name)
		}
	}
	return out
}

// NeedsSecondPass says whether the scheduler's second pass is due for wl:
// its quota is reserved, every AdmissionCheck is Ready, and a pod set's
// topology assignment is still delayed. A finished or deactivated
// workload is not placed.
func NeedsSecondPass(wl *strata.Workload) bool {
	if len(DelayedPodSets(wl)) == 0 || !IsActive(wl) || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return false
	}
	v, _ := Verdict(wl.Status.AdmissionChecks)
	return v == ChecksReady
}

// AdmitChecked marks a reserved workload whose checks are all Ready (and
// whose topology is assigned) admitted: its job starts. checks are the
// queue's checks for its flavors, named in the message. It returns whether
// wl changed.
func AdmitChecked(wl *strata.Workload, checks []string, now time.Time) bool {
	if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
		return false
	}
	message := "admitted"
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved); c != nil && c.Message != "" {
		message = strings.Replace(c.Message, "quota reserved by", "admitted by", 1)
	}
	if len(checks) > 0 {
		message += "; admission checks " + strings.Join(checks, ", ") + " Ready"
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue,
		Reason: "Admitted", Message: message, LastTransitionTime: metav1.NewTime(now)})
	return true
}

// WithCheckUpdates is a copy of wl whose pod templates carry what its Ready
// checks' podSetUpdates add (node selector, tolerations, labels,
// annotations): the second pass places the pods as they will run, on the
// nodes a ProvisioningRequest provisioned for them.
func WithCheckUpdates(wl *strata.Workload) *strata.Workload {
	var ready []strata.AdmissionCheckState
	for _, s := range wl.Status.AdmissionChecks {
		if s.State == strata.CheckStateReady {
			ready = append(ready, s)
		}
	}
	out := wl
	for i := range wl.Spec.PodSets {
		u := PodSetUpdateOf(ready, wl.Spec.PodSets[i].Name)
		if u == nil {
			continue
		}
		if out == wl {
			out = wl.DeepCopy()
		}
		spec := &out.Spec.PodSets[i].Template.Spec
		for k, v := range u.NodeSelector {
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			spec.NodeSelector[k] = v
		}
		for _, t := range u.Tolerations {
			if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
				spec.Tolerations = append(spec.Tolerations, t)
			}
		}
	}
	return out
}

// Second pass retries (KEP-2724's error handling): the nodes a
// ProvisioningRequest provisioned may stay NotReady for a few minutes
// (drivers being installed); the reservation is kept and the placement
// tried again after SecondPassBase, doubling, until SecondPassLimit has
// passed since the first failure: then the workload is evicted.
const (
	SecondPassBase  = 10 * time.Second
	SecondPassLimit = 5 * time.Minute
)

// SecondPassRetry decides what follows a failed second pass at now, the
// attempts-th failure in a row, the first of which was at first: the time
// of the next attempt, or evict once the limit has passed. The last
// attempt is made at the limit itself.
func SecondPassRetry(first, now time.Time, attempts int) (next time.Time, evict bool) {
	deadline := first.Add(SecondPassLimit)
	if !now.Before(deadline) {
		return time.Time{}, true
	}
	delay := SecondPassBase << min(max(attempts-1, 0), 16)
	next = now.Add(delay)
	if next.After(deadline) {
		next = deadline
	}
	return next, false
}

// EvictSecondPass takes back the reservation of a workload whose delayed
// topology assignment failed until the limit (why, the placement's last
// reason): Evicted and Admitted say so, every check is Pending again (a
// new reservation asks for new capacity) and it waits in its queue again
// at once.
func EvictSecondPass(wl *strata.Workload, why string, now time.Time) {
	message := fmt.Sprintf("evicted: its delayed topology assignment failed for %s after every admission check was Ready: %s; its quota reservation is taken back and it waits in its queue again",
		SecondPassLimit, why)
	AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, now)
	wl.Status.Admission = nil
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: strata.EvictedByTopologyAssignment, Message: message, LastTransitionTime: t})
	meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted).LastTransitionTime = t
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.EvictedByTopologyAssignment, Message: message, LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
		Reason: "Pending", Message: "no quota reserved", LastTransitionTime: t})
	SetRequeued(wl, metav1.ConditionTrue, strata.EvictedByTopologyAssignment, message, now)
	for i := range wl.Status.AdmissionChecks {
		s := &wl.Status.AdmissionChecks[i]
		s.State, s.LastTransitionTime, s.PodSetUpdates = strata.CheckStatePending, t, nil
	}
}
