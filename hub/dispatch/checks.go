package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// A hub ClusterQueue's AdmissionChecks are decided before a Workload is
// dispatched, as a MultiKueue manager waits for its queue's other checks
// before it nominates workers (Kueue's fix of 2026, #9866): the hub
// reserves the Workload's quota in its queue (status.admission under the
// hub ClusterQueue, QuotaReserved=True, each check Pending; no worker's
// capacity is held), each check's controller sets its state, and once
// every one is Ready the next pass places it on a worker, on the flavors
// reserved, and dispatches it; the dispatch's record replaces the
// reservation (RecordDispatch). A Retry takes the reservation back and
// queues it again; a Rejected deactivates it.

// MultiKueueController is the controllerName of MultiKueue's admission
// check. The hub plays its part (it dispatches): a hub ClusterQueue's
// check of that controller is not waited for.
const MultiKueueController = "kueue.x-k8s.io/multikueue"

// ReservedAtHub says whether a hub Workload holds a quota reservation of
// its hub ClusterQueue that is not dispatched: its queue's admission
// checks are being decided.
func ReservedAtHub(wl *strata.Workload) bool {
	_, _, _, placed := Placed(wl)
	return !placed && wl.Status.Admission != nil
}

// checkReadTimeout bounds a read of an AdmissionCheck.
const checkReadTimeout = 5 * time.Second

// checkReads memoizes a pass's reads of AdmissionChecks.
type checkReads struct {
	client client.Client
	read   map[string]checkRead
	// why memoizes checksNotReady by ClusterQueue.
	why map[string]string
}

type checkRead struct {
	ac  *strata.AdmissionCheck
	err error
}

func newCheckReads(c client.Client) *checkReads {
	return &checkReads{client: c, read: map[string]checkRead{}, why: map[string]string{}}
}

func (r *checkReads) get(ctx context.Context, name string) (*strata.AdmissionCheck, error) {
	if got, ok := r.read[name]; ok {
		return got.ac, got.err
	}
	ac := &strata.AdmissionCheck{}
	// Bounded: the cache's first read of the kind waits for its list,
	// which never comes without the RBAC to list it (an older chart).
	readCtx, cancel := context.WithTimeout(ctx, checkReadTimeout)
	defer cancel()
	err := r.client.Get(readCtx, types.NamespacedName{Name: name}, ac)
	if err != nil {
		ac = nil
	}
	r.read[name] = checkRead{ac: ac, err: err}
	return ac, err
}

// played says whether a check is the hub's own to play (MultiKueue's).
func (r *checkReads) played(ctx context.Context, name string) bool {
	ac, _ := r.get(ctx, name)
	return ac != nil && ac.Spec.ControllerName == MultiKueueController
}

// gating are the checks of hub ClusterQueue cq a Workload reserved on
// flavors waits for before its dispatch (workload.ChecksOf, but
// MultiKueue's).
func (r *checkReads) gating(ctx context.Context, cq *strata.ClusterQueue, flavors []string) []string {
	if r == nil {
		return nil // a pass that read none (tests)
	}
	names := workload.ChecksOf(cq, flavors)
	return slices.DeleteFunc(names, func(n string) bool { return r.played(ctx, n) })
}

// notReady says why hub ClusterQueue cq dispatches nothing because of
// its checks: one it names does not exist, or its controller has not set
// it Active (Kueue's inactive ClusterQueue); "" when none.
func (r *checkReads) notReady(ctx context.Context, cq *strata.ClusterQueue) string {
	if r == nil || len(workload.QueueChecks(cq)) == 0 {
		return ""
	}
	if why, ok := r.why[cq.Name]; ok {
		return why
	}
	var why []string
	for _, name := range workload.QueueChecks(cq) {
		ac, err := r.get(ctx, name)
		switch {
		case meta.IsNoMatchError(err):
			why = append(why, fmt.Sprintf("admission check %s: the AdmissionCheck CRD is not installed (apply the hub chart's crds/)", name))
		case apierrors.IsNotFound(err):
			why = append(why, fmt.Sprintf("admission check %s does not exist on the hub", name))
		case err != nil:
			why = append(why, fmt.Sprintf("admission check %s: %v", name, err))
		case ac.Spec.ControllerName == MultiKueueController:
		case !meta.IsStatusConditionTrue(ac.Status.Conditions, strata.AdmissionCheckActive):
			why = append(why, fmt.Sprintf("admission check %s is not Active (its controller, %s, has not marked it)", name, ac.Spec.ControllerName))
		}
	}
	out := ""
	if len(why) > 0 {
		out = fmt.Sprintf("hub ClusterQueue %s dispatches no workloads: %s", cq.Name, strings.Join(why, "; "))
	}
	r.why[cq.Name] = out
	return out
}

