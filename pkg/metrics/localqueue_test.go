package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

func TestLocalQueueGauges(t *testing.T) {
	g := buildLocalQueueGauges("t_")
	team := types.NamespacedName{Namespace: "ml", Name: "team"}
	other := types.NamespacedName{Namespace: "ml", Name: "other"}
	st := &strata.LocalQueueStatus{ReservingWorkloads: 3, AdmittedWorkloads: 2,
		Conditions: []metav1.Condition{{Type: strata.LocalQueueActive, Status: metav1.ConditionFalse}}}
	g.Record(team, LocalQueueState{Pending: map[string]int{"inadmissible": 4}, Status: st,
		Reservation: map[string]map[string]float64{"gpu": {"cpu": 3, "nvidia.com/gpu": 24}},
		Usage:       map[string]map[string]float64{"gpu": {"cpu": 2}}})
	g.Record(other, LocalQueueState{Status: &strata.LocalQueueStatus{}})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"inadmissible", promtest.ToFloat64(g.Pending.WithLabelValues("team", "ml", "inadmissible")), 4},
		{"active", promtest.ToFloat64(g.Pending.WithLabelValues("team", "ml", "active")), 0},
		{"reserving", promtest.ToFloat64(g.ReservingActive.WithLabelValues("team", "ml")), 3},
		{"admitted", promtest.ToFloat64(g.AdmittedActive.WithLabelValues("team", "ml")), 2},
		{"Active=False", promtest.ToFloat64(g.Status.WithLabelValues("team", "ml", "False")), 1},
		{"not Active=True", promtest.ToFloat64(g.Status.WithLabelValues("team", "ml", "True")), 0},
		{"no condition: Unknown", promtest.ToFloat64(g.Status.WithLabelValues("other", "ml", "Unknown")), 1},
		{"reservation", promtest.ToFloat64(g.Reservation.WithLabelValues("team", "ml", "gpu", "nvidia.com/gpu")), 24},
		{"usage", promtest.ToFloat64(g.Usage.WithLabelValues("team", "ml", "gpu", "cpu")), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// Recorded again without usage, and the other forgotten: what is no
	// longer there goes.
	g.Record(team, LocalQueueState{Status: st})
	g.Forget(other)
	for _, v := range []*prometheus.GaugeVec{g.Reservation, g.Usage} {
		if n := promtest.CollectAndCount(v); n != 0 {
			t.Errorf("%d series left, want none", n)
		}
	}
	if n := promtest.CollectAndCount(g.Status); n != 3 {
		t.Errorf("status: %d series, want team's 3", n)
	}
}
