package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

func TestAdmittedAt(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cond := func(status metav1.ConditionStatus, ltt string) *metav1.Condition {
		return &metav1.Condition{Type: strata.WorkloadAdmitted, Status: status, LastTransitionTime: metav1.NewTime(at(ltt))}
	}
	cases := map[string]struct {
		prev *metav1.Condition
		now  string
		want string
	}{
		"first admission":                        {now: "2030-01-02T03:04:05.7Z", want: "2030-01-02T03:04:05.7Z"},
		"evicted in an earlier second":           {prev: cond(metav1.ConditionFalse, "2030-01-02T03:04:04Z"), now: "2030-01-02T03:04:05.7Z", want: "2030-01-02T03:04:05.7Z"},
		"evicted in the same second":             {prev: cond(metav1.ConditionFalse, "2030-01-02T03:04:05Z"), now: "2030-01-02T03:04:05.7Z", want: "2030-01-02T03:04:06Z"},
		"evicted in the same second, fractional": {prev: cond(metav1.ConditionFalse, "2030-01-02T03:04:05.9Z"), now: "2030-01-02T03:04:05.7Z", want: "2030-01-02T03:04:06Z"},
		// An eviction stamped by a clock ahead of this one.
		"evicted later than now": {prev: cond(metav1.ConditionFalse, "2030-01-02T03:04:09Z"), now: "2030-01-02T03:04:05.7Z", want: "2030-01-02T03:04:10Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := admittedAt(tc.prev, at(tc.now))
			if diff := cmp.Diff(at(tc.want), got.Time); diff != "" {
				t.Errorf("admittedAt (-want,+got):\n%s", diff)
			}
			// What the API server keeps, to the second, differs from the
			// condition before it.
			if tc.prev != nil && got.Truncate(time.Second).Equal(tc.prev.LastTransitionTime.Truncate(time.Second)) {
				t.Errorf("admittedAt = %v: the same second as the condition before it", got)
			}
		})
	}
}
