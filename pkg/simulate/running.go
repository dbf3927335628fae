package simulate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// runState is what a simulation has admitted so far: the running
// workloads per flavor, with their capacity and quota, which later
// workloads may preempt.
type runState struct {
	in *Input
	// victims counts the workloads preempted so far.
	victims int
	books   *queue.Books
	running map[string][]*running // by flavor
	// flavors are the input's topology-aware flavors, by name.
	flavors map[string]*flavorState
	// clock orders admissions and queueing in the simulation: each
	// workload is queued and admitted after the ones before it.
	clock time.Time
	// held is what the current round holds for heads that found no
	// victims (holdRound); roundAdmitted, what its admissions charged.
	held, roundAdmitted []heldQuota
	// round counts the simulation's rounds, from 1 (running.round).
	round int
	// afs and lqUsage are admission fair sharing and the LocalQueues'
	// usage (nil when it is off).
	afs     queue.AdmissionFairSharing
	lqUsage *queue.UsagePass
}

// running is an admitted workload holding capacity on one flavor.
type running struct {
	wl       *strata.Workload
	queue    string
	usage    tas.Usage
	requests corev1.ResourceList
	admitted time.Time
	// round is the simulation's round that admitted it (0: the input
	// shows it running).
	round int
}

func newRunState(in *Input) *runState {
	cqs := make([]*strata.ClusterQueue, 0, len(in.ClusterQueues))
	for _, cq := range in.ClusterQueues {
		cqs = append(cqs, cq)
	}
	return &runState{in: in, books: queue.NewBooks(cqs, in.Cohorts...), running: map[string][]*running{},
		clock: clockStart(in), round: 1}
}

// clockStart is where the simulation's clock starts: after every time its
// input's Workloads record (their creation and conditions), so that what
// the simulation admits is admitted after what the input shows running
// (preemption takes the most recently admitted first); 2000-01-01 when
// they record none.
func clockStart(in *Input) time.Time {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, item := range in.Workloads {
		wl := item.Workload
		if wl == nil {
			continue
		}
		if t := wl.CreationTimestamp.Time; t.After(start) {
			start = t
		}
		for _, c := range wl.Status.Conditions {
			if t := c.LastTransitionTime.Time; t.After(start) {
				start = t
			}
		}
	}
	return start
}

// tick returns the simulation's next instant.
func (st *runState) tick() time.Time {
	st.clock = st.clock.Add(time.Second)
	return st.clock
}

// prioritize sets a workload's priority from its class in the input (0 for
// a class the input does not have), unless it has one.
func (st *runState) prioritize(wl *strata.Workload) {
	if wl.Spec.Priority != nil {
		return
	}
	if wl.Spec.PriorityClassName == "" {
		// The cluster's default PriorityClass, as the agent's intake
		// gives a job that names no class.
		if def := workload.DefaultPriorityClass(slices.Collect(maps.Values(st.in.PriorityClasses))); def != nil {
			wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource = def.Name, strata.PodPriorityClassSource
			wl.Spec.Priority = ptr.To(def.Value)
		}
		return
	}
	var v int32
	if wl.Spec.PriorityClassSource == strata.WorkloadPriorityClassSource {
		if c := st.in.WorkloadPriorityClasses[wl.Spec.PriorityClassName]; c != nil {
			v = c.Value
		}
	} else if c := st.in.PriorityClasses[wl.Spec.PriorityClassName]; c != nil {
		v = c.Value
	}
	wl.Spec.Priority = ptr.To(v)
}

