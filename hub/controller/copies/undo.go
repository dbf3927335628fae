package copies

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/workload"
)

// errCopyGoing says a copy being taken back still exists on its worker:
// its deletion waits for its pods (foreground), and its workload is placed
// elsewhere only once it is gone.
var errCopyGoing = errors.New("the copy is being deleted; waiting for its pods to be gone")

// errRenewedMeanwhile says the hub renewed the worker's fencing Lease
// after the decision to place its workload elsewhere was taken: the worker
// answers, and the decision is taken again.
var errRenewedMeanwhile = errors.New("the worker's fencing Lease was renewed since; deciding again")

// workerReasons are the refusals that say something about the worker, not
// the workload: the WorkerCluster's Dispatching condition names them.
var workerReasons = map[string]bool{
	intake.ReasonLocalQueueNotFound:  true,
	intake.ReasonQueueNotFound:       true,
	intake.ReasonNamespaceNotAllowed: true,
}

// refuse undoes the current dispatch: the copy goes first, then the
// record; the dispatcher then places the Workload again, without this
// worker for a backoff.
func (r *Reconciler) refuse(ctx context.Context, s *scope, o outcome) error {
	if workerReasons[o.cause] {
		if err := r.setDispatching(ctx, s.cluster, metav1.ConditionFalse, o.cause, o.message); err != nil {
			return err
		}
	}
	if o.cause == strata.RequeuingLimitExceeded || o.cause == strata.MaximumExecutionTimeExceeded {
		if err := r.deactivate(ctx, s, o); err != nil {
			return err
		}
	}
	// A copy still going is waited for through the undoing record; the
	// refusal is told once.
	_, told := r.memory.undoingOf(s.dispatch)
	err := r.takeBack(ctx, s, o, true)
	if err != nil && !errors.Is(err, errCopyGoing) {
		return err
	}
	if !told {
		s.afterWrite(func(context.Context) error {
			metrics.HubRejections.WithLabelValues(s.cluster, o.cause).Inc()
			if s.hubJob != nil {
				r.recorder.Eventf(s.hubJob.Object(), s.wl, corev1.EventTypeWarning, o.reason, "Dispatch", "%s", intake.Truncate(s.cluster+": "+o.message, intake.MaxEventNote))
			}
			return nil
		})
	}
	return err
}

// deactivate sets the hub Workload's spec.active to false: its copy's
// worker deactivated the copy past waitForPodsReady's backoffLimitCount
// or for its maximum execution time, and the Job is held at the hub as Kueue holds it, until someone sets
// spec.active again. It is written before the refusal's record, so that
// no pass places the Workload again in between; the record then follows
// on the Workload as patched. The same write keeps o, the outcome that
// record is to say, in strata.DeactivatedByAnnotation: the copy's
// deletion may wait for its pods, and a hub restarted meanwhile would
// otherwise record a plain deactivation.
func (r *Reconciler) deactivate(ctx context.Context, s *scope, o outcome) error {
	if !workload.IsActive(s.wl) {
		return nil
	}
	// On the Workload as read (optimistic lock): a conflict brings it
	// back; once patched, the status write that follows goes on the
	// same object, nothing written in between.
	patched := s.wl.DeepCopy()
	patched.Spec.Active = ptr.To(false)
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[strata.DeactivatedByAnnotation] = encodeDeactivation(s.dispatch, o)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(s.wl, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	s.wl.Spec.Active, s.wl.Annotations, s.wl.ResourceVersion = patched.Spec.Active, patched.Annotations, patched.ResourceVersion
	return nil
}

// workerRefused undoes a dispatch for a reason of the worker's, and says
// so on the WorkerCluster too.
func (r *Reconciler) workerRefused(ctx context.Context, s *scope, cause, message string) error {
	if err := r.setDispatching(ctx, s.cluster, metav1.ConditionFalse, cause, message); err != nil {
		return err
	}
	return r.refuse(ctx, s, outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: cause, message: message})
}

