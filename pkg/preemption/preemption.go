// Package preemption chooses which admitted workloads a pending workload
// preempts, with Kueue's policies and candidate order (KEP-1283, Kueue's
// "Preemption" concept page) and the topology in view: a victim set is
// good only when the engine then places the preemptor's whole topology
// request. It is plain Go: the caller says, through Capacity, what fits
// once a set of workloads is gone.
package preemption

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Workload is an admitted workload on the flavor being tried: a possible
// victim.
type Workload struct {
	Key      types.NamespacedName
	Queue    string
	Priority int32
	// QueuedAt is when it joined its queue (queue.QueuedAt): equal
	// priorities are "newer" by it.
	QueuedAt time.Time
	// AdmittedAt orders candidates: the most recently admitted go first.
	AdmittedAt time.Time
	// Requests is what it holds of its queue's quota on the flavor.
	Requests corev1.ResourceList
	// LocalQueueUsage, under admission fair sharing in its ClusterQueue,
	// is its LocalQueue's usage (queue.AdmissionFairSharing.Usage); nil
	// otherwise.
	LocalQueueUsage *float64
}

// Preemptor is the pending workload.
type Preemptor struct {
	Key      types.NamespacedName
	Queue    string
	Priority int32
	QueuedAt time.Time
	// Requests is what it needs of its queue's quota on the flavor.
	Requests corev1.ResourceList
}

// Capacity is the topology side of the search: Release and Take move a
// candidate's capacity out of and back into the caller's snapshot, and
// Fits runs the engine's real check of the preemptor's whole request on
// what is free. When it fits, touches says whether a candidate's capacity
// lies where that placement put pods: a candidate that it does not touch
// can be put back without changing the placement.
type Capacity interface {
	Release(i int)
	Take(i int)
	Fits() (ok bool, touches func(i int) bool)
}

// Victim is a workload to preempt and why it may be (the Preempted
// condition's reason: strata.PreemptedInClusterQueue, ...).
type Victim struct {
	Workload
	Reason string
}

// Result is the outcome of Find.
type Result struct {
	// Victims is the minimal set found, in candidate order; empty when no
	// allowed preemption lets the preemptor in (Why says why then).
	Victims []Victim
	// Borrows: once the victims are gone, the preemptor is admitted
	// beyond its queue's nominal quota; BorrowHeight is then how high in
	// its cohort tree it borrows (queue.Books.BorrowHeight; 0 when it
	// does not).
	Borrows      bool
	BorrowHeight int
	Why          string
	// NoFit: the policy may not preempt for it on the flavor at all
	// (Kueue's NoFit), rather than finding no victims.
	NoFit bool
}

// Policy is a queue's preemption policy with Kueue's defaults filled in.
type Policy struct {
	WithinClusterQueue   strata.PreemptionPolicy
	ReclaimWithinCohort  strata.PreemptionPolicy
	BorrowWithinCohort   strata.BorrowWithinCohortPolicy
	MaxPriorityThreshold *int32
	// Fair, when set, replaces the classical rules in the cohort tree by
	// fair sharing's, with these strategies in order (the agent's
	// fairSharing configuration; see FairStrategies).
	Fair []queue.FairStrategy
}

// FairStrategies returns the strategies of a fairSharing configuration:
// nil when fair sharing is off.
func FairStrategies(fs *configv1beta1.FairSharing) []queue.FairStrategy {
	if fs == nil {
		return nil
	}
	var out []queue.FairStrategy
	for _, s := range fs.PreemptionStrategies {
		switch s {
		case configv1beta1.LessThanOrEqualToFinalShare:
			out = append(out, queue.LessThanOrEqualToFinalShare)
		case configv1beta1.LessThanInitialShare:
			out = append(out, queue.LessThanInitialShare)
		}
	}
	if len(out) == 0 {
		out = []queue.FairStrategy{queue.LessThanOrEqualToFinalShare, queue.LessThanInitialShare}
	}
	return out
}

// PolicyOf returns a queue's policy, Never where it says nothing.
func PolicyOf(cq *strata.ClusterQueue) Policy {
	p := Policy{WithinClusterQueue: strata.PreemptionNever, ReclaimWithinCohort: strata.PreemptionNever, BorrowWithinCohort: strata.BorrowWithinCohortNever}
	if pr := cq.Spec.Preemption; pr != nil {
		if pr.WithinClusterQueue != "" {
			p.WithinClusterQueue = pr.WithinClusterQueue
		}
		if pr.ReclaimWithinCohort != "" {
			p.ReclaimWithinCohort = pr.ReclaimWithinCohort
		}
		if b := pr.BorrowWithinCohort; b != nil && b.Policy != "" {
			p.BorrowWithinCohort = b.Policy
			p.MaxPriorityThreshold = b.MaxPriorityThreshold
		}
	}
	if cq.Spec.Cohort == "" {
		p.ReclaimWithinCohort, p.BorrowWithinCohort = strata.PreemptionNever, strata.BorrowWithinCohortNever
	}
	return p
}

