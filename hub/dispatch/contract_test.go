package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func attempt(cluster string, gen int64, result strata.PlacementResult, at time.Duration) strata.PlacementAttempt {
	return strata.PlacementAttempt{Cluster: cluster, DispatchGeneration: gen, Result: result, Time: metav1.NewTime(t0.Add(at))}
}

func TestBackoffs(t *testing.T) {
	const base = time.Minute
	cases := map[string]struct {
		attempts []strata.PlacementAttempt
		now      time.Duration
		skip     func(*strata.PlacementAttempt) bool
		want     map[string]time.Time
	}{
		"never dispatched": {},
		"admitted and dispatched attempts keep nobody out": {
			attempts: []strata.PlacementAttempt{attempt("w1", 1, strata.PlacementAdmitted, 0), attempt("w2", 2, strata.PlacementDispatched, 0)},
			want:     map[string]time.Time{},
		},
		"one refusal: base from the refusal": {
			attempts: []strata.PlacementAttempt{attempt("w1", 1, strata.PlacementRejected, 0)},
			now:      30 * time.Second,
			want:     map[string]time.Time{"w1": t0.Add(time.Minute)},
		},
		"doubled per further refusal of the same worker, from the last": {
			attempts: []strata.PlacementAttempt{
				attempt("w1", 1, strata.PlacementRejected, 0),
				attempt("w2", 2, strata.PlacementTimedOut, time.Minute),
				attempt("w1", 3, strata.PlacementTimedOut, 2*time.Minute),
				attempt("w1", 4, strata.PlacementRejected, 5*time.Minute),
			},
			now:  5 * time.Minute,
			want: map[string]time.Time{"w1": t0.Add(9 * time.Minute)},
		},
		"a backoff that ended is left out": {
			attempts: []strata.PlacementAttempt{attempt("w1", 1, strata.PlacementRejected, 0)},
			now:      time.Minute,
			want:     map[string]time.Time{},
		},
		"queue refusals skipped where the hub reads the worker's queues": {
			attempts: []strata.PlacementAttempt{
				withReason(attempt("w1", 1, strata.PlacementRejected, 0), "LocalQueueNotFound"),
				withReason(attempt("w2", 2, strata.PlacementRejected, 0), "NamespaceNotFound"),
				withReason(attempt("w3", 3, strata.PlacementRejected, 0), "QuotaExceeded"),
			},
			skip: func(a *strata.PlacementAttempt) bool { return QueueRefusalReasons[a.Reason] && a.Cluster != "w2" },
			want: map[string]time.Time{"w2": t0.Add(time.Minute), "w3": t0.Add(time.Minute)},
		},
		"capped at base·2⁹": {
			attempts: func() []strata.PlacementAttempt {
				var out []strata.PlacementAttempt
				for i := range 14 {
					out = append(out, attempt("w1", int64(i+1), strata.PlacementRejected, 0))
				}
				return out
			}(),
			want: map[string]time.Time{"w1": t0.Add(512 * time.Minute)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{}
			if tc.attempts != nil {
				wl.Status.Placement = &strata.Placement{Attempts: tc.attempts}
			}
			got := Backoffs(wl, base, t0.Add(tc.now))
			if tc.skip != nil {
				got = BackoffsExcept(wl, base, t0.Add(tc.now), tc.skip)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Backoffs() (-want,+got):\n%s", diff)
			}
		})
	}
}

func withReason(a strata.PlacementAttempt, reason string) strata.PlacementAttempt {
	a.Reason = reason
	return a
}

