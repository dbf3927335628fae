// Package dispatch is the hub's side of the dispatch contract and its
// placement loop. The contract (docs/hub.md, "Dispatch contract"): a hub
// Workload is dispatched to one worker at a time, as a copy of its job (a
// Job, a JobSet: any kind of pkg/jobs) labelled with the hub's origin, the
// hub Workload's UID and a dispatch generation, its flavor pinned; the hub reserves the placement in its
// view of that worker until the worker's summary lists the dispatch. The
// record of every dispatch is the hub Workload's status.placement, written
// first in the dispatch journal (journal.go), so a restarted hub finds
// what it sent.
package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/workload"
)

// Key names a dispatch: "<hub workload UID>/<dispatch generation>", as
// summaries list it in status.dispatches and reservations are held.
func Key(uid types.UID, generation int64) string {
	return string(uid) + "/" + strconv.FormatInt(generation, 10)
}

// Placed returns where a hub Workload is dispatched now; ok is false when
// it is not.
func Placed(wl *strata.Workload) (cluster, flavor string, generation int64, ok bool) {
	p := wl.Status.Placement
	if p == nil || p.Cluster == "" {
		return "", "", 0, false
	}
	return p.Cluster, p.Flavor, p.DispatchGeneration, true
}

// Generation is the hub Workload's last dispatch generation (0: never
// dispatched).
func Generation(wl *strata.Workload) int64 {
	if wl.Status.Placement == nil {
		return 0
	}
	return wl.Status.Placement.DispatchGeneration
}

// maxAttempts bounds the attempts a hub Workload's status keeps (the
// API's limit).
const maxAttempts = 16

// maxBackoffDoublings caps the backoff at base·2⁹.
const maxBackoffDoublings = 9

// Backoffs returns, per worker that refused the workload (Rejected or
// TimedOut), until when it gets no new copy of it: base after the first
// refusal, doubled with each further one. Workers whose backoff ended by
// now are left out.
func Backoffs(wl *strata.Workload, base time.Duration, now time.Time) map[string]time.Time {
	return BackoffsExcept(wl, base, now, func(*strata.PlacementAttempt) bool { return false })
}

// BackoffsExcept is Backoffs without the refusals skip says to leave out.
func BackoffsExcept(wl *strata.Workload, base time.Duration, now time.Time, skip func(*strata.PlacementAttempt) bool) map[string]time.Time {
	if wl.Status.Placement == nil {
		return nil
	}
	refusals := map[string]int{}
	last := map[string]time.Time{}
	for i := range wl.Status.Placement.Attempts {
		a := &wl.Status.Placement.Attempts[i]
		if a.Result != strata.PlacementRejected && a.Result != strata.PlacementTimedOut || skip(a) {
			continue
		}
		refusals[a.Cluster]++
		if a.Time.After(last[a.Cluster]) {
			last[a.Cluster] = a.Time.Time
		}
	}
	out := map[string]time.Time{}
	for cluster, n := range refusals {
		until := last[cluster].Add(base << min(n-1, maxBackoffDoublings))
		if until.After(now) {
			out[cluster] = until
		}
	}
	return out
}

// LastRefusal is the message of the workload's last refusal by cluster
// (its attempt's), "" when it has none.
func LastRefusal(wl *strata.Workload, cluster string) string {
	if wl.Status.Placement == nil {
		return ""
	}
	attempts := wl.Status.Placement.Attempts
	for i := len(attempts) - 1; i >= 0; i-- {
		if a := attempts[i]; a.Cluster == cluster && (a.Result == strata.PlacementRejected || a.Result == strata.PlacementTimedOut) {
			return a.Message
		}
	}
	return ""
}

