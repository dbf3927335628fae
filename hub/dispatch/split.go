package dispatch

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
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
	wl := p.wl
	if !splittable(p) {
		return nil
	}
	var flavors []string
	for _, fq := range queue.Flavors(cq) {
		flavors = append(flavors, fq.Name)
	}
	selector := labels.Everything()
	if cq.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(cq.Spec.ClusterSelector)
		if err != nil {
			return nil // decide says so
		}
		selector = s
	}
	eligible, _, _ := eligibleTargets(targets, selector, view.clusterLabels, backoffs, flavors, now, func(string) string { return "" })
	eligible, _ = servingKind(eligible, nil, p.kind, flavors, d.fleet.Serves)
	eligible, _ = admittingQueues(eligible, nil, flavors, func(cluster string) string {
		m, _ := d.queueRefusal(view, cluster, p)
		return m
	})
	eligible, _, _ = placement.SplitTargets(eligible, nil, flavors, func(t *placement.Target) string { return t.MissingClass(wl) })
	tryNext := queue.Fungibility(cq).WhenCanBorrow == strata.FungibilityTryNextFlavor
	defer func() {
		if dec != nil && dec.Cluster == "" {
			d.policy.SplitLater(dec, wl, flavors, eligible)
		}
	}()
	return d.policy.DecideSplit(wl, flavors, eligible, func(cluster, flavor string, placed *strata.Workload) workload.QuotaAnswer {
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
	}, tryNext)
}

// splittable says whether p's pod sets may be placed on different
// flavors (decideSplit): all of its pods, of several flavor assignment
// units, not spreading across the fleet, and not of a kind whose worker
// admits it as several Workloads (a LeaderWorkerSet's groups: each
// group's Workload names its pod sets as the group does, not as the hub
// Workload does).
func splittable(p pending) bool {
	if _, grouped := p.kind.(jobs.GroupedWorkloads); grouped {
		return false
	}
	return p.counts == nil && len(p.wl.Spec.PodSets) > 1 && len(workload.FlavorUnits(p.wl)) > 1 && !workload.Spreads(p.wl)
}
