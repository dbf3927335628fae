package dispatch

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/workload"
)

// written is a waiting reason written: its condition's reason, and its
// message without numbers (workload.WithoutNumbers).
type written struct {
	reason, meaning string
}

// waitOutcome is why a workload waits: its condition's reason and
// message, whether it holds its queue (blocks), and when a backoff that
// keeps a worker out ends (retry).
type waitOutcome struct {
	reason, message string
	// meaning is the message without its numbers (newWait).
	meaning string
	blocks  bool
	retry   time.Duration
	// reclaim is, for a workload that may run with fewer pods, the
	// preemption at the hub that frees its queue's quota for the most of
	// them (placePartially), for the counts decide returns.
	reclaim *reclaimOption
}

// withMeaning truncates o's message and computes its meaning.
func withMeaning(o waitOutcome) waitOutcome {
	w := newWait(o.reason, o.message)
	o.message, o.meaning = w.message, w.meaning
	return o
}

// waitKey is what decides a waiting outcome in a pass, besides backoffs.
type waitKey struct {
	queue      string
	localQueue types.NamespacedName
	kind       schema.GroupVersionKind
	shape      string
	// flavors are those within quota, and the notes on the others
	// (quotaOutcome.key).
	flavors string
	// priority: a workload that fits nowhere may preempt workloads of a
	// lower priority; class and classSource, because its priority on a
	// worker is its class's value there (placement.Target.Priority).
	priority           int32
	class, classSource string
}

// wait queues why a Workload waits on the reason queue, with an event on
// its Job, when that changed in more than its numbers. Otherwise it
// writes nothing.
func (d *Dispatcher) wait(ctx context.Context, p pending, reason, message string) {
	d.waitFor(ctx, p, newWait(reason, message))
}

// newWait makes a waiting outcome of reason and message (truncated to
// the API's bound) and computes its meaning.
func newWait(reason, message string) waitOutcome {
	message = truncate(message)
	return waitOutcome{reason: reason, message: message, meaning: workload.WithoutNumbers(message)}
}

// waitFor does what wait does for an outcome whose meaning is computed.
// A pass compares thousands of waiting reasons, most of them unchanged.
// The write goes to the reason queue, not to the pass's writes: a pass
// does not wait for reasons.
func (d *Dispatcher) waitFor(ctx context.Context, p pending, o waitOutcome) {
	key := p.uid
	now := written{reason: o.reason, meaning: o.meaning}
	if p.waitingAs == now {
		// The Workload says so already.
		return
	}
	d.mu.Lock()
	last, seen := d.waiting[key]
	d.mu.Unlock()
	if seen && last == now || d.reasons.has(key, now) {
		return
	}
	// Copied when written, not when queued: thousands may wait in the
	// queue (the informer's object is not changed meanwhile; a newer one
	// replaces it there).
	src := p.wl
	d.reasons.add(key, now, func() error {
		d.mu.Lock()
		r, recorded := d.recorded[src.UID]
		d.mu.Unlock()
		if recorded && r.generation > Generation(src) {
			// Dispatched since the pass that queued it (the journal's
			// record does not change the Workload's resourceVersion).
			return nil
		}
		wl := src.DeepCopy()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: o.reason, Message: o.message})
			if o.reason == ReasonDeactivated && !workload.IsActive(wl) {
				// Deactivated while it waited out a backoff: counted
				// anew once active again, as Kueue does (and as a copy
				// deactivated at its worker is, see the copies
				// controller's takeBack).
				wl.Status.RequeueState = nil
				workload.SetRequeued(wl, metav1.ConditionFalse, ReasonDeactivated, "the Workload is deactivated (spec.active: false)", d.clock.Now())
			} else if o.reason != strata.EvictedByPodsReadyTimeout {
				// Waiting in its queue again, for another reason than
				// its stopped queue: Kueue's Requeued=True. (Not with the
				// backoff's reason: the pass found it not over, whatever
				// the clock says by the time this is written.)
				workload.Requeue(wl, o.reason != strata.QueueStopped, d.clock.Now())
			}
			err := d.client.Status().Update(ctx, wl)
			if !apierrors.IsConflict(err) {
				return err
			}
			// The Workload changed since the pass read it: the reason is
			// written on the newer one, unless it was dispatched meanwhile.
			if gerr := d.client.Get(ctx, client.ObjectKeyFromObject(wl), wl); gerr != nil {
				return gerr
			}
			if wl.UID != src.UID || (wl.Status.Placement != nil && wl.Status.Placement.Cluster != "") || !wl.DeletionTimestamp.IsZero() ||
				ReservedAtHub(wl) != ReservedAtHub(src) ||
				o.reason == ReasonDeactivated && workload.IsActive(wl) {
				return errStaleReason
			}
			return err
		})
		if err != nil {
			if errors.Is(err, errStaleReason) {
				return nil // the newer Workload brings another pass
			}
			if apierrors.IsConflict(err) {
				// Conflicts past the retries: the newer Workload's pass
				// may have run while this write was in flight, and
				// queued nothing (reasonQueue.has). A pass a second from
				// now decides again.
				time.AfterFunc(time.Second, d.Wake)
				return nil
			}
			if err := client.IgnoreNotFound(err); err != nil {
				ctrl.LoggerFrom(ctx).V(2).Info("Could not write a waiting reason", "workload", client.ObjectKeyFromObject(wl), "error", err.Error())
				// Not recorded written: a pass a second from now queues it again.
				time.AfterFunc(time.Second, d.Wake)
			}
			return err
		}
		d.mu.Lock()
		d.waiting[key] = now
		d.mu.Unlock()
		d.recorder.Eventf(p.job, wl, corev1.EventTypeNormal, o.reason, "Dispatch", "%s", truncateNote(o.message))
		d.markWaiting(ctx, p.job, o.reason, o.message)
		return nil
	})
}

// markWaiting marks a hub job that runs nowhere as waiting in its
// status, when its kind can (jobs.WaitMarker). kubectl then shows it
// Suspended, not Running. Best effort: the Workload's condition is the record.
func (d *Dispatcher) markWaiting(ctx context.Context, obj client.Object, reason, message string) {
	obj = obj.DeepCopyObject().(client.Object) // the pass's is the informer's
	j, ok := jobs.AdaptAny(kinds.Hub, obj)
	if !ok {
		return
	}
	m, ok := j.(jobs.WaitMarker)
	if !ok || !m.MarkWaiting(reason, message) {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := d.client.Status().Update(ctx, obj)
		if !apierrors.IsConflict(err) {
			return err
		}
		// The job changed since it was read (its controller wrote its
		// status): marked again on the newer one.
		if gerr := d.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
			return gerr
		}
		if j, ok := jobs.AdaptAny(kinds.Hub, obj); !ok {
			return nil
		} else if m, ok := j.(jobs.WaitMarker); !ok || !m.MarkWaiting(reason, message) {
			return nil
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not mark the hub job waiting", "job", client.ObjectKeyFromObject(obj), "error", err.Error())
	}
}

// errStaleReason says a waiting reason no longer applies: its Workload was
// dispatched, deleted or replaced since.
var errStaleReason = errors.New("the Workload moved on since the reason was decided")

// maxEventNote is the API's limit on an event's note.
const maxEventNote = 1024

// truncateNote truncates m to maxEventNote.
func truncateNote(m string) string {
	if len(m) <= maxEventNote {
		return m
	}
	return m[:maxEventNote-3] + "..."
}
