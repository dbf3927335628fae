package fleet

import (
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	strata "strata.dev/strata/api/v1beta1"
)

// sighting is when the hub saw a summary's observedTime change: the
// worker's time, only compared with the next one, and the hub's.
type sighting struct {
	observed time.Time
	at       time.Time
}

// sawSummary notes, from an informer event of worker's summaries, when the
// hub saw each summary published anew.
func (f *Fleet) sawSummary(worker string, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*strata.CapacitySummary)
	if !ok {
		return
	}
	key := worker + "/" + s.Name
	f.smu.Lock()
	defer f.smu.Unlock()
	if !s.DeletionTimestamp.IsZero() {
		delete(f.sightings, key)
		return
	}
	var observed time.Time
	if s.Status.ObservedTime != nil {
		observed = s.Status.ObservedTime.Time
	}
	if prev, ok := f.sightings[key]; ok && prev.observed.Equal(observed) {
		return
	}
	f.sightings[key] = sighting{observed: observed, at: f.clock.Now()}
}

// SummaryAgeFunc says how old a summary is; ok is false when it was never
// published.
type SummaryAgeFunc func(s *strata.CapacitySummary) (age time.Duration, ok bool)

// ObservedAge is the age of summaries by their observedTime against now:
// for tests and views on one clock.
func ObservedAge(now time.Time) SummaryAgeFunc {
	return func(s *strata.CapacitySummary) (time.Duration, bool) {
		if s.Status.ObservedTime == nil {
			return 0, false
		}
		return now.Sub(s.Status.ObservedTime.Time), true
	}
}

// SummaryAge returns how old a worker's summaries are as the hub measures
// it: the time since the hub saw each published anew (its observedTime
// changed), on the hub's clock, never the worker's observedTime against
// the hub's clock. ok is false for a summary never published.
func (f *Fleet) SummaryAge(worker string, now time.Time) SummaryAgeFunc {
	return func(s *strata.CapacitySummary) (time.Duration, bool) {
		if s.Status.ObservedTime == nil {
			return 0, false
		}
		f.smu.Lock()
		seen, found := f.sightings[worker+"/"+s.Name]
		f.smu.Unlock()
		if !found || !seen.observed.Equal(s.Status.ObservedTime.Time) {
			return 0, true // published just now: the event is on its way
		}
		return now.Sub(seen.at), true
	}
}
