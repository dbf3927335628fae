package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// secondPassState is what the second pass keeps of a workload whose
// delayed topology assignment failed: in memory, as KEP-2724 keeps its
// retry counter (a restart costs a few more attempts at most).
type secondPassState struct {
	uid         types.UID
	first, next time.Time
	attempts    int
	// written is the resourceVersion of the second pass's own write: an
	// older object of the workload is the informer not caught up yet.
	written int64
}

// secondPass assigns the topology of reserved workloads whose
// ProvisioningRequest check delayed it, once every check is Ready
// (KEP-2724's second pass), on the flavor their quota was reserved on,
// counting the nodes provisioned meanwhile; each is admitted in the same
// write. A failed placement keeps the reservation and is tried again
// after a backoff (workload.SecondPassRetry); past its limit the workload
// is evicted and queued again.
func (s *Scheduler) secondPass(ctx context.Context, wls []*strata.Workload) error {
	seen := make(map[types.NamespacedName]bool, len(wls))
	var errs []error
	for _, wl := range wls {
		key := client.ObjectKeyFromObject(wl)
		seen[key] = true
		st := s.secondPasses[key]
		if st != nil && st.uid != wl.UID {
			st = nil
		}
		if st == nil {
			st = &secondPassState{uid: wl.UID}
			s.secondPasses[key] = st
		}
		if st.written > 0 && cache.Version(wl) < st.written {
			continue // the informer has not shown the write yet
		}
		now := s.clock.Now()
		if !st.next.IsZero() && now.Before(st.next) {
			s.wakeLater(st.next)
			continue
		}
		if err := s.placeDelayed(ctx, wl, st, now); err != nil {
			errs = append(errs, err)
		}
	}
	for key := range s.secondPasses {
		if !seen[key] {
			delete(s.secondPasses, key)
		}
	}
	return errors.Join(errs...)
}

// placeDelayed is one second-pass attempt for wl.
func (s *Scheduler) placeDelayed(ctx context.Context, wl *strata.Workload, st *secondPassState, now time.Time) error {
	key := client.ObjectKeyFromObject(wl)
	cq := &strata.ClusterQueue{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: wl.Status.Admission.ClusterQueue}, cq); err != nil {
		// Its queue is gone: the reservation stands as it is.
		return client.IgnoreNotFound(err)
	}
	next, why := s.assignDelayed(key, wl)
	if why != "" {
		return s.secondPassFailed(ctx, wl, st, why, now)
	}
	workload.AdmitChecked(next, workload.ChecksOf(cq, workload.AdmissionFlavors(next.Status.Admission)), now)
	if err := s.client.Status().Update(ctx, next); err != nil {
		// What the cache took goes back; the informer's object is
		// accounted again by the next pass.
		s.cache.RemoveWorkload(key)
		s.index.recheckLater(key)
		s.Wake()
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer object comes as an event
		}
		return fmt.Errorf("recording the topology assignment of %s: %w", key, err)
	}
	st.written = cache.Version(next)
	ctrl.LoggerFrom(ctx).V(2).Info("Admitted after its delayed topology assignment", "workload", key)
	s.recorder.Eventf(next, nil, corev1.EventTypeNormal, "Admitted", "Schedule", "%s",
		truncateNote(meta.FindStatusCondition(next.Status.Conditions, strata.WorkloadAdmitted).Message))
	return nil
}