// reservedFlavors are the pod sets' flavors of a reservation: the first
// pod set's, and each pod set's that differs (as a dispatch's
// podSetFlavors).
func reservedFlavors(a *strata.Admission) (string, []strata.PodSetFlavor) {
	if a == nil || len(a.PodSetAssignments) == 0 {
		return "", nil
	}
	first := a.PodSetAssignments[0].Flavor
	var split []strata.PodSetFlavor
	for _, psa := range a.PodSetAssignments {
		if psa.Flavor != first {
			split = nil
			for _, q := range a.PodSetAssignments {
				split = append(split, strata.PodSetFlavor{Name: q.Name, Flavor: q.Flavor})
			}
			break
		}
	}
	return first, split
}

// reservedFlavor and reservedSplit are reservedFlavors of a Workload's
// admission.
func reservedFlavor(wl *strata.Workload) string {
	f, _ := reservedFlavors(wl.Status.Admission)
	return f
}

func reservedSplit(wl *strata.Workload) []strata.PodSetFlavor {
	_, split := reservedFlavors(wl.Status.Admission)
	return split
}

// OnReservedFlavors says whether a placement on flavor (each pod set's
// of podSetFlavors where it names one) puts every pod set of reservation
// a on the flavor reserved for it: a Workload whose checks were decided
// is dispatched there or not at all.
func OnReservedFlavors(a *strata.Admission, flavor string, podSetFlavors []strata.PodSetFlavor) bool {
	if a == nil {
		return false
	}
	for _, psa := range a.PodSetAssignments {
		on := flavor
		for _, f := range podSetFlavors {
			if f.Name == psa.Name && f.Flavor != "" {
				on = f.Flavor
			}
		}
		if on != psa.Flavor {
			return false
		}
	}
	return true
}

// reservedCounts are the pods of each pod set a reservation holds, nil
// when all.
func reservedCounts(wl *strata.Workload) []int32 {
	a := wl.Status.Admission
	if a == nil {
		return nil
	}
	counts := make([]int32, len(wl.Spec.PodSets))
	fewer := false
	for i := range wl.Spec.PodSets {
		counts[i] = wl.Spec.PodSets[i].Count
		for _, psa := range a.PodSetAssignments {
			if psa.Name == wl.Spec.PodSets[i].Name && psa.Count < counts[i] {
				counts[i], fewer = psa.Count, true
			}
		}
	}
	if !fewer {
		return nil
	}
	return counts
}

// Reserve records on status a quota reservation of hub ClusterQueue cq
// for wl's pod sets (counts: each one's pods, nil when all) on flavor,
// or each pod set on its own (podSetFlavors), whose checks are to be
// decided before its dispatch: status.admission, QuotaReserved=True, and
// Admitted=False (WaitingForAdmissionChecks) with each check Pending.
func Reserve(wl *strata.Workload, cq string, flavor string, podSetFlavors []strata.PodSetFlavor, counts []int32, checks []string, now time.Time) {
	a := &strata.Admission{ClusterQueue: cq}
	var on []string
	for i := range wl.Spec.PodSets {
		ps := wl.Spec.PodSets[i]
		if counts != nil {
			ps.Count = counts[i]
		}
		f := flavor
		for _, x := range podSetFlavors {
			if x.Name == ps.Name {
				f = x.Flavor
			}
		}
		if !slices.Contains(on, f) {
			on = append(on, f)
		}
		a.PodSetAssignments = append(a.PodSetAssignments, strata.PodSetAssignment{Name: ps.Name, Flavor: f, Count: ps.Count, ResourceUsage: queue.TotalRequests(&ps)})
	}
	wl.Status.Admission = a
	// An eviction before is over (Kueue's QuotaReserved reason on
	// Evicted and Preempted): True again would take this reservation
	// back.
	for _, t := range []string{strata.WorkloadEvicted, strata.WorkloadPreempted} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: strata.WorkloadQuotaReserved,
				Message: "quota reserved again in hub ClusterQueue " + cq, LastTransitionTime: metav1.NewTime(now)})
		}
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: ReasonAdmitted,
		Message: fmt.Sprintf("admitted by hub ClusterQueue %s on flavor %s", cq, strings.Join(on, ", "))})
	workload.ReserveForChecks(wl, checks, now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: strata.WaitingForAdmissionChecks, Message: waitingForChecks(cq, checks), LastTransitionTime: metav1.NewTime(now)})
}

