package copies

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// action is what a reconcile does for a hub Workload's dispatch.
type action string

// The actions, each carried out by the function named after it.
const (
	// actNone does nothing but requeue when step.requeue says.
	actNone action = "None"
	// actFail returns step.err: a read failed.
	actFail action = "Fail"
	// actForget takes back the copy of a Workload that is gone (forget).
	actForget action = "Forget"
	// actDeleteOrphan deletes a hub Workload whose job is gone.
	actDeleteOrphan action = "DeleteOrphan"
	// actUntrack forgets a Workload that is not dispatched.
	actUntrack action = "Untrack"
	// actTakeBack removes the copy and, with step.record, records
	// step.outcome (takeBack).
	actTakeBack action = "TakeBack"
	// actRefuse undoes the dispatch for step.outcome (refuse).
	actRefuse action = "Refuse"
	// actConfirmThenRefuse re-reads the copy from the worker; unless it
	// was admitted meanwhile or cannot be read, it refuses (a timeout).
	actConfirmThenRefuse action = "ConfirmThenRefuse"
	// actAbandon ends the dispatch without removing its copy (abandon).
	actAbandon action = "Abandon"
	// actTakeBackUnreached ends a take-back whose worker does not answer
	// without removing its copy, which fencing stopped or which was never
	// sent (step.revoke: revoked first), and, with step.record, records
	// step.outcome (takeBackUnreached).
	actTakeBackUnreached action = "TakeBackUnreached"
	// actMarkUnreachable says the worker does not answer (step.message).
	actMarkUnreachable action = "MarkUnreachable"
	// actMarkReachable removes the WorkerUnreachable condition.
	actMarkReachable action = "MarkReachable"
	// actRemoveStale removes a copy of an earlier dispatch.
	actRemoveStale action = "RemoveStale"
	// actRecordAdmission records the worker's admission (recordAdmission).
	actRecordAdmission action = "RecordAdmission"
	// actCleanFinished ends a finished Workload's reservation and, with
	// step.deleteCopy, removes its copy (cleanFinished).
	actCleanFinished action = "CleanFinished"
	// actConfirmGone confirms that an admitted copy is gone from the
	// worker, then refuses (confirmGone).
	actConfirmGone action = "ConfirmGone"
	// actCreate sends the copy (createCopy).
	actCreate action = "Create"
	// actMarkWaiting shows why the worker has not admitted the copy yet.
	actMarkWaiting action = "MarkWaiting"
)

// step is what nextStep decided, and why.
type step struct {
	action action
	// why says what in the observation led to the step.
	why string
	// requeue is when to look again; 0 leaves it to events.
	requeue time.Duration
	// err is a failed read (actFail).
	err error
	// outcome is what the undone dispatch records (actTakeBack,
	// actRefuse, actConfirmThenRefuse, actAbandon: reason and message).
	outcome outcome
	// record: the take-back records its outcome (actTakeBack,
	// actTakeBackUnreached).
	record bool
	// revoke: the dispatch is revoked in the worker's fencing Lease first
	// (actTakeBackUnreached).
	revoke bool
	// message is the WorkerUnreachable condition's (actMarkUnreachable).
	message string
	// ranUnseen: the finished Workload's admission is no longer to be
	// seen (actCleanFinished).
	ranUnseen bool
	// deleteCopy: the finished copy's retention is over (actCleanFinished).
	deleteCopy bool
	// mirror: the copy exists; its status is mirrored onto the hub job
	// first and its topology hint forgotten.
	mirror bool
	// release: the worker released the finished copy's capacity.
	release bool
	// noteSeen: remember that this process saw the copy now.
	noteSeen bool
	// notePending: remember the copy's Pending spell as seen begin now.
	notePending *pendingSighting
	// scaleTo: bring the elastic Job's admitted copy to this many pods,
	// the size its hub queue granted (0: leave it).
	scaleTo int32
}

