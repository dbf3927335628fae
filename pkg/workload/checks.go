package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// ChecksOf are the AdmissionChecks a workload admitted on flavors by cq
// must pass (Kueue's): every check of spec.admissionChecks, and each of
// spec.admissionChecksStrategy whose onFlavors is empty or names one of
// flavors. In the queue's order, without duplicates.
func ChecksOf(cq *strata.ClusterQueue, flavors []string) []string {
	if cq == nil {
		return nil
	}
	names := slices.Clone(cq.Spec.AdmissionChecks)
	if s := cq.Spec.AdmissionChecksStrategy; s != nil {
		for _, r := range s.AdmissionChecks {
			if len(r.OnFlavors) == 0 || slices.ContainsFunc(flavors, func(f string) bool { return slices.Contains(r.OnFlavors, f) }) {
				names = append(names, r.Name)
			}
		}
	}
	out := names[:0]
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// QueueChecks are every AdmissionCheck a ClusterQueue names, whatever the
// flavor: the checks that must exist and be Active for it to admit.
func QueueChecks(cq *strata.ClusterQueue) []string {
	var flavors []string
	if s := cq.Spec.AdmissionChecksStrategy; s != nil {
		for _, r := range s.AdmissionChecks {
			flavors = append(flavors, r.OnFlavors...)
		}
	}
	return ChecksOf(cq, flavors)
}

// AdmissionFlavors are the flavors of a workload's admission, one each.
func AdmissionFlavors(a *strata.Admission) []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, psa := range a.PodSetAssignments {
		if !slices.Contains(out, psa.Flavor) {
			out = append(out, psa.Flavor)
		}
	}
	return out
}

// AwaitingChecks says whether a workload holds a quota reservation whose
// AdmissionChecks are not all Ready, or whose delayed topology assignment
// is not made yet (DelayedPodSets): it may not start. A workload without
// checks (its queue has none) never waits for them, nor does one admitted
// (Admitted=True): a check that goes back to Pending after the admission,
// or one added to its queue since, does not take the admission back, as
// in Kueue (only Retry and Rejected do).
func AwaitingChecks(wl *strata.Workload) bool {
	if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
		return false
	}
	if len(DelayedPodSets(wl)) > 0 {
		return true
	}
	return slices.ContainsFunc(wl.Status.AdmissionChecks, func(s strata.AdmissionCheckState) bool { return s.State != strata.CheckStateReady })
}

// PendingChecks is the states of names, each Pending at now: those a new
// reservation starts with. A check already Pending keeps its time and
// message; one in another state keeps its message.
func PendingChecks(old []strata.AdmissionCheckState, names []string, now time.Time) []strata.AdmissionCheckState {
	if len(names) == 0 {
		return nil
	}
	out := make([]strata.AdmissionCheckState, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(old, func(s strata.AdmissionCheckState) bool { return s.Name == n })
		switch {
		case i < 0:
			out = append(out, strata.AdmissionCheckState{Name: n, State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(now)})
		case old[i].State == strata.CheckStatePending:
			out = append(out, *old[i].DeepCopy())
		default:
			// Reserved again before its release was written
			// (ReleaseChecks): Pending as that would make it, its message
			// kept, which a check's controller may read to tell what it
			// acted on (the ProvisioningRequest check does).
			out = append(out, strata.AdmissionCheckState{Name: n, State: strata.CheckStatePending, Message: old[i].Message, LastTransitionTime: metav1.NewTime(now)})
		}
	}
	return out
}

// SyncChecks brings a reserved workload's check states to names (its
// queue's checks for its flavors now): a check added to the queue is
// Pending, one removed goes, the others keep their states. It returns
// whether anything changed.
func SyncChecks(wl *strata.Workload, names []string, now time.Time) bool {
	var out []strata.AdmissionCheckState
	for _, n := range names {
		if i := slices.IndexFunc(wl.Status.AdmissionChecks, func(s strata.AdmissionCheckState) bool { return s.Name == n }); i >= 0 {
			out = append(out, wl.Status.AdmissionChecks[i])
			continue
		}
		out = append(out, strata.AdmissionCheckState{Name: n, State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(now)})
	}
	same := len(out) == len(wl.Status.AdmissionChecks)
	for i := 0; same && i < len(out); i++ {
		same = out[i].Name == wl.Status.AdmissionChecks[i].Name && out[i].State == wl.Status.AdmissionChecks[i].State
	}
	if same {
		return false
	}
	wl.Status.AdmissionChecks = out
	return true
}