// RecordDispatch sets the Workload's placement to a new dispatch to
// cluster and flavor, one generation after the last, and records the
// attempt with the decision's reason; now is the dispatch time the copy
// carries. It returns the new generation.
func RecordDispatch(status *strata.WorkloadStatus, cluster, flavor, reason string, now time.Time) int64 {
	if status.Placement == nil {
		status.Placement = &strata.Placement{}
	}
	p := status.Placement
	p.Cluster, p.Flavor = cluster, flavor
	p.DispatchTime = ptr.To(metav1.NewMicroTime(now))
	p.DispatchGeneration++
	p.PreemptUpTo, p.TopologyHint, p.PodSetCounts, p.PodSetFlavors = nil, "", nil, nil
	// The hub's own quota reservation, held while its ClusterQueue's
	// admission checks were decided (reserve), becomes the dispatch: the
	// admission recorded from now on is the worker's.
	status.Admission = nil
	meta.RemoveStatusCondition(&status.Conditions, strata.WorkloadQuotaReserved)
	addAttempt(p, strata.PlacementAttempt{Cluster: cluster, Flavor: flavor, DispatchGeneration: p.DispatchGeneration,
		Result: strata.PlacementDispatched, Time: metav1.NewTime(now), Message: truncateAttempt(reason)})
	// Transitions at the dispatch's time (the hub's clock), not when the
	// record is written: a dispatch journalled first reaches the status
	// later (Journal), with the same record.
	setDispatched(status, reason, now)
	// Any take-back of an earlier dispatch is over, and so is an eviction
	// at the hub (Evicting): True again would take this copy back.
	meta.RemoveStatusCondition(&status.Conditions, strata.WorkloadCopyGoing)
	for _, t := range []string{strata.WorkloadEvicted, strata.WorkloadPreempted} {
		if c := meta.FindStatusCondition(status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: ReasonDispatched,
				Message: truncate(fmt.Sprintf("dispatched again, to %s", cluster)), LastTransitionTime: metav1.NewTime(now)})
		}
	}
	return p.DispatchGeneration
}

// setDispatched sets the Admitted=False condition of the current
// dispatch: where, and why (reason).
func setDispatched(status *strata.WorkloadStatus, reason string, now time.Time) {
	p := status.Placement
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: ReasonDispatched, Message: truncate(fmt.Sprintf("dispatched to %s (%s); waiting for the worker to admit it. %s", p.Cluster, FlavorWords(p), reason)),
		LastTransitionTime: metav1.NewTime(now)})
}

// RecordSplit notes on the current dispatch (RecordDispatch's) that its
// pod sets are placed on different flavors of its cluster (podSetFlavors,
// each pod set's; none: all on the dispatch's flavor), and says so in the
// Admitted condition.
func RecordSplit(status *strata.WorkloadStatus, podSetFlavors []strata.PodSetFlavor) {
	p := status.Placement
	if p == nil || len(podSetFlavors) == 0 {
		return
	}
	p.PodSetFlavors = slices.Clone(podSetFlavors)
	if c := meta.FindStatusCondition(status.Conditions, strata.WorkloadAdmitted); c != nil && c.Reason == ReasonDispatched {
		setDispatched(status, ChoiceReason(&strata.Workload{Status: *status}), c.LastTransitionTime.Time)
	}
}

// FlavorWords names a placement's flavor for messages
// (workload.FlavorWords).
func FlavorWords(p *strata.Placement) string { return workload.FlavorWords(p) }

// ChoiceReason is why the hub chose the current dispatch's worker, as
// RecordDispatch noted it in the attempt (kept when the admission is
// recorded); "" when there is no current dispatch.
func ChoiceReason(wl *strata.Workload) string {
	p := wl.Status.Placement
	if p == nil {
		return ""
	}
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		if a := p.Attempts[i]; a.DispatchGeneration == p.DispatchGeneration && (a.Result == strata.PlacementDispatched || a.Result == strata.PlacementAdmitted) {
			return a.Message
		}
	}
	return ""
}

