package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

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
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// pendingPreemption is a preemption under way: its victims were evicted
// and the preemptor waits until their pods are gone. Meanwhile the victims
// are not admitted again (the capacity they free is the preemptor's).
type pendingPreemption struct {
	// uid is the preemptor's: a Workload made again under its name is
	// another, whose search starts afresh.
	uid     types.UID
	flavor  string
	victims []types.NamespacedName
	// victimUIDs are the victims' UIDs when they were evicted ("" when
	// not known: a preemption restored by an agent that restarted): a
	// Workload made again under a victim's name is another, which the
	// preemptor neither waits for nor holds back.
	victimUIDs map[types.NamespacedName]types.UID
	// queue and requests are the preemptor's: its quota on the flavor is
	// held while the victims' pods end.
	queue    string
	requests corev1.ResourceList
	// counts, for a preemption for fewer pods than the preemptor's
	// Workload asks for (partial admission), are those
	// (workload.FormatPodSetCounts); "" for all of them. The waiting
	// message carries them, so that a restart holds as much quota.
	counts string
	// podSets, for a preemption for some of the preemptor's pod sets
	// only (preemptByUnit: the others fit on flavors of their own), are
	// their names in spec order; nil for all of them. The waiting message
	// carries them too.
	podSets []string
	// pods are, by victim, the pods it held capacity with when the
	// preemption first looked once it was evicted (stillHeld): only those
	// are waited for. A pod labelled as the victim's afterwards (a
	// tenant's own, relabelled) does not keep the preemptor waiting.
	pods map[types.NamespacedName][]types.UID
}

// addVictim adds a victim evicted with UID uid ("" when not known).
func (p *pendingPreemption) addVictim(key types.NamespacedName, uid types.UID) {
	p.victims = append(p.victims, key)
	if uid == "" {
		return
	}
	if p.victimUIDs == nil {
		p.victimUIDs = map[types.NamespacedName]types.UID{}
	}
	p.victimUIDs[key] = uid
}

// preemptionSearchesPerPass bounds the preemption searches of one pass: a
// long queue of workloads that cannot be helped does not make every pass
// search for each of them. The others keep the reason they have.
const preemptionSearchesPerPass = 16

// oracleSearchesPerPass bounds the quota-only searches that order a
// pass's heads (heightAfterPreempting): a long backlog of heads that must
// preempt does not search for each of them; the others are ordered by
// the estimate.
const oracleSearchesPerPass = 64

// publishHolds gives the cache the quota held for the preemptions under
// way, by flavor and ClusterQueue: the capacity summary's queue usage
// counts it, as the books do (a preemptor whose admission is being
// written counts in both a moment, on the safe side).
func (s *Scheduler) publishHolds() {
	holds := map[string]map[string]corev1.ResourceList{}
	for _, p := range s.preemptions {
		if holds[p.flavor] == nil {
			holds[p.flavor] = map[string]corev1.ResourceList{}
		}
		queue.AddRequests(holds[p.flavor], p.queue, p.requests)
	}
	s.cache.SetPreemptionHolds(holds)
}

// stillHeld returns the victims of a preemption whose capacity is not
// free yet.
func (s *Scheduler) stillHeld(p *pendingPreemption) []types.NamespacedName {
	var out []types.NamespacedName
	for _, v := range p.victims {
		admitted, pods, holding := s.cache.HoldingPods(v)
		if uid := p.victimUIDs[v]; admitted && uid != "" && s.cache.AdmittedUID(v) != uid {
			admitted = false // another Workload under the victim's name
		}
		if admitted {
			out = append(out, v)
			continue
		}
		if p.pods == nil {
			p.pods = map[types.NamespacedName][]types.UID{}
		}
		// Every pod of it then, on a Ready node or not: one on a node
		// NotReady a moment holds capacity again once the node is back.
		had, seen := p.pods[v]
		if !seen {
			p.pods[v], had = pods, pods
		}
		if slices.ContainsFunc(holding, func(uid types.UID) bool { return slices.Contains(had, uid) }) {
			out = append(out, v)
		}
	}
	return out
}