// TestDispatchRecords follows one Workload's record: dispatched, timed
// out, dispatched elsewhere, admitted there.
func TestDispatchRecords(t *testing.T) {
	var st strata.WorkloadStatus
	if gen := RecordDispatch(&st, "w1", "gpu", "w1/gpu: fits in rack r1", t0); gen != 1 {
		t.Fatalf("first dispatch: generation %d, want 1", gen)
	}
	RecordOutcome(&st, strata.PlacementTimedOut, ReasonTimedOut, "", "not admitted within 5m0s", t0.Add(5*time.Minute))
	if gen := RecordDispatch(&st, "w2", "gpu", "w2/gpu: fits in rack r3", t0.Add(5*time.Minute)); gen != 2 {
		t.Fatalf("second dispatch: generation %d, want 2", gen)
	}
	copyWL := &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{
		ClusterQueue: "worker-cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "gpu", Count: 4}},
	}}}
	if !RecordAdmission(&st, "hub-cq", copyWL, t0.Add(6*time.Minute)) {
		t.Fatal("RecordAdmission() = false on the first admission")
	}
	if RecordAdmission(&st, "hub-cq", copyWL, t0.Add(7*time.Minute)) {
		t.Error("RecordAdmission() = true for an admission recorded already")
	}
	want := strata.WorkloadStatus{
		Conditions: []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: ReasonAdmitted, Message: "admitted on w2, flavor gpu"}},
		Admission:  &strata.Admission{ClusterQueue: "hub-cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "gpu", Count: 4}}},
		Placement: &strata.Placement{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, DispatchTime: ptr.To(metav1.NewMicroTime(t0.Add(5 * time.Minute))), Attempts: []strata.PlacementAttempt{
			{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Result: strata.PlacementTimedOut, Time: metav1.NewTime(t0.Add(5 * time.Minute)), Message: "not admitted within 5m0s"},
			{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Result: strata.PlacementAdmitted, Time: metav1.NewTime(t0.Add(6 * time.Minute)), Message: "w2/gpu: fits in rack r3"},
		}},
	}
	if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("status (-want,+got):\n%s", diff)
	}
	if _, _, _, ok := Placed(&strata.Workload{Status: st}); !ok {
		t.Error("Placed() = false for an admitted dispatch")
	}
	copyWL.Status.ReclaimablePods = []strata.ReclaimablePod{{Name: "main", Count: 3}}
	if !RecordAdmission(&st, "hub-cq", copyWL, t0.Add(8*time.Minute)) {
		t.Error("RecordAdmission() = false when the copy's reclaimable pods changed")
	}
	if diff := cmp.Diff(copyWL.Status.ReclaimablePods, st.ReclaimablePods); diff != "" {
		t.Errorf("reclaimable pods (-copy,+hub):\n%s", diff)
	}
	// Its LocalQueue pointed at another ClusterQueue, or deleted: the
	// admission stays with the ClusterQueue that made it.
	copyWL.Status.ReclaimablePods = nil
	for _, now := range []string{"other-cq", ""} {
		RecordAdmission(&st, now, copyWL, t0.Add(9*time.Minute))
		if got := st.Admission.ClusterQueue; got != "hub-cq" {
			t.Errorf("recorded again with the LocalQueue's ClusterQueue %q: admission of %q, want hub-cq", now, got)
		}
	}

	// Outcomes clear the placement (a preemption mark too) and the
	// admission, keep the generation.
	st.Placement.PreemptUpTo = ptr.To[int32](10)
	RecordOutcome(&st, strata.PlacementEvicted, ReasonSuspended, "", "the Job was suspended", t0.Add(8*time.Minute))
	if _, _, _, ok := Placed(&strata.Workload{Status: st}); ok || st.Admission != nil || st.Placement.DispatchGeneration != 2 || st.Placement.DispatchTime != nil ||
		st.Placement.PreemptUpTo != nil {
		t.Errorf("after the outcome: placement %+v, admission %v", st.Placement, st.Admission)
	}
	// A new dispatch starts without the mark; the dispatcher sets it.
	st.Placement.PreemptUpTo = ptr.To[int32](10)
	RecordDispatch(&st, "w3", "gpu", "", t0.Add(9*time.Minute))
	if st.Placement.PreemptUpTo != nil {
		t.Errorf("a new dispatch keeps the last one's preemption mark %d", *st.Placement.PreemptUpTo)
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	var st strata.WorkloadStatus
	for i := range 40 {
		RecordDispatch(&st, fmt.Sprintf("w%d", i), "gpu", "", t0)
		RecordOutcome(&st, strata.PlacementRejected, ReasonRejected, "NamespaceNotFound", "no", t0)
	}
	if n := len(st.Placement.Attempts); n != maxAttempts {
		t.Fatalf("%d attempts kept, want %d", n, maxAttempts)
	}
	if got := st.Placement.Attempts[maxAttempts-1]; got.Cluster != "w39" || got.Reason != "NamespaceNotFound" {
		t.Errorf("last attempt on %s for %q, want w39 for NamespaceNotFound", got.Cluster, got.Reason)
	}
}

