package fleet

import (
	"net/http"
	"strings"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	strata "strata.dev/strata/api/v1beta1"
)

// sighting is when the hub saw a summary's observedTime change: the
// worker's time, only compared with the next one, and the hub's.
type sighting struct {
	observed time.Time
	at       time.Time
}

// openSightings starts what a connection to worker records of its
// summaries and its clock, and returns the connection's generation, which
// its informer's events and its answers carry. Those of a connection
// closed since (forgetSightings) can still arrive — an event in flight, an
// answer read late — and are dropped: they must not bring back what the
// hub forgot.
func (f *Fleet) openSightings(worker string) uint64 {
	f.smu.Lock()
	defer f.smu.Unlock()
	f.generation++
	f.generations[worker] = f.generation
	return f.generation
}

// sawSummary notes, from an informer event of worker's summaries on the
// connection of generation gen, when the hub saw each summary published
// anew.
func (f *Fleet) sawSummary(worker string, gen uint64, obj any) {
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
	if f.generations[worker] != gen {
		return // a connection closed since
	}
	if !s.DeletionTimestamp.IsZero() {
		delete(f.sightings, key)
		delete(f.written, key)
		return
	}
	var observed time.Time
	if s.Status.ObservedTime != nil {
		observed = s.Status.ObservedTime.Time
	}
	prev, seen := f.sightings[key]
	if seen && prev.observed.Equal(observed) {
		return
	}
	at := f.clock.Now()
	if !seen {
		at = f.firstSighting(worker, key, at)
	}
	f.sightings[key] = sighting{observed: observed, at: at}
}

// summaryGone forgets a deleted summary (an informer's delete event: the
// object may carry no deletion timestamp).
func (f *Fleet) summaryGone(worker string, gen uint64, obj any) {
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
	if f.generations[worker] != gen {
		return
	}
	delete(f.sightings, key)
	delete(f.written, key)
}

// forgetSightings forgets what the hub saw of a worker's summaries and its
// clock, when its connection ends.
func (f *Fleet) forgetSightings(worker string) {
	f.smu.Lock()
	defer f.smu.Unlock()
	prefix := worker + "/"
	for key := range f.sightings {
		if strings.HasPrefix(key, prefix) {
			delete(f.sightings, key)
		}
	}
	for key := range f.written {
		if strings.HasPrefix(key, prefix) {
			delete(f.written, key)
		}
	}
	delete(f.offsets, worker)
	delete(f.generations, worker)
}

// firstSighting is when, on the hub's clock, a summary the hub sees for
// the first time was published: now, unless the worker's API server says
// it was written earlier. A summary is seen first when it is created —
// then it was just written — or when the hub starts, or connects to the
// worker: then it may have been written long ago, by an agent gone since,
// and counting it as published now would make it fresh for
// summaryStaleAfter. When it was written is the worker API server's clock
// (managedFields), put on the hub's by the offset between the two that
// the server's answers give (their Date headers); without either, now.
// f.smu is held.
func (f *Fleet) firstSighting(worker, key string, now time.Time) time.Time {
	written, ok := f.written[key]
	offset, known := f.offsets[worker]
	if !ok || !known {
		return now
	}
	// Both clocks are read to the second: the second the write fell in
	// ends up to a second later, so the summary counts as that much
	// younger, never older. The offset includes the answer's latency,
	// which also makes the summary younger.
	at := written.Add(offset + time.Second)
	if at.After(now) {
		return now
	}
	return at
}

// summaryWritten is the cache transform of a worker's summaries: it notes
// when each was last written (the latest time in its managedFields, the
// worker API server's clock) and drops the managed fields, as for every
// other object. gen is the connection's generation.
func (f *Fleet) summaryWritten(worker string, gen uint64) toolscache.TransformFunc {
	strip := crcache.TransformStripManagedFields()
	return func(in any) (any, error) {
		if s, ok := in.(*strata.CapacitySummary); ok {
			var last time.Time
			for _, m := range s.ManagedFields {
				if m.Time != nil && m.Time.After(last) {
					last = m.Time.Time
				}
			}
			if !last.IsZero() {
				f.smu.Lock()
				if f.generations[worker] == gen {
					f.written[worker+"/"+s.Name] = last
				}
				f.smu.Unlock()
			}
		}
		return strip(in)
	}
}

// serverDates wraps the transport of a worker's client: each answer's Date
// header (the worker API server's clock, to the second) against when the
// hub received it gives the offset between the two clocks. gen is the
// connection's generation.
func (f *Fleet) serverDates(worker string, gen uint64) transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		return dateReader{next: rt, note: func(date time.Time) {
			f.smu.Lock()
			if f.generations[worker] == gen {
				f.offsets[worker] = f.clock.Now().Sub(date)
			}
			f.smu.Unlock()
		}}
	}
}

// dateReader passes requests on and notes each answer's Date header.
type dateReader struct {
	next http.RoundTripper
	note func(time.Time)
}

func (d dateReader) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(req)
	if err == nil && resp != nil {
		if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			d.note(date)
		}
	}
	return resp, err
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