// addRunning takes the capacity of a workload the input gives as admitted:
// on each pod set's assignment, or, for a pod set admitted without one,
// where the engine places it now.
func (st *runState) addRunning(flavors map[string]*flavorState, item Item, opts tas.Options) error {
	wl := item.Workload.DeepCopy()
	st.prioritize(wl)
	if wl.CreationTimestamp.IsZero() {
		wl.CreationTimestamp.Time = st.tick()
	}
	byFlavor := map[string]*running{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		fs := flavors[psa.Flavor]
		if fs == nil {
			return fmt.Errorf("%s: admitted on flavor %q, which is not a topology-aware flavor of the input", item.Source, psa.Flavor)
		}
		ps := workload.PodSet(wl, psa.Name)
		if ps == nil {
			return fmt.Errorf("%s: the admission names pod set %q, which the workload does not have", item.Source, psa.Name)
		}
		// Admitted with fewer pods than it asks for (partial admission):
		// those it was admitted with hold capacity and quota.
		admitted := *ps
		if psa.Count > 0 {
			admitted.Count = psa.Count
		}
		ps = &admitted
		// Its finished pods (status.reclaimablePods) hold nothing: offline
		// the input does not say where they ran, so they are the
		// assignment's last (its highest ranks).
		reclaimable := workload.Reclaimable(wl, psa.Name)
		var u tas.Usage
		if psa.TopologyAssignment != nil {
			a, err := tas.Decode(psa.TopologyAssignment)
			if err != nil {
				return fmt.Errorf("%s: pod set %s: %w", item.Source, psa.Name, err)
			}
			a = withoutLast(a, reclaimable)
			if u, err = fs.snapshot.Commit(a, workload.Request(ps).PodRequests); err != nil {
				return fmt.Errorf("%s: pod set %s: %w", item.Source, psa.Name, err)
			}
		} else if psa.DelayedTopologyRequest != nil && *psa.DelayedTopologyRequest == strata.DelayedTopologyRequestPending {
			// Reserved, its topology delayed until the nodes a
			// ProvisioningRequest check asks for are provisioned: quota,
			// no node.
		} else if ps.Count > reclaimable {
			one := wl.DeepCopy()
			one.Spec.PodSets = []strata.PodSet{*ps}
			one.Spec.PodSets[0].Count = ps.Count - reclaimable
			_, taken, err := workload.Place(fs.snapshot, fs.topology.Name, fs.flavor.Spec.Tolerations, one, opts)
			if err != nil {
				return fmt.Errorf("%s: running, but pod set %s fits nowhere on flavor %s: %w", item.Source, psa.Name, psa.Flavor, err)
			}
			u = merge(taken)
		}
		r := byFlavor[psa.Flavor]
		if r == nil {
			r = &running{wl: wl, queue: wl.Status.Admission.ClusterQueue, usage: tas.Usage{}, requests: corev1.ResourceList{}, admitted: admittedAt(wl, st)}
			byFlavor[psa.Flavor] = r
			st.running[psa.Flavor] = append(st.running[psa.Flavor], r)
		}
		addUsage(r.usage, u)
		held := *ps
		held.Count = max(ps.Count-reclaimable, 0)
		total := queue.TotalRequests(&held)
		for name, v := range total {
			sum := r.requests[name]
			sum.Add(v)
			r.requests[name] = sum
		}
		st.books.Charge(r.queue, psa.Flavor, total, 1)
	}
	return nil
}

// withoutLast is a without its last n pods, taken from its last domains.
func withoutLast(a *tas.Assignment, n int32) *tas.Assignment {
	if n <= 0 {
		return a
	}
	out := &tas.Assignment{Levels: a.Levels, Domains: slices.Clone(a.Domains)}
	for i := len(out.Domains) - 1; i >= 0 && n > 0; i-- {
		take := min(out.Domains[i].Count, n)
		out.Domains[i].Count -= take
		n -= take
	}
	out.Domains = slices.DeleteFunc(out.Domains, func(d tas.DomainAssignment) bool { return d.Count == 0 })
	return out
}

// admittedAt is when a running workload of the input was admitted (its
// Admitted condition), else now in the simulation.
func admittedAt(wl *strata.Workload, st *runState) time.Time {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return st.tick()
}