// PolicyNote names the policy of cq a preemption with reason (the
// Preempted condition's) was made under, for messages.
func PolicyNote(reason string, cq *strata.ClusterQueue) string {
	p := PolicyOf(cq)
	switch reason {
	case strata.PreemptedInClusterQueue:
		return "withinClusterQueue: " + string(p.WithinClusterQueue)
	case strata.PreemptedInCohortReclamation:
		return fmt.Sprintf("reclaimWithinCohort: %s (cohort %s)", p.ReclaimWithinCohort, cq.Spec.Cohort)
	case strata.PreemptedInCohortFairSharing:
		return fmt.Sprintf("fair sharing in cohort %s (reclaimWithinCohort: %s): the victim's queue or cohort holds the higher share", cq.Spec.Cohort, p.ReclaimWithinCohort)
	default:
		return fmt.Sprintf("borrowWithinCohort: %s (cohort %s)", p.BorrowWithinCohort, cq.Spec.Cohort)
	}
}

// MayPreemptFor says whether a workload asking for requests on flavor may
// preempt at all in cq, as far as its nominal quota goes: without
// borrowWithinCohort, not when it asks for more of a resource than the
// queue's nominal quota on that flavor (Kueue's NoFit; Find's first
// check). The hub asks it before it marks a copy to preempt there.
func MayPreemptFor(cq *strata.ClusterQueue, flavor string, requests corev1.ResourceList) bool {
	if PolicyOf(cq).BorrowWithinCohort == strata.BorrowWithinCohortLowerPriority {
		return true
	}
	for _, fq := range queue.Flavors(cq) {
		if fq.Name != flavor {
			continue
		}
		for _, rq := range fq.Resources {
			if n, ok := requests[rq.Name]; ok && n.Cmp(rq.NominalQuota) > 0 {
				return false
			}
		}
	}
	return true
}

// Victims are a cluster's ClusterQueues that hold workloads some
// workload may preempt. A summary lists what preempting their workloads
// would free (CapacitySummary status.preemptible), for the hub.
type Victims struct {
	// Within: the queues that preempt within themselves.
	Within map[string]bool
	// Reclaimed: the queues whose cohort has another queue that reclaims
	// within it (reclaimWithinCohort not Never; it takes back what they
	// borrow).
	Reclaimed map[string]*strata.ClusterQueue
}

// Empty says whether no queue's workloads may be preempted.
func (v Victims) Empty() bool { return len(v.Within) == 0 && len(v.Reclaimed) == 0 }

// VictimQueues returns the Victims among a cluster's ClusterQueues, in the
// cohort trees their cohorts and the Cohort objects make.
func VictimQueues(cqs []*strata.ClusterQueue, cohorts ...*strata.Cohort) Victims {
	// A stopped queue is out of its cohort (queue.Books.Detach): it
	// reclaims nothing, and nothing is reclaimed from it.
	cqs = slices.DeleteFunc(slices.Clone(cqs), func(cq *strata.ClusterQueue) bool { return strata.Stopped(cq.Spec.StopPolicy) })
	books := queue.NewBooks(cqs, cohorts...)
	var reclaimers []string // queues that reclaim in their tree
	for _, cq := range cqs {
		if cq.Spec.Cohort != "" && PolicyOf(cq).ReclaimWithinCohort != strata.PreemptionNever {
			reclaimers = append(reclaimers, cq.Name)
		}
	}
	out := Victims{Within: map[string]bool{}, Reclaimed: map[string]*strata.ClusterQueue{}}
	for _, cq := range cqs {
		if PolicyOf(cq).WithinClusterQueue != strata.PreemptionNever {
			out.Within[cq.Name] = true
		}
		if slices.ContainsFunc(reclaimers, func(n string) bool { return n != cq.Name && books.Peer(n, cq.Name) }) {
			out.Reclaimed[cq.Name] = cq
		}
	}
	return out
}