// CheckVerdict is what a reserved workload's check states call for.
type CheckVerdict int

// The verdicts, by precedence: a rejection beats a retry, which beats
// waiting.
const (
	// ChecksWait: some check is Pending (or none decided).
	ChecksWait CheckVerdict = iota
	// ChecksReady: every check is Ready: the workload is admitted.
	ChecksReady
	// ChecksRetry: a check asks for a retry: the reservation is taken
	// back and the workload queued again.
	ChecksRetry
	// ChecksRejected: a check rejects the workload: it is deactivated.
	ChecksRejected
)

// Verdict says what wl's check states call for, and a message naming the
// checks that decide it ("check prov: no capacity in zone a").
func Verdict(states []strata.AdmissionCheckState) (CheckVerdict, string) {
	pick := func(state strata.CheckState) string {
		var parts []string
		for _, s := range states {
			if s.State == state {
				part := "admission check " + s.Name
				if s.Message != "" {
					part += ": " + s.Message
				}
				parts = append(parts, part)
			}
		}
		return strings.Join(parts, "; ")
	}
	if m := pick(strata.CheckStateRejected); m != "" {
		return ChecksRejected, m
	}
	if m := pick(strata.CheckStateRetry); m != "" {
		return ChecksRetry, m
	}
	if len(states) == 0 {
		return ChecksReady, ""
	}
	if m := pick(strata.CheckStatePending); m != "" {
		return ChecksWait, m
	}
	return ChecksReady, pick(strata.CheckStateReady)
}

// ReservedAt is when the workload's current reservation began: its
// QuotaReserved condition's transition where its queue has checks, else
// its Admitted condition's (admitted at once). Zero when unknown.
func ReservedAt(wl *strata.Workload) time.Time {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// ReserveForChecks turns an admission being written on wl (its
// status.admission set, its Admitted condition True with message admitted)
// into a quota reservation that waits for checks: QuotaReserved=True with
// that message, Admitted=False (WaitingForAdmissionChecks), and each check
// Pending at now.
func ReserveForChecks(wl *strata.Workload, checks []string, now time.Time) {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	message := ""
	if c != nil {
		message = c.Message
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionTrue,
		Reason: "QuotaReserved", Message: strings.Replace(message, "admitted by", "quota reserved by", 1)})
	// This reservation's time, even over a True left by an earlier one.
	meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved).LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.WaitingForAdmissionChecks, Message: fmt.Sprintf("quota reserved; waiting for admission checks %s to be Ready", strings.Join(checks, ", ")),
		LastTransitionTime: metav1.NewTime(now)})
	wl.Status.AdmissionChecks = PendingChecks(wl.Status.AdmissionChecks, checks, now)
}

// ReleaseChecks marks a workload whose reservation is taken back:
// QuotaReserved False and every check Pending again (Kueue resets the
// states at an eviction). It returns whether wl changed.
func ReleaseChecks(wl *strata.Workload, now time.Time) bool {
	changed := false
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved); c != nil && c.Status != metav1.ConditionFalse {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
			Reason: "Pending", Message: "no quota reserved", LastTransitionTime: metav1.NewTime(now)})
		changed = true
	}
	for i := range wl.Status.AdmissionChecks {
		if s := &wl.Status.AdmissionChecks[i]; s.State != strata.CheckStatePending {
			s.State, s.LastTransitionTime, s.PodSetUpdates = strata.CheckStatePending, metav1.NewTime(now), nil
			changed = true
		}
	}
	return changed
}

// PodSetUpdateOf merges what the checks' podSetUpdates add to pod set
// podSet's pods, a later check's value of a key winning; nil when none.
func PodSetUpdateOf(states []strata.AdmissionCheckState, podSet string) *strata.PodSetUpdate {
	var out *strata.PodSetUpdate
	put := func(m *map[string]string, from map[string]string) {
		for k, v := range from {
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[k] = v
		}
	}
	for _, st := range states {
		for _, u := range st.PodSetUpdates {
			if u.Name != podSet {
				continue
			}
			if out == nil {
				out = &strata.PodSetUpdate{Name: podSet}
			}
			put(&out.Labels, u.Labels)
			put(&out.Annotations, u.Annotations)
			put(&out.NodeSelector, u.NodeSelector)
			out.Tolerations = append(out.Tolerations, u.Tolerations...)
		}
	}
	return out
}
