package dispatch

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// passView is what a pass knows of the workers besides their targets.
type passView struct {
	// onDispatch, when set, is told of each Workload the pass dispatches
	// (admission fair sharing counts it against its LocalQueue); lqUsage
	// is the LocalQueues' usage and afsScoped the hub ClusterQueues that
	// order by it (nil when admission fair sharing is off).
	onDispatch    func(*strata.Workload)
	lqUsage       *queue.UsagePass
	afsScoped     map[string]bool
	clusterLabels map[string]labels.Set
	// queueOf is how each worker's copies are queued (its WorkerCluster's
	// localQueueName and onboarding).
	queueOf map[string]workerQueue
	// refusals memoizes queueRefusal by worker, namespace and LocalQueue.
	refusals map[string]queueRefusal
	// waits are the outcomes of workloads that wait, by what decided them
	// (placeOne).
	waits map[waitKey]waitOutcome
	// quota are the flavors within quota by queue and requests, until a
	// dispatch.
	quota map[quotaKey]quotaOutcome
	// dispatched are the pass's dispatched Workloads (collected).
	dispatched []dispatched
	// resizes are the resizes of elastic Workloads to grant (collected).
	resizes []resizing
	// reclaimSearches are the quota preemption searches this pass may
	// still start (reclaimQuota); noReclaim memoizes the searches that
	// found nothing, by queue, priority and requests, until one finds
	// victims.
	reclaimSearches int
	noReclaim       map[reclaimKey]string
	// oracles are the quota-only searches that order the pass's heads
	// (heightAfterReclaiming) left to it; beyond them a head that must
	// preempt is ordered by the estimate (Books.WouldBorrow).
	oracles int
	// checks are the pass's reads of AdmissionChecks (collected).
	checks *checkReads
	// spread are the dispatched Workloads topology spreading counts, by
	// namespace (spreadAvoider), until a dispatch there.
	spread map[string][]workload.Dispatched
	// landing memoizes the worker ClusterQueue a copy lands in, by worker,
	// namespace and LocalQueue (nil when not known); workerBooks the quota
	// books of each worker's queues (nil when not known), charged with
	// the pass's dispatches (workerQuotaOf).
	landing     map[string]*strata.ClusterQueue
	workerBooks map[string]*queue.Books
	// placed are the pass's dispatched Workloads and targets its
	// targets, for the worker books (chargeInFlight).
	placed  []*strata.Workload
	behind  []inFlight
	targets []*placement.Target
	// placedOn are placed by worker (chargeInFlight).
	placedOn map[string][]*strata.Workload
	// exact are the worker flavors ("cluster/flavor") whose books come
	// from their summary's queues (summaryUsage), not the queues' status.
	exact map[string]bool
}

// reclaimKey is what decides a quota preemption search in a pass: the
// preemptor's queue, priority and requests, whether its pod sets may go
// on different flavors or run with fewer pods (searches of their own),
// and, where its queue preempts newer Workloads of its priority
// (LowerOrNewerEqualPriority), when it was queued.
type reclaimKey struct {
	queue        string
	priority     int32
	need         string
	split, fewer bool
	queuedAt     int64
}

type workerQueue struct {
	localQueue, onboarding string
}

type queueRefusal struct {
	message string
	known   bool
}

// QueueRefusalReasons are the reasons of a worker's refusals that hold
// for every workload queued as the refused one was, whatever the
// capacity: the hub checks them before dispatching (fleet.QueueRefusal).
var QueueRefusalReasons = map[string]bool{
	fleet.ReasonNamespaceNotFound:    true,
	queue.ReasonLocalQueueNotFound:   true,
	queue.ReasonClusterQueueNotFound: true,
	queue.ReasonNamespaceNotAllowed:  true,
	// The worker's queue is stopped (Judge), which JudgeQueue sees too.
	strata.QueueStopped: true,
	// The worker's queue is under a cycle of Cohort parents.
	strata.QueueCohortCycle: true,
	// An AdmissionCheck the worker's queue names does not exist or is not
	// Active (Judge and JudgeQueue).
	strata.QueueAdmissionCheckNotReady: true,
}

// queueRefusal says why a worker would refuse p's copy for its queue
// ("" when it would not), and whether the hub knows (it reads the
// worker's queues).
func (d *Dispatcher) queueRefusal(view *passView, cluster string, p pending) (string, bool) {
	wq := view.queueOf[cluster]
	lq := wq.localQueue
	if lq == "" {
		lq = p.wl.Spec.QueueName
	}
	key := cluster + "/" + p.wl.Namespace + "/" + lq
	if r, ok := view.refusals[key]; ok {
		return r.message, r.known
	}
	_, message, known := d.fleet.QueueRefusal(cluster, fleet.QueueTarget{Namespace: p.wl.Namespace, LocalQueue: lq,
		CreatesNamespace: d.createsNamespaces, OnboardingClusterQueue: wq.onboarding})
	view.refusals[key] = queueRefusal{message: message, known: known}
	return message, known
}

