package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reasons of the Resized condition of an elastic workload.
const (
	// ReasonResized: its admission follows its new size.
	ReasonResized = "Resized"
	// ReasonResizePending: its added pods wait for quota or capacity, or
	// its removed pods to be gone.
	ReasonResizePending = "Pending"
)

// resizeRecheck is how soon a scale-down whose removed pods still run is
// looked at again, besides the pods' own events.
const resizeRecheck = 2 * time.Second

// resize brings the admissions of elastic workloads resized while they
// run (workload.ResizeOf) to their new size in place, before the pending
// workloads are served: a scale-down gives back the quota and capacity
// of the pods removed once they are gone, and a scale-up takes the quota
// and capacity of the pods added, placed unconstrained on the flavor the
// workload runs on, when they fit (no preemption; it waits otherwise,
// saying why). books and usage are charged with the change.
func (s *Scheduler) resize(ctx context.Context, wls []*strata.Workload, books *queue.Books, usage map[string]map[string]corev1.ResourceList) error {
	var errs []error
	for _, wl := range wls {
		if err := s.resizeOne(ctx, wl, books, usage); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Scheduler) resizeOne(ctx context.Context, wl *strata.Workload, books *queue.Books, usage map[string]map[string]corev1.ResourceList) error {
	key := client.ObjectKeyFromObject(wl)
	r, ok := workload.ResizeOf(wl)
	if !ok {
		return nil
	}
	if held, ok := s.cache.AdmittedVersion(key); ok && held > cache.Version(wl) {
		return nil // the informer has not shown the last write yet
	}
	psa := wl.Status.Admission.PodSetAssignments[0]
	cq := &strata.ClusterQueue{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: wl.Status.Admission.ClusterQueue}, cq); err != nil {
		return client.IgnoreNotFound(err) // its queue is gone: it runs as admitted
	}
	current, err := tas.Decode(psa.TopologyAssignment)
	if err != nil {
		return nil // not an assignment this agent reads: left as admitted
	}
	ps := wl.Spec.PodSets[0]
	sized := ps
	sized.Count = r.To
	next := wl.DeepCopy()
	npsa := &next.Status.Admission.PodSetAssignments[0]
	npsa.Count, npsa.ResourceUsage = r.To, queue.PodSetUsage(cq, &sized)
	ranked := ps.TopologyRequest != nil && ps.TopologyRequest.PodIndexLabel != nil
	var change corev1.ResourceList // what the queue's usage changes by
	var message string
	if r.To < r.From {
		live, byDomain, err := s.livePods(ctx, wl, current)
		if err != nil {
			return err
		}
		if live > r.To {
			s.wakeLater(s.clock.Now().Add(resizeRecheck))
			return s.resizePending(ctx, wl, fmt.Sprintf("scaling down from %d to %d pods once its removed pods are gone (%d still run)", r.From, r.To, live))
		}
		npsa.TopologyAssignment = tas.Encode(workload.ShrinkAssignment(current, r.To, byDomain, ranked))
		if _, err := s.cache.Reserve(psa.Flavor, key, func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) { return next, nil }); err != nil {
			return fmt.Errorf("resizing %s: %w", key, err)
		}
		change = queue.PodSetUsage(cq, &strata.PodSet{Name: ps.Name, Count: r.From - r.To, Template: ps.Template})
		message = fmt.Sprintf("scaled down from %d to %d pods in place", r.From, r.To)
	} else {
		def, err := s.flavorReady(psa.Flavor)
		if err != nil {
			return s.resizePending(ctx, wl, fmt.Sprintf("scaling up from %d to %d pods: %v", r.From, r.To, err))
		}
		// As its pods run: with what its admission checks added (a
		// provisioned node group's selector).
		added := workload.WithCheckUpdates(wl).Spec.PodSets[0]
		added.Count = r.To - r.From
		need := queue.PodSetUsage(cq, &added)
		if p := s.preemptions[key]; p != nil {
			// A preemption for the pods added: its hold (charged as the
			// pass began) is not in its own way; until its victims are
			// gone, it waits.
			books.Charge(p.queue, p.flavor, p.requests, -1)
			if held := s.stillHeld(p); len(held) > 0 {
				books.Charge(p.queue, p.flavor, p.requests, 1)
				return s.resizePending(ctx, wl, fmt.Sprintf("scaling up from %d to %d pods: %s", r.From, r.To, preemptingMessage(p, held)))
			}
			delete(s.preemptions, key)
			delete(s.charged, key)
			s.publishHolds()
		}
		// waits says why the scale-up waits, once a preemption for the
		// pods added was tried.
		waits := func(why string) error {
			if message, ok := s.preemptForResize(ctx, cq, psa.Flavor, books, wl, added, need, r); ok {
				return s.resizePending(ctx, wl, message)
			}
			return s.resizePending(ctx, wl, why)
		}
		if fit := books.Check(cq.Name, psa.Flavor, need, false); fit.Err != nil {
			return waits(fmt.Sprintf("scaling up from %d to %d pods: flavor %s: %v", r.From, r.To, psa.Flavor, fit.Err))
		}
		sub := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: wl.Name, Namespace: wl.Namespace}, Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{added}}}
		var placeErr error
		found, err := s.cache.Reserve(psa.Flavor, key, func(snap *tas.Snapshot, topo *strata.Topology) (*strata.Workload, error) {
			assignments, taken, err := workload.Place(snap, topo.Name, def.Spec.Tolerations, sub, s.opts)
			if err != nil {
				placeErr = err
				return nil, nil
			}
			for _, u := range taken {
				snap.Release(u)
			}
			npsa.TopologyAssignment = tas.Encode(workload.GrowAssignment(current, assignments[0]))
			return next, nil
		})
		switch {
		case !found:
			return s.resizePending(ctx, wl, fmt.Sprintf("scaling up from %d to %d pods: %v", r.From, r.To, topologyMissing(def)))
		case placeErr != nil:
			return waits(fmt.Sprintf("scaling up from %d to %d pods: flavor %s: %v", r.From, r.To, psa.Flavor, placeErr))
		case err != nil:
			return s.resizePending(ctx, wl, fmt.Sprintf("scaling up from %d to %d pods: flavor %s: %v", r.From, r.To, psa.Flavor, err))
		}
		change, message = need, fmt.Sprintf("scaled up from %d to %d pods in place", r.From, r.To)
	}
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionTrue,
		Reason: ReasonResized, Message: message, ObservedGeneration: next.Generation, LastTransitionTime: metav1.NewTime(s.clock.Now())})
	if err := s.client.Status().Update(ctx, next); err != nil {
		// What the cache took goes back; the informer's object is
		// accounted again by the next pass.
		s.cache.RemoveWorkload(key)
		s.index.recheckLater(key)
		s.Wake()
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer object comes as an event
		}
		return fmt.Errorf("resizing %s: %w", key, err)
	}
	// The cache holds the new admission as of the version just written,
	// so that a read from before it is known to be behind (above).
	if err := s.cache.SyncAdmitted(key, next); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Recording the resize's version", "workload", key)
	}
	sign := int64(1)
	if r.To < r.From {
		sign = -1
	}
	books.Charge(cq.Name, psa.Flavor, change, sign)
	if u := usage[cq.Name]; u != nil {
		rl := u[psa.Flavor].DeepCopy()
		if rl == nil {
			rl = corev1.ResourceList{}
		}
		for name, q := range change {
			v := rl[name]
			if sign > 0 {
				v.Add(q)
			} else {
				v.Sub(q)
			}
			rl[name] = v
		}
		u[psa.Flavor] = rl
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Resized in place", "workload", key, "from", r.From, "to", r.To)
	s.recorder.Eventf(next, nil, corev1.EventTypeNormal, ReasonResized, "Resize", "%s", message)
	return nil
}