// victimRef is the preemptor of a victim, and the victim's UID when it
// was evicted ("" when not known).
type victimRef struct {
	by  types.NamespacedName
	uid types.UID
}

// of says whether wl is the victim the reference names: the same UID, or
// any Workload of its name when the UID is not known.
func (r victimRef) of(wl *strata.Workload) bool { return r.uid == "" || r.uid == wl.UID }

// pendingRef is what a pass knows of a pending workload: its UID and the
// ClusterQueue it waits in ("" when not known).
type pendingRef struct {
	uid   types.UID
	queue string
}

// forgetPreemptions drops the preemptions whose preemptor is no longer
// pending (admitted, finished or deleted), or is pending in another
// ClusterQueue than the one the preemption holds quota in (its LocalQueue
// pointed elsewhere since), and returns, for each victim of the others,
// its preemptor.
func (s *Scheduler) forgetPreemptions(pending map[types.NamespacedName]pendingRef) map[types.NamespacedName]victimRef {
	victimOf := map[types.NamespacedName]victimRef{}
	for key, p := range s.preemptions {
		ref, ok := pending[key]
		if !ok || ref.uid != "" && p.uid != "" && ref.uid != p.uid || ref.queue != "" && p.queue != "" && ref.queue != p.queue {
			delete(s.preemptions, key)
			continue
		}
		for _, v := range p.victims {
			victimOf[v] = victimRef{by: key, uid: p.victimUIDs[v]}
		}
	}
	return victimOf
}

// search looks for the minimal set of admitted workloads on one flavor
// whose preemption lets wl in, without preempting them. It returns the
// result, or why no search could be made (the flavor not ready, no
// topology).
func (s *Scheduler) search(cq *strata.ClusterQueue, fq strata.FlavorQuotas, books *queue.Books, wl *strata.Workload, upTo *int32) (preemption.Result, string) {
	flavorDef, err := s.flavorReady(fq.Name)
	if err != nil {
		return preemption.Result{}, err.Error()
	}
	key := client.ObjectKeyFromObject(wl)
	// An admission the informer does not show yet is not a candidate: the
	// eviction would be written on an object older than it.
	s.mu.Lock()
	writing := make(map[types.NamespacedName]bool, len(s.inflight))
	for k := range s.inflight {
		writing[k] = true
	}
	s.mu.Unlock()
	var result preemption.Result
	pre := preemption.Preemptor{Key: key, Queue: cq.Name, Priority: queue.Priority(wl), QueuedAt: queue.QueuedAt(wl), Requests: queue.WorkloadRequests(wl)}
	// Topology spreading counts the workloads admitted in the namespace,
	// as admission does (admitOnFlavor): a search that left it out would
	// find the preemptor fits where admission then refuses it, and evict
	// a victim for nothing, pass after pass.
	var others []*strata.Workload
	if workload.Spreads(wl) && workload.DispatchKey(wl) == "" {
		others = s.cache.AdmittedIn(wl.Namespace)
	}
	found := s.cache.WithAdmitted(fq.Name, func(snap *tas.Snapshot, topo *strata.Topology, admitted []cache.AdmittedOn) {
		cands := make([]preemption.Workload, 0, len(admitted))
		usages := make([]tas.Usage, 0, len(admitted))
		candidateOf := map[types.NamespacedName]int{}
		for _, a := range admitted {
			k := client.ObjectKeyFromObject(a.Workload)
			if k == key || writing[k] || a.Workload.Status.Admission == nil {
				continue
			}
			if upTo != nil && queue.Priority(a.Workload) > *upTo {
				continue // beyond what the hub chose this worker to preempt
			}
			candidateOf[k] = len(cands)
			cands = append(cands, s.candidate(a.Workload, fq.Name))
			usages = append(usages, a.Usage)
		}
		counted := map[int]bool{} // candidates spreading counts
		for _, o := range others {
			if i, ok := candidateOf[client.ObjectKeyFromObject(o)]; ok {
				counted[i] = true
			}
		}
		policy := preemption.PolicyOf(cq)
		policy.Fair = s.fair
		if s.delaysTopology(cq, fq.Name) {
			// Its first pass reserves quota only (KEP-2724): victims are
			// found on quota alone; its ProvisioningRequest asks for the
			// nodes.
			result = preemption.Find(pre, policy, books, fq.Name, cands, preemption.QuotaOnly{})
			return
		}
		var capacity *preemption.SnapshotCapacity
		capacity = &preemption.SnapshotCapacity{Snap: snap, Usages: usages, Affects: func(i int) bool { return counted[i] }, Place: func(sn *tas.Snapshot) ([]tas.Usage, error) {
			var still []*strata.Workload // spreading counts those not preempted in this trial
			for _, o := range others {
				if i, ok := candidateOf[client.ObjectKeyFromObject(o)]; !ok || !capacity.Released(i) {
					still = append(still, o)
				}
			}
			_, taken, err := workload.PlaceSpread(sn, topo.Name, flavorDef.Spec.Tolerations, wl, still, s.opts)
			return taken, err
		}}
		result = preemption.Find(pre, policy, books, fq.Name, cands, capacity)
	})
	if !found {
		return preemption.Result{}, topologyMissing(flavorDef).Error()
	}
	if len(result.Victims) == 0 {
		return result, fmt.Sprintf("flavor %s: %s", fq.Name, result.Why)
	}
	return result, ""
}