// The requeue intervals of the copies controller.
const (
	// conflictRetry is how soon a reconcile that met a newer object runs
	// again.
	conflictRetry = 200 * time.Millisecond
	// creationGrace is how long a copy the hub created may be missing from
	// the worker's informer before the hub creates it again.
	creationGrace = 30 * time.Second
	// copyGoingRetry bounds the wait for a going copy's deletion event.
	copyGoingRetry = 5 * time.Second
	// connectGrace is how long a worker may take to connect before the
	// Workloads dispatched there say it does not answer.
	connectGrace = 30 * time.Second
	// unreachableRetry is how often a dispatch to a worker that does not
	// answer is looked at again.
	unreachableRetry = 30 * time.Second
	// notConnectedRetry is how soon an action that needs a worker's
	// client looks again when there is none.
	notConnectedRetry = 10 * time.Second
	// informerBehindRetry is how soon a reconcile looks again when the
	// worker has what its informer does not show yet.
	informerBehindRetry = time.Second
)

// Outcome reasons of dispatches the hub undoes.
const (
	// ReasonWorkerClusterDeleted is the outcome of a dispatch whose
	// WorkerCluster was deleted.
	ReasonWorkerClusterDeleted = "WorkerClusterDeleted"
	// ReasonKindNotServed is the refusal of a copy whose kind the worker
	// does not serve (its CRD is not installed there).
	ReasonKindNotServed = "KindNotServed"
	// ReasonPendingOnWorker is the refusal of a copy its worker's agent
	// kept Pending for dispatch.pendingTimeout.
	ReasonPendingOnWorker = "PendingOnWorker"
	// ReasonCopyDeleted is the refusal of an admitted copy deleted on its
	// worker before it finished.
	ReasonCopyDeleted = "CopyDeleted"
	// ReasonCopyNotSent is the outcome of a dispatch whose copy provably
	// never reached its worker (the connection was refused, the name did
	// not resolve, the TLS handshake failed): placed again at once.
	ReasonCopyNotSent = "CopyNotSent"
	// ReasonClusterChanged is the outcome of a dispatch to a cluster the
	// worker's name no longer stands for (strata.dev/accept-cluster-id).
	ReasonClusterChanged = "ClusterChanged"
	// ReasonAdmissionTimeout is the cause of a copy not admitted within
	// dispatch.admissionTimeout.
	ReasonAdmissionTimeout = "AdmissionTimeout"
	// ReasonTakenBack is the cause of a dispatch whose copy an earlier hub
	// process took back without recording why.
	ReasonTakenBack = "TakenBack"
)

