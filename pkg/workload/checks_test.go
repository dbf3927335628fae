package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

func TestChecksOf(t *testing.T) {
	cases := map[string]struct {
		spec    strata.ClusterQueueSpec
		flavors []string
		want    []string
	}{
		"none": {},
		"every workload": {
			spec:    strata.ClusterQueueSpec{AdmissionChecks: []string{"prov", "policy"}},
			flavors: []string{"gpu"},
			want:    []string{"prov", "policy"},
		},
		"on the admission's flavors only": {
			spec: strata.ClusterQueueSpec{AdmissionChecksStrategy: &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{
				{Name: "prov", OnFlavors: []string{"spot"}},
				{Name: "policy"},
				{Name: "quota", OnFlavors: []string{"gpu", "cpu"}},
			}}},
			flavors: []string{"cpu"},
			want:    []string{"policy", "quota"},
		},
		"a workload split over flavors takes each one's": {
			spec: strata.ClusterQueueSpec{AdmissionChecksStrategy: &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{
				{Name: "prov", OnFlavors: []string{"spot"}},
				{Name: "quota", OnFlavors: []string{"gpu"}},
			}}},
			flavors: []string{"gpu", "spot"},
			want:    []string{"prov", "quota"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ChecksOf(&strata.ClusterQueue{Spec: tc.spec}, tc.flavors)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ChecksOf (-want +got):\n%s", diff)
			}
		})
	}
	cq := &strata.ClusterQueue{Spec: strata.ClusterQueueSpec{AdmissionChecksStrategy: &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{
		{Name: "prov", OnFlavors: []string{"spot"}}, {Name: "policy"}}}}}
	if diff := cmp.Diff([]string{"prov", "policy"}, QueueChecks(cq)); diff != "" {
		t.Errorf("QueueChecks (-want +got):\n%s", diff)
	}
}

func TestVerdict(t *testing.T) {
	st := func(name string, s strata.CheckState, msg string) strata.AdmissionCheckState {
		return strata.AdmissionCheckState{Name: name, State: s, Message: msg}
	}
	cases := map[string]struct {
		states  []strata.AdmissionCheckState
		want    CheckVerdict
		message string
	}{
		"no checks":       {want: ChecksReady},
		"all ready":       {states: []strata.AdmissionCheckState{st("a", strata.CheckStateReady, ""), st("b", strata.CheckStateReady, "ok")}, want: ChecksReady, message: "admission check a; admission check b: ok"},
		"one pending":     {states: []strata.AdmissionCheckState{st("a", strata.CheckStateReady, ""), st("b", strata.CheckStatePending, "")}, want: ChecksWait, message: "admission check b"},
		"retry over wait": {states: []strata.AdmissionCheckState{st("a", strata.CheckStateRetry, "no capacity"), st("b", strata.CheckStatePending, "")}, want: ChecksRetry, message: "admission check a: no capacity"},
		"reject over all": {states: []strata.AdmissionCheckState{st("a", strata.CheckStateRetry, ""), st("b", strata.CheckStateRejected, "too big")}, want: ChecksRejected, message: "admission check b: too big"},
		"two rejections":  {states: []strata.AdmissionCheckState{st("a", strata.CheckStateRejected, "x"), st("b", strata.CheckStateRejected, "y")}, want: ChecksRejected, message: "admission check a: x; admission check b: y"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, message := Verdict(tc.states)
			if got != tc.want || message != tc.message {
				t.Errorf("Verdict = %v, %q; want %v, %q", got, message, tc.want, tc.message)
			}
		})
	}
}

func TestSyncChecksAndAwaiting(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	wl := &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "q"}}}
	if AwaitingChecks(wl) {
		t.Fatalf("a reservation without checks awaits none")
	}
	wl.Status.AdmissionChecks = PendingChecks(nil, []string{"a", "b"}, t0)
	if !AwaitingChecks(wl) {
		t.Fatalf("Pending checks: awaiting")
	}
	wl.Status.AdmissionChecks[0].State = strata.CheckStateReady
	// b removed from the queue, c added: a keeps Ready, c is Pending.
	if !SyncChecks(wl, []string{"a", "c"}, t1) {
		t.Fatalf("SyncChecks changed nothing")
	}
	want := []strata.AdmissionCheckState{
		{Name: "a", State: strata.CheckStateReady, LastTransitionTime: metav1.NewTime(t0)},
		{Name: "c", State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(t1)},
	}
	if diff := cmp.Diff(want, wl.Status.AdmissionChecks); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if SyncChecks(wl, []string{"a", "c"}, t1) {
		t.Errorf("SyncChecks changed states already in sync")
	}
	wl.Status.AdmissionChecks[1].State = strata.CheckStateReady
	if AwaitingChecks(wl) {
		t.Errorf("every check Ready: not awaiting")
	}
	// A new reservation starts every check Pending again, keeping one
	// already Pending as it was, and the others' messages (a reservation
	// made before the release was written: as ReleaseChecks leaves them).
	old := []strata.AdmissionCheckState{{Name: "a", State: strata.CheckStateReady, Message: "provisioned", PodSetUpdates: []strata.PodSetUpdate{{Name: "main"}}},
		{Name: "c", State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(t0), Message: "queued"}}
	got := PendingChecks(old, []string{"a", "c"}, t1)
	want = []strata.AdmissionCheckState{
		{Name: "a", State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(t1), Message: "provisioned"},
		{Name: "c", State: strata.CheckStatePending, LastTransitionTime: metav1.NewTime(t0), Message: "queued"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PendingChecks (-want +got):\n%s", diff)
	}
}

func TestReserveForChecks(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	wl := &strata.Workload{Status: strata.WorkloadStatus{
		Admission: &strata.Admission{ClusterQueue: "q"},
		Conditions: []metav1.Condition{
			{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted by ClusterQueue q on flavor gpu", LastTransitionTime: metav1.NewTime(t1)},
			// Left True by an earlier reservation.
			{Type: strata.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: metav1.NewTime(t0)},
		},
	}}
	ReserveForChecks(wl, []string{"prov"}, t1)
	got := map[string][3]string{}
	for _, c := range wl.Status.Conditions {
		got[c.Type] = [3]string{string(c.Status), c.Reason, c.Message}
	}
	want := map[string][3]string{
		strata.WorkloadAdmitted:      {"False", strata.WaitingForAdmissionChecks, "quota reserved; waiting for admission checks prov to be Ready"},
		strata.WorkloadQuotaReserved: {"True", "QuotaReserved", "quota reserved by ClusterQueue q on flavor gpu"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if at := ReservedAt(wl); !at.Equal(t1) {
		t.Errorf("ReservedAt = %v, want this reservation's %v", at, t1)
	}
	if !AwaitingChecks(wl) {
		t.Errorf("reserved for a Pending check: awaiting")
	}
}
