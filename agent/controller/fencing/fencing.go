// Package fencing stops the copies of a hub that has gone silent. Every
// hub renews a Lease on this worker, strata-fence-<origin>, in the agent's
// fencing namespace, with its fencing.fenceAfter as the Lease's duration.
// Once a hub's Lease has not been renewed for that long, every admitted
// copy of that hub here is evicted (its job suspended by the job
// controller, its pods gone, its capacity free; condition Evicted, reason
// Fenced, and events), and the scheduler admits none of its copies until
// the Lease is renewed again. The hub places that worker's workloads
// elsewhere only after its fencing.replaceAfter, which exceeds fenceAfter
// by a margin: a workload never runs on two clusters at once, as long as
// this agent runs and the clocks are within the margin.
//
// The time since the last renewal is measured twice, on the hub's clock
// (the Lease's renewTime) and on the agent's (when it saw that renewTime),
// and the earlier deadline counts: a watch that lags, or an agent that
// restarts, never lets a copy run longer.
package fencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
)

// LeasePrefix starts the names of the hubs' fencing Leases; the rest is
// the hub's origin.
const LeasePrefix = strata.FencingLeasePrefix

// LeaseName is the fencing Lease of the hub of origin.
func LeaseName(origin string) string { return LeasePrefix + origin }

// ReasonFenced is the reason of the Evicted and Admitted conditions of a
// fenced hub's copies.
const ReasonFenced = "Fenced"

// Fence follows the hubs' fencing Leases and evicts the copies of a hub
// that stopped renewing its own.
type Fence struct {
	client    client.Client
	recorder  events.EventRecorder
	clock     clock.Clock
	namespace string
	// changed is called when a hub is fenced or renews again (the
	// scheduler's Wake).
	changed func()

	mu     sync.Mutex
	leases map[string]*observed // by origin
}

// observed is what the agent knows of one hub's Lease.
type observed struct {
	renewTime time.Time     // the hub's last renewal, on its clock
	seen      time.Time     // when the agent first saw that renewal
	duration  time.Duration // 0: the hub does not fence
	fenced    bool
}

// deadline is when the hub's copies are to be stopped; zero when never.
func (o *observed) deadline() time.Time {
	if o.duration == 0 {
		return time.Time{}
	}
	from := o.seen
	if !o.renewTime.IsZero() && o.renewTime.Before(from) {
		from = o.renewTime
	}
	return from.Add(o.duration)
}

// New returns a Fence of the Leases in namespace; changed is called when a
// hub's copies become admissible or stop being so.
func New(c client.Client, recorder events.EventRecorder, clk clock.Clock, namespace string, changed func()) *Fence {
	return &Fence{client: c, recorder: recorder, clock: clk, namespace: namespace, changed: changed, leases: map[string]*observed{}}
}

// Holds says why a workload may not be admitted now: it is a copy of a
// fenced hub. "" when it may.
func (f *Fence) Holds(wl *strata.Workload) string {
	origin := wl.Labels[strata.OriginLabel]
	if origin == "" || wl.Labels[strata.HubWorkloadUIDLabel] == "" {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.leases[origin]
	if o == nil || !o.fenced {
		return ""
	}
	return fenceMessage(origin, f.namespace, o)
}

func fenceMessage(origin, namespace string, o *observed) string {
	return fmt.Sprintf("hub %s has not renewed its fencing Lease %s/%s since %s (fenceAfter %s): its copies on this worker stay stopped until it renews the Lease",
		origin, namespace, LeaseName(origin), o.renewTime.UTC().Format(time.RFC3339), o.duration)
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the Lease controller.
func (f *Fence) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("fencing").
		For(&coordinationv1.Lease{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == f.namespace && strings.HasPrefix(o.GetName(), LeasePrefix)
		}))).
		Complete(f)
}

// Reconcile follows one hub's Lease: it records the renewal, and evicts
// the hub's admitted copies once the deadline passed.
func (f *Fence) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	origin := strings.TrimPrefix(req.Name, LeasePrefix)
	var lease coordinationv1.Lease
	if err := f.client.Get(ctx, req.NamespacedName, &lease); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// No Lease: that hub does not fence (or is gone); its copies are
		// not held.
		f.set(origin, nil)
		return ctrl.Result{}, nil
	}
	now := f.clock.Now()
	o := f.observe(origin, &lease, now)
	dl := o.deadline()
	if dl.IsZero() {
		return ctrl.Result{}, nil
	}
	if now.Before(dl) {
		return ctrl.Result{RequeueAfter: dl.Sub(now)}, nil
	}
	// Fenced: stop every admitted copy of that hub; look again while the
	// Lease is silent, for copies admitted meanwhile by an older view.
	return ctrl.Result{RequeueAfter: 10 * time.Second}, f.evictCopies(ctx, origin, fenceMessage(origin, f.namespace, o))
}

