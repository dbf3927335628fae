package jobs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
)

func userTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
		Spec: corev1.PodSpec{
			// gpu equals the flavor's label: the user's, it must stay.
			// zone differs from the flavor's: the flavor wins while admitted.
			NodeSelector: map[string]string{"gpu": "h100", "zone": "a"},
			Tolerations: []corev1.Toleration{
				{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "user.example.com/gate"}},
		},
	}
}

func TestAdmitAndRestoreTemplate(t *testing.T) {
	flavor := &strata.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec: strata.ResourceFlavorSpec{
			NodeLabels: map[string]string{"gpu": "h100", "zone": "b", "pool": "p1"},
			Tolerations: []corev1.Toleration{
				{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, // the user has it
				{Key: "reserved", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			},
		},
	}
	cases := map[string]struct {
		tmpl         func() corev1.PodTemplateSpec
		topology     bool
		wantAdmitted corev1.PodTemplateSpec
		wantAdded    addedByAdmission
	}{
		"user template": {
			tmpl:     userTemplate,
			topology: true,
			wantAdmitted: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train", strata.WorkloadLabel: "job-train", strata.PodSetLabel: "main", strata.TASLabel: "true"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"gpu": "h100", "zone": "b", "pool": "p1"},
					Tolerations:  append(userTemplate().Spec.Tolerations, flavor.Spec.Tolerations[1]),
					SchedulingGates: []corev1.PodSchedulingGate{
						{Name: "user.example.com/gate"}, {Name: strata.TopologySchedulingGate}},
				},
			},
			wantAdded: addedByAdmission{
				NodeSelector:         map[string]string{"zone": "b", "pool": "p1"},
				ReplacedNodeSelector: map[string]string{"zone": "a"},
				Tolerations:          flavor.Spec.Tolerations[1:],
			},
		},
		"empty template, no topology": {
			tmpl: func() corev1.PodTemplateSpec { return corev1.PodTemplateSpec{} },
			wantAdmitted: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.WorkloadLabel: "job-train", strata.PodSetLabel: "main"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"gpu": "h100", "zone": "b", "pool": "p1"},
					Tolerations:  flavor.Spec.Tolerations,
				},
			},
			wantAdded: addedByAdmission{
				NodeSelector: map[string]string{"gpu": "h100", "zone": "b", "pool": "p1"},
				Tolerations:  flavor.Spec.Tolerations,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Template: tc.tmpl()}}
			// Three admissions, each taken back, through the annotation as
			// the controller does: nothing accumulates, nothing of the
			// user's is lost.
			for round := range 3 {
				added := admitTemplate(&job.Spec.Template, flavor, "job-train", "main", tc.topology)
				if diff := cmp.Diff(tc.wantAdmitted, job.Spec.Template); diff != "" {
					t.Fatalf("round %d: admitted template (-want,+got):\n%s", round, diff)
				}
				if diff := cmp.Diff(tc.wantAdded, added); diff != "" {
					t.Errorf("round %d: added (-want,+got):\n%s", round, diff)
				}
				if err := recordAdded(batchjob.Adapt(job), added); err != nil {
					t.Fatal(err)
				}
				recorded, ok, err := recordedAdded(batchjob.Adapt(job))
				if !ok || err != nil {
					t.Fatalf("round %d: recordedAdded() = %v, %v", round, ok, err)
				}
				restoreTemplate(&job.Spec.Template, recorded)
				want := tc.tmpl()
				if len(want.Labels) == 0 {
					want.Labels = map[string]string{} // made by admitTemplate
				}
				if diff := cmp.Diff(want, job.Spec.Template); diff != "" {
					t.Fatalf("round %d: restored template (-want,+got):\n%s", round, diff)
				}
			}
		})
	}
}

func TestRestoreTemplateKeepsUserChanges(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "c", "pool": "p1"}}}
	// The user changed zone after the admission set it.
	restoreTemplate(&tmpl, addedByAdmission{
		NodeSelector:         map[string]string{"zone": "b", "pool": "p1"},
		ReplacedNodeSelector: map[string]string{"zone": "a"},
	})
	if diff := cmp.Diff(map[string]string{"zone": "c"}, tmpl.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want,+got):\n%s", diff)
	}
}

