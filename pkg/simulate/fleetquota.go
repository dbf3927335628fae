package simulate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// hubHeld is a workload the simulated hub placed, holding quota of its
// hub ClusterQueue.
type hubHeld struct {
	row int
	// placedHere: this simulation placed it, under key; else the input
	// says it is dispatched (its worker's files hold what it uses there).
	placedHere      bool
	key             string // its reservation's on its target
	queue           string
	cluster, flavor string
	wl              *strata.Workload // as placed (with fewer pods, sized)
	need            corev1.ResourceList
	// split: its pod sets placed on different flavors of cluster, what
	// they use on each (nil: need, all on flavor).
	split    map[string]corev1.ResourceList
	at       time.Time // when it was placed: later is more recent
	queuedAt time.Time // when it was queued at the hub
}

// usage is what h holds of its queue's quota, by flavor.
func (h *hubHeld) usage() map[string]corev1.ResourceList {
	if h.split != nil {
		return h.split
	}
	return map[string]corev1.ResourceList{h.flavor: h.need}
}

// usageOn is what h holds of its queue's quota on flavor; false when
// nothing.
func (h *hubHeld) usageOn(flavor string) (corev1.ResourceList, bool) {
	u, ok := h.usage()[flavor]
	return u, ok
}

// hubHold is the quota a preemption at the hub freed for a workload that
// could not be placed then: the hub holds it for that workload (its
// reclaim) until it is placed, so that the victims do not take it back.
type hubHold struct {
	queue, flavor string
	need          corev1.ResourceList
}

// hubReclaim is the hub's quota preemption (hub/dispatch's reclaimQuota)
// offline, for wl of hub queue cq, which fits no flavor of that queue's
// quota: the workloads held whose preemption frees quota for all of its
// pods, else for the most of them (at least minCount: it is then placed
// with what the quota holds), chosen on quota alone as the hub chooses
// them. It returns the victims (nil: none helps) and why none does (""
// when its queue preempts nothing); the caller evicts them.
func hubReclaim(books *queue.Books, cq *strata.ClusterQueue, held []*hubHeld, wl *strata.Workload, queuedAt time.Time, fair []queue.FairStrategy, usage func(*hubHeld) *float64,
	partialSlices bool) ([]*hubHeld, string) {
	search := hubReclaimSearch(books, cq, held, wl, queuedAt, fair, usage)
	if search == nil {
		return nil, ""
	}
	victims, whys := search(wl)
	if victims != nil {
		return victims, ""
	}
	if total := workload.Reducible(wl.Spec.PodSets, partialSlices); total > 0 {
		_, victims, ok := workload.FewestTakenAway(total, func(k int32) ([]*hubHeld, bool) {
			v, _ := search(workload.WithCounts(wl, workload.ReducedCounts(wl.Spec.PodSets, k, partialSlices)))
			return v, v != nil
		})
		if ok {
			return victims, ""
		}
	}
	return nil, "no preemption at the hub frees quota: " + strings.Join(whys, "; ")
}

// hubReclaimSearch is the search for the workloads held whose preemption
// at the hub frees the quota of cq for w (wl, or wl with fewer pods), on
// quota alone as the hub searches (preemption.Reclaim); nil when cq
// preempts nothing. usage, when set, is a candidate's LocalQueue usage
// under admission fair sharing (nil: its queue is not ordered by it).
func hubReclaimSearch(books *queue.Books, cq *strata.ClusterQueue, held []*hubHeld, wl *strata.Workload, queuedAt time.Time, fair []queue.FairStrategy,
	usage func(*hubHeld) *float64) func(w *strata.Workload) ([]*hubHeld, []string) {
	search := hubReclaimSearchOn(books, cq, held, wl, queuedAt, fair, usage)
	if search == nil {
		return nil
	}
	return func(w *strata.Workload) ([]*hubHeld, []string) { return search(w, "") }
}

// hubReclaimSearchOn is hubReclaimSearch on one flavor of cq's (only; ""
// any).
func hubReclaimSearchOn(books *queue.Books, cq *strata.ClusterQueue, held []*hubHeld, wl *strata.Workload, queuedAt time.Time, fair []queue.FairStrategy,
	usage func(*hubHeld) *float64) func(w *strata.Workload, only string) ([]*hubHeld, []string) {
	if cq == nil {
		return nil
	}
	policy := preemption.PolicyOf(cq)
	policy.Fair = fair
	if !policy.Any() {
		return nil
	}
	return func(w *strata.Workload, only string) ([]*hubHeld, []string) {
		pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, Queue: cq.Name, Priority: queue.Priority(wl), QueuedAt: queuedAt, Requests: queue.WorkloadRequests(w)}
		fqs := queue.Flavors(cq)
		if only != "" {
			fqs = slices.DeleteFunc(slices.Clone(fqs), func(fq strata.FlavorQuotas) bool { return fq.Name != only })
		}
		flavors := make([]preemption.ReclaimFlavor, len(fqs))
		of := map[types.NamespacedName]*hubHeld{}
		for i, fq := range fqs {
			flavors[i].Name = fq.Name
			for _, h := range held {
				on, ok := h.usageOn(fq.Name)
				if !ok || (h.queue != cq.Name && !books.Peer(cq.Name, h.queue)) {
					continue
				}
				key := types.NamespacedName{Namespace: h.wl.Namespace, Name: h.wl.Name}
				w := preemption.Workload{Key: key, Queue: h.queue, Priority: queue.Priority(h.wl), QueuedAt: h.queuedAt, AdmittedAt: h.at, Requests: on}
				if usage != nil {
					w.LocalQueueUsage = usage(h)
				}
				flavors[i].Cands = append(flavors[i].Cands, w)
				of[key] = h
			}
		}
		i, _, result, whys := preemption.Reclaim(pre, policy, queue.Fungibility(cq), books, flavors)
		if i < 0 || len(result.Victims) == 0 {
			return nil, whys
		}
		victims := make([]*hubHeld, len(result.Victims))
		for k, v := range result.Victims {
			victims[k] = of[v.Key]
		}
		return victims, whys
	}
}