// Borrowed returns what a queue borrows on a flavor when it uses usage
// there: of each resource it has a quota of, what usage holds beyond the
// nominal quota (only those beyond).
func Borrowed(cq *strata.ClusterQueue, flavor string, usage corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, fq := range queue.Flavors(cq) {
		if fq.Name != flavor {
			continue
		}
		for _, rq := range fq.Resources {
			if u, ok := usage[rq.Name]; ok && u.Cmp(rq.NominalQuota) > 0 {
				u.Sub(rq.NominalQuota)
				out[rq.Name] = u
			}
		}
	}
	return out
}

// Any says whether the policy lets a workload preempt anything at all.
func (p Policy) Any() bool {
	return p.WithinClusterQueue != strata.PreemptionNever || p.ReclaimWithinCohort != strata.PreemptionNever ||
		p.BorrowWithinCohort != strata.BorrowWithinCohortNever
}

// variant is what may make an admitted workload a victim (Kueue's
// preemption variants, for flat cohorts).
type variant int

const (
	never variant = iota
	// inQueue: a workload of the preemptor's own queue, under
	// withinClusterQueue.
	inQueue
	// reclaim: a workload of a borrowing queue of the cohort, while the
	// preemptor fits in what is left of its own nominal quota: in either
	// attempt.
	reclaim
	// reclaimUnborrowed: as reclaim, but only in the attempt where the
	// preemptor does not borrow once admitted.
	reclaimUnborrowed
	// reclaimWhileBorrowing: under borrowWithinCohort, in either attempt.
	reclaimWhileBorrowing
)

// reason is the Preempted condition's reason for a victim of variant v.
func (v variant) reason() string {
	switch v {
	case inQueue:
		return strata.PreemptedInClusterQueue
	case reclaimWhileBorrowing:
		return strata.PreemptedInCohortReclaimWhileBorrowing
	}
	return strata.PreemptedInCohortReclamation
}

// classify says how the policy lets the preemptor preempt w. peer says
// that w's queue is in the preemptor's cohort tree; advantage, that the
// preemptor has precedence over w's queue there (queue.Books.Advantage:
// in flat cohorts, it fits in what is left of its queue's nominal
// quota): the borrowers then give back whatever their priority under
// reclaimWithinCohort, and borrowWithinCohort does not matter.
func (p Policy) classify(pre Preemptor, w Workload, peer, advantage bool) variant {
	if w.Queue == pre.Queue {
		switch p.WithinClusterQueue {
		case strata.PreemptionLowerPriority:
			if w.Priority < pre.Priority {
				return inQueue
			}
		case strata.PreemptionLowerOrNewerEqualPriority:
			if w.Priority < pre.Priority || w.Priority == pre.Priority && pre.QueuedAt.Before(w.QueuedAt) {
				return inQueue
			}
		}
		return never
	}
	if !peer {
		return never
	}
	switch p.ReclaimWithinCohort {
	case strata.PreemptionAny:
	case strata.PreemptionLowerPriority:
		if w.Priority >= pre.Priority {
			return never
		}
	default:
		return never
	}
	switch {
	case advantage:
		return reclaim
	case p.BorrowWithinCohort != strata.BorrowWithinCohortLowerPriority, w.Priority >= pre.Priority:
		return reclaimUnborrowed
	case p.MaxPriorityThreshold != nil && w.Priority > *p.MaxPriorityThreshold:
		return reclaimUnborrowed
	}
	return reclaimWhileBorrowing
}

// usesAny says whether a workload holds any of the given resources.
func usesAny(held, resources corev1.ResourceList) bool {
	for r := range resources {
		if q, ok := held[r]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}

// Order sorts candidates as Kueue does: workloads of other queues (which
// borrow) first; under admission fair sharing, of two workloads of one
// ClusterQueue from different LocalQueues, that of the LocalQueue that
// consumed more first; then lower priority first, then the most recently
// admitted first; the key breaks ties.
func Order(pre Preemptor, cands []Workload) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if oa, ob := a.Queue != pre.Queue, b.Queue != pre.Queue; oa != ob {
			return oa
		}
		if a.Queue == b.Queue && a.LocalQueueUsage != nil && b.LocalQueueUsage != nil && *a.LocalQueueUsage != *b.LocalQueueUsage {
			return *a.LocalQueueUsage > *b.LocalQueueUsage
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if !a.AdmittedAt.Equal(b.AdmittedAt) {
			return a.AdmittedAt.After(b.AdmittedAt)
		}
		return queue.CompareKeys(a.Key.Namespace, a.Key.Name, b.Key.Namespace, b.Key.Name) < 0
	})
}

