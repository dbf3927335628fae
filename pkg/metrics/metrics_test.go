package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestQueueGauges(t *testing.T) {
	g := buildQueueGauges("t_")
	st := &strata.ClusterQueueStatus{
		AdmittedWorkloads: 3, ReservingWorkloads: 4,
		FlavorsUsage: []strata.FlavorUsage{{Name: "gpu", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}},
		FlavorsReservation: []strata.FlavorReservation{{Name: "gpu", Resources: []strata.ResourceReservation{
			{Name: corev1.ResourceCPU, Total: resource.MustParse("2")}}}},
		FairSharing: &strata.FairSharingStatus{WeightedShare: 250},
		Conditions:  []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue}},
	}
	flavors := []strata.FlavorQuotas{{Name: "gpu", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8"),
		BorrowingLimit: ptr.To(resource.MustParse("2")), LendingLimit: ptr.To(resource.MustParse("6"))}}}}
	teamA := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: strata.ClusterQueueSpec{Cohort: "research"}}
	teamB := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}
	g.Record(teamA, st, flavors)
	g.Record(teamB, &strata.ClusterQueueStatus{AdmittedWorkloads: 1,
		Conditions: []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse}}}, nil)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"admitted", promtest.ToFloat64(g.AdmittedActive.WithLabelValues("team-a")), 3},
		{"reserving", promtest.ToFloat64(g.ReservingActive.WithLabelValues("team-a")), 4},
		{"usage in cores", promtest.ToFloat64(g.Usage.WithLabelValues("research", "team-a", "gpu", "cpu")), 1.5},
		{"reservation", promtest.ToFloat64(g.Reservation.WithLabelValues("research", "team-a", "gpu", "cpu")), 2},
		{"nominal quota", promtest.ToFloat64(g.NominalQuota.WithLabelValues("research", "team-a", "gpu", "nvidia.com/gpu")), 8},
		{"borrowing limit", promtest.ToFloat64(g.BorrowingLimit.WithLabelValues("research", "team-a", "gpu", "nvidia.com/gpu")), 2},
		{"lending limit", promtest.ToFloat64(g.LendingLimit.WithLabelValues("research", "team-a", "gpu", "nvidia.com/gpu")), 6},
		{"weighted share", promtest.ToFloat64(g.WeightedShare.WithLabelValues("team-a", "research")), 250},
		{"team-a active", promtest.ToFloat64(g.Status.WithLabelValues("team-a", QueueActive)), 1},
		{"team-a not pending", promtest.ToFloat64(g.Status.WithLabelValues("team-a", QueuePending)), 0},
		{"team-a not terminating", promtest.ToFloat64(g.Status.WithLabelValues("team-a", QueueTerminating)), 0},
		{"team-b pending", promtest.ToFloat64(g.Status.WithLabelValues("team-b", QueuePending)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := promtest.CollectAndCount(g.Status); n != 6 {
		t.Errorf("status: %d series, want 3 per queue", n)
	}
	// A queue moved to another cohort: its series carry the new one only.
	teamA.Spec.Cohort = "prod"
	g.Record(teamA, st, flavors)
	for _, v := range []*prometheus.GaugeVec{g.Usage, g.BorrowingLimit, g.WeightedShare} {
		if n := promtest.CollectAndCount(v); n != 1 {
			t.Errorf("after a cohort change: %d series, want 1", n)
		}
	}
	if got := promtest.ToFloat64(g.Usage.WithLabelValues("prod", "team-a", "gpu", "cpu")); got != 1.5 {
		t.Errorf("usage in the new cohort: %v, want 1.5", got)
	}
	// A queue recorded again without usage, and another forgotten: what
	// they no longer have goes.
	g.Record(teamA, &strata.ClusterQueueStatus{}, nil)
	g.Forget("team-b")
	for _, v := range []*prometheus.GaugeVec{g.Usage, g.Reservation, g.NominalQuota, g.BorrowingLimit, g.LendingLimit, g.WeightedShare} {
		if n := promtest.CollectAndCount(v); n != 0 {
			t.Errorf("%d series left, want none", n)
		}
	}
	if n := promtest.CollectAndCount(g.AdmittedActive); n != 1 {
		t.Errorf("admitted: %d series, want team-a's only", n)
	}
	if n := promtest.CollectAndCount(g.Status); n != 3 {
		t.Errorf("status: %d series, want team-a's 3 only", n)
	}
}

func TestQueueStatus(t *testing.T) {
	now := metav1.Now()
	active := []metav1.Condition{{Type: "Active", Status: metav1.ConditionTrue}}
	inactive := []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse}}
	hold := strata.StopHold
	for _, c := range []struct {
		name       string
		deleting   bool
		stop       *strata.StopPolicy
		conditions []metav1.Condition
		want       string
	}{
		{name: "Active=True", conditions: active, want: QueueActive},
		{name: "Active=False", conditions: inactive, want: QueuePending},
		{name: "being deleted, whatever its condition", deleting: true, conditions: active, want: QueueTerminating},
		{name: "no Active condition yet", want: QueueActive},
		{name: "no Active condition, stopped", stop: &hold, want: QueuePending},
	} {
		t.Run(c.name, func(t *testing.T) {
			cq := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: strata.ClusterQueueSpec{StopPolicy: c.stop}}
			if c.deleting {
				cq.DeletionTimestamp = &now
			}
			if got := QueueStatus(cq, &strata.ClusterQueueStatus{Conditions: c.conditions}); got != c.want {
				t.Errorf("QueueStatus: %q, want %q", got, c.want)
			}
		})
	}
}

