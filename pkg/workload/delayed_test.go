package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestSecondPassRetry(t *testing.T) {
	first := time.Date(2026, time.December, 6, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		now       time.Time
		attempts  int
		wantNext  time.Time
		wantEvict bool
	}{
		"first failure: the base delay":   {now: first, attempts: 1, wantNext: first.Add(10 * time.Second)},
		"second: doubled":                 {now: first.Add(10 * time.Second), attempts: 2, wantNext: first.Add(30 * time.Second)},
		"fifth: capped at the limit":      {now: first.Add(150 * time.Second), attempts: 5, wantNext: first.Add(5 * time.Minute)},
		"at the limit: evicted":           {now: first.Add(5 * time.Minute), attempts: 6, wantEvict: true},
		"many attempts: no overflow":      {now: first.Add(time.Minute), attempts: 200, wantNext: first.Add(5 * time.Minute)},
		"just before the limit: one more": {now: first.Add(5*time.Minute - time.Second), attempts: 6, wantNext: first.Add(5 * time.Minute)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next, evict := SecondPassRetry(first, tc.now, tc.attempts)
			if evict != tc.wantEvict || !next.Equal(tc.wantNext) {
				t.Errorf("SecondPassRetry() = %v, %v; want %v, %v", next, evict, tc.wantNext, tc.wantEvict)
			}
		})
	}
}

func TestNeedsSecondPass(t *testing.T) {
	pending := ptr.To(strata.DelayedTopologyRequestPending)
	reserved := func(delayed *strata.DelayedTopologyRequestState, assigned bool, states ...strata.CheckState) *strata.Workload {
		wl := &strata.Workload{}
		psa := strata.PodSetAssignment{Name: "main", Flavor: "f", Count: 1, DelayedTopologyRequest: delayed}
		if assigned {
			psa.TopologyAssignment = &strata.TopologyAssignment{Levels: []string{strata.HostnameLabel}}
		}
		wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{psa}}
		for i, s := range states {
			wl.Status.AdmissionChecks = append(wl.Status.AdmissionChecks, strata.AdmissionCheckState{Name: string(rune('a' + i)), State: s})
		}
		return wl
	}
	inactive := reserved(pending, false, strata.CheckStateReady)
	inactive.Spec.Active = ptr.To(false)
	cases := map[string]struct {
		wl           *strata.Workload
		want         bool
		wantAwaiting bool
	}{
		"not reserved":                     {wl: &strata.Workload{}},
		"delayed, a check Pending":         {wl: reserved(pending, false, strata.CheckStateReady, strata.CheckStatePending), wantAwaiting: true},
		"delayed, every check Ready":       {wl: reserved(pending, false, strata.CheckStateReady, strata.CheckStateReady), want: true, wantAwaiting: true},
		"delayed and assigned":             {wl: reserved(ptr.To(strata.DelayedTopologyRequestReady), true, strata.CheckStateReady)},
		"not delayed":                      {wl: reserved(nil, true, strata.CheckStateReady)},
		"delayed, a check Retry":           {wl: reserved(pending, false, strata.CheckStateRetry), wantAwaiting: true},
		"delayed, deactivated meanwhile":   {wl: inactive, wantAwaiting: true},
		"delayed, checks Ready, no checks": {wl: reserved(pending, false), want: true, wantAwaiting: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NeedsSecondPass(tc.wl); got != tc.want {
				t.Errorf("NeedsSecondPass() = %v, want %v", got, tc.want)
			}
			if got := AwaitingChecks(tc.wl); got != tc.wantAwaiting {
				t.Errorf("AwaitingChecks() = %v, want %v", got, tc.wantAwaiting)
			}
		})
	}
}

func TestWithCheckUpdates(t *testing.T) {
	wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{
		{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}}}},
		{Name: "other", Count: 1},
	}}}
	wl.Status.AdmissionChecks = []strata.AdmissionCheckState{
		{Name: "prov", State: strata.CheckStateReady, PodSetUpdates: []strata.PodSetUpdate{{Name: "main",
			NodeSelector: map[string]string{"autoscaling.x-k8s.io/provisioning-request": "wl-prov-1"},
			Tolerations:  []corev1.Toleration{{Key: "provisioned", Operator: corev1.TolerationOpExists}}}}},
		{Name: "pending", State: strata.CheckStatePending, PodSetUpdates: []strata.PodSetUpdate{{Name: "other", NodeSelector: map[string]string{"x": "y"}}}},
	}
	got := WithCheckUpdates(wl)
	want := []corev1.PodSpec{
		{NodeSelector: map[string]string{"pool": "gpu", "autoscaling.x-k8s.io/provisioning-request": "wl-prov-1"},
			Tolerations: []corev1.Toleration{{Key: "provisioned", Operator: corev1.TolerationOpExists}}},
		{},
	}
	if diff := cmp.Diff(want, []corev1.PodSpec{got.Spec.PodSets[0].Template.Spec, got.Spec.PodSets[1].Template.Spec}); diff != "" {
		t.Errorf("pod specs (-want,+got):\n%s", diff)
	}
	if len(wl.Spec.PodSets[0].Template.Spec.NodeSelector) != 1 {
		t.Errorf("WithCheckUpdates changed its argument: %v", wl.Spec.PodSets[0].Template.Spec.NodeSelector)
	}
}

// TestBuildCarriesProvisioningParameters: a job's
// provreq.kueue.x-k8s.io/ annotations are its Workload's, as in Kueue:
// the parameters of the ProvisioningRequests made for it.
func TestBuildCarriesProvisioningParameters(t *testing.T) {
	obj := &metav1.ObjectMeta{Namespace: "ml", Labels: map[string]string{strata.QueueNameLabel: "q"},
		Annotations: map[string]string{"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60", "example.com/other": "x"}}
	wl, errs := Build("Job", obj, "job-train", nil, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if diff := cmp.Diff(map[string]string{"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60"}, wl.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
}
