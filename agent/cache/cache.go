// Package cache is the agent's capacity cache: one engine snapshot per
// topology-aware flavor, kept current from Node and Pod events and from the
// admitted workloads' usage (also before their pods exist).
package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Cache holds the capacity of every topology-aware flavor. All methods are
// safe for concurrent use.
type Cache struct {
	mu sync.Mutex

	topologies map[string]*strata.Topology
	flavorDefs map[string]*strata.ResourceFlavor
	flavors    map[string]*flavor

	nodes map[string]*corev1.Node
	// pods is the usage of bound pods that Strata does not account through
	// a workload: pod UID -> (node, requests).
	pods map[types.UID]podUsage
	// tasPods are the bound, running pods of topology-aware workloads, by
	// workload. They count through their workload while it holds an
	// admission here, and on their own once it does not (the Job was
	// deleted with its pods orphaned, the workload was evicted or requeued
	// while its pods terminate): capacity is taken until the pods are gone.
	tasPods map[types.NamespacedName]map[types.UID]podUsage
	// podWorkload finds the workload of a pod in tasPods.
	podWorkload map[types.UID]types.NamespacedName
	// workloads is the usage of admitted workloads, per flavor.
	workloads map[types.NamespacedName]admitted
	// holds is the quota the scheduler holds for its preemptors while
	// their victims' pods end, by flavor and ClusterQueue
	// (SetPreemptionHolds): a summary's queue usage counts it, as the
	// scheduler's books do.
	holds map[string]map[string]corev1.ResourceList
	// onNode indexes the admitted workloads assigned to each node (when the
	// lowest level of their assignment is the host).
	onNode map[string]map[types.NamespacedName]struct{}
	// goneNodes keeps the labels of deleted nodes that admitted workloads
	// are still assigned to, so that hot swap knows their domains.
	goneNodes map[string]map[string]string
	// finished are the succeeded pods of topology-aware workloads, by
	// workload: where they ran and their pod set. A workload's
	// status.reclaimablePods is released on those nodes (commitFitLocked).
	finished map[types.NamespacedName]map[types.UID]finishedPod

	// uncommitted are admitted workloads recorded without usage because
	// their domains were not known yet (a node informer behind the
	// workload informer); a new node retries them.
	uncommitted map[types.NamespacedName]struct{}

	// deleted are the UIDs of Workloads the informer showed deleted in
	// the last deletedMemory, and when (ForgetWorkload).
	deleted map[types.UID]time.Time
	// released are the versions at which the informer showed admitted
	// workloads' admissions taken back (RemoveWorkloadIfNewer): an older
	// admitted copy in a pass's list is not accounted again.
	released map[types.NamespacedName]int64

	// synced are the informer handlers' HasSynced; syncOnce rebuilds the
	// snapshots once they all are.
	synced   []toolscache.InformerSynced
	syncOnce sync.Once
	// rebuilt is set once WaitForSync rebuilt the snapshots; until then
	// uncommitted workloads wait for that rebuild instead of being retried
	// on every node of the initial list.
	rebuilt bool
	// changed is signalled (without blocking) whenever capacity may have
	// grown, so that waiting workloads are retried.
	changed chan struct{}
	// subscribers are signalled on every change of capacity.
	subscribers []chan struct{}
}

type flavor struct {
	def      *strata.ResourceFlavor
	topology *strata.Topology
	snapshot *tas.Snapshot
	// dispatches are the hub dispatches (workload.DispatchKey) of the
	// workloads whose usage the snapshot counts, with the number of such
	// workloads carrying each; parts how many each has in all.
	dispatches map[string]int
	parts      map[string]int
}

// finishedPod is a succeeded pod of a topology-aware workload.
type finishedPod struct {
	node, podSet string
}

type podUsage struct {
	node  string
	usage corev1.ResourceList
	// Pods of topology-aware workloads: the workload, whether the pod
	// counts on its own now, and its owner (workload.PodOwner): a pod
	// that carries the workload's label but is not its own (one an
	// earlier Job of the same name left running, orphaned) never counts
	// through the workload's reservation.
	workload types.NamespacedName
	counted  bool
	owner    types.UID
}

type admitted struct {
	wl    *strata.Workload
	usage []flavorUsage
	// hosts are the nodes of the workload's host-level assignments.
	hosts []string
	// version is the Workload's resourceVersion when its admission was
	// recorded, to tell newer events from stale ones.
	version int64
	// dispatch is the hub dispatch the workload belongs to
	// (workload.DispatchKey), "" when none; parts how many Workloads that
	// dispatch has here (workload.DispatchWorkloads).
	dispatch string
	parts    int
}

// flavorUsage is the usage of one pod set on a flavor's snapshot.
type flavorUsage struct {
	flavor string
	usage  tas.Usage
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		topologies:  map[string]*strata.Topology{},
		flavorDefs:  map[string]*strata.ResourceFlavor{},
		flavors:     map[string]*flavor{},
		nodes:       map[string]*corev1.Node{},
		pods:        map[types.UID]podUsage{},
		tasPods:     map[types.NamespacedName]map[types.UID]podUsage{},
		podWorkload: map[types.UID]types.NamespacedName{},
		workloads:   map[types.NamespacedName]admitted{},
		onNode:      map[string]map[types.NamespacedName]struct{}{},
		goneNodes:   map[string]map[string]string{},
		uncommitted: map[types.NamespacedName]struct{}{},
		deleted:     map[types.UID]time.Time{},
		released:    map[types.NamespacedName]int64{},
		finished:    map[types.NamespacedName]map[types.UID]finishedPod{},
		changed:     make(chan struct{}, 1),
	}
}

