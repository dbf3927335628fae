package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
)

func TestQueueGauges(t *testing.T) {
	g := QueueGauges{
		AdmittedActive:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "a"}, []string{"cluster_queue"}),
		ReservingActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "r"}, []string{"cluster_queue"}),
		Usage:           prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "u"}, []string{"cluster_queue", "flavor", "resource"}),
		Reservation:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "v"}, []string{"cluster_queue", "flavor", "resource"}),
		NominalQuota:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n"}, []string{"cluster_queue", "flavor", "resource"}),
	}
	st := &strata.ClusterQueueStatus{
		AdmittedWorkloads: 3, ReservingWorkloads: 4,
		FlavorsUsage: []strata.FlavorUsage{{Name: "gpu", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}},
		FlavorsReservation: []strata.FlavorReservation{{Name: "gpu", Resources: []strata.ResourceReservation{
			{Name: corev1.ResourceCPU, Total: resource.MustParse("2")}}}},
	}
	flavors := []strata.FlavorQuotas{{Name: "gpu", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}
	g.Record("team-a", st, flavors)
	g.Record("team-b", &strata.ClusterQueueStatus{AdmittedWorkloads: 1}, nil)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"admitted", promtest.ToFloat64(g.AdmittedActive.WithLabelValues("team-a")), 3},
		{"reserving", promtest.ToFloat64(g.ReservingActive.WithLabelValues("team-a")), 4},
		{"usage in cores", promtest.ToFloat64(g.Usage.WithLabelValues("team-a", "gpu", "cpu")), 1.5},
		{"reservation", promtest.ToFloat64(g.Reservation.WithLabelValues("team-a", "gpu", "cpu")), 2},
		{"nominal quota", promtest.ToFloat64(g.NominalQuota.WithLabelValues("team-a", "gpu", "nvidia.com/gpu")), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// A queue recorded again without usage, and another forgotten: what
	// they no longer have goes.
	g.Record("team-a", &strata.ClusterQueueStatus{}, nil)
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