// takeBack removes the current dispatch's copy, ends its reservation and,
// when record is set, records the outcome on the Workload.
func (r *Reconciler) takeBack(ctx context.Context, s *scope, o outcome, record bool) error {
	deleted := !s.wl.DeletionTimestamp.IsZero()
	record = record && !deleted
	if record {
		r.memory.noteUndoing(s.dispatch, o)
	}
	// A deleted Workload goes once its copy is gone (strata.CopyGoneFinalizer),
	// and so does one whose job was deleted (the garbage collector deletes
	// it next): the copy's pods go first, as for a take-back that records
	// its outcome, so that a job created again under its name never starts
	// beside pods of the old one that still terminate.
	wait := record || deleted || controllerutil.ContainsFinalizer(s.wl, strata.CopyGoneFinalizer)
	copyJob, err := s.copyJob, s.copyErr
	if errors.Is(err, fleet.ErrKindNotServed) {
		err = nil // no copy of that kind can be there
	}
	if err != nil && !errors.Is(err, fleet.ErrNotConnected) {
		return err
	}
	if errors.Is(err, fleet.ErrNotConnected) {
		if s.wcErr != nil {
			return s.wcErr
		}
		if s.wc != nil {
			// At most one live copy: nothing else is sent until this one
			// is known to be gone.
			return fmt.Errorf("cannot remove the copy on %s: %w", s.cluster, err)
		}
		// The WorkerCluster is gone, and with it the hub's way there.
	}
	// The workload is placed again only once its copy and the copy's pods
	// are gone (foreground deletion): never two runs at once.
	if copyJob != nil {
		if uid, _, _ := dispatch.CopyOf(copyJob.Object()); uid == s.wl.UID {
			if record && copyJob.Object().GetDeletionTimestamp().IsZero() {
				if err := r.notFinishedLive(ctx, s); err != nil {
					return err
				}
			}
			if err := r.removeCopy(ctx, s.cluster, copyJob.Object(), wait); err != nil {
				if !refusedOfDeleted(s, err) {
					return r.copyGoing(s, o, record, err, copyJob.Object())
				}
				if err := r.revokeRefused(ctx, s, err); err != nil {
					return err
				}
			}
		} else if err := r.revokeStray(ctx, s); err != nil {
			return err
		}
	} else if c, cerr := r.fleet.Client(s.cluster); cerr == nil {
		// The informer may not show a copy created a moment ago, and
		// shows a going one until it is gone.
		existing := s.job.kind.NewObject()
		if err := c.Get(ctx, s.job.key, existing); err == nil {
			if uid, _, _ := dispatch.CopyOf(existing); uid == s.wl.UID {
				if o.cause == ReasonKindNotServed {
					// Discovery said the worker does not serve the kind (a
					// 404 while its API server started, say), yet the copy
					// is there: it may run, and a refusal for the kind
					// would delete it and run the job again elsewhere.
					// Nothing is undone; discovery, asked again, watches
					// the kind.
					r.memory.undone(s.dispatch)
					return fmt.Errorf("%w: %s/%s is on %s", errKindServed, existing.GetNamespace(), existing.GetName(), s.cluster)
				}
				if j, ok := s.job.kind.Adapt(existing); ok && record && existing.GetDeletionTimestamp().IsZero() && jobs.Decided(j) {
					// The informer does not show it: behind, or the copy
					// lost the label it selects on (a tenant took the
					// origin off). Its result is mirrored from what was
					// read, so that the hub's job finishes either way.
					if s.hubJob != nil {
						if err := r.syncJobStatus(ctx, s.hubJob, j); err != nil {
							return err
						}
					}
					return fmt.Errorf("%w: %s/%s on %s", errCopyFinished, existing.GetNamespace(), existing.GetName(), s.cluster)
				}
				if err := r.removeCopy(ctx, s.cluster, existing, wait); err != nil {
					if !refusedOfDeleted(s, err) {
						return r.copyGoing(s, o, record, err, existing)
					}
					if err := r.revokeRefused(ctx, s, err); err != nil {
						return err
					}
				}
			}
		} else if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return err
		} else if err := r.fleet.SameCluster(ctx, s.cluster); err != nil {
			return err // gone from another cluster: nothing is known of the copy
		}
		if err := r.revokeStray(ctx, s); err != nil {
			return err
		}
	}
	return r.tookBack(ctx, s, o, record)
}

