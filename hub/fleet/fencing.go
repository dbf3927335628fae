package fleet

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	strata "strata.dev/strata/api/v1beta1"
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
}

// SetFencing configures the fencing Leases; call it before Start.
func (f *Fleet) SetFencing(fc Fencing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fencing = &fc
}

// BeforeRenew sets what runs before the hub renews the fencing Lease of a
// worker it has not renewed since it connected or since a renewal failed
// (a worker that returns): the Lease is renewed only once fn succeeds.
// The hub removes there the copies whose workloads it placed elsewhere
// meanwhile, which the worker's agent would otherwise resume.
func (f *Fleet) BeforeRenew(fn func(ctx context.Context, worker string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beforeRenew = fn
}

// LastRenewed is when the hub last renewed a worker's fencing Lease, or,
// if this process never did, when it first tried to connect to the worker,
// or else when it started (an earlier hub process may have renewed it until
// then).
func (f *Fleet) LastRenewed(name string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.renewed[name]; ok {
		return t
	}
	if f.startedAt.IsZero() {
		return time.Now() // not started yet: nothing has been silent for long
	}
	return f.startedAt
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
	current := false // renewed since the connection, and the last renewal succeeded
	for {
		err := f.prepareRenewal(ctx, name, current)
		if err == nil {
			err = f.renewOnce(ctx, fc, r)
		}
		if err != nil {
			current = false
			if ctx.Err() != nil {
				return
			}
			log.V(2).Info("Could not renew the fencing Lease", "error", err.Error())
		} else {
			if !current {
				log.V(2).Info("Renewed the fencing Lease")
			}
			current = true
			f.mu.Lock()
			f.renewed[name] = time.Now()
			f.mu.Unlock()
		}
		next := fc.RenewInterval
		if !current {
			next = min(next, probeInterval) // a worker that returns is renewed soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// prepareRenewal runs the BeforeRenew hook for a worker whose Lease is not
// current.
func (f *Fleet) prepareRenewal(ctx context.Context, name string, current bool) error {
	f.mu.Lock()
	fn := f.beforeRenew
	f.mu.Unlock()
	if current || fn == nil {
		return nil
	}
	return fn(ctx, name)
}

// renewOnce writes the worker's fencing Lease: this hub holds it, renewed
// now, for fenceAfter (no duration when fencing is off).
func (f *Fleet) renewOnce(ctx context.Context, fc *Fencing, r *remote) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	key := types.NamespacedName{Namespace: fc.Namespace, Name: strata.FencingLeasePrefix + f.origin}
	var lease coordinationv1.Lease
	err := r.client.Get(ctx, key, &lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(f.origin)
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	lease.Spec.LeaseDurationSeconds = nil
	if fc.Enabled {
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(fc.FenceAfter / time.Second))
	}
	if apierrors.IsNotFound(err) {
		lease.ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
		return r.client.Create(ctx, &lease)
	}
	return r.client.Update(ctx, &lease)
}