// waitingForChecks is the Admitted=False message of a reservation whose
// checks are not all Ready.
func waitingForChecks(cq string, checks []string) string {
	return fmt.Sprintf("quota reserved in hub ClusterQueue %s; waiting for admission checks %s to be Ready; a worker is chosen and the job dispatched once they are",
		cq, strings.Join(checks, ", "))
}

// Release takes a reservation at the hub back (ReservedAtHub): no
// admission, QuotaReserved=False, every check Pending again; Admitted
// False with reason and message. evicted marks it Evicted and Requeued,
// as Kueue does after a check's Retry.
func Release(wl *strata.Workload, reason, message string, evicted bool, now time.Time) {
	wl.Status.Admission = nil
	workload.ReleaseChecks(wl, now)
	t := metav1.NewTime(now)
	message = truncate(message) // a check's message may be as long as a condition's
	if evicted {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: t})
		workload.SetRequeued(wl, metav1.ConditionTrue, reason, message, now)
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: reason, Message: message, LastTransitionTime: t})
}

// releaseWhy says why a reservation at the hub is taken back before its
// checks decide (its queue changed or stopped, the Workload was
// deactivated, or its job changed), with the Admitted reason; "" when it
// stands.
func releaseWhy(e *entry, cq *strata.ClusterQueue, stop queue.Stop) (reason, why string) {
	a := e.wl.Status.Admission
	switch {
	case cq == nil:
		return ReasonPending, fmt.Sprintf("quota reservation in hub ClusterQueue %s taken back: its LocalQueue points at no ClusterQueue now", a.ClusterQueue)
	case a.ClusterQueue != cq.Name:
		return ReasonPending, fmt.Sprintf("quota reservation in hub ClusterQueue %s taken back: its LocalQueue points at ClusterQueue %s now", a.ClusterQueue, cq.Name)
	case e.invalid || e.outdated:
		return ReasonPending, fmt.Sprintf("quota reservation in hub ClusterQueue %s taken back: its job changed", a.ClusterQueue)
	case e.inactive:
		return ReasonDeactivated, deactivatedMessage(e.wl)
	case stop.Stopped:
		return strata.QueueStopped, stop.Message
	case Evicting(e.wl):
		// Preempted at the hub for another Workload's quota (markEvicted).
		c := meta.FindStatusCondition(e.wl.Status.Conditions, strata.WorkloadEvicted)
		return c.Reason, c.Message
	}
	return "", ""
}

// collectReserved sorts a Workload reserved at the hub for a pass: its
// reservation charges its queue; what its checks say is done (a Retry
// takes the reservation back, a Rejected deactivates it); once every
// check is Ready it is to place, on the flavors reserved.
func (d *Dispatcher) collectReserved(ctx context.Context, c *collected, e *entry, cq *strata.ClusterQueue, stop queue.Stop, now time.Time) error {
	a := e.wl.Status.Admission
	if reason, why := releaseWhy(e, cq, stop); why != "" {
		return d.release(ctx, e.wl, reason, why, false, now)
	}
	flavor, split := reservedFlavors(a)
	d.chargeUsage(c.usage, a.ClusterQueue, flavor, e, split)
	// A candidate of the hub's quota preemption, as a dispatched one.
	c.dispatched = append(c.dispatched, dispatched{e: e, queue: a.ClusterQueue})
	// A reclaim that freed the quota for it is over: its reservation
	// charges that quota now.
	delete(d.reclaims, e.uid)
	names := c.checks.gating(ctx, cq, workload.AdmissionFlavors(a))
	wl := e.wl.DeepCopy()
	synced := workload.SyncChecks(wl, names, now)
	switch verdict, why := workload.Verdict(wl.Status.AdmissionChecks); verdict {
	case workload.ChecksRejected:
		return d.rejectAtHub(ctx, wl, why, now)
	case workload.ChecksRetry:
		message := "evicted: " + why + " (Retry); its quota reservation in hub ClusterQueue " + a.ClusterQueue + " is taken back and it waits in its queue again"
		return d.release(ctx, wl, strata.EvictedByAdmissionCheck, message, true, now)
	case workload.ChecksWait:
		if synced {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
				Reason: strata.WaitingForAdmissionChecks, Message: waitingForChecks(a.ClusterQueue, names), LastTransitionTime: metav1.NewTime(now)})
			return d.writeReserved(ctx, wl)
		}
		return nil
	}
	je, err := d.job(ctx, e)
	if err != nil || je == nil || je.deleting {
		return err
	}
	// With the pods it reserved (fewer than all, partial admission):
	// its need and shape are theirs. Placed with what its checks ask
	// for its pods' nodes, which its copy carries.
	p := pending{entry: e, job: je.job.Object(), queue: cq.Name, reserved: true}.withCheckUpdates()
	c.waiting = append(c.waiting, p.withCounts(reservedCounts(e.wl)))
	return nil
}