// admittingQueues keeps the targets on workers whose queues take the
// workload's copy. refusal says why a worker's would not ("" when they
// would or the hub does not know); for the others of the queue's flavors
// it says what is missing there (placement.SplitTargets).
func admittingQueues(targets []*placement.Target, excluded, flavors []string, refusal func(cluster string) string) ([]*placement.Target, []string) {
	out, _, excluded := placement.SplitTargets(targets, excluded, flavors, func(t *placement.Target) string { return refusal(t.Cluster) })
	return out, excluded
}

// workerQuotaOf returns the worker ClusterQueue p's copy lands in on a
// worker and the books of that worker's queues, read once per pass
// (chargeInFlight, and charged with the pass's dispatches there); nil and
// nil when the hub does not know them.
func (d *Dispatcher) workerQuotaOf(view *passView, cluster string, p pending) (*strata.ClusterQueue, *queue.Books) {
	cq := d.landingOf(view, cluster, p.wl)
	if cq == nil {
		return nil, nil
	}
	books, ok := view.workerBooks[cluster]
	if !ok {
		books, _ = d.fleet.WorkerBooks(cluster)
		if books != nil {
			summaryUsage(view, cluster, books)
			d.chargeInFlight(view, cluster, books)
		}
		view.workerBooks[cluster] = books
	}
	if books == nil {
		return nil, nil
	}
	return cq, books
}

// landingOf is the worker ClusterQueue a copy of wl lands in on a worker
// (memoized by worker, namespace and LocalQueue); nil when not known.
func (d *Dispatcher) landingOf(view *passView, cluster string, wl *strata.Workload) *strata.ClusterQueue {
	wq := view.queueOf[cluster]
	lq := wq.localQueue
	if lq == "" {
		lq = wl.Spec.QueueName
	}
	key := cluster + "/" + wl.Namespace + "/" + lq
	cq, ok := view.landing[key]
	if !ok {
		cq, _ = d.fleet.LandingQueue(cluster, fleet.QueueTarget{Namespace: wl.Namespace, LocalQueue: lq,
			CreatesNamespace: d.createsNamespaces, OnboardingClusterQueue: wq.onboarding})
		view.landing[key] = cq
	}
	return cq
}

// summaryUsage replaces, in a worker's books, what its queues' status says
// they hold on each flavor whose summary says it (placement.Target.
// QueueUsage): the summary's usage is captured with the dispatches it
// counts, so that chargeInFlight counts every dispatch exactly once. The
// status, written apart from the summary, could show a dispatch the
// summary does not count yet (charged twice: the worker got nothing more
// until the next summary) or miss one it counts (charged nowhere: one copy
// more than the quota holds, refused after pendingTimeout).
func summaryUsage(view *passView, cluster string, books *queue.Books) {
	for _, t := range view.targets {
		if t.Cluster != cluster {
			continue
		}
		if usage, ok := t.QueueUsage(); ok {
			books.SetFlavorUsage(t.Flavor, usage)
			if view.exact == nil {
				view.exact = map[string]bool{}
			}
			view.exact[cluster+"/"+t.Flavor] = true
		}
	}
}

// chargeInFlight charges a worker's books with the hub's dispatches there
// that its summary does not count yet: their copies are not admitted, so
// the queues' status, which the books come from, does not have them
// either. Without this a burst sent a worker every copy its capacity
// held, whatever its queue's quota, and the worker refused the rest
// after dispatch.pendingTimeout. (A status written after the admission
// but read before the summary counts it charges a copy twice until the
// summary comes: the worker gets nothing more meanwhile.)
func (d *Dispatcher) chargeInFlight(view *passView, cluster string, books *queue.Books) {
	if view.placedOn == nil {
		// Once per pass: the dispatched Workloads by worker.
		view.placedOn = map[string][]*strata.Workload{}
		for _, wl := range view.placed {
			if c, _, _, ok := Placed(wl); ok {
				view.placedOn[c] = append(view.placedOn[c], wl)
			}
		}
	}
	// A split dispatch (podSetFlavors) is charged on each pod set's
	// flavor whose summary does not count it yet.
	charge := func(wl *strata.Workload, flavor string, podSetFlavors []strata.PodSetFlavor, key string, preempts bool) {
		// A copy marked to preempt: the agent holds its quota on the
		// flavor where it preempts in the queue's status while its
		// victims' pods end (a split's other pod sets are charged as any
		// copy's). (A summary's usage counts the hold only once the agent
		// preempts: the copy is charged until the summary counts it,
		// meanwhile twice, on the safe side.)
		held := preempts && !view.exact[cluster+"/"+flavor]
		if held && len(podSetFlavors) == 0 {
			return
		}
		cq := d.landingOf(view, cluster, wl)
		if cq == nil {
			return
		}
		for f, rl := range queue.SplitUsage(wl, flavor, podSetFlavors) {
			if held && f == flavor {
				continue
			}
			if t := placement.Find(view.targets, cluster, f); t != nil && !t.SummaryCounts(key) {
				books.Charge(cq.Name, f, rl, 1)
			}
		}
	}
	for _, wl := range view.placedOn[cluster] {
		_, flavor, gen, _ := Placed(wl)
		charge(wl, flavor, wl.Status.Placement.PodSetFlavors, Key(wl.UID, gen), wl.Status.Placement.PreemptUpTo != nil)
	}
	// Recorded by this process, not shown by the informer yet.
	for _, f := range view.behind {
		if f.cluster == cluster {
			charge(f.wl, f.flavor, f.podSetFlavors, f.key, f.preempts)
		}
	}
}

