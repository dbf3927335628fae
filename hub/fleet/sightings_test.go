package fleet

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	strata "strata.dev/strata/api/v1beta1"
)

// TestSummaryAge: a summary's age is the time since the hub saw it
// published anew, on the hub's clock, whatever the worker's clock says.
func TestSummaryAge(t *testing.T) {
	hubNow := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	workerBehind := hubNow.Add(-time.Hour) // a worker clock an hour behind
	summary := func(observed *time.Time) *strata.CapacitySummary {
		s := &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
		if observed != nil {
			s.Status.ObservedTime = &metav1.Time{Time: *observed}
		}
		return s
	}
	clk := testingclock.NewFakeClock(hubNow)
	f := New(nil, "hub")
	f.SetClock(clk)
	gen := f.openSightings("w1")
	type step struct {
		advance  time.Duration
		observed *time.Time // published with this observedTime (nil: no event)
		read     *time.Time // the observedTime the reader has
		wantAge  time.Duration
		wantOK   bool
	}
	t1, t2 := workerBehind, workerBehind.Add(30*time.Second)
	steps := []step{
		{observed: &t1, read: &t1, wantAge: 0, wantOK: true},
		{advance: 20 * time.Second, read: &t1, wantAge: 20 * time.Second, wantOK: true},
		{advance: 10 * time.Second, observed: &t2, read: &t2, wantAge: 0, wantOK: true},
		{advance: 5 * time.Minute, observed: &t2, read: &t2, wantAge: 5 * time.Minute, wantOK: true}, // a resync: no change
		{read: nil, wantOK: false},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		if s.observed != nil {
			f.sawSummary("w1", gen, summary(s.observed))
		}
		age, ok := f.SummaryAge("w1", clk.Now())(summary(s.read))
		if age != s.wantAge || ok != s.wantOK {
			t.Errorf("step %d: SummaryAge = %s, %t; want %s, %t", i, age, ok, s.wantAge, s.wantOK)
		}
	}
}

// dated answers every request with a Date header.
type dated time.Time

func (d dated) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Date": []string{time.Time(d).UTC().Format(http.TimeFormat)}}, Body: http.NoBody}, nil
}

// TestSummaryAgeFirstSighting: a summary the hub sees first (it started,
// or connected to the worker) is as old as the worker's API server says
// it is, on that server's clock against the hub's — so that the summary of
// an agent that died before a hub restart is not fresh for
// summaryStaleAfter — and as old as nothing when it cannot tell.
func TestSummaryAgeFirstSighting(t *testing.T) {
	hubNow := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	serverSkew := -time.Hour // the worker's API server's clock, an hour behind the hub's
	cases := []struct {
		name       string
		date       bool          // the worker's API server has answered (its Date header)
		writtenAgo time.Duration // the summary's last write (managedFields), before now
		managed    bool          // the summary has managedFields
		wantAge    time.Duration
	}{
		{name: "written five minutes ago", date: true, writtenAgo: 5 * time.Minute, managed: true, wantAge: 5*time.Minute - time.Second},
		{name: "written just now (created while the hub runs)", date: true, managed: true, wantAge: 0},
		{name: "written a second ago: the clocks' seconds make it younger", date: true, writtenAgo: time.Second, managed: true, wantAge: 0},
		{name: "no answer from the server yet: now", writtenAgo: 5 * time.Minute, managed: true, wantAge: 0},
		{name: "no managedFields: now", date: true, writtenAgo: 5 * time.Minute, wantAge: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(hubNow)
			f := New(nil, "hub")
			f.SetClock(clk)
			serverNow := hubNow.Add(serverSkew)
			gen := f.openSightings("w1")
			if tc.date {
				resp, err := f.serverDates("w1", gen)(dated(serverNow)).RoundTrip(&http.Request{})
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			s := &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
			observed := metav1.NewTime(serverNow.Add(-tc.writtenAgo).Add(-3 * time.Second)) // the agent's clock: unused
			s.Status.ObservedTime = &observed
			if tc.managed {
				written := metav1.NewTime(serverNow.Add(-tc.writtenAgo).Truncate(time.Second))
				s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "strata-agent", Time: &written}}
			}
			obj, err := f.summaryWritten("w1", gen)(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := obj.(*strata.CapacitySummary).ManagedFields; got != nil {
				t.Errorf("managedFields kept in the cache: %v", got)
			}
			f.sawSummary("w1", gen, obj)
			age, ok := f.SummaryAge("w1", clk.Now())(s)
			if !ok || age != tc.wantAge {
				t.Errorf("SummaryAge = %s, %t; want %s, true", age, ok, tc.wantAge)
			}
			// Published anew while the hub runs: age 0, then the hub's clock.
			next := metav1.NewTime(observed.Add(30 * time.Second))
			s.Status.ObservedTime = &next
			f.sawSummary("w1", gen, s)
			clk.Step(10 * time.Second)
			if age, _ := f.SummaryAge("w1", clk.Now())(s); age != 10*time.Second {
				t.Errorf("after a new publication and 10s: SummaryAge = %s, want 10s", age)
			}
		})
	}
}

// TestSummaryAgeAfterReconnect: once a worker's connection ends, the hub
// sees its summaries for the first time again when it connects anew, what
// the closed connection still delivers is dropped, and a deleted summary
// is forgotten.
func TestSummaryAgeAfterReconnect(t *testing.T) {
	hubNow := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(hubNow)
	f := New(nil, "hub")
	f.SetClock(clk)
	written := metav1.NewTime(hubNow.Add(-time.Minute))
	observed := metav1.NewTime(hubNow.Add(-time.Minute))
	s := &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: "gpu", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "strata-agent", Time: &written}}}}
	s.Status.ObservedTime = &observed
	// deliver is what a connection of generation gen reads: an answer
	// dated by the server's clock, and the summary listed.
	deliver := func(gen uint64, serverNow time.Time) {
		t.Helper()
		resp, err := f.serverDates("w1", gen)(dated(serverNow)).RoundTrip(&http.Request{})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		obj, err := f.summaryWritten("w1", gen)(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		f.sawSummary("w1", gen, obj)
	}
	entries := func() int {
		f.smu.Lock()
		defer f.smu.Unlock()
		return len(f.sightings) + len(f.written) + len(f.offsets)
	}
	var gen uint64
	connect := func() {
		t.Helper()
		gen = f.openSightings("w1")
		deliver(gen, clk.Now())
	}
	connect()
	if age, _ := f.SummaryAge("w1", clk.Now())(s); age != time.Minute-time.Second {
		t.Fatalf("first connection: SummaryAge = %s, want 59s", age)
	}
	clk.Step(time.Minute)
	f.Disconnect("w1")
	// In flight when the connection closed: dropped.
	old := gen
	deliver(old, clk.Now().Add(time.Hour))
	if n := entries(); n != 0 {
		t.Fatalf("a closed connection's late events left %d entries", n)
	}
	connect()
	// And dropped once the next connection is open: the old connection's
	// clock reading (an hour off) does not replace the new one's.
	deliver(old, clk.Now().Add(time.Hour))
	if age, _ := f.SummaryAge("w1", clk.Now())(s); age != 2*time.Minute-time.Second {
		t.Errorf("connected again: SummaryAge = %s, want 1m59s (written two minutes ago)", age)
	}
	f.summaryGone("w1", gen, s)
	f.smu.Lock()
	n := len(f.sightings) + len(f.written)
	f.smu.Unlock()
	if n != 0 {
		t.Errorf("after the summary's deletion the hub still holds %d entries about it", n)
	}
}
