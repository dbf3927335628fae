package intake

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// TestSyncFinalizer: a Keeper with a finalizer (the hub's) creates every
// Workload with it and adds it to one made without; a Workload being
// deleted and held by it is left as it is, and a job whose Workload name
// an earlier job's such Workload holds waits for it, saying so. Without
// one (the agent's), nothing changes.
func TestSyncFinalizer(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "job-train"}
	// existing is the Workload of job made by an earlier version (no
	// finalizer) or, deleted, waiting for the finalizer.
	existing := func(t *testing.T, k *Keeper, owner *batchv1.Job, deleted bool) *strata.Workload {
		t.Helper()
		wl, errs := DesiredWorkload(batchjob.Adapt(owner), tas.Options{})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if err := controllerutil.SetControllerReference(owner, wl, clientgoscheme.Scheme); err != nil {
			t.Fatal(err)
		}
		if deleted {
			wl.Finalizers = []string{strata.CopyGoneFinalizer}
		}
		if err := k.client.Create(ctx, wl); err != nil {
			t.Fatal(err)
		}
		if deleted {
			if err := k.client.Delete(ctx, wl); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.client.Get(ctx, key, wl); err != nil {
			t.Fatal(err)
		}
		return wl
	}
	earlier := makeJob("train", nil)
	earlier.UID = "earlier-uid"
	cases := map[string]struct {
		finalizer string
		// copiesOnly: the finalizer goes on hub copies only (the agent's
		// WithFinalizerFor); copy: the job is one.
		copiesOnly, copy bool
		existing         func(t *testing.T, k *Keeper) *strata.Workload
		wantErr          error
		wantFinal        []string
		wantSameRV       bool // the existing Workload is not written
		wantEvent        bool
	}{
		"created with the finalizer":      {finalizer: strata.CopyGoneFinalizer, wantFinal: []string{strata.CopyGoneFinalizer}},
		"created without one (the agent)": {},
		"made by an earlier version: gets it": {finalizer: strata.CopyGoneFinalizer, wantFinal: []string{strata.CopyGoneFinalizer},
			existing: func(t *testing.T, k *Keeper) *strata.Workload { return existing(t, k, makeJob("train", nil), false) }},
		"its own, deleted, held by the finalizer: left as it is": {finalizer: strata.CopyGoneFinalizer, wantFinal: []string{strata.CopyGoneFinalizer}, wantSameRV: true,
			existing: func(t *testing.T, k *Keeper) *strata.Workload { return existing(t, k, makeJob("train", nil), true) }},
		"an earlier job's, deleted, held by the finalizer: the job waits for it": {finalizer: strata.CopyGoneFinalizer, wantFinal: []string{strata.CopyGoneFinalizer},
			wantSameRV: true, wantErr: ErrEarlierWorkloadGoing, wantEvent: true,
			existing: func(t *testing.T, k *Keeper) *strata.Workload { return existing(t, k, earlier, true) }},
		"the agent: a hub's copy is created with its finalizer": {finalizer: strata.PodsGoneFinalizer, copiesOnly: true, copy: true,
			wantFinal: []string{strata.PodsGoneFinalizer}},
		"the agent: a job of the worker's own gets none": {finalizer: strata.PodsGoneFinalizer, copiesOnly: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := newPriorityKeeper(t)
			recorder := events.NewFakeRecorder(10)
			k.recorder = recorder
			switch {
			case tc.copiesOnly:
				k.WithFinalizerFor(tc.finalizer, workload.IsCopy)
			case tc.finalizer != "":
				k.WithFinalizer(tc.finalizer)
			}
			var before *strata.Workload
			if tc.existing != nil {
				before = tc.existing(t, k)
			}
			job := makeJob("train", nil)
			if tc.copy {
				job.Labels[strata.OriginLabel], job.Labels[strata.HubWorkloadUIDLabel], job.Labels[strata.DispatchGenerationLabel] = "hub", "hub-uid", "1"
			}
			_, err := k.Sync(ctx, batchjob.Adapt(job))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Sync() error = %v, want %v", err, tc.wantErr)
			}
			var got strata.Workload
			if err := k.client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFinal, got.Finalizers); diff != "" {
				t.Errorf("finalizers (-want,+got):\n%s", diff)
			}
			if before != nil && (got.ResourceVersion == before.ResourceVersion) != tc.wantSameRV {
				t.Errorf("Workload written: %t, want %t", got.ResourceVersion != before.ResourceVersion, !tc.wantSameRV)
			}
			if before != nil && tc.wantSameRV && got.UID != before.UID {
				t.Error("the Workload was replaced")
			}
			if gotEvent := len(recorder.Events) > 0; gotEvent != tc.wantEvent {
				t.Errorf("an event: %t, want %t", gotEvent, tc.wantEvent)
			}
		})
	}
}
