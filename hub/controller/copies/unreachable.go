package copies

import (
	"errors"
	"fmt"
	"time"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
)

// drainingStep decides on a dispatch to a WorkerCluster being deleted: its
// copy is taken back, and the workload placed elsewhere once the copy and
// its pods are gone; while the worker does not answer, as for any
// unreachable worker (with fencing, placed elsewhere after replaceAfter);
// at once when an administrator gave up the worker's copies.
func drainingStep(o *observed, now time.Time) step {
	switch {
	case o.wc.Annotations[strata.AbandonCopiesAnnotation] == "true":
		return step{action: actAbandon, why: "the draining worker's copies were given up", outcome: outcome{reason: ReasonWorkerClusterDeleted, message: fmt.Sprintf(
			"WorkerCluster %s is being deleted and its copies were given up (%s=true); placing it again without knowing whether its copy there still runs",
			o.wc.Name, strata.AbandonCopiesAnnotation)}}
	case o.down != "":
		return unreachableStep(o, o.down, true, now)
	case o.connErr != nil:
		return unreachableStep(o, o.connErr.Error(), false, now)
	}
	s := refuseStep("the WorkerCluster is being deleted", strata.PlacementEvicted, ReasonWorkerClusterDeleted,
		fmt.Sprintf("WorkerCluster %s is being deleted: its copy is taken back, and the workload placed elsewhere once the copy's pods are gone", o.wc.Name))
	return s
}

// takeBackStep decides on st, a take-back the hub asks for (its job
// deleted, its Workload deactivated or evicted), when the copy's worker
// does not answer: the copy cannot be removed, and retrying the removal
// would wait, with nothing said, for as long as the worker is gone. The
// take-back is then as for any unreachable worker: the Workload says the
// worker does not answer; with fencing, the take-back ends replaceAfter
// after the hub's last renewal of the worker's Lease (its agent stopped
// the copy by then), the dispatch revoked there; at once for a copy never
// sent; without fencing, once the worker answers. A worker that answers,
// or a WorkerCluster that is gone, leaves st as it is.
func takeBackStep(o *observed, st step, now time.Time) step {
	if o.wc == nil || o.wcErr != nil {
		return st // takeBack goes on without the worker, or fails on the read
	}
	why, down := o.down, o.down != ""
	if !down {
		if !errors.Is(o.copyErr, fleet.ErrNotConnected) {
			return st
		}
		why = o.copyErr.Error()
	}
	unreached := st
	unreached.action = actTakeBackUnreached
	if !o.copyMayExist {
		unreached.why += "; the worker does not answer and the copy was never sent"
		return unreached
	}
	if !down && now.Sub(o.lastRenewed) < connectGrace {
		return step{action: actNone, why: st.why + "; the worker is not connected yet", requeue: connectGrace}
	}
	fc := o.cfg.Fencing
	if fc.Mode != configv1beta1.FencingEnabled {
		return step{action: actMarkUnreachable, why: st.why + "; the worker does not answer; no fencing", requeue: unreachableRetry, message: fmt.Sprintf(
			"%s; worker %s does not answer (%s): its copy is removed when it answers again (fencing is Disabled)", st.outcome.message, o.cluster, why)}
	}
	replace, fenced := fleet.ReplaceWait(fc.ReplaceAfter.Duration, fc.FenceAfter.Duration, o.published, o.publishedKnown)
	if !fenced {
		return step{action: actMarkUnreachable, why: st.why + "; the worker does not answer; its Lease carries no duration", requeue: unreachableRetry, message: fmt.Sprintf(
			"%s; worker %s does not answer (%s): %s; its copy is removed when it answers again", st.outcome.message, o.cluster, why, unfencedWhy)}
	}
	at := o.lastRenewed.Add(replace)
	if wait := at.Sub(now); wait > 0 {
		return step{action: actMarkUnreachable, why: st.why + "; the worker does not answer; fenced within replaceAfter", requeue: min(wait, unreachableRetry), message: fmt.Sprintf(
			"%s; worker %s does not answer (%s): the hub last renewed its fencing Lease there at %s, its agent stops the copy %s after that, and the hub counts the copy stopped at %s",
			st.outcome.message, o.cluster, why, o.lastRenewed.UTC().Format(time.RFC3339), fenceAfterOf(o), at.UTC().Format(time.RFC3339))}
	}
	unreached.why += "; the worker has not answered for replaceAfter"
	unreached.revoke = true
	return unreached
}