// admit places a workload on a flavor, taking its capacity and quota.
func (st *runState) admit(fs *flavorState, cq *strata.ClusterQueue, wl *strata.Workload, opts tas.Options) ([]PodSetResult, error) {
	// As the agent on a flavor whose topology assignment a
	// ProvisioningRequest check delays: quota alone, no node (the
	// autoscaler's nodes are not simulated).
	delayed := st.in.delaysTopology(cq, fs.flavor.Name)
	assignments := make([]*tas.Assignment, len(wl.Spec.PodSets))
	var taken []tas.Usage
	if !delayed {
		var err error
		assignments, taken, err = workload.PlaceSpread(fs.snapshot, fs.topology.Name, fs.flavor.Spec.Tolerations, wl, st.spreadAmong(fs, wl), opts)
		if err != nil {
			return nil, err
		}
	}
	// Admitted as the agent would record it: what topology spreading
	// counts for the workloads after it.
	wl = wl.DeepCopy()
	wl.Status.Admission = &strata.Admission{ClusterQueue: "-"}
	for i, a := range assignments {
		ps := &wl.Spec.PodSets[i]
		psa := strata.PodSetAssignment{Name: ps.Name, Flavor: fs.flavor.Name, Count: ps.Count}
		if a != nil {
			psa.TopologyAssignment = tas.Encode(a)
		} else {
			psa.DelayedTopologyRequest = ptr.To(strata.DelayedTopologyRequestPending)
		}
		wl.Status.Admission.PodSetAssignments = append(wl.Status.Admission.PodSetAssignments, psa)
	}
	name := ""
	if cq != nil {
		name = cq.Name
	}
	need := queue.WorkloadRequests(wl)
	st.books.Charge(name, fs.flavor.Name, need, 1)
	st.roundAdmitted = append(st.roundAdmitted, heldQuota{queue: name, flavor: fs.flavor.Name, hold: need, sign: 1})
	if wl.CreationTimestamp.IsZero() {
		wl.CreationTimestamp.Time = st.tick()
	}
	st.running[fs.flavor.Name] = append(st.running[fs.flavor.Name], &running{wl: wl, queue: name, usage: merge(taken), requests: need, admitted: st.tick(), round: st.round})
	return podSetResults(wl, fs.flavor.Name, assignments), nil
}

// delaysTopology says whether cq's admission checks on flavor include a
// ProvisioningRequest check of the input's (KEP-2724's delayed topology
// assignment), as the agent's scheduler decides it.
func (in *Input) delaysTopology(cq *strata.ClusterQueue, flavor string) bool {
	for _, name := range workload.ChecksOf(cq, []string{flavor}) {
		if ac := in.AdmissionChecks[name]; ac != nil && ac.Spec.ControllerName == strata.ProvisioningRequestControllerName {
			return true
		}
	}
	return false
}

// spreadAmong are the workloads a workload that spreads (topology
// spreading) is spread among on a flavor: those running there.
func (st *runState) spreadAmong(fs *flavorState, wl *strata.Workload) []*strata.Workload {
	if !workload.Spreads(wl) {
		return nil
	}
	others := make([]*strata.Workload, 0, len(st.running[fs.flavor.Name]))
	for _, r := range st.running[fs.flavor.Name] {
		others = append(others, r.wl)
	}
	return others
}

// fitsOrShort says whether wl fits on a flavor now, quota and topology,
// changing nothing, and otherwise whether a preemption may let it in
// (short: neither an untolerated taint, more than the flavor's whole
// quota, nor a topology it does not have).
func (st *runState) fitsOrShort(fs *flavorState, cq *strata.ClusterQueue, wl *strata.Workload, opts tas.Options) (fit, short bool) {
	if workload.FlavorRefusal(fs.flavor, wl) != "" {
		return false, false
	}
	if cq != nil {
		if fit := st.books.Check(cq.Name, fs.flavor.Name, queue.WorkloadRequests(wl), false); fit.Err != nil {
			return false, !fit.Never
		}
	}
	if st.in.delaysTopology(cq, fs.flavor.Name) {
		return true, false // quota alone
	}
	_, taken, err := workload.PlaceSpread(fs.snapshot, fs.topology.Name, fs.flavor.Spec.Tolerations, wl, st.spreadAmong(fs, wl), opts)
	for _, u := range taken {
		fs.snapshot.Release(u)
	}
	return err == nil, err != nil && !errors.As(err, new(*workload.TopologyMismatchError))
}

