package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
)

// Worker is what placement needs to know of a WorkerCluster besides its
// summaries.
type Worker struct {
	Name string
	// Cordoned: spec.unschedulable.
	Cordoned bool
	// Deleting: the WorkerCluster is being deleted (drained).
	Deleting bool
	// NotConnected, when set, says why the hub cannot reach the worker.
	NotConnected string
}

// WithTargets calls fn with a placement target per flavor of every worker,
// in the order of workers and then flavors, current with the summaries
// last read, and holds them for fn alone: fn may decide and reserve. A
// target keeps its reservations across summaries until a summary lists
// their dispatch or Release, also while its worker is unreachable. A
// target that must get no new work says why in Unavailable: cordoned,
// unreachable, its summary stale or not published.
func (f *Fleet) WithTargets(ctx context.Context, workers []Worker, now time.Time, staleAfter time.Duration, fn func([]*placement.Target) error) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return fn(f.refreshTargets(ctx, workers, now, staleAfter))
}

// Release ends the reservation key on a worker's flavor, if any: the
// dispatch was undone, or its copy finished. A dispatch whose pod sets
// the hub placed on different flavors (status.placement.podSetFlavors)
// holds a reservation on each: every flavor of the worker is released.
func (f *Fleet) Release(worker, flavor, key string) {
	f.ForgetHint(key)
	f.hmu.Lock()
	delete(f.dispatchedHere, key)
	f.hmu.Unlock()
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if t := f.targets[worker][flavor]; t != nil {
		t.Release(key)
	}
	for name, t := range f.targets[worker] {
		if name != flavor {
			t.Release(key)
		}
	}
}

// NoteDispatched notes that this hub process decided dispatch key: until
// its copy is created, no other process can have sent one.
func (f *Fleet) NoteDispatched(key string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	f.dispatchedHere[key] = true
}

// DispatchedHere says whether this hub process decided dispatch key (and
// its reservation has not ended).
func (f *Fleet) DispatchedHere(key string) bool {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.dispatchedHere[key]
}

// SetHint notes the placement reserved for dispatch key (one assignment
// per pod set) until its copy is created: the copy's topology hint.
func (f *Fleet) SetHint(key string, assignments []*tas.Assignment) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	f.hints[key] = assignments
}

// Hint returns the placement noted for dispatch key, or nil.
func (f *Fleet) Hint(key string) []*tas.Assignment {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.hints[key]
}

// PruneHints drops the placements noted for dispatches that are not live
// (their Workload gone, or dispatched again) — the copies controller
// forgets the others once their copies exist.
func (f *Fleet) PruneHints(live func(key string) bool) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for key := range f.hints {
		if !live(key) {
			delete(f.hints, key)
		}
	}
}

// ForgetHint drops the placement noted for dispatch key: its copy was
// created, or the dispatch undone.
func (f *Fleet) ForgetHint(key string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	delete(f.hints, key)
}

// InFlight is what the in-flight reservations on a worker hold, per
// flavor and leaf domain (placement.Target.InFlight); flavors without any
// are left out.
func (f *Fleet) InFlight(worker string) map[string][]strata.InFlightDomain {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	out := map[string][]strata.InFlightDomain{}
	for flavor, t := range f.targets[worker] {
		if held := t.InFlight(); len(held) > 0 {
			out[flavor] = held
		}
	}
	return out
}

// Reservations is the number of in-flight reservations per worker.
func (f *Fleet) Reservations() map[string]int {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	out := map[string]int{}
	for worker, ts := range f.targets {
		for _, t := range ts {
			out[worker] += t.Reservations()
		}
	}
	return out
}

// refreshTargets brings every worker's targets up to date. f.tmu is held.
func (f *Fleet) refreshTargets(ctx context.Context, workers []Worker, now time.Time, staleAfter time.Duration) []*placement.Target {
	var out []*placement.Target
	for _, w := range workers {
		var summaries []strata.CapacitySummary
		if down := f.DownReason(w.Name); down != "" && w.NotConnected == "" {
			w.NotConnected = down // the probe knows before the WorkerCluster says so
		}
		if reason, failed := f.fenceBlocks(w.Name); failed != "" && w.NotConnected == "" {
			// Its agent is about to stop the hub's copies: sending more
			// there would only have them stopped.
			w.NotConnected = fmt.Sprintf("its fencing Lease cannot be renewed (%s): %s", reason, failed)
		}
		connected := w.NotConnected == ""
		if connected {
			var ok bool
			var err error
			summaries, ok, err = f.Summaries(ctx, w.Name)
			switch {
			case err != nil:
				// This pass only: its targets keep their reservations.
				connected = false
				w.NotConnected = "reading its summaries: " + err.Error()
			case !ok:
				connected = false
				w.NotConnected = "not connected yet"
			}
		}
		if connected && newGeneration(f.targets[w.Name], summaries) {
			if pending := f.CopiesPending(w.Name); len(pending) > 0 {
				// Its copies of a kind are not read yet (a hub that just
				// started): the dispatches its new summaries count cannot
				// be told from strangers, and dropping them would count
				// those workloads twice, by the summary and again by a
				// reservation, until the worker's next summary. This pass
				// only, as for an error reading the summaries.
				connected = false
				w.NotConnected = fmt.Sprintf("its copies of %s are not read yet", strings.Join(pending, ", "))
			}
		}
		if connected && newGeneration(f.targets[w.Name], summaries) {
			// Only this worker's own copies may end its reservations.
			if copies, err := f.Copies(ctx, w.Name, client.UnsafeDisableDeepCopy); err == nil {
				summaries = ownDispatches(summaries, copyKeys(copies))
			} else {
				summaries = ownDispatches(summaries, nil)
			}
		}
		targets := refresh(f.targets[w.Name], w, connected, summaries, f.SummaryAge(w.Name, now), staleAfter)
		if targets == nil {
			delete(f.targets, w.Name)
		} else {
			f.targets[w.Name] = targets
		}
		flavors := make([]string, 0, len(targets))
		for flavor := range targets {
			flavors = append(flavors, flavor)
		}
		slices.Sort(flavors)
		for _, flavor := range flavors {
			out = append(out, targets[flavor])
		}
	}
	return out
}