// MayTry says whether a workload of queue asking need on flavor, which
// does not fit there now, may preempt for it at all under policy: Kueue's
// flavor assigner gives it the Preempt mode (victims or not) rather than
// NoFit when its queue's nominal quota holds what it is short of, or a
// cohort below the root could with what is used there, or it may preempt
// while borrowing (borrowWithinCohort; under fair sharing,
// reclaimWithinCohort).
func MayTry(policy Policy, books *queue.Books, queueName, flavor string, need corev1.ResourceList) bool {
	short := books.Short(queueName, flavor, need)
	whileBorrowing := policy.BorrowWithinCohort == strata.BorrowWithinCohortLowerPriority ||
		policy.Fair != nil && policy.ReclaimWithinCohort != strata.PreemptionNever
	return len(short) == 0 || whileBorrowing || books.ReclaimMayHelp(queueName, flavor, need, short)
}

// Find returns the minimal set of admitted workloads on flavor whose
// preemption lets pre in: within its queue's quota (books, with every
// admitted workload charged) and the topology (capacity, whose candidate
// indexes are those of admitted). It follows Kueue's classical preemption
// for flat cohorts:
//
//   - The resources to free are those the preemptor cannot take now, even
//     by borrowing (all it asks for when only the topology is short).
//     Without borrowWithinCohort, a preemptor that asks for more of one of
//     them than its queue's nominal quota preempts nothing.
//   - Candidates hold some of those resources: workloads of its own queue
//     under withinClusterQueue, and workloads of the cohort's queues that
//     borrow them, under reclaimWithinCohort (and borrowWithinCohort).
//   - Two attempts, borrowing or not once admitted, in Kueue's order: only
//     borrowing when no other queue has a candidate, or when the queue
//     may not preempt while borrowing and is not under its nominal quota;
//     not borrowing first when it may not preempt while borrowing and does
//     not fit in its nominal quota as things stand; borrowing first
//     otherwise.
//
// In each attempt candidates are removed in Order (a workload of another
// queue only while its queue still borrows what is needed) until the
// preemptor fits, then every one not needed is put back, last removed
// first. books and capacity are left as they were.
func Find(pre Preemptor, policy Policy, books *queue.Books, flavor string, admitted []Workload, capacity Capacity) Result {
	if policy.Fair != nil {
		return findFair(pre, policy, books, flavor, admitted, capacity)
	}
	cohort := books.Cohort(pre.Queue)
	short := books.Short(pre.Queue, flavor, pre.Requests)
	borrowForbidden := policy.BorrowWithinCohort != strata.BorrowWithinCohortLowerPriority
	if !MayTry(policy, books, pre.Queue, flavor, pre.Requests) {
		return Result{NoFit: true, Why: "it asks for more than the nominal quota of its ClusterQueue, which may preempt only within it (borrowWithinCohort is Never)"}
	}
	if len(short) == 0 {
		short = pre.Requests // only the topology is short
	}
	variants := make([]variant, len(admitted))
	var cands []Workload
	pos := map[types.NamespacedName]int{}
	// advantaged: the queues over which the preemptor has precedence in
	// their cohort tree (all of them in flat cohorts when it fits in its
	// nominal quota); their workloads come first.
	advantaged := map[string]bool{}
	others, anyAdvantage := false, false
	for i, w := range admitted {
		if !usesAny(w.Requests, short) {
			continue
		}
		if w.Queue != pre.Queue && !books.Reclaimable(pre.Queue, w.Queue, flavor, short) {
			continue
		}
		adv, known := advantaged[w.Queue]
		if !known && w.Queue != pre.Queue {
			adv = books.Advantage(pre.Queue, w.Queue, flavor, pre.Requests)
			advantaged[w.Queue] = adv
		}
		if variants[i] = policy.classify(pre, w, w.Queue != pre.Queue, adv); variants[i] == never {
			continue
		}
		others = others || w.Queue != pre.Queue
		anyAdvantage = anyAdvantage || variants[i] == reclaim
		cands = append(cands, w)
		pos[w.Key] = i
	}
	if len(cands) > 0 {
		Order(pre, cands)
		// Kueue: the workloads of queues over which the preemptor has
		// precedence, then the other queues', then its own queue's.
		sort.SliceStable(cands, func(i, j int) bool {
			return variants[pos[cands[i].Key]] == reclaim && variants[pos[cands[j].Key]] != reclaim
		})
		var attempts []bool // borrowing once admitted, or not
		switch {
		case !others || borrowForbidden && !books.UnderNominal(pre.Queue, flavor, short):
			attempts = []bool{true}
		case borrowForbidden && !anyAdvantage:
			attempts = []bool{false, true}
		default:
			attempts = []bool{true, false}
		}
		for _, borrowing := range attempts {
			if fit := books.Check(pre.Queue, flavor, pre.Requests, !borrowing); fit.Never {
				continue
			}
			var seq []int
			for _, w := range cands {
				if i := pos[w.Key]; !borrowing || variants[i] != reclaimUnborrowed {
					seq = append(seq, i)
				}
			}
			s := &search{pre: pre, books: books, flavor: flavor, admitted: admitted, capacity: capacity, within: !borrowing, short: short}
			victims, ok := s.run(seq)
			if !ok {
				continue
			}
			var out Result
			for _, i := range victims {
				out.Victims = append(out.Victims, Victim{Workload: admitted[i], Reason: variants[i].reason()})
			}
			out.Borrows = cohort != "" && !s.withinAfter(victims)
			out.BorrowHeight = s.heightAfter(victims)
			return out
		}
	}
	return Result{Why: whyNot(pre, policy, books, flavor, admitted, capacity)}
}