// refusedOfDeleted says whether err is a worker's refusal to delete the
// copy of a deleted hub Workload: the hub's credential may not, or a
// policy there forbids it. Such a copy is revoked in the worker's fencing
// Lease instead (revokeStray: its agent stops it and never admits it
// again, and the orphan collector keeps it revoked until it can be
// deleted), and the Workload goes once the agent stopped it; its deletion
// does not wait for ever on the worker's administrators.
func refusedOfDeleted(s *scope, err error) bool {
	return !s.wl.DeletionTimestamp.IsZero() && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err))
}

// revokeRefused revokes the dispatch of a copy its worker refused to
// delete (refused, refusedOfDeleted) in the worker's fencing Lease, and
// succeeds once a renewal wrote that and no Workload of the dispatch is
// admitted there any more: its agent stopped the copy. Every renewal
// after it sweeps the worker and keeps the revocation while the copy is
// there.
func (r *Reconciler) revokeRefused(ctx context.Context, s *scope, refused error) error {
	if !r.fleet.Revoke(s.cluster, s.dispatch, s.lastRenewed) {
		return fmt.Errorf("revoking dispatch %s on %s: %w", s.dispatch, s.cluster, errCopyGoing) // renewed since: the next reconcile decides again
	}
	ctrl.LoggerFrom(ctx).Info("The worker refuses to delete the copy of a deleted hub Workload; revoking it in the fencing Lease instead",
		"cluster", s.cluster, "dispatch", s.dispatch, "error", refused.Error())
	if !r.fleet.RevocationWritten(s.cluster, s.dispatch) {
		return fmt.Errorf("dispatch %s on %s is revoked, its fencing Lease not written yet: %w", s.dispatch, s.cluster, errCopyGoing)
	}
	_, running, err := r.fleet.DispatchOn(ctx, s.cluster, s.wl.UID, s.gen)
	if err != nil {
		return err
	}
	if running != nil {
		return fmt.Errorf("dispatch %s on %s is revoked and still admitted: %w", s.dispatch, s.cluster, errCopyGoing)
	}
	return nil
}

// takeBackUnreached ends a take-back whose worker does not answer
// (takeBackStep) without removing the copy: with revoke, the dispatch is
// revoked in the worker's fencing Lease first (its agent stopped the copy
// after fenceAfter, and never admits it again); the copy is removed when
// the worker returns, before its Lease is renewed.
func (r *Reconciler) takeBackUnreached(ctx context.Context, s *scope, o outcome, record, revoke bool) error {
	record = record && s.wl.DeletionTimestamp.IsZero()
	if revoke && !r.fleet.Revoke(s.cluster, s.dispatch, s.lastRenewed) {
		return errRenewedMeanwhile
	}
	ctrl.LoggerFrom(ctx).Info("Taking a copy back without removing it: its worker does not answer", "cluster", s.cluster, "dispatch", s.dispatch, "reason", o.reason, "revoked", revoke)
	return r.tookBack(ctx, s, o, record)
}

// tookBack ends a take-back once the copy is gone, or known stopped: the
// reservation ends and, with record, the Workload records outcome o.
func (r *Reconciler) tookBack(ctx context.Context, s *scope, o outcome, record bool) error {
	r.fleet.Release(s.cluster, s.flavor, s.dispatch)
	r.memory.forgetCopy(s.dispatch)
	if err := r.clearRun(ctx, s.job); err != nil {
		return err
	}
	if !s.wl.DeletionTimestamp.IsZero() {
		// Deleted: it goes now that its copy does not run.
		return r.letGo(ctx, s.key, s.wl)
	}
	if !record {
		return nil
	}
	s.change(func(ws *strata.WorkloadStatus) bool {
		workload.AccumulateExecution(s.wl.Spec.MaximumExecutionTimeSeconds, ws, r.clock.Now())
		dispatch.RecordOutcome(ws, o.result, o.reason, o.cause, o.message, r.clock.Now())
		meta.RemoveStatusCondition(&ws.Conditions, ConditionCopyGoing)
		meta.RemoveStatusCondition(&ws.Conditions, ConditionUnreachable)
		now := metav1.NewTime(r.clock.Now())
		switch {
		case o.requeue != nil:
			keepRequeue(ws, o.requeue, r.clock.Now())
		case o.reason == dispatch.ReasonDeactivated:
			// Deactivated, by its user or past a worker's
			// backoffLimitCount (refuse): counted anew once active
			// again, as Kueue does.
			ws.RequeueState = nil
			meta.SetStatusCondition(&ws.Conditions, metav1.Condition{Type: strata.WorkloadRequeued, Status: metav1.ConditionFalse,
				Reason: dispatch.ReasonDeactivated, Message: "the Workload is deactivated (spec.active: false)", LastTransitionTime: now})
			if o.cause == strata.MaximumExecutionTimeExceeded {
				// Its whole time again once active (Kueue's).
				ws.AccumulatedPastExecutionTimeSeconds = nil
			}
		}
		return true
	})
	s.afterWrite(func(context.Context) error {
		r.memory.undone(s.dispatch)
		// Until the cache shows the record, a reconcile would see the
		// dispatch placed and its copy gone, and send it again.
		r.memory.noteTakenBack(s.key, s.dispatch)
		return nil
	})
	return nil
}