// preempt evicts the victims a search found on one flavor for wl, which
// needs the requests need there, for the pod sets' counts (nil: all of
// wl's pods; fewer for a partial admission). It returns whether it did;
// once the victims' pods are gone (at once when they had none) a pass
// admits wl.
//
// podSets names the pod sets it preempts for when not all (nil: all).
func (s *Scheduler) preempt(ctx context.Context, cq *strata.ClusterQueue, fq strata.FlavorQuotas, books *queue.Books, wl *strata.Workload,
	need corev1.ResourceList, counts []int32, podSets []string, result preemption.Result) (bool, error) {
	key := client.ObjectKeyFromObject(wl)
	p := &pendingPreemption{flavor: fq.Name, queue: cq.Name, requests: need, counts: fewerCounts(cmp.Or(s.uncapped[wl.UID], wl), wl, counts), podSets: podSets}
	var errs []error
	for _, v := range result.Victims {
		evicted, err := s.evictVictim(ctx, v, wl, cq, fq.Name)
		if err != nil {
			errs = append(errs, err)
		}
		if evicted == nil {
			continue
		}
		p.addVictim(v.Key, evicted.UID)
		books.Charge(v.Queue, fq.Name, v.Requests, -1)
		s.round.charged = append(s.round.charged, roundCharge{v.Queue, fq.Name, v.Requests, -1})
		// A victim with pod sets on other flavors too is evicted whole:
		// its quota there is free for the rest of the pass as well.
		for _, psa := range evicted.Status.Admission.PodSetAssignments {
			if psa.Flavor == fq.Name {
				continue
			}
			used := queue.LessReclaimable(psa, workload.Reclaimable(evicted, psa.Name))
			books.Charge(v.Queue, psa.Flavor, used, -1)
			s.round.charged = append(s.round.charged, roundCharge{v.Queue, psa.Flavor, used, -1})
		}
	}
	if len(p.victims) == 0 {
		return false, errors.Join(errs...)
	}
	p.uid = wl.UID
	s.preemptions[key] = p
	s.publishHolds()
	if held := s.stillHeld(p); len(held) > 0 {
		return true, errors.Join(append(errs, s.setNotAdmitted(ctx, wl, ReasonPreempting, preemptingMessage(p, held)))...)
	}
	return true, errors.Join(errs...)
}