// nextStep decides what to do for one hub Workload's dispatch from what
// was observed, at now. It reads nothing else and changes nothing: each
// branch is a row of its table test.
func nextStep(o *observed, now time.Time) step {
	switch {
	case o.wl == nil:
		return step{action: actForget, why: "the hub Workload is gone"}
	case o.owner == nil && o.wl.DeletionTimestamp.IsZero():
		// On the hub a Workload exists only for its job: one without an
		// owner was orphaned (the job deleted with --cascade=orphan). It
		// goes, and with it its copy and its quota charge; nothing else
		// would ever end them.
		return step{action: actDeleteOrphan, why: "the hub Workload has no job"}
	case !o.placed || o.job.kind == nil:
		return step{action: actUntrack, why: "not dispatched"}
	case o.hubJobErr != nil:
		return step{action: actFail, why: "reading the hub job", err: o.hubJobErr}
	case o.hubJob == nil || !o.wl.DeletionTimestamp.IsZero():
		// The job is gone: its Workload follows; the copy goes first.
		// A deleted Workload (strata.CopyGoneFinalizer) goes once it has.
		gone := "the " + o.kindName() + " was deleted"
		if o.hubJob != nil && o.hubJob.Object().GetDeletionTimestamp().IsZero() {
			gone = "the Workload was deleted"
		}
		return takeBackStep(o, step{action: actTakeBack, why: "the hub job was deleted",
			outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended, message: gone}}, now)
	case !o.finished() && !workload.IsActive(o.wl) && !o.copyFinished():
		// The user's hold, Kueue's way. A copy that finished meanwhile
		// is mirrored first (followStep): taking it back would lose its
		// result and run the job again once active. The hub job's own suspend is
		// Strata's: a job created or set suspended on the hub runs on.
		st := step{action: actTakeBack, why: "the hub Workload was deactivated", record: true,
			outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated,
				message: "the Workload was deactivated (spec.active: false); it is dispatched again when spec.active is true"}}
		if o.undoing != nil {
			// A take-back under way records its own outcome: the
			// refusal that deactivated it (RequeuingLimitExceeded,
			// MaximumExecutionTimeExceeded), or
			// one before the user's hold.
			st.outcome = *o.undoing
		}
		return takeBackStep(o, st, now)
	case !o.finished() && dispatch.Evicting(o.wl) && !o.copyFinished():
		// Preempted at the hub for its queue's quota, or drained by its
		// stopped queue: the copy goes, and the Workload waits again.
		return takeBackStep(o, step{action: actTakeBack, why: "the hub evicted the Workload", record: true,
			outcome: outcome{result: strata.PlacementEvicted, reason: evictedReason(o.wl), message: evictedMessage(o.wl)}}, now)
	case o.wcErr != nil:
		return step{action: actFail, why: "reading the WorkerCluster", err: o.wcErr}
	case o.wc != nil && !o.wc.DeletionTimestamp.IsZero() && !o.finished() && !o.copyFinished():
		return drainingStep(o, now)
	case o.switched != nil && !o.finished() && !dispatchTime(o.wl).After(o.switched.At):
		return oldClusterStep(o, now)
	case o.down != "" && o.copyJob != nil && o.copyIsCurrent() && !o.finished() && copyDone(o.copyJob):
		// It finished on its worker, then the worker stopped answering:
		// a finished status is final, and placing the job again would
		// run it twice.
		return followStep(o, now)
	case o.down != "":
		return unreachableStep(o, o.down, true, now)
	case errors.Is(o.copyErr, fleet.ErrKindNotServed):
		return refuseStep("the worker does not serve the kind", strata.PlacementRejected, ReasonKindNotServed,
			fmt.Sprintf("%v; placing it again", o.copyErr))
	case errors.Is(o.copyErr, fleet.ErrNotConnected) && o.wc == nil:
		return refuseStep("the WorkerCluster is gone", strata.PlacementUnreachable, ReasonWorkerClusterDeleted,
			fmt.Sprintf("WorkerCluster %s was deleted; its copy there, if any, is left to the worker's administrators; placing it again", o.cluster))
	case errors.Is(o.copyErr, fleet.ErrNotConnected):
		// The copy stays recorded; nothing is sent elsewhere while it may
		// run (until fencing says it cannot). The connection's return
		// brings the Workload back.
		return unreachableStep(o, o.copyErr.Error(), false, now)
	case o.copyErr != nil:
		return step{action: actFail, why: "reading the copy", err: o.copyErr}
	case meta.FindStatusCondition(o.wl.Status.Conditions, ConditionUnreachable) != nil:
		// The worker answers again; the write's event brings the rest.
		return step{action: actMarkReachable, why: "the worker answers again"}
	case o.copyJob != nil && !o.copyIsCurrent():
		// A copy of an earlier dispatch, or of an earlier Workload of
		// this name: it and its pods go before this one is created.
		return step{action: actRemoveStale, why: "a copy of an earlier dispatch is there"}
	case o.finished():
		return finishedStep(o, now)
	case o.undoing != nil && !o.copyFinished():
		// Being taken back: its copy's pods are not gone yet, or the
		// record's write did not land. A copy that finished before its
		// deletion took hold is mirrored instead.
		return step{action: actTakeBack, why: "a take-back is under way", outcome: *o.undoing, record: true}
	case o.takenBack:
		// This process took the copy back and recorded it; the cache is
		// behind that write. Sending the copy again now would run it
		// beside the one the next dispatch sends elsewhere.
		return step{action: actNone, why: "the take-back's record is not in the cache yet", requeue: informerBehindRetry}
	case o.copyJob != nil && !o.copyJob.Object().GetDeletionTimestamp().IsZero() && !o.copyFinished():
		// Going (taken back by an earlier hub process, or deleted on the
		// worker): nothing more is decided until it and its pods are gone.
		// One that finished first is mirrored (followStep): its result
		// would be lost with it.
		return step{action: actNone, why: "the copy is being deleted", requeue: copyGoingRetry}
	case o.copyJob == nil && o.wl.Status.Admission != nil:
		return step{action: actConfirmGone, why: "the admitted copy is not in the worker's informer"}
	case o.copyJob == nil && takenBackBefore(o):
		// An earlier hub process was taking the copy back and stopped
		// before it recorded why: creating it again under the same
		// dispatch would send it to a worker that may have refused it,
		// with nothing recorded. Recorded as evicted, not rejected: the
		// take-back may have been the user's (a deactivation undone
		// since), and the worker gets no backoff for it.
		return refuseStep("a take-back of an earlier hub process ended", strata.PlacementEvicted, ReasonTakenBack, fmt.Sprintf(
			"the copy on %s was taken back by an earlier hub process, which stopped before it recorded why; placing it again", o.cluster))
	case o.copyJob == nil && workload.ExecutionUsedUp(o.wl):
		// Its earlier copies were admitted for its whole maximum
		// execution time (the hub counts each, see setWaitingOnWorker):
		// a copy would be admitted only to be deactivated on its worker.
		// The hub deactivates the Workload instead, as Kueue's would be
		// (refuse: spec.active first, then the record, which forgets the
		// time).
		return step{action: actRefuse, why: "its maximum execution time is used up", outcome: outcome{result: strata.PlacementEvicted,
			reason: dispatch.ReasonDeactivated, cause: strata.MaximumExecutionTimeExceeded,
			message: fmt.Sprintf("its earlier copies were admitted for its maximum execution time, %ds, in all: the hub deactivates the Workload (spec.active: false) "+
				"and sends no copy; it is dispatched again, with the whole time, when spec.active is true", *o.wl.Spec.MaximumExecutionTimeSeconds)}}
	case o.copyJob == nil:
		return step{action: actCreate, why: "no copy yet"}
	}
	return followStep(o, now)
}