// assignDelayed places wl's delayed pod sets, each on the flavor its quota
// was reserved on, and takes their capacity in the cache; it returns the
// workload with its topology assigned (each delayedTopologyRequest
// Ready), or why it could not be placed.
func (s *Scheduler) assignDelayed(key types.NamespacedName, wl *strata.Workload) (*strata.Workload, string) {
	next := wl.DeepCopy()
	placed := workload.WithCheckUpdates(wl)
	delayed := workload.DelayedPodSets(wl)
	var flavors []string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if slices.Contains(delayed, psa.Name) && !slices.Contains(flavors, psa.Flavor) {
			flavors = append(flavors, psa.Flavor)
		}
	}
	for _, flavor := range flavors {
		def, err := s.flavorReady(flavor)
		if err != nil {
			return nil, err.Error()
		}
		// The pod sets of this flavor, with the counts their quota was
		// reserved for.
		sub := placed.DeepCopy()
		sub.Spec.PodSets = sub.Spec.PodSets[:0]
		var psas []int
		for i, psa := range next.Status.Admission.PodSetAssignments {
			if psa.Flavor != flavor || !slices.Contains(delayed, psa.Name) {
				continue
			}
			ps := workload.PodSet(placed, psa.Name)
			if ps == nil {
				return nil, fmt.Sprintf("its admission names pod set %q, which it does not have", psa.Name)
			}
			ps = ps.DeepCopy()
			ps.Count = psa.Count
			sub.Spec.PodSets = append(sub.Spec.PodSets, *ps)
			psas = append(psas, i)
		}
		var others []*strata.Workload
		if workload.Spreads(wl) && workload.DispatchKey(wl) == "" {
			others = s.cache.AdmittedIn(wl.Namespace)
		}
		var placeErr error
		found, err := s.cache.Reserve(flavor, key, func(snap *tas.Snapshot, topo *strata.Topology) (*strata.Workload, error) {
			assignments, taken, err := workload.PlaceSpread(snap, topo.Name, def.Spec.Tolerations, sub, others, s.opts)
			if err != nil {
				placeErr = err
				return nil, nil
			}
			for _, u := range taken {
				snap.Release(u)
			}
			for j, i := range psas {
				psa := &next.Status.Admission.PodSetAssignments[i]
				psa.TopologyAssignment = tas.Encode(assignments[j])
				psa.DelayedTopologyRequest = ptr.To(strata.DelayedTopologyRequestReady)
			}
			return next, nil
		})
		switch {
		case !found:
			return nil, topologyMissing(def).Error()
		case placeErr != nil:
			return nil, fmt.Sprintf("flavor %s: %v", flavor, placeErr)
		case err != nil:
			return nil, fmt.Sprintf("flavor %s: %v", flavor, err)
		}
	}
	return next, ""
}

// secondPassFailed records a failed attempt: the workload keeps its
// reservation and says when it is tried again, or, past the limit, is
// evicted.
func (s *Scheduler) secondPassFailed(ctx context.Context, wl *strata.Workload, st *secondPassState, why string, now time.Time) error {
	if st.attempts == 0 {
		st.first = now
	}
	st.attempts++
	next, evict := workload.SecondPassRetry(st.first, now, st.attempts)
	out := wl.DeepCopy()
	if evict {
		workload.EvictSecondPass(out, why, now)
		if err := s.client.Status().Update(ctx, out); err != nil {
			return client.IgnoreNotFound(err)
		}
		delete(s.secondPasses, client.ObjectKeyFromObject(wl))
		s.recorder.Eventf(out, nil, corev1.EventTypeWarning, strata.EvictedByTopologyAssignment, "Evict", "%s",
			truncateNote(meta.FindStatusCondition(out.Status.Conditions, strata.WorkloadEvicted).Message))
		return nil
	}
	st.next = next
	s.wakeLater(next)
	message := fmt.Sprintf("quota reserved and every admission check Ready; its delayed topology assignment failed (attempt %d): %s; tried again at %s, and evicted if it still fails at %s",
		st.attempts, why, next.UTC().Format(time.RFC3339), st.first.Add(workload.SecondPassLimit).UTC().Format(time.RFC3339))
	if !meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.WaitingForTopologyAssignment, Message: truncate(message), LastTransitionTime: metav1.NewTime(now)}) {
		return nil
	}
	if err := s.client.Status().Update(ctx, out); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	st.written = cache.Version(out)
	if st.attempts == 1 {
		s.recorder.Eventf(out, nil, corev1.EventTypeNormal, strata.WaitingForTopologyAssignment, "Schedule", "%s", truncateNote(message))
	}
	return nil
}
