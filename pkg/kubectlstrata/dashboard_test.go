package kubectlstrata

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8001":        true,
		"localhost:8001":        true,
		"[::1]:8001":            true,
		"127.0.0.1":             true,
		"dashboard.example:80":  false,
		"10.0.0.1:8001":         false,
		"127.0.0.1.nip.io:8001": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestCrossSite(t *testing.T) {
	cases := map[string]struct {
		headers map[string]string
		want    bool
	}{
		"the dashboard's own page":            {headers: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8001"}},
		"typed in the address bar":            {headers: map[string]string{"Sec-Fetch-Site": "none"}},
		"curl":                                {},
		"another site's page":                 {headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: true},
		"another site's page, an old browser": {headers: map[string]string{"Origin": "https://evil.example"}, want: true},
		"another port on localhost":           {headers: map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9000"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:8001/api/queues", nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := crossSite(r); got != tc.want {
				t.Errorf("crossSite = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewWorkloadRows(t *testing.T) {
	wl := func(name string, set func(*strata.Workload)) strata.Workload {
		w := strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: strata.WorkloadSpec{QueueName: "team-a"}}
		w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, Controller: new(true)}}
		set(&w)
		return w
	}
	cond := func(w *strata.Workload, t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
	}
	got := newWorkloadRows([]strata.Workload{
		wl("running", func(w *strata.Workload) {
			w.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "gpu"}
			w.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
			cond(w, strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted on w1")
		}),
		wl("waits", func(w *strata.Workload) {
			cond(w, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "no rack holds 8 pods")
		}),
		wl("sent", func(w *strata.Workload) {
			w.Status.Placement = &strata.Placement{Cluster: "w2", Flavor: "gpu"}
			cond(w, strata.WorkloadAdmitted, metav1.ConditionFalse, "Dispatched", "waiting for w2")
		}),
		wl("bad", func(w *strata.Workload) {
			cond(w, strata.WorkloadInvalid, metav1.ConditionTrue, "InvalidTopologyRequest", "two levels")
		}),
		wl("done", func(w *strata.Workload) {
			cond(w, strata.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "")
			w.OwnerReferences = nil
		}),
		wl("checked", func(w *strata.Workload) {
			w.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "gpu"}}}
			w.Status.AdmissionChecks = []strata.AdmissionCheckState{{Name: "budget", State: strata.CheckStatePending}}
			cond(w, strata.WorkloadAdmitted, metav1.ConditionFalse, strata.WaitingForAdmissionChecks, "quota reserved; waiting for admission checks budget to be Ready")
		}),
		wl("split", func(w *strata.Workload) {
			w.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{
				{Name: "driver", Flavor: "cpu"}, {Name: "workers", Flavor: "a100"}, {Name: "evaluators", Flavor: "cpu"}}}
			cond(w, strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted on flavors")
		}),
	})
	want := []WorkloadRowView{
		{Namespace: "ml", Name: "checked", Job: "job/checked", LocalQueue: "team-a", State: stateReserved, Flavor: "gpu", Reason: strata.WaitingForAdmissionChecks,
			Message: "quota reserved; waiting for admission checks budget to be Ready"},
		{Namespace: "ml", Name: "sent", Job: "job/sent", LocalQueue: "team-a", State: stateDispatched, Cluster: "w2", Flavor: "gpu", Reason: "Dispatched", Message: "waiting for w2"},
		{Namespace: "ml", Name: "waits", Job: "job/waits", LocalQueue: "team-a", State: statePending, Reason: "Pending", Message: "no rack holds 8 pods"},
		{Namespace: "ml", Name: "bad", Job: "job/bad", LocalQueue: "team-a", State: stateInvalid, Reason: "InvalidTopologyRequest", Message: "two levels"},
		{Namespace: "ml", Name: "done", LocalQueue: "team-a", State: stateFinished},
		{Namespace: "ml", Name: "running", Job: "job/running", LocalQueue: "team-a", State: stateAdmitted, Cluster: "w1", Flavor: "gpu", Reason: "Admitted", Message: "admitted on w1"},
		{Namespace: "ml", Name: "split", Job: "job/split", LocalQueue: "team-a", State: stateAdmitted, Flavor: "cpu, a100", Reason: "Admitted", Message: "admitted on flavors"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newWorkloadRows (-want +got):\n%s", diff)
	}
}

