package localqueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
)

// TestGaugeState: pending workloads by status, what those holding quota
// reserve and what the admitted ones use, per flavor; a finished one
// counts nowhere.
func TestGaugeState(t *testing.T) {
	admission := func(flavor, cpu string) *strata.Admission {
		return &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{
			{Name: "main", Flavor: flavor, Count: 1, ResourceUsage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	}
	condition := func(t, status, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	wls := []*strata.Workload{
		{}, // not tried yet
		{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{condition(strata.WorkloadAdmitted, "False", "Pending")}}},
		{Status: strata.WorkloadStatus{Admission: admission("a", "2"), Conditions: []metav1.Condition{condition(strata.WorkloadAdmitted, "True", "Admitted")}}},
		{Status: strata.WorkloadStatus{Admission: admission("a", "500m"), AdmissionChecks: []strata.AdmissionCheckState{{Name: "prov", State: strata.CheckStatePending}}, Conditions: []metav1.Condition{
			condition(strata.WorkloadQuotaReserved, "True", "QuotaReserved"),
			condition(strata.WorkloadAdmitted, "False", strata.WaitingForAdmissionChecks)}}},
		{Status: strata.WorkloadStatus{Admission: admission("b", "8"), Conditions: []metav1.Condition{
			condition(strata.WorkloadAdmitted, "True", "Admitted"), condition(strata.WorkloadFinished, "True", "Succeeded")}}},
	}
	st := &strata.LocalQueueStatus{}
	got := gaugeState(st, wls, false, true)
	want := metrics.LocalQueueState{
		Pending:     map[string]int{queue.PendingActive: 1, queue.PendingInadmissible: 1},
		Status:      st,
		Reservation: map[string]map[string]float64{"a": {"cpu": 2.5}},
		Usage:       map[string]map[string]float64{"a": {"cpu": 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gaugeState (-want +got):\n%s", diff)
	}
	if got := gaugeState(st, wls, true, true).Pending; got[queue.PendingActive] != 2 {
		t.Errorf("under StrictFIFO: pending %v, want both active", got)
	}
	if got := gaugeState(st, wls, true, false).Pending; got[queue.PendingInadmissible] != 2 {
		t.Errorf("the queue unable to admit: pending %v, want both inadmissible (as Kueue)", got)
	}
}
