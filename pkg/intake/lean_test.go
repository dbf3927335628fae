package intake

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

// TestSyncEvictsADispatchedWorkloadWhosePodSetsChanged: a hub Workload
// dispatched (placed), admitted on its worker or not, whose Job's pod sets
// change is evicted at the hub (Evicted True, reason JobChanged, at its
// generation), its spec kept until its copy is taken back (the hub's quota
// counts what may still run), then brought up to date; one not placed is
// updated in place, and an admitted elastic Job's is left for the
// dispatcher to grant. A job changed back before its copy was taken back
// makes the Workload dispatchable as it is.
func TestSyncEvictsADispatchedWorkloadWhosePodSetsChanged(t *testing.T) {
	cases := map[string]struct {
		placed, admitted, refused, elastic bool
		wantCount                          int32
		wantEvicted                        bool
		// then: the copy taken back (the cluster cleared), and the job
		// synced again with parallelism then; wantThen is the count after.
		then, wantThen int32
	}{
		"waiting: updated": {wantCount: 4},
		"refused once, waiting again: updated, its state kept": {refused: true, wantCount: 4},
		"dispatched, not admitted: evicted, then updated":      {placed: true, wantCount: 2, wantEvicted: true, then: 4, wantThen: 4},
		"dispatched, evicted, changed back":                    {placed: true, wantCount: 2, wantEvicted: true, then: 2, wantThen: 2},
		"admitted: evicted, then updated":                      {placed: true, admitted: true, wantCount: 2, wantEvicted: true, then: 4, wantThen: 4},
		"admitted, elastic: left for the dispatcher to grant":  {placed: true, admitted: true, elastic: true, wantCount: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := func(parallelism int32) *batchv1.Job {
				j := makeJob("train", nil)
				j.Spec.Parallelism = &parallelism
				if tc.elastic {
					j.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
				}
				return j
			}
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
			if _, err := k.Sync(ctx, batchjob.Adapt(job(4))); err != nil {
				t.Fatalf("Sync() error = %v", err)
			}
			var got strata.Workload
			if err := k.client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if got.UID != wl.UID {
				t.Errorf("the Workload was replaced")
			}
			if got.Spec.PodSets[0].Count != tc.wantCount {
				t.Errorf("pod set count = %d, want %d", got.Spec.PodSets[0].Count, tc.wantCount)
			}
			if evicted := workload.OutdatedByJob(&got); evicted != tc.wantEvicted {
				t.Errorf("OutdatedByJob() = %t, want %t; conditions: %v", evicted, tc.wantEvicted, got.Status.Conditions)
			}
			if tc.then == 0 {
				return
			}
			// Synced again before the copy is taken back: nothing changes.
			if _, err := k.Sync(ctx, batchjob.Adapt(job(4))); err != nil {
				t.Fatal(err)
			}
			if err := k.client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.PodSets[0].Count != tc.wantCount || !workload.OutdatedByJob(&got) {
				t.Errorf("synced again before the take-back: count %d, outdated %t", got.Spec.PodSets[0].Count, workload.OutdatedByJob(&got))
			}
			got.Status.Placement.Cluster, got.Status.Admission = "", nil
			if err := k.client.Status().Update(ctx, &got); err != nil {
				t.Fatal(err)
			}
			if _, err := k.Sync(ctx, batchjob.Adapt(job(tc.then))); err != nil {
				t.Fatal(err)
			}
			if err := k.client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.PodSets[0].Count != tc.wantThen {
				t.Errorf("after the take-back: pod set count = %d, want %d", got.Spec.PodSets[0].Count, tc.wantThen)
			}
			if workload.OutdatedByJob(&got) {
				t.Errorf("after the take-back: still outdated (generation %d); conditions: %v", got.Generation, got.Status.Conditions)
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

// TestSyncLeavesAMinCountChangeAlone: a Workload is not rewritten,
// nor a dispatched one evicted, for a change of minCount alone (a Job's
// job-min-parallelism edited after its Workload was made, an upgrade, or
// a Workload CRD without the field, which would drop it on every write
// and have it written again for ever).
func TestSyncLeavesAMinCountChangeAlone(t *testing.T) {
	for name, placed := range map[string]bool{"waiting": false, "dispatched": true} {
		t.Run(name, func(t *testing.T) {
			k := newPriorityKeeper(t).WithLeanWorkloads()
			ctx := context.Background()
			j := makeJob("train", nil)
			j.Spec.Parallelism = ptr.To[int32](4)
			if _, err := k.Sync(ctx, batchjob.Adapt(j)); err != nil {
				t.Fatal(err)
			}
			var wl strata.Workload
			key := client.ObjectKey{Namespace: ns, Name: workloadName(t, j)}
			if err := k.client.Get(ctx, key, &wl); err != nil {
				t.Fatal(err)
			}
			if placed {
				wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "f", DispatchGeneration: 1}
				if err := k.client.Status().Update(ctx, &wl); err != nil {
					t.Fatal(err)
				}
			}
			j.Annotations = map[string]string{strata.JobMinParallelismAnnotation: "2"}
			if _, err := k.Sync(ctx, batchjob.Adapt(j)); err != nil {
				t.Fatal(err)
			}
			var got strata.Workload
			if err := k.client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != wl.ResourceVersion || got.Spec.PodSets[0].MinCount != nil {
				t.Errorf("the Workload was written: minCount %v, conditions %v", got.Spec.PodSets[0].MinCount, got.Status.Conditions)
			}
		})
	}
}
