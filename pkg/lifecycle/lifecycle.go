// Package lifecycle records the workload lifecycle metrics a Kueue user's
// dashboards and alerts are built on (Kueue's quota_reserved_workloads_total,
// admitted_workloads_total, evicted_workloads_total and their wait-time
// histograms), from the Workloads' own transitions as the informer shows
// them: a reservation (status.admission set), an admission (Admitted
// becoming True) and an eviction (see Recorder.Update: the Evicted
// condition written while the workload holds its admission, or else its
// admission taken back before it finished).
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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// for an eviction or a release.
	ClusterQueue string
	// Reserved: the update reserved quota (status.admission set where
	// there was none).
	Reserved bool
	// Admitted: Admitted became True (at once with the reservation for a
	// queue without admission checks, later for one with them).
	Admitted bool
	// Evicted is the reason of an eviction the update recorded while the
	// workload held its admission (its Evicted condition became True, or
	// names a new reason, message or time); "" for none.
	Evicted string
	// Released: the update took the workload's admission back, which is
	// not its dispatch (HandedOver); Why says why (the Evicted condition's
	// reason when True, else the Admitted condition's).
	Released bool
	Why      string
	// HandedOver: a hub's own quota reservation (held while its queue's
	// admission checks were decided) became a dispatch to a worker, whose
	// admission the hub records next: not a release.
	HandedOver bool
	// Finished: the workload has finished.
	Finished bool
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
	if old.Status.Admission == nil {
		return t
	}
	evicted := meta.FindStatusCondition(cur.Status.Conditions, strata.WorkloadEvicted)
	if evicted != nil && evicted.Status == metav1.ConditionTrue {
		was := meta.FindStatusCondition(old.Status.Conditions, strata.WorkloadEvicted)
		if was == nil || was.Status != metav1.ConditionTrue || was.Reason != evicted.Reason || was.Message != evicted.Message ||
			!was.LastTransitionTime.Equal(&evicted.LastTransitionTime) {
			t.ClusterQueue, t.Evicted = old.Status.Admission.ClusterQueue, evicted.Reason
		}
	}
	if cur.Status.Admission == nil {
		t.ClusterQueue = old.Status.Admission.ClusterQueue
		t.Finished = isTrue(cur, strata.WorkloadFinished)
		if dispatched(old, cur) && t.Evicted == "" {
			t.HandedOver = true
			return t
		}
		t.Released = true
		switch c := meta.FindStatusCondition(cur.Status.Conditions, strata.WorkloadAdmitted); {
		case evicted != nil && evicted.Status == metav1.ConditionTrue:
			t.Why = evicted.Reason
		case c != nil:
			t.Why = c.Reason
		}
	}
	return t
}

// dispatched says whether the update from old to cur recorded a new
// dispatch to a worker (the hub's status.placement).
func dispatched(old, cur *strata.Workload) bool {
	p := cur.Status.Placement
	if p == nil || p.Cluster == "" {
		return false
	}
	return old.Status.Placement == nil || old.Status.Placement.DispatchGeneration < p.DispatchGeneration
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
	// local, when set, records the same by LocalQueue, of those
	// localQueues has (a deleted LocalQueue's series, once forgotten,
	// are not made again by its workloads' later transitions).
	local       *metrics.LocalQueueLifecycle
	localQueues client.Reader
	clock       clock.PassiveClock

	mu sync.Mutex
	// pendingSince and reservedAt are when this process saw a workload go
	// back to its queue and reserve quota: finer than the objects'
	// conditions (whole seconds, and a Requeued condition that stays True
	// across evictions keeps its first time). Objects are the fallback,
	// after a restart or a change of leader.
	pendingSince, reservedAt map[types.NamespacedName]time.Time
	// evicted are the workloads whose eviction was counted while they
	// still held their admission (their kind's controller takes it back
	// in a later write); handedOver those whose hub reservation became a
	// dispatch, whose next reservation is the worker's admission.
	evicted, handedOver map[types.NamespacedName]bool
}

// New returns a Recorder of m on the Workloads of c.
func New(c ctrlcache.Informers, m metrics.Lifecycle, clk clock.PassiveClock) *Recorder {
	return &Recorder{cache: c, metrics: m, clock: clk, pendingSince: map[types.NamespacedName]time.Time{}, reservedAt: map[types.NamespacedName]time.Time{},
		evicted: map[types.NamespacedName]bool{}, handedOver: map[types.NamespacedName]bool{}}
}