// TestSeriesReplaceLeavesNoGap checks, while a Replace sets its new
// values, that the series the group had are all still there: a scrape
// then finds the old values or the new, never none (a Reset before
// setting them again would leave the moment).
func TestSeriesReplaceLeavesNoGap(t *testing.T) {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g"}, []string{"queue", "flavor"})
	var s Series
	s.Replace("pass", func(put Put) {
		put(vec, 1, "a", "x")
		put(vec, 2, "a", "y")
		put(vec, 3, "b", "x")
	})
	s.Replace("pass", func(put Put) {
		if n := promtest.CollectAndCount(vec); n != 3 {
			t.Errorf("at the start of a Replace: %d series, want the 3 of the one before", n)
		}
		put(vec, 10, "a", "x")
		put(vec, 30, "b", "x")
		if got := promtest.ToFloat64(vec.WithLabelValues("a", "y")); got != 2 {
			t.Errorf("a series the Replace drops, before it ends: %v, want its old value 2", got)
		}
	})
	want := map[string]float64{"a/x": 10, "b/x": 30}
	if n := promtest.CollectAndCount(vec); n != len(want) {
		t.Errorf("after the Replace: %d series, want %d", n, len(want))
	}
	for k, v := range want {
		q, f, _ := strings.Cut(k, "/")
		if got := promtest.ToFloat64(vec.WithLabelValues(q, f)); got != v {
			t.Errorf("%s: %v, want %v", k, got, v)
		}
	}
	// Another group's series are its own.
	s.Replace("other", func(put Put) { put(vec, 5, "c", "x") })
	s.Replace("pass", func(Put) {})
	if n := promtest.CollectAndCount(vec); n != 1 {
		t.Errorf("after an empty Replace of pass: %d series, want other's only", n)
	}
	s.Drop("other")
	if n := promtest.CollectAndCount(vec); n != 0 {
		t.Errorf("after Drop: %d series, want none", n)
	}
}

func TestLifecycleForget(t *testing.T) {
	l := Lifecycle{
		QuotaReserved:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "q"}, []string{"cluster_queue"}),
		Admitted:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "a"}, []string{"cluster_queue"}),
		Evicted:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e"}, []string{"cluster_queue", "reason"}),
		QuotaReservedWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "qw"}, []string{"cluster_queue"}),
		AdmissionWait:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "aw"}, []string{"cluster_queue"}),
		ChecksWait:        prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cw"}, []string{"cluster_queue"}),
	}
	for _, q := range []string{"gone", "kept"} {
		l.QuotaReserved.WithLabelValues(q).Inc()
		l.Admitted.WithLabelValues(q).Inc()
		l.Evicted.WithLabelValues(q, "Preempted").Inc()
		l.Evicted.WithLabelValues(q, "PodsReadyTimeout").Inc()
		l.QuotaReservedWait.WithLabelValues(q).Observe(1)
		l.AdmissionWait.WithLabelValues(q).Observe(1)
		l.ChecksWait.WithLabelValues(q).Observe(1)
	}
	l.Forget("gone")
	for name, c := range map[string]prometheus.Collector{"reserved": l.QuotaReserved, "admitted": l.Admitted,
		"reserved wait": l.QuotaReservedWait, "admission wait": l.AdmissionWait, "checks wait": l.ChecksWait} {
		if n := promtest.CollectAndCount(c); n != 1 {
			t.Errorf("%s: %d series, want the kept queue's only", name, n)
		}
	}
	if n := promtest.CollectAndCount(l.Evicted); n != 2 {
		t.Errorf("evicted: %d series, want the kept queue's 2", n)
	}
}