// Changed is signalled when capacity may have grown.
func (c *Cache) Changed() <-chan struct{} { return c.changed }

func (c *Cache) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
	c.touched()
}

// Subscribe returns a channel signalled (without blocking) on every change
// of capacity, grown or shrunk.
func (c *Cache) Subscribe() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{}, 1)
	c.subscribers = append(c.subscribers, ch)
	return ch
}

func (c *Cache) touched() {
	for _, ch := range c.subscribers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// SetTopology adds or updates a Topology.
func (c *Cache) SetTopology(t *strata.Topology) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topologies[t.Name] = t
	c.rebuildLocked()
}

// DeleteTopology removes a Topology.
func (c *Cache) DeleteTopology(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.topologies, name)
	c.rebuildLocked()
}

// SetFlavor adds or updates a ResourceFlavor.
func (c *Cache) SetFlavor(f *strata.ResourceFlavor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flavorDefs[f.Name] = f
	c.rebuildLocked()
}

// DeleteFlavor removes a ResourceFlavor.
func (c *Cache) DeleteFlavor(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flavorDefs, name)
	c.rebuildLocked()
}

// rebuildLocked recreates the snapshots after a flavor or topology change
// (rare), replaying nodes, pods and admitted workloads.
func (c *Cache) rebuildLocked() {
	c.flavors = map[string]*flavor{}
	for name, def := range c.flavorDefs {
		if def.Spec.TopologyName == nil {
			continue
		}
		t, ok := c.topologies[*def.Spec.TopologyName]
		if !ok {
			continue
		}
		levels := make([]string, len(t.Spec.Levels))
		for i, l := range t.Spec.Levels {
			levels[i] = l.NodeLabel
		}
		f := &flavor{def: def, topology: t, snapshot: tas.NewSnapshot(levels, def.Spec.NodeLabels), dispatches: map[string]int{}, parts: map[string]int{}}
		for _, n := range c.nodes {
			f.snapshot.SetNode(tas.NodeFromAPI(n, false))
		}
		for _, p := range c.pods {
			f.snapshot.AddUsage(p.node, p.usage, 1)
		}
		for _, pods := range c.tasPods {
			for _, p := range pods {
				if p.counted {
					f.snapshot.AddUsage(p.node, p.usage, 1)
				}
			}
		}
		c.flavors[name] = f
	}
	c.onNode = map[string]map[types.NamespacedName]struct{}{}
	for key, a := range c.workloads {
		_ = c.commitLocked(key, a.wl) // on error it is kept without usage, as when it was first added
	}
	c.pruneGoneLocked()
	c.signal()
}

// SetNode adds or updates a Node.
func (c *Cache) SetNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.nodes[n.Name]
	c.nodes[n.Name] = n
	delete(c.goneNodes, n.Name)
	if old != nil && !SchedulingChanged(old, n) {
		return // a heartbeat: nothing placement looks at changed
	}
	for _, f := range c.flavors {
		f.snapshot.SetNode(tas.NodeFromAPI(n, false))
	}
	if old == nil && c.rebuilt {
		c.retryUncommittedLocked()
	}
	c.signal()
}

// retryUncommittedLocked records the usage of workloads that could not be
// accounted before (their domains did not exist yet).
func (c *Cache) retryUncommittedLocked() {
	for _, key := range slices.Collect(maps.Keys(c.uncommitted)) {
		if a, ok := c.workloads[key]; ok {
			c.removeWorkloadLocked(key)
			_ = c.commitLocked(key, a.wl) // still missing: it stays in uncommitted
		} else {
			delete(c.uncommitted, key)
		}
	}
}

// WaitForSync blocks until every informer handler of SetupWithManager has
// delivered its initial objects, then rebuilds the snapshots once from the
// complete set — so that a workload admitted before a restart is accounted
// on the nodes of its domains, not on whichever arrived first. It returns
// false when ctx ends first. Callers that hand out or publish capacity wait
// for it.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	// Polled more often than client-go's WaitForCacheSync (100 ms): a
	// restarted agent admits that much sooner.
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.Synced(), nil
	})
	return err == nil
}

// Synced is WaitForSync without waiting: whether every informer handler
// has delivered its initial objects, the snapshots rebuilt once they
// have. A caller that takes capacity outside the scheduler (hot swap)
// retries later while it is false.
func (c *Cache) Synced() bool {
	c.mu.Lock()
	synced := slices.Clone(c.synced)
	c.mu.Unlock()
	for _, f := range synced {
		if !f() {
			return false
		}
	}
	c.syncOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.rebuildLocked()
		c.rebuilt = true
	})
	return true
}

// SchedulingChanged says whether a node update changes anything placement
// depends on: labels, allocatable, taints, schedulability or readiness.
// Heartbeats do not.
func SchedulingChanged(old, n *corev1.Node) bool {
	return !maps.Equal(old.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, n.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) ||
		old.Spec.Unschedulable != n.Spec.Unschedulable ||
		tas.NodeFromAPI(old, false).Ready != tas.NodeFromAPI(n, false).Ready
}

// DeleteNode removes a Node.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[name]; n != nil && len(c.onNode[name]) > 0 {
		c.goneNodes[name] = n.Labels
	}
	delete(c.nodes, name)
	for _, f := range c.flavors {
		f.snapshot.RemoveNode(name)
	}
	c.touched()
}