// unreachableStep decides on a dispatch whose worker does not answer
// (why; down when the health probe says so). Nothing is sent elsewhere
// while the copy may run: with fencing, until replaceAfter from the hub's
// last renewal of the worker's fencing Lease (its agent stopped the copy
// after fenceAfter); without, for as long as the worker is gone. The
// Workload says which.
func unreachableStep(o *observed, why string, down bool, now time.Time) step {
	if o.finished() {
		return step{action: actNone, why: "finished; its copy goes once the worker answers", requeue: unreachableRetry}
	}
	if !o.copyMayExist {
		// Nothing of this dispatch reached the worker: no copy can run
		// there, so nothing waits for fencing.
		return step{action: actAbandon, why: "the worker does not answer and the copy was never sent", outcome: outcome{reason: ReasonCopyNotSent, message: fmt.Sprintf(
			"worker %s does not answer (%s) and the copy of this dispatch was never sent there: no copy can run there; placing it again at once", o.cluster, why)}}
	}
	if !down && now.Sub(o.lastRenewed) < connectGrace {
		// Not connected yet (a hub that just started, a new credential):
		// nothing to say before the connection had its chance.
		return step{action: actNone, why: "the worker is not connected yet", requeue: connectGrace}
	}
	fc := o.cfg.Fencing
	if fc.Mode != configv1beta1.FencingEnabled {
		return step{action: actMarkUnreachable, why: "the worker does not answer; no fencing", requeue: unreachableRetry, message: fmt.Sprintf(
			"worker %s does not answer (%s); fencing is Disabled: the workload waits for it and is never placed elsewhere while its copy may run", o.cluster, why)}
	}
	replace, fenced := fleet.ReplaceWait(fc.ReplaceAfter.Duration, fc.FenceAfter.Duration, o.published, o.publishedKnown)
	if !fenced {
		return step{action: actMarkUnreachable, why: "the worker does not answer; its Lease carries no duration", requeue: unreachableRetry, message: fmt.Sprintf(
			"worker %s does not answer (%s); %s: the workload waits for the worker and is not placed elsewhere while its copy may run", o.cluster, why, unfencedWhy)}
	}
	since := o.lastRenewed
	at := since.Add(replace)
	if wait := at.Sub(now); wait > 0 {
		return step{action: actMarkUnreachable, why: "the worker does not answer; fenced within replaceAfter", requeue: min(wait, unreachableRetry), message: fmt.Sprintf(
			"worker %s does not answer (%s); the hub last renewed its fencing Lease there at %s: its agent stops the copy %s after that, and the hub places the workload elsewhere at %s",
			o.cluster, why, since.UTC().Format(time.RFC3339), fenceAfterOf(o), at.UTC().Format(time.RFC3339))}
	}
	return step{action: actAbandon, why: "the worker has not answered for replaceAfter", outcome: outcome{reason: ReasonWorkerUnreachable, message: fmt.Sprintf(
		"worker %s has not answered since the hub last renewed its fencing Lease there at %s, for longer than fencing.replaceAfter (%s); its agent stopped the copy after fenceAfter (%s); placing it again (the copy there is removed when the worker returns, before it is renewed)",
		o.cluster, since.UTC().Format(time.RFC3339), replace, fenceAfterOf(o))}}
}

// unfencedWhy says why a worker's agent never stops the hub's copies
// though fencing is Enabled now: the Lease it last saw has no duration.
const unfencedWhy = "the hub's last renewal of its fencing Lease there carried no duration (fencing was Disabled then), so its agent never stops the copy; it does once a renewal with fencing Enabled lands"

// fenceAfterOf is how long after the last renewal the worker's agent
// stops the hub's copies: the duration its Lease last carried when known,
// else the hub's fenceAfter.
func fenceAfterOf(o *observed) time.Duration {
	if o.publishedKnown && o.published > 0 {
		return o.published
	}
	return o.cfg.Fencing.FenceAfter.Duration
}

// oldClusterStep decides on a dispatch made to the cluster a worker's name
// stood for before its WorkerCluster accepted another: its copy may still
// run there, out of the hub's reach. With fencing, it is placed again
// replaceAfter after the hub's last renewal of the old cluster's Lease
// (its agent stopped the copy by then); without, at once (accepting the
// new cluster gave those copies up).
func oldClusterStep(o *observed, now time.Time) step {
	sw, fc := o.switched, o.cfg.Fencing
	if fc.Mode == configv1beta1.FencingEnabled {
		at := sw.LastRenewal.Add(fc.ReplaceAfter.Duration)
		if wait := at.Sub(now); wait > 0 {
			return step{action: actMarkUnreachable, why: "dispatched to the cluster the worker stood for before", requeue: min(wait, unreachableRetry), message: fmt.Sprintf(
				"worker %s now reaches another cluster (ID %s, accepted); this workload's copy may still run on the one it was sent to (ID %s) until its agent stops it, fenceAfter (%s) after the hub's last renewal there at %s: the hub places it elsewhere at %s",
				o.cluster, sw.To, sw.From, fc.FenceAfter.Duration, sw.LastRenewal.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))}
		}
	}
	return step{action: actAbandon, why: "dispatched to the cluster the worker stood for before", outcome: outcome{reason: ReasonClusterChanged, message: fmt.Sprintf(
		"worker %s now reaches another cluster (ID %s, accepted) than the one this workload was sent to (ID %s); placing it again", o.cluster, sw.To, sw.From)}}
}
