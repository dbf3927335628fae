package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
)

func TestQueueGauges(t *testing.T) {
	g := &QueueGauges{
		AdmittedActive:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "a"}, []string{"cluster_queue"}),
		ReservingActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "r"}, []string{"cluster_queue"}),
		Usage:           prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "u"}, []string{"cohort", "cluster_queue", "flavor", "resource"}),
		Reservation:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "v"}, []string{"cohort", "cluster_queue", "flavor", "resource"}),
		NominalQuota:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n"}, []string{"cohort", "cluster_queue", "flavor", "resource"}),
	}
	st := &strata.ClusterQueueStatus{
		AdmittedWorkloads: 3, ReservingWorkloads: 4,
		FlavorsUsage: []strata.FlavorUsage{{Name: "gpu", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}},
		FlavorsReservation: []strata.FlavorReservation{{Name: "gpu", Resources: []strata.ResourceReservation{
			{Name: corev1.ResourceCPU, Total: resource.MustParse("2")}}}},
	}
	flavors := []strata.FlavorQuotas{{Name: "gpu", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}
	g.Record("team-a", "research", st, flavors)
	g.Record("team-b", "", &strata.ClusterQueueStatus{AdmittedWorkloads: 1}, nil)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"admitted", promtest.ToFloat64(g.AdmittedActive.WithLabelValues("team-a")), 3},
		{"reserving", promtest.ToFloat64(g.ReservingActive.WithLabelValues("team-a")), 4},
		{"usage in cores", promtest.ToFloat64(g.Usage.WithLabelValues("research", "team-a", "gpu", "cpu")), 1.5},
		{"reservation", promtest.ToFloat64(g.Reservation.WithLabelValues("research", "team-a", "gpu", "cpu")), 2},
		{"nominal quota", promtest.ToFloat64(g.NominalQuota.WithLabelValues("research", "team-a", "gpu", "nvidia.com/gpu")), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// A queue moved to another cohort: its series carry the new one only.
	g.Record("team-a", "prod", st, flavors)
	if n := promtest.CollectAndCount(g.Usage); n != 1 {
		t.Errorf("usage after a cohort change: %d series, want 1", n)
	}
	if got := promtest.ToFloat64(g.Usage.WithLabelValues("prod", "team-a", "gpu", "cpu")); got != 1.5 {
		t.Errorf("usage in the new cohort: %v, want 1.5", got)
	}
	// A queue recorded again without usage, and another forgotten: what
	// they no longer have goes.
	g.Record("team-a", "prod", &strata.ClusterQueueStatus{}, nil)
	g.Forget("team-b")
	for _, v := range []*prometheus.GaugeVec{g.Usage, g.Reservation, g.NominalQuota} {
		if n := promtest.CollectAndCount(v); n != 0 {
			t.Errorf("%d series left, want none", n)
		}
	}
	if n := promtest.CollectAndCount(g.AdmittedActive); n != 1 {
		t.Errorf("admitted: %d series, want team-a's only", n)
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