// hubSplitReclaim is the hub's quota preemption for wl's pod sets on
// different flavors (hub/dispatch's splitReclaim) offline, for wl of
// several flavor assignment units whose queue cq holds all of it on no
// one flavor: its units walked over cq's flavors by quota alone
// (workload.QuotaPlan), the first that is within quota on none reclaims,
// with the pod sets put there before it, on the first flavor where a
// search finds victims, and every later unit within quota on none goes
// there too, one search for them all. It returns the victims (nil: none
// helps) and the flavor and need to hold for it.
func hubSplitReclaim(books *queue.Books, cq *strata.ClusterQueue, held []*hubHeld, wl *strata.Workload, queuedAt time.Time, fair []queue.FairStrategy,
	usage func(*hubHeld) *float64) ([]*hubHeld, string, corev1.ResourceList) {
	search := hubReclaimSearchOn(books, cq, held, wl, queuedAt, fair, usage)
	if search == nil {
		return nil, "", nil
	}
	fqs := queue.Flavors(cq)
	var first []*hubHeld
	var firstSub *strata.Workload
	f, on := workload.QuotaPlan(wl, len(fqs), func(f int, placed *strata.Workload) bool {
		return books.Check(cq.Name, fqs[f].Name, queue.WorkloadRequests(placed), false).Err == nil
	}, func(unit []int, onFlavor map[int][]int) (int, bool) {
		for f, fq := range fqs {
			sub := workload.WithPodSets(wl, slices.Concat(onFlavor[f], unit))
			if victims, _ := search(sub, fq.Name); victims != nil {
				first, firstSub = victims, sub
				return f, true
			}
		}
		return 0, false
	})
	if f < 0 || first == nil {
		return nil, "", nil
	}
	if len(on) > len(firstSub.Spec.PodSets) {
		sub := workload.WithPodSets(wl, on)
		if victims, _ := search(sub, fqs[f].Name); victims != nil {
			return victims, fqs[f].Name, queue.WorkloadRequests(sub)
		}
	}
	return first, fqs[f].Name, queue.WorkloadRequests(firstSub)
}

// hubHeightAfterReclaiming is the hub's preemption oracle for the order of
// its heads (hub/dispatch's heightAfterReclaiming): how high in its cohort
// tree wl of hub queue cq borrows on flavor once the victims a search on
// quota alone finds among the workloads held are gone; false when it finds
// none, or cq preempts nothing.
func hubHeightAfterReclaiming(books *queue.Books, cq *strata.ClusterQueue, held []*hubHeld, wl *strata.Workload, queuedAt time.Time, flavor string, need corev1.ResourceList) (int, bool) {
	policy := preemption.PolicyOf(cq)
	if !policy.Any() {
		return 0, false
	}
	var cands []preemption.Workload
	for _, h := range held {
		on, ok := h.usageOn(flavor)
		if !ok || h.wl == wl || (h.queue != cq.Name && !books.Peer(cq.Name, h.queue)) {
			continue
		}
		cands = append(cands, preemption.Workload{Key: types.NamespacedName{Namespace: h.wl.Namespace, Name: h.wl.Name}, Queue: h.queue,
			Priority: queue.Priority(h.wl), QueuedAt: h.queuedAt, AdmittedAt: h.at, Requests: on})
	}
	pre := preemption.Preemptor{Key: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, Queue: cq.Name, Priority: queue.Priority(wl), QueuedAt: queuedAt, Requests: need}
	result := preemption.Find(pre, policy, books, flavor, cands, preemption.QuotaOnly{})
	if len(result.Victims) == 0 {
		return 0, false
	}
	return result.BorrowHeight, true
}

// evictAtHub takes a hub victim's place back: its quota, at the hub and,
// when this simulation placed it, on its worker's queue, with its
// capacity (one the input shows dispatched holds what its worker's files
// say); its row says it was preempted.
func (f *Fleet) evictAtHub(v *hubHeld, by *strata.Workload, cq *strata.ClusterQueue, hubBooks *queue.Books, targets []*placement.Target, row *Result) {
	for flavor, used := range v.usage() {
		hubBooks.Charge(v.queue, flavor, used, -1)
		if v.placedHere {
			if wcq, books := f.landing(v.cluster, v.wl), f.books[v.cluster]; wcq != nil && books != nil {
				books.Charge(wcq.Name, flavor, used, -1)
			}
			if t := placement.Find(targets, v.cluster, flavor); t != nil {
				t.Release(v.key)
			}
		}
	}
	row.Admitted, row.PodSets, row.PreemptUpTo, row.Cluster = false, nil, nil, new(string)
	row.Reason = fmt.Sprintf("preempted at the hub to free quota of ClusterQueue %s for %s/%s (priority %d); it waits in its queue again",
		cq.Name, by.Namespace, by.Name, queue.Priority(by))
}

// heldBy returns held without the victims.
func heldBy(held, victims []*hubHeld) []*hubHeld {
	return slices.DeleteFunc(held, func(h *hubHeld) bool { return slices.Contains(victims, h) })
}
