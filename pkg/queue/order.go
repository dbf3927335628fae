package queue

import (
	"fmt"
	"slices"
	"time"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Before orders workloads: higher priority first, then the one queued
// first (see QueuedAt), then, among those queued in the same second, the
// copies of hub dispatches in the order the hub decided them (see
// dispatchedAt), then by namespace and name.
func Before(a, b *strata.Workload) bool { return Compare(a, b) < 0 }

// Compare is Before as a three-way comparison (for slices.SortFunc): -1
// when a comes first, 1 when b does, 0 for the same namespace and name.
func Compare(a, b *strata.Workload) int {
	pa, pb := Priority(a), Priority(b)
	if pa != pb {
		if pa > pb {
			return -1
		}
		return 1
	}
	if ta, tb := QueuedAt(a), QueuedAt(b); !ta.Equal(tb) {
		return ta.Compare(tb)
	}
	if da, db := dispatchedAt(a), dispatchedAt(b); !da.Equal(db) {
		return da.Compare(db)
	}
	return CompareKeys(a.Namespace, a.Name, b.Namespace, b.Name)
}

// dispatchedAt is when the hub decided the dispatch a copy belongs to
// (strata.dev/dispatch-time, in microseconds, on the hub's clock); zero for
// a workload that is not a copy, or whose annotation does not parse. It
// only orders the copies created in one second (their queue time, on the
// worker's clock, is the same), so that they are admitted in the order the
// hub reserved their placements: the hub's clock is never compared with
// the worker's, which may be minutes apart.
func dispatchedAt(wl *strata.Workload) time.Time {
	if v, ok := wl.Annotations[strata.DispatchTimeAnnotation]; ok && workload.DispatchKey(wl) != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// CompareKeys compares the keys namespace/name of two workloads.
func CompareKeys(nsA, nameA, nsB, nameB string) int {
	switch {
	case keyLess(nsA, nameA, nsB, nameB):
		return -1
	case keyLess(nsB, nameB, nsA, nameA):
		return 1
	}
	return 0
}

// keyLess is nsA+"/"+nameA < nsB+"/"+nameB without building either: a
// dispatch pass sorts tens of thousands of Workloads, many created in
// the same second.
func keyLess(nsA, nameA, nsB, nameB string) bool {
	at := func(ns, name string, i int) byte {
		switch {
		case i < len(ns):
			return ns[i]
		case i == len(ns):
			return '/'
		default:
			return name[i-len(ns)-1]
		}
	}
	la, lb := len(nsA)+1+len(nameA), len(nsB)+1+len(nameB)
	for i := 0; i < la && i < lb; i++ {
		if ca, cb := at(nsA, nameA, i), at(nsB, nameB, i); ca != cb {
			return ca < cb
		}
	}
	return la < lb
}

// QueuedAt is when a workload joined its queue, on its API server's clock:
// for one waiting again after an eviction because its pods were not ready
// in time (Evicted=True, reason PodsReadyTimeout, no admission), that
// eviction, so that it queues again behind the workloads already waiting
// (Kueue's requeuing timestamp Eviction); otherwise its creation time —
// also for the copy of a hub dispatch, which the worker created when the
// hub sent it: the hub's dispatch time is on the hub's clock, and a hub
// minutes ahead or behind would put its copies behind or ahead of the
// worker's own workloads (Compare orders copies of one second by it).
func QueuedAt(wl *strata.Workload) time.Time {
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted); c != nil && wl.Status.Admission == nil &&
		c.Status == metav1.ConditionTrue && c.Reason == strata.EvictedByPodsReadyTimeout {
		return c.LastTransitionTime.Time
	}
	return wl.CreationTimestamp.Time
}

// Priority is a workload's priority, 0 when unset.
func Priority(wl *strata.Workload) int32 {
	if wl.Spec.Priority != nil {
		return *wl.Spec.Priority
	}
	return 0
}

// AddUsage adds the resource usage of pod set assignments to a queue's
// usage per flavor.
func AddUsage(usage map[string]corev1.ResourceList, psas []strata.PodSetAssignment) {
	for _, psa := range psas {
		AddRequests(usage, psa.Flavor, psa.ResourceUsage)
	}
}

// LessReclaimable is a pod set assignment's usage without that of r of its
// pods (status.reclaimablePods): each uses ResourceUsage / Count.
func LessReclaimable(psa strata.PodSetAssignment, r int32) corev1.ResourceList {
	if r <= 0 || psa.Count <= 0 {
		return psa.ResourceUsage
	}
	keep := int64(max(psa.Count-r, 0))
	out := make(corev1.ResourceList, len(psa.ResourceUsage))
	for name, q := range psa.ResourceUsage {
		out[name] = *resource.NewMilliQuantity(q.MilliValue()*keep/int64(psa.Count), q.Format)
	}
	return out
}

// AddRequests adds requests to a queue's usage (by flavor) of flavor.
func AddRequests(usage map[string]corev1.ResourceList, flavor string, requests corev1.ResourceList) {
	rl := usage[flavor]
	if rl == nil {
		rl = corev1.ResourceList{}
		usage[flavor] = rl
	}
	for name, v := range requests {
		sum := rl[name]
		sum.Add(v)
		rl[name] = sum
	}
}

// CheckQuota says whether the workload fits in the flavor's quotas given
// what is used of them; never is true when it is larger than a whole quota.
func CheckQuota(fq strata.FlavorQuotas, used corev1.ResourceList, wl *strata.Workload) (err error, never bool) {
	if len(fq.Resources) == 0 {
		return nil, false
	}
	return CheckQuotaOf(fq, used, WorkloadRequests(wl))
}

// WorkloadRequests is what a workload requests in all, every pod set's
// TotalRequests summed.
func WorkloadRequests(wl *strata.Workload) corev1.ResourceList {
	need := corev1.ResourceList{}
	for i := range wl.Spec.PodSets {
		for name, v := range TotalRequests(&wl.Spec.PodSets[i]) {
			sum := need[name]
			sum.Add(v)
			need[name] = sum
		}
	}
	return need
}

// WorkloadUsage is what a workload uses of quota: each pod set's
// requests for the pods it is charged for (ChargedCount: fewer than it
// asks for when admitted or placed with fewer, Kueue's partial
// admission), less its reclaimable pods (status.reclaimablePods, the
// finished part Kueue gives back).
func WorkloadUsage(wl *strata.Workload) corev1.ResourceList {
	if !ChargedLess(wl) {
		return WorkloadRequests(wl)
	}
	used := corev1.ResourceList{}
	for i := range wl.Spec.PodSets {
		ps := wl.Spec.PodSets[i]
		ps.Count = ChargedCount(wl, i)
		for _, r := range wl.Status.ReclaimablePods {
			if r.Name == ps.Name {
				ps.Count = max(ps.Count-r.Count, 0)
			}
		}
		for name, v := range TotalRequests(&ps) {
			sum := used[name]
			sum.Add(v)
			used[name] = sum
		}
	}
	return used
}

// PlacedUsage is what a hub Workload dispatched on flavor uses of its
// queue's quota, by flavor: WorkloadUsage on flavor, or, when the hub
// placed its pod sets on different flavors (status.placement.
// podSetFlavors), each pod set's share on its own flavor (a pod set the
// list does not name on flavor).
func PlacedUsage(wl *strata.Workload, flavor string) map[string]corev1.ResourceList {
	var podSetFlavors []strata.PodSetFlavor
	if p := wl.Status.Placement; p != nil {
		podSetFlavors = p.PodSetFlavors
	}
	return SplitUsage(wl, flavor, podSetFlavors)
}

// GrantedUsage is PlacedUsage of a hub Workload, but for an admitted
// elastic one (kueue.x-k8s.io/elastic-job), which is charged the size its
// hub ClusterQueue granted (its pod count), also while its worker still
// runs another.
func GrantedUsage(wl *strata.Workload, flavor string) map[string]corev1.ResourceList {
	if wl.Annotations[strata.ElasticJobAnnotation] == "true" && wl.Status.Admission != nil {
		granted := *wl
		granted.Status.Admission = nil
		return PlacedUsage(&granted, flavor)
	}
	return PlacedUsage(wl, flavor)
}

// SplitUsage is PlacedUsage with the pod sets' flavors given (none: all
// on flavor).
func SplitUsage(wl *strata.Workload, flavor string, podSetFlavors []strata.PodSetFlavor) map[string]corev1.ResourceList {
	if len(podSetFlavors) == 0 {
		return map[string]corev1.ResourceList{flavor: WorkloadUsage(wl)}
	}
	out := map[string]corev1.ResourceList{}
	for i := range wl.Spec.PodSets {
		ps := wl.Spec.PodSets[i]
		on := flavor
		for _, f := range podSetFlavors {
			if f.Name == ps.Name {
				on = f.Flavor
			}
		}
		ps.Count = ChargedCount(wl, i)
		for _, r := range wl.Status.ReclaimablePods {
			if r.Name == ps.Name {
				ps.Count = max(ps.Count-r.Count, 0)
			}
		}
		AddRequests(out, on, TotalRequests(&ps))
	}
	return out
}

// ChargedLess says whether a workload is charged less than
// WorkloadRequests: it has reclaimable pods, or a pod set is charged for
// fewer pods than it asks for (ChargedCount).
func ChargedLess(wl *strata.Workload) bool {
	if len(wl.Status.ReclaimablePods) > 0 {
		return true
	}
	for i := range wl.Spec.PodSets {
		if ChargedCount(wl, i) != wl.Spec.PodSets[i].Count {
			return true
		}
	}
	return false
}

// ChargedCount is the number of pods of a workload's i-th pod set that
// its quota is charged for: the count its admission names, or, before it
// is admitted, the one the hub placed it with
// (status.placement.podSetCounts); its own count otherwise, and whenever
// those are not between 1 and it.
func ChargedCount(wl *strata.Workload, i int) int32 {
	ps := &wl.Spec.PodSets[i]
	fewer := func(name string, count int32) (int32, bool) {
		if name == ps.Name && count > 0 && count < ps.Count {
			return count, true
		}
		return 0, false
	}
	if a := wl.Status.Admission; a != nil {
		for _, psa := range a.PodSetAssignments {
			if c, ok := fewer(psa.Name, psa.Count); ok {
				return c
			}
		}
		return ps.Count
	}
	if p := wl.Status.Placement; p != nil {
		for _, c := range p.PodSetCounts {
			if n, ok := fewer(c.Name, c.Count); ok {
				return n
			}
		}
	}
	return ps.Count
}

// CheckQuotaOf is CheckQuota for a workload that requests need in all
// (WorkloadRequests), for a caller that keeps it.
func CheckQuotaOf(fq strata.FlavorQuotas, used, need corev1.ResourceList) (err error, never bool) {
	for _, rq := range fq.Resources {
		n, ok := need[rq.Name]
		if !ok {
			continue
		}
		if n.Cmp(rq.NominalQuota) > 0 {
			return fmt.Errorf("quota: %s needs %s, more than the whole quota of %s", rq.Name, n.String(), rq.NominalQuota.String()), true
		}
		total := used[rq.Name].DeepCopy()
		total.Add(n)
		if total.Cmp(rq.NominalQuota) > 0 {
			// No live usage in the message: it would change, and be written
			// again with an event, whenever any workload of the queue is
			// admitted or finishes. The ClusterQueue's status has the usage.
			return fmt.Errorf("quota: %s needs %s, more than is left of the quota of %s", rq.Name, n.String(), rq.NominalQuota.String()), false
		}
	}
	return nil, false
}

// TotalRequests is a pod set's requests times its count, and its count
// as the "pods" resource: as in Kueue, a ClusterQueue that gives a quota
// of pods counts the pods of what it admits; the books of one that does
// not ignore it (see PodSetUsage).
func TotalRequests(ps *strata.PodSet) corev1.ResourceList {
	per := workload.TemplateRequests(&ps.Template.Spec)
	out := corev1.ResourceList{}
	for name, q := range per {
		// In decimal: milli-units times a pod count can pass int64.
		total := q.AsDec()
		total.Mul(total, inf.NewDec(int64(ps.Count), 0))
		out[name] = *resource.NewDecimalQuantity(*total, q.Format)
	}
	if ps.Count > 0 {
		out[corev1.ResourcePods] = *resource.NewQuantity(int64(ps.Count), resource.DecimalSI)
	}
	return out
}

// CoversPods says whether a ClusterQueue gives a quota of pods (a
// resource group covers "pods"): only then does it count them (Kueue's).
func CoversPods(cq *strata.ClusterQueue) bool {
	if cq == nil {
		return false
	}
	for _, g := range cq.Spec.ResourceGroups {
		if slices.Contains(g.CoveredResources, corev1.ResourcePods) {
			return true
		}
	}
	for _, f := range cq.Spec.Flavors {
		for _, r := range f.Resources {
			if r.Name == corev1.ResourcePods {
				return true
			}
		}
	}
	return false
}

// PodSetUsage is what an admission of a pod set through cq records it
// uses (its resourceUsage): TotalRequests, with pods only when cq counts
// them.
func PodSetUsage(cq *strata.ClusterQueue, ps *strata.PodSet) corev1.ResourceList {
	out := TotalRequests(ps)
	if !CoversPods(cq) {
		delete(out, corev1.ResourcePods)
	}
	return out
}

// StatusUsage is usage (by flavor) as a ClusterQueue's status shows it:
// without pods unless the queue counts them.
func StatusUsage(cq *strata.ClusterQueue, usage corev1.ResourceList) corev1.ResourceList {
	if _, ok := usage[corev1.ResourcePods]; !ok || CoversPods(cq) {
		return usage
	}
	out := usage.DeepCopy()
	delete(out, corev1.ResourcePods)
	return out
}