// heightAfterPreempting is Kueue's preemption oracle for the order of a
// round's heads (queue.Books.WouldBorrowAfter): how high in its cohort
// tree wl borrows on flavor once the victims a search on quota alone
// finds there are gone; false when it finds none, or wl may not preempt.
func (s *Scheduler) heightAfterPreempting(cq *strata.ClusterQueue, flavor string, books *queue.Books, wl *strata.Workload, need corev1.ResourceList) (int, bool) {
	allowed, upTo := preemption.Allowed(cq, wl)
	if !allowed {
		return 0, false
	}
	s.oracles--
	key := client.ObjectKeyFromObject(wl)
	pre := preemption.Preemptor{Key: key, Queue: cq.Name, Priority: queue.Priority(wl), QueuedAt: queue.QueuedAt(wl), Requests: need}
	admitted := s.cache.AdmittedOnFlavor(flavor)
	cands := make([]preemption.Workload, 0, len(admitted))
	for _, a := range admitted {
		if client.ObjectKeyFromObject(a) == key || a.Status.Admission == nil {
			continue
		}
		if upTo != nil && queue.Priority(a) > *upTo {
			continue
		}
		cands = append(cands, s.candidate(a, flavor))
	}
	result := preemption.Find(pre, preemption.PolicyOf(cq), books, flavor, cands, preemption.QuotaOnly{})
	if len(result.Victims) == 0 {
		return 0, false
	}
	return result.BorrowHeight, true
}

// candidate describes an admitted workload for the search; under
// admission fair sharing in its ClusterQueue, with its LocalQueue's usage.
func (s *Scheduler) candidate(wl *strata.Workload, flavor string) preemption.Workload {
	w := candidate(wl, flavor)
	if s.afsScoped[w.Queue] && s.lqUsage != nil {
		w.LocalQueueUsage = ptr.To(s.lqUsage.Usage(wl))
	}
	return w
}

// candidate describes an admitted workload for the search.
func candidate(wl *strata.Workload, flavor string) preemption.Workload {
	requests := map[string]corev1.ResourceList{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Flavor == flavor {
			queue.AddRequests(requests, flavor, queue.LessReclaimable(psa, workload.Reclaimable(wl, psa.Name)))
		}
	}
	// Kueue orders candidates by when their quota was reserved.
	admittedAt := workload.ReservedAt(wl)
	return preemption.Workload{Key: client.ObjectKeyFromObject(wl), Queue: wl.Status.Admission.ClusterQueue, Priority: queue.Priority(wl),
		QueuedAt: queue.QueuedAt(wl), AdmittedAt: admittedAt, Requests: requests[flavor]}
}

// notePreempted adds the victims of its preemption to an admitted
// workload's Admitted condition (strata.AdmittedAfterPreempting): a hub
// keeps them in its dispatch's attempt.
func notePreempted(wl *strata.Workload, p *pendingPreemption) {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || len(p.victims) == 0 {
		return
	}
	names := make([]string, len(p.victims))
	for i, k := range p.victims {
		names[i] = k.String()
	}
	slices.Sort(names)
	c.Message = truncate(fmt.Sprintf("%s; %s%d workload(s): %s", c.Message, strata.AdmittedAfterPreempting, len(names), strings.Join(names, ", ")))
}

// fewerCounts are the counts (workload.FormatPodSetCounts) of the pod
// sets of tried (asked, or asked capped by its hub) with counts (nil: its
// own) that are fewer than asked's; "" when none is.
func fewerCounts(asked, tried *strata.Workload, counts []int32) string {
	var fewer []strata.PodSetCount
	for i := range tried.Spec.PodSets {
		c := tried.Spec.PodSets[i].Count
		if counts != nil {
			c = counts[i]
		}
		if i < len(asked.Spec.PodSets) && c < asked.Spec.PodSets[i].Count {
			fewer = append(fewer, strata.PodSetCount{Name: asked.Spec.PodSets[i].Name, Count: c})
		}
	}
	return workload.FormatPodSetCounts(fewer)
}