// takenBackBefore says whether the Workload's CopyGoing condition says
// its current dispatch's copy was being taken back: set since the
// dispatch, and not cleared by the take-back's record.
func takenBackBefore(o *observed) bool {
	c := meta.FindStatusCondition(o.wl.Status.Conditions, ConditionCopyGoing)
	return c != nil && c.Status == metav1.ConditionTrue && !c.LastTransitionTime.Time.Before(dispatchTime(o.wl))
}

// evictedMessage is why the hub evicted a Workload (its Evicted
// condition's message).
func evictedMessage(wl *strata.Workload) string {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted); c != nil && c.Message != "" {
		return c.Message
	}
	return "evicted at the hub"
}

// copyDone says whether a copy finished (Complete or Failed).
func copyDone(j jobs.Job) bool {
	done, _ := j.Finished()
	return done
}

// copyFinished says whether the copy's job finished on its worker, or
// its result is decided (jobs.Decided): its result is mirrored
// (followStep) before anything takes the copy back.
func (o *observed) copyFinished() bool {
	return o.copyJob != nil && jobs.Decided(o.copyJob)
}

// evictedReason is the reason the hub evicted a Workload (its Evicted
// condition's: Preempted, or a stopped queue's).
func evictedReason(wl *strata.Workload) string {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted); c != nil && c.Reason != "" {
		return c.Reason
	}
	return strata.EvictedByPreemption
}

