package intake

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// TestSyncLeanWorkloads: a Keeper of lean Workloads writes pod templates
// with only what placing and charging read, and leaves alone a waiting
// Workload an earlier version wrote whole (an upgrade rewrites nothing),
// while a real change to the Job still reaches it.
func TestSyncLeanWorkloads(t *testing.T) {
	job := func(cpu string) *batchv1.Job {
		j := makeJob("train", map[string]string{"strata.dev/podset-preferred-topology": "rack"})
		j.Spec.Template.Labels = map[string]string{"app": "train"}
		c := &j.Spec.Template.Spec.Containers[0]
		c.Image = "registry.example/train:v1"
		c.Command = []string{"python", "train.py"}
		c.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "90"}}
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		return j
	}
	whole := func(t *testing.T, j *batchv1.Job) *strata.Workload {
		t.Helper()
		wl, errs := DesiredWorkload(batchjob.Adapt(j), tas.Options{})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if err := controllerutil.SetControllerReference(j, wl, clientgoscheme.Scheme); err != nil {
			t.Fatal(err)
		}
		return wl
	}
	cases := map[string]struct {
		existing   bool // a waiting Workload written whole from the Job with 1 CPU
		cpu        string
		wantUpdate bool
	}{
		"created lean":                      {cpu: "1"},
		"a whole Workload of the same Job":  {existing: true, cpu: "1"},
		"a whole Workload of a changed Job": {existing: true, cpu: "2", wantUpdate: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := newPriorityKeeper(t).WithLeanWorkloads()
			var before string
			if tc.existing {
				wl := whole(t, job("1"))
				if err := k.client.Create(context.Background(), wl); err != nil {
					t.Fatal(err)
				}
				before = wl.ResourceVersion
			}
			j := job(tc.cpu)
			if _, err := k.Sync(context.Background(), batchjob.Adapt(j)); err != nil {
				t.Fatalf("Sync() error: %v", err)
			}
			var got strata.Workload
			if err := k.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: whole(t, j).Name}, &got); err != nil {
				t.Fatal(err)
			}
			if updated := tc.existing && got.ResourceVersion != before; updated != tc.wantUpdate {
				t.Errorf("Workload rewritten: %t, want %t", updated, tc.wantUpdate)
			}
			want := whole(t, j)
			if tc.existing && !tc.wantUpdate {
				return // kept whole, as written
			}
			workload.LeanWorkload(want)
			if diff := cmp.Diff(want.Spec.PodSets, got.Spec.PodSets); diff != "" {
				t.Errorf("pod sets (-want,+got):\n%s", diff)
			}
			if c := got.Spec.PodSets[0].Template.Spec.Containers[0]; c.Image != "" || len(c.Env) != 0 || len(c.Command) != 0 {
				t.Errorf("the template is not lean: %+v", c)
			}
		})
	}
}

// TestSyncReplacesADispatchedWorkloadWhosePodSetsChanged: a hub Workload
// dispatched (placed) but not admitted is replaced when its Job's pod sets
// change (as Kueue replaces a Workload its job no longer matches), so that
// the hub's quota never counts a shape its copy does not run; one not
// placed is updated in place, and one admitted is left alone.
func TestSyncReplacesADispatchedWorkloadWhosePodSetsChanged(t *testing.T) {
	job := func(parallelism int32) *batchv1.Job {
		j := makeJob("train", nil)
		j.Spec.Parallelism = &parallelism
		return j
	}
	cases := map[string]struct {
		placed, admitted, refused bool
		wantGone                  bool
		wantCount                 int32
	}{
		"waiting: updated": {wantCount: 4},
		"refused once, waiting again: updated, its state kept": {refused: true, wantCount: 4},
		"dispatched, not admitted: deleted":                    {placed: true, wantGone: true},
		"admitted: left as it was":                             {placed: true, admitted: true, wantCount: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := newPriorityKeeper(t).WithLeanWorkloads()
			ctx := context.Background()
			if _, err := k.Sync(ctx, batchjob.Adapt(job(2))); err != nil {
				t.Fatal(err)
			}
			var wl strata.Workload
			key := client.ObjectKey{Namespace: ns, Name: workloadName(t, job(2))}
			if err := k.client.Get(ctx, key, &wl); err != nil {
				t.Fatal(err)
			}
			if tc.placed {
				wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "f", DispatchGeneration: 1}
			}
			if tc.refused {
				wl.Status.Placement = &strata.Placement{DispatchGeneration: 1} // the cluster cleared, the attempts kept
			}
			if tc.admitted {
				wl.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
			}
			if err := k.client.Status().Update(ctx, &wl); err != nil {
				t.Fatal(err)
			}
			_, err := k.Sync(ctx, batchjob.Adapt(job(4)))
			if tc.wantGone != (err != nil) {
				t.Errorf("Sync() error = %v, want one: %t", err, tc.wantGone)
			}
			var got strata.Workload
			err = k.client.Get(ctx, key, &got)
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Fatalf("Workload gone: %t (%v), want %t", gone, err, tc.wantGone)
			}
			if !tc.wantGone && got.Spec.PodSets[0].Count != tc.wantCount {
				t.Errorf("pod set count = %d, want %d", got.Spec.PodSets[0].Count, tc.wantCount)
			}
		})
	}
}

func workloadName(t *testing.T, j *batchv1.Job) string {
	t.Helper()
	wl, errs := DesiredWorkload(batchjob.Adapt(j), tas.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return wl.Name
}
