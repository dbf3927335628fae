package intake

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGoingPods(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 28, 16, 40, 0, 0, time.UTC))
	pod := func(name, node string, phase corev1.PodPhase, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &since
		}
		return p
	}
	many := make([]corev1.Pod, 12)
	for i := range many {
		many[i] = pod(fmt.Sprintf("p-%02d", i), "n1", corev1.PodRunning, false)
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want string
	}{
		"none": {},
		"sorted, Terminating first said with since when": {
			pods: []corev1.Pod{pod("train-1", "n2", corev1.PodRunning, false), pod("train-0", "n1", corev1.PodRunning, true)},
			want: "train-0 (Terminating since 2026-11-28T16:40:00Z, node n1), train-1 (Running, node n2)",
		},
		"not scheduled, no phase yet": {
			pods: []corev1.Pod{pod("p", "", "", false)},
			want: "p (Pending, not scheduled)",
		},
		"at most 10": {
			pods: many,
			want: "p-00 (Running, node n1), p-01 (Running, node n1), p-02 (Running, node n1), p-03 (Running, node n1), p-04 (Running, node n1), " +
				"p-05 (Running, node n1), p-06 (Running, node n1), p-07 (Running, node n1), p-08 (Running, node n1), p-09 (Running, node n1), and 2 more",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, GoingPods(tc.pods)); diff != "" {
				t.Errorf("GoingPods (-want +got):\n%s", diff)
			}
		})
	}
}