// errKindServed: a copy is read from a worker whose discovery said it does
// not serve the copy's kind.
var errKindServed = errors.New("the worker's discovery said it does not serve the kind, yet the copy is there; waiting for discovery to be asked again")

// errCopyFinished: a copy about to be taken back finished on its worker;
// the informer is behind. Its result is mirrored first (nextStep, once the
// informer shows it): taking it back would lose the result, and the job
// would run again.
var errCopyFinished = errors.New("the copy finished on its worker; its result is mirrored before anything else")

// notFinishedLive reads the current dispatch's copy from its worker
// before a take-back that records an outcome deletes it: the informer may
// not show yet that it finished. A read that fails, or a copy already
// gone, says nothing against the take-back.
func (r *Reconciler) notFinishedLive(ctx context.Context, s *scope) error {
	c, err := r.fleet.Client(s.cluster)
	if err != nil {
		return nil
	}
	live := s.job.kind.NewObject()
	if err := c.Get(ctx, s.job.key, live); err != nil {
		return nil
	}
	if uid, _, _ := dispatch.CopyOf(live); uid != s.wl.UID || !live.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if j, ok := s.job.kind.Adapt(live); ok && jobs.Decided(j) {
		return fmt.Errorf("%w: %s/%s on %s", errCopyFinished, live.GetNamespace(), live.GetName(), s.cluster)
	}
	return nil
}

// copyGoing is scope.copyGoing for a take-back that records outcome o
// (record): the backoff of a copy whose pods were not ready in time is
// written with the first CopyGoing, not only once the copy is gone. A
// hub that restarts meanwhile forgets o (held in memory), and would
// otherwise record the take-back without the count, and place the Job
// again at once, counted anew.
func (r *Reconciler) copyGoing(s *scope, o outcome, record bool, err error, copyJob client.Object) error {
	if record && o.requeue != nil && errors.Is(err, errCopyGoing) && s.wl.DeletionTimestamp.IsZero() {
		s.change(func(ws *strata.WorkloadStatus) bool { return keepRequeue(ws, o.requeue, r.clock.Now()) })
	}
	return s.copyGoing(err, copyJob)
}

// keepRequeue sets a hub Workload's requeueState to rq, the backoff of its
// copy's eviction for pods not ready in time, and Kueue's Requeued=False
// (reason PodsReadyTimeout) at now until the dispatcher finds the backoff
// over. It returns whether it changed ws.
func keepRequeue(ws *strata.WorkloadStatus, rq *strata.RequeueState, now time.Time) bool {
	changed := !equality.Semantic.DeepEqual(ws.RequeueState, rq)
	ws.RequeueState = rq.DeepCopy()
	return meta.SetStatusCondition(&ws.Conditions, metav1.Condition{Type: strata.WorkloadRequeued, Status: metav1.ConditionFalse,
		Reason: strata.EvictedByPodsReadyTimeout, Message: "its copy's pods were not ready in time; it waits out the backoff", LastTransitionTime: metav1.NewTime(now)}) || changed
}

// copyGoing passes err on; when it says the copy is still going, the hub
// Workload says so first, with what keeps the copy.
func (s *scope) copyGoing(err error, copyJob client.Object) error {
	if errors.Is(err, errCopyGoing) {
		s.change(func(ws *strata.WorkloadStatus) bool { return setCopyGoing(ws, s.cluster, copyJob) })
	}
	return err
}