// copyIsCurrent says whether the copy belongs to the current dispatch.
func (o *observed) copyIsCurrent() bool {
	uid, gen, _ := dispatch.CopyOf(o.copyJob.Object())
	return uid == o.wl.UID && gen == o.gen
}

// requeueOf is the hub Workload's requeueState after its copy was evicted
// because its pods were not ready in time: the copy's count (which counts
// on from the Job's earlier copies, strata.dev/requeue-count), and its
// backoff, measured on the worker's clock, from now on the hub's, at most
// maxHubBackoff. nil when the copy has no count.
func requeueOf(copyWL *strata.Workload, now time.Time) *strata.RequeueState {
	n := workload.RequeueCount(copyWL)
	if n <= 0 {
		return nil
	}
	at := metav1.NewTime(now.Add(min(workload.RequeueBackoff(copyWL), maxHubBackoff)).Truncate(time.Second))
	return &strata.RequeueState{Count: &n, RequeueAt: &at}
}

// maxHubBackoff bounds how long the hub holds a Job for one worker's
// waitForPodsReady backoff (Kueue's default backoffMaxSeconds): a
// worker's own configuration, or a copy's status written there, does not
// hold the Job from the whole fleet for days. The worker that evicted it
// still gets no copy of it for rejectionBackoff.
const maxHubBackoff = time.Hour

// ReasonCopyChanged is the cause of a refusal of a copy that its worker
// admitted with other pod sets than the hub Workload's.
const ReasonCopyChanged = "CopyChanged"