// observe records a Lease's renewal and says whether the hub is fenced now.
func (f *Fence) observe(origin string, lease *coordinationv1.Lease, now time.Time) *observed {
	var renew time.Time
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	var duration time.Duration
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	f.mu.Lock()
	o := f.leases[origin]
	was := o != nil && o.fenced
	if o == nil || !o.renewTime.Equal(renew) {
		o = &observed{renewTime: renew, seen: now}
		f.leases[origin] = o
	}
	o.duration = duration
	dl := o.deadline()
	o.fenced = !dl.IsZero() && !now.Before(dl)
	out := *o
	f.mu.Unlock()
	if was != out.fenced {
		if out.fenced {
			ctrl.Log.WithName("fencing").Info("Fencing a silent hub: stopping its copies", "origin", origin, "lastRenewal", renew, "fenceAfter", duration)
		} else {
			ctrl.Log.WithName("fencing").Info("The hub renewed its Lease: its copies may run again", "origin", origin)
		}
		f.changed()
	}
	return &out
}

// set replaces what is known of a hub's Lease (nil: none).
func (f *Fence) set(origin string, o *observed) {
	f.mu.Lock()
	was := f.leases[origin] != nil && f.leases[origin].fenced
	if o == nil {
		delete(f.leases, origin)
	} else {
		f.leases[origin] = o
	}
	f.mu.Unlock()
	if was {
		f.changed()
	}
}

// evictCopies evicts the admitted copies of the hub of origin.
func (f *Fence) evictCopies(ctx context.Context, origin, message string) error {
	var wls strata.WorkloadList
	if err := f.client.List(ctx, &wls, client.MatchingLabels{strata.OriginLabel: origin}); err != nil {
		return err
	}
	// A few at a time: a worker may hold hundreds of the hub's copies, and
	// all must stop well within the margin before replaceAfter.
	sem := make(chan struct{}, evictWriters)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range wls.Items {
		wl := &wls.Items[i]
		if wl.Status.Admission == nil || wl.Labels[strata.HubWorkloadUIDLabel] == "" ||
			meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f.evict(ctx, wl, message); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// evictWriters bounds the concurrent evictions of a fenced hub's copies.
const evictWriters = 16

// evict sends a copy's Workload back to its queue; the job controller
// suspends the copy, and the scheduler holds it while the hub is fenced.
func (f *Fence) evict(ctx context.Context, wl *strata.Workload, message string) error {
	wl = wl.DeepCopy()
	wl.Status.Admission = nil
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonFenced, Message: message})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonFenced, Message: message})
	if err := f.client.Status().Update(ctx, wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	f.recorder.Eventf(wl, nil, corev1.EventTypeWarning, ReasonFenced, "Evict", "%s", message)
	copyObj := f.copyOf(ctx, wl)
	if copyObj == nil {
		return nil
	}
	// Suspended here, at once, rather than when the job controller sees
	// the eviction: with hundreds of copies on a busy worker, that second
	// hop doubled the time the last one ran on (the job controller then
	// only restores its templates).
	if j, ok := jobs.AdaptAny(kinds.All, copyObj); ok && !j.Suspended() {
		j.SetSuspended(true)
		if err := f.client.Update(ctx, j.Object()); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	f.recorder.Eventf(copyObj, wl, corev1.EventTypeWarning, ReasonFenced, "Suspend", "%s", message)
	return nil
}

// copyOf returns the job that controls a Workload, nil when it cannot be
// read.
func (f *Fence) copyOf(ctx context.Context, wl *strata.Workload) client.Object {
	owner := metav1.GetControllerOfNoCopy(wl)
	k := jobs.KindOf(kinds.All, owner)
	if k == nil {
		return nil
	}
	obj := k.NewObject()
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}, obj); err != nil || obj.GetUID() != owner.UID {
		return nil
	}
	return obj
}