// abandon ends a dispatch without removing its copy, for reason: the
// worker cannot be reached (its agent fenced the copy, and the hub removes
// it before it renews that worker's Lease again), or its administrators
// gave its copies up. The reservation ends and the Workload is placed
// again.
//
// Unless the copy was never sent, the dispatch is first revoked in the
// worker's fencing Lease, so that its agent never resumes the copy; a
// renewal that reached the worker since the decision's view makes the
// reconcile decide again (errRenewedMeanwhile).
func (r *Reconciler) abandon(ctx context.Context, s *scope, reason, message string) error {
	// A copy never sent, or on a cluster the worker's name no longer
	// reaches, is not revoked: no Lease the hub writes reaches it.
	if reason != ReasonCopyNotSent && reason != ReasonClusterChanged && !r.fleet.Revoke(s.cluster, s.dispatch, s.lastRenewed) {
		return errRenewedMeanwhile
	}
	r.release(s.cluster, s.flavor, s.dispatch)
	if err := r.clearRun(ctx, s.job); err != nil {
		return err
	}
	s.change(func(ws *strata.WorkloadStatus) bool {
		workload.AccumulateExecution(s.wl.Spec.MaximumExecutionTimeSeconds, ws, r.clock.Now())
		dispatch.RecordOutcome(ws, strata.PlacementUnreachable, reason, reason, message, r.clock.Now())
		meta.RemoveStatusCondition(&ws.Conditions, ConditionUnreachable)
		meta.RemoveStatusCondition(&ws.Conditions, ConditionCopyGoing)
		return true
	})
	s.afterWrite(func(ctx context.Context) error {
		// Until the cache shows the record, a reconcile would see the
		// dispatch placed and no copy there, and send it (takeBack's).
		r.memory.noteTakenBack(s.key, s.dispatch)
		ctrl.LoggerFrom(ctx).Info("Placing a workload again without its copy known gone", "cluster", s.cluster, "dispatch", s.dispatch, "reason", reason)
		metrics.HubRejections.WithLabelValues(s.cluster, reason).Inc()
		if s.hubJob != nil {
			r.recorder.Eventf(s.hubJob.Object(), s.updated, corev1.EventTypeWarning, reason, "Dispatch", "%s", intake.Truncate(message, intake.MaxEventNote))
		}
		return nil
	})
	return nil
}

// confirmGone handles an admitted copy that the worker's informer no
// longer shows: confirmed gone by a read from the worker, it was deleted
// there (by its administrators, or with its namespace) before it
// finished. It is never created again under the same dispatch — it may
// have run — but recorded as a refusal by that worker (it goes into
// backoff) and placed again.
func (r *Reconciler) confirmGone(ctx context.Context, s *scope) (ctrl.Result, error) {
	c, err := r.fleet.Client(s.cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
	}
	live := s.job.kind.NewObject()
	relabelled := false
	if err := c.Get(ctx, s.job.key, live); err == nil {
		if uid, gen, _ := dispatch.CopyOf(live); uid == s.wl.UID && gen == s.gen {
			if live.GetLabels()[strata.OriginLabel] == r.fleet.Origin() {
				return ctrl.Result{RequeueAfter: informerBehindRetry}, nil // the informer is behind
			}
			// The copy, its origin label taken off there: the hub's
			// informers, which select on it, never show it again. It is
			// taken back (takeBack reads it live) and placed again —
			// unless it finished: its result, read live, is mirrored
			// onto the hub's job, which then finishes.
			if j, ok := s.job.kind.Adapt(live); ok && live.GetDeletionTimestamp().IsZero() && jobs.Decided(j) {
				if s.hubJob == nil {
					return ctrl.Result{RequeueAfter: informerBehindRetry}, nil
				}
				return ctrl.Result{RequeueAfter: informerBehindRetry}, r.syncJobStatus(ctx, s.hubJob, j)
			}
			relabelled = true
		}
		// Another object of that name (another hub's, a user's): ours is
		// gone, unless a Workload there still carries this dispatch.
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	// The agent keeps a copy's dispatch labels on its Workload: one that
	// still carries this dispatch is the copy, its Job's labels edited
	// (or the Job going while its Workload stays). It is revoked in the
	// fencing Lease, so that the agent stops it and never admits it again,
	// and the workload is placed again only once it does not run.
	if err := r.revokeStray(ctx, s); errors.Is(err, errCopyGoing) {
		if s.runningCopy != nil && s.wl.Status.Admission != nil {
			// Said on the hub Workload, with the pods the agent names:
			// still admitted here, so that no decision takes it for a
			// take-back an earlier process left (takenBackBefore); the
			// refusal's record clears it.
			_ = s.copyGoing(err, s.runningCopy) // err itself, passed on
		}
		return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.fleet.SameCluster(ctx, s.cluster); err != nil {
		// Gone from another cluster than the one it was sent to: nothing
		// is known of the copy; the WorkerCluster says so.
		ctrl.LoggerFrom(ctx).Info("Not acting on a copy found gone: the worker's identity could not be confirmed", "cluster", s.cluster, "error", err.Error())
		return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
	}
	if relabelled {
		return ctrl.Result{}, r.refuse(ctx, s, relabelledOutcome(s.cluster))
	}
	return ctrl.Result{}, r.refuse(ctx, s, outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonCopyDeleted,
		message: fmt.Sprintf("the admitted copy was deleted on %s before it finished; placing it again", s.cluster)})
}

// relabelledOutcome is the refusal of a copy whose strata.dev/origin label
// was taken off on its worker.
func relabelledOutcome(cluster string) outcome {
	return outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonCopyChanged,
		message: fmt.Sprintf("the copy's %s label was removed on %s, which hides it from the hub: it is taken back and the workload placed again", strata.OriginLabel, cluster)}
}

