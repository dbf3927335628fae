package fleet

import (
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
			f.sawSummary("w1", summary(s.observed))
		}
		age, ok := f.SummaryAge("w1", clk.Now())(summary(s.read))
		if age != s.wantAge || ok != s.wantOK {
			t.Errorf("step %d: SummaryAge = %s, %t; want %s, %t", i, age, ok, s.wantAge, s.wantOK)
		}
	}
}
