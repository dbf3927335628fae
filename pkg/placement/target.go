package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
)

// Target is the hub's view of one flavor on one worker cluster: the
// latest capacity summary, the workloads dispatched there that the summary
// does not reflect yet (in-flight reservations), and whether the cluster
// takes new work at all. A Target is not safe for concurrent use.
type Target struct {
	Cluster string
	Flavor  string
	// Unavailable, when set, says why the cluster gets no new work on this
	// flavor ("summary stale", "cordoned", "unreachable: ..."); the target
	// is then no candidate and its reason says so.
	Unavailable string
	// Topology names the flavor's Topology on the cluster, for messages;
	// optional.
	Topology string

	generation int64
	levels     []string
	// free is the summary's snapshot with the reservations committed;
	// empty the flavor's nodes with nothing running (built on first use).
	free, empty  *tas.Snapshot
	summary      *strata.CapacitySummaryStatus
	reservations map[string]*reservation
	// reflected are the dispatches the summary's free capacity counts.
	reflected map[string]bool
	// version changes with every reservation made or ended, so that
	// memoized answers on the old state are not reused; it is unique
	// across targets (bump), so that a target made anew for the same
	// cluster and flavor never meets an answer memoized for the old one.
	version uint64
	// emptyVersion names the summary the empty snapshot is built from,
	// unique across targets as version is: a summary made anew restarts
	// its generations at 1, and an answer memoized for the old one's
	// generation 1 must not be reused.
	emptyVersion uint64
	// invalid says why the summary of generation invalidGen could not be
	// read; the target keeps its last good view, if any, and must get no
	// new work until a newer summary reads.
	invalid    string
	invalidGen int64
	// preempted are the snapshots of sets of preemptible entries, by
	// their positions, for version preemptedVersion.
	preempted        map[string]*tas.Snapshot
	preemptedVersion uint64
}

type reservation struct {
	key         string
	seq         uint64
	assignments []*tas.Assignment
	requests    []corev1.ResourceList
	usage       []*tas.Dispatched
	// preempt: a preemption in flight, taking no capacity.
	preempt bool
}

// NewTarget returns the view of a flavor on a cluster from its summary.
func NewTarget(cluster, flavor string, st *strata.CapacitySummaryStatus) (*Target, error) {
	t := NewPendingTarget(cluster, flavor)
	if err := t.SetSummary(st); err != nil {
		return nil, err
	}
	return t, nil
}

// NewPendingTarget returns the view of a flavor on a cluster before any
// summary was read: no snapshot, and Loaded false until SetSummary
// succeeds. Such a target must be Unavailable.
func NewPendingTarget(cluster, flavor string) *Target {
	return &Target{Cluster: cluster, Flavor: flavor, generation: -1, reservations: map[string]*reservation{}}
}

// Loaded says whether a summary was read: the target has a snapshot.
func (t *Target) Loaded() bool { return t.free != nil }

// Invalid says why the last summary given to SetSummary could not be read
// ("" when it could), and that summary's generation.
func (t *Target) Invalid() (string, int64) { return t.invalid, t.invalidGen }

// Generation is the summary generation the view is built on.
func (t *Target) Generation() int64 { return t.generation }

// Version identifies the state placements see: the summary generation and
// the reservations on it.
func (t *Target) Version() (int64, uint64) { return t.generation, t.version }

// Levels are the topology levels the summary reports.
func (t *Target) Levels() []string { return t.levels }

// Snapshot is the free capacity left for new workloads: the summary less
// the in-flight reservations. Use it to read; place through a Policy.
func (t *Target) Snapshot() *tas.Snapshot { return t.free }