// admittedOtherShape says how a copy's admission differs from the hub
// Workload's pod sets ("" when it admits exactly them): a copy changed on
// its worker would run a shape the hub does not count.
func admittedOtherShape(wl, copyWL *strata.Workload) string {
	if wl == nil || copyWL == nil || copyWL.Status.Admission == nil {
		return ""
	}
	want := map[string]*strata.PodSet{}
	for i := range wl.Spec.PodSets {
		want[wl.Spec.PodSets[i].Name] = &wl.Spec.PodSets[i]
	}
	got := copyWL.Status.Admission.PodSetAssignments
	for _, a := range got {
		ps, ok := want[a.Name]
		switch {
		case !ok:
			return fmt.Sprintf("pod set %s is not the Workload's", a.Name)
		case !workload.AdmitsCount(ps, a.Count) && !admitsPartially(copyWL, ps, a) && !resizing(wl, a):
			// Fewer pods are the Workload's too when it may be admitted
			// with as few (minCount: partial admission on the worker).
			return fmt.Sprintf("pod set %s admitted with %d pods, the Workload has %d", a.Name, a.Count, ps.Count)
		case a.Count > placedCount(wl, a.Name, ps.Count) && !resizing(wl, a):
			// The hub placed it with fewer pods, and charged its quota
			// for them (an agent older than strata.dev/pod-set-counts
			// admits as many as fit).
			return fmt.Sprintf("pod set %s admitted with %d pods, more than the %d it was placed with (%s)", a.Name, a.Count,
				placedCount(wl, a.Name, ps.Count), strata.PodSetCountsAnnotation)
		case placedFlavor(wl, a.Name) != "" && a.Flavor != placedFlavor(wl, a.Name):
			// The hub charged its queue's quota and reserved capacity
			// for each pod set on its flavor (an agent older than
			// strata.dev/pod-set-flavors admits where the walk goes).
			return fmt.Sprintf("pod set %s admitted on flavor %s, the hub placed it on %s (%s)", a.Name, a.Flavor,
				placedFlavor(wl, a.Name), strata.PodSetFlavorsAnnotation)
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d pod sets admitted, the Workload has %d", len(got), len(want))
	}
	return ""
}

// resizing says whether an elastic hub Workload's copy admitted with a's
// count is on its way to the size granted (the Workload's count): no more
// pods than that, or than the hub's record of its admission, while the
// worker resizes it in place.
func resizing(wl *strata.Workload, a strata.PodSetAssignment) bool {
	if !workload.Elastic(wl) || a.Count <= 0 {
		return false
	}
	if ps := workload.PodSet(wl, a.Name); ps != nil && a.Count <= ps.Count {
		return true
	}
	if rec := wl.Status.Admission; rec != nil {
		for _, r := range rec.PodSetAssignments {
			if r.Name == a.Name && a.Count <= r.Count {
				return true
			}
		}
	}
	return false
}

// placedFlavor is the flavor the hub placed wl's pod set name on when it
// placed its pod sets on different flavors (status.placement.
// podSetFlavors); "" otherwise.
func placedFlavor(wl *strata.Workload, name string) string {
	if p := wl.Status.Placement; p != nil {
		for _, f := range p.PodSetFlavors {
			if f.Name == name {
				return f.Flavor
			}
		}
	}
	return ""
}

// placedCount is the count of wl's pod set name its placement charges:
// status.placement.podSetCounts when it was placed with fewer, else all.
func placedCount(wl *strata.Workload, name string, all int32) int32 {
	if p := wl.Status.Placement; p != nil {
		for _, c := range p.PodSetCounts {
			if c.Name == name {
				return c.Count
			}
		}
	}
	return all
}

// admitsPartially says whether the copy's own Workload, of the hub
// Workload's count, may be admitted with a's fewer pods: a hub Workload
// made before the hub read minCount (or one whose CRD dropped it) has
// none, while the worker's agent reads the copy's job-min-parallelism.
func admitsPartially(copyWL *strata.Workload, ps *strata.PodSet, a strata.PodSetAssignment) bool {
	cps := workload.PodSet(copyWL, a.Name)
	return cps != nil && cps.Count == ps.Count && workload.AdmitsCount(cps, a.Count)
}

// executionGrace is how long past a hub Workload's maximum execution
// time, as the hub counts it, the hub waits for the worker to deactivate
// the copy before it deactivates the Workload itself.
const executionGrace = 30 * time.Second

// refuseStep undoes the dispatch (the hub Workload's condition reason
// Rejected) for cause.
func refuseStep(why string, result strata.PlacementResult, cause, message string) step {
	return step{action: actRefuse, why: why, outcome: outcome{result: result, reason: dispatch.ReasonRejected, cause: cause, message: message}}
}

// finishedStep decides on a finished Workload: its reservation ends, and
// its copy goes once it has been finished for finishedRetention. One that
// finished on the worker before this hub recorded its admission (a
// one-second copy, a hub that just restarted) says where it ran, never
// that it still waits.
func finishedStep(o *observed, now time.Time) step {
	unrecorded := o.wl.Status.Admission == nil
	if unrecorded && o.copyWL != nil && o.copyWL.Status.Admission != nil {
		return step{action: actRecordAdmission, why: "finished before its admission was recorded"}
	}
	s := step{action: actCleanFinished, why: "finished", ranUnseen: unrecorded}
	if o.copyJob == nil {
		return s
	}
	// Kinds write status after their terminal condition (an MPIJob's
	// workers, a JobSet's child Jobs going): the hub's follows until the
	// copy goes.
	s.mirror = true
	finishedAt := o.wl.CreationTimestamp.Time
	if c := meta.FindStatusCondition(o.wl.Status.Conditions, strata.WorkloadFinished); c != nil {
		finishedAt = c.LastTransitionTime.Time
	}
	if wait := finishedAt.Add(o.cfg.Dispatch.FinishedRetention.Duration).Sub(now); wait > 0 {
		s.requeue = wait
	} else {
		s.deleteCopy = true
	}
	return s
}

// followStep decides on a copy that is there: the worker's verdict on it,
// and the timeouts that bound the wait for one. The copy's status is
// mirrored onto the hub job first in every case.
func followStep(o *observed, now time.Time) step {
	if done, _ := o.copyJob.Finished(); done {
		// The worker released its capacity. Admitted and finished before
		// this hub recorded the admission (a one-second copy, a hub that
		// just restarted): the record says where it ran, not that it
		// still waits.
		s := step{action: actNone, why: "the copy finished", mirror: true, release: true}
		if o.wl.Status.Admission == nil && o.copyWL != nil && o.copyWL.Status.Admission != nil {
			s.action = actRecordAdmission
		}
		return s
	}
	verdict, reason, message := dispatch.Judge(o.copyWL)
	switch verdict {
	case dispatch.Refused:
		s := refuseStep("the worker refused the copy", strata.PlacementRejected, reason,
			fmt.Sprintf("the worker refused the copy (%s): %s; placing it again", reason, message))
		switch reason {
		case strata.EvictedByPodsReadyTimeout:
			s.outcome.requeue = requeueOf(o.copyWL, now)
		case strata.RequeuingLimitExceeded, strata.MaximumExecutionTimeExceeded:
			// Evicted there, not refused: no worker is kept out for it
			// once someone activates the Workload again.
			s.outcome.result = strata.PlacementEvicted
			s.outcome.reason = dispatch.ReasonDeactivated
			s.outcome.message = fmt.Sprintf("the worker deactivated the copy (%s): %s; the Workload is deactivated (spec.active: false) and is dispatched again when spec.active is true",
				reason, message)
		}
		s.mirror = !jobs.Gated(o.copyJob) // a gated copy's pods never ran
		return s
	case dispatch.Admitted:
		if why := admittedOtherShape(o.wl, o.copyWL); why != "" {
			// Changed on the worker (a tenant scaled a LeaderWorkerSet's
			// copy): what runs there is not what the hub counts.
			return refuseStep("the worker admitted a copy of another shape", strata.PlacementRejected, ReasonCopyChanged,
				fmt.Sprintf("the worker admitted the copy as changed there (%s); placing it again", why))
		}
		s := step{action: actRecordAdmission, why: "the worker admitted the copy", mirror: true, scaleTo: scaleTo(o)}
		if left, ok := workload.ExecutionLeft(o.wl, now); ok {
			// The maximum execution time, as Kueue's manager enforces it
			// on its Workload: the worker deactivates the copy when its
			// time is up (it counts from its own, earlier, admission);
			// the hub does, executionGrace later, when the worker did
			// not (a copy whose label a tenant removed, an agent that
			// does not know it).
			if left+executionGrace > 0 {
				s.requeue = left + executionGrace
				return s
			}
			return step{action: actRefuse, why: "its maximum execution time is used up, and the worker did not deactivate the copy",
				mirror: s.mirror, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated, cause: strata.MaximumExecutionTimeExceeded,
					message: fmt.Sprintf("admitted for its maximum execution time, %ds, and not deactivated by the worker: the hub deactivates the Workload (spec.active: false); it is dispatched again when spec.active is true",
						*o.wl.Spec.MaximumExecutionTimeSeconds)}}
		}
		return s
	}
	if o.copyWL != nil && !workload.IsActive(o.copyWL) {
		// Deactivated on its worker, the eviction not done yet: its
		// verdict (Judge) comes with it, not from a timeout; the copy's
		// changes bring the Workload back.
		return step{action: actNone, why: "the worker is deactivating the copy", mirror: !jobs.Gated(o.copyJob)}
	}
	// The worker has admissionTimeout from when the copy is there: from
	// the dispatch, or from when this hub process first saw the copy, if
	// later (a hub that restarted, or waited for the connection, does not
	// count that time against the worker). A copy sent running with its
	// pods gated (jobs.GatedStart) is not mirrored while it waits: its
	// status counts pods that wait for the admission as active, and the
	// hub's job would read as running.
	s := step{mirror: !jobs.Gated(o.copyJob)}
	dispatched, seen := dispatchTime(o.wl), o.seen
	if seen.IsZero() {
		seen, s.noteSeen = now, true
	}
	if seen.After(dispatched) {
		dispatched = seen
	}
	timeout := o.cfg.Dispatch.AdmissionTimeout.Duration
	wait := dispatched.Add(timeout).Sub(now)
	if wait <= 0 {
		s.action, s.why = actConfirmThenRefuse, "not admitted within admissionTimeout"
		s.outcome = outcome{result: strata.PlacementTimedOut, reason: dispatch.ReasonTimedOut, cause: ReasonAdmissionTimeout,
			message: fmt.Sprintf("the worker did not admit the copy within %s; placing it again", timeout)}
		return s
	}
	// A worker whose agent says it cannot admit the copy now (no room as
	// its nodes are packed, its quota, workloads ahead of it) keeps it for
	// pendingTimeout; the hub then places it where it fits now.
	//
	// The spell counts on the hub's clock, from when the hub saw it begin:
	// the worker's transition time only tells one spell from the next.
	if workerSince, message, pending := PendingSince(o.copyWL); pending {
		since := now
		if o.pending != nil && o.pending.workerSince.Equal(workerSince) {
			since = o.pending.at
		} else {
			s.notePending = &pendingSighting{workerSince: workerSince, at: now}
		}
		pendingTimeout := o.cfg.Dispatch.PendingTimeout.Duration
		left := since.Add(pendingTimeout).Sub(now)
		if left <= 0 {
			s.action, s.why = actConfirmThenRefuse, "pending on the worker for pendingTimeout"
			s.outcome = outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonPendingOnWorker,
				message: fmt.Sprintf("the worker has not been able to admit the copy for %s (%s); placing it where it fits now", pendingTimeout, message)}
			return s
		}
		wait = min(wait, left)
	}
	s.action, s.why, s.requeue = actMarkWaiting, "waiting for the worker's admission", wait
	return s
}