// findFair is Find under fair sharing (Kueue's fair preemption):
//
//   - The flavor is tried when the preemptor's queue may take back what
//     it lends, may preempt while borrowing (reclaimWithinCohort is not
//     Never under fair sharing), or its nominal quota holds the request.
//   - Candidates hold some of the resources to free: workloads of its own
//     queue under withinClusterQueue, and, under reclaimWithinCohort,
//     workloads of any queue of its cohort tree that borrows them.
//   - The order of removals is queue.Books.FairSequence's: from its own
//     queue by candidate order; from the others, unconditionally while
//     the preemptor stays within its nominal quota, otherwise when the
//     strategies allow.
//
// The shortest prefix after which it fits is kept, and every victim not
// needed is put back, last first (the preemptor may borrow).
func findFair(pre Preemptor, policy Policy, books *queue.Books, flavor string, admitted []Workload, capacity Capacity) Result {
	short := books.Short(pre.Queue, flavor, pre.Requests)
	if !MayTry(policy, books, pre.Queue, flavor, pre.Requests) {
		return Result{NoFit: true, Why: "it asks for more than the nominal quota of its ClusterQueue, which may preempt only within it (reclaimWithinCohort is Never)"}
	}
	if len(short) == 0 {
		short = pre.Requests // only the topology is short
	}
	var cands []Workload
	pos := map[types.NamespacedName]int{}
	for i, w := range admitted {
		if !usesAny(w.Requests, short) {
			continue
		}
		if w.Queue == pre.Queue {
			if policy.classify(pre, w, false, false) != inQueue {
				continue
			}
		} else if !books.Peer(pre.Queue, w.Queue) || !books.Borrowing(w.Queue, flavor, short) || !satisfies(policy.ReclaimWithinCohort, pre, w) {
			continue
		}
		cands = append(cands, w)
		pos[w.Key] = i
	}
	if len(cands) > 0 {
		Order(pre, cands)
		fc := make([]queue.FairCandidate, len(cands))
		for k, w := range cands {
			fc[k] = queue.FairCandidate{Queue: w.Queue, Requests: w.Requests}
		}
		steps := books.FairSequence(pre.Queue, flavor, pre.Requests, short, fc, policy.Fair)
		seq := make([]int, len(steps))
		reason := map[int]string{}
		for k, st := range steps {
			i := pos[cands[st.Index].Key]
			seq[k], reason[i] = i, st.Reason
		}
		s := &search{pre: pre, books: books, flavor: flavor, admitted: admitted, capacity: capacity, short: short, anyQueue: true}
		if victims, ok := s.run(seq); ok {
			var out Result
			for _, i := range victims {
				out.Victims = append(out.Victims, Victim{Workload: admitted[i], Reason: reason[i]})
			}
			out.Borrows = books.Cohort(pre.Queue) != "" && !s.withinAfter(victims)
			out.BorrowHeight = s.heightAfter(victims)
			return out
		}
		taken := map[types.NamespacedName]bool{}
		for _, st := range steps {
			taken[cands[st.Index].Key] = true
		}
		var refused []string
		for _, w := range cands {
			if w.Queue != pre.Queue && !taken[w.Key] && !slices.Contains(refused, w.Queue) {
				refused = append(refused, w.Queue)
			}
		}
		if len(refused) > 0 {
			slices.Sort(refused)
			return Result{Why: fmt.Sprintf("fair sharing: once admitted, ClusterQueue %s's share would not be below the share of %s, whose workloads it could otherwise take",
				pre.Queue, strings.Join(refused, ", "))}
		}
	}
	return Result{Why: whyNot(pre, policy, books, flavor, admitted, capacity)}
}

