package dispatch

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// pending is a Workload waiting to be placed, with its queue.
type pending struct {
	*entry
	job   client.Object
	queue string // its ClusterQueue
	// counts are the pods of each pod set it is placed with when fewer
	// than it asks for (partial admission; withCounts), nil when all.
	counts []int32
	// reserved: its quota is reserved in its queue and every admission
	// check of the queue is Ready (collectReserved): it is placed on the
	// flavors reserved, its reservation's charge its own.
	reserved bool
}

// collected is what a pass collects from the index's entries (collect).
type collected struct {
	// placed are the dispatched Workloads, as the informer shows them:
	// their reservations are rebuilt (rebuild).
	placed []*strata.Workload
	// waiting are the Workloads to place, with their queues.
	waiting []pending
	// queues are the ClusterQueues read, by name (nil when missing).
	queues map[string]*strata.ClusterQueue
	usage  map[string]map[string]corev1.ResourceList // ClusterQueue → flavor → usage
	// dispatched are the placed Workloads with their hub ClusterQueue: the
	// candidates of a quota preemption at the hub (reclaimQuota).
	dispatched []dispatched
	// behind are the dispatches this process recorded that the informer
	// does not show yet.
	behind []inFlight
	// retry is when the first backoff of a waiting Workload whose pods
	// were not ready in time ends (0: none).
	retry time.Duration
	// drained are the dispatched Workloads whose queue's stopPolicy is
	// HoldAndDrain: the hub evicts them (markDrained).
	drained []drainedWorkload
	// resizes are the admitted elastic Workloads whose job asks for
	// another size (resize).
	resizes []resizing
	// checks are the pass's reads of AdmissionChecks.
	checks *checkReads
}

// rebuildable are the Workloads whose dispatches a target first seen
// reserves (rebuild): those the informer shows placed, and, after a
// restart, those only the journal holds yet (their records applied).
func (c *collected) rebuildable() []*strata.Workload {
	out := c.placed
	for _, f := range c.behind {
		if wl, _, ok := f.journal.Apply(f.wl); ok {
			out = append(out[:len(out):len(out)], wl)
		}
	}
	return out
}

// drainedWorkload is a dispatched Workload its stopped queue evicts.
type drainedWorkload struct {
	e    *entry
	stop queue.Stop
	cq   string
}

// inFlight is a dispatch of a Workload: where, and its reservation key.
type inFlight struct {
	wl                   *strata.Workload
	cluster, flavor, key string
	// podSetFlavors: its pod sets placed on different flavors.
	podSetFlavors []strata.PodSetFlavor
	// preempts: the copy is marked to preempt (its record's preemptUpTo).
	preempts bool
	// journal holds its record (wl does not have it yet).
	journal *Journal
}

// collect sorts the index's entries for a pass: the dispatched ones
// charge their queue's usage, a deactivated one has its reason written,
// and the others that may go somewhere are to place. It first forgets
// what the informer shows now (forgetRecorded, pruneHints).
// chargedQueue is the hub ClusterQueue a dispatched Workload's usage is
// charged to: the one its admission names once its copy is admitted (a
// LocalQueue pointed at another ClusterQueue since, or deleted, leaves
// an admission where it is, as in Kueue), else the one its LocalQueue
// points at now (cq; nil when none). "" when neither.
func chargedQueue(wl *strata.Workload, cq *strata.ClusterQueue) string {
	if a := wl.Status.Admission; a != nil && a.ClusterQueue != "" {
		return a.ClusterQueue
	}
	if cq != nil {
		return cq.Name
	}
	return ""
}

