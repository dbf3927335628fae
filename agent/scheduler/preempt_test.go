package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// TestMayPreempt: a workload submitted on the worker preempts as its
// queue allows; a hub copy only when the hub marked it, and only up to the
// priority the hub chose.
func TestMayPreempt(t *testing.T) {
	preempting := &strata.ClusterQueue{Spec: strata.ClusterQueueSpec{Preemption: &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}}}
	never := &strata.ClusterQueue{}
	copyLabels := map[string]string{strata.HubWorkloadUIDLabel: "uid"}
	cases := map[string]struct {
		cq          *strata.ClusterQueue
		labels      map[string]string
		annotations map[string]string
		want        bool
		upTo        *int32
	}{
		"own workload":                   {cq: preempting, want: true},
		"own workload, queue never":      {cq: never},
		"hub copy without a mark":        {cq: preempting, labels: copyLabels},
		"hub copy marked":                {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}, want: true, upTo: ptr.To[int32](10)},
		"hub copy marked, negative":      {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "-5"}, want: true, upTo: ptr.To[int32](-5)},
		"hub copy with a malformed mark": {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "ten"}},
		"hub copy marked, queue never":   {cq: never, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}},
		"own workload with a stray mark": {cq: preempting, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			got, upTo := mayPreempt(tc.cq, wl)
			if got != tc.want {
				t.Errorf("mayPreempt = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.upTo, upTo); diff != "" {
				t.Errorf("up to (-want,+got):\n%s", diff)
			}
		})
	}
}