// release writes a reservation at the hub taken back (Release).
func (d *Dispatcher) release(ctx context.Context, wl *strata.Workload, reason, message string, evicted bool, now time.Time) error {
	wl = wl.DeepCopy()
	Release(wl, reason, message, evicted, now)
	if err := d.writeReserved(ctx, wl); err != nil {
		return err
	}
	if evicted {
		d.recorder.Eventf(wl, nil, corev1.EventTypeNormal, reason, "Evict", "%s", truncateNote(message))
	}
	return nil
}

// rejectAtHub deactivates a Workload a check of its hub queue rejected,
// as Kueue does: spec.active first (no new reservation comes before it),
// then its reservation goes, the check's message quoted.
func (d *Dispatcher) rejectAtHub(ctx context.Context, wl *strata.Workload, why string, now time.Time) error {
	patch := client.MergeFrom(wl.DeepCopy())
	wl.Spec.Active = ptr.To(false)
	if err := d.client.Patch(ctx, wl, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	d.recorder.Eventf(wl, nil, corev1.EventTypeWarning, strata.AdmissionCheckRejected, "Deactivate", "Deactivated: %s", truncateNote(why))
	message := truncate(deactivatedMessage(wl))
	wl.Status.Admission = nil
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: ReasonDeactivated, Message: message, LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: ReasonDeactivated, Message: message, LastTransitionTime: t})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
		Reason: ReasonDeactivated, Message: "no quota reserved", LastTransitionTime: t})
	workload.SetRequeued(wl, metav1.ConditionFalse, ReasonDeactivated, message, now)
	return d.writeReserved(ctx, wl)
}

// writeReserved writes the status of a Workload reserved at the hub; a
// conflict or its deletion is left to the next pass, which its event
// brings.
func (d *Dispatcher) writeReserved(ctx context.Context, wl *strata.Workload) error {
	err := d.client.Status().Update(ctx, wl)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		d.mu.Lock()
		delete(d.waiting, wl.UID)
		d.mu.Unlock()
	}
	return err
}

// reserve reserves p's quota in cq on flavor (or each pod set's,
// podSetFlavors) for its checks to decide, instead of dispatching it: the
// books are charged at once, no worker's capacity is held, and the
// record is one of the pass's writes.
func (d *Dispatcher) reserve(ctx context.Context, cq *strata.ClusterQueue, p pending, flavor string, podSetFlavors []strata.PodSetFlavor, checks []string, now time.Time,
	books *queue.Books, writes *passWrites) {
	wl := p.wl.DeepCopy()
	Reserve(wl, cq.Name, flavor, podSetFlavors, p.counts, checks, now)
	for f, need := range ReservedUsage(wl) {
		books.Charge(cq.Name, f, need, 1)
	}
	over := wl.ResourceVersion
	writes.do(func() error {
		if err := d.writeReserved(ctx, wl); err != nil {
			return err
		}
		if wl.ResourceVersion != over {
			d.mu.Lock()
			if d.reservedAhead == nil {
				d.reservedAhead = map[types.UID]reservedWrite{}
			}
			d.reservedAhead[wl.UID] = reservedWrite{over: over, wl: wl}
			d.mu.Unlock()
		}
		d.recorder.Eventf(wl, nil, corev1.EventTypeNormal, strata.WorkloadQuotaReserved, "Reserve", "%s", truncateNote(
			meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted).Message))
		return nil
	})
}