// SetPod records the usage of a pod that is bound and not terminated. A
// pod of a topology-aware workload counts through its workload while that
// holds an admission in the cache, and on its own otherwise. Anything else
// removes the pod's usage.
func (c *Cache) SetPod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	running := p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	if wl := p.Labels[strata.WorkloadLabel]; p.Labels[strata.TASLabel] != "" && wl != "" {
		key := types.NamespacedName{Namespace: p.Namespace, Name: wl}
		c.removePodLocked(p.UID)
		if running {
			c.setTASPodLocked(key, p)
		}
		if p.Status.Phase == corev1.PodSucceeded && p.Spec.NodeName != "" {
			c.noteFinishedLocked(key, p)
		}
		return
	}
	old, had := c.pods[p.UID]
	if had && running && old.node == p.Spec.NodeName {
		return // requests of a bound pod do not change
	}
	c.removePodLocked(p.UID)
	if running {
		u := podUsage{node: p.Spec.NodeName, usage: tas.WithPod(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))}
		c.pods[p.UID] = u
		c.addPodLocked(u, 1)
		c.touched()
	}
}

// setTASPodLocked records a running pod of a topology-aware workload,
// counting it now unless its workload holds an admission.
func (c *Cache) setTASPodLocked(key types.NamespacedName, p *corev1.Pod) {
	owner := workload.PodOwner(p)
	if old, ok := c.tasPods[key][p.UID]; ok && old.node == p.Spec.NodeName && old.owner == owner {
		return
	}
	c.removePodLocked(p.UID)
	u := podUsage{node: p.Spec.NodeName, usage: tas.WithPod(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})), workload: key, owner: owner}
	if c.tasPods[key] == nil {
		c.tasPods[key] = map[types.UID]podUsage{}
	}
	c.tasPods[key][p.UID] = u
	c.podWorkload[p.UID] = key
	c.countTASPodsLocked(key, u.node)
	c.touched()
}

// noteFinishedLocked records a succeeded pod of a topology-aware workload;
// when the workload already counts reclaimable pods (its status came
// first), its usage is recorded again, released on this pod's node too.
func (c *Cache) noteFinishedLocked(key types.NamespacedName, p *corev1.Pod) {
	if _, ok := c.finished[key][p.UID]; ok {
		return
	}
	if c.finished[key] == nil {
		c.finished[key] = map[types.UID]finishedPod{}
	}
	c.finished[key][p.UID] = finishedPod{node: p.Spec.NodeName, podSet: p.Labels[strata.PodSetLabel]}
	if a, ok := c.workloads[key]; ok && len(a.wl.Status.ReclaimablePods) > 0 {
		c.dropWorkloadLocked(key)
		_ = c.commitLocked(key, a.wl) // on error, kept without usage (uncommitted), as commitLocked says
		c.touched()
	}
}

// ForgetWorkload gives back a deleted workload's usage and forgets its
// finished pods.
func (c *Cache) ForgetWorkload(key types.NamespacedName, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.pruneGoneLocked()
	c.removeWorkloadLocked(key)
	delete(c.finished, key)
	delete(c.released, key)
	// A scheduling pass whose view was taken before this deletion still
	// lists the workload as admitted (EnsureAccounted): it must not
	// account it again, or its capacity stays taken with no event left
	// to give it back.
	now := time.Now()
	for u, at := range c.deleted {
		if now.Sub(at) > deletedMemory {
			delete(c.deleted, u)
		}
	}
	if uid != "" {
		c.deleted[uid] = now
	}
}

// deletedMemory is how long the cache remembers a deleted Workload's UID:
// well beyond one scheduling pass, whose view may predate the deletion.
const deletedMemory = time.Minute

// lessFinished returns a pod set's host-level assignment without up to n
// of its pods on the nodes where its pods succeeded: the pods
// status.reclaimablePods releases. Other assignments are returned as they
// are (a pod's node names no domain of theirs).
func (c *Cache) lessFinished(key types.NamespacedName, podSet string, a *tas.Assignment, n int32) *tas.Assignment {
	if n <= 0 || len(a.Levels) == 0 || a.Levels[len(a.Levels)-1] != strata.HostnameLabel || len(c.finished[key]) == 0 {
		return a
	}
	done := map[string]int32{}
	for _, f := range c.finished[key] {
		if f.podSet == podSet {
			done[f.node]++
		}
	}
	out := &tas.Assignment{Levels: a.Levels, Domains: make([]tas.DomainAssignment, 0, len(a.Domains))}
	for _, d := range a.Domains {
		host := d.Values[len(d.Values)-1]
		take := min(done[host], d.Count, n)
		done[host] -= take
		n -= take
		if d.Count > take {
			out.Domains = append(out.Domains, tas.DomainAssignment{Values: d.Values, Count: d.Count - take})
		}
	}
	return out
}

// removePodLocked forgets a pod, giving back what it counted on its own.
func (c *Cache) removePodLocked(uid types.UID) {
	if old, ok := c.pods[uid]; ok {
		c.addPodLocked(old, -1)
		delete(c.pods, uid)
		c.signal()
	}
	if key, ok := c.podWorkload[uid]; ok {
		old := c.tasPods[key][uid]
		if old.counted {
			c.addPodLocked(old, -1)
			c.signal()
		}
		delete(c.tasPods[key], uid)
		if len(c.tasPods[key]) == 0 {
			delete(c.tasPods, key)
		}
		delete(c.podWorkload, uid)
		c.countTASPodsLocked(key, old.node)
	}
}