// TestNewCopy runs for every kind through the adapter: the copy has the
// hub's labels and annotations, is suspended and unmanaged, keeps no TTL
// and nothing the hub's API server generated, and the hub object stays as
// it was.
func TestNewCopy(t *testing.T) {
	at := time.Date(2026, time.November, 24, 9, 30, 1, 123456789, time.FixedZone("CET", 3600))
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID("wl-uid")},
		Status: strata.WorkloadStatus{Placement: &strata.Placement{DispatchTime: ptr.To(metav1.NewMicroTime(at))}}}
	hubMeta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "job-uid", ResourceVersion: "7",
			Labels: map[string]string{strata.QueueNameLabel: "team", "app": "x"},
			Annotations: map[string]string{"note": "y", strata.DispatchTimeAnnotation: "a user's value, not the hub's",
				strata.TopologyHintAnnotation: "a user's value"}}
	}
	copyMeta := metav1.ObjectMeta{Name: "train", Namespace: "ml",
		Labels: map[string]string{strata.QueueNameLabel: "worker-queue", "app": "x", strata.OriginLabel: "hub-a",
			strata.HubWorkloadUIDLabel: "wl-uid", strata.DispatchGenerationLabel: "3"},
		Annotations: map[string]string{"note": "y", strata.FlavorAnnotation: "gpu", strata.DispatchTimeAnnotation: "2026-11-24T08:30:01.123456Z",
			strata.TopologyHintAnnotation: `{"main":{}}`}}
	gatedMeta := *copyMeta.DeepCopy()
	gatedMeta.Annotations[strata.GatedStartAnnotation] = "true"
	rj := func(labels map[string]string) jobsetapi.ReplicatedJob {
		return jobsetapi.ReplicatedJob{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}}}
	}
	cases := map[string]struct {
		hub  func() jobs.Job
		want jobs.Job
	}{
		"Job": {
			hub: func() jobs.Job {
				return batchjob.Adapt(&batchv1.Job{ObjectMeta: hubMeta(), Spec: batchv1.JobSpec{
					ManagedBy:               ptr.To(strata.ManagedByController),
					Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "job-uid"}},
					ManualSelector:          ptr.To(false),
					TTLSecondsAfterFinished: ptr.To[int32](0),
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
						batchv1.ControllerUidLabel: "job-uid", batchv1.JobNameLabel: "train", "controller-uid": "job-uid", "job-name": "train", "app": "x",
					}}},
				}})
			},
			// Sent running, its pods held by the gate (jobs.GatedStart).
			want: batchjob.Adapt(&batchv1.Job{ObjectMeta: gatedMeta, Spec: batchv1.JobSpec{
				Suspend: ptr.To(false),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", strata.WorkloadLabel: "job-train", strata.PodSetLabel: "main"}},
					Spec:       corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}}},
				},
			}}),
		},
		"Job with activeDeadlineSeconds": {
			hub: func() jobs.Job {
				return batchjob.Adapt(&batchv1.Job{ObjectMeta: hubMeta(), Spec: batchv1.JobSpec{
					ActiveDeadlineSeconds: ptr.To[int64](600),
					Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}},
				}})
			},
			// Its deadline would count while it waits: suspended.
			want: batchjob.Adapt(&batchv1.Job{ObjectMeta: copyMeta, Spec: batchv1.JobSpec{
				ActiveDeadlineSeconds: ptr.To[int64](600),
				Suspend:               ptr.To(true),
				Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}},
			}}),
		},
		"JobSet": {
			hub: func() jobs.Job {
				return jobset.Adapt(&jobsetapi.JobSet{ObjectMeta: hubMeta(), Spec: jobsetapi.JobSetSpec{
					ManagedBy:               ptr.To(strata.ManagedByController),
					TTLSecondsAfterFinished: ptr.To[int32](0),
					Suspend:                 ptr.To(false),
					ReplicatedJobs:          []jobsetapi.ReplicatedJob{rj(map[string]string{"app": "x"})},
				}})
			},
			want: jobset.Adapt(&jobsetapi.JobSet{ObjectMeta: copyMeta, Spec: jobsetapi.JobSetSpec{
				Suspend:        ptr.To(true),
				ReplicatedJobs: []jobsetapi.ReplicatedJob{rj(map[string]string{"app": "x"})},
			}}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hub := tc.hub()
			got := NewCopy(hub, wl, "hub-a", "worker-queue", "gpu", 3, `{"main":{}}`)
			if diff := cmp.Diff(tc.want.Object(), got.Object()); diff != "" {
				t.Errorf("NewCopy() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.hub().Object(), hub.Object()); diff != "" {
				t.Errorf("NewCopy() changed the hub object (-before,+after):\n%s", diff)
			}
			uid, gen, ok := CopyOf(got.Object())
			if uid != "wl-uid" || gen != 3 || !ok {
				t.Errorf("CopyOf() = %q, %d, %t; want wl-uid, 3, true", uid, gen, ok)
			}
			if _, _, ok := CopyOf(hub.Object()); ok {
				t.Error("CopyOf() = true for an object without dispatch labels")
			}
		})
	}
}

