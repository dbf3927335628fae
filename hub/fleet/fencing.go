package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
)

// Fencing is the hub's side of fencing (HubConfiguration.fencing): a Lease
// per worker, renewed every RenewInterval while the worker answers, with
// FenceAfter as its duration; without Enabled, the Lease has no duration
// and no agent stops a copy for the hub's silence.
type Fencing struct {
	Enabled       bool
	Namespace     string
	FenceAfter    time.Duration
	RenewInterval time.Duration
	// ReplaceAfter is how long after the last renewal that may have
	// landed the worker's agent has certainly stopped the hub's copies
	// (fencing.replaceAfter: FenceAfter and a margin).
	ReplaceAfter time.Duration
}

// SetClock replaces the real clock that fencing measures the hub's side
// with (tests give the hub a clock of its own); call it before Start.
func (f *Fleet) SetClock(c clock.PassiveClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock = c
}

// SetFencing configures the fencing Leases; call it before Start.
func (f *Fleet) SetFencing(fc Fencing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fencing = &fc
}

// BeforeRenew sets what runs before the hub renews the fencing Lease of a
// worker it has not renewed since it connected or since a renewal failed
// (a worker that returns), or that has revoked dispatches: the Lease is
// renewed only once fn succeeds. The hub removes there the copies whose
// workloads it placed elsewhere meanwhile, which the worker's agent would
// otherwise resume; fn reports those it could not remove (revoked in the
// Lease instead) and the dispatches of every copy there (revocations of
// copies gone end).
func (f *Fleet) BeforeRenew(fn func(ctx context.Context, worker string) (Sweep, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beforeRenew = fn
}

// LastRenewed is when the hub last attempted a renewal of a worker's
// fencing Lease that may have reached it (one that succeeded, or whose
// outcome is unknown), on the hub's clock; if this process never did, when
// it first tried to connect to the worker, or else when it started (an
// earlier hub process may have renewed it until then).
func (f *Fleet) LastRenewed(name string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.renewed[name]; ok {
		return t
	}
	if f.startedAt.IsZero() {
		return f.clock.Now() // not started yet: nothing has been silent for long
	}
	return f.startedAt
}

// fenceState is how a worker's last Lease renewal went.
type fenceState struct {
	// failed says why the last renewal failed for certain (the Lease was
	// not written); "" when it was written or may have been.
	failed string
	// reason names the failure: the API error's reason, or
	// ReasonSweepFailed, ReasonRenewalUnreachable, ReasonClusterChanged.
	reason string
}

// Reasons of a failed renewal that are not the API's.
const (
	// ReasonSweepFailed: the copies placed elsewhere meanwhile could not
	// be removed from the worker, so its Lease is not renewed.
	ReasonSweepFailed = "SweepFailed"
	// ReasonRenewalUnreachable: the renewal never reached the worker.
	ReasonRenewalUnreachable = "Unreachable"
	// ReasonClusterChanged: the worker's address reaches another cluster
	// than the one the hub dispatched to; nothing is written there.
	ReasonClusterChanged = "ClusterChanged"
)

// FenceFailure says why the hub cannot renew a worker's fencing Lease now
// (reason and message); "" when the last renewal wrote it, may have, or
// none was tried yet. While fencing is on, such a worker is not a dispatch
// target: its agent is about to stop the hub's copies.
func (f *Fleet) FenceFailure(name string) (reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.fences[name]
	return st.reason, st.failed
}

// fenceBlocks is FenceFailure while fencing is on, and "" otherwise.
func (f *Fleet) fenceBlocks(name string) (reason, message string) {
	f.mu.Lock()
	enabled := f.fencing != nil && f.fencing.Enabled
	f.mu.Unlock()
	if !enabled {
		return "", ""
	}
	return f.FenceFailure(name)
}

// noteRenewal records how a renewal of a worker's Lease went, and tells
// the WorkerCluster controller and the dispatcher when that changes.
func (f *Fleet) noteRenewal(ctx context.Context, name string, st fenceState, renewedAt time.Time) {
	f.mu.Lock()
	published := false
	if !renewedAt.IsZero() {
		f.renewed[name] = renewedAt
		published = f.publishLocked(name)
	}
	was := f.fences[name]
	f.fences[name] = st
	f.mu.Unlock()
	if st.failed != "" {
		metrics.HubFenceRenewalFailures.WithLabelValues(name, st.reason).Inc()
	}
	if was != st || published {
		f.notify(ctx, name)
	}
}

// leaseDuration is the duration this process's renewals write on a
// worker's Lease: fenceAfter, in whole seconds, or none (0) without
// fencing Enabled.
func leaseDuration(fc *Fencing) time.Duration {
	if fc == nil || !fc.Enabled {
		return 0
	}
	return fc.FenceAfter.Truncate(time.Second)
}

// publishLocked notes that a renewal of worker name that may have landed
// carried this process's Lease duration; it returns whether that changed
// what is known of the worker's Lease. f.mu held.
func (f *Fleet) publishLocked(name string) bool {
	d := leaseDuration(f.fencing)
	if old, ok := f.published[name]; ok && old == d {
		return false
	}
	f.published[name] = d
	return true
}

// Published returns the Lease duration the hub's last renewal of worker
// name that may have landed carried (0: none), as this process wrote it
// or, before it renewed the worker, as its WorkerCluster recorded
// (SeedPublished); false when neither knows.
func (f *Fleet) Published(name string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.published[name]
	return d, ok
}

// SeedPublished gives what a worker's WorkerCluster recorded of its
// Lease's duration (written by an earlier hub process), unless this
// process renewed the worker since.
func (f *Fleet) SeedPublished(name string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.published[name]; !ok {
		f.published[name] = d
	}
}

// ReplaceWait is how long after the hub's last renewal of a worker's
// Lease that may have landed its agent has certainly stopped the hub's
// copies: replaceAfter, longer by as much as the duration that Lease
// carried (published, when known) exceeds fenceAfter (the setting
// lowered since). fenced is false when that Lease carried no duration
// (fencing was Disabled when it was written): its agent never stops
// them, whatever this hub's settings are now.
func ReplaceWait(replaceAfter, fenceAfter, published time.Duration, known bool) (wait time.Duration, fenced bool) {
	if !known {
		return replaceAfter, true
	}
	if published <= 0 {
		return 0, false
	}
	return replaceAfter + max(published-fenceAfter, 0), true
}

// notWritten is the error of a renewal that failed before its write: a
// read that came first (the Lease, the worker's identity) failed.
type notWritten struct{ err error }

func (e notWritten) Error() string { return e.err.Error() }
func (e notWritten) Unwrap() error { return e.err }

// renewalFailure describes a renewal that certainly did not write the
// Lease; ok is false when it may have (its outcome is unknown).
func renewalFailure(err error) (st fenceState, ok bool) {
	if err == nil {
		return fenceState{}, false
	}
	if errors.Is(err, ErrClusterChanged) {
		return fenceState{reason: ReasonClusterChanged, failed: err.Error()}, true // read, never written
	}
	if errors.As(err, new(notWritten)) {
		reason := string(apierrors.ReasonForError(err))
		if reason == "" || reason == string(metav1.StatusReasonUnknown) {
			reason = ReasonRenewalUnreachable
		}
		return fenceState{reason: reason, failed: err.Error()}, true // the write was never sent
	}
	switch RequestOutcome(err) {
	case NotSent:
		return fenceState{reason: ReasonRenewalUnreachable, failed: err.Error()}, true
	case Refused:
		reason := string(apierrors.ReasonForError(err))
		if reason == "" {
			reason = "Refused"
		}
		return fenceState{reason: reason, failed: err.Error()}, true
	}
	return fenceState{}, false
}

// renewFence renews the worker's fencing Lease every renewInterval until
// ctx ends.
func (f *Fleet) renewFence(ctx context.Context, name string, r *remote) {
	f.mu.Lock()
	fc := f.fencing
	f.mu.Unlock()
	if fc == nil {
		return
	}
	log := ctrl.Log.WithName("fencing").WithValues("cluster", name)
	wake := f.wakeChan(name)
	current := false // renewed since the connection, and the last renewal succeeded
	for {
		if err := f.prepareRenewal(ctx, name, current); err != nil {
			current = false
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrClusterChanged) {
				log.Info("Not renewing the fencing Lease: the worker's address reaches another cluster", "error", err.Error())
				f.noteRenewal(ctx, name, fenceState{reason: ReasonClusterChanged, failed: err.Error()}, time.Time{})
			} else {
				log.Info("Not renewing the fencing Lease: the copies placed elsewhere could not be removed from the worker first", "error", err.Error())
				f.noteRenewal(ctx, name, fenceState{reason: ReasonSweepFailed,
					failed: "the copies placed elsewhere meanwhile could not be removed from the worker, so its Lease is not renewed: " + err.Error()}, time.Time{})
			}
		} else {
			// The worker's renewing lock spans the write and its record:
			// a revocation (Revoke) lands either in this write or after
			// it, never between what the write read and its record.
			lock := f.renewLock(name)
			lock.Lock()
			err := f.renewOnce(ctx, fc, name, r, !current)
			// The clock reads after the attempt: a renewal whose outcome
			// is unknown may have landed up to then.
			at := f.clock.Now()
			failure, certain := renewalFailure(err)
			if ctx.Err() != nil {
				// The connection ends; a renewal that may have landed
				// still counts for replaceAfter.
				if err == nil || !certain {
					f.mu.Lock()
					f.renewed[name] = at
					f.publishLocked(name)
					f.mu.Unlock()
				}
				lock.Unlock()
				return
			}
			switch {
			case err == nil:
				if !current {
					log.V(2).Info("Renewed the fencing Lease")
				}
				current = true
				f.noteRenewal(ctx, name, fenceState{}, at)
			case certain:
				current = false
				log.Info("Could not renew the fencing Lease", "reason", failure.reason, "error", err.Error())
				f.noteRenewal(ctx, name, failure, time.Time{})
			default:
				// It may have been written: the agent may count from it, so
				// the hub's replaceAfter does too.
				current = false
				log.V(2).Info("A renewal of the fencing Lease has an unknown outcome; counting it as done", "error", err.Error())
				f.noteRenewal(ctx, name, fenceState{}, at)
			}
			lock.Unlock()
		}
		next := fc.RenewInterval
		if !current {
			next = min(next, probeInterval) // a worker that returns is renewed soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		case <-wake: // a revocation to write now
		}
	}
}