func (d *Dispatcher) collect(ctx context.Context, entries []*entry, now time.Time) (*collected, []error) {
	c := &collected{
		waiting: make([]pending, 0, len(entries)),
		usage:   map[string]map[string]corev1.ResourceList{},
		queues:  map[string]*strata.ClusterQueue{},
		checks:  newCheckReads(d.client),
	}
	var errs []error
	localQueues := map[types.NamespacedName]*strata.LocalQueue{}
	d.forgetRecorded(entries)
	d.pruneHints(entries)
	for _, e := range entries {
		if e.deleting {
			continue
		}
		cq, err := d.clusterQueue(ctx, e.localQueue, localQueues, c.queues)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stop := queue.StopOf(localQueues[e.localQueue], cq)
		if e.placed {
			c.placed = append(c.placed, e.wl)
			if charged := chargedQueue(e.wl, cq); charged != "" {
				d.chargeUsage(c.usage, charged, e.flavor, e, e.wl.Status.Placement.PodSetFlavors)
				c.dispatched = append(c.dispatched, dispatched{e: e, queue: charged})
				if workload.Elastic(e.wl) {
					if je, err := d.job(ctx, e); err == nil && je != nil && !je.deleting {
						if r, ok := wantsResize(e.wl, je.job); ok {
							// No scale-up while its queue is stopped or its
							// copy is being taken back: it would preempt
							// for a Workload that is leaving.
							if r.To <= r.From || !stop.Stopped && !meta.IsStatusConditionTrue(e.wl.Status.Conditions, strata.WorkloadCopyGoing) {
								c.resizes = append(c.resizes, resizing{e: e, queue: charged, resize: r})
							}
						} else if waitsForHubQuota(e.wl) && !inTransit(e.wl) {
							// Its job asks for the size granted again.
							c.resizes = append(c.resizes, resizing{e: e, queue: charged})
						}
					}
				}
			}
			// HoldAndDrain takes every copy back; Hold those not
			// admitted on their worker yet (as Kueue takes back a
			// quota reservation not admitted).
			if cq != nil && (stop.Drain || stop.Stopped && e.wl.Status.Admission == nil) {
				c.drained = append(c.drained, drainedWorkload{e: e, stop: stop, cq: cq.Name})
			}
			if err := d.checkDispatched(ctx, c.checks, e, cq, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		d.mu.Lock()
		r, written := d.recorded[e.uid]
		d.mu.Unlock()
		if written && r.generation > e.generation {
			// Dispatched by this process; the informer is behind.
			if cq != nil {
				d.chargeUsage(c.usage, cq.Name, r.flavor, e, r.podSetFlavors)
			}
			f := inFlight{wl: e.wl, cluster: r.cluster, flavor: r.flavor, podSetFlavors: r.podSetFlavors, key: Key(e.uid, r.generation), journal: d.journal}
			if d.journal != nil {
				// Whether the copy is marked to preempt, from the journal
				// until the status shows the record.
				je, _ := d.journal.Held(e.uid)
				f.preempts = je.PreemptUpTo != nil
			}
			c.behind = append(c.behind, f)
			continue
		}
		if wl := d.reservedAheadOf(e); wl != nil {
			// Reserved by this process; the informer is behind.
			flavor, split := reservedFlavors(wl.Status.Admission)
			d.chargeUsage(c.usage, wl.Status.Admission.ClusterQueue, flavor, &entry{wl: wl, need: e.need, flavor: flavor}, split)
			continue
		}
		if ReservedAtHub(e.wl) {
			// Its hub queue's admission checks are being decided.
			if err := d.collectReserved(ctx, c, e, cq, stop, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if cq == nil || e.invalid || e.outdated {
			// Intake says why on the Workload; an outdated one
			// (workload.OutdatedByJob) waits for it to bring the spec
			// up to date.
			continue
		}
		job, err := d.job(ctx, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if job == nil || job.deleting {
			continue
		}
		if e.inactive {
			// The user's hold (Kueue's deactivation), or the hub's past a
			// worker's backoffLimitCount. A job's own spec.suspend is
			// Strata's on the hub, as Kueue's: a manifest created
			// suspended is dispatched.
			d.wait(ctx, pending{entry: e, job: job.job.Object()}, ReasonDeactivated, deactivatedMessage(e.wl))
			continue
		}
		if stop.Stopped {
			// Kueue's stopPolicy: the queue dispatches nothing.
			d.wait(ctx, pending{entry: e, job: job.job.Object()}, strata.QueueStopped, stop.Message)
			continue
		}
		if at := workload.RequeueAt(e.wl); at.After(now) {
			// Its last copy's pods were not ready in time: it waits out
			// the backoff that worker's waitForPodsReady set, as it would
			// have there, and those behind it go ahead.
			d.wait(ctx, pending{entry: e, job: job.job.Object()}, strata.EvictedByPodsReadyTimeout, workload.BackoffMessage(e.wl))
			if left := at.Sub(now); c.retry == 0 || left < c.retry {
				c.retry = left
			}
			continue
		}
		c.waiting = append(c.waiting, pending{entry: e, job: job.job.Object(), queue: cq.Name})
	}
	return c, errs
}

// deactivatedMessage says why an inactive hub Workload waits: the user's
// deactivation, its copies' pods not ready in time more often than a
// worker's backoffLimitCount allows, or its maximum execution time used
// up on a worker (its last attempt says so).
func deactivatedMessage(wl *strata.Workload) string {
	why := "the Workload is deactivated (spec.active: false)"
	if v, checks := workload.Verdict(wl.Status.AdmissionChecks); v == workload.ChecksRejected {
		why = fmt.Sprintf("the Workload was deactivated (spec.active: false, %s): %s", strata.AdmissionCheckRejected, checks)
	} else if p := wl.Status.Placement; p != nil && len(p.Attempts) > 0 {
		switch last := p.Attempts[len(p.Attempts)-1]; last.Reason {
		case strata.RequeuingLimitExceeded:
			why = fmt.Sprintf("the Workload was deactivated (spec.active: false, %s): its pods were not ready in time on %s more often than waitForPodsReady's backoffLimitCount there allows",
				strata.RequeuingLimitExceeded, last.Cluster)
		case strata.MaximumExecutionTimeExceeded:
			why = fmt.Sprintf("the Workload was deactivated (spec.active: false, %s): its copies were admitted for its maximum execution time (spec.maximumExecutionTimeSeconds); its last attempt, on %s, says more",
				strata.MaximumExecutionTimeExceeded, last.Cluster)
		}
	}
	return fmt.Sprintf("%s; it is dispatched when spec.active is true: kubectl patch workload %s -n %s --type merge -p '{\"spec\":{\"active\":true}}'", why, wl.Name, wl.Namespace)
}

// markDrained queues the write that evicts, at the hub, a dispatched
// Workload whose LocalQueue or ClusterQueue is stopped with HoldAndDrain,
// or with Hold before its worker admitted it: Evicted becomes True with
// reason LocalQueueStopped or ClusterQueueStopped, the copies controller
// takes its copy back, and it waits in its stopped queue. One already
// evicted is left alone.
func (d *Dispatcher) markDrained(ctx context.Context, v drainedWorkload, writes *passWrites) {
	if Evicting(v.e.wl) {
		return
	}
	wl := v.e.wl.DeepCopy()
	policy := strata.StopHoldAndDrain
	if !v.stop.Drain {
		policy = strata.StopHold
	}
	message := queue.DrainMessage(v.stop.Reason, policy, wl.Spec.QueueName, v.cq)
	if v.stop.Terminating && !v.stop.Drain {
		// Held by its ClusterQueue's deletion, not by a stopPolicy.
		message = "evicted: " + v.stop.Message
	}
	message += "; its copy is taken back from " + v.e.cluster
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: v.stop.Reason, Message: truncate(message)})
	workload.SetRequeued(wl, metav1.ConditionFalse, v.stop.Reason, truncate(message), d.clock.Now())
	writes.do(func() error {
		if err := d.client.Status().Update(ctx, wl); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil // the newer Workload's event brings a pass, which marks it again
			}
			return fmt.Errorf("draining %s/%s at the hub: %w", wl.Namespace, wl.Name, err)
		}
		d.recorder.Eventf(wl, nil, corev1.EventTypeWarning, v.stop.Reason, "Evict", "%s", truncateNote(message))
		return nil
	})
}

// recorded is a dispatch this process wrote: its generation and flavor.
type recorded struct {
	generation      int64
	cluster, flavor string
	// podSetFlavors: its pod sets placed on different flavors.
	podSetFlavors []strata.PodSetFlavor
}

// forgetRecorded drops the dispatches the informer shows now, and those
// of Workloads that are gone (recorded, and the decisions topology
// spreading counts); and, once they hold more than the
// Workloads there are, the reasons of Workloads that are gone (keyed by
// UID, a stale one is never read).
func (d *Dispatcher) forgetRecorded(entries []*entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) > len(entries) {
		live := make(map[types.UID]bool, len(entries))
		for _, e := range entries {
			live[e.uid] = true
		}
		for uid := range d.waiting {
			if !live[uid] {
				delete(d.waiting, uid)
			}
		}
	}
	if len(d.reservedAhead) > 0 {
		live := make(map[types.UID]bool, len(entries))
		for _, e := range entries {
			live[e.uid] = true
		}
		for uid := range d.reservedAhead {
			if !live[uid] {
				delete(d.reservedAhead, uid)
			}
		}
	}
	d.forgetSpreadShown(entries)
	if len(d.burned) > 0 {
		live := make(map[types.UID]int64, len(entries))
		for _, e := range entries {
			live[e.uid] = e.generation
		}
		for uid, b := range d.burned {
			if g, ok := live[uid]; !ok || g > b {
				delete(d.burned, uid)
			}
		}
	}
	if len(d.recorded) == 0 {
		return
	}
	seen := make(map[types.UID]bool, len(d.recorded))
	for _, e := range entries {
		r, ok := d.recorded[e.uid]
		if !ok {
			continue
		}
		seen[e.uid] = true
		if e.generation >= r.generation {
			delete(d.recorded, e.uid)
			if d.journal != nil {
				d.journal.Forget(e.uid, e.generation)
			}
		}
	}
	for uid := range d.recorded {
		if !seen[uid] {
			delete(d.recorded, uid)
			d.forgetIfGone(uid)
		}
	}
}

