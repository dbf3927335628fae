package fleet

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
)

// TestOnePerFlavor: one summary per flavor, the agent's (named after its
// flavor) before any other, whatever order the cache lists them in.
func TestOnePerFlavor(t *testing.T) {
	summary := func(name, flavor string) strata.CapacitySummary {
		return strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: strata.CapacitySummarySpec{Flavor: flavor}}
	}
	cases := map[string]struct {
		in   []strata.CapacitySummary
		want []string
	}{
		"one each, sorted by flavor": {
			in:   []strata.CapacitySummary{summary("gpu", "gpu"), summary("cpu", "cpu")},
			want: []string{"cpu", "gpu"},
		},
		"a hand-made one of the agent's flavor is left out, listed first or last": {
			in:   []strata.CapacitySummary{summary("aaa-copy", "gpu"), summary("gpu", "gpu"), summary("zzz-copy", "gpu")},
			want: []string{"gpu"},
		},
		"none named after the flavor: the first by name": {
			in:   []strata.CapacitySummary{summary("y", "gpu"), summary("x", "gpu")},
			want: []string{"x"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range onePerFlavor(tc.in) {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("onePerFlavor() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDispatchOn: a dispatch's Workload on a worker may still run while
// it is admitted, or orphaned (its copy deleted with its pods orphaned:
// its agent deletes it once none of its pods runs), finished or not, or
// deleted and held by the agent until its pods are gone.
func TestDispatchOn(t *testing.T) {
	const uid, gen = "u1", int64(2)
	wl := func(name string, mutate func(*strata.Workload)) *strata.Workload {
		w := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{
			strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: uid, strata.DispatchGenerationLabel: "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "j1", Controller: ptr.To(true)}}}}
		if mutate != nil {
			mutate(w)
		}
		return w
	}
	admitted := func(w *strata.Workload) { w.Status.Admission = &strata.Admission{ClusterQueue: "cq"} }
	orphaned := func(w *strata.Workload) { w.OwnerReferences = nil }
	podsGoing := func(w *strata.Workload) {
		w.Finalizers = []string{strata.PodsGoneFinalizer}
		w.DeletionTimestamp = ptr.To(metav1.Now())
	}
	deletedElse := func(w *strata.Workload) {
		w.Finalizers = []string{"example.com/other"}
		w.DeletionTimestamp = ptr.To(metav1.Now())
	}
	cases := map[string]struct {
		objs                 []client.Object
		wantExists, wantRuns bool
	}{
		"none":                             {},
		"admitted":                         {objs: []client.Object{wl("job-train", admitted)}, wantExists: true, wantRuns: true},
		"evicted":                          {objs: []client.Object{wl("job-train", nil)}, wantExists: true},
		"orphaned, evicted":                {objs: []client.Object{wl("job-train", orphaned)}, wantExists: true, wantRuns: true},
		"deleted, evicted, its pods going": {objs: []client.Object{wl("job-train", podsGoing)}, wantExists: true, wantRuns: true},
		"deleted, evicted, held by another finalizer": {objs: []client.Object{wl("job-train", deletedElse)}, wantExists: true},
		"another dispatch admitted":                   {objs: []client.Object{wl("job-train", func(w *strata.Workload) { admitted(w); w.Labels[strata.DispatchGenerationLabel] = "1" })}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := New(nil, "hub")
			f.remotes["w1"] = &remote{client: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objs...).Build()}
			exists, running, err := f.DispatchOn(context.Background(), "w1", uid, gen)
			if err != nil {
				t.Fatal(err)
			}
			if runs := running != nil; exists != tc.wantExists || runs != tc.wantRuns {
				t.Errorf("DispatchOn() = %t, %t; want %t, %t", exists, running != nil, tc.wantExists, tc.wantRuns)
			}
		})
	}
}