// reservedWrite is a reservation at the hub this process wrote: the
// Workload as written, and the resourceVersion it was written over.
type reservedWrite struct {
	over string
	wl   *strata.Workload
}

// reservedAheadOf returns the reservation this process wrote for an
// entry the informer shows as it was before that write (nil when none,
// or once the informer shows any later version): until then the
// reservation charges its queue, and the Workload is not placed again.
func (d *Dispatcher) reservedAheadOf(e *entry) *strata.Workload {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.reservedAhead[e.uid]
	if !ok {
		return nil
	}
	if e.wl.ResourceVersion != w.over {
		delete(d.reservedAhead, e.uid)
		return nil
	}
	return w.wl
}

// ReservedUsage is what a reservation at the hub (ReservedAtHub) uses of
// its queue's quota, by flavor.
func ReservedUsage(wl *strata.Workload) map[string]corev1.ResourceList {
	flavor, split := reservedFlavors(wl.Status.Admission)
	return queue.SplitUsage(wl, flavor, split)
}

// reservedUsage is what a reservation at the hub charges its queue in a
// pass, by flavor (as collectReserved charges it).
func reservedUsage(e *entry) map[string]corev1.ResourceList {
	flavor, split := reservedFlavors(e.wl.Status.Admission)
	if len(split) > 0 {
		return queue.SplitUsage(e.wl, flavor, split)
	}
	return map[string]corev1.ResourceList{flavor: e.charged()}
}

// checkDispatched acts on the hub queue's checks of a dispatched
// Workload (their states stay on it after its dispatch): one set to Retry
// since evicts it at the hub (Evicted, reason AdmissionCheck: its copy is
// taken back, and it is reserved and checked again), one Rejected
// deactivates it (its copy is taken back as for any deactivation), as
// Kueue evicts an admitted workload a check retries or rejects.
func (d *Dispatcher) checkDispatched(ctx context.Context, reads *checkReads, e *entry, cq *strata.ClusterQueue, now time.Time) error {
	if cq == nil || len(e.wl.Status.AdmissionChecks) == 0 || Evicting(e.wl) || !workload.IsActive(e.wl) || len(workload.QueueChecks(cq)) == 0 {
		return nil
	}
	// Only the checks that gate where it is placed: a state left by a
	// check removed from the queue since, or of another flavor's, is not
	// its to act on.
	gating := reads.gating(ctx, cq, placementFlavors(e.wl.Status.Placement))
	states := slices.DeleteFunc(slices.Clone(e.wl.Status.AdmissionChecks), func(s strata.AdmissionCheckState) bool { return !slices.Contains(gating, s.Name) })
	switch verdict, why := workload.Verdict(states); verdict {
	case workload.ChecksRejected:
		wl := e.wl.DeepCopy()
		patch := client.MergeFrom(wl.DeepCopy())
		wl.Spec.Active = ptr.To(false)
		if err := d.client.Patch(ctx, wl, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
		d.recorder.Eventf(wl, nil, corev1.EventTypeWarning, strata.AdmissionCheckRejected, "Deactivate", "Deactivated: %s", truncateNote(why))
	case workload.ChecksRetry:
		wl := e.wl.DeepCopy()
		message := "evicted: " + why + " (Retry); its copy is taken back, and it is reserved and checked again"
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
			Reason: strata.EvictedByAdmissionCheck, Message: truncate(message), LastTransitionTime: metav1.NewTime(now)})
		workload.SetRequeued(wl, metav1.ConditionTrue, strata.EvictedByAdmissionCheck, truncate(message), now)
		if err := d.writeReserved(ctx, wl); err != nil {
			return err
		}
		d.recorder.Eventf(wl, nil, corev1.EventTypeNormal, strata.EvictedByAdmissionCheck, "Evict", "%s", truncateNote(message))
	}
	return nil
}

// placementFlavors are the flavors a dispatch placed a Workload's pod
// sets on: its flavor, and each pod set's that differs.
func placementFlavors(p *strata.Placement) []string {
	if p == nil || p.Flavor == "" {
		return nil
	}
	out := []string{p.Flavor}
	for _, f := range p.PodSetFlavors {
		if !slices.Contains(out, f.Flavor) {
			out = append(out, f.Flavor)
		}
	}
	return out
}