// forgetIfGone drops the journal's dispatch of a Workload the index no
// longer holds when the Workload is gone. One that finished keeps it: its
// record reaches its status with the copies controller's next write (a
// copy that finishes before its admission was recorded), which then
// forgets it.
func (d *Dispatcher) forgetIfGone(uid types.UID) {
	if d.journal == nil {
		return
	}
	e, ok := d.journal.Held(uid)
	if !ok {
		return
	}
	var wl strata.Workload
	err := d.client.Get(context.Background(), e.Key(), &wl)
	if apierrors.IsNotFound(err) || err == nil && wl.UID != uid {
		d.journal.Forget(uid, -1)
	}
}

// clusterQueue returns the ClusterQueue of a Workload's LocalQueue, nil
// when either is missing (intake marks the Workload invalid then). local
// (the LocalQueues read, nil when missing) and seen hold
// what the pass has read: most Workloads share a few queues.
func (d *Dispatcher) clusterQueue(ctx context.Context, key types.NamespacedName, local map[types.NamespacedName]*strata.LocalQueue,
	seen map[string]*strata.ClusterQueue) (*strata.ClusterQueue, error) {
	lq, ok := local[key]
	if !ok {
		lq = &strata.LocalQueue{}
		if err := d.client.Get(ctx, key, lq); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			lq = nil
		}
		local[key] = lq
	}
	if lq == nil || lq.Spec.ClusterQueue == "" {
		return nil, nil
	}
	name := lq.Spec.ClusterQueue
	if cq, ok := seen[name]; ok {
		return cq, nil
	}
	cq := &strata.ClusterQueue{}
	if err := d.client.Get(ctx, types.NamespacedName{Name: name}, cq); err != nil {
		cq = nil
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	seen[name] = cq
	return cq, nil
}

