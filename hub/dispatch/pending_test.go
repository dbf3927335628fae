package dispatch

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// TestDeactivatedMessage: an inactive hub Workload says why: the user's
// hold, or its copies' evictions past a worker's backoffLimitCount.
func TestDeactivatedMessage(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "job-train", Namespace: "ml"}
	cases := map[string]struct {
		attempts []strata.PlacementAttempt
		want     []string
		not      []string
	}{
		"the user's hold": {
			want: []string{"the Workload is deactivated (spec.active: false)", "kubectl patch workload job-train -n ml"},
			not:  []string{strata.RequeuingLimitExceeded},
		},
		"an earlier refusal for another reason": {
			attempts: []strata.PlacementAttempt{{Cluster: "w1", Reason: strata.RequeuingLimitExceeded}, {Cluster: "w2", Reason: "Inadmissible"}},
			want:     []string{"the Workload is deactivated (spec.active: false)"},
			not:      []string{strata.RequeuingLimitExceeded},
		},
		"past a worker's backoffLimitCount": {
			attempts: []strata.PlacementAttempt{{Cluster: "w1", Reason: strata.EvictedByPodsReadyTimeout}, {Cluster: "w2", Reason: strata.RequeuingLimitExceeded}},
			want:     []string{"spec.active: false, RequeuingLimitExceeded", "on w2", "kubectl patch workload job-train -n ml"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: meta}
			if tc.attempts != nil {
				wl.Status.Placement = &strata.Placement{Attempts: tc.attempts}
			}
			got := deactivatedMessage(wl)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("deactivatedMessage() = %q, want it to say %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("deactivatedMessage() = %q, want it not to say %q", got, n)
				}
			}
		})
	}
}

// TestChargedQueue: an admitted Workload stays charged to the ClusterQueue
// that admitted it when its LocalQueue is pointed elsewhere or deleted (as
// Kueue's admissions); one not admitted yet goes with its LocalQueue.
func TestChargedQueue(t *testing.T) {
	admittedBy := func(cq string) *strata.Workload {
		return &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: cq}}}
	}
	now := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	cases := map[string]struct {
		wl   *strata.Workload
		cq   *strata.ClusterQueue
		want string
	}{
		"admitted, its LocalQueue repointed": {wl: admittedBy("old"), cq: now, want: "old"},
		"admitted, its LocalQueue gone":      {wl: admittedBy("old"), want: "old"},
		"not admitted yet":                   {wl: &strata.Workload{}, cq: now, want: "new"},
		"not admitted, no queue":             {wl: &strata.Workload{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := chargedQueue(tc.wl, tc.cq); got != tc.want {
				t.Errorf("chargedQueue() = %q, want %q", got, tc.want)
			}
		})
	}
}
