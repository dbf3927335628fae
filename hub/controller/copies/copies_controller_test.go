package copies

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestClearRun(t *testing.T) {
	started := ptr.To(metav1.Unix(100, 0))
	running := batchv1.JobStatus{Active: 4, Ready: ptr.To[int32](3), Terminating: ptr.To[int32](1), StartTime: started}
	complete := batchv1.JobStatus{Succeeded: 4, StartTime: started, CompletionTime: ptr.To(metav1.Unix(200, 0)),
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	cases := map[string]struct {
		status      batchv1.JobStatus
		suspended   bool
		want        batchv1.JobStatus
		wantChanged bool
	}{
		"a refused copy's run leaves nothing active; the start time stays on a running Job": {
			status:      running,
			want:        batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0), StartTime: started},
			wantChanged: true,
		},
		"a suspended Job loses its start time too": {
			status:      running,
			suspended:   true,
			want:        batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0)},
			wantChanged: true,
		},
		"a copy that never started changes nothing": {
			status: batchv1.JobStatus{},
			want:   batchv1.JobStatus{},
		},
		"a finished Job keeps its final status": {
			status:    complete,
			suspended: true,
			want:      complete,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := *tc.status.DeepCopy()
			changed := ClearRun(&got, tc.suspended)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ClearRun() status (-want,+got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("ClearRun() = %t, want %t", changed, tc.wantChanged)
			}
		})
	}
}