func TestPlacedDomains(t *testing.T) {
	const rack, host = "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
	wl := &strata.Workload{Status: strata.WorkloadStatus{
		Placement: &strata.Placement{TopologyHint: `{"main":{"levels":["` + rack + `"],"slices":[{"domainCount":2,"valuesPerLevel":[{"individual":{"roots":["r1","r2"]}}],"podCounts":{"universal":2}}]}}`},
		Admission: &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: "main", TopologyAssignment: &strata.TopologyAssignment{
			Levels: []string{host}, Slices: []strata.TopologyAssignmentSlice{{DomainCount: 1, ValuesPerLevel: []strata.TopologyAssignmentSliceLevelValues{{Universal: new("n1")}}, PodCounts: strata.TopologyAssignmentSlicePodCounts{Universal: new(int32(4))}}},
		}}}},
	}}
	want := []string{rack + "=r1", rack + "=r2", host + "=n1"}
	if diff := cmp.Diff(want, placedDomains(wl)); diff != "" {
		t.Errorf("placedDomains (-want +got):\n%s", diff)
	}
	// The hub's hints name every level down to the rack: a rack is told
	// from a rack of the same name in another block.
	const block = "cloud.provider.com/topology-block"
	wl.Status.Admission = nil
	wl.Status.Placement.TopologyHint = `{"main":{"levels":["` + block + `","` + rack + `"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"b2"},{"universal":"r1"}],"podCounts":{"universal":2}}]}}`
	if diff := cmp.Diff([]string{block + "=b2," + rack + "=r1"}, placedDomains(wl)); diff != "" {
		t.Errorf("placedDomains of a block and rack hint (-want +got):\n%s", diff)
	}
}

func TestNewQueueQuota(t *testing.T) {
	q := resource.MustParse
	cq := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "training"}, Spec: strata.ClusterQueueSpec{Cohort: "research",
		ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu", "nvidia.com/gpu"}, Flavors: []strata.FlavorQuotas{
			{Name: "a100", Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: q("64")}, {Name: "nvidia.com/gpu", NominalQuota: q("16"), BorrowingLimit: new(q("8"))}}},
		}}}},
		Status: strata.ClusterQueueStatus{AdmittedWorkloads: 3, PendingWorkloads: 2, FlavorsReservation: []strata.FlavorReservation{
			{Name: "a100", Resources: []strata.ResourceReservation{{Name: "nvidia.com/gpu", Total: q("20"), Borrowed: q("4")}}},
		}},
	}
	want := QueueQuotaView{ClusterQueue: "training", Cohort: "research", Admitted: 3, Pending: 2, Resources: []QuotaRowView{
		{Flavor: "a100", Resource: "cpu", Nominal: q("64")},
		{Flavor: "a100", Resource: "nvidia.com/gpu", Nominal: q("16"), BorrowingLimit: new(q("8")), Used: q("20"), Borrowed: q("4")},
	}}
	if diff := cmp.Diff(want, newQueueQuota(cq)); diff != "" {
		t.Errorf("newQueueQuota (-want +got):\n%s", diff)
	}
}

func TestEventsOf(t *testing.T) {
	at := func(s int) metav1.MicroTime { return metav1.MicroTime{Time: time.Unix(int64(1000+s), 0)} }
	ev := func(kind, name, reason string, s int) eventsv1.Event {
		return eventsv1.Event{EventTime: at(s), Type: "Normal", Reason: reason, Regarding: corev1.ObjectReference{Kind: kind, Name: name}, Note: reason + " note"}
	}
	repeated := ev("Workload", "job-a", "Pending", 1)
	repeated.Series = &eventsv1.EventSeries{Count: 4, LastObservedTime: at(9)}
	earlier := ev("Job", "a", "Preempted", 7) // of a Job a deleted before this one
	earlier.Regarding.UID = "old-uid"
	mine := ev("Job", "a", "Admitted", 5)
	mine.Regarding.UID = "job-uid"
	got := eventsOf([]eventsv1.Event{mine, ev("Job", "b", "Admitted", 6), repeated, earlier},
		map[string]types.UID{"Job/a": "job-uid", "Workload/job-a": ""})
	want := []EventView{
		{Time: metav1.Time{Time: at(9).Time}, Type: "Normal", Reason: "Pending", Object: "Workload/job-a", Note: "Pending note", Count: 4},
		{Time: metav1.Time{Time: at(5).Time}, Type: "Normal", Reason: "Admitted", Object: "Job/a", Note: "Admitted note"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("eventsOf (-want +got):\n%s", diff)
	}
}

func TestNewLocalQueueRows(t *testing.T) {
	lq := func(ns, name, cq string, pending, admitted int32, inactive string) strata.LocalQueue {
		q := *testutil.MakeLocalQueue(name, ns, cq)
		q.Status.PendingWorkloads, q.Status.AdmittedWorkloads = pending, admitted
		if inactive != "" {
			q.Status.Conditions = []metav1.Condition{{Type: strata.LocalQueueActive, Status: metav1.ConditionFalse, Reason: "ClusterQueueNotFound", Message: inactive}}
		} else {
			q.Status.Conditions = []metav1.Condition{{Type: strata.LocalQueueActive, Status: metav1.ConditionTrue, Reason: "Ready"}}
		}
		return q
	}
	got := newLocalQueueRows([]strata.LocalQueue{
		lq("web", "team-b", "training", 1, 0, ""),
		lq("ml", "team-a", "training", 2, 3, ""),
		lq("ml", "lost", "gone", 4, 0, "ClusterQueue gone does not exist"),
	})
	want := map[string][]LocalQueueRowView{
		"training": {{Namespace: "ml", Name: "team-a", Pending: 2, Admitted: 3}, {Namespace: "web", Name: "team-b", Pending: 1}},
		"gone":     {{Namespace: "ml", Name: "lost", Pending: 4, Problem: "ClusterQueue gone does not exist"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newLocalQueueRows (-want +got):\n%s", diff)
	}
}