// preemptingMessage is the preemptor's waiting reason.
func preemptingMessage(p *pendingPreemption, held []types.NamespacedName) string {
	names := make([]string, len(held))
	for i, k := range held {
		names[i] = k.String()
	}
	slices.Sort(names)
	var fewer string
	if p.counts != "" {
		fewer = " for " + p.counts + " of its pods"
	}
	switch len(p.podSets) {
	case 0:
	case 1:
		fewer += " for its pod set " + p.podSets[0]
	default:
		fewer += " for its pod sets " + strings.Join(p.podSets, ", ")
	}
	return fmt.Sprintf("preempting %d workload(s) on flavor %s%s; admitted once the pods of %s are gone", len(p.victims), p.flavor, fewer, strings.Join(names, ", "))
}

// evictVictim preempts one workload: its admission goes, with
// Evicted=True (reason Preempted) and Preempted=True (the policy's
// reason) naming the preemptor; the Job controller then stops its job
// and restores its templates, and the workload waits in its queue again.
// Its capacity stays taken until its pods are gone. It returns the
// workload as it was admitted (nil when it was not evicted).
func (s *Scheduler) evictVictim(ctx context.Context, v preemption.Victim, by *strata.Workload, cq *strata.ClusterQueue, flavor string) (*strata.Workload, error) {
	// Read from the API server: the informer may lag the admission the
	// cache holds, and an eviction written on an older object conflicts.
	cur := &strata.Workload{}
	if err := s.reader.Get(ctx, v.Key, cur); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if cur.Status.Admission == nil {
		return nil, nil
	}
	admitted := cur.DeepCopy()
	message := fmt.Sprintf("preempted to make room for %s (priority %d) of ClusterQueue %s on flavor %s: %s", client.ObjectKeyFromObject(by), queue.Priority(by), cq.Name, flavor, preemption.PolicyNote(v.Reason, cq))
	cur = cur.DeepCopy()
	workload.AccumulateExecution(cur.Spec.MaximumExecutionTimeSeconds, &cur.Status, s.clock.Now())
	cur.Status.Admission = nil
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: message})
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: strata.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: v.Reason, Message: message})
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: strata.EvictedByPreemption, Message: message})
	// Back in its queue at once (Kueue's).
	workload.SetRequeued(cur, metav1.ConditionTrue, strata.EvictedByPreemption, message, s.clock.Now())
	if err := s.client.Status().Update(ctx, cur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("preempting %s: %w", v.Key, err)
	}
	s.cache.RemoveWorkload(v.Key)
	metrics.PreemptedWorkloads.WithLabelValues(cq.Name, v.Reason).Inc()
	note := truncateNote(message)
	s.recorder.Eventf(cur, by, corev1.EventTypeWarning, strata.EvictedByPreemption, "Preempt", "%s", note)
	if job := workload.OwnerJob(cur); job != nil {
		s.recorder.Eventf(job, by, corev1.EventTypeWarning, strata.EvictedByPreemption, "Preempt", "%s", note)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Preempted", "workload", v.Key, "by", client.ObjectKeyFromObject(by), "reason", v.Reason)
	return admitted, nil
}

// preemptedBy matches the message evictVictim writes: the preemptor, its
// ClusterQueue and the flavor it preempted on.
var preemptedBy = regexp.MustCompile(`^preempted to make room for ([^/\s]+)/(\S+) \(priority -?\d+\) of ClusterQueue (\S+) on flavor ([^:\s]+):`)

// preemptorOf reads, from a preempted workload's Evicted condition, the
// preemption that evicted it: its preemptor, that one's ClusterQueue, and
// the flavor; false for any other eviction.
func preemptorOf(wl *strata.Workload) (by types.NamespacedName, cq, flavor string, ok bool) {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != strata.EvictedByPreemption {
		return types.NamespacedName{}, "", "", false
	}
	m := preemptedBy.FindStringSubmatch(c.Message)
	if m == nil {
		return types.NamespacedName{}, "", "", false
	}
	return types.NamespacedName{Namespace: m[1], Name: m[2]}, m[3], m[4], true
}

