package dispatch

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// targetSource is what the dispatcher asks of the fleet (*fleet.Fleet):
// the workers' targets, held while a pass decides, the topology hints of
// its dispatches, and what the hub knows of each worker's kinds and
// queues.
type targetSource interface {
	WithTargets(ctx context.Context, workers []fleet.Worker, now time.Time, staleAfter time.Duration, fn func([]*placement.Target) error) error
	Release(worker, flavor, key string)
	SetHint(key string, assignments []*tas.Assignment)
	NoteDispatched(key string)
	PruneHints(live func(key string) bool)
	Serves(worker string, k jobs.Kind) (served, known bool)
	QueueRefusal(worker string, t fleet.QueueTarget) (reason, message string, known bool)
	LandingQueue(worker string, t fleet.QueueTarget) (cq *strata.ClusterQueue, ok bool)
	WorkerBooks(worker string) (*queue.Books, bool)
}

// newPassView is a pass's view before it sees the workers.
func newPassView() *passView {
	return &passView{clusterLabels: map[string]labels.Set{}, queueOf: map[string]workerQueue{}, refusals: map[string]queueRefusal{},
		waits: map[waitKey]waitOutcome{}, quota: map[quotaKey]quotaOutcome{},
		landing: map[string]*strata.ClusterQueue{}, workerBooks: map[string]*queue.Books{}}
}

// seeWorkers lists the WorkerClusters: the workers whose targets a pass
// holds, and what the pass knows of them besides their targets.
func (d *Dispatcher) seeWorkers(ctx context.Context) ([]fleet.Worker, *passView, error) {
	var wcs strata.WorkerClusterList
	if err := d.client.List(ctx, &wcs); err != nil {
		return nil, nil, err
	}
	workers := make([]fleet.Worker, 0, len(wcs.Items))
	view := newPassView()
	for i := range wcs.Items {
		wc := &wcs.Items[i]
		w := fleet.Worker{Name: wc.Name, Cordoned: wc.Spec.Unschedulable, Deleting: !wc.DeletionTimestamp.IsZero()}
		if c := meta.FindStatusCondition(wc.Status.Conditions, strata.WorkerClusterConnected); c == nil || c.Status != metav1.ConditionTrue {
			w.NotConnected = "not connected"
			if c != nil {
				w.NotConnected = c.Reason + ": " + c.Message
			}
		}
		workers = append(workers, w)
		view.clusterLabels[wc.Name] = labels.Set(wc.Labels)
		wq := workerQueue{localQueue: wc.Spec.LocalQueueName}
		if wc.Spec.Onboarding != nil {
			wq.onboarding = wc.Spec.Onboarding.ClusterQueue
		}
		view.queueOf[wc.Name] = wq
	}
	return workers, view, nil
}

// rebuild reserves the dispatches recorded on hub Workloads on each
// target first seen available. It takes nothing for those its summary
// counts: after a restart the hub holds what it held before. A
// dispatch the summary counts whose placement no longer fits the summary's
// free capacity is not held (it needs its capacity only if the worker
// gives its admission back).
func (d *Dispatcher) rebuild(ctx context.Context, targets []*placement.Target, records func() []*strata.Workload) {
	var placed []*strata.Workload // read once, when a target is first seen
	read := false
	// Forget targets that are gone (a worker removed, a flavor's summary
	// replaced by a new target): a target seen again is rebuilt, and
	// Holds keeps that from reserving anything twice.
	current := make(map[*placement.Target]bool, len(targets))
	for _, t := range targets {
		current[t] = true
	}
	for t := range d.rebuilt {
		if !current[t] {
			delete(d.rebuilt, t)
		}
	}
	for _, t := range targets {
		if d.rebuilt[t] || t.Unavailable != "" {
			// An unavailable target gets no new work; its dispatches are
			// reserved again when it is available (Decide skips it now).
			continue
		}
		d.rebuilt[t] = true
		if !read {
			placed, read = records(), true
		}
		for _, wl := range placed {
			cluster, flavor, gen, _ := Placed(wl)
			key := Key(wl.UID, gen)
			// A split dispatch is reserved on each of its flavors with
			// the pod sets placed there.
			split, on := podSetsOn(wl, t.Flavor)
			if cluster != t.Cluster || !on && flavor != t.Flavor || split && !on || t.HasReservation(key) {
				continue
			}
			if p := wl.Status.Placement; p.PreemptUpTo != nil && t.Flavor == flavor && !t.SummaryCounts(key) {
				// A preemption in flight: it takes no capacity, and no
				// other preemptor counts on its victims. (A split's other
				// pod sets take theirs on their own flavors.)
				t.ReservePreemption(key)
				continue
			}
			// Where the record says the hub planned it (what its copy's
			// hint carries, and so where the agent places it); decided
			// again only without a record that still fits the summary.
			assignments := reserveRecorded(t, wl, key)
			if assignments == nil {
				as := placedAs(wl)
				if split {
					as = workload.WithPodSets(as, podSetIndices(wl, t.Flavor))
				}
				dec := d.policy.Decide(as, []string{t.Flavor}, []*placement.Target{t})
				if dec.Cluster == "" {
					continue
				}
				if err := dec.Reserve(targets, key); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "Rebuilding a reservation", "workload", client.ObjectKeyFromObject(wl))
					continue
				}
				assignments = dec.Assignments()
			}
			if split {
				// The hint names every pod set: a split's is the record's
				// (its copy, if not created yet, goes without when the
				// record has none).
				assignments = recordedHints(wl)
			}
			if t.TakesCapacity(key) && assignments != nil {
				// Not in the summary yet: maybe its copy is not created
				// either (the copies controller forgets the hint when it
				// sees the copy).
				d.fleet.SetHint(key, assignments)
			}
		}
	}
}

