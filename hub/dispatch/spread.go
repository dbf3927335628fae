package dispatch

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// maxPlacementHint is the longest plan a hub Workload's
// status.placement.topologyHint keeps (the schema's bound).
const maxPlacementHint = 16 << 10

// spreadEntry is a dispatch this process decided: its generation, the
// cluster and the plan, per pod set name.
type spreadEntry struct {
	namespace  string
	generation int64
	cluster    string
	hints      map[string]*tas.Assignment
}

// noteSpread remembers a dispatch decided in this pass, which later
// decisions count before the informer shows it recorded.
func (d *Dispatcher) noteSpread(wl *strata.Workload, gen int64, cluster string, assignments []*tas.Assignment) {
	hints := make(map[string]*tas.Assignment, len(assignments))
	for i, a := range assignments {
		if a != nil && i < len(wl.Spec.PodSets) {
			hints[wl.Spec.PodSets[i].Name] = a
		}
	}
	d.spread[wl.UID] = spreadEntry{namespace: wl.Namespace, generation: gen, cluster: cluster, hints: hints}
}

// forgetSpread drops a decided dispatch whose record could not be written.
func (d *Dispatcher) forgetSpread(uid types.UID, gen int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.spread[uid]; ok && e.generation == gen {
		delete(d.spread, uid)
	}
}

// forgetSpreadShown drops the decisions the informer shows recorded, and
// those of Workloads that are gone, as forgetRecorded does for records:
// every dispatch is noted, so they must not outlive that. d.mu is held.
func (d *Dispatcher) forgetSpreadShown(entries []*entry) {
	if len(d.spread) == 0 {
		return
	}
	seen := make(map[types.UID]bool, len(d.spread))
	for _, e := range entries {
		s, ok := d.spread[e.uid]
		if !ok {
			continue
		}
		seen[e.uid] = true
		if e.generation >= s.generation {
			delete(d.spread, e.uid)
		}
	}
	for uid := range d.spread {
		if !seen[uid] {
			delete(d.spread, uid)
		}
	}
}

// spreadAvoider returns, for a workload that asks for topology spreading,
// the domains each of its pod sets keeps out of on each target: Kueue's
// rule over the whole fleet. Every dispatched hub Workload of its
// namespace counts by the plan the hub made for it (its
// status.placement.topologyHint, or this process's decision the informer
// does not show yet), in the cluster it went to. nil when wl does not
// spread.
// The list is read once per namespace per pass, until a dispatch there.
func (d *Dispatcher) spreadAvoider(ctx context.Context, view *passView, wl *strata.Workload) (placement.Avoider, error) {
	if !workload.Spreads(wl) {
		return nil, nil
	}
	dispatched, ok := view.spread[wl.Namespace]
	if !ok {
		var list strata.WorkloadList
		if err := d.client.List(ctx, &list, client.InNamespace(wl.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		d.mu.Lock()
		dispatched = d.dispatchedIn(wl.Namespace, list.Items)
		d.mu.Unlock()
		if view.spread == nil {
			view.spread = map[string][]workload.Dispatched{}
		}
		view.spread[wl.Namespace] = dispatched
	}
	return placement.SpreadAvoider(wl, dispatched), nil
}

// dispatchedIn lists the dispatched Workloads among items (one
// namespace's), each with its cluster and plan: the record's, or this
// process's newer decision. Decisions the informer now shows, and those of
// Workloads gone, are forgotten. d.mu is held.
func (d *Dispatcher) dispatchedIn(namespace string, items []strata.Workload) []workload.Dispatched {
	var out []workload.Dispatched
	seen := map[types.UID]bool{}
	for i := range items {
		other := &items[i]
		seen[other.UID] = true
		var gen int64
		var cluster string
		var hints map[string]*tas.Assignment
		if p := other.Status.Placement; p != nil && p.Cluster != "" && !meta.IsStatusConditionTrue(other.Status.Conditions, strata.WorkloadFinished) {
			gen, cluster = p.DispatchGeneration, p.Cluster
			if p.TopologyHint != "" {
				// A plan that does not parse tells nothing.
				hints, _ = workload.DecodeHints(p.TopologyHint)
			}
		} else if p != nil {
			gen = p.DispatchGeneration
		}
		if e, ok := d.spread[other.UID]; ok {
			if e.generation > gen {
				cluster, hints = e.cluster, e.hints
			} else {
				delete(d.spread, other.UID)
			}
		}
		if cluster != "" {
			out = append(out, workload.Dispatched{Workload: other, Cluster: cluster, Hints: hints})
		}
	}
	for uid, e := range d.spread {
		if e.namespace == namespace && !seen[uid] {
			delete(d.spread, uid)
		}
	}
	return out
}