// SetSummary moves the view to a new summary. A reservation whose key the
// summary lists among its dispatches takes nothing while it does: the
// summary's free capacity counts the workload. It is held until Release
// all the same (the copy finished, was refused or is gone), and takes its
// capacity again from a summary that stops listing it while it lives —
// an agent that gave an admission back, for one: so a dispatched workload
// is counted exactly once, by its reservation or by the summary.
//
// A summary that cannot be read (malformed, hostile, beyond the engine's
// bounds) leaves the view as it was and is remembered in Invalid; a panic
// while reading it drops the view (it may be half rewritten) and is
// returned as an error, never raised.
func (t *Target) SetSummary(st *strata.CapacitySummaryStatus) (err error) {
	defer func() {
		if r := recover(); r != nil {
			t.free, t.empty, t.generation = nil, nil, -1
			err = fmt.Errorf("capacity summary of flavor %s on %s: reading it failed: %v", t.Flavor, t.Cluster, r)
		}
		if err != nil {
			t.invalid, t.invalidGen = err.Error(), st.SummaryGeneration
		} else {
			t.invalid, t.invalidGen = "", 0
		}
	}()
	return t.setSummary(st)
}

func (t *Target) setSummary(st *strata.CapacitySummaryStatus) error {
	// Most new generations change amounts, not which nodes are where:
	// rewrite the nodes in place then.
	if t.free == nil || !t.free.Refresh(st) {
		free, err := tas.NewSnapshotFromSummary(st)
		if err != nil {
			return fmt.Errorf("capacity summary of flavor %s on %s: %w", t.Flavor, t.Cluster, err)
		}
		t.free = free
	}
	t.empty, t.summary, t.generation, t.levels = nil, st, st.SummaryGeneration, st.Levels
	t.emptyVersion = t.bump()
	t.reflected = make(map[string]bool, len(st.Dispatches))
	for _, key := range st.Dispatches {
		t.reflected[key] = true
	}
	// Re-apply the reservations, oldest first, at the leaf level.
	held := make([]*reservation, 0, len(t.reservations))
	for _, r := range t.reservations {
		held = append(held, r)
	}
	sort.Slice(held, func(i, j int) bool { return held[i].seq < held[j].seq })
	for _, r := range held {
		r.usage = r.usage[:0]
		if t.reflected[r.key] {
			continue // counted by the summary: never twice
		}
		for i, a := range r.assignments {
			r.usage = append(r.usage, commitWhatIsLeft(t.free, a, r.requests[i])...)
		}
	}
	return nil
}