// countTASPodsLocked decides which of a workload's running pods count on
// their own: on every node, those beyond the pods its admission holds
// there (all of them when it holds none) — pods of an earlier admission
// still running where the current one puts none, or more pods than it
// assigned. The others count through the workload. With node set, only
// that node's pods are decided (a pod event changes nothing elsewhere).
func (c *Cache) countTASPodsLocked(key types.NamespacedName, node string) {
	pods := c.tasPods[key]
	if len(pods) == 0 {
		return
	}
	if c.followPodsLocked(key) {
		node = "" // the reservation moved: decide every node's pods again
	}
	held := map[string]int64{}
	a, admitted := c.workloads[key]
	if admitted {
		for _, fu := range a.usage {
			for n, rl := range fu.usage {
				if node == "" || n == node {
					q := rl[corev1.ResourcePods]
					held[n] += q.MilliValue() / 1000
				}
			}
		}
	}
	uids := make([]types.UID, 0, len(pods))
	for uid, u := range pods {
		if node == "" || u.node == node {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	changed := false
	for _, uid := range uids {
		u := pods[uid]
		on := true
		if admitted && workload.Owns(a.wl, u.owner) {
			on = held[u.node] <= 0
			held[u.node]--
		}
		if u.counted == on {
			continue
		}
		u.counted = on
		if on {
			c.addPodLocked(u, 1)
		} else {
			c.addPodLocked(u, -1)
			changed = true
		}
		pods[uid] = u
	}
	if changed {
		c.signal()
	}
}

// followPodsLocked moves a workload's reservation to the nodes its pods
// run on, within their leaf domains, when the flavor's topology has no
// host level: the admission assigns pods to leaf domains (racks, say),
// Commit packs them onto nodes of its choosing, and kube-scheduler picks
// others in the same domain. Without the move, the pods on nodes the
// reservation missed would count on their own beside it: the domain would
// look fuller than it is for as long as the workload runs (Kueue counts
// such usage per leaf domain). A pod on a node outside every leaf domain
// of its reservation moves nothing and counts on its own. It returns
// whether anything moved.
func (c *Cache) followPodsLocked(key types.NamespacedName) bool {
	a, ok := c.workloads[key]
	// One pod set: its pods are all the workload's, and take one shape
	// (several pod sets' pods, of other shapes and maybe other flavors,
	// keep the reservation where Commit put it).
	if !ok || a.wl.Status.Admission == nil || len(a.wl.Status.Admission.PodSetAssignments) != 1 {
		return false
	}
	moved := false
	for _, fu := range a.usage {
		f := c.flavors[fu.flavor]
		if f == nil || f.topology == nil || f.def == nil || len(fu.usage) == 0 {
			continue
		}
		levels := f.topology.Spec.Levels
		if len(levels) == 0 || levels[len(levels)-1].NodeLabel == strata.HostnameLabel {
			continue
		}
		leafOf := func(node string) (string, bool) {
			n := c.nodes[node]
			if n == nil {
				return "", false
			}
			for k, v := range f.def.Spec.NodeLabels {
				if n.Labels[k] != v {
					return "", false // not the flavor's
				}
			}
			var b strings.Builder
			for _, l := range levels {
				v, ok := n.Labels[l.NodeLabel]
				if !ok {
					return "", false
				}
				b.WriteString(v)
				b.WriteByte(0)
			}
			return b.String(), true
		}
		reserved := map[string]int64{}
		for n, rl := range fu.usage {
			q := rl[corev1.ResourcePods]
			reserved[n] = q.MilliValue() / 1000
		}
		running := map[string]int64{}
		for _, u := range c.tasPods[key] {
			if workload.Owns(a.wl, u.owner) {
				running[u.node]++
			}
		}
		// Nodes with more pods than reservation, and nodes with more
		// reservation than pods, by leaf domain; in name order so that
		// the same state always moves the same way.
		over := map[string][]string{}
		spare := map[string][]string{}
		for _, n := range slices.Sorted(maps.Keys(running)) {
			if running[n] > reserved[n] {
				if leaf, ok := leafOf(n); ok {
					over[leaf] = append(over[leaf], n)
				}
			}
		}
		if len(over) == 0 {
			continue
		}
		for _, n := range slices.Sorted(maps.Keys(reserved)) {
			if reserved[n] > running[n] {
				if leaf, ok := leafOf(n); ok {
					spare[leaf] = append(spare[leaf], n)
				}
			}
		}
		for leaf, to := range over {
			from := spare[leaf]
			for _, x := range to {
				for len(from) > 0 && running[x] > reserved[x] {
					y := from[0]
					k := min(running[x]-reserved[x], reserved[y]-running[y])
					part := podsOf(fu.usage[y], reserved[y], k)
					f.snapshot.AddUsage(y, part, -1)
					f.snapshot.AddUsage(x, part, 1)
					fu.usage[y] = subtractList(fu.usage[y], part)
					fu.usage[x] = queue.AddLists(fu.usage[x], part)
					reserved[y] -= k
					reserved[x] += k
					if reserved[y] == 0 {
						delete(fu.usage, y)
					}
					if reserved[y] <= running[y] {
						from = from[1:]
					}
					moved = true
				}
			}
			spare[leaf] = from
		}
	}
	return moved
}

// podsOf is k pods' share of usage rl, which n pods take.
func podsOf(rl corev1.ResourceList, n, k int64) corev1.ResourceList {
	out := make(corev1.ResourceList, len(rl))
	for name, q := range rl {
		out[name] = *resource.NewMilliQuantity(q.MilliValue()*k/n, q.Format)
	}
	return out
}

// subtractList is a - b.
func subtractList(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	for name, q := range b {
		diff := out[name]
		diff.Sub(q)
		out[name] = diff
	}
	return out
}

// DeletePod removes a pod's usage.
func (c *Cache) DeletePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(uid)
}

func (c *Cache) addPodLocked(u podUsage, sign int64) {
	for _, f := range c.flavors {
		f.snapshot.AddUsage(u.node, u.usage, sign)
	}
}

// Captured is a flavor's capacity for its summary and what it accounts
// for, taken in one step (Cache.Capture).
type Captured struct {
	Capacity *tas.Capacity
	// Dispatches are the hub dispatches the capacity accounts for: those
	// of the workloads whose usage it counts, unsorted and without
	// duplicates.
	Dispatches []string
	// Usage is, per ClusterQueue, the quota its workloads whose usage the
	// capacity counts hold on the flavor (quotaOn).
	Usage map[string]corev1.ResourceList
}

// Capture copies a flavor's capacity for its summary (tas.Snapshot.Capture)
// with the hub dispatches and the queues' quota it accounts for. All are
// taken in one step, so the list and the quota match the capacity
// exactly. With victims, the capacity also says what preempting their
// workloads would free (tas.CapturePreemptible): each Within queue's
// workloads up to a priority, and each Reclaimed queue's, taken back
// while it borrows (what it borrows counted from the workloads admitted
// here). It returns false when the flavor is unknown or not
// topology-aware.
func (c *Cache) Capture(name string, victims *preemption.Victims) (Captured, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flavors[name]
	if !ok {
		return Captured{}, false
	}
	out := Captured{Dispatches: make([]string, 0, len(f.dispatches)), Usage: map[string]corev1.ResourceList{}}
	for k, n := range f.dispatches {
		// A dispatch of several Workloads (a LeaderWorkerSet's groups)
		// counts once all of them do: the hub's reservation covers them all.
		if n >= f.parts[k] {
			out.Dispatches = append(out.Dispatches, k)
		}
	}
	var held []tas.Held
	var v tas.Victims
	admitted := c.admittedOn(name)
	for _, a := range admitted {
		if adm := a.Workload.Status.Admission; adm != nil {
			queue.AddRequests(out.Usage, adm.ClusterQueue, quotaOn(a.Workload, name))
		}
	}
	for q, rl := range c.holds[name] {
		queue.AddRequests(out.Usage, q, rl)
	}
	if victims != nil && !victims.Empty() {
		for _, a := range admitted {
			adm := a.Workload.Status.Admission
			if adm == nil {
				continue
			}
			q := adm.ClusterQueue
			if _, reclaimed := victims.Reclaimed[q]; !victims.Within[q] && !reclaimed {
				continue
			}
			h := tas.Held{Queue: q, Priority: queue.Priority(a.Workload), Usage: a.Usage, Requests: quotaOn(a.Workload, name),
				Key: a.Workload.Namespace + "/" + a.Workload.Name}
			h.AdmittedAt = workload.ReservedAt(a.Workload)
			held = append(held, h)
		}
		v = tas.Victims{Within: victims.Within, Borrowed: map[string]corev1.ResourceList{}}
		for q, cq := range victims.Reclaimed {
			if b := preemption.Borrowed(cq, name, out.Usage[q]); len(b) > 0 {
				v.Borrowed[q] = b
			}
		}
	}
	// Every pod admitted on the flavor gets its tolerations: taints they
	// tolerate keep no pod of the flavor away.
	out.Capacity = f.snapshot.CapturePreemptible(f.def.Spec.Tolerations, held, v)
	return out, true
}

// SetPreemptionHolds records the quota the scheduler holds for its
// preemptors, by flavor and ClusterQueue, in place of what it recorded
// before. A change signals the cache's subscribers (the summary says it).
func (c *Cache) SetPreemptionHolds(holds map[string]map[string]corev1.ResourceList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if equality.Semantic.DeepEqual(c.holds, holds) || len(c.holds) == 0 && len(holds) == 0 {
		return
	}
	c.holds = holds
	c.touched()
}

// quotaOn is the quota an admitted workload holds on a flavor: its pod
// sets admitted there, less their reclaimable pods, as the scheduler's
// books charge it.
func quotaOn(wl *strata.Workload, flavor string) corev1.ResourceList {
	usage := map[string]corev1.ResourceList{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Flavor == flavor {
			queue.AddRequests(usage, flavor, queue.LessReclaimable(psa, workload.Reclaimable(wl, psa.Name)))
		}
	}
	return usage[flavor]
}

// Flavor gives fn exclusive access to a flavor's snapshot and topology.
// It returns false when the flavor is unknown or not topology-aware.
func (c *Cache) Flavor(name string, fn func(s *tas.Snapshot, t *strata.Topology)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flavors[name]
	if ok {
		fn(f.snapshot, f.topology)
	}
	return ok
}

// FlavorDef returns a ResourceFlavor known to the cache.
func (c *Cache) FlavorDef(name string) (*strata.ResourceFlavor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flavorDefs[name]
	return f, ok
}

// TASFlavors lists the topology-aware flavors, sorted.
func (c *Cache) TASFlavors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.flavors))
	for n := range c.flavors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// AddWorkload records the usage of an admitted workload, replacing what was
