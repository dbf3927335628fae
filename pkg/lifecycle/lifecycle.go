// Package lifecycle records the workload lifecycle metrics a Kueue user's
// dashboards and alerts are built on (Kueue's quota_reserved_workloads_total,
// admitted_workloads_total, evicted_workloads_total and their wait-time
// histograms), from the Workloads' own transitions as the informer shows
// them: a reservation (status.admission set), an admission (Admitted
// becoming True) and an eviction (Evicted becoming True, or naming a new
// reason, message or time, while the workload holds an admission).
//
// Reading the transitions instead of counting at every place that writes
// them keeps one definition for the scheduler, the admission checks
// controller and the many controllers that evict (preemption, node
// failures, waitForPodsReady, fencing, stopped queues, job changes). It
// writes nothing: the metrics are in the leader's memory only.
package lifecycle

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/workload"
)

// Transition is what one update of a Workload did, as the metrics count it.
type Transition struct {
	// ClusterQueue is the queue of the admission the transition concerns:
	// the new one for a reservation or an admission, the one taken back
	// for an eviction.
	ClusterQueue string
	// Reserved: the update reserved quota (status.admission set where
	// there was none).
	Reserved bool
	// Admitted: Admitted became True (at once with the reservation for a
	// queue without admission checks, later for one with them).
	Admitted bool
	// Evicted is the reason of an eviction the update recorded; "" for
	// none.
	Evicted string
	// Released: the update took the workload's admission back (it waits
	// in its queue again, or has finished).
	Released bool
}

// Of returns what the update from old to cur did. Pure: the metrics and
// their table test rest on it.
func Of(old, cur *strata.Workload) Transition {
	var t Transition
	if cur.Status.Admission != nil {
		t.ClusterQueue = cur.Status.Admission.ClusterQueue
		t.Reserved = old.Status.Admission == nil
		t.Admitted = isTrue(cur, strata.WorkloadAdmitted) && (t.Reserved || !isTrue(old, strata.WorkloadAdmitted))
	}
	if !t.Reserved && !t.Admitted {
		t.ClusterQueue = ""
	}
	if old.Status.Admission != nil {
		if cur.Status.Admission == nil {
			t.ClusterQueue, t.Released = old.Status.Admission.ClusterQueue, true
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, strata.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
			was := meta.FindStatusCondition(old.Status.Conditions, strata.WorkloadEvicted)
			if was == nil || was.Status != metav1.ConditionTrue || was.Reason != c.Reason || was.Message != c.Message ||
				!was.LastTransitionTime.Equal(&c.LastTransitionTime) {
				t.ClusterQueue, t.Evicted = old.Status.Admission.ClusterQueue, c.Reason
			}
		}
	}
	return t
}

func isTrue(wl *strata.Workload, condition string) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, condition)
}

// QueuedSince is when a workload last entered its queue, as its object
// says: its creation, or the transition of its Requeued condition to True
// when later (Kueue's "created or requeued").
func QueuedSince(wl *strata.Workload) time.Time {
	at := wl.CreationTimestamp.Time
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.After(at) {
		at = c.LastTransitionTime.Time
	}
	return at
}

// Recorder records the transitions of the Workloads an informer shows.
// Run it on the leader only (NeedLeaderElection): every replica sees the
// same updates.
type Recorder struct {
	cache   ctrlcache.Informers
	metrics metrics.Lifecycle
	clock   clock.PassiveClock

	mu sync.Mutex
	// pendingSince and reservedAt are when this process saw a workload go
	// back to its queue and reserve quota: finer than the objects'
	// conditions (whole seconds, and a Requeued condition that stays True
	// across evictions keeps its first time). Objects are the fallback,
	// after a restart or a change of leader.
	pendingSince, reservedAt map[types.NamespacedName]time.Time
}

// New returns a Recorder of m on the Workloads of c.
func New(c ctrlcache.Informers, m metrics.Lifecycle, clk clock.PassiveClock) *Recorder {
	return &Recorder{cache: c, metrics: m, clock: clk, pendingSince: map[types.NamespacedName]time.Time{}, reservedAt: map[types.NamespacedName]time.Time{}}
}

// NeedLeaderElection is true: the leader's metrics count each transition
// once.
func (r *Recorder) NeedLeaderElection() bool { return true }

// Start records transitions until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	inf, err := r.cache.GetInformer(ctx, &strata.Workload{})
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*strata.Workload)
			cur, ok2 := newObj.(*strata.Workload)
			if ok1 && ok2 {
				r.Update(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if wl, ok := obj.(*strata.Workload); ok {
				r.forget(client.ObjectKeyFromObject(wl))
			}
		},
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

// Update records what the update from old to cur did.
func (r *Recorder) Update(old, cur *strata.Workload) {
	t := Of(old, cur)
	if t == (Transition{}) {
		return
	}
	key := client.ObjectKeyFromObject(cur)
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	queued, ok := r.pendingSince[key]
	if !ok {
		queued = QueuedSince(old)
	}
	if t.Evicted != "" {
		r.metrics.Evicted.WithLabelValues(t.ClusterQueue, t.Evicted).Inc()
	}
	if t.Released {
		delete(r.reservedAt, key)
		if !isTrue(cur, strata.WorkloadFinished) {
			r.pendingSince[key] = now // back in its queue
		}
	}
	if t.Reserved {
		delete(r.pendingSince, key)
		r.metrics.QuotaReserved.WithLabelValues(t.ClusterQueue).Inc()
		r.metrics.QuotaReservedWait.WithLabelValues(t.ClusterQueue).Observe(seconds(now.Sub(queued)))
		r.reservedAt[key] = now
	}
	if t.Admitted {
		reserved, ok := r.reservedAt[key]
		if !ok {
			reserved = workload.ReservedAt(old)
		}
		delete(r.reservedAt, key)
		r.metrics.Admitted.WithLabelValues(t.ClusterQueue).Inc()
		r.metrics.AdmissionWait.WithLabelValues(t.ClusterQueue).Observe(seconds(now.Sub(queued)))
		if !t.Reserved {
			// Its quota was reserved before: its admission checks took
			// this long.
			r.metrics.ChecksWait.WithLabelValues(t.ClusterQueue).Observe(seconds(now.Sub(reserved)))
		}
		if r.metrics.Latency != nil {
			r.metrics.Latency.WithLabelValues(t.ClusterQueue).Observe(seconds(now.Sub(cur.CreationTimestamp.Time)))
		}
	}
}

func (r *Recorder) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pendingSince, key)
	delete(r.reservedAt, key)
}

// seconds is d in seconds, never below 0 (clocks of the objects' writers
// and this process may disagree).
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}