// TestNewCopyPreemptionMark: a copy carries the hub's preemption mark
// only when its dispatch has one; a user's annotation of that name never
// reaches the worker.
func TestNewCopyPreemptionMark(t *testing.T) {
	hubJob := func() jobs.Job {
		return batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml",
			Annotations: map[string]string{strata.PreemptUpToAnnotation: "100000"}}})
	}
	for name, tc := range map[string]struct {
		upTo *int32
		want map[string]string
	}{
		"not marked": {},
		"marked":     {upTo: ptr.To[int32](-5), want: map[string]string{strata.PreemptUpToAnnotation: "-5"}},
	} {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "wl-uid"}, Status: strata.WorkloadStatus{Placement: &strata.Placement{PreemptUpTo: tc.upTo}}}
			got := NewCopy(hubJob(), wl, "hub-a", "q", "gpu", 1, "").Object().GetAnnotations()
			mark := map[string]string{}
			if v, ok := got[strata.PreemptUpToAnnotation]; ok {
				mark[strata.PreemptUpToAnnotation] = v
			}
			if diff := cmp.Diff(tc.want, mark, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the copy's mark (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	cond := func(t, status, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: reason + " said"}
	}
	cases := map[string]struct {
		wl                  *strata.Workload
		want                Verdict
		wantReason, wantMsg string
	}{
		"no Workload yet": {want: Waiting},
		"pending": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Pending")}}},
			want: Waiting,
		},
		"admitted": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "q"}}},
			want: Admitted,
		},
		"inadmissible": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Inadmissible")}}},
			want: Refused, wantReason: "Inadmissible", wantMsg: "Inadmissible said",
		},
		"waiting in a stopped queue": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Stopped")}}},
			want: Refused, wantReason: "Stopped", wantMsg: "Stopped said",
		},
		"drained by its ClusterQueue": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "ClusterQueueStopped")}}},
			want: Refused, wantReason: "Stopped", wantMsg: "ClusterQueueStopped said",
		},
		"drained by its LocalQueue": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "LocalQueueStopped")}}},
			want: Refused, wantReason: "Stopped", wantMsg: "LocalQueueStopped said",
		},
		"evicted there because its pods were not ready in time": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "PodsReadyTimeout")}}},
			want: Refused, wantReason: "PodsReadyTimeout", wantMsg: "PodsReadyTimeout said",
		},
		"deactivated there past backoffLimitCount": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Deactivated", Message: "deactivated (RequeuingLimitExceeded): ..."}}}},
			want: Refused, wantReason: "RequeuingLimitExceeded", wantMsg: "deactivated (RequeuingLimitExceeded): ...",
		},
		"waiting in a queue whose admission check is not Active": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", strata.QueueAdmissionCheckNotReady)}}},
			want: Refused, wantReason: strata.QueueAdmissionCheckNotReady, wantMsg: "AdmissionCheckNotReady said",
		},
		"reserved there, waiting for its admission checks": {
			wl: &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "q"},
				Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", strata.WaitingForAdmissionChecks)}}},
			want: Admitted,
		},
		"deactivated there by a rejecting admission check, another controller's message first": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{
				AdmissionChecks: []strata.AdmissionCheckState{{Name: "budget", State: strata.CheckStateRejected, Message: "over"}},
				Conditions:      []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Deactivated", Message: "the Workload is deactivated"}}}},
			want: Refused, wantReason: strata.AdmissionCheckRejected, wantMsg: "deactivated (AdmissionCheckRejected): admission check budget: over",
		},
		"deactivated there by a rejecting admission check": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Deactivated", Message: "deactivated (AdmissionCheckRejected): admission check budget: over"}}}},
			want: Refused, wantReason: strata.AdmissionCheckRejected, wantMsg: "deactivated (AdmissionCheckRejected): admission check budget: over",
		},
		"deactivated there for its maximum execution time": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Deactivated", Message: "deactivated (MaximumExecutionTimeExceeded): ..."}}}},
			want: Refused, wantReason: "MaximumExecutionTimeExceeded", wantMsg: "deactivated (MaximumExecutionTimeExceeded): ...",
		},
		"deactivated for its maximum execution time, its eviction not done yet (marked)": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
				cond(strata.WorkloadAdmitted, "False", "Deactivated"),
				cond(strata.WorkloadDeactivationTarget, "True", strata.MaximumExecutionTimeExceeded)}}},
			want: Waiting,
		},
		"deactivated there by someone": {
			wl:   &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Deactivated")}}},
			want: Refused, wantReason: "Deactivated", wantMsg: "Deactivated said",
		},
		"deactivated, its eviction not done yet (requeueState kept)": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{
				RequeueState: &strata.RequeueState{Count: ptr.To[int32](2)},
				Conditions:   []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Deactivated")}}},
			want: Waiting,
		},
		"active again after a deactivation": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "False", "Deactivated")}}},
			want: Waiting,
		},
		"deactivated while admitted: admitted until evicted": {
			wl: &strata.Workload{Spec: strata.WorkloadSpec{Active: ptr.To(false)}, Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "q"},
				Conditions: []metav1.Condition{cond(strata.WorkloadAdmitted, "True", "Admitted")}}},
			want: Admitted,
		},
		"invalid wins over everything": {
			wl: &strata.Workload{Status: strata.WorkloadStatus{
				Admission:  &strata.Admission{ClusterQueue: "q"},
				Conditions: []metav1.Condition{cond(strata.WorkloadInvalid, "True", "LocalQueueNotFound")},
			}},
			want: Refused, wantReason: "LocalQueueNotFound", wantMsg: "LocalQueueNotFound said",
		},
		"valid again": {
			wl:   &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadInvalid, "False", "Valid")}}},
			want: Waiting,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, reason, msg := Judge(tc.wl)
			if diff := cmp.Diff([]any{tc.want, tc.wantReason, tc.wantMsg}, []any{v, reason, msg}); diff != "" {
				t.Errorf("Judge() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLastRefusal(t *testing.T) {
	at := func(cluster string, r strata.PlacementResult, msg string) strata.PlacementAttempt {
		return strata.PlacementAttempt{Cluster: cluster, Result: r, Message: msg}
	}
	wl := &strata.Workload{Status: strata.WorkloadStatus{Placement: &strata.Placement{Attempts: []strata.PlacementAttempt{
		at("w1", strata.PlacementRejected, "first"),
		at("w2", strata.PlacementTimedOut, "slow"),
		at("w1", strata.PlacementRejected, "second"),
		at("w1", strata.PlacementAdmitted, ""),
	}}}}
	for cluster, want := range map[string]string{"w1": "second", "w2": "slow", "w3": ""} {
		if got := LastRefusal(wl, cluster); got != want {
			t.Errorf("LastRefusal(%s) = %q, want %q", cluster, got, want)
		}
	}
	if got := LastRefusal(&strata.Workload{}, "w1"); got != "" {
		t.Errorf("no placement: %q", got)
	}
}

func TestChoiceReason(t *testing.T) {
	now := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	var st strata.WorkloadStatus
	if got := ChoiceReason(&strata.Workload{Status: st}); got != "" {
		t.Errorf("no placement: ChoiceReason = %q", got)
	}
	RecordDispatch(&st, "w1", "gpu", "fits in rack r0, room for 3 more", now)
	RecordOutcome(&st, strata.PlacementRejected, ReasonRejected, "Inadmissible", "no", now)
	RecordDispatch(&st, "w2", "gpu", "fits in rack r4, room for none more", now)
	if got, want := ChoiceReason(&strata.Workload{Status: st}), "fits in rack r4, room for none more"; got != want {
		t.Errorf("ChoiceReason = %q, want %q (the current dispatch's)", got, want)
	}
	RecordAdmission(&st, "cq", &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq"}}}, now)
	if got, want := ChoiceReason(&strata.Workload{Status: st}), "fits in rack r4, room for none more"; got != want {
		t.Errorf("admitted: ChoiceReason = %q, want %q", got, want)
	}
	RecordOutcome(&st, strata.PlacementRejected, ReasonRejected, "Inadmissible", "no", now)
	if got := ChoiceReason(&strata.Workload{Status: st}); got != "" {
		t.Errorf("no current dispatch: ChoiceReason = %q", got)
	}
}

// TestDispatchEndsTakeBack: a new dispatch ends whatever a take-back of
// the one before said.
func TestDispatchEndsTakeBack(t *testing.T) {
	st := strata.WorkloadStatus{Conditions: []metav1.Condition{{Type: strata.WorkloadCopyGoing, Status: metav1.ConditionTrue, Reason: "WaitingForPods"}}}
	RecordDispatch(&st, "w1", "gpu", "fits", time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC))
	if c := meta.FindStatusCondition(st.Conditions, strata.WorkloadCopyGoing); c != nil {
		t.Errorf("CopyGoing left after a new dispatch: %+v", c)
	}
}

// TestDispatchEndsEviction: a Workload evicted at the hub and dispatched
// again is no longer Evicting (else its new copy would be taken back), and
// says where it went.
func TestDispatchEndsEviction(t *testing.T) {
	wl := &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption},
		{Type: strata.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: strata.PreemptedInCohortReclamation},
	}}}
	if !Evicting(wl) {
		t.Fatal("Evicting() = false before the dispatch")
	}
	RecordDispatch(&wl.Status, "w1", "gpu", "fits", time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC))
	if Evicting(wl) {
		t.Errorf("Evicting() = true after a new dispatch")
	}
	for _, ty := range []string{strata.WorkloadEvicted, strata.WorkloadPreempted} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, ty); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonDispatched {
			t.Errorf("%s after a new dispatch = %+v, want False, %s", ty, c, ReasonDispatched)
		}
	}
	// Never set: not added.
	st := strata.WorkloadStatus{}
	RecordDispatch(&st, "w1", "gpu", "fits", time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC))
	if c := meta.FindStatusCondition(st.Conditions, strata.WorkloadEvicted); c != nil {
		t.Errorf("Evicted added by a first dispatch: %+v", c)
	}
}