// preemptForResize evicts, when its ClusterQueue's preemption policy lets
// it, the admitted workloads whose preemption makes room on flavor for
// the pods a scale-up of the elastic workload wl adds (added, whose
// requests of the queue's quota are need), as Kueue's scheduler preempts for a
// workload slice: the search is the one for a pending workload, of the
// pods added alone, placed unconstrained beside the running ones, which
// are never victims. The quota the victims free is held for the resize
// (s.preemptions, keyed by wl) until their pods are gone and the resize
// is admitted. It returns the waiting message, false when it preempted
// nothing.
func (s *Scheduler) preemptForResize(ctx context.Context, cq *strata.ClusterQueue, flavor string, books *queue.Books, wl *strata.Workload,
	added strata.PodSet, need corev1.ResourceList, r workload.Resize) (string, bool) {
	allowed, upTo := preemption.Allowed(cq, wl)
	if !allowed || s.searches <= 0 {
		return "", false
	}
	var fq *strata.FlavorQuotas
	for _, f := range queue.Flavors(cq) {
		if f.Name == flavor {
			fq = &f
			break
		}
	}
	if fq == nil {
		return "", false
	}
	s.searches--
	sub := wl.DeepCopy()
	sub.Spec.PodSets = []strata.PodSet{added}
	sub.Status = strata.WorkloadStatus{}
	result, _ := s.search(cq, *fq, books, sub, upTo)
	if len(result.Victims) == 0 {
		return "", false
	}
	p := &pendingPreemption{flavor: flavor, queue: cq.Name, requests: need}
	for _, v := range result.Victims {
		evicted, err := s.evictVictim(ctx, v, wl, cq, flavor)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Preempting for a resize", "workload", client.ObjectKeyFromObject(wl), "victim", v.Key)
		}
		if evicted == nil {
			continue
		}
		p.addVictim(v.Key, evicted.UID)
		books.Charge(v.Queue, flavor, v.Requests, -1)
		for _, psa := range evicted.Status.Admission.PodSetAssignments {
			if psa.Flavor != flavor {
				books.Charge(v.Queue, psa.Flavor, queue.LessReclaimable(psa, workload.Reclaimable(evicted, psa.Name)), -1)
			}
		}
	}
	if len(p.victims) == 0 {
		return "", false
	}
	key := client.ObjectKeyFromObject(wl)
	p.uid = wl.UID
	s.preemptions[key] = p
	books.Charge(p.queue, p.flavor, p.requests, 1)
	s.charged[key] = true
	s.publishHolds()
	held := s.stillHeld(p)
	if len(held) == 0 {
		// No pod of them ran: the next pass places the pods added.
		s.Wake()
		return fmt.Sprintf("scaling up from %d to %d pods: preempted %d workload(s) on flavor %s; placed in the next pass", r.From, r.To, len(p.victims), flavor), true
	}
	return fmt.Sprintf("scaling up from %d to %d pods: %s", r.From, r.To, preemptingMessage(p, held)), true
}