// admitPartially is the agent's partial admission: a workload whose pod
// sets have a minCount, which neither fits nor preempts for all of its
// pods, is admitted with the most pods (at least minCount of each:
// workload.ReducedCounts) that fit on one of the flavors or, when it may
// preempt, for which a search finds victims, the flavors walked as for
// all of its pods (see the agent's scheduler.partially). It returns the
// results, with the counts admitted, and the victims preempted.
func (st *runState) admitPartially(flavors map[string]*flavorState, order []*strata.ResourceFlavor, cq *strata.ClusterQueue, wl *strata.Workload, preempts bool, upTo *int32, opts tas.Options) ([]PodSetResult, []string, bool) {
	total := workload.Reducible(wl.Spec.PodSets, opts.PartialSlices)
	if total == 0 {
		return nil, nil, false
	}
	fung := queue.Fungibility(cq)
	type choice struct {
		w       *strata.Workload
		fs      *flavorState
		victims *preemption.Result
	}
	var usable []*flavorState
	for _, f := range order {
		if fs := flavors[f.Name]; fs != nil {
			usable = append(usable, fs)
		}
	}
	_, c, ok := workload.FewestTakenAway(total, func(k int32) (choice, bool) {
		w := wl.DeepCopy()
		for i, n := range workload.ReducedCounts(wl.Spec.PodSets, k, opts.PartialSlices) {
			w.Spec.PodSets[i].Count = n
		}
		need := queue.WorkloadRequests(w)
		i, victims := preemption.WalkFlavors(preemption.Flavors{
			N: len(usable),
			Borrowing: func(i int) (int, bool) {
				if cq == nil {
					return 0, false
				}
				fit := st.books.Check(cq.Name, usable[i].flavor.Name, need, false)
				return st.books.BorrowHeight(cq.Name, usable[i].flavor.Name, need), fit.Err == nil && fit.Borrows
			},
			Try: func(i int) preemption.Trial {
				fit, short := st.fitsOrShort(usable[i], cq, w, opts)
				return preemption.Trial{Fit: fit, Short: short}
			},
			Search: func(i int) *preemption.Result {
				if r := st.search(usable[i], cq, w, upTo, opts); len(r.Victims) > 0 {
					return &r
				}
				return nil
			},
			Preempts: preempts,
		}, fung, queueName(cq))
		c := choice{w: w, victims: victims}
		if i >= 0 {
			c.fs = usable[i]
		}
		return c, c.fs != nil
	})
	if !ok {
		return nil, nil, false // not even its fewest pods
	}
	var victims []string
	if c.victims != nil {
		victims = st.preempt(c.fs, *c.victims)
	}
	podSets, err := st.admit(c.fs, cq, c.w, opts)
	return podSets, victims, err == nil
}

// search looks for the victims that let wl in on a flavor, changing
// nothing.
func (st *runState) search(fs *flavorState, cq *strata.ClusterQueue, wl *strata.Workload, upTo *int32, opts tas.Options) preemption.Result {
	if wl.CreationTimestamp.IsZero() {
		wl.CreationTimestamp.Time = st.tick()
	}
	runs := st.running[fs.flavor.Name]
	cands := make([]preemption.Workload, 0, len(runs))
	usages := make([]tas.Usage, 0, len(runs))
	for _, r := range runs {
		priority := queue.Priority(r.wl)
		if upTo != nil && priority > *upTo {
			// Above the hub's mark: not to preempt, and its capacity is
			// not to free (the agent's search leaves it out too).
			continue
		}
		if r.round == st.round {
			// Admitted in this round: Kueue finds a cycle's targets as
			// it begins, and the agent takes no admission its informer
			// does not show yet; its capacity is not to free either.
			continue
		}
		cands = append(cands, st.candidate(r, priority))
		usages = append(usages, r.usage)
	}
	var capacity preemption.Capacity = &preemption.SnapshotCapacity{Snap: fs.snapshot, Usages: usages, Place: func(s *tas.Snapshot) ([]tas.Usage, error) {
		_, taken, err := workload.Place(s, fs.topology.Name, fs.flavor.Spec.Tolerations, wl, opts)
		return taken, err
	}}
	if st.in.delaysTopology(cq, fs.flavor.Name) {
		// As the agent: its first pass reserves quota alone, so its
		// victims are found on quota alone.
		capacity = preemption.QuotaOnly{}
	}
	pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, Queue: cq.Name, Priority: queue.Priority(wl),
		QueuedAt: queue.QueuedAt(wl), Requests: queue.WorkloadRequests(wl)}
	policy := preemption.PolicyOf(cq)
	policy.Fair = preemption.FairStrategies(st.in.FairSharing)
	return preemption.Find(pre, policy, st.books, fs.flavor.Name, cands, capacity)
}

