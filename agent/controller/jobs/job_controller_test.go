package jobs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestFinished(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status}
	}
	cases := map[string]struct {
		conditions []batchv1.JobCondition
		wantDone   bool
		wantReason string
	}{
		"running":                      {},
		"suspended":                    {conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}},
		"complete":                     {conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue)}, wantDone: true, wantReason: "Succeeded"},
		"failed":                       {conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue), cond(batchv1.JobFailed, corev1.ConditionTrue)}, wantDone: true, wantReason: "Failed"},
		"failure target only: not yet": {conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}},
		"complete=False":               {conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionFalse)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done, reason := finished(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conditions}})
			if diff := cmp.Diff([]any{tc.wantDone, tc.wantReason}, []any{done, reason}); diff != "" {
				t.Errorf("finished() (-want,+got):\n%s", diff)
			}
		})
	}
}
