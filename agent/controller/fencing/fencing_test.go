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
// deadline is the duration after the agent last saw the Lease change, on
// its own clock, whatever the hub's clock says; a restarted agent counts
// from its record, or from long ago without one; a deleted Lease keeps
// its deadline; a Lease without a duration never fences.
func TestObserve(t *testing.T) {
	type step struct {
		lease      *coordinationv1.Lease // nil: not found
		restored   *observed             // the earlier agent's record
		sighted    *sighting             // the informer's live delivery of a change
		appeared   bool                  // not in the informer's initial list
		at         time.Duration         // the agent's clock, from t0
		wantFenced bool
		wantHeld   bool // held but not fenced: the Lease never read
		wantWake   bool
	}
	hubBehind := t0.Add(-15 * time.Minute)
	hubAhead := t0.Add(15 * time.Minute)
	cases := map[string][]step{
		"renewed in time: never fenced": {
			{lease: lease(t0, 10), restored: &observed{seen: t0}, at: 0, wantWake: true},
			{lease: lease(t0.Add(5*time.Second), 10), at: 5 * time.Second},
			{lease: lease(t0.Add(5*time.Second), 10), at: 14 * time.Second},
		},
		"silent for the duration: fenced, and free again on renewal": {
			{lease: lease(t0, 10), restored: &observed{seen: t0}, at: 0, wantWake: true},
			{lease: lease(t0, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
			{lease: lease(t0, 10), at: 20 * time.Second, wantFenced: true},
			{lease: lease(t0.Add(21*time.Second), 10), at: 21 * time.Second, wantWake: true},
		},
		"a hub clock 15 minutes behind: renewals count when seen": {
			{lease: lease(hubBehind, 10), restored: &observed{seen: t0}, at: 0, wantWake: true},
			{lease: lease(hubBehind.Add(5*time.Second), 10), at: 5 * time.Second},
			{lease: lease(hubBehind.Add(10*time.Second), 10), at: 10 * time.Second},
			{lease: lease(hubBehind.Add(10*time.Second), 10), at: 19 * time.Second},
			{lease: lease(hubBehind.Add(10*time.Second), 10), at: 20 * time.Second, wantFenced: true, wantWake: true},
		},
		"a hub clock 15 minutes ahead: silence still fences after the duration": {
			{lease: lease(hubAhead, 10), restored: &observed{seen: t0}, at: 0, wantWake: true},
			{lease: lease(hubAhead.Add(5*time.Second), 10), at: 5 * time.Second},
			{lease: lease(hubAhead.Add(5*time.Second), 10), at: 15 * time.Second, wantFenced: true, wantWake: true},
		},
		"a restarted agent counts from its record, not from its start": {
			{lease: lease(hubAhead, 10), restored: &observed{renewTime: hubAhead, seen: t0}, at: 8 * time.Second, wantWake: true},
			{lease: lease(hubAhead, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"a restarted agent whose Lease changed meanwhile counts from its record": {
			{lease: lease(hubAhead.Add(3*time.Second), 10), restored: &observed{renewTime: hubAhead, seen: t0}, at: 10 * time.Second, wantFenced: true},
			{lease: lease(hubAhead.Add(12*time.Second), 10), at: 12 * time.Second, wantWake: true},
		},
		"a restarted agent without a record assumes the worst": {
			{lease: lease(t0, 10), at: time.Second, wantFenced: true},
			{lease: lease(t0.Add(2*time.Second), 10), at: 2 * time.Second, wantWake: true},
		},
		"a deleted Lease keeps its deadline": {
			{lease: lease(t0, 10), restored: &observed{seen: t0}, at: 0, wantWake: true},
			{at: 5 * time.Second},
			{at: 10 * time.Second, wantFenced: true, wantWake: true},
			{at: time.Hour, wantFenced: true},
			{lease: lease(t0.Add(time.Hour), 10), at: time.Hour, wantWake: true},
		},
		"a deleted Lease after a restart: the record's deadline": {
			{restored: &observed{renewTime: t0, seen: t0, duration: 10 * time.Second}, at: 5 * time.Second, wantWake: true},
			{at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"after a restart, the old Lease restored from a backup is no renewal": {
			{restored: &observed{renewTime: t0, seen: t0, duration: 10 * time.Second}, lease: lease(t0, 10),
				sighted: &sighting{renewTime: t0, at: t0.Add(8 * time.Second)}, appeared: true, at: 8 * time.Second, wantWake: true},
			{lease: lease(t0, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"after a restart, the old Lease restored, read before its sighting is noted: no renewal either": {
			{restored: &observed{renewTime: t0, seen: t0, duration: 10 * time.Second}, lease: lease(t0, 10), appeared: true, at: 10 * time.Second, wantFenced: true},
			{lease: lease(t0.Add(11*time.Second), 10), at: 11 * time.Second, wantWake: true},
		},
		"a Lease created while the agent watches: its creation is a change seen live": {
			{at: 0, wantHeld: true},
			{lease: lease(t0.Add(-time.Hour), 10), sighted: &sighting{renewTime: t0.Add(-time.Hour), at: t0.Add(5 * time.Second)}, appeared: true, at: 5 * time.Second, wantWake: true},
			{lease: lease(t0.Add(-time.Hour), 10), at: 14 * time.Second},
			{lease: lease(t0.Add(-time.Hour), 10), at: 15 * time.Second, wantFenced: true, wantWake: true},
		},
		"a Lease created while the agent watches, reconciled before the informer's sighting is noted: a change seen now": {
			{at: 0, wantHeld: true},
			{lease: lease(t0.Add(-time.Hour), 10), appeared: true, at: 5 * time.Second, wantWake: true},
			{lease: lease(t0.Add(-time.Hour), 10), at: 15 * time.Second, wantFenced: true, wantWake: true},
		},
		"a standby that starts to lead counts from the change its informer saw, not from now": {
			{lease: lease(t0, 10), sighted: &sighting{renewTime: t0, at: t0}, at: 9 * time.Second, wantWake: true},
			{lease: lease(t0, 10), at: 10 * time.Second, wantFenced: true, wantWake: true},
		},
		"no Lease ever: held, not fenced": {
			{at: 0, wantHeld: true},
			{at: time.Hour, wantHeld: true},
		},
		"fencing disabled on the hub: a Lease without a duration": {
			{lease: lease(t0, 0), at: time.Hour, wantWake: true},
			{lease: lease(t0, 0), at: 2 * time.Hour},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			wakes := 0
			f := New(nil, nil, nil, "strata-system", func() { wakes++ })
			for i, s := range steps {
				before := wakes
				o := f.observe("hub", s.lease, s.restored, s.sighted, !s.appeared, t0.Add(s.at))
				fenced := o != nil && o.fenced
				if diff := cmp.Diff([]any{s.wantFenced, s.wantWake}, []any{fenced, wakes > before}); diff != "" {
					t.Errorf("step %d: fenced, woke (-want,+got):\n%s", i, diff)
				}
				wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: "u"}}}
				if held := f.Holds(wl) != ""; held != (s.wantFenced || s.wantHeld) {
					t.Errorf("step %d: Holds() = %t, want %t", i, held, s.wantFenced || s.wantHeld)
				}
				other := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.OriginLabel: "other-hub", strata.HubWorkloadUIDLabel: "u"}}}
				if f.Holds(other) == "" {
					t.Errorf("step %d: a copy of a hub whose Lease was never read is admitted", i)
				}
				local := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
				if f.Holds(local) != "" {
					t.Errorf("step %d: a workload of the worker's own is held", i)
				}
			}
		})
	}
}

// TestRevoked: a dispatch the hub's Lease revokes is held whether the hub
// is fenced or not, and stays revoked when the Lease is deleted; other
// copies of that hub are not.
func TestRevoked(t *testing.T) {
	f := New(nil, nil, nil, "strata-system", func() {})
	copyOf := func(uid, gen string) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: uid, strata.DispatchGenerationLabel: gen}}}
	}
	l := lease(t0, 10)
	l.Annotations = map[string]string{strata.RevokedDispatchesAnnotation: "u1/2,u3/1"}
	f.observe("hub", l, &observed{seen: t0}, nil, true, t0)
	for _, tc := range []struct {
		wl   *strata.Workload
		want bool
	}{{copyOf("u1", "2"), true}, {copyOf("u3", "1"), true}, {copyOf("u1", "3"), false}, {copyOf("u2", "2"), false}} {
		if held := f.Holds(tc.wl) != ""; held != tc.want {
			t.Errorf("Holds(%s/%s) = %t, want %t", tc.wl.Labels[strata.HubWorkloadUIDLabel], tc.wl.Labels[strata.DispatchGenerationLabel], held, tc.want)
		}
	}
	f.observe("hub", nil, nil, nil, true, t0.Add(time.Second))
	if f.Holds(copyOf("u1", "2")) == "" {
		t.Error("a deleted Lease released a revoked dispatch")
	}
}