// candidate describes a running workload for a preemption search; under
// admission fair sharing in its ClusterQueue, with its LocalQueue's usage.
func (st *runState) candidate(r *running, priority int32) preemption.Workload {
	w := preemption.Workload{Key: types.NamespacedName{Namespace: r.wl.Namespace, Name: r.wl.Name}, Queue: r.queue,
		Priority: priority, QueuedAt: queue.QueuedAt(r.wl), AdmittedAt: r.admitted, Requests: r.requests}
	if st.lqUsage != nil && st.afs.Orders(st.in.ClusterQueues[r.queue]) {
		w.LocalQueueUsage = ptr.To(st.lqUsage.Usage(r.wl))
	}
	return w
}

// heightAfterPreempting is Kueue's preemption oracle for the order of a
// round's heads (queue.Books.WouldBorrowAfter): how high in its cohort
// tree wl borrows on the flavor once the victims a search on quota alone
// finds there are gone; false when it finds none, or wl may not preempt.
func (st *runState) heightAfterPreempting(fs *flavorState, cq *strata.ClusterQueue, wl *strata.Workload) (int, bool) {
	allowed, upTo := preemption.Allowed(cq, wl)
	if fs == nil || !allowed {
		return 0, false
	}
	var cands []preemption.Workload
	for _, r := range st.running[fs.flavor.Name] {
		priority := queue.Priority(r.wl)
		if r.wl == wl || upTo != nil && priority > *upTo || r.round == st.round {
			continue
		}
		cands = append(cands, st.candidate(r, priority))
	}
	pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, Queue: cq.Name, Priority: queue.Priority(wl),
		QueuedAt: queue.QueuedAt(wl), Requests: queue.WorkloadRequests(wl)}
	result := preemption.Find(pre, preemption.PolicyOf(cq), st.books, fs.flavor.Name, cands, preemption.QuotaOnly{})
	if len(result.Victims) == 0 {
		return 0, false
	}
	return result.BorrowHeight, true
}

// holdRound holds, until the round ends, what a head that was not
// admitted holds of its queue's quota on the flavor where it would wait
// for a preemption (its quota short there, and the policy allowing one:
// the lowest borrowing first, then the first in the walk), whether or
// not any victim was found (queue.Books.UnreclaimableHold): Kueue's
// scheduler does so in a cycle, so that the heads after it do not borrow
// what its queue cannot take back.
func (st *runState) holdRound(cq *strata.ClusterQueue, flavors []*flavorState, quotaShort map[string]bool, need corev1.ResourceList) {
	policy := preemption.PolicyOf(cq)
	policy.Fair = preemption.FairStrategies(st.in.FairSharing)
	on, height := "", 0
	for _, fs := range flavors {
		name := fs.flavor.Name
		if !quotaShort[name] || !preemption.MayTry(policy, st.books, cq.Name, name, need) {
			continue
		}
		if h := st.books.BorrowHeight(cq.Name, name, need); on == "" || h < height {
			on, height = name, h
		}
	}
	if on == "" {
		return
	}
	if h := st.books.UnreclaimableHold(cq, on, need); len(h) > 0 {
		st.books.Charge(cq.Name, on, h, 1)
		st.held = append(st.held, heldQuota{queue: cq.Name, flavor: on, hold: h, sign: 1})
	}
}

// withoutHolds runs f on the books without what the round holds for
// heads that found no victims (holdRound).
func (st *runState) withoutHolds(f func()) {
	for _, h := range st.held {
		st.books.Charge(h.queue, h.flavor, h.hold, -h.sign)
	}
	f()
	for _, h := range st.held {
		st.books.Charge(h.queue, h.flavor, h.hold, h.sign)
	}
}

// fitsAfter says whether need fits cq's quota on flavor once the victims
// of r are gone, with what the round holds: Kueue's check of a head whose
// preemption targets it found as the cycle began.
func (st *runState) fitsAfter(cq *strata.ClusterQueue, flavor string, r preemption.Result, need corev1.ResourceList) bool {
	if cq == nil || len(st.held) == 0 {
		return true
	}
	for _, v := range r.Victims {
		st.books.Charge(v.Queue, flavor, v.Requests, -1)
	}
	fit := st.books.Check(cq.Name, flavor, need, false)
	for _, v := range r.Victims {
		st.books.Charge(v.Queue, flavor, v.Requests, 1)
	}
	return fit.Err == nil
}