// preemptionScopes is whose workloads p's copy may preempt on t's worker,
// as the hub reads the worker's queues (none when it does not), at the
// copy's priority there.
func (d *Dispatcher) preemptionScopes(view *passView, t *placement.Target, p pending) []placement.PreemptionScope {
	cq, books := d.workerQuotaOf(view, t.Cluster, p)
	priority, _ := t.Priority(p.wl) // a worker without its class: DecidePreemption passes it by
	return placement.ScopesFor(cq, t.Flavor, p.need, priority, books, t.FairSharing())
}

// workerQuotaShort says why the worker ClusterQueue p's copy lands in on
// t's worker has no quota for it on t's flavor once each queue of freed
// gives back what it says (within its nominal quota when nominal; ""
// when it has, or the hub does not know), and whether it
// never could. The hub reads the worker's
// queues and their status; without this, a copy the worker's quota keeps
// out waits there until it is refused (PendingOnWorker), and no worker
// is ever asked to preempt for it.
func (d *Dispatcher) workerQuotaShort(view *passView, t *placement.Target, p pending, freed map[string]corev1.ResourceList, nominal bool) (why string, never bool) {
	cq, books := d.workerQuotaOf(view, t.Cluster, p)
	if books == nil {
		return "", false
	}
	return placement.QuotaShort(books, cq.Name, t.Flavor, p.need, freed, nominal)
}

// chargeWorker charges a dispatch to the worker queue's books of the
// pass: the status the books come from does not show it yet.
// usage is what the dispatch takes by flavor (nil: p's need on flavor).
func (d *Dispatcher) chargeWorker(view *passView, cluster, flavor string, p pending, usage map[string]corev1.ResourceList) {
	cq, books := d.workerQuotaOf(view, cluster, p)
	if books == nil {
		return
	}
	if usage == nil {
		usage = map[string]corev1.ResourceList{flavor: p.need}
	}
	for f, need := range usage {
		books.Charge(cq.Name, f, need, 1)
	}
}

// maxRefusalInReason bounds a worker's refusal message quoted in a
// waiting reason.
const maxRefusalInReason = 200

// eligibleTargets returns the targets on workers the queue's selector
// takes, less those of workers in backoff for the workload. For those it
// returns a reason per target of the queue's flavors, and when the first
// backoff ends.
func eligibleTargets(targets []*placement.Target, selector labels.Selector, clusterLabels map[string]labels.Set,
	backoffs map[string]time.Time, flavors []string, now time.Time, refusal func(cluster string) string) (eligible []*placement.Target, excluded []string, retry time.Duration) {
	for _, t := range targets {
		if !selector.Matches(clusterLabels[t.Cluster]) {
			continue
		}
		if until, ok := backoffs[t.Cluster]; ok {
			if slices.Contains(flavors, t.Flavor) {
				why := ""
				if m := refusal(t.Cluster); m != "" {
					why = " (" + intake.Truncate(m, maxRefusalInReason) + ")"
				}
				excluded = append(excluded, fmt.Sprintf("%s/%s: refused this workload%s; not again before %s", t.Cluster, t.Flavor, why, until.UTC().Format(time.RFC3339)))
			}
			if r := until.Sub(now); retry == 0 || r < retry {
				retry = r
			}
			continue
		}
		eligible = append(eligible, t)
	}
	return eligible, excluded, retry
}

// servingKind keeps the targets on workers that serve kind (its CRD is
// installed there). For the others of the queue's flavors it says why
// they are left out.
func servingKind(targets []*placement.Target, excluded []string, kind jobs.Kind, flavors []string,
	serves func(cluster string, kind jobs.Kind) (served, known bool)) ([]*placement.Target, []string) {
	if kind == nil {
		return targets, excluded
	}
	out := targets[:0:0]
	for _, t := range targets {
		served, known := serves(t.Cluster, kind)
		switch {
		case served:
			out = append(out, t)
			continue
		case !slices.Contains(flavors, t.Flavor):
		case known:
			excluded = append(excluded, fmt.Sprintf("%s/%s: the worker does not serve %s (install its CRD there)", t.Cluster, t.Flavor, jobs.Resource(kind)))
		default:
			excluded = append(excluded, fmt.Sprintf("%s/%s: not known yet whether the worker serves %s", t.Cluster, t.Flavor, jobs.Resource(kind)))
		}
	}
	return out, excluded
}
