package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// Elastic Jobs through the hub (workload.Elastic, Kueue's KEP-77). A hub
// Workload's pod count is the size its hub ClusterQueue granted its job:
// the hub charges that count (entry.charged), its copy on the worker is
// brought to it (the copies controller), and the worker's agent then
// resizes the copy's admission in place. When the hub job of an admitted
// elastic Workload is resized, a pass grants the new size before it
// serves the waiting Workloads: a scale-down at once, a scale-up when the
// hub queue's quota holds the pods added (charged from then on, as a
// dispatch's quota is, before the worker admits them); it waits
// otherwise, saying why in the Workload's Resized condition, after
// preempting at the hub, as its queue's policy lets it, the Workloads
// whose quota the pods added need (Kueue's workload slice of the new
// size is a pending Workload that preempts so): reclaimForResize.

// ReasonResizePending is the reason of an elastic hub Workload's Resized
// condition while its new size waits: for its hub queue's quota, or for
// its worker to resize its copy (the agent's condition has the same).
const ReasonResizePending = "Pending"

// resizing is an admitted elastic hub Workload whose job asks for another
// size than the one granted, or ({} resize) whose Resized condition says
// it waits for its hub queue's quota while its job asks for the size
// granted again.
type resizing struct {
	e *entry
	// queue is the hub ClusterQueue its usage is charged to.
	queue  string
	resize workload.Resize
}

// hubQuotaWait is what the message of a resize that waits for its hub
// queue's quota says.
const hubQuotaWait = "waits for quota of hub ClusterQueue"

// waitsForHubQuota says whether an elastic hub Workload's Resized
// condition says it waits for its hub queue's quota.
func waitsForHubQuota(wl *strata.Workload) bool {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)
	return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, hubQuotaWait)
}

// clearResizePending removes the Resized condition of an elastic hub
// Workload whose job asks for the size granted again: nothing waits.
func (d *Dispatcher) clearResizePending(ctx context.Context, wl *strata.Workload, writes *passWrites) {
	out := wl.DeepCopy()
	if !meta.RemoveStatusCondition(&out.Status.Conditions, strata.WorkloadResized) {
		return
	}
	writes.do(func() error {
		if err := d.client.Status().Update(ctx, out); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("clearing the Resized condition of hub Workload %s/%s: %w", wl.Namespace, wl.Name, err)
		}
		return nil
	})
}

// wantsResize says whether a dispatched hub Workload's job, j, asks for
// another pod count than the Workload's: an elastic Workload admitted on
// its worker, with one pod set, active and not being taken back. From is
// the Workload's count (granted), To the job's.
func wantsResize(wl *strata.Workload, j jobs.Job) (workload.Resize, bool) {
	if !workload.Elastic(wl) || wl.Status.Admission == nil || len(wl.Spec.PodSets) != 1 || !workload.IsActive(wl) || Evicting(wl) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return workload.Resize{}, false
	}
	podSets, errs := j.PodSets()
	if len(errs) > 0 || len(podSets) != 1 || podSets[0].Name != wl.Spec.PodSets[0].Name {
		return workload.Resize{}, false // intake says what is wrong with the job
	}
	from, to := wl.Spec.PodSets[0].Count, podSets[0].Count
	if to == from || to <= 0 {
		return workload.Resize{}, false
	}
	return workload.Resize{From: from, To: to}, true
}

// inTransit says whether an elastic hub Workload's granted size is not
// yet its worker's admission: its copy is being resized.
func inTransit(wl *strata.Workload) bool {
	a := wl.Status.Admission
	return a != nil && len(a.PodSetAssignments) == 1 && len(wl.Spec.PodSets) == 1 && a.PodSetAssignments[0].Count != wl.Spec.PodSets[0].Count
}

// addedRequests is what the pods a scale-up adds to a pod set request in
// all.
func addedRequests(ps *strata.PodSet, added int32) corev1.ResourceList {
	sized := *ps
	sized.Count = added
	return queue.TotalRequests(&sized)
}

// resizeGrant decides a resize against the hub queue's quota: a
// scale-down is granted; a scale-up when check, the quota check of the
// pods it adds, passes (nil); otherwise the message says why it waits.
func resizeGrant(r workload.Resize, queueName, flavor string, check func() error) (granted bool, message string) {
	if r.To < r.From {
		return true, ""
	}
	if err := check(); err != nil {
		return false, fmt.Sprintf("scaling up from %d to %d pods %s %s on flavor %s: %v", r.From, r.To, hubQuotaWait, queueName, flavor, err)
	}
	return true, ""
}