// resizePending says on the workload why its resize waits (written when
// the message changes).
func (s *Scheduler) resizePending(ctx context.Context, wl *strata.Workload, message string) error {
	// The condition's bound, not an event's: the message is the record a
	// restart rebuilds the scale-up's preemption from (its victims).
	message = truncate(message)
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)
	if c != nil && c.Status == metav1.ConditionFalse && c.Message == message {
		return nil
	}
	out := wl.DeepCopy()
	meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse,
		Reason: ReasonResizePending, Message: message, ObservedGeneration: out.Generation, LastTransitionTime: metav1.NewTime(s.clock.Now())})
	if err := s.client.Status().Update(ctx, out); err != nil && !apierrors.IsConflict(err) {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// livePods counts an elastic workload's pods that run or wait to (not
// finished, not being deleted), and those released, by domain of a (the
// values of the node selector its release set at a's levels).
func (s *Scheduler) livePods(ctx context.Context, wl *strata.Workload, a *tas.Assignment) (int32, map[string]int32, error) {
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
		return 0, nil, err
	}
	var live int32
	byDomain := map[string]int32{}
	for _, p := range workload.OwnedPods(wl, pods.Items) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() {
			continue
		}
		live++
		values := make([]string, len(a.Levels))
		released := true
		for i, l := range a.Levels {
			v, ok := p.Spec.NodeSelector[l]
			values[i], released = v, released && ok
		}
		if released {
			byDomain[tas.DomainKey(values)]++
		}
	}
	return live, byDomain, nil
}