// preemptingVictims matches the preemptor's waiting message
// (preemptingMessage): the flavor and the victims whose pods still held
// capacity when it was written.
var preemptingVictims = regexp.MustCompile(`^preempting \d+ workload\(s\) on flavor (\S+)(?: for (\S+) of its pods)?(?: for its pod sets? ([^\s,;]+(?:, [^\s,;]+)*))?; admitted once the pods of (.+) are gone$`)

// restorePreemptions rebuilds, in the first pass of a process, the
// preemptions an earlier one left under way (an agent restarted, or a
// leader's handover, while victims' pods terminate): preemptions live in
// memory only, and without them a preemptor whose victims still hold
// their nodes would search again and evict more workloads, and its
// victims, back in their queue, could be admitted into what they are
// freeing for it. Two records say what was under way: a preemptor's
// Admitted condition (reason Preempting) names the flavor and the victims
// whose pods held capacity then, whether their Workloads still exist or
// not (a Job deleted after its preemption leaves its pods terminating);
// a victim's Evicted condition (evictVictim's message) names its
// preemptor, that one's ClusterQueue and the flavor. A victim counts
// while its pods still hold capacity; the preemptor's quota hold is its
// requests on that flavor in its ClusterQueue. pending are the pass's
// pending workloads by ClusterQueue.
//
// resizing are the admitted elastic workloads resized: one scaling up
// may have preempted for the pods it adds (preemptForResize), its
// Resized condition naming the victims, theirs naming it; its hold is
// the quota of those pods.
func (s *Scheduler) restorePreemptions(pending map[string][]*strata.Workload, resizing []*strata.Workload) {
	byKey := map[types.NamespacedName]*strata.Workload{}
	queueOf := map[types.NamespacedName]string{}
	for q, wls := range pending {
		for _, wl := range wls {
			byKey[client.ObjectKeyFromObject(wl)] = wl
			queueOf[client.ObjectKeyFromObject(wl)] = q
		}
	}
	// scaleUp: the requests of the pods each elastic workload scaling up
	// adds.
	scaleUp := map[types.NamespacedName]corev1.ResourceList{}
	for _, wl := range resizing {
		r, ok := workload.ResizeOf(wl)
		if !ok || r.To <= r.From || wl.Status.Admission == nil {
			continue
		}
		key := client.ObjectKeyFromObject(wl)
		added := workload.WithCheckUpdates(wl).Spec.PodSets[0]
		added.Count = r.To - r.From
		byKey[key], queueOf[key] = wl, wl.Status.Admission.ClusterQueue
		scaleUp[key] = queue.WorkloadRequests(&strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{added}}})
	}
	// counts are the preemptors' that preempt for fewer pods than they
	// ask for (their waiting message says so).
	counts := map[types.NamespacedName]string{}
	// podSets are the preemptors' that preempt for some of their pod sets
	// only (preemptByUnit).
	podSets := map[types.NamespacedName][]string{}
	add := func(by types.NamespacedName, cq, flavor string, victim types.NamespacedName) {
		pre := byKey[by]
		if pre == nil || cq == "" {
			return
		}
		// A victim counts while pods of it hold capacity; one admitted
		// now was admitted again since (a record left from an earlier
		// preemption, a stale message or Evicted condition): not this
		// preemption's to wait for.
		if admitted, _, holding := s.cache.HoldingPods(victim); admitted || len(holding) == 0 {
			return
		}
		p := s.preemptions[by]
		if p == nil && scaleUp[by] != nil {
			p = &pendingPreemption{uid: pre.UID, flavor: flavor, queue: cq, requests: scaleUp[by]}
			s.preemptions[by] = p
		}
		if p == nil {
			p = &pendingPreemption{uid: pre.UID, flavor: flavor, queue: cq}
			held := pre
			if c := counts[by]; c != "" {
				// The quota of those pods only, as the preemption held.
				p.counts, held = c, workload.WithCounts(pre, workload.ParsePodSetCounts(c, pre.Spec.PodSets))
			}
			if names := podSets[by]; len(names) > 0 {
				// And of those pod sets only.
				var indices []int
				for i := range held.Spec.PodSets {
					if slices.Contains(names, held.Spec.PodSets[i].Name) {
						indices = append(indices, i)
					}
				}
				if len(indices) > 0 {
					p.podSets, held = names, workload.WithPodSets(held, indices)
				}
			}
			p.requests = queue.WorkloadRequests(held)
			s.preemptions[by] = p
		}
		if p.flavor != flavor {
			return
		}
		// The victim's UID when its own Evicted condition names this
		// preemptor: that Workload is the one evicted.
		var uid types.UID
		if v := byKey[victim]; v != nil {
			if vby, _, vflavor, ok := preemptorOf(v); ok && vby == by && vflavor == flavor {
				uid = v.UID
			}
		}
		if !slices.Contains(p.victims, victim) {
			p.addVictim(victim, uid)
		} else if uid != "" {
			if p.victimUIDs == nil {
				p.victimUIDs = map[types.NamespacedName]types.UID{}
			}
			p.victimUIDs[victim] = uid
		}
	}
	for key, wl := range byKey {
		c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
		message := ""
		switch {
		case scaleUp[key] != nil:
			// preemptForResize's waiting message, after its "scaling up
			// from 2 to 4 pods: ".
			c = meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadResized)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonResizePending {
				continue
			}
			_, message, _ = strings.Cut(c.Message, ": ")
		case c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonPreempting:
			continue
		default:
			message = c.Message
		}
		m := preemptingVictims.FindStringSubmatch(message)
		if m == nil {
			continue
		}
		counts[key] = m[2]
		if m[3] != "" {
			podSets[key] = strings.Split(m[3], ", ")
		}
		for _, v := range strings.Split(m[4], ", ") {
			if ns, name, ok := strings.Cut(v, "/"); ok {
				add(key, queueOf[key], m[1], types.NamespacedName{Namespace: ns, Name: name})
			}
		}
	}
	for key, wl := range byKey {
		if by, cq, flavor, ok := preemptorOf(wl); ok {
			add(by, cq, flavor, key)
		}
	}
}