// resize grants or holds the resizes a pass collected, before the
// waiting Workloads are served: a grant is charged to books at once and
// written as the Workload's new pod count.
func (d *Dispatcher) resize(ctx context.Context, resizes []resizing, queues map[string]*strata.ClusterQueue, view *passView, books *queue.Books, writes *passWrites) {
	// The quota scale-downs give back first; then scale-ups in their
	// queues' order (priority, then queue time), as Kueue's workload
	// slices of the new sizes would be admitted.
	slices.SortStableFunc(resizes, func(a, b resizing) int {
		if da, db := a.resize.To <= a.resize.From, b.resize.To <= b.resize.From; da != db {
			if da {
				return -1
			}
			return 1
		}
		return queue.Compare(a.e.wl, b.e.wl)
	})
	for _, r := range resizes {
		wl := r.e.wl
		if r.resize == (workload.Resize{}) {
			d.clearResizePending(ctx, wl, writes)
			continue
		}
		added := addedRequests(&wl.Spec.PodSets[0], r.resize.To-r.resize.From)
		// Its own hold (a reclaim for its scale-up under way, charged by
		// holdReclaims) is not in its way.
		held := d.reclaims[r.e.uid]
		if held != nil {
			books.Charge(held.queue, held.flavor, held.need, -1)
		}
		granted, message := resizeGrant(r.resize, r.queue, r.e.flavor, func() error {
			return books.Check(r.queue, r.e.flavor, added, false).Err
		})
		if !granted {
			if held != nil {
				books.Charge(held.queue, held.flavor, held.need, 1)
			}
			if !inTransit(wl) {
				if cq := queues[r.queue]; cq != nil {
					if reclaiming := d.reclaimForResize(ctx, cq, books, view, r, added, writes); reclaiming != "" {
						message += "; " + reclaiming
					}
				}
				d.markResizePending(ctx, wl, r.resize, message, writes)
			}
			continue
		}
		if held != nil {
			delete(d.reclaims, r.e.uid) // granted: the grant charges what it held
		}
		if r.resize.To > r.resize.From {
			books.Charge(r.queue, r.e.flavor, added, 1)
		} else {
			// Its charge is the granted size from now on.
			books.Charge(r.queue, r.e.flavor, addedRequests(&wl.Spec.PodSets[0], r.resize.From-r.resize.To), -1)
		}
		d.grantResize(ctx, wl, r.resize, writes)
	}
}

// grantResize writes an elastic hub Workload's granted pod count: a JSON
// patch of that count alone, on the version the pass read (the
// informer's Workloads are lean, never written whole).
func (d *Dispatcher) grantResize(ctx context.Context, wl *strata.Workload, r workload.Resize, writes *passWrites) {
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": wl.ResourceVersion},
		{"op": "test", "path": "/spec/podSets/0/count", "value": r.From},
		{"op": "replace", "path": "/spec/podSets/0/count", "value": r.To},
	})
	writes.do(func() error {
		obj := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := d.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
				// Changed since the pass read it (a failed test is
				// Invalid): the newer Workload comes as an event, and a
				// pass decides again.
				return nil
			}
			return fmt.Errorf("resizing hub Workload %s from %d to %d pods: %w", key, r.From, r.To, err)
		}
		return nil
	})
}

// markResizePending says on an elastic hub Workload why its resize r
// waits: written again when the resize or the reason changes, not when
// only the quota's figures do.
func (d *Dispatcher) markResizePending(ctx context.Context, wl *strata.Workload, r workload.Resize, message string, writes *passWrites) {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized); c != nil && c.Status == metav1.ConditionFalse &&
		c.Reason == ReasonResizePending && strings.Contains(c.Message, fmt.Sprintf("from %d to %d pods", r.From, r.To)) &&
		workload.WithoutNumbers(c.Message) == workload.WithoutNumbers(message) {
		return
	}
	out := wl.DeepCopy()
	meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse,
		Reason: ReasonResizePending, Message: truncate(message), ObservedGeneration: out.Generation, LastTransitionTime: metav1.NewTime(d.clock.Now())})
	writes.do(func() error {
		if err := d.client.Status().Update(ctx, out); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("saying why hub Workload %s/%s waits to be resized: %w", wl.Namespace, wl.Name, err)
		}
		return nil
	})
}

// ReasonResized is the reason of an elastic hub Workload's Resized
// condition once its worker's admission runs the size granted.
const ReasonResized = "Resized"