// recorded for it. With no admission it removes the workload's usage. A
// workload whose flavor is not known yet is kept and accounted as soon as
// the flavor appears.
func (c *Cache) AddWorkload(key types.NamespacedName, wl *strata.Workload) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.pruneGoneLocked()
	c.removeWorkloadLocked(key)
	if wl == nil || wl.Status.Admission == nil {
		return nil
	}
	err := c.commitLocked(key, wl)
	c.touched()
	return err
}

// EnsureAccounted records every admitted workload of the list that the
// cache does not hold yet (the scheduler calls it before each pass, so that
// no capacity is handed out twice after a restart, whatever order the
// informers delivered their objects in).
//
// A workload the informer showed deleted meanwhile is not recorded again:
// the list may come from before the deletion.
func (c *Cache) EnsureAccounted(wls []*strata.Workload) error {
	var errs []error
	for _, wl := range wls {
		key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
		if err := c.ensureAccounted(key, wl); err != nil {
			errs = append(errs, fmt.Errorf("workload %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Cache) ensureAccounted(key types.NamespacedName, wl *strata.Workload) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.workloads[key]; ok {
		return nil
	}
	if _, gone := c.deleted[wl.UID]; gone && wl.UID != "" {
		return nil
	}
	if v, ok := c.released[key]; ok && Version(wl) < v {
		return nil // an admission the informer has shown taken back since
	}
	delete(c.released, key)
	defer c.pruneGoneLocked()
	c.removeWorkloadLocked(key)
	if wl.Status.Admission == nil {
		return nil
	}
	err := c.commitLocked(key, wl)
	c.touched()
	return err
}

// commitLocked records an admitted workload: its hosts in the node index
// and, all or nothing, the usage of its pod sets on the snapshots of known
// flavors. On error the workload is recorded without usage.
func (c *Cache) commitLocked(key types.NamespacedName, wl *strata.Workload) error {
	return c.commitFitLocked(key, wl, false)
}

// commitFitLocked is commitLocked; with fit, a placement that does not fit
// in the free capacity is an error (see tas.Snapshot.CommitIfFree).
func (c *Cache) commitFitLocked(key types.NamespacedName, wl *strata.Workload, fit bool) error {
	a := admitted{wl: wl.DeepCopy(), version: Version(wl)}
	delete(c.uncommitted, key)
	defer func() {
		c.workloads[key] = a
		c.countTASPodsLocked(key, "")
		for _, h := range a.hosts {
			if c.onNode[h] == nil {
				c.onNode[h] = map[types.NamespacedName]struct{}{}
			}
			c.onNode[h][key] = struct{}{}
		}
	}()
	type part struct {
		flavor     string
		podSet     *strata.PodSet
		assignment *tas.Assignment
	}
	var parts []part
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment == nil {
			continue
		}
		ps := workload.PodSet(wl, psa.Name)
		if ps == nil {
			return fmt.Errorf("admission names pod set %q, which the workload does not have", psa.Name)
		}
		assignment, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			return fmt.Errorf("pod set %s: %w", psa.Name, err)
		}
		if n := len(assignment.Levels); n > 0 && assignment.Levels[n-1] == strata.HostnameLabel {
			for _, d := range assignment.Domains {
				a.hosts = append(a.hosts, d.Values[n-1])
			}
		}
		if c.flavors[psa.Flavor] != nil {
			assignment = c.lessFinished(key, psa.Name, assignment, workload.Reclaimable(wl, psa.Name))
			parts = append(parts, part{flavor: psa.Flavor, podSet: ps, assignment: assignment})
		}
	}
	for _, p := range parts {
		commit := c.flavors[p.flavor].snapshot.Commit
		if fit {
			commit = c.flavors[p.flavor].snapshot.CommitIfFree
		}
		u, err := commit(p.assignment, podRequests(p.podSet))
		if err != nil {
			c.releaseLocked(a.usage)
			a.usage = nil
			c.uncommitted[key] = struct{}{}
			return fmt.Errorf("pod set %s: %w", p.podSet.Name, err)
		}
		a.usage = append(a.usage, flavorUsage{flavor: p.flavor, usage: u})
	}
	a.dispatch, a.parts = workload.DispatchKey(wl), workload.DispatchWorkloads(wl)
	c.countDispatchLocked(&a, 1)
	return nil
}

// countDispatchLocked adds (sign 1) or takes back (-1) a workload's
// dispatch on every flavor its usage is on.
func (c *Cache) countDispatchLocked(a *admitted, sign int) {
	if a.dispatch == "" {
		return
	}
	for i, u := range a.usage {
		if slices.ContainsFunc(a.usage[:i], func(p flavorUsage) bool { return p.flavor == u.flavor }) {
			continue // another pod set on the same flavor
		}
		f := c.flavors[u.flavor]
		if f == nil {
			continue
		}
		if f.dispatches[a.dispatch] += sign; f.dispatches[a.dispatch] <= 0 {
			delete(f.dispatches, a.dispatch)
			delete(f.parts, a.dispatch)
		} else if sign > 0 {
			f.parts[a.dispatch] = a.parts
		}
	}
}

// Reserve gives decide exclusive access to a flavor's snapshot and
// topology and, when decide returns a workload (carrying its new
// admission), records that workload's usage in place of what the cache held
// for key before letting go of its lock: no one can take the capacity
// decide found in between. The new usage must fit in the free capacity; if
// it does not, the cache keeps what it held for key and returns the
// *tas.FitError. It returns false when the flavor is not known.
func (c *Cache) Reserve(flavor string, key types.NamespacedName, decide func(s *tas.Snapshot, t *strata.Topology) (*strata.Workload, error)) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flavors[flavor]
	if !ok {
		return false, nil
	}
	wl, err := decide(f.snapshot, f.topology)
	if err != nil || wl == nil {
		return true, err
	}
	return true, c.replaceLocked(key, wl)
}