func TestRecordedAdded(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		want        addedByAdmission
		wantOK      bool
		wantErr     bool
	}{
		"none":      {},
		"empty":     {annotations: map[string]string{AddedByAdmissionAnnotation: "{}"}, wantOK: true},
		"malformed": {annotations: map[string]string{AddedByAdmissionAnnotation: "{"}, wantErr: true},
		"node selector": {
			annotations: map[string]string{AddedByAdmissionAnnotation: `{"nodeSelector":{"pool":"p1"}}`},
			want:        addedByAdmission{NodeSelector: map[string]string{"pool": "p1"}}, wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := recordedAdded(batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}))
			if diff := cmp.Diff([]any{tc.want, tc.wantOK, tc.wantErr}, []any{got, ok, err != nil}); diff != "" {
				t.Errorf("recordedAdded() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAdmitAndRestoreTemplates: a kind with several pod templates (a
// JobSet's ReplicatedJobs) gets each one's additions recorded and taken
// back exactly, the first inline as for a Job.
func TestAdmitAndRestoreTemplates(t *testing.T) {
	flavor := &strata.ResourceFlavor{Spec: strata.ResourceFlavorSpec{
		NodeLabels:  map[string]string{"gpu": "h100", "zone": "b"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
	}}
	leader := userTemplate()
	workers := corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "c"}}}
	js := jobset.Adapt(&jobsetapi.JobSet{Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{
		{Name: "leader", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *leader.DeepCopy()}}},
		{Name: "workers", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *workers.DeepCopy()}}},
	}}})
	var per []addedByAdmission
	for i, tmpl := range js.Templates() {
		per = append(per, admitTemplate(tmpl, flavor, "jobset-train", []string{"leader", "workers"}[i], true))
	}
	if err := recordAdded(js, recordOf(per)); err != nil {
		t.Fatal(err)
	}
	if got := js.Templates()[1].Spec.NodeSelector["zone"]; got != "b" {
		t.Fatalf("the second template's zone is %q while admitted, want the flavor's", got)
	}
	recorded, ok, err := recordedAdded(js)
	if !ok || err != nil {
		t.Fatalf("recordedAdded() = %v, %v", ok, err)
	}
	for i, tmpl := range js.Templates() {
		restoreTemplate(tmpl, recorded.forTemplate(i))
	}
	leader.Labels = map[string]string{"app": "train"}
	workers.Labels = map[string]string{} // made by admitTemplate
	if diff := cmp.Diff([]corev1.PodTemplateSpec{leader, workers}, []corev1.PodTemplateSpec{*js.Templates()[0], *js.Templates()[1]}); diff != "" {
		t.Errorf("templates after restore (-want,+got):\n%s", diff)
	}
}

// TestStripStale: starting a job whose children were made from an earlier
// admission's templates, what no flavor of the new admission carries
// leaves them; the user's and the child controller's entries stay.
func TestStripStale(t *testing.T) {
	flavors := []strata.ResourceFlavor{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: strata.ResourceFlavorSpec{NodeLabels: map[string]string{"pool-a": "x"},
			Tolerations: []corev1.Toleration{{Key: "gpu-a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: strata.ResourceFlavorSpec{NodeLabels: map[string]string{"zone-b": "y"}}},
	}
	gate := corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}
	userToleration := corev1.Toleration{Key: "mine", Operator: corev1.TolerationOpExists}
	// Admitted on b without topology: b's label, the user's selector and
	// toleration, Strata's workload labels.
	admittedB := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "train", strata.WorkloadLabel: "jobset-x", strata.PodSetLabel: "workers"},
			Annotations: map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack"},
		},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone-b": "y", "disk": "ssd"}, Tolerations: []corev1.Toleration{userToleration}},
	}
	cases := []struct {
		name  string
		child corev1.PodTemplateSpec
		want  corev1.PodTemplateSpec
	}{
		{
			name: "made from flavor a's admission with topology",
			child: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{"app": "train", "jobset.sigs.k8s.io/jobset-name": "x", strata.WorkloadLabel: "jobset-x",
						strata.PodSetLabel: "workers", strata.TASLabel: "true"},
					Annotations: map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack", "jobset.sigs.k8s.io/job-key": "k"},
				},
				Spec: corev1.PodSpec{
					NodeSelector:    map[string]string{"pool-a": "x", "disk": "ssd", "jobset.sigs.k8s.io/namespaced-job": "x-0"},
					Tolerations:     []corev1.Toleration{userToleration, flavors[0].Spec.Tolerations[0]},
					SchedulingGates: []corev1.PodSchedulingGate{gate},
				},
			},
			want: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "train", "jobset.sigs.k8s.io/jobset-name": "x", strata.WorkloadLabel: "jobset-x", strata.PodSetLabel: "workers"},
					Annotations: map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack", "jobset.sigs.k8s.io/job-key": "k"},
				},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"disk": "ssd", "jobset.sigs.k8s.io/namespaced-job": "x-0"},
					Tolerations:  []corev1.Toleration{userToleration},
				},
			},
		},
		{
			name: "made from the user's template: nothing to remove",
			child: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: []corev1.Toleration{userToleration}},
			},
			want: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: []corev1.Toleration{userToleration}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.child.DeepCopy()
			stripStale(flavors, []*corev1.PodTemplateSpec{admittedB})(0, got)
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("child template (-want +got):\n%s", diff)
			}
		})
	}
}
