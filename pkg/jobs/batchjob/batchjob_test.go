package batchjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
)

func TestMarkWaiting(t *testing.T) {
	suspended := func(j Job) *batchv1.JobCondition {
		for i := range j.Status.Conditions {
			if j.Status.Conditions[i].Type == batchv1.JobSuspended {
				return &j.Status.Conditions[i]
			}
		}
		return nil
	}
	j := Adapt(&batchv1.Job{})
	if !j.MarkWaiting("Pending", "no rack holds 12 pods") {
		t.Fatal("a fresh Job: want it marked")
	}
	c := suspended(j)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonWaitingOnHub || c.Message != "Pending: no rack holds 12 pods" {
		t.Fatalf("condition %+v", c)
	}
	if j.MarkWaiting("Pending", "no rack holds 12 pods") {
		t.Error("the same reason again: want no change")
	}
	if !j.MarkWaiting("NoClusterFits", "larger than every cluster") || suspended(j).Message != "NoClusterFits: larger than every cluster" || len(j.Status.Conditions) != 1 {
		t.Errorf("a new reason: want the condition updated in place, got %+v", j.Status.Conditions)
	}
	started := Adapt(&batchv1.Job{Status: batchv1.JobStatus{StartTime: &metav1.Time{}, Active: 2}})
	if started.MarkWaiting("Pending", "x") {
		t.Error("a Job whose copy runs: want its mirrored status left alone")
	}
	replaced := Adapt(&batchv1.Job{Status: batchv1.JobStatus{StartTime: &metav1.Time{}}})
	if !replaced.MarkWaiting("Pending", "x") {
		t.Error("a Job whose earlier copy ran and was taken back (startTime kept, nothing active): want it marked waiting, not left looking Running")
	}
	done := Adapt(&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}})
	if done.MarkWaiting("Pending", "x") {
		t.Error("a finished Job: want it left alone")
	}
}

func TestFinished(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status}
	}
	cases := map[string]struct {
		conditions []batchv1.JobCondition
		wantDone   bool
		wantReason string
	}{
		"running":                      {},
		"suspended":                    {conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}},
		"complete":                     {conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue)}, wantDone: true, wantReason: "Succeeded"},
		"failed":                       {conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue), cond(batchv1.JobFailed, corev1.ConditionTrue)}, wantDone: true, wantReason: "Failed"},
		"failure target only: not yet": {conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}},
		"complete=False":               {conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionFalse)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done, reason := Adapt(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conditions}}).Finished()
			if diff := cmp.Diff([]any{tc.wantDone, tc.wantReason}, []any{done, reason}); diff != "" {
				t.Errorf("Finished() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReclaimablePods covers Kueue's count: the pods beyond the
// completions the Job still needs.
func TestReclaimablePods(t *testing.T) {
	cases := map[string]struct {
		parallelism, completions *int32
		succeeded                int32
		want                     []strata.ReclaimablePod
	}{
		"none succeeded":                    {parallelism: ptr.To[int32](4), completions: ptr.To[int32](4)},
		"one pod":                           {parallelism: ptr.To[int32](1), completions: ptr.To[int32](1), succeeded: 1},
		"3 of 4 succeeded, 4 completions":   {parallelism: ptr.To[int32](4), completions: ptr.To[int32](4), succeeded: 3, want: []strata.ReclaimablePod{{Name: "main", Count: 3}}},
		"more completions than pods":        {parallelism: ptr.To[int32](4), completions: ptr.To[int32](10), succeeded: 5},
		"the last completions need fewer":   {parallelism: ptr.To[int32](4), completions: ptr.To[int32](10), succeeded: 8, want: []strata.ReclaimablePod{{Name: "main", Count: 2}}},
		"no completions: parallelism":       {parallelism: ptr.To[int32](4), succeeded: 1, want: []strata.ReclaimablePod{{Name: "main", Count: 1}}},
		"parallelism capped by completions": {parallelism: ptr.To[int32](8), completions: ptr.To[int32](4), succeeded: 2, want: []strata.ReclaimablePod{{Name: "main", Count: 2}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := Adapt(&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism, Completions: tc.completions}, Status: batchv1.JobStatus{Succeeded: tc.succeeded}})
			if diff := cmp.Diff(tc.want, j.ReclaimablePods()); diff != "" {
				t.Errorf("ReclaimablePods() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestStartGated: a copy sent running has every pod held by the gate and
// labelled for its Workload, and reads as jobs.Gated until an admission
// is recorded on it; a Job with a deadline stays as it is, suspended.
func TestStartGated(t *testing.T) {
	gate := []corev1.PodSchedulingGate{{Name: "example.com/other"}, {Name: strata.TopologySchedulingGate}}
	for name, tc := range map[string]struct {
		job       *batchv1.Job
		wantOK    bool
		want      *batchv1.Job
		wantGated bool
	}{
		"a Job": {
			job: &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       corev1.PodSpec{SchedulingGates: gate[:1]},
			}}},
			wantOK: true,
			want: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.GatedStartAnnotation: "true"}}, Spec: batchv1.JobSpec{Suspend: ptr.To(false), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", strata.WorkloadLabel: "job-train", strata.PodSetLabel: "main"}},
				Spec:       corev1.PodSpec{SchedulingGates: gate},
			}}},
			wantGated: true,
		},
		"a Job that may be admitted with fewer pods": {
			job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.JobMinParallelismAnnotation: "2"}},
				Spec: batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To[int32](4)}},
			want: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.JobMinParallelismAnnotation: "2"}},
				Spec: batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To[int32](4)}},
		},
		"a Job with activeDeadlineSeconds": {
			job:  &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true), ActiveDeadlineSeconds: ptr.To[int64](60)}},
			want: &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true), ActiveDeadlineSeconds: ptr.To[int64](60)}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := Adapt(tc.job)
			if got := j.StartGated("job-train"); got != tc.wantOK {
				t.Errorf("StartGated() = %t, want %t", got, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, tc.job); diff != "" {
				t.Errorf("the copy (-want,+got):\n%s", diff)
			}
			if got := jobs.Gated(j); got != tc.wantGated {
				t.Errorf("Gated() = %t, want %t", got, tc.wantGated)
			}
			// Started by an admission (its record), not marked, or
			// suspended: no longer a gated copy.
			marked := tc.job.Annotations
			tc.job.Annotations = map[string]string{strata.GatedStartAnnotation: "true", strata.AddedByAdmissionAnnotation: "{}"}
			if jobs.Gated(j) {
				t.Error("Gated() = true for a Job with an admission's record")
			}
			tc.job.Annotations = nil
			if jobs.Gated(j) {
				t.Error("Gated() = true for a Job the hub did not mark")
			}
			tc.job.Annotations = marked
			j.SetSuspended(true)
			if jobs.Gated(j) {
				t.Error("Gated() = true for a suspended Job")
			}
		})
	}
}