// commitWhatIsLeft commits a reservation's assignment of one pod set on a
// new summary's snapshot: all of it, or, when some of its domains are gone
// from the summary (their nodes left), each domain that is still there.
// A domain gone holds nothing any more; the others still hold their pods,
// or the hub would offer them again while its copy is placed there.
func commitWhatIsLeft(s *tas.Snapshot, a *tas.Assignment, requests corev1.ResourceList) []*tas.Dispatched {
	if u, err := s.CommitReservation(a, requests); err == nil {
		return []*tas.Dispatched{u}
	}
	var out []*tas.Dispatched
	for _, d := range a.Domains {
		one := *a
		one.Domains = []tas.DomainAssignment{d}
		if u, err := s.CommitReservation(&one, requests); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// Reserve takes the capacity of a workload dispatched to this target
// (assignments at the summary's leaf level, one per pod set with its pod's
// requests) until Release. Reserving a key again replaces its reservation.
func (t *Target) Reserve(key string, assignments []*tas.Assignment, requests []corev1.ResourceList) error {
	if len(assignments) != len(requests) {
		return fmt.Errorf("%d assignments for %d pod sets", len(assignments), len(requests))
	}
	t.Release(key)
	// A pod set without an assignment takes nothing: a provisional
	// dispatch's (DecideProvisional), placed on nodes its worker asks the
	// autoscaler for.
	if slices.Contains(assignments, nil) {
		var as []*tas.Assignment
		var rs []corev1.ResourceList
		for i, a := range assignments {
			if a != nil {
				as, rs = append(as, a), append(rs, requests[i])
			}
		}
		assignments, requests = as, rs
	}
	r := &reservation{key: key, assignments: assignments, requests: requests}
	if t.reflected[key] {
		// The summary counts it already: held, taking nothing, until a
		// summary stops listing it.
		t.reservations[key] = r
		r.seq = t.bump()
		return nil
	}
	for i, a := range assignments {
		u, err := t.free.CommitReservation(a, requests[i])
		if err != nil {
			for _, taken := range r.usage {
				t.free.ReleaseDispatched(taken)
			}
			return fmt.Errorf("reserving %s on %s/%s: %w", key, t.Cluster, t.Flavor, err)
		}
		r.usage = append(r.usage, u)
	}
	t.reservations[key] = r
	r.seq = t.bump()
	return nil
}

// QueueUsage is what the summary says each worker ClusterQueue with a
// quota on the flavor holds there, captured with the dispatches it counts
// (status.queues); false when it says nothing (no summary, or an agent
// older than the field).
func (t *Target) QueueUsage() (map[string]corev1.ResourceList, bool) {
	if t.summary == nil || len(t.summary.Queues) == 0 {
		return nil, false
	}
	out := make(map[string]corev1.ResourceList, len(t.summary.Queues))
	for _, q := range t.summary.Queues {
		out[q.Name] = q.Usage
	}
	return out, true
}

// Provisions says whether the summary says that the worker ClusterQueue
// queue's admission checks on the flavor include a ProvisioningRequest
// check (status.queues[].provisions): its agent reserves quota alone for a
// workload there and places it on the nodes the cluster autoscaler
// provisions for it. False when the summary does not say (an agent older
// than the field, or queues left out of the summary).
func (t *Target) Provisions(queue string) bool {
	if t.summary == nil {
		return false
	}
	for _, q := range t.summary.Queues {
		if q.Name == queue {
			return q.Provisions
		}
	}
	return false
}

// FairSharing says whether the target's agent preempts by fair sharing
// (its summary's status.fairSharing).
func (t *Target) FairSharing() bool { return t.summary != nil && t.summary.FairSharing }

// Priority is wl's priority on the target's worker, as its agent sets it
// on the copy: the value wl's class has there, when the summary lists the
// worker's classes (status.priorityClasses, all of them or none). ok is
// false when it lists them and not wl's: the agent refuses the copy there
// (PriorityClassNotFound). The hub Workload's own priority when wl names
// no class or the summary lists none (an agent older than the field, or
// no queue there preempts).
func (t *Target) Priority(wl *strata.Workload) (priority int32, ok bool) {
	name := wl.Spec.PriorityClassName
	if name == "" || t.summary == nil || len(t.summary.PriorityClasses) == 0 {
		return queue.Priority(wl), true
	}
	source := wl.Spec.PriorityClassSource
	if source == "" {
		// Written before Workloads had a source: the pods' PriorityClass.
		source = strata.PodPriorityClassSource
	}
	for _, c := range t.summary.PriorityClasses {
		if c.Source == source && c.Name == name {
			return c.Value, true
		}
	}
	return queue.Priority(wl), false
}

// MissingClass says why t's worker would refuse a copy of wl for its
// priority class (PriorityClassNotFound): the summary lists the worker's
// classes, and not wl's. "" when it would not, or the hub cannot tell
// (no list: an older agent, or no queue there may preempt).
func (t *Target) MissingClass(wl *strata.Workload) string {
	if _, ok := t.Priority(wl); ok {
		return ""
	}
	return MissingClassMessage(wl)
}

// MissingClassMessage is MissingClass's reason.
func MissingClassMessage(wl *strata.Workload) string {
	return fmt.Sprintf("its priority class %s does not exist there", wl.Spec.PriorityClassName)
}

// SummaryCounts says whether the summary counts dispatch key in its free
// capacity already, so that no reservation must hold it.
func (t *Target) SummaryCounts(key string) bool { return t.reflected[key] }

// Reservations is the number of reservations that take capacity: held
// and not counted by the summary.
func (t *Target) Reservations() int {
	n := 0
	for key, r := range t.reservations {
		if !t.reflected[key] && !r.preempt {
			n++
		}
	}
	return n
}

// InFlight is what the reservations that take capacity hold, per leaf
// domain of the summary, sorted by the domains' values: how many
// dispatches, how many pods and their requests.
func (t *Target) InFlight() []strata.InFlightDomain {
	type held struct {
		d    strata.InFlightDomain
		keys map[string]bool
	}
	byDomain := map[string]*held{}
	for key, r := range t.reservations {
		if t.reflected[key] || r.preempt {
			continue
		}
		for i, a := range r.assignments {
			for _, d := range a.Domains {
				id := strings.Join(d.Values, "\x00")
				h := byDomain[id]
				if h == nil {
					h = &held{d: strata.InFlightDomain{Values: slices.Clone(d.Values), Requests: corev1.ResourceList{}}, keys: map[string]bool{}}
					byDomain[id] = h
				}
				h.keys[key] = true
				h.d.Pods += d.Count
				for name, q := range r.requests[i] {
					sum := h.d.Requests[name]
					for range d.Count {
						sum.Add(q)
					}
					h.d.Requests[name] = sum
				}
			}
		}
	}
	out := make([]strata.InFlightDomain, 0, len(byDomain))
	for _, h := range byDomain {
		h.d.Workloads = int32(len(h.keys))
		out = append(out, h.d)
	}
	slices.SortFunc(out, func(a, b strata.InFlightDomain) int { return slices.Compare(a.Values, b.Values) })
	return out
}

// Release ends a reservation: its workload's usage now shows in the
// summary, or the dispatch was undone.
func (t *Target) Release(key string) {
	r, ok := t.reservations[key]
	if !ok {
		return
	}
	if t.free != nil { // nil: a summary that could not be read dropped the view; the next one is built without it
		for _, u := range r.usage {
			t.free.ReleaseDispatched(u)
		}
	}
	delete(t.reservations, key)
	t.bump()
}

// versions numbers the targets' versions, unique across targets.
var versions atomic.Uint64

// bump gives the target a new version and returns it.
func (t *Target) bump() uint64 {
	t.version = versions.Add(1)
	return t.version
}

// emptySnapshot is the flavor with nothing running, built on first use.
func (t *Target) emptySnapshot() (*tas.Snapshot, error) {
	if t.empty == nil {
		empty, err := tas.NewEmptySnapshotFromSummary(t.summary)
		if err != nil {
			return nil, err
		}
		t.empty = empty
	}
	return t.empty, nil
}

// TakesCapacity says whether key holds a reservation that takes capacity
// (one the summary does not count).
func (t *Target) TakesCapacity(key string) bool {
	r, ok := t.reservations[key]
	return ok && !t.reflected[key] && !r.preempt
}

// HasReservation says whether key holds a reservation, taking capacity or
// not.
func (t *Target) HasReservation(key string) bool {
	_, ok := t.reservations[key]
	return ok
}

// SplitTargets keeps the targets for which why says nothing. Those of the
// queue's flavors it does not keep are returned apart, and excluded says
// why, naming together (in name order) the targets left out for one
// reason.
func SplitTargets(targets []*Target, excluded, flavors []string, why func(*Target) string) (kept, left []*Target, _ []string) {
	kept = targets[:0:0]
	var messages []string
	where := map[string][]string{}
	for _, t := range targets {
		m := why(t)
		switch {
		case m == "":
			kept = append(kept, t)
		case slices.Contains(flavors, t.Flavor):
			if where[m] == nil {
				messages = append(messages, m)
			}
			where[m] = append(where[m], t.Cluster+"/"+t.Flavor)
			left = append(left, t)
		}
	}
	// In name order, whatever the targets' order: a reason written only
	// when it changes stays the same while nothing does.
	for _, m := range messages {
		slices.Sort(where[m])
	}
	slices.SortFunc(messages, func(a, b string) int { return strings.Compare(where[a][0], where[b][0]) })
	for _, m := range messages {
		excluded = append(excluded, fmt.Sprintf("%s: %s", strings.Join(where[m], ", "), m))
	}
	return kept, left, excluded
}
