package jobset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
)

func replicated(name string, replicas, parallelism int32, indexed bool, annotations map[string]string) jobsetapi.ReplicatedJob {
	rj := jobsetapi.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: ptr.To(parallelism),
		Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}},
	}}}
	if indexed {
		rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	return rj
}

func TestPodSets(t *testing.T) {
	jobIndex, completion := ptr.To(jobsetapi.JobIndexKey), ptr.To(strata.JobCompletionIndexLabel)
	cases := map[string]struct {
		rjs     []jobsetapi.ReplicatedJob
		want    []strata.PodSet
		wantErr string
	}{
		// KEP-2724 "JobSet with two-level scheduling": 2 Jobs of 4, the
		// JobSet in a block, each Job on a host.
		"two-level: the slice size defaults to the Jobs' parallelism": {
			rjs: []jobsetapi.ReplicatedJob{replicated("workers", 2, 4, true, map[string]string{
				"kueue.x-k8s.io/podset-required-topology":       "block",
				"kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
			})},
			want: []strata.PodSet{{Name: "workers", Count: 8, TopologyRequest: &strata.PodSetTopologyRequest{
				Required: ptr.To("block"), PodSetSliceRequiredTopology: ptr.To("kubernetes.io/hostname"), PodSetSliceSize: ptr.To[int32](4),
				PodIndexLabel: completion, SubGroupIndexLabel: jobIndex, SubGroupCount: ptr.To[int32](2),
			}}},
		},
		// KEP-2724 story 2: a leader and workers, each ReplicatedJob its own
		// pod set with its own annotations (both prefixes).
		"one pod set per ReplicatedJob": {
			rjs: []jobsetapi.ReplicatedJob{
				replicated("leader", 1, 1, false, map[string]string{"strata.dev/podset-required-topology": "rack"}),
				replicated("workers", 3, 2, true, map[string]string{"kueue.x-k8s.io/podset-preferred-topology": "rack"}),
			},
			want: []strata.PodSet{
				{Name: "leader", Count: 1, TopologyRequest: &strata.PodSetTopologyRequest{Required: ptr.To("rack"), SubGroupIndexLabel: jobIndex, SubGroupCount: ptr.To[int32](1)}},
				{Name: "workers", Count: 6, TopologyRequest: &strata.PodSetTopologyRequest{Preferred: ptr.To("rack"), PodIndexLabel: completion, SubGroupIndexLabel: jobIndex, SubGroupCount: ptr.To[int32](3)}},
			},
		},
		"no annotations: no topology request": {
			rjs:  []jobsetapi.ReplicatedJob{replicated("workers", 2, 3, true, nil)},
			want: []strata.PodSet{{Name: "workers", Count: 6}},
		},
		"a bad annotation points into its ReplicatedJob": {
			rjs: []jobsetapi.ReplicatedJob{replicated("ok", 1, 1, false, nil), replicated("bad", 1, 2, false, map[string]string{
				"kueue.x-k8s.io/podset-required-topology": "rack", "kueue.x-k8s.io/podset-preferred-topology": "rack",
			})},
			want:    []strata.PodSet{{Name: "ok", Count: 1}, {Name: "bad", Count: 2}},
			wantErr: "spec.replicatedJobs[1].template.spec.template.metadata.annotations",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := Adapt(&jobsetapi.JobSet{Spec: jobsetapi.JobSetSpec{ReplicatedJobs: tc.rjs}})
			got, errs := js.PodSets()
			for i := range got {
				got[i].Template = corev1.PodTemplateSpec{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodSets() (-want,+got):\n%s", diff)
			}
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("errors: %v", errs)
			case tc.wantErr != "" && (len(errs) == 0 || errs[0].Field[:len(tc.wantErr)] != tc.wantErr):
				t.Errorf("errors %v, want one at %s", errs, tc.wantErr)
			}
		})
	}
}

func TestJobSet(t *testing.T) {
	js := Adapt(&jobsetapi.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{strata.QueueNameLabel: "q"}},
		Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{
			replicated("leader", 1, 1, false, nil), replicated("workers", 2, 4, true, nil),
		}},
	})
	if js.Suspended() || js.TemplatesMutable() {
		t.Errorf("a JobSet without spec.suspend: Suspended() %t, TemplatesMutable() %t", js.Suspended(), js.TemplatesMutable())
	}
	js.SetSuspended(true)
	if !js.Suspended() || !js.TemplatesMutable() {
		t.Errorf("suspended: Suspended() %t, TemplatesMutable() %t", js.Suspended(), js.TemplatesMutable())
	}
	// Suspended, but the JobSet controller has not stopped a child Job's
	// pods yet: starting it again now would run them beside the new ones.
	js.Status.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "leader"}, {Name: "workers", Active: 1}}
	if js.TemplatesMutable() {
		t.Errorf("suspended with a child Job still active: TemplatesMutable() true")
	}
	js.Status.ReplicatedJobsStatus[1].Active = 0
	if !js.TemplatesMutable() {
		t.Errorf("suspended, no child Job active: TemplatesMutable() false")
	}
	tmpls := js.Templates()
	if len(tmpls) != 2 || tmpls[1] != &js.Spec.ReplicatedJobs[1].Template.Spec.Template {
		t.Errorf("Templates() are not the ReplicatedJobs' templates in order")
	}
	if !jobs.LabelsOwner(js) {
		t.Error("a JobSet's pods are its Jobs': the admission must label them with the JobSet's UID")
	}
	wl, errs := jobs.WorkloadFor(js)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if wl.Name != "jobset-train" || wl.Spec.QueueName != "q" || len(wl.Spec.PodSets) != 2 {
		t.Errorf("WorkloadFor() = %s in queue %s with %d pod sets", wl.Name, wl.Spec.QueueName, len(wl.Spec.PodSets))
	}
	for _, tc := range []struct {
		cond   jobsetapi.JobSetConditionType
		want   bool
		reason string
	}{{jobsetapi.JobSetSuspended, false, ""}, {jobsetapi.JobSetCompleted, true, "Succeeded"}, {jobsetapi.JobSetFailed, true, "Failed"}} {
		js.Status.Conditions = []metav1.Condition{{Type: string(tc.cond), Status: metav1.ConditionTrue}}
		if done, reason := js.Finished(); done != tc.want || reason != tc.reason {
			t.Errorf("condition %s: Finished() = %t, %q, want %t, %q", tc.cond, done, reason, tc.want, tc.reason)
		}
	}
}

// TestReclaimablePods: the pods of a ReplicatedJob's succeeded Jobs are
// reclaimable, per pod set.
func TestReclaimablePods(t *testing.T) {
	js := &jobsetapi.JobSet{Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{
		replicated("leader", 1, 1, false, nil),
		replicated("workers", 3, 4, true, nil),
	}}}
	if got := Adapt(js).ReclaimablePods(); got != nil {
		t.Errorf("nothing succeeded: got %v", got)
	}
	js.Status.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "leader", Active: 1}, {Name: "workers", Succeeded: 2, Active: 1}, {Name: "gone", Succeeded: 1}}
	want := []strata.ReclaimablePod{{Name: "workers", Count: 8}}
	if diff := cmp.Diff(want, Adapt(js).ReclaimablePods()); diff != "" {
		t.Errorf("two of three worker Jobs succeeded (-want,+got):\n%s", diff)
	}
}
