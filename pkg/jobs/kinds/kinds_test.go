package kinds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
)

// TestClearRun: what a run taken back put on a hub object's status goes,
// for every kind; a finished object keeps its final status.
func TestClearRun(t *testing.T) {
	started := ptr.To(metav1.Unix(100, 0))
	job := func(suspended bool, st batchv1.JobStatus) jobs.Job {
		return batchjob.Adapt(&batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(suspended)}, Status: st})
	}
	running := batchv1.JobStatus{Active: 4, Ready: ptr.To[int32](3), Terminating: ptr.To[int32](1), StartTime: started}
	complete := batchv1.JobStatus{Succeeded: 4, StartTime: started, CompletionTime: ptr.To(metav1.Unix(200, 0)),
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	jobSet := func(st jobsetapi.JobSetStatus) jobs.Job { return jobset.Adapt(&jobsetapi.JobSet{Status: st}) }
	rjs := func(active, ready, succeeded int32) []jobsetapi.ReplicatedJobStatus {
		return []jobsetapi.ReplicatedJobStatus{{Name: "workers", Active: active, Ready: ready, Succeeded: succeeded}}
	}
	completed := jobsetapi.JobSetStatus{ReplicatedJobsStatus: rjs(1, 1, 1), TerminalState: string(jobsetapi.JobSetCompleted),
		Conditions: []metav1.Condition{{Type: string(jobsetapi.JobSetCompleted), Status: metav1.ConditionTrue}}}
	cases := map[string]struct {
		job, want   jobs.Job
		wantChanged bool
	}{
		"Job: a refused copy's run leaves nothing active; the start time stays on a running Job": {
			job:         job(false, running),
			want:        job(false, batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0), StartTime: started}),
			wantChanged: true,
		},
		"Job: a suspended Job loses its start time too": {
			job:         job(true, running),
			want:        job(true, batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0)}),
			wantChanged: true,
		},
		"Job: a copy that never started changes nothing": {
			job:  job(false, batchv1.JobStatus{}),
			want: job(false, batchv1.JobStatus{}),
		},
		"Job: a finished Job keeps its final status": {
			job:  job(true, complete),
			want: job(true, complete),
		},
		"JobSet: no Job of a taken-back run is active or ready; counts of finished Jobs stay": {
			job:         jobSet(jobsetapi.JobSetStatus{ReplicatedJobsStatus: rjs(2, 1, 1)}),
			want:        jobSet(jobsetapi.JobSetStatus{ReplicatedJobsStatus: rjs(0, 0, 1)}),
			wantChanged: true,
		},
		"JobSet: nothing ran": {
			job:  jobSet(jobsetapi.JobSetStatus{}),
			want: jobSet(jobsetapi.JobSetStatus{}),
		},
		"JobSet: a finished JobSet keeps its final status": {
			job:  jobSet(completed),
			want: jobSet(completed),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed := tc.job.ClearRun()
			if diff := cmp.Diff(tc.want.Object(), tc.job.Object()); diff != "" {
				t.Errorf("ClearRun() (-want,+got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("ClearRun() = %t, want %t", changed, tc.wantChanged)
			}
		})
	}
}

// TestMirrorStatus: the hub object takes the copy's status whole, for
// every kind, and says when nothing changed.
func TestMirrorStatus(t *testing.T) {
	jobStatus := batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](2), StartTime: ptr.To(metav1.Unix(100, 0))}
	jobSetStatus := jobsetapi.JobSetStatus{Restarts: 1, ReplicatedJobsStatus: []jobsetapi.ReplicatedJobStatus{{Name: "workers", Active: 2, Ready: 2}},
		Conditions: []metav1.Condition{{Type: string(jobsetapi.JobSetStartupPolicyCompleted), Status: metav1.ConditionTrue}}}
	cases := map[string]struct{ hub, copy jobs.Job }{
		"Job": {
			hub:  batchjob.Adapt(&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2)}}),
			copy: batchjob.Adapt(&batchv1.Job{Status: jobStatus}),
		},
		"JobSet": {
			hub:  jobset.Adapt(&jobsetapi.JobSet{Spec: jobsetapi.JobSetSpec{Suspend: ptr.To(false)}}),
			copy: jobset.Adapt(&jobsetapi.JobSet{Status: jobSetStatus}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !tc.hub.MirrorStatus(tc.copy) {
				t.Fatal("MirrorStatus() = false on a new status")
			}
			if tc.hub.MirrorStatus(tc.copy) {
				t.Error("MirrorStatus() = true on the status it has")
			}
			got, want := tc.hub.Object().DeepCopyObject(), tc.copy.Object().DeepCopyObject()
			switch g := got.(type) {
			case *batchv1.Job:
				if diff := cmp.Diff(want.(*batchv1.Job).Status, g.Status); diff != "" || g.Spec.Parallelism == nil {
					t.Errorf("status (-want,+got):\n%s (spec kept: %t)", diff, g.Spec.Parallelism != nil)
				}
			case *jobsetapi.JobSet:
				if diff := cmp.Diff(want.(*jobsetapi.JobSet).Status, g.Status); diff != "" || g.Spec.Suspend == nil {
					t.Errorf("status (-want,+got):\n%s (spec kept: %t)", diff, g.Spec.Suspend != nil)
				}
			}
		})
	}
}
