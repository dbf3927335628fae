package copies

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

func TestOrphaned(t *testing.T) {
	copyOf := func(uid, gen string) *batchv1.Job {
		labels := map[string]string{strata.OriginLabel: "hub"}
		if uid != "" {
			labels[strata.HubWorkloadUIDLabel] = uid
			labels[strata.DispatchGenerationLabel] = gen
		}
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: labels}}
	}
	hubWL := func(uid, cluster string, gen int64) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: strata.WorkloadStatus{
			Placement: &strata.Placement{Cluster: cluster, DispatchGeneration: gen},
		}}
	}
	cases := map[string]struct {
		copy *batchv1.Job
		wl   *strata.Workload
		want bool
	}{
		"the current dispatch":                      {copyOf("u1", "2"), hubWL("u1", "w1", 2), false},
		"no hub Workload":                           {copyOf("u1", "2"), nil, true},
		"another Workload of the name":              {copyOf("u0", "1"), hubWL("u1", "w1", 1), true},
		"no dispatch labels":                        {copyOf("", ""), hubWL("u1", "w1", 1), true},
		"an earlier dispatch":                       {copyOf("u1", "1"), hubWL("u1", "w1", 2), true},
		"the dispatch moved to another worker":      {copyOf("u1", "2"), hubWL("u1", "w2", 2), true},
		"the dispatch was undone":                   {copyOf("u1", "2"), hubWL("u1", "", 2), true},
		"a dispatch the informer does not show yet": {copyOf("u1", "3"), hubWL("u1", "", 2), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Orphaned(tc.copy, "w1", tc.wl); got != tc.want {
				t.Errorf("Orphaned() = %t, want %t", got, tc.want)
			}
		})
	}
}