// job returns the hub job (of any kind) that controls a Workload, nil
// when there is none (any more). It is the informer's object, not a copy
// (a pass reads every waiting Workload's job): copy it before changing it.
func (d *Dispatcher) job(ctx context.Context, e *entry) (*jobEntry, error) {
	if e.kind == nil {
		return nil, nil
	}
	je, known := d.index.job(e)
	if known {
		return je, nil
	}
	// A kind no informer feeds the index with: read it.
	j, err := HubJob(ctx, d.client, e.wl, client.UnsafeDisableDeepCopy)
	if j == nil || err != nil {
		return nil, err
	}
	return &jobEntry{job: j, deleting: !j.Object().GetDeletionTimestamp().IsZero()}, nil
}

// chargeUsage adds a dispatched Workload's requests, less its reclaimable
// pods', to its queue's usage of its flavor, or, with its pod sets placed
// on different flavors (podSetFlavors), of each pod set's.
func (d *Dispatcher) chargeUsage(usage map[string]map[string]corev1.ResourceList, cq, flavor string, e *entry, podSetFlavors []strata.PodSetFlavor) {
	if usage[cq] == nil {
		usage[cq] = map[string]corev1.ResourceList{}
	}
	if len(podSetFlavors) > 0 {
		for f, rl := range queue.SplitUsage(e.wl, flavor, podSetFlavors) {
			queue.AddRequests(usage[cq], f, rl)
		}
		return
	}
	queue.AddRequests(usage[cq], flavor, e.charged())
}

// charged is what a dispatched Workload is charged: its requests, less
// its reclaimable pods' (its finished part gives its quota back), for the
// pods it is admitted or placed with (queue.WorkloadUsage).
func (e *entry) charged() corev1.ResourceList {
	if workload.Elastic(e.wl) && e.wl.Status.Admission != nil {
		// The size its queue granted (queue.GrantedUsage).
		return queue.GrantedUsage(e.wl, e.flavor)[e.flavor]
	}
	if queue.ChargedLess(e.wl) {
		return queue.WorkloadUsage(e.wl)
	}
	return e.need
}