// ReserveFlavors is Reserve over several flavors at once, for a workload
// whose pod sets go on different flavors: decide sees the snapshot and
// Topology of each flavor named (nil for a flavor the cache does not
// have), and the workload it returns is recorded, on the flavors its pod
// set assignments name, before the lock is let go.
func (c *Cache) ReserveFlavors(flavors []string, key types.NamespacedName, decide func(snaps []*tas.Snapshot, topos []*strata.Topology) (*strata.Workload, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	snaps, topos := make([]*tas.Snapshot, len(flavors)), make([]*strata.Topology, len(flavors))
	for i, name := range flavors {
		if f, ok := c.flavors[name]; ok {
			snaps[i], topos[i] = f.snapshot, f.topology
		}
	}
	wl, err := decide(snaps, topos)
	if err != nil || wl == nil {
		return err
	}
	return c.replaceLocked(key, wl)
}

// replaceLocked records wl's new admission in place of what the cache held
// for key; when it does not fit, what was held stays and the error says why.
func (c *Cache) replaceLocked(key types.NamespacedName, wl *strata.Workload) error {
	// The new admission replaces the old one in one step: the workload's
	// running pods (on nodes both admissions hold) stay the workload's and
	// do not count on their own in between.
	old, had := c.workloads[key]
	c.dropWorkloadLocked(key)
	if err := c.commitFitLocked(key, wl, true); err != nil {
		c.dropWorkloadLocked(key)
		if had {
			_ = c.commitLocked(key, old.wl) // as it was; on error, kept without usage as before
		} else {
			c.countTASPodsLocked(key, "")
		}
		return err
	}
	c.touched()
	return nil
}

// releaseLocked gives usage back to the flavors' snapshots.
func (c *Cache) releaseLocked(usage []flavorUsage) {
	for _, u := range usage {
		if f := c.flavors[u.flavor]; f != nil {
			f.snapshot.Release(u.usage)
		}
	}
}

// RemoveWorkloadIfNewer gives back a workload's usage when wl, which no
// longer has an admission, is newer than the admitted version recorded:
// informer events can lag the scheduler's own admission.
func (c *Cache) RemoveWorkloadIfNewer(key types.NamespacedName, wl *strata.Workload) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.pruneGoneLocked()
	if a, ok := c.workloads[key]; ok && Version(wl) > a.version {
		c.removeWorkloadLocked(key)
		if v := Version(wl); v != math.MaxInt64 {
			c.released[key] = v
		}
	}
}