// endRound gives back what the round held.
func (st *runState) endRound() {
	for _, h := range st.held {
		st.books.Charge(h.queue, h.flavor, h.hold, -h.sign)
	}
	st.held, st.roundAdmitted = nil, nil
	st.round++
}

// atRoundStart runs f on the books as the round began: its admissions
// and holds undone.
func (st *runState) atRoundStart(f func()) {
	for _, set := range [][]heldQuota{st.held, st.roundAdmitted} {
		for _, h := range set {
			st.books.Charge(h.queue, h.flavor, h.hold, -h.sign)
		}
	}
	f()
	for _, set := range [][]heldQuota{st.held, st.roundAdmitted} {
		for _, h := range set {
			st.books.Charge(h.queue, h.flavor, h.hold, h.sign)
		}
	}
}

// nominate records where the round would have nominated p as it began,
// as Kueue's scheduler nominates a cycle's heads at its start (the flavor
// walk on quota, queue.Books.Nominee), and whether its quota fitted there.
//
// Only when the round has admitted or held something before p: otherwise
// the books are as the round began, and the flavor walk (which ranks
// preemptions as Kueue's assigner does) decides alone.
func (st *runState) nominate(p *pendingItem, usable func(flavor string) bool) {
	p.nominated, p.nominatedFit, p.freedInRound = "", false, false
	if p.cq == nil || p.retries >= maxRetries {
		return
	}
	touched := false
	for _, set := range [][]heldQuota{st.held, st.roundAdmitted} {
		for _, h := range set {
			touched = touched || h.queue == p.cq.Name || st.books.Peer(p.cq.Name, h.queue)
		}
	}
	if !touched {
		return
	}
	st.atRoundStart(func() {
		c := st.books.NomineeAmong(p.cq, p.wl, usable)
		p.nominated = c.Flavor
		p.nominatedFit = c.Flavor != "" && st.books.Check(p.cq.Name, c.Flavor, queue.WorkloadRequests(p.wl), false).Err == nil
	})
	for _, h := range st.roundAdmitted {
		if h.sign < 0 && (h.queue == p.cq.Name || st.books.Peer(p.cq.Name, h.queue)) {
			p.freedInRound = true
		}
	}
}

// retry says whether a head the round did not admit is served again in
// the next round: it was nominated on a flavor whose quota held it as the
// round began and an earlier head of the round took (Kueue's scheduler
// skips such a head and takes it again in its next cycle; the agent does
// in its next pass). At most maxRetries times.
func (st *runState) retry(p *pendingItem) bool {
	if !p.skipped || p.retries >= maxRetries {
		return false
	}
	p.retries++
	return true
}

// maxRetries bounds how often a head is served again (runState.retry).
const maxRetries = 8

// maxPasses bounds Run's passes: one more after each that preempted, for
// the workloads still waiting.
const maxPasses = 8

// heldQuota is a round's change of a queue's quota: a hold or an
// admission (sign 1), a victim's removal (-1).
type heldQuota struct {
	queue, flavor string
	hold          corev1.ResourceList
	sign          int64
}

// fairPick is queue.Serve's pick under fair sharing (nil when it is off):
// the tournament of the heads' shares, as the agent's.
func (st *runState) fairPick() func([]*strata.ClusterQueue, []*pendingItem) int {
	if st.in.FairSharing == nil {
		return nil
	}
	// An item of no queue in the input has a ClusterQueue of no name in
	// its turn, which the books do not know: it plays in no tournament.
	return queue.FairPick(st.books, func(p *pendingItem) any { return p }, func(p *pendingItem) *strata.Workload { return p.wl }, nil)
}

// preempt takes a search's victims out of the simulation (their capacity
// and quota are free) and returns their names.
func (st *runState) preempt(fs *flavorState, result preemption.Result) []string {
	gone := map[types.NamespacedName]bool{}
	var names []string
	for _, v := range result.Victims {
		gone[v.Key] = true
		names = append(names, v.Key.String())
	}
	st.victims += len(result.Victims)
	// A victim with pod sets on other flavors too is evicted whole: its
	// capacity and quota there are freed as well.
	for flavor, runs := range st.running {
		on := st.flavors[flavor]
		if flavor == fs.flavor.Name {
			on = fs
		}
		kept := runs[:0]
		for _, r := range runs {
			if !gone[types.NamespacedName{Namespace: r.wl.Namespace, Name: r.wl.Name}] {
				kept = append(kept, r)
				continue
			}
			if on != nil {
				on.snapshot.Release(r.usage)
			}
			st.books.Charge(r.queue, flavor, r.requests, -1)
			st.roundAdmitted = append(st.roundAdmitted, heldQuota{queue: r.queue, flavor: flavor, hold: r.requests, sign: -1})
		}
		st.running[flavor] = kept
	}
	return names
}