// TestNotePreemption: what the worker preempts for a copy stays in the
// dispatch's attempt, once, after the copy is admitted.
func TestNotePreemption(t *testing.T) {
	at := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	const worker = "preempting 2 workload(s) on flavor gpu; admitted once the pods of ns/a, ns/b are gone"
	st := strata.WorkloadStatus{}
	if NotePreemption(&st, "w3", worker) {
		t.Errorf("noted with no dispatch")
	}
	RecordDispatch(&st, "w3", "gpu", "w3/gpu: fits once priorities ≤ 10 are preempted", at)
	if !NotePreemption(&st, "w3", worker) {
		t.Fatalf("not noted")
	}
	if NotePreemption(&st, "w3", "preempting 1 workload(s) on flavor gpu; admitted once the pods of ns/b are gone") {
		t.Errorf("noted twice")
	}
	RecordAdmission(&st, "cq", &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "w-cq"}}}, at)
	want := "w3/gpu: fits once priorities ≤ 10 are preempted; the worker preempted for it on w3: " + worker
	if got := ChoiceReason(&strata.Workload{Status: st}); got != want {
		t.Errorf("ChoiceReason after the admission = %q, want %q", got, want)
	}
	// A worker that admitted at once after preempting (its victims held no
	// running pods) says so in its Admitted condition: the attempt keeps
	// that.
	st2 := strata.WorkloadStatus{}
	RecordDispatch(&st2, "w2", "gpu", "chosen", at)
	copyWL := &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "w-cq"}, Conditions: []metav1.Condition{{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: ReasonAdmitted,
		Message: "admitted by ClusterQueue w-cq on flavor gpu; " + strata.AdmittedAfterPreempting + "1 workload(s): ns/a"}}}}
	RecordAdmission(&st2, "cq", copyWL, at)
	if got, want := ChoiceReason(&strata.Workload{Status: st2}), "chosen; the worker preempted for it on w2: "+strata.AdmittedAfterPreempting+"1 workload(s): ns/a"; got != want {
		t.Errorf("ChoiceReason after an admission that preempted = %q, want %q", got, want)
	}
	// A later dispatch starts a new attempt, which notes its own.
	RecordOutcome(&st, strata.PlacementEvicted, ReasonDeactivated, "", "held", at)
	RecordDispatch(&st, "w1", "gpu", "fits", at)
	if !NotePreemption(&st, "w1", worker) {
		t.Errorf("the next dispatch's preemption not noted")
	}
}