// Version parses a Workload's resourceVersion; the API server's are etcd
// revisions, increasing with every write. Unparsable ones count as newest
// (math.MaxInt64).
func Version(wl *strata.Workload) int64 {
	v, err := strconv.ParseInt(wl.ResourceVersion, 10, 64)
	if err != nil {
		return math.MaxInt64
	}
	return v
}

// RemoveWorkload gives back an admitted workload's usage.
func (c *Cache) RemoveWorkload(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.pruneGoneLocked()
	c.removeWorkloadLocked(key)
}

func (c *Cache) removeWorkloadLocked(key types.NamespacedName) {
	if c.dropWorkloadLocked(key) {
		c.countTASPodsLocked(key, "")
	}
}

// dropWorkloadLocked forgets an admitted workload's usage without making
// its running pods count on their own: for a caller that records a new
// admission of the same workload at once, under the same lock (the pods
// stay the workload's). It says whether there was anything to drop.
func (c *Cache) dropWorkloadLocked(key types.NamespacedName) bool {
	a, ok := c.workloads[key]
	if !ok {
		return false
	}
	c.countDispatchLocked(&a, -1)
	c.releaseLocked(a.usage)
	delete(c.workloads, key)
	for _, h := range a.hosts {
		delete(c.onNode[h], key)
		if len(c.onNode[h]) == 0 {
			delete(c.onNode, h)
		}
	}
	delete(c.uncommitted, key)
	c.signal()
	return true
}

// pruneGoneLocked forgets the labels of deleted nodes that no admitted
// workload is assigned to any more. It runs once a change is settled, not
// in dropWorkloadLocked: a workload dropped and recorded again (a finished
// pod, a replacement reserved whose write then failed and is restored)
// still needs its deleted node's domain for hot swap.
func (c *Cache) pruneGoneLocked() {
	for name := range c.goneNodes {
		if len(c.onNode[name]) == 0 {
			delete(c.goneNodes, name)
		}
	}
}

// WorkloadsOnNode returns the admitted workloads with pods assigned to the
// node by a host-level topology assignment.
func (c *Cache) WorkloadsOnNode(name string) []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(c.onNode[name]))
	for key := range c.onNode[name] {
		out = append(out, key)
	}
	return out
}

// DeletedNodeLabels returns the labels a deleted node had, as long as
// admitted workloads are assigned to it; nil otherwise.
func (c *Cache) DeletedNodeLabels(name string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneNodes[name]
}

// SyncAdmitted records an admitted workload as the informer shows it: when
// the cache does not hold it, or holds an older version with another
// admission (hot swap or an admission written by another replica, or a
// local change rolled back after a write whose outcome was unknown). A
// newer version with the same admission only moves the recorded version,
// and the workload's dispatch when its labels gained one.
func (c *Cache) SyncAdmitted(key types.NamespacedName, wl *strata.Workload) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.pruneGoneLocked()
	if a, ok := c.workloads[key]; ok {
		v := Version(wl)
		if v <= a.version {
			return nil
		}
		if equality.Semantic.DeepEqual(a.wl.Status.Admission, wl.Status.Admission) &&
			equality.Semantic.DeepEqual(a.wl.Status.ReclaimablePods, wl.Status.ReclaimablePods) {
			a.version = v
			if d := workload.DispatchKey(wl); d != a.dispatch {
				c.countDispatchLocked(&a, -1)
				a.wl, a.dispatch, a.parts = wl.DeepCopy(), d, workload.DispatchWorkloads(wl)
				c.countDispatchLocked(&a, 1)
				c.touched()
			}
			c.workloads[key] = a
			return nil
		}
	}
	c.removeWorkloadLocked(key)
	err := c.commitLocked(key, wl)
	c.touched()
	return err
}

