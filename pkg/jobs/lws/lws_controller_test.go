package lws

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	strata "strata.dev/strata/api/v1beta1"
)

func TestPodEvents(t *testing.T) {
	pod := func(index string, gated bool, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{NameLabel: "set", WorkerIndexLabel: index}}}
		for k, v := range labels {
			p.Labels[k] = v
		}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}}
		}
		return p
	}
	labelled := func(podSet string) map[string]string {
		return map[string]string{strata.WorkloadLabel: "set-0", strata.PodSetLabel: podSet}
	}
	cases := map[string]struct {
		old, cur *corev1.Pod
		want     bool
	}{
		"a gated worker the set's controller made": {cur: pod("1", true, nil), want: true},
		"a leader":                    {cur: pod("0", false, labelled(Leader)), want: true},
		"a worker labelled":           {old: pod("1", true, nil), cur: pod("1", true, labelled(Main)), want: false},
		"a labelled worker released":  {old: pod("1", true, labelled(Main)), cur: pod("1", false, labelled(Main)), want: false},
		"a labelled worker annotated": {old: pod("1", true, labelled(Main)), cur: pod("1", true, labelled(Main)), want: false},
		"its pod set label changed":   {old: pod("1", true, labelled(Main)), cur: pod("1", true, labelled(Worker)), want: true},
		"a released pod relabelled":   {old: pod("1", false, labelled(Main)), cur: pod("1", false, labelled(Worker)), want: false},
		"a pod of no set":             {cur: &corev1.Pod{}, want: false},
	}
	f := podEvents()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got bool
			if tc.old == nil {
				got = f.Create(event.CreateEvent{Object: tc.cur})
			} else {
				got = f.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passed (-want +got):\n%s", diff)
			}
		})
	}
}