// TestNewCopyRequeueCount: a copy carries how many times the Job's
// earlier copies' pods were not ready in time, only when they were; a
// user's annotation of that name never reaches the worker.
func TestNewCopyRequeueCount(t *testing.T) {
	hubJob := func() jobs.Job {
		return batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml",
			Annotations: map[string]string{strata.RequeueCountAnnotation: "0"}}})
	}
	for name, tc := range map[string]struct {
		rs   *strata.RequeueState
		want map[string]string
	}{
		"never evicted":   {},
		"count cleared":   {rs: &strata.RequeueState{}},
		"evicted twice":   {rs: &strata.RequeueState{Count: ptr.To[int32](2)}, want: map[string]string{strata.RequeueCountAnnotation: "2"}},
		"counted as zero": {rs: &strata.RequeueState{Count: ptr.To[int32](0)}},
	} {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "wl-uid"}, Status: strata.WorkloadStatus{RequeueState: tc.rs}}
			got := NewCopy(hubJob(), wl, "hub-a", "q", "gpu", 1, "").Object().GetAnnotations()
			count := map[string]string{}
			if v, ok := got[strata.RequeueCountAnnotation]; ok {
				count[strata.RequeueCountAnnotation] = v
			}
			if diff := cmp.Diff(tc.want, count, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the copy's count (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNewCopyMaxExecTime: a copy carries what is left of the hub
// Workload's maximum execution time under Strata's label, Kueue's label
// dropped; at least a second, so that it stays valid.
func TestNewCopyMaxExecTime(t *testing.T) {
	for name, tc := range map[string]struct {
		labels      map[string]string
		max         *int32
		accumulated *int32
		want        map[string]string
	}{
		"none":                   {},
		"the user's label alone": {labels: map[string]string{"team": "a"}, want: map[string]string{"team": "a"}},
		"the whole time": {labels: map[string]string{strata.KueueMaxExecTimeSecondsLabel: "600"}, max: ptr.To[int32](600),
			want: map[string]string{strata.MaxExecTimeSecondsLabel: "600"}},
		"what earlier copies left": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "600"}, max: ptr.To[int32](600), accumulated: ptr.To[int32](250),
			want: map[string]string{strata.MaxExecTimeSecondsLabel: "350"}},
		"used up: one second": {labels: map[string]string{strata.MaxExecTimeSecondsLabel: "600"}, max: ptr.To[int32](600), accumulated: ptr.To[int32](700),
			want: map[string]string{strata.MaxExecTimeSecondsLabel: "1"}},
	} {
		t.Run(name, func(t *testing.T) {
			hubJob := batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: tc.labels}})
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "wl-uid"}, Spec: strata.WorkloadSpec{MaximumExecutionTimeSeconds: tc.max},
				Status: strata.WorkloadStatus{AccumulatedPastExecutionTimeSeconds: tc.accumulated}}
			got := map[string]string{}
			for k, v := range NewCopy(hubJob, wl, "hub-a", "q", "gpu", 1, "").Object().GetLabels() {
				if !strings.HasPrefix(k, strata.Prefix) || strings.HasSuffix(k, "max-exec-time-seconds") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the copy's labels (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAttemptMessagesFitTheAPI: an attempt's message never exceeds the
// API's 1,024 bytes, however long the reason (a worker's whole /readyz
// answer): a longer one made every status write of the Workload invalid.
func TestAttemptMessagesFitTheAPI(t *testing.T) {
	long := strings.Repeat("[+]poststarthook/generic-apiserver-start-informers ok\n", 100)
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	var status strata.WorkloadStatus
	RecordDispatch(&status, "w1", "gpu", "w2/gpu: unreachable: "+long, now)
	NotePreemption(&status, "w1", long)
	if NotePreemption(&status, "w1", long) {
		t.Error("NotePreemption() added its note twice")
	}
	RecordOutcome(&status, strata.PlacementRejected, ReasonRejected, "Refused", long, now)
	RecordDispatch(&status, "w1", "gpu", long, now)
	for i, a := range status.Placement.Attempts {
		if len(a.Message) > maxAttemptMessage || !utf8.ValidString(a.Message) {
			t.Errorf("attempt %d: message of %d bytes (valid UTF-8: %t), want at most %d", i, len(a.Message), utf8.ValidString(a.Message), maxAttemptMessage)
		}
	}
}

// TestNewCopyCheckUpdates: a copy's pod templates carry what the hub
// queue's admission checks ask for their pod sets (podSetUpdates), a
// later check winning, as the agent applies a worker queue's checks; the
// hub's job is not changed.
func TestNewCopyCheckUpdates(t *testing.T) {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "wl-uid"}, Status: strata.WorkloadStatus{AdmissionChecks: []strata.AdmissionCheckState{
		{Name: "budget", State: strata.CheckStateReady, PodSetUpdates: []strata.PodSetUpdate{
			{Name: "main", Labels: map[string]string{"budget": "approved"}, Annotations: map[string]string{"budget/ticket": "42"},
				NodeSelector: map[string]string{"zone": "b", "pool": "reserved"}, Tolerations: []corev1.Toleration{gpu}},
			{Name: "other", Labels: map[string]string{"not": "this pod set"}},
		}},
		{Name: "audit", State: strata.CheckStateReady, PodSetUpdates: []strata.PodSetUpdate{
			{Name: "main", Labels: map[string]string{"budget": "audited"}, Tolerations: []corev1.Toleration{gpu}},
		}},
		// Not Ready (a check that no longer gates it, say): not applied.
		{Name: "stale", State: strata.CheckStatePending, PodSetUpdates: []strata.PodSetUpdate{
			{Name: "main", Labels: map[string]string{"stale": "yes"}},
		}},
	}}}
	hubJob := func() jobs.Job {
		return batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: map[string]string{strata.QueueNameLabel: "team"}},
			Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](600), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}}}})
	}
	hub := hubJob()
	got := NewCopy(hub, wl, "hub-a", "team", "gpu", 1, "").Object().(*batchv1.Job).Spec.Template
	want := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "budget": "audited"}, Annotations: map[string]string{"budget/ticket": "42"}},
		Spec:       corev1.PodSpec{NodeSelector: map[string]string{"zone": "b", "pool": "reserved"}, Tolerations: []corev1.Toleration{gpu}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the copy's template (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(hubJob().Object(), hub.Object()); diff != "" {
		t.Errorf("NewCopy() changed the hub object (-before,+after):\n%s", diff)
	}
}