// preemptByUnit preempts for a workload of several flavor assignment
// units (pod sets, or PodSet groups: workload.FlavorUnits) that do not
// all fit now, as Kueue's flavor assigner does: each unit that fits keeps
// the flavor the walk gives it (workload.PlanByUnit); one that fits
// nowhere goes on the flavor whose preemption search, for the pod sets the
// walk put there and it, Kueue would take (under whenCanPreempt: Preempt
// the first with victims, else the best, preemption.Better), and so do
// the units after it that fit nowhere either. It then preempts on that
// flavor for every pod set put there. done when it preempted; admitted
// when the victims held no running pods and the workload took their place
// at once. It does nothing when the walk puts every unit on one flavor
// (the one-flavor search covers that) or finds no victims.
//
// Once the victims are gone, the walk from its first pod set may put all
// its pod sets on one flavor: whole then tries that (the caller's walk
// of one flavor for all; done when it admitted, or would but for
// blockAdmission's hold, admitted when it admitted).
func (s *Scheduler) preemptByUnit(ctx context.Context, cq *strata.ClusterQueue, flavors []strata.FlavorQuotas, books *queue.Books, wl *strata.Workload,
	upTo *int32, usage map[string]corev1.ResourceList, whole func() (done, admitted bool)) (done, admitted bool, err error) {
	if len(flavors) < 2 || len(workload.FlavorUnits(wl)) < 2 || s.searches <= 0 {
		return false, false, nil
	}
	names, defs, others := s.unitFlavors(flavors, wl)
	fung := queue.Fungibility(cq)
	quota := books.UnitQuota(cq.Name, names)
	// plan walks the units on the cache's snapshots, under its lock (the
	// capacity the walk takes is given back); noFit must not search, as a
	// search takes that lock itself.
	plan := func(noFit workload.NoFit) (p workload.UnitPlacement, ok bool) {
		_ = s.cache.ReserveFlavors(names, client.ObjectKeyFromObject(wl), func(snaps []*tas.Snapshot, topos []*strata.Topology) (*strata.Workload, error) {
			units := unitsOn(defs, snaps, topos, others)
			if p, ok = workload.PlanByUnit(wl, units, quota, fung.WhenCanBorrow == strata.FungibilityTryNextFlavor, s.opts, noFit); ok {
				p.Release(units)
			}
			return nil, nil
		})
		return p, ok
	}
	// The first unit that fits nowhere, and the pod sets the walk put on
	// each flavor before it.
	var failed []int
	var before map[int][]int
	if _, ok := plan(func(unit []int, onFlavor map[int][]int) (int, bool) {
		failed, before = unit, maps.Clone(onFlavor)
		return 0, false
	}); ok || failed == nil {
		return false, false, nil // it fits: not this search's to do
	}
	// Its flavor: the one whose search Kueue's flavor assigner would take.
	chosen, found := preemption.ChooseFlavor(len(flavors), func(f int) (preemption.Result, bool) {
		// Not on a flavor that could never hold those pod sets: one
		// whose taints they do not tolerate, or not the one a hub
		// pinned them to.
		if s.searches <= 0 || defs[f] == nil || workload.FlavorRefusal(defs[f], workload.WithPodSets(wl, slices.Concat(before[f], failed))) != "" {
			return preemption.Result{}, false
		}
		s.searches--
		r, _ := s.search(cq, flavors[f], books, workload.WithPodSets(wl, slices.Concat(before[f], failed)), upTo)
		return r, true
	}, fung, cq.Name)
	if chosen < 0 {
		return false, false, nil
	}
	searched := len(before[chosen]) + len(failed) // the pod sets its search was for
	// The whole walk, every unit that fits nowhere on that flavor.
	plan2, ok := plan(func(unit []int, _ map[int][]int) (int, bool) {
		return chosen, workload.FlavorRefusal(defs[chosen], workload.WithPodSets(wl, unit)) == ""
	})
	if !ok {
		return false, false, nil
	}
	if plan2.Distinct() < 2 || len(plan2.PendingFlavors()) != 1 {
		return false, false, nil // all on one flavor: the one-flavor search covers it
	}
	// The search for every pod set put on that flavor: the units after the
	// one it was chosen for may add to it.
	fq := flavors[chosen]
	sub := workload.WithPodSets(wl, plan2.OnFlavor(chosen))
	r := found
	if len(sub.Spec.PodSets) != searched {
		if s.searches <= 0 {
			return false, false, nil // the next pass decides
		}
		s.searches--
		if r, _ = s.search(cq, fq, books, sub, upTo); len(r.Victims) == 0 {
			return false, false, nil
		}
	}
	need := queue.WorkloadRequests(sub)
	key := client.ObjectKeyFromObject(wl)
	var podSets []string
	for i := range sub.Spec.PodSets {
		podSets = append(podSets, sub.Spec.PodSets[i].Name)
	}
	done, err = s.preempt(ctx, cq, fq, books, wl, need, nil, podSets, r)
	if !done {
		return false, false, err
	}
	if p := s.preemptions[key]; len(s.stillHeld(p)) == 0 {
		// The victims held no running pods: their capacity is free at once.
		if in, where := s.placeByUnit(cq, flavors, books, wl); in != nil {
			notePreempted(in, p)
			s.admit(ctx, in, where, usage, books)
			return true, true, err
		}
		if whole != nil {
			if done, admitted := whole(); done {
				return true, admitted, err
			}
		}
	}
	// What the victims free is the preemptor's: its quota there is held
	// for it, as for a preemption on one flavor (see try).
	books.Charge(cq.Name, fq.Name, need, 1)
	s.round.charged = append(s.round.charged, roundCharge{cq.Name, fq.Name, need, 1})
	return true, false, err
}