// satisfies says whether a policy lets pre preempt w.
func satisfies(p strata.PreemptionPolicy, pre Preemptor, w Workload) bool {
	switch p {
	case strata.PreemptionAny:
		return true
	case strata.PreemptionLowerPriority:
		return w.Priority < pre.Priority
	case strata.PreemptionLowerOrNewerEqualPriority:
		return w.Priority < pre.Priority || w.Priority == pre.Priority && pre.QueuedAt.Before(w.QueuedAt)
	}
	return false
}

// reclaims says whether a preemption takes only workloads of other
// queues (Kueue's reclaim, which it prefers to preempting in the
// preemptor's own queue).
func (r Result) reclaims(queueName string) bool {
	for _, v := range r.Victims {
		if v.Queue == queueName {
			return false
		}
	}
	return true
}

// Better says whether preempting as a says, on its flavor, is better for
// a preemptor of queue queueName than preempting as b says on its own, as
// Kueue's flavor assigner ranks flavors: reclaiming from other queues over
// preempting in its own, then borrowing lower in the cohort tree
// afterwards (not at all first). A tie is not better: the caller keeps the
// earlier flavor.
func Better(a, b Result, queueName string) bool {
	if ra, rb := a.reclaims(queueName), b.reclaims(queueName); ra != rb {
		return ra
	}
	return a.BorrowHeight < b.BorrowHeight
}

// search is one attempt: candidates in order, the books and capacity
// moved as they are removed and put back.
type search struct {
	pre      Preemptor
	books    *queue.Books
	flavor   string
	admitted []Workload
	capacity Capacity
	within   bool
	// short are the resources to free: a workload of another queue is
	// removed only while its queue borrows some of them.
	short corev1.ResourceList
	// anyQueue: workloads of other queues are removed whether or not
	// their queue borrows (for whyNot's hypothetical).
	anyQueue bool
}

// withinAfter says whether the preemptor fits in its queue's nominal
// quota once victims are gone.
func (s *search) withinAfter(victims []int) bool {
	for _, i := range victims {
		w := s.admitted[i]
		s.books.Charge(w.Queue, s.flavor, w.Requests, -1)
	}
	within := s.books.WithinNominal(s.pre.Queue, s.flavor, s.pre.Requests)
	for _, i := range victims {
		w := s.admitted[i]
		s.books.Charge(w.Queue, s.flavor, w.Requests, 1)
	}
	return within
}

// heightAfter is how high in its cohort tree the preemptor borrows once
// victims are gone.
func (s *search) heightAfter(victims []int) int {
	for _, i := range victims {
		w := s.admitted[i]
		s.books.Charge(w.Queue, s.flavor, w.Requests, -1)
	}
	h := s.books.BorrowHeight(s.pre.Queue, s.flavor, s.pre.Requests)
	for _, i := range victims {
		w := s.admitted[i]
		s.books.Charge(w.Queue, s.flavor, w.Requests, 1)
	}
	return h
}

func (s *search) putBack(i int) {
	w := s.admitted[i]
	s.books.Charge(w.Queue, s.flavor, w.Requests, 1)
	s.capacity.Take(i)
}

func (s *search) quotaFits() bool {
	return s.books.Check(s.pre.Queue, s.flavor, s.pre.Requests, s.within).Err == nil
}