// newGeneration says whether a summary differs in generation from its
// target's view.
func newGeneration(targets map[string]*placement.Target, summaries []strata.CapacitySummary) bool {
	for i := range summaries {
		if t := targets[summaries[i].Spec.Flavor]; t == nil || t.Generation() != summaries[i].Status.SummaryGeneration {
			return true
		}
	}
	return false
}

// copyKeys returns the dispatch keys of copies (their
// strata.dev/hub-workload-uid and strata.dev/dispatch-generation labels).
func copyKeys(copies []jobs.Job) map[string]bool {
	keys := make(map[string]bool, len(copies))
	for _, c := range copies {
		l := c.Object().GetLabels()
		if uid, gen := l[strata.HubWorkloadUIDLabel], l[strata.DispatchGenerationLabel]; uid != "" && gen != "" {
			keys[uid+"/"+gen] = true
		}
	}
	return keys
}

// ownDispatches returns the summaries with only the dispatches whose
// copies the hub sees on that worker: a worker cannot end the reservation
// of a dispatch the hub never sent it (nor one whose copy is gone) by
// listing its key. A copy the hub's informer has not shown yet is counted
// twice until the next summary, which errs on the safe side.
func ownDispatches(summaries []strata.CapacitySummary, keys map[string]bool) []strata.CapacitySummary {
	out := make([]strata.CapacitySummary, len(summaries))
	for i := range summaries {
		out[i] = summaries[i]
		var own []string
		for _, key := range summaries[i].Status.Dispatches {
			if keys[key] {
				own = append(own, key)
			}
		}
		out[i].Status.Dispatches = own
	}
	return out
}

// refresh brings one worker's targets (by flavor) up to date with its
// summaries when connected, and sets why each gets no new work. A summary
// the hub cannot read makes its own target unavailable, saying what is
// wrong; it never stops the others.
//
// age says how old a summary is, on the hub's clock (SummaryAge).
func refresh(targets map[string]*placement.Target, w Worker, connected bool, summaries []strata.CapacitySummary, age SummaryAgeFunc, staleAfter time.Duration) map[string]*placement.Target {
	if connected {
		next := make(map[string]*placement.Target, len(summaries))
		for i := range summaries {
			s := &summaries[i]
			t := targets[s.Spec.Flavor]
			if t == nil {
				t = placement.NewPendingTarget(w.Name, s.Spec.Flavor)
			}
			if len(s.Status.Levels) == 0 {
				// Not published yet, or too large to publish any levels:
				// unavailable, not absent — a workload that fits no other
				// worker is not told it fits no cluster even empty.
				if t.Unavailable = unavailable(w, s, age, staleAfter); t.Unavailable == "" || t.Unavailable == "summary never observed" {
					t.Unavailable = "summary not published yet"
				}
				next[s.Spec.Flavor] = t
				continue
			}
			gen := s.Status.SummaryGeneration
			if msg, bad := t.Invalid(); t.Generation() != gen && (msg == "" || bad != gen) {
				_ = t.SetSummary(&s.Status) // an error is kept in t.Invalid
			}
			t.Unavailable = unavailable(w, s, age, staleAfter)
			if msg, _ := t.Invalid(); msg != "" {
				t.Unavailable = "summary invalid: " + msg
			} else if !t.Loaded() {
				t.Unavailable = "summary not read"
			}
			next[s.Spec.Flavor] = t
		}
		return next
	}
	for _, t := range targets {
		t.Unavailable = "unreachable: " + w.NotConnected
		switch {
		case w.Deleting:
			t.Unavailable = "being deleted; " + t.Unavailable
		case w.Cordoned:
			t.Unavailable = "cordoned; " + t.Unavailable
		}
	}
	return targets
}

// unavailable says why a connected worker's flavor gets no new work, or "".
func unavailable(w Worker, s *strata.CapacitySummary, age SummaryAgeFunc, staleAfter time.Duration) string {
	a, published := age(s)
	switch {
	case w.Deleting:
		return "the WorkerCluster is being deleted (its copies are taken back)"
	case w.Cordoned:
		return "cordoned (spec.unschedulable)"
	case !published:
		return "summary never observed"
	case a >= staleAfter:
		return fmt.Sprintf("summary stale: observed %s, more than %s ago", s.Status.ObservedTime.UTC().Format(time.RFC3339), staleAfter)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse && len(s.Status.Domains) == 0 {
		return fmt.Sprintf("summary not ready (%s): %s", c.Reason, c.Message)
	}
	return ""
}

// Targets returns the targets as WithTargets would pass them, for
// observers: reading them races with placement, so use it only where
// nothing places (tests, one-off views).
func (f *Fleet) Targets(ctx context.Context, workers []Worker, now time.Time, staleAfter time.Duration) ([]*placement.Target, error) {
	var out []*placement.Target
	err := f.WithTargets(ctx, workers, now, staleAfter, func(ts []*placement.Target) error {
		out = ts
		return nil
	})
	return out, err
}
