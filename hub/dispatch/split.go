package dispatch

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// decideSplit places p, a workload of several flavor assignment units
// (pod sets, or PodSet groups) that fits on no one target, with its units
// on different flavors of one worker, as that worker's agent admits such
// a workload (placement.Policy.DecideSplit): over every flavor of its
// queue, on the workers it may use now (its queue's clusterSelector, no
// backoff, serving its kind, admitting its queue, with its priority
// class), each unit within the hub queue's quota on its flavor and, where
// the hub reads it, the worker queue's. nil when it fits nowhere so, or
// is not such a workload: one placed with fewer pods (partial admission
// is one pod set's), or one that spreads across the fleet (kept on one
// flavor).
//
// When it places it nowhere and dec (the decision on one flavor) says it
// never fits, dec is amended when its units would fit on different
// flavors of an empty worker (placement.Policy.SplitLater).
func (d *Dispatcher) decideSplit(targets []*placement.Target, cq *strata.ClusterQueue, view *passView, p pending, books *queue.Books,
	backoffs map[string]time.Time, now time.Time, dec *placement.Decision) *placement.Decision {
	if !splittable(p) {
		return nil
	}
	flavors, eligible, ok := d.splitTargets(targets, cq, view, p, backoffs, now)
	if !ok {
		return nil
	}
	defer func() {
		if dec != nil && dec.Cluster == "" {
			d.policy.SplitLater(dec, p.wl, flavors, eligible)
		}
	}()
	return d.policy.DecideSplit(p.wl, flavors, eligible, d.splitQuota(cq, view, p, books), queue.Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor)
}

// decideSplitPreemption chooses the one worker that preempts for p, a
// workload of several flavor assignment units that fits nowhere on one
// flavor nor split, with its units on different flavors of that worker:
// those that fit now on theirs, those that do not on the flavor whose
// preemption lets them in (placement.Policy.DecideSplitPreemption), on
// the workers decideSplit considers; each preempting flavor's pod sets
// within the hub queue's quota there, and the worker queue's once the
// victims go. nil and why not ("" when no worker preempts for it).
func (d *Dispatcher) decideSplitPreemption(targets []*placement.Target, cq *strata.ClusterQueue, view *passView, p pending, books *queue.Books,
	backoffs map[string]time.Time, now time.Time) (*placement.PreemptionChoice, string) {
	if !splittable(p) {
		return nil, ""
	}
	flavors, eligible, ok := d.splitTargets(targets, cq, view, p, backoffs, now)
	if !ok {
		return nil, ""
	}
	fung := queue.Fungibility(cq)
	return d.policy.DecideSplitPreemption(p.wl, flavors, eligible, placement.SplitPreemption{
		Quota: d.splitQuota(cq, view, p, books),
		HubFits: func(flavor string, placed *strata.Workload) (bool, bool) {
			fit := books.Check(cq.Name, flavor, queue.WorkloadRequests(placed), false)
			return fit.Err == nil, fit.Borrows
		},
		TryNextOnBorrow: fung.WhenCanBorrow == strata.FungibilityTryNextFlavor,
		FirstPreempting: fung.WhenCanPreempt == strata.FungibilityPreempt,
		Preempt: func(sub *strata.Workload, t *placement.Target) (*placement.PreemptionChoice, string) {
			sized := p.withPodSets(sub)
			return d.policy.DecidePreemption(sub, []string{t.Flavor}, []*placement.Target{t},
				func(t *placement.Target) (int32, bool) { return t.Priority(p.wl) },
				func(t *placement.Target) []placement.PreemptionScope { return d.preemptionScopes(view, t, sized) },
				func(t *placement.Target, freed map[string]corev1.ResourceList, nominal bool) string {
					why, _ := d.workerQuotaShort(view, t, sized, freed, nominal)
					return why
				})
		},
	})
}

// splitTargets are the flavors of p's queue and the targets of the
// workers p may use now for a split (its queue's clusterSelector, no
// backoff, serving its kind, admitting its queue, with its priority
// class); ok false when the selector is invalid (decide says so).
func (d *Dispatcher) splitTargets(targets []*placement.Target, cq *strata.ClusterQueue, view *passView, p pending,
	backoffs map[string]time.Time, now time.Time) (flavors []string, eligible []*placement.Target, ok bool) {
	for _, fq := range queue.Flavors(cq) {
		flavors = append(flavors, fq.Name)
	}
	selector := labels.Everything()
	if cq.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(cq.Spec.ClusterSelector)
		if err != nil {
			return nil, nil, false
		}
		selector = s
	}
	eligible, _, _ = eligibleTargets(targets, selector, view.clusterLabels, backoffs, flavors, now, func(string) string { return "" })
	eligible, _ = servingKind(eligible, nil, p.kind, flavors, d.fleet.Serves)
	eligible, _ = admittingQueues(eligible, nil, flavors, func(cluster string) string {
		m, _ := d.queueRefusal(view, cluster, p)
		return m
	})
	eligible, _, _ = placement.SplitTargets(eligible, nil, flavors, func(t *placement.Target) string { return t.MissingClass(p.wl) })
	return flavors, eligible, true
}

// splitQuota is what the quota says of p's pod sets placed on a flavor
// of a worker: the hub queue's, and the worker queue's where the hub
// reads it.
func (d *Dispatcher) splitQuota(cq *strata.ClusterQueue, view *passView, p pending, books *queue.Books) placement.SplitQuota {
	return func(cluster, flavor string, placed *strata.Workload) workload.QuotaAnswer {
		need := queue.WorkloadRequests(placed)
		fit := books.Check(cq.Name, flavor, need, false)
		if fit.Err != nil {
			return workload.QuotaAnswer{}
		}
		if wcq, wbooks := d.workerQuotaOf(view, cluster, p); wbooks != nil {
			if why, _ := placement.QuotaShort(wbooks, wcq.Name, flavor, need, nil, false); why != "" {
				return workload.QuotaAnswer{}
			}
		}
		return workload.QuotaAnswer{Fits: true, Borrows: fit.Borrows, Height: books.BorrowHeight(cq.Name, flavor, need)}
	}
}

// withPodSets is p's entry for sub, some of its pod sets: their need and
// shape, for the quota and preemption checks of those pod sets alone.
func (p pending) withPodSets(sub *strata.Workload) pending {
	e := *p.entry
	e.wl = sub
	e.shape, e.need = placement.Shape(sub), queue.WorkloadRequests(sub)
	e.needKey = resourcesKey(e.need)
	p.entry = &e
	return p
}

// splittable says whether p's pod sets may be placed on different
// flavors (decideSplit): all of its pods, of several flavor assignment
// units, not spreading across the fleet. (A LeaderWorkerSet's worker
// admits a Workload per group: each takes its pod sets' flavors from the
// copy's, lws.GroupPodSetFlavors.)
func splittable(p pending) bool {
	return p.counts == nil && len(p.wl.Spec.PodSets) > 1 && len(workload.FlavorUnits(p.wl)) > 1 && !workload.Spreads(p.wl)
}