// run finds the victims among the candidates seq (indexes into admitted,
// in order). A workload of another queue is a candidate only while its
// queue borrows once the candidates before it are gone (Kueue checks it
// at removal): that fixes the sequence of removals, by the quota alone.
// The shortest prefix of it after which the preemptor fits is found by
// doubling, then bisection (fitting is monotone in what is removed), so
// that a preemptor helped by a few candidates costs a few removals however
// many there are; then the put-back pass.
func (s *search) run(seq []int) ([]int, bool) {
	var order []int
	for _, i := range seq {
		w := s.admitted[i]
		if !s.anyQueue && w.Queue != s.pre.Queue && !s.books.Reclaimable(s.pre.Queue, w.Queue, s.flavor, s.short) {
			continue
		}
		s.books.Charge(w.Queue, s.flavor, w.Requests, -1)
		order = append(order, i)
	}
	for _, i := range order {
		w := s.admitted[i]
		s.books.Charge(w.Queue, s.flavor, w.Requests, 1)
	}
	if len(order) == 0 {
		return nil, false
	}
	at := 0 // order[:at] is removed
	defer func() {
		for at > 0 {
			at--
			s.putBack(order[at])
		}
	}()
	moveTo := func(k int) {
		for at > k {
			at--
			s.putBack(order[at])
		}
		for at < k {
			w := s.admitted[order[at]]
			s.books.Charge(w.Queue, s.flavor, w.Requests, -1)
			s.capacity.Release(order[at])
			at++
		}
	}
	fits := func() (bool, func(int) bool) {
		if !s.quotaFits() {
			return false, nil
		}
		return s.capacity.Fits()
	}
	// Doubling: lo does not fit (0: the caller tried without preemption),
	// hi does.
	lo, hi := 0, 0
	for k := 1; ; k *= 2 {
		k = min(k, len(order))
		moveTo(k)
		if ok, _ := fits(); ok {
			hi = k
			break
		}
		if k == len(order) {
			return nil, false
		}
		lo = k
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		moveTo(mid)
		if ok, _ := fits(); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	moveTo(hi)
	ok, touches := fits()
	if !ok {
		return nil, false // not monotone after all: give up rather than guess
	}
	// Put back, last removed first, every victim not needed. The last one
	// is needed: without it the prefix did not fit. The ones put back
	// leave order[:at] for the deferred put-back, which must skip them.
	inSet := make([]bool, hi)
	for k := range inSet {
		inSet[k] = true
	}
	for k := hi - 2; k >= 0; k-- {
		i := order[k]
		s.putBack(i)
		switch {
		case !s.quotaFits():
		case !touches(i):
			inSet[k] = false
			continue
		default:
			if ok2, t2 := s.capacity.Fits(); ok2 {
				inSet[k] = false
				touches = t2
				continue
			}
		}
		s.releaseAgain(i)
	}
	var victims []int
	for k, in := range inSet {
		if in {
			victims = append(victims, order[k])
		}
	}
	// Hand the removed ones to the deferred put-back.
	order = victims
	at = len(victims)
	return victims, true
}

func (s *search) releaseAgain(i int) {
	w := s.admitted[i]
	s.books.Charge(w.Queue, s.flavor, w.Requests, -1)
	s.capacity.Release(i)
}

// whyNot says why no allowed preemption helps: whether preempting
// workloads the policy protects would, and how many of which kind it
// would take, or that nothing on the flavor would.
func whyNot(pre Preemptor, policy Policy, books *queue.Books, flavor string, admitted []Workload, capacity Capacity) string {
	if !policy.Any() {
		return "preemption is not enabled for its ClusterQueue"
	}
	if len(admitted) == 0 {
		return "no workload is admitted on the flavor"
	}
	// Remove everything on the flavor, own queue first as candidates go.
	all := make([]Workload, len(admitted))
	copy(all, admitted)
	pos := map[types.NamespacedName]int{}
	for i, w := range admitted {
		pos[w.Key] = i
	}
	Order(pre, all)
	s := &search{pre: pre, books: books, flavor: flavor, admitted: admitted, capacity: capacity, anyQueue: true}
	seq := make([]int, len(all))
	for k, w := range all {
		seq[k] = pos[w.Key]
	}
	needed, _ := s.run(seq)
	if len(needed) == 0 {
		return "it would not fit even with every workload on the flavor preempted"
	}
	var higher, other int
	for _, i := range needed {
		w := admitted[i]
		// Which policy would apply: borrowWithinCohort when the
		// preemptor has no precedence over w's queue as things stand.
		peer := w.Queue != pre.Queue && books.Peer(pre.Queue, w.Queue)
		advantage := peer && books.Advantage(pre.Queue, w.Queue, flavor, pre.Requests)
		v := policy.classify(pre, w, peer, advantage)
		switch {
		case v != never && (advantage || v != reclaimUnborrowed):
		case w.Queue != pre.Queue:
			other++
		default:
			higher++
		}
	}
	if higher+other == 0 {
		return fmt.Sprintf("the %d workloads it would need to preempt are allowed, but their queues do not borrow what it needs", len(needed))
	}
	var parts []string
	if higher > 0 {
		what := "of priority ≥ own"
		if policy.WithinClusterQueue == strata.PreemptionNever {
			what = "of its own ClusterQueue, where withinClusterQueue is Never"
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", higher, plural(higher), what))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d %s of other ClusterQueues that its policy or their quota protects", other, plural(other)))
	}
	return "would need to preempt " + strings.Join(parts, " and ")
}