// prepareRenewal runs the BeforeRenew hook for a worker whose Lease is not
// current, or that has revoked dispatches, and settles its revocations.
func (f *Fleet) prepareRenewal(ctx context.Context, name string, current bool) error {
	f.mu.Lock()
	fn := f.beforeRenew
	pending := len(f.revoked[name])
	f.mu.Unlock()
	if (current && pending == 0) || fn == nil {
		return nil
	}
	sweep, err := fn(ctx, name)
	if err != nil {
		return err
	}
	f.settle(name, sweep)
	if n := len(f.Revoked(name)); n > MaxRevoked {
		return fmt.Errorf("%d dispatches to revoke on the worker, more than a fencing Lease lists (%d)", n, MaxRevoked)
	}
	return nil
}

// renewOnce writes the worker's fencing Lease: this hub holds it, renewed
// now, for fenceAfter (no duration when fencing is off), with the
// dispatches revoked there. A renewal that is not current (the first of a
// connection, or after a failure) first adopts the revocations the Lease
// already lists: written by this hub before a restart or by the replica
// it took over from, they are held in memory only, and dropping them
// would let the worker's agent resume a copy the hub placed elsewhere.
// So does a renewal that finds the Lease at another version than this
// process last wrote: another process of the hub wrote it since (a leader
// that took over while this one was paused, which it does not know yet),
// and its revocations are not in this one's memory. The next sweeps end
// those whose copies are gone (settle).
func (f *Fleet) renewOnce(ctx context.Context, fc *Fencing, name string, r *remote, adopt bool) error {
	key := types.NamespacedName{Namespace: fc.Namespace, Name: strata.FencingLeasePrefix + f.origin}
	var lease coordinationv1.Lease
	getCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	err := r.client.Get(getCtx, key, &lease)
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		return notWritten{err}
	}
	// The Lease is written on the cluster the hub dispatched to, or not at
	// all: through an address repointed to another cluster, a renewal
	// would tell that cluster's agent the hub is alive while the worker's
	// own agent, renewed no more, fences its copies unknown to the hub.
	f.mu.Lock()
	want := f.clusterIDs[name]
	f.mu.Unlock()
	if want != "" {
		if ierr := f.checkCluster(ctx, name, r.client, want); ierr != nil {
			return notWritten{ierr}
		}
	}
	if err == nil && (adopt || lease.ResourceVersion != f.leaseVersion(name)) {
		f.adoptRevoked(name, lease.Annotations[strata.RevokedDispatchesAnnotation])
	}
	revoked := f.Revoked(name)
	create := apierrors.IsNotFound(err)
	if create {
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	lease.Spec.HolderIdentity = ptr.To(f.origin)
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(f.clock.Now()))
	if len(revoked) > 0 {
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[strata.RevokedDispatchesAnnotation] = revokedValue(revoked)
	} else {
		delete(lease.Annotations, strata.RevokedDispatchesAnnotation)
	}
	lease.Spec.LeaseDurationSeconds = nil
	if fc.Enabled {
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(fc.FenceAfter / time.Second))
	}
	writeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if create {
		err = r.client.Create(writeCtx, &lease)
	} else {
		err = r.client.Update(writeCtx, &lease)
	}
	if err == nil {
		f.markWritten(name, revoked)
	}
	// The version this write left, or none when it failed: its outcome
	// may be unknown, and a Lease read at any version is then adopted.
	f.mu.Lock()
	f.leaseVersions[name] = lease.ResourceVersion
	if err != nil {
		delete(f.leaseVersions, name)
	}
	f.mu.Unlock()
	return err
}

// leaseVersion is the resourceVersion of the worker's fencing Lease this
// process last wrote ("" when none is known).
func (f *Fleet) leaseVersion(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaseVersions[name]
}