// WithLocalQueues records every transition by the workload's LocalQueue
// in l too (metrics.localQueueMetrics), while queues (a cached reader;
// nil: any) has that LocalQueue.
func (r *Recorder) WithLocalQueues(l *metrics.LocalQueueLifecycle, queues client.Reader) *Recorder {
	r.local, r.localQueues = l, queues
	return r
}

// recordsLocal says whether the transitions of a workload of LocalQueue
// key are recorded by LocalQueue.
func (r *Recorder) recordsLocal(key types.NamespacedName) bool {
	if r.local == nil {
		return false
	}
	if r.localQueues == nil {
		return true
	}
	err := r.localQueues.Get(context.Background(), key, &strata.LocalQueue{})
	return !apierrors.IsNotFound(err)
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
//
// An eviction counts once: when its Evicted condition is written while
// the workload still holds its admission, or else when the admission is
// taken back before the workload finished (an Evicted condition left True
// by an earlier eviction and written again unchanged, or a take-back
// that writes none, as the hub's for a deactivated workload or a copy
// its worker evicted: its reason is then the Admitted condition's).
func (r *Recorder) Update(old, cur *strata.Workload) {
	t := Of(old, cur)
	if t == (Transition{}) {
		return
	}
	key := client.ObjectKeyFromObject(cur)
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	// Kueue's "created or requeued": the later of what this process saw
	// and what the object says (a Requeued condition set True once a
	// backoff or a hold is over).
	queued := QueuedSince(old)
	if at, ok := r.pendingSince[key]; ok && at.After(queued) {
		queued = at
	}
	lq := []string{cur.Spec.QueueName, cur.Namespace}
	local := r.recordsLocal(types.NamespacedName{Namespace: cur.Namespace, Name: cur.Spec.QueueName})
	evicted := func(reason string) {
		r.metrics.Evicted.WithLabelValues(t.ClusterQueue, reason).Inc()
		if local {
			r.local.Evicted.WithLabelValues(append(lq, reason)...).Inc()
		}
	}
	if t.Evicted != "" {
		evicted(t.Evicted)
		r.evicted[key] = true
	}
	if t.HandedOver {
		r.handedOver[key] = true
	}
	if t.Released {
		if !r.evicted[key] && !t.Finished && t.Why != "" {
			evicted(t.Why)
		}
		delete(r.evicted, key)
		delete(r.handedOver, key)
		delete(r.reservedAt, key)
		if !t.Finished {
			r.pendingSince[key] = now // back in its queue
		}
	}
	handedOver := r.handedOver[key]
	if t.Reserved {
		delete(r.evicted, key)
		delete(r.pendingSince, key)
		delete(r.handedOver, key)
		if !handedOver {
			wait := seconds(now.Sub(queued))
			r.metrics.QuotaReserved.WithLabelValues(t.ClusterQueue).Inc()
			r.metrics.QuotaReservedWait.WithLabelValues(t.ClusterQueue).Observe(wait)
			if local {
				r.local.QuotaReserved.WithLabelValues(lq...).Inc()
				r.local.QuotaReservedWait.WithLabelValues(lq...).Observe(wait)
			}
			r.reservedAt[key] = now
		}
	}
	if t.Admitted {
		reserved, ok := r.reservedAt[key]
		if !ok {
			reserved = workload.ReservedAt(old)
		}
		delete(r.reservedAt, key)
		wait := seconds(now.Sub(queued))
		r.metrics.Admitted.WithLabelValues(t.ClusterQueue).Inc()
		r.metrics.AdmissionWait.WithLabelValues(t.ClusterQueue).Observe(wait)
		if local {
			r.local.Admitted.WithLabelValues(lq...).Inc()
			r.local.AdmissionWait.WithLabelValues(lq...).Observe(wait)
		}
		if !t.Reserved || handedOver {
			// Its quota was reserved before: its admission checks took
			// this long.
			checks := seconds(now.Sub(reserved))
			r.metrics.ChecksWait.WithLabelValues(t.ClusterQueue).Observe(checks)
			if local {
				r.local.ChecksWait.WithLabelValues(lq...).Observe(checks)
			}
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
	delete(r.evicted, key)
	delete(r.handedOver, key)
}

// seconds is d in seconds, never below 0 (clocks of the objects' writers
// and this process may disagree).
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}