// merge sums usages node by node.
func merge(us []tas.Usage) tas.Usage {
	out := tas.Usage{}
	for _, u := range us {
		addUsage(out, u)
	}
	return out
}

func addUsage(dst, u tas.Usage) {
	for node, rl := range u {
		sum := dst[node].DeepCopy()
		if sum == nil {
			sum = corev1.ResourceList{}
		}
		for name, q := range rl {
			v := sum[name]
			v.Add(q)
			sum[name] = v
		}
		dst[node] = sum
	}
}

// queueName is a ClusterQueue's name ("" for none).
func queueName(cq *strata.ClusterQueue) string {
	if cq == nil {
		return ""
	}
	return cq.Name
}

// admitByUnit admits wl, when its pod sets (or PodSet groups) fit on
// different flavors of its queue and not all on one, each on its own
// flavor, as the agent does (workload.PlaceByUnit over the flavors in
// order), taking capacity and quota on each; false when the walk puts
// them all on one flavor or one fits nowhere (the one-flavor walk
// decides then).
func (st *runState) admitByUnit(flavors map[string]*flavorState, order []*strata.ResourceFlavor, cq *strata.ClusterQueue, wl *strata.Workload, opts tas.Options) ([]PodSetResult, bool) {
	if len(order) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil, false
	}
	units := make([]workload.UnitFlavor, len(order))
	for i, f := range order {
		fs := flavors[f.Name]
		if fs == nil {
			units[i] = workload.UnitFlavor{Def: f} // not topology-aware: no snapshot, never chosen
			continue
		}
		units[i] = workload.UnitFlavor{Def: fs.flavor, Snapshot: fs.snapshot, TopologyName: fs.topology.Name, Admitted: st.spreadAmong(fs, wl)}
	}
	name := ""
	if cq != nil {
		name = cq.Name
	}
	tryNext := cq != nil && queue.Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	quota := func(int, *strata.Workload) workload.QuotaAnswer { return workload.QuotaAnswer{Fits: true} }
	if cq != nil {
		quota = st.books.UnitQuota(cq.Name, flavorNames(order))
	}
	p, ok := workload.PlaceByUnit(wl, units, quota, tryNext, opts)
	if !ok {
		return nil, false
	}
	if p.Distinct() < 2 {
		p.Release(units)
		return nil, false
	}
	// Admitted as the agent would record it: what topology spreading
	// counts for the workloads after it.
	wl = wl.DeepCopy()
	if wl.CreationTimestamp.IsZero() {
		wl.CreationTimestamp.Time = st.tick()
	}
	wl.Status.Admission = &strata.Admission{ClusterQueue: "-"}
	results := make([]PodSetResult, len(wl.Spec.PodSets))
	onFlavor := map[int][]int{}
	for i, a := range p.Assignments {
		ps := &wl.Spec.PodSets[i]
		flavor := order[p.Flavors[i]].Name
		wl.Status.Admission.PodSetAssignments = append(wl.Status.Admission.PodSetAssignments,
			strata.PodSetAssignment{Name: ps.Name, Flavor: flavor, Count: ps.Count, TopologyAssignment: tas.Encode(a)})
		results[i] = podSetResults(workload.WithPodSets(wl, []int{i}), flavor, []*tas.Assignment{a})[0]
		onFlavor[p.Flavors[i]] = append(onFlavor[p.Flavors[i]], i)
	}
	admitted := st.tick()
	for f := range order {
		if len(onFlavor[f]) == 0 {
			continue
		}
		flavor := order[f].Name
		need := queue.WorkloadRequests(workload.WithPodSets(wl, onFlavor[f]))
		st.books.Charge(name, flavor, need, 1)
		st.roundAdmitted = append(st.roundAdmitted, heldQuota{queue: name, flavor: flavor, hold: need, sign: 1})
		st.running[flavor] = append(st.running[flavor], &running{wl: wl, queue: name, usage: merge(p.Taken[f]), requests: need, admitted: admitted, round: st.round})
	}
	return results, true
}

