package nodefailure

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

func TestDetect(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cfg := func(onTermination bool) configv1beta1.NodeFailure {
		return configv1beta1.NodeFailure{
			NotReadyDelay:           &metav1.Duration{Duration: 30 * time.Second},
			ReplaceOnPodTermination: ptr.To(onTermination),
			ReplaceOnTaints:         ptr.To(true),
		}
	}
	node := func(ready corev1.ConditionStatus, since time.Duration, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-since)),
			}}},
		}
	}
	running := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	failed := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	terminating := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.NewTime(now))}, Spec: corev1.PodSpec{NodeName: "n1"}}
	pending := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "n1"}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	noExecute := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(now.Add(-10 * time.Second)))}
	noSchedule := corev1.Taint{Key: "degraded", Effect: corev1.TaintEffectNoSchedule}

	cases := map[string]struct {
		node        *corev1.Node
		pods        []*corev1.Pod
		tolerations []corev1.Toleration
		cfg         configv1beta1.NodeFailure
		want        Verdict
	}{
		"deleted": {node: nil, cfg: cfg(true), want: Verdict{Failed: true, Reason: "the node was deleted"}},
		"ready":   {node: node(corev1.ConditionTrue, time.Hour), pods: []*corev1.Pod{running}, cfg: cfg(true)},
		// User guide matrix, replace-on-pod-termination off: wait 30s of NotReady.
		"NotReady for 10s, termination trigger off: look again in 20s": {
			node: node(corev1.ConditionFalse, 10*time.Second), pods: []*corev1.Pod{failed}, cfg: cfg(false),
			want: Verdict{Recheck: 20 * time.Second},
		},
		"NotReady for 31s, termination trigger off": {
			node: node(corev1.ConditionFalse, 31*time.Second), pods: []*corev1.Pod{running}, cfg: cfg(false),
			want: Verdict{Failed: true, Reason: "NotReady for more than 30s"},
		},
		// Matrix, replace-on-pod-termination on: no wait once the pods are terminated.
		"NotReady with terminated and terminating pods, termination trigger on": {
			node: node(corev1.ConditionUnknown, time.Second), pods: []*corev1.Pod{failed, terminating}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "NotReady, and the workload's pods on it are terminated or terminating"},
		},
		"NotReady with a running pod, termination trigger on: wait for the delay": {
			node: node(corev1.ConditionUnknown, time.Second), pods: []*corev1.Pod{failed, running}, cfg: cfg(true),
			want: Verdict{Recheck: 29 * time.Second},
		},
		"untolerated NoExecute taint": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "untolerated NoExecute taint maintenance"},
		},
		"NoExecute tolerated for 60s, added 10s ago": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}},
			want:        Verdict{Recheck: 50 * time.Second},
		},
		"NoSchedule taint with the workload's pod unscheduled there": {
			node: node(corev1.ConditionTrue, time.Hour, noSchedule), pods: []*corev1.Pod{pending}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled"},
		},
		"NoSchedule taint with the workload's pod still running": {
			node: node(corev1.ConditionTrue, time.Hour, noSchedule), pods: []*corev1.Pod{running}, cfg: cfg(true),
		},
		"taints ignored when replaceOnTaints is off": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running},
			cfg: func() configv1beta1.NodeFailure { c := cfg(true); c.ReplaceOnTaints = ptr.To(false); return c }(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Detect(tc.node, tc.pods, tc.tolerations, tc.cfg, now)
			got.Since = time.Time{} // checked by the latency metric, not here
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Detect() (-want,+got):\n%s", diff)
			}
		})
	}
}