// revokeStray handles a dispatch whose copy the hub cannot find by its
// Job: the agent keeps a copy's dispatch labels on its Workload, so a
// Workload there that still carries the dispatch is the copy, its Job's
// labels edited (or the Job going while its Workload stays). The dispatch
// is revoked in the worker's fencing Lease, so that the agent stops it
// and never admits it again; while it is admitted, errCopyGoing says to
// wait before placing the workload again.
func (r *Reconciler) revokeStray(ctx context.Context, s *scope) error {
	exists, running, err := r.fleet.DispatchOn(ctx, s.cluster, s.wl.UID, s.gen)
	if err != nil {
		return err
	}
	s.runningCopy = running
	// A copy whose create had an unknown outcome may land after the read
	// that did not find it (the request still on its way through the
	// worker's API server): revoked all the same, so that its agent
	// never admits it once the workload is placed elsewhere.
	if !exists && !r.memory.createUnknown(s.dispatch) {
		return nil
	}
	if !r.fleet.Revoke(s.cluster, s.dispatch, s.lastRenewed) {
		return fmt.Errorf("revoking dispatch %s on %s: %w", s.dispatch, s.cluster, errCopyGoing) // renewed since: the next reconcile decides again
	}
	if !r.fleet.RevocationWritten(s.cluster, s.dispatch) {
		// The worker answers: until its Lease lists the revocation (a
		// renewal is asked for at once), its agent may still admit the
		// copy, which would then run beside the workload placed
		// elsewhere. The next reconcile reads the Workload there again.
		return fmt.Errorf("dispatch %s on %s is revoked, its fencing Lease not written yet: %w", s.dispatch, s.cluster, errCopyGoing)
	}
	if running != nil {
		ctrl.LoggerFrom(ctx).Info("A Workload of the dispatch may still run though its Job is gone or no longer carries this hub's labels: revoked, waiting for the agent to stop it",
			"cluster", s.cluster, "dispatch", s.dispatch)
		return fmt.Errorf("dispatch %s on %s is revoked and may still run: %w", s.dispatch, s.cluster, errCopyGoing)
	}
	return nil
}

