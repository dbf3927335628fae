package workercluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

func TestSwitchOf(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	earlier := &strata.ClusterSwitchStatus{From: "a", To: "b", Time: metav1.NewTime(now.Add(-time.Hour))}
	cases := map[string]struct {
		st   strata.WorkerClusterStatus
		id   string
		want *strata.ClusterSwitchStatus
	}{
		"the first connection":        {id: "a"},
		"the same cluster":            {st: strata.WorkerClusterStatus{ClusterID: "a"}, id: "a"},
		"an accepted switch":          {st: strata.WorkerClusterStatus{ClusterID: "a"}, id: "b", want: &strata.ClusterSwitchStatus{From: "a", To: "b", Time: metav1.NewTime(now)}},
		"a recorded switch stays":     {st: strata.WorkerClusterStatus{ClusterID: "b", ClusterSwitch: earlier}, id: "b", want: earlier},
		"a later switch replaces one": {st: strata.WorkerClusterStatus{ClusterID: "b", ClusterSwitch: earlier}, id: "c", want: &strata.ClusterSwitchStatus{From: "b", To: "c", Time: metav1.NewTime(now)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, switchOf(tc.st, tc.id, now)); diff != "" {
				t.Errorf("switchOf (-want,+got):\n%s", diff)
			}
		})
	}
}