// TestMirrorStatus: a hub Job takes its copy's status as far as the API
// server lets a Job managed by another controller change: a running Job
// keeps its start time, and its counters never go down, so that a second
// copy's status, after the first was taken back, is accepted.
func TestMirrorStatus(t *testing.T) {
	at := func(m int) *metav1.Time { return ptr.To(metav1.NewTime(time.Date(2026, 12, 1, 10, m, 0, 0, time.UTC))) }
	cases := map[string]struct {
		cur, src  batchv1.JobStatus
		suspended bool
		want      batchv1.JobStatus
	}{
		"a first copy: its status": {
			src:  batchv1.JobStatus{StartTime: at(0), Active: 2},
			want: batchv1.JobStatus{StartTime: at(0), Active: 2},
		},
		"a second copy of a running Job: the start stays, the counters do not go down": {
			cur:  batchv1.JobStatus{StartTime: at(0), Failed: 2, Succeeded: 1},
			src:  batchv1.JobStatus{StartTime: at(30), Active: 1},
			want: batchv1.JobStatus{StartTime: at(0), Active: 1, Failed: 2, Succeeded: 1},
		},
		"a second copy that got further: its counters": {
			cur:  batchv1.JobStatus{StartTime: at(0), Failed: 2, Succeeded: 1},
			src:  batchv1.JobStatus{StartTime: at(30), Failed: 3, Succeeded: 4, CompletionTime: at(40)},
			want: batchv1.JobStatus{StartTime: at(0), Failed: 3, Succeeded: 4, CompletionTime: at(40)},
		},
		"a completion before the kept start (the first worker's clock ahead): at the start": {
			cur:  batchv1.JobStatus{StartTime: at(50)},
			src:  batchv1.JobStatus{StartTime: at(30), Succeeded: 1, CompletionTime: at(40)},
			want: batchv1.JobStatus{StartTime: at(50), Succeeded: 1, CompletionTime: at(50)},
		},
		"a suspended hub Job: the copy's start": {
			cur:       batchv1.JobStatus{StartTime: at(0)},
			src:       batchv1.JobStatus{StartTime: at(30), Active: 1},
			suspended: true,
			want:      batchv1.JobStatus{StartTime: at(30), Active: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mirrorStatus(&tc.cur, &tc.src, tc.suspended)); diff != "" {
				t.Errorf("mirrorStatus (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRunWith: a partial admission's start sets the parallelism (and the
// completions, when they follow) and records what the Job asked for; its
// take-back restores them, and the Job's pod set asks for all its pods
// throughout.
func TestRunWith(t *testing.T) {
	for name, tc := range map[string]struct {
		follow          bool
		wantCompletions int32
	}{
		"parallelism only":   {wantCompletions: 6},
		"completions follow": {follow: true, wantCompletions: 3},
	} {
		t.Run(name, func(t *testing.T) {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.JobMinParallelismAnnotation: "2"}},
				Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](6), Completions: ptr.To[int32](6), CompletionMode: ptr.To(batchv1.IndexedCompletion)}}
			if tc.follow {
				j.Annotations[strata.KueuePrefix+"job-completions-equal-parallelism"] = "true"
			}
			asked := j.DeepCopy()
			job := Adapt(j)
			if !job.RunWith("main", 3) {
				t.Fatal("RunWith() = false")
			}
			// Started by an admission, whose record start writes with it.
			j.Annotations[strata.AddedByAdmissionAnnotation] = "{}"
			asked.Annotations[strata.AddedByAdmissionAnnotation] = "{}"
			if n, ok := job.RunningWith("main"); !ok || n != 3 {
				t.Errorf("RunningWith() = %d, %t; want 3, true", n, ok)
			}
			if got := *j.Spec.Parallelism; got != 3 {
				t.Errorf("parallelism = %d, want 3", got)
			}
			if got := *j.Spec.Completions; got != tc.wantCompletions {
				t.Errorf("completions = %d, want %d", got, tc.wantCompletions)
			}
			if diff := cmp.Diff(`{"parallelism":6,"completions":6}`, j.Annotations[strata.PartialAdmissionAnnotation]); diff != "" {
				t.Errorf("record (-want,+got):\n%s", diff)
			}
			podSets, errs := job.PodSets()
			if len(errs) > 0 || podSets[0].Count != 6 || ptr.Deref(podSets[0].MinCount, 0) != 2 {
				t.Errorf("pod sets while it runs with fewer: count %d, minCount %v, errors %v; want 6 and 2", podSets[0].Count, podSets[0].MinCount, errs)
			}
			// Started again with another count before the take-back: the
			// record keeps what it asked for.
			job.RunWith("main", 4)
			if !job.RunAsAsked() {
				t.Fatal("RunAsAsked() = false")
			}
			if diff := cmp.Diff(asked, j); diff != "" {
				t.Errorf("after RunAsAsked (-want,+got):\n%s", diff)
			}
			if job.RunAsAsked() {
				t.Error("RunAsAsked() again = true")
			}
		})
	}
}