// scaleTo is the size an elastic Job's admitted copy is to be brought to:
// the hub Workload's count, the size its hub queue granted (the
// dispatcher's resize), when the copy runs another; 0 otherwise.
func scaleTo(o *observed) int32 {
	if !workload.Elastic(o.wl) || len(o.wl.Spec.PodSets) != 1 || o.copyJob == nil {
		return 0
	}
	scaler, ok := o.copyJob.(jobs.Scaler)
	if !ok || !o.copyJob.Object().GetDeletionTimestamp().IsZero() {
		return 0
	}
	count := o.wl.Spec.PodSets[0].Count
	if count <= 0 || scaler.ScalePatch(count) == nil {
		return 0
	}
	return count
}

// PendingSince says since when a copy's Workload has been Pending on its
// worker (the agent tried and cannot admit it now), with the agent's
// message; false when it is not.
func PendingSince(copyWL *strata.Workload) (time.Time, string, bool) {
	if copyWL == nil || copyWL.Status.Admission != nil {
		return time.Time{}, "", false
	}
	c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != workerPending {
		return time.Time{}, "", false
	}
	return c.LastTransitionTime.Time, c.Message, true
}

// workerPending is the reason of an agent's Admitted=False condition on a
// workload it tried and cannot admit now (agent/scheduler.ReasonPending).
const workerPending = "Pending"

// dispatchTime is when the current dispatch was recorded.
func dispatchTime(wl *strata.Workload) time.Time {
	p := wl.Status.Placement
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		if a := p.Attempts[i]; a.DispatchGeneration == p.DispatchGeneration && a.Cluster == p.Cluster {
			return a.Time.Time
		}
	}
	return wl.CreationTimestamp.Time
}