// reserveRecorded reserves a dispatch on t where its record says the hub
// planned it (status.placement.topologyHint, per pod set at the summary's
// leaf level) and returns those assignments; nil, reserving nothing, when
// the record has no hint for every pod set or it no longer fits the
// summary (a domain gone).
func reserveRecorded(t *placement.Target, wl *strata.Workload, key string) []*tas.Assignment {
	p := wl.Status.Placement
	if p == nil || p.TopologyHint == "" {
		return nil
	}
	hints, err := workload.DecodeHints(p.TopologyHint)
	if err != nil {
		return nil
	}
	var assignments []*tas.Assignment
	var requests []corev1.ResourceList
	split, _ := podSetsOn(wl, t.Flavor)
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		if split && podSetFlavor(wl, ps.Name) != t.Flavor {
			continue // reserved on its own flavor's target
		}
		a := hints[ps.Name]
		if a == nil {
			return nil
		}
		req := workload.Request(ps)
		// As a decision notes them: packing onto the summary's nodes
		// keeps to those the pods may use.
		a.Tolerations, a.NodeSelector, a.NodeAffinity = req.Tolerations, req.NodeSelector, req.NodeAffinity
		assignments, requests = append(assignments, a), append(requests, req.PodRequests)
	}
	if err := t.Reserve(key, assignments, requests); err != nil {
		return nil
	}
	return assignments
}

// recordedHints are the assignments of every pod set of wl where its
// record says the hub planned them (status.placement.topologyHint), in
// spec order; nil when the record has no hint for every pod set.
func recordedHints(wl *strata.Workload) []*tas.Assignment {
	p := wl.Status.Placement
	if p == nil || p.TopologyHint == "" {
		return nil
	}
	hints, err := workload.DecodeHints(p.TopologyHint)
	if err != nil {
		return nil
	}
	out := make([]*tas.Assignment, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		if out[i] = hints[wl.Spec.PodSets[i].Name]; out[i] == nil {
			return nil
		}
	}
	return out
}

// podSetsOn says whether the hub placed wl's pod sets on different
// flavors (status.placement.podSetFlavors), and if so, whether any is on
// flavor.
func podSetsOn(wl *strata.Workload, flavor string) (split, on bool) {
	p := wl.Status.Placement
	if p == nil || len(p.PodSetFlavors) == 0 {
		return false, false
	}
	for _, f := range p.PodSetFlavors {
		if f.Flavor == flavor {
			return true, true
		}
	}
	return true, false
}

// podSetFlavor is the flavor a split placement put pod set name on.
func podSetFlavor(wl *strata.Workload, name string) string {
	for _, f := range wl.Status.Placement.PodSetFlavors {
		if f.Name == name {
			return f.Flavor
		}
	}
	return wl.Status.Placement.Flavor
}

// podSetIndices are the indices of wl's pod sets a split placement put on
// flavor.
func podSetIndices(wl *strata.Workload, flavor string) []int {
	var out []int
	for i := range wl.Spec.PodSets {
		if podSetFlavor(wl, wl.Spec.PodSets[i].Name) == flavor {
			out = append(out, i)
		}
	}
	return out
}

// countReservations counts the reservations held on targets.
func countReservations(targets []*placement.Target) int {
	n := 0
	for _, t := range targets {
		n += t.Reservations()
	}
	return n
}

// pruneHints drops the topology hints of dispatches that are no longer
// current: of Workloads gone or dispatched again.
func (d *Dispatcher) pruneHints(entries []*entry) {
	current := make(map[string]bool)
	for _, e := range entries {
		if e.placed {
			current[Key(e.uid, e.generation)] = true
		}
	}
	d.mu.Lock()
	for uid, r := range d.recorded {
		current[Key(uid, r.generation)] = true // written, not shown yet
	}
	d.mu.Unlock()
	d.fleet.PruneHints(func(key string) bool { return current[key] })
}

// placedAs is wl with the pods it is placed or admitted with
// (queue.ChargedCount: fewer than it asks for after a partial admission),
// wl itself when all.
func placedAs(wl *strata.Workload) *strata.Workload {
	counts := make([]int32, len(wl.Spec.PodSets))
	fewer := false
	for i := range wl.Spec.PodSets {
		counts[i] = queue.ChargedCount(wl, i)
		fewer = fewer || counts[i] != wl.Spec.PodSets[i].Count
	}
	if !fewer {
		return wl
	}
	return workload.WithCounts(wl, counts)
}