// NoteResize keeps an elastic hub Workload's Resized condition as its
// worker's admission of the copy (copyWL) follows the size granted (the
// hub Workload's count): True once the worker admitted another count
// than before (before: the hub's record of the admission, nil the first
// time), False while the copy is being resized (with the worker's reason
// when its agent says why it waits). event is what to tell of a resize
// done ("" none). It changes nothing otherwise: a wait for the hub
// queue's quota is the dispatcher's to say.
func NoteResize(status *strata.WorkloadStatus, wl *strata.Workload, before *strata.Admission, copyWL *strata.Workload, cluster string, now time.Time) (changed bool, event string) {
	if !workload.Elastic(wl) || len(wl.Spec.PodSets) != 1 || copyWL == nil || copyWL.Status.Admission == nil {
		return false, ""
	}
	count := func(a *strata.Admission) int32 {
		if a == nil || len(a.PodSetAssignments) != 1 {
			return 0
		}
		return a.PodSetAssignments[0].Count
	}
	was, admitted, granted := count(before), count(copyWL.Status.Admission), wl.Spec.PodSets[0].Count
	var cond metav1.Condition
	switch {
	case admitted == 0:
		return false, ""
	case was != 0 && admitted != was:
		dir := "up"
		if admitted < was {
			dir = "down"
		}
		event = fmt.Sprintf("scaled %s from %d to %d pods in place on %s", dir, was, admitted, cluster)
		cond = metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionTrue, Reason: ReasonResized, Message: event}
	case admitted != granted:
		message := fmt.Sprintf("its copy on %s is being resized from %d to %d pods", cluster, admitted, granted)
		if c := meta.FindStatusCondition(copyWL.Status.Conditions, strata.WorkloadResized); c != nil && c.Status == metav1.ConditionFalse {
			message = fmt.Sprintf("%s: %s", message, c.Message)
		}
		cond = metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse, Reason: ReasonResizePending, Message: truncate(message)}
	default:
		return false, ""
	}
	cond.ObservedGeneration, cond.LastTransitionTime = wl.Generation, metav1.NewTime(now)
	return meta.SetStatusCondition(&status.Conditions, cond), event
}

// reclaimForResize preempts at the hub, on the flavor an elastic Workload
// runs on, the Workloads whose quota the pods its scale-up adds (added)
// need, as its queue's preemption policy lets it (priority, cohort
// reclaim): their copies are taken back, and the quota they free is held
// for the scale-up while they go (startReclaim; each pass holds it again
// while the scale-up waits, and the pass grants resizes before it serves
// the waiting Workloads). It returns what the Resized condition says of
// it; "" when the queue preempts nothing or no victim helps.
func (d *Dispatcher) reclaimForResize(ctx context.Context, cq *strata.ClusterQueue, books *queue.Books, view *passView, r resizing, added corev1.ResourceList,
	writes *passWrites) string {
	policy := preemption.PolicyOf(cq)
	policy.Fair = d.fair
	if !policy.Any() || view == nil || view.reclaimSearches <= 0 {
		return ""
	}
	e := *r.e
	e.need, e.needKey = added, resourcesKey(added)
	p := pending{entry: &e, queue: cq.Name}
	if prev := d.reclaims[r.e.uid]; prev != nil {
		// A reclaim for it under way: it waits for those victims, not
		// searching again (the search would count them as candidates
		// still, or pick others).
		byUID := make(map[types.UID]*dispatched, len(view.dispatched))
		for i := range view.dispatched {
			byUID[view.dispatched[i].e.uid] = &view.dispatched[i]
		}
		var left []string
		for _, uid := range prev.victims {
			if v := prev.stillVictim(byUID, uid); v != nil {
				left = append(left, v.e.namespace+"/"+v.e.name)
				d.markEvicted(ctx, v, p, cq, prev.why[uid], writes)
			}
		}
		if len(left) > 0 {
			return strings.Replace(reclaimingMessage(prev.flavor, left), "dispatched once", "granted once", 1)
		}
		delete(d.reclaims, r.e.uid) // its victims are gone, and what they freed was taken
	}
	view.reclaimSearches--
	best, _ := reclaimSearch(cq, books, view, p, policy, r.e.flavor)
	if best == nil || len(best.going)+len(best.result.Victims) == 0 {
		return ""
	}
	return strings.Replace(d.startReclaim(ctx, cq, books, view, p, best, writes), "dispatched once", "granted once", 1)
}