// preemptByUnit preempts, as the agent does (its scheduler's
// preemptByUnit), for a workload of several flavor assignment units
// whose units do not all fit now: the units that fit keep their flavors,
// those that fit nowhere go on the flavor whose search Kueue's flavor
// assigner would take, and it preempts there for every pod set put on
// it, then is admitted split (podSets nil when, walked again, its pod
// sets no longer fit). ok is false when it does nothing (a single unit or
// flavor, every unit on one flavor, or no victims).
func (st *runState) preemptByUnit(flavors map[string]*flavorState, order []*strata.ResourceFlavor, cq *strata.ClusterQueue, wl *strata.Workload,
	upTo *int32, opts tas.Options) (podSets []PodSetResult, victims []string, ok bool) {
	if cq == nil || len(order) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil, nil, false
	}
	units := make([]workload.UnitFlavor, len(order))
	for i, f := range order {
		units[i] = workload.UnitFlavor{Def: f}
		if fs := flavors[f.Name]; fs != nil {
			units[i] = workload.UnitFlavor{Def: fs.flavor, Snapshot: fs.snapshot, TopologyName: fs.topology.Name, Admitted: st.spreadAmong(fs, wl)}
		}
	}
	fung := queue.Fungibility(cq)
	quota := st.books.UnitQuota(cq.Name, flavorNames(order))
	plan := func(noFit workload.NoFit) (workload.UnitPlacement, bool) {
		p, ok := workload.PlanByUnit(wl, units, quota, fung.WhenCanBorrow == strata.FungibilityTryNextFlavor, opts, noFit)
		if ok {
			p.Release(units)
		}
		return p, ok
	}
	var failed []int
	var before map[int][]int
	if _, fits := plan(func(unit []int, onFlavor map[int][]int) (int, bool) {
		failed, before = unit, maps.Clone(onFlavor)
		return 0, false
	}); fits || failed == nil {
		return nil, nil, false
	}
	chosen, found := preemption.ChooseFlavor(len(order), func(f int) (preemption.Result, bool) {
		fs := flavors[order[f].Name]
		// As the agent: not on a flavor that could never hold those pod
		// sets (taints they do not tolerate, a hub's pin elsewhere).
		if fs == nil || workload.FlavorRefusal(fs.flavor, workload.WithPodSets(wl, slices.Concat(before[f], failed))) != "" {
			return preemption.Result{}, false
		}
		return st.search(fs, cq, workload.WithPodSets(wl, slices.Concat(before[f], failed)), upTo, opts), true
	}, fung, cq.Name)
	if chosen < 0 {
		return nil, nil, false
	}
	searched := len(before[chosen]) + len(failed) // the pod sets its search was for
	p, fits := plan(func(unit []int, _ map[int][]int) (int, bool) {
		return chosen, workload.FlavorRefusal(order[chosen], workload.WithPodSets(wl, unit)) == ""
	})
	if !fits || p.Distinct() < 2 || len(p.PendingFlavors()) != 1 {
		return nil, nil, false
	}
	fs := flavors[order[chosen].Name]
	if sub := workload.WithPodSets(wl, p.OnFlavor(chosen)); len(sub.Spec.PodSets) != searched {
		if found = st.search(fs, cq, sub, upTo, opts); len(found.Victims) == 0 {
			return nil, nil, false
		}
	}
	victims = st.preempt(fs, found)
	// Walked again from its first pod set, as the agent does once the
	// victims are gone: an earlier unit may now take the room the search
	// freed, and the unit it was freed for fits no longer. The victims
	// are gone all the same, and the workload waits (nil pod sets).
	podSets, _ = st.admitByUnit(flavors, order, cq, wl, opts)
	return podSets, victims, true
}

// flavorNames are the flavors' names, in order.
func flavorNames(flavors []*strata.ResourceFlavor) []string {
	names := make([]string, len(flavors))
	for i, f := range flavors {
		names[i] = f.Name
	}
	return names
}
