package fencing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func lease(renew time.Time, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(renew))}}
	if seconds > 0 {
		l.Spec.LeaseDurationSeconds = ptr.To(seconds)
	}
	return l
}

// TestObserve follows one hub's Lease through the agent's eyes: the
// deadline is the earlier of the hub's renewTime and the agent's sighting
// plus the duration; a Lease without a duration never fences.
func TestObserve(t *testing.T) {
	type step struct {
		lease      *coordinationv1.Lease
		at         time.Duration // the agent's clock, from t0
		wantFenced bool
		wantWake   bool
	}
	cases := map[string][]step{
		"renewed in time: never fenced": {
			{lease: lease(t0, 10), at: 0},
			{lease: lease(t0.Add(5*time.Second), 10), at: 5 * time.Second},
			{lease: lease(t0.Add(5*time.Second), 10), at: 14 * time.Second},
		},
		"silent for the duration: fenced, and free again on renewal": {
			{lease: lease(t0, 10), at: 0},
			{lease: lease(t0, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
			{lease: lease(t0, 10), at: 20 * time.Second, wantFenced: true},
			{lease: lease(t0.Add(21*time.Second), 10), at: 21 * time.Second, wantWake: true},
		},
		"a watch that lags: the hub's renewTime counts": {
			{lease: lease(t0, 10), at: 8 * time.Second},
			{lease: lease(t0, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"a hub clock ahead of the agent's: the sighting counts": {
			{lease: lease(t0.Add(time.Hour), 10), at: 0},
			{lease: lease(t0.Add(time.Hour), 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"an agent that restarts during the silence fences at once": {
			{lease: lease(t0, 10), at: 30 * time.Second, wantFenced: true, wantWake: true},
		},
		"fencing disabled on the hub: a Lease without a duration": {
			{lease: lease(t0, 0), at: time.Hour},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			wakes := 0
			f := New(nil, nil, nil, "strata-system", func() { wakes++ })
			for i, s := range steps {
				before := wakes
				o := f.observe("hub", s.lease, t0.Add(s.at))
				got := []any{o.fenced, wakes > before}
				if diff := cmp.Diff([]any{s.wantFenced, s.wantWake}, got); diff != "" {
					t.Errorf("step %d: fenced, woke (-want,+got):\n%s", i, diff)
				}
				wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: "u"}}}
				if held := f.Holds(wl) != ""; held != s.wantFenced {
					t.Errorf("step %d: Holds() = %t, want %t", i, held, s.wantFenced)
				}
				other := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.OriginLabel: "other-hub", strata.HubWorkloadUIDLabel: "u"}}}
				if f.Holds(other) != "" {
					t.Errorf("step %d: another hub's copy is held", i)
				}
			}
		})
	}
}