// RecordOutcome ends the current dispatch with result: the copy was
// refused, timed out, is unreachable or was taken back. reason is the
// Workload's condition reason, cause the attempt's (the worker's refusal
// reason, "" when none is known). The placement is cleared (its
// generation stays), as is the admission the worker gave.
func RecordOutcome(status *strata.WorkloadStatus, result strata.PlacementResult, reason, cause, message string, now time.Time) {
	p := status.Placement
	if p == nil || p.Cluster == "" {
		return
	}
	a := strata.PlacementAttempt{Cluster: p.Cluster, Flavor: p.Flavor, DispatchGeneration: p.DispatchGeneration, Result: result,
		Time: metav1.NewTime(now), Reason: truncateReason(cause), Message: truncateAttempt(message)}
	if n := len(p.Attempts); n > 0 && p.Attempts[n-1].DispatchGeneration == p.DispatchGeneration && p.Attempts[n-1].Cluster == p.Cluster {
		p.Attempts[n-1] = a
	} else {
		addAttempt(p, a)
	}
	p.Cluster, p.Flavor, p.DispatchTime, p.PreemptUpTo, p.TopologyHint, p.PodSetCounts, p.PodSetFlavors = "", "", nil, nil, "", nil, nil
	status.Admission = nil
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: reason, Message: truncate(fmt.Sprintf("%s: %s", a.Cluster, message))})
}

// RecordAdmission copies the worker's admission of the current dispatch
// into the hub Workload's status, under the hub's ClusterQueue (the one
// recorded first, once there is one), with the copy's reclaimable pods;
// false when nothing changed.
func RecordAdmission(status *strata.WorkloadStatus, clusterQueue string, copyWL *strata.Workload, now time.Time) bool {
	p := status.Placement
	if p == nil || p.Cluster == "" || copyWL.Status.Admission == nil {
		return false
	}
	admission := copyWL.Status.Admission.DeepCopy()
	admission.ClusterQueue = clusterQueue
	if status.Admission != nil && status.Admission.ClusterQueue != "" {
		// An admission stays with the ClusterQueue that made it, as in
		// Kueue: a LocalQueue pointed elsewhere since, or deleted, does
		// not move its charge (see chargedQueue).
		admission.ClusterQueue = status.Admission.ClusterQueue
	}
	changed := !equality.Semantic.DeepEqual(status.Admission, admission)
	if c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		if i := strings.Index(c.Message, strata.AdmittedAfterPreempting); i >= 0 {
			changed = NotePreemption(status, p.Cluster, c.Message[i:]) || changed
		}
	}
	status.Admission = admission
	// The finished part of the copy (Kueue's reclaimable pods) frees its
	// quota at the hub as it does on the worker.
	if !equality.Semantic.DeepEqual(status.ReclaimablePods, copyWL.Status.ReclaimablePods) {
		status.ReclaimablePods = slices.Clone(copyWL.Status.ReclaimablePods)
		changed = true
	}
	if n := len(p.Attempts); n > 0 && p.Attempts[n-1].DispatchGeneration == p.DispatchGeneration && p.Attempts[n-1].Result != strata.PlacementAdmitted {
		p.Attempts[n-1].Result, p.Attempts[n-1].Time = strata.PlacementAdmitted, metav1.NewTime(now)
		changed = true
	}
	message := fmt.Sprintf("admitted on %s, %s", p.Cluster, FlavorWords(p))
	switch {
	case len(workload.DelayedPodSets(copyWL)) > 0:
		// KEP-2724's delayed topology assignment there.
		message += "; its quota is reserved there, and its topology is assigned and its job starts once the nodes the worker's ProvisioningRequest check asks the cluster autoscaler for are provisioned"
	case workload.AwaitingChecks(copyWL):
		// Its quota reserved there, as MultiKueue's manager takes a
		// worker's reservation: its job starts once the worker queue's
		// AdmissionChecks are Ready.
		message += "; its quota is reserved there, and its job starts once the worker's admission checks are Ready"
	}
	if meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue,
		Reason: ReasonAdmitted, Message: truncate(message), LastTransitionTime: metav1.NewTime(now)}) {
		changed = true
	}
	return changed
}

// WorkerPreempting is the reason of a copy's Admitted=False condition
// while the worker's agent preempts for it (the agent's
// scheduler.ReasonPreempting): its message names the victims.
const WorkerPreempting = "Preempting"