// AdmittedVersion is the version of the admitted workload the cache holds
// (its resourceVersion as a number, Version), and whether it holds one.
// A read older than it is behind the cache: acting on it would undo what
// was written since.
func (c *Cache) AdmittedVersion(key types.NamespacedName) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.workloads[key]
	return a.version, ok
}

// HasWorkload says whether the cache holds a workload's usage.
func (c *Cache) HasWorkload(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.workloads[key]
	return ok
}

func podRequests(ps *strata.PodSet) corev1.ResourceList {
	return workload.TemplateRequests(&ps.Template.Spec)
}

// OutcomeKnown says whether a failed write was certainly not applied: the
// server answered with a refusal (conflict, not found, invalid, forbidden,
// ...). After a timeout, a server error or a lost connection the write may
// have been applied: capacity it took must then stay taken until a fresh
// read or the informer settles it.
func OutcomeKnown(err error) bool {
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err),
		apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsGone(err), apierrors.IsAlreadyExists(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err):
		return true
	}
	return false
}

// AdmittedOn is an admitted workload with usage on a flavor, and that
// usage (all its pod sets' on the flavor).
type AdmittedOn struct {
	Workload *strata.Workload
	Usage    tas.Usage
}

// WithAdmitted gives fn exclusive access to a flavor's snapshot and
// topology and the admitted workloads with usage on it, for a preemption
// search; fn must leave the snapshot as it found it. It returns false when
// the flavor is not known.
func (c *Cache) WithAdmitted(flavor string, fn func(s *tas.Snapshot, t *strata.Topology, admitted []AdmittedOn)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flavors[flavor]
	if !ok {
		return false
	}
	fn(f.snapshot, f.topology, c.admittedOn(flavor))
	return true
}

// admittedOn returns the admitted workloads with usage on a flavor, each
// with its usage there merged; c.mu is held.
func (c *Cache) admittedOn(flavor string) []AdmittedOn {
	var out []AdmittedOn
	for _, a := range c.workloads {
		var merged tas.Usage
		for _, u := range a.usage {
			if u.flavor != flavor {
				continue
			}
			if merged == nil {
				merged = tas.Usage{}
			}
			for node, rl := range u.usage {
				sum := merged[node].DeepCopy()
				if sum == nil {
					sum = corev1.ResourceList{}
				}
				for r, q := range rl {
					v := sum[r]
					v.Add(q)
					sum[r] = v
				}
				merged[node] = sum
			}
		}
		if merged == nil && delayedOn(a.wl, flavor) {
			// Its quota is reserved there while its topology waits for
			// its ProvisioningRequest check (KEP-2724): it counts in its
			// queue's usage and may be preempted, holding no node.
			merged = tas.Usage{}
		}
		if merged != nil {
			out = append(out, AdmittedOn{Workload: a.wl, Usage: merged})
		}
	}
	return out
}

// delayedOn says whether wl holds quota on flavor for a pod set whose
// topology assignment is delayed.
func delayedOn(wl *strata.Workload, flavor string) bool {
	if wl.Status.Admission == nil {
		return false
	}
	for _, name := range workload.DelayedPodSets(wl) {
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if psa.Name == name && psa.Flavor == flavor {
				return true
			}
		}
	}
	return false
}

// AdmittedOnFlavor returns the admitted workloads with a pod set on a
// flavor, without their usage: the candidates of a search on quota alone.
func (c *Cache) AdmittedOnFlavor(flavor string) []*strata.Workload {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*strata.Workload
	for _, a := range c.workloads {
		if adm := a.wl.Status.Admission; adm != nil && slices.ContainsFunc(adm.PodSetAssignments, func(psa strata.PodSetAssignment) bool { return psa.Flavor == flavor }) {
			out = append(out, a.wl)
		}
	}
	return out
}

// AdmittedIn returns the admitted workloads of a namespace whose usage the
// cache holds (those admitted in the current pass included), for topology
// spreading's counts.
func (c *Cache) AdmittedIn(namespace string) []*strata.Workload {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*strata.Workload
	for key, a := range c.workloads {
		if key.Namespace == namespace {
			out = append(out, a.wl)
		}
	}
	return out
}

// HoldingPods says whether a workload is admitted, which pods of it the
// cache counts (on any node), and which of those run on a node placement
// may use (holding: Holds' pods).
func (c *Cache) HoldingPods(key types.NamespacedName) (admitted bool, pods, holding []types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, admitted = c.workloads[key]
	for uid, u := range c.tasPods[key] {
		pods = append(pods, uid)
		if n := c.nodes[u.node]; n != nil && tas.NodeFromAPI(n, false).Ready {
			holding = append(holding, uid)
		}
	}
	return admitted, pods, holding
}

// AdmittedUID returns the UID of the workload admitted under key; "" when
// none is.
func (c *Cache) AdmittedUID(key types.NamespacedName) types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.workloads[key]; ok && a.wl != nil {
		return a.wl.UID
	}
	return ""
}

// Holds says whether a workload still holds capacity: it is admitted, or
// pods of it still run on a node placement may use (a preempted or
// evicted workload until its pods are gone). Pods on a node that is not
// Ready, or no longer exists, hold nothing a preemptor could be placed
// on: the snapshots leave such nodes out. A victim's pods stuck
// Terminating on an unreachable node (which only a force deletion, or
// the node's deletion, removes) do not keep its preemptor waiting; as
// Kueue, which counts a stopped job's quota free once no pod of it is
// active.
func (c *Cache) Holds(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.workloads[key]; ok {
		return true
	}
	for _, u := range c.tasPods[key] {
		if n := c.nodes[u.node]; n != nil && tas.NodeFromAPI(n, false).Ready {
			return true
		}
	}
	return false
}
