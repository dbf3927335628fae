package queue

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// milli is a ResourceList from name/quantity pairs as milli-units, so
// that results compare whatever their quantities' formats.
func milliOf(rl corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for r, q := range rl {
		out[r] = q.MilliValue()
	}
	return out
}

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestAdmissionFairSharingSample(t *testing.T) {
	cases := map[string]struct {
		halfLife      time.Duration
		prev, current corev1.ResourceList
		elapsed       time.Duration
		want          map[corev1.ResourceName]int64
	}{
		"no half-life: the usage of the moment": {
			prev: list("cpu", "10"), current: list("cpu", "2"), elapsed: time.Minute,
			want: map[corev1.ResourceName]int64{"cpu": 2000},
		},
		"one half-life: halfway": {
			halfLife: time.Hour, prev: list("cpu", "10"), current: list("cpu", "2"), elapsed: time.Hour,
			want: map[corev1.ResourceName]int64{"cpu": 6000},
		},
		"two half-lives: three quarters of the way": {
			halfLife: time.Hour, prev: list("cpu", "8"), current: list(), elapsed: 2 * time.Hour,
			want: map[corev1.ResourceName]int64{"cpu": 2000},
		},
		"a resource only now used, and one no longer used": {
			halfLife: time.Hour, prev: list("memory", "2Gi"), current: list("nvidia.com/gpu", "4"), elapsed: time.Hour,
			want: map[corev1.ResourceName]int64{"memory": 1 << 30 * 1000, "nvidia.com/gpu": 2000},
		},
		"nothing elapsed: unchanged": {
			halfLife: time.Hour, prev: list("cpu", "3"), current: list("cpu", "9"),
			want: map[corev1.ResourceName]int64{"cpu": 3000},
		},
		"what decays to nothing is left out": {
			prev: list("cpu", "3"), current: list(), elapsed: time.Second,
			want: map[corev1.ResourceName]int64{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := AdmissionFairSharing{HalfLife: tc.halfLife, Interval: time.Minute, on: true}
			if diff := cmp.Diff(tc.want, milliOf(a.Sample(tc.prev, tc.current, tc.elapsed))); diff != "" {
				t.Errorf("Sample (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAdmissionFairSharingPenalty(t *testing.T) {
	a := AdmissionFairSharing{HalfLife: time.Hour, Interval: time.Hour, on: true}
	if diff := cmp.Diff(map[corev1.ResourceName]int64{"cpu": 2000}, milliOf(a.Penalty(list("cpu", "4")))); diff != "" {
		t.Errorf("Penalty, interval = half-life (-want,+got):\n%s", diff)
	}
	a.HalfLife = 0
	if diff := cmp.Diff(map[corev1.ResourceName]int64{"cpu": 4000}, milliOf(a.Penalty(list("cpu", "4")))); diff != "" {
		t.Errorf("Penalty, no half-life (-want,+got):\n%s", diff)
	}
}

func consumed(lq *strata.LocalQueue, rl corev1.ResourceList) *strata.LocalQueue {
	lq.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{ConsumedResources: rl}}
	return lq
}

func lqWeighted(lq *strata.LocalQueue, w string) *strata.LocalQueue {
	lq.Spec.FairSharing = &strata.FairSharing{Weight: ptrQuantity(w)}
	return lq
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestAdmissionFairSharingUsage(t *testing.T) {
	lq := func() *strata.LocalQueue { return testutil.MakeLocalQueue("lq", "ns", "cq") }
	cases := map[string]struct {
		weights map[corev1.ResourceName]float64
		lq      *strata.LocalQueue
		penalty corev1.ResourceList
		want    float64
	}{
		"no status, no penalty":        {lq: lq(), want: 0},
		"cores and bytes, weight 1":    {lq: consumed(lq(), list("cpu", "1500m", "memory", "1Ki")), want: 1.5 + 1024},
		"resource weights":             {weights: map[corev1.ResourceName]float64{"memory": 0, "cpu": 2}, lq: consumed(lq(), list("cpu", "1500m", "memory", "1Ki")), want: 3},
		"the queue's weight divides":   {lq: lqWeighted(consumed(lq(), list("cpu", "6")), "4"), want: 1.5},
		"the penalty adds":             {lq: consumed(lq(), list("cpu", "6")), penalty: list("cpu", "2"), want: 8},
		"weight 0: infinite once used": {lq: lqWeighted(consumed(lq(), list("cpu", "1")), "0"), want: math.Inf(1)},
		"weight 0, nothing used":       {lq: lqWeighted(lq(), "0"), want: 0},
		"a LocalQueue that is gone":    {penalty: list("cpu", "1"), want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := AdmissionFairSharing{Weights: tc.weights, on: true}
			if got := a.Usage(tc.lq, tc.penalty); got != tc.want {
				t.Errorf("Usage = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNextFairSharingStatus(t *testing.T) {
	now := time.Date(2026, time.December, 4, 12, 0, 0, 0, time.UTC)
	status := func(at time.Time, rl corev1.ResourceList) *strata.LocalQueueFairSharingStatus {
		return &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{ConsumedResources: rl, LastUpdate: metav1.NewTime(at)}}
	}
	a := NewAdmissionFairSharing(&configv1beta1.AdmissionFairSharing{
		UsageHalfLifeTime: metav1.Duration{Duration: 10 * time.Minute}, UsageSamplingInterval: &metav1.Duration{Duration: 5 * time.Minute}})
	cases := map[string]struct {
		prev      *strata.LocalQueueFairSharingStatus
		current   corev1.ResourceList
		want      *strata.LocalQueueFairSharingStatus
		wantAfter time.Duration
	}{
		"first sample: one interval's share of what it holds (its entry penalties')": {
			current: list("cpu", "4"), want: status(now, list("cpu", "1172m")), wantAfter: 5 * time.Minute,
		},
		"first sample, nothing held": {
			want: status(now, nil), wantAfter: 5 * time.Minute,
		},
		"before the interval: kept, due when it has passed": {
			prev: status(now.Add(-2*time.Minute), list("cpu", "1")), current: list("cpu", "4"),
			want: status(now.Add(-2*time.Minute), list("cpu", "1")), wantAfter: 3 * time.Minute,
		},
		"after a half-life (a restart's gap counts as time)": {
			prev: status(now.Add(-10*time.Minute), list("cpu", "2")), current: list("cpu", "4"),
			want: status(now, list("cpu", "3")), wantAfter: 5 * time.Minute,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, after := a.NextFairSharingStatus(tc.prev, tc.current, now)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if after != tc.wantAfter {
				t.Errorf("next sample after %s, want %s", after, tc.wantAfter)
			}
		})
	}
}

func TestCompareByUsage(t *testing.T) {
	wl := func(name, lq string, prio int32, age int) *strata.Workload {
		w := testutil.MakeWorkload(name, "ns").Queue(lq).Obj()
		w.Spec.Priority = &prio
		w.CreationTimestamp = metav1.NewTime(time.Date(2026, time.December, 4, 12, 0, age, 0, time.UTC))
		return w
	}
	usage := map[string]float64{"a": 5, "b": 1}
	wls := []*strata.Workload{wl("a1", "a", 100, 0), wl("b2", "b", 0, 2), wl("b1", "b", 0, 1), wl("a2", "a", 200, 3)}
	slices.SortStableFunc(wls, CompareByUsage(func(w *strata.Workload) float64 { return usage[w.Spec.QueueName] }))
	var got []string
	for _, w := range wls {
		got = append(got, w.Name)
	}
	if diff := cmp.Diff([]string{"b1", "b2", "a2", "a1"}, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}