// TestScalePatch: the patch that brings an elastic Job's copy to the size
// its hub queue granted.
func TestScalePatch(t *testing.T) {
	job := func(mode batchv1.CompletionMode, parallelism int32, completions *int32) Job {
		return Adapt(&batchv1.Job{Spec: batchv1.JobSpec{CompletionMode: ptr.To(mode), Parallelism: ptr.To(parallelism), Completions: completions}})
	}
	cases := map[string]struct {
		job   Job
		count int32
		want  string
	}{
		"the size it runs":                        {job: job(batchv1.NonIndexedCompletion, 2, nil), count: 2},
		"up, no completions":                      {job: job(batchv1.NonIndexedCompletion, 2, nil), count: 4, want: `{"spec":{"parallelism":4}}`},
		"down, Indexed, completions follow":       {job: job(batchv1.IndexedCompletion, 4, ptr.To[int32](4)), count: 2, want: `{"spec":{"completions":2,"parallelism":2}}`},
		"up, Indexed, more completions than pods": {job: job(batchv1.IndexedCompletion, 2, ptr.To[int32](10)), count: 3, want: `{"spec":{"parallelism":3}}`},
		"up, NonIndexed, completions stay":        {job: job(batchv1.NonIndexedCompletion, 2, ptr.To[int32](6)), count: 3, want: `{"spec":{"parallelism":3}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(tc.job.ScalePatch(tc.count))); diff != "" {
				t.Errorf("ScalePatch(%d) (-want +got):\n%s", tc.count, diff)
			}
		})
	}
	var _ jobs.Scaler = Job{}
}