// forget takes back the copy of a hub Workload that is gone.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	k, ok := r.memory.knownOf(key)
	if !ok {
		return nil // never dispatched by this process: the orphan check finds its copy
	}
	r.release(k.cluster, k.flavor, dispatch.Key(k.uid, k.generation))
	copyJob, _, err := r.fleet.Copy(ctx, k.cluster, k.job.kind, k.job.key)
	if errors.Is(err, fleet.ErrKindNotServed) {
		err = nil // no copy of that kind can be there
	}
	if err != nil {
		return err
	}
	var obj client.Object
	if copyJob != nil {
		obj = copyJob.Object()
	} else if c, cerr := r.fleet.Client(k.cluster); cerr == nil {
		// The informer may not show a copy created a moment ago: read it
		// from the worker, or it would run on beside the new Workload's
		// until the orphan check finds it.
		live := k.job.kind.NewObject()
		if err := c.Get(ctx, k.job.key, live); err == nil {
			obj = live
		} else if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return err
		}
	}
	if obj != nil {
		if uid, _, _ := dispatch.CopyOf(obj); uid == k.uid {
			if err := r.deleteCopy(ctx, k.cluster, obj); err != nil {
				return err
			}
		}
	}
	r.memory.untrack(key)
	return nil
}

// letGo lets a deleted hub Workload go, its copy gone or known stopped
// (or never sent): it removes strata.CopyGoneFinalizer, and this process
// forgets the Workload, whose copy there is nothing more to do for.
func (r *Reconciler) letGo(ctx context.Context, key types.NamespacedName, wl *strata.Workload) error {
	if !controllerutil.ContainsFinalizer(wl, strata.CopyGoneFinalizer) {
		return nil
	}
	r.memory.untrack(key)
	patched := wl.DeepCopy()
	controllerutil.RemoveFinalizer(patched, strata.CopyGoneFinalizer)
	ctrl.LoggerFrom(ctx).V(2).Info("Letting a deleted hub Workload go: its copy does not run", "workload", key)
	return client.IgnoreNotFound(r.client.Patch(ctx, patched, client.MergeFromWithOptions(wl, client.MergeFromWithOptimisticLock{})))
}

// release ends a dispatch's reservation and forgets what this process
// knew of it.
func (r *Reconciler) release(cluster, flavor, key string) {
	r.fleet.Release(cluster, flavor, key)
	r.memory.forgetDispatch(key)
}

// clearRun takes a removed copy's run off the hub job's status: nothing
// of it is active or ready any more.
func (r *Reconciler) clearRun(ctx context.Context, jobRef ref) error {
	obj := jobRef.kind.NewObject()
	if err := r.client.Get(ctx, jobRef.key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	j, _ := jobRef.kind.Adapt(obj)
	if !j.ClearRun() {
		return nil
	}
	if err := r.client.Status().Update(ctx, obj); err != nil && !apierrors.IsInvalid(err) {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// removeCopy deletes a copy whose workload may be placed again; with
// wait, in the foreground (the copy stays until its pods are gone) and it
// returns errCopyGoing until the copy is gone.
func (r *Reconciler) removeCopy(ctx context.Context, cluster string, copyJob client.Object, wait bool) error {
	if !wait {
		return r.deleteCopy(ctx, cluster, copyJob)
	}
	if copyJob.GetDeletionTimestamp().IsZero() {
		if err := r.delete(ctx, cluster, copyJob, metav1.DeletePropagationForeground); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s/%s on %s: %w", copyJob.GetNamespace(), copyJob.GetName(), cluster, errCopyGoing)
}

// deleteCopy deletes a copy on a worker, its pods after it.
func (r *Reconciler) deleteCopy(ctx context.Context, cluster string, copyJob client.Object) error {
	return r.delete(ctx, cluster, copyJob, metav1.DeletePropagationBackground)
}

// delete deletes a copy on a worker with the given propagation.
func (r *Reconciler) delete(ctx context.Context, cluster string, copyJob client.Object, propagation metav1.DeletionPropagation) error {
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return err
	}
	uid := copyJob.GetUID()
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting a copy", "cluster", cluster, "job", client.ObjectKeyFromObject(copyJob), "labels", copyJob.GetLabels(), "propagation", propagation)
	err = c.Delete(ctx, copyJob, client.PropagationPolicy(propagation), client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if apierrors.IsForbidden(err) {
		resource := "jobs"
		if j, ok := jobs.AdaptAny(kinds.Hub, copyJob); ok {
			resource = jobs.Resource(j.Kind())
		}
		message := fmt.Sprintf("the hub's credential may not delete %s in namespace %s on %s: its copies there cannot be taken back", resource, copyJob.GetNamespace(), cluster)
		if cerr := r.setDispatching(ctx, cluster, metav1.ConditionFalse, ReasonForbidden, message); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}