// NotePreemption keeps what the worker reported preempting for the
// current dispatch (message, the copy's condition's) in that dispatch's
// attempt, once: the Admitted condition moves on when the copy is
// admitted, the attempt stays. It returns whether it changed anything.
func NotePreemption(status *strata.WorkloadStatus, cluster, message string) bool {
	p := status.Placement
	if p == nil || p.Cluster == "" {
		return false
	}
	n := len(p.Attempts)
	if n == 0 || p.Attempts[n-1].DispatchGeneration != p.DispatchGeneration || strings.Contains(p.Attempts[n-1].Message, preemptedNote) {
		return false
	}
	a := &p.Attempts[n-1]
	// The note stays whole within the API's bound, so that it is found
	// again and added once.
	note := intake.Truncate(fmt.Sprintf("%s%s: %s", preemptedNote, cluster, message), maxAttemptMessage/2)
	a.Message = intake.Truncate(a.Message, maxAttemptMessage-len(note)) + note
	return true
}

// preemptedNote starts what NotePreemption adds to an attempt's message.
const preemptedNote = "; the worker preempted for it on "

func addAttempt(p *strata.Placement, a strata.PlacementAttempt) {
	p.Attempts = append(p.Attempts, a)
	if n := len(p.Attempts); n > maxAttempts {
		p.Attempts = p.Attempts[n-maxAttempts:]
	}
}

// Reasons of the hub Workload's Admitted condition.
const (
	ReasonPending    = "Pending"
	ReasonNeverFits  = "NoClusterFits"
	ReasonDispatched = "Dispatched"
	ReasonAdmitted   = "Admitted"
	ReasonRejected   = "Rejected"
	ReasonTimedOut   = "AdmissionTimedOut"
	ReasonSuspended  = "Suspended"
	// ReasonDeactivated: the hub Workload's spec.active is false (the
	// user's hold, Kueue's deactivation); it is dispatched once it is
	// true again.
	ReasonDeactivated = "Deactivated"
)

// maxMessage is metav1.Condition's limit on a message.
const maxMessage = 32768

// truncateReason bounds an attempt's reason to what the API takes.
func truncateReason(r string) string {
	if len(r) <= maxAttemptReason {
		return r
	}
	return r[:maxAttemptReason]
}

// maxAttemptReason is the API's bound on an attempt's reason.
const maxAttemptReason = 128

// maxAttemptMessage is the API's bound on an attempt's message: a longer
// one (a worker's whole /readyz answer in an unreachable reason) made
// every status write of the Workload invalid, and the Workload stuck.
const maxAttemptMessage = 1024

// truncateAttempt bounds an attempt's message to what the API takes, on a
// character boundary.
func truncateAttempt(m string) string { return intake.Truncate(m, maxAttemptMessage) }

func truncate(m string) string {
	if len(m) <= maxMessage {
		return m
	}
	return m[:maxMessage-3] + "..."
}

// HubJob returns the hub job (of any kind) that controls a hub Workload,
// nil when there is none (any more).
func HubJob(ctx context.Context, c client.Reader, wl *strata.Workload, opts ...client.GetOption) (jobs.Job, error) {
	owner := metav1.GetControllerOfNoCopy(wl)
	k := jobs.KindOf(kinds.Hub, owner)
	if k == nil {
		return nil, nil
	}
	obj := k.NewObject()
	if err := c.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}, obj, opts...); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if obj.GetUID() != owner.UID {
		return nil, nil
	}
	j, _ := k.Adapt(obj)
	return j, nil
}