func plural(n int) string {
	if n == 1 {
		return "workload"
	}
	return "workloads"
}

// SnapshotCapacity is Capacity on an engine snapshot, as the agent and
// simulate hold it: Usages[i] is what candidate i holds there, and Place
// places the preemptor on the snapshot, taking its capacity (Fits gives
// it back at once).
type SnapshotCapacity struct {
	Snap   *tas.Snapshot
	Usages []tas.Usage
	Place  func(*tas.Snapshot) ([]tas.Usage, error)
	// Affects, when set, says whether candidate i changes where Place
	// may go beyond the capacity it holds (topology spreading counts it):
	// putting it back is then checked by placing again.
	Affects func(i int) bool
	// released marks the candidates whose capacity is released now.
	released map[int]bool
}

// Release frees candidate i's capacity.
func (c *SnapshotCapacity) Release(i int) {
	c.Snap.Release(c.Usages[i])
	if c.released == nil {
		c.released = map[int]bool{}
	}
	c.released[i] = true
}

// Take takes candidate i's capacity again.
func (c *SnapshotCapacity) Take(i int) {
	for node, rl := range c.Usages[i] {
		c.Snap.AddUsage(node, rl, 1)
	}
	delete(c.released, i)
}

// Released says whether candidate i's capacity is released now: for a
// Place that counts the workloads still admitted (topology spreading).
func (c *SnapshotCapacity) Released(i int) bool { return c.released[i] }

// Fits places the preemptor; a candidate touches the placement when it
// holds capacity on a node the placement uses.
func (c *SnapshotCapacity) Fits() (bool, func(int) bool) {
	taken, err := c.Place(c.Snap)
	if err != nil {
		return false, nil
	}
	nodes := map[string]bool{}
	for _, u := range taken {
		c.Snap.Release(u)
		for n := range u {
			nodes[n] = true
		}
	}
	return true, func(i int) bool {
		if c.Affects != nil && c.Affects(i) {
			return true
		}
		for n := range c.Usages[i] {
			if nodes[n] {
				return true
			}
		}
		return false
	}
}

// Allowed says whether a workload may preempt at all, and up to which
// priority: its queue's policy allows something, and it is not the copy
// of a hub dispatch unless the hub marked it (strata.dev/preempt-up-to):
// the hub chooses the one worker that preempts for a copy, and how far.
func Allowed(cq *strata.ClusterQueue, wl *strata.Workload) (bool, *int32) {
	if !PolicyOf(cq).Any() {
		return false, nil
	}
	if wl.Labels[strata.HubWorkloadUIDLabel] == "" {
		return true, nil
	}
	upTo, ok := workload.PreemptUpTo(wl)
	if !ok {
		return false, nil
	}
	return true, &upTo
}

// QuotaOnly is the capacity side of a search on quota alone (Kueue's
// preemption oracle, the hub's choice): every candidate may go, and the
// preemptor fits wherever the quota lets it.
type QuotaOnly struct{}

// Release implements Capacity.
func (QuotaOnly) Release(int) {}

// Take implements Capacity.
func (QuotaOnly) Take(int) {}

// Fits implements Capacity.
func (QuotaOnly) Fits() (bool, func(int) bool) {
	return true, func(int) bool { return false }
}

// ChooseFlavor is the flavor of n whose search a queue's flavor assigner
// takes to preempt on: under whenCanPreempt: Preempt the first whose
// search finds victims (unless it would then borrow and whenCanBorrow is
// TryNextFlavor), else the best (Better), the first winning a tie. search
// gives a flavor's result, false to skip it. -1 when none finds victims.
func ChooseFlavor(n int, search func(i int) (Result, bool), fung strata.FlavorFungibility, queueName string) (int, Result) {
	chosen := -1
	var best Result
	for i := range n {
		r, ok := search(i)
		if !ok || len(r.Victims) == 0 {
			continue
		}
		if fung.WhenCanPreempt == strata.FungibilityPreempt && (!r.Borrows || fung.WhenCanBorrow != strata.FungibilityTryNextFlavor) {
			return i, r
		}
		if chosen < 0 || Better(r, best, queueName) {
			chosen, best = i, r
		}
	}
	return chosen, best
}