// NewCopy is the copy of hub job (of any kind) that the given dispatch
// generation of hub Workload wl sends to a worker: the object the kind
// gives a worker (same name, namespace and spec, suspended, see
// jobs.Job.ForWorker), in the worker's LocalQueue queue, labelled with
// the hub's origin, the Workload's UID and the generation, its flavor
// pinned and its dispatch time noted (the order in which the worker's
// agent admits copies of equal priority), and with hint, when not empty,
// as its topology hint (the placement the hub reserved, see
// workload.EncodeTopologyHints), with how many times its earlier
// copies' pods were not ready in time, when they were, and with what is
// left of the Workload's maximum execution time, when it has one. A kind that can
// (jobs.GatedStart: a batch/v1 Job) is sent running instead, its pods
// held by the topology scheduling gate until the worker's agent admits it
// and releases them: the agent then writes nothing to the copy itself.
func NewCopy(job jobs.Job, wl *strata.Workload, origin, queue, flavor string, generation int64, hint string) jobs.Job {
	c := job.ForWorker()
	obj := c.Object()
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[strata.OriginLabel] = origin
	labels[strata.HubWorkloadUIDLabel] = string(wl.UID)
	labels[strata.DispatchGenerationLabel] = strconv.FormatInt(generation, 10)
	labels[strata.QueueNameLabel] = queue
	// One flavor for the copy, or, when the hub placed its pod sets on
	// different flavors, each pod set's.
	delete(annotations, strata.PodSetFlavorsAnnotation)
	if p := wl.Status.Placement; p != nil && len(p.PodSetFlavors) > 0 {
		delete(annotations, strata.FlavorAnnotation)
		annotations[strata.PodSetFlavorsAnnotation] = workload.FormatPodSetFlavors(p.PodSetFlavors)
	} else {
		annotations[strata.FlavorAnnotation] = flavor
	}
	delete(annotations, strata.DispatchTimeAnnotation)
	if p := wl.Status.Placement; p != nil && p.DispatchTime != nil {
		annotations[strata.DispatchTimeAnnotation] = p.DispatchTime.UTC().Format(metav1.RFC3339Micro)
	}
	if _, grouped := job.Kind().(jobs.GroupedWorkloads); !grouped {
		delete(annotations, strata.DispatchWorkloadsAnnotation) // a user's, not the hub's
	}
	delete(annotations, strata.PreemptUpToAnnotation)
	if p := wl.Status.Placement; p != nil && p.PreemptUpTo != nil {
		annotations[strata.PreemptUpToAnnotation] = strconv.FormatInt(int64(*p.PreemptUpTo), 10)
	}
	delete(annotations, strata.PodSetCountsAnnotation)
	if p := wl.Status.Placement; p != nil && len(p.PodSetCounts) > 0 {
		annotations[strata.PodSetCountsAnnotation] = workload.FormatPodSetCounts(p.PodSetCounts)
	}
	if m := wl.Spec.MaximumExecutionTimeSeconds; m != nil {
		// What is left of it: the time earlier copies were admitted is
		// counted (Kueue's manager counts its Workload's admissions).
		delete(labels, strata.KueueMaxExecTimeSecondsLabel)
		labels[strata.MaxExecTimeSecondsLabel] = strconv.FormatInt(max(int64(*m)-int64(workload.Accumulated(&wl.Status)/time.Second), 1), 10)
	}
	delete(annotations, strata.RequeueCountAnnotation)
	if n := workload.RequeueCount(wl); n > 0 {
		annotations[strata.RequeueCountAnnotation] = strconv.FormatInt(int64(n), 10)
	}
	delete(annotations, strata.CopySignatureAnnotation) // the hub signs the copy as sent (Sign)
	delete(annotations, strata.TopologyHintAnnotation)
	if hint != "" {
		annotations[strata.TopologyHintAnnotation] = hint
	}
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	applyCheckUpdates(c, wl.Status.AdmissionChecks)
	if g, ok := c.(jobs.GatedStart); ok {
		g.StartGated(job.Kind().WorkloadName(obj.GetName()))
	}
	return c
}

// applyCheckUpdates puts on a copy's pod templates what the hub queue's
// Ready admission checks ask for their pod sets (their podSetUpdates: labels,
// annotations, node selector, tolerations; a later check's value of a
// key wins over an earlier one's and over the template's), as the agent
// does for a worker queue's checks when it starts a job: the pods run on
// the worker. A pod set is matched to its template by name.
func applyCheckUpdates(c jobs.Job, states []strata.AdmissionCheckState) {
	states = slices.DeleteFunc(slices.Clone(states), func(s strata.AdmissionCheckState) bool { return s.State != strata.CheckStateReady })
	if len(states) == 0 {
		return
	}
	podSets, _ := c.PodSets()
	templates := c.Templates()
	for i, ps := range podSets {
		u := workload.PodSetUpdateOf(states, ps.Name)
		if u == nil || i >= len(templates) {
			continue
		}
		t := templates[i]
		t.Labels = mergeInto(t.Labels, u.Labels)
		t.Annotations = mergeInto(t.Annotations, u.Annotations)
		t.Spec.NodeSelector = mergeInto(t.Spec.NodeSelector, u.NodeSelector)
		for _, tol := range u.Tolerations {
			if !slices.ContainsFunc(t.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, tol) }) {
				t.Spec.Tolerations = append(t.Spec.Tolerations, tol)
			}
		}
	}
}

// mergeInto sets from's entries in m, made when nil and needed.
func mergeInto(m, from map[string]string) map[string]string {
	for k, v := range from {
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	return m
}

// CopyOf says which dispatch an object on a worker is a copy of: the hub
// Workload's UID and the generation; ok is false for one without them.
func CopyOf(obj metav1.Object) (uid types.UID, generation int64, ok bool) {
	u, g := obj.GetLabels()[strata.HubWorkloadUIDLabel], obj.GetLabels()[strata.DispatchGenerationLabel]
	n, err := strconv.ParseInt(g, 10, 64)
	if u == "" || err != nil {
		return "", 0, false
	}
	return types.UID(u), n, true
}

// Verdict is what a worker says of a copy.
type Verdict int

const (
	// Waiting means not admitted yet, nothing said against it.
	Waiting Verdict = iota
	// Admitted on the worker.
	Admitted
	// Refused means the worker cannot admit the copy as sent (Invalid, or
	// Inadmissible there).
	Refused
)

// Judge reads a copy's Workload on the worker: its verdict, and for a
// refusal the worker's reason and message.
func Judge(copyWL *strata.Workload) (Verdict, string, string) {
	if copyWL == nil {
		return Waiting, "", ""
	}
	if c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadInvalid); c != nil && c.Status == metav1.ConditionTrue {
		return Refused, c.Reason, c.Message
	}
	if copyWL.Status.Admission != nil {
		return Admitted, "", ""
	}
	if c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionFalse {
		switch c.Reason {
		case "Inadmissible":
			return Refused, c.Reason, c.Message
		case strata.QueueStopped, strata.EvictedByClusterQueueStopped, strata.EvictedByLocalQueueStopped:
			// The worker's queue for it is stopped (stopPolicy): waiting
			// there, or evicted by its drain.
			return Refused, strata.QueueStopped, c.Message
		case strata.QueueAdmissionCheckNotReady:
			// The worker's queue admits nothing until an AdmissionCheck
			// it names exists and is Active.
			return Refused, c.Reason, c.Message
		case strata.EvictedByPodsReadyTimeout:
			// Its pods were not all ready in time there (the worker's
			// waitForPodsReady): placed again, where it may start.
			return Refused, c.Reason, c.Message
		case ReasonCopyDeactivated:
			// Deactivated there (spec.active false): by the worker's
			// waitForPodsReady past its backoffLimitCount, for its
			// maximum execution time, or by someone on the worker. Judged
			// once the eviction is done (its requeueState and its
			// deactivation mark cleared), when the message says which.
			if workload.IsActive(copyWL) || copyWL.Status.RequeueState != nil || workload.ExecutionExceeded(copyWL) {
				return Waiting, "", ""
			}
			// Rejected by a check of the worker's queue: its state says
			// so whichever controller wrote the deactivation first.
			if v, why := workload.Verdict(copyWL.Status.AdmissionChecks); v == workload.ChecksRejected {
				return Refused, strata.AdmissionCheckRejected, fmt.Sprintf("deactivated (%s): %s", strata.AdmissionCheckRejected, why)
			}
			// A check of the worker's queue that rejected it
			// (AdmissionCheckRejected): placed again elsewhere, where
			// the queue's checks may differ.
			for _, cause := range []string{strata.RequeuingLimitExceeded, strata.MaximumExecutionTimeExceeded, strata.AdmissionCheckRejected} {
				if strings.Contains(c.Message, cause) {
					return Refused, cause, c.Message
				}
			}
			return Refused, c.Reason, c.Message
		}
	}
	return Waiting, "", ""
}

// ReasonCopyDeactivated is the Admitted=False reason of a copy's
// Workload deactivated on its worker.
const ReasonCopyDeactivated = "Deactivated"
