package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/workload"
)

// This file reads what a worker holds: the hub's copies there and the
// worker's capacity summaries.

// Copy returns the copy of a hub job of kind k on a worker as last read:
// the object (namespace/name) and its Workload, each nil when the worker
// has none labelled with this hub's origin. ErrKindNotServed says the
// worker does not serve k.
func (f *Fleet) Copy(ctx context.Context, name string, k jobs.Kind, key types.NamespacedName) (jobs.Job, *strata.Workload, error) {
	f.mu.Lock()
	r := f.remotes[name]
	if r == nil || !r.synced {
		f.mu.Unlock()
		return nil, nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	reader, err := r.reader(name, k)
	f.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	var j jobs.Job
	obj := k.NewObject()
	if err := reader.Get(ctx, key, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		obj = nil
	} else {
		j, _ = k.Adapt(obj)
	}
	wl, err := jobs.WorkerWorkload(ctx, r.cache, k, key, obj)
	if err != nil {
		return nil, nil, err
	}
	return j, wl, nil
}

// Copies lists the copies (of every kind it reads there) this hub
// dispatched to a worker, as last read. opts go to every kind's List:
// client.UnsafeDisableDeepCopy for a caller that only reads them (a
// worker holds thousands of copies, finished ones included).
func (f *Fleet) Copies(ctx context.Context, name string, opts ...client.ListOption) ([]jobs.Job, error) {
	f.mu.Lock()
	r := f.remotes[name]
	if r == nil || !r.synced {
		f.mu.Unlock()
		return nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	readers := map[jobs.Kind]client.Reader{batchjob.Kind: r.cache}
	for _, w := range r.kinds {
		if w.synced {
			readers[w.kind] = w.cache
		}
	}
	f.mu.Unlock()
	var out []jobs.Job
	for _, k := range kinds.Hub {
		reader, ok := readers[k]
		if !ok {
			continue
		}
		list, err := k.List(ctx, reader, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// LiveCopies lists this hub's copies on a worker, of every kind the hub
// dispatches, from the worker's API server rather than the informers: the
// sweep before a fencing Lease is renewed must see every copy, and an
// informer of a kind may not be synced, or its discovery not done. A kind
// whose API the worker does not serve has no copies there.
func (f *Fleet) LiveCopies(ctx context.Context, name string) ([]jobs.Job, error) {
	f.mu.Lock()
	r := f.remotes[name]
	f.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	var out []jobs.Job
	for _, k := range kinds.Hub {
		list, err := k.List(ctx, r.client, client.MatchingLabels{strata.OriginLabel: f.origin})
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue // the kind is not served there
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %s copies on %s: %w", k.GroupVersionKind().Kind, name, err)
		}
		out = append(out, list...)
	}
	return out, nil
}

// LiveDispatches lists, from a worker's API server, the dispatch keys
// (workload.DispatchKey) of its Workloads that carry this hub's origin:
// the agent keeps a copy's dispatch labels on its Workload whatever
// becomes of the Job's, so a copy whose Job lost them (a tenant's edit)
// is still found here.
func (f *Fleet) LiveDispatches(ctx context.Context, name string) ([]string, error) {
	f.mu.Lock()
	r := f.remotes[name]
	f.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	var list strata.WorkloadList
	if err := r.client.List(ctx, &list, client.MatchingLabels{strata.OriginLabel: f.origin}); err != nil {
		return nil, fmt.Errorf("listing the copies' Workloads on %s: %w", name, err)
	}
	var keys []string
	for i := range list.Items {
		if k := workload.DispatchKey(&list.Items[i]); k != "" {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// DispatchOn reads from a worker's API server whether a Workload there
// carries dispatch uid/generation of this hub, and whether one of them
// may still run: it is admitted, or it is orphaned (its copy deleted with
// its pods orphaned: workload.Orphaned), which its agent deletes once
// none of its pods runs, naming meanwhile those still going
// (strata.GoingPodsAnnotation), or it is deleted and held by the agent
// until its pods are gone (its copy deleted on the worker, the pods
// terminating: workload.PodsGoing). running is that Workload, nil when
// none may run.
func (f *Fleet) DispatchOn(ctx context.Context, name string, uid types.UID, generation int64) (exists bool, running *strata.Workload, err error) {
	f.mu.Lock()
	r := f.remotes[name]
	f.mu.Unlock()
	if r == nil {
		return false, nil, fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	var list strata.WorkloadList
	if err := r.client.List(ctx, &list, client.MatchingLabels{strata.OriginLabel: f.origin, strata.HubWorkloadUIDLabel: string(uid),
		strata.DispatchGenerationLabel: strconv.FormatInt(generation, 10)}); err != nil {
		return false, nil, fmt.Errorf("listing the Workloads of a dispatch on %s: %w", name, err)
	}
	for i := range list.Items {
		if wl := &list.Items[i]; wl.Status.Admission != nil || workload.Orphaned(wl) || workload.PodsGoing(wl) {
			return true, wl, nil
		}
	}
	return len(list.Items) > 0, nil, nil
}

// Summaries returns a worker's capacity summaries as last read, one per
// flavor (onePerFlavor), sorted by flavor; false when the worker is not
// connected (or not read yet).
func (f *Fleet) Summaries(ctx context.Context, name string) ([]strata.CapacitySummary, bool, error) {
	f.mu.Lock()
	r := f.remotes[name]
	ok := r != nil && r.synced
	f.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	var list strata.CapacitySummaryList
	if err := r.cache.List(ctx, &list); err != nil {
		return nil, true, err
	}
	return onePerFlavor(list.Items), true, nil
}

// onePerFlavor sorts summaries by flavor and keeps one of each flavor:
// the one named after it, as the agent names what it publishes, else the
// first by name. Another summary of the same flavor (made by hand, or
// left by a tool) would otherwise replace the agent's at random from one
// pass to the next.
func onePerFlavor(items []strata.CapacitySummary) []strata.CapacitySummary {
	slices.SortFunc(items, func(a, b strata.CapacitySummary) int {
		return cmp.Or(cmp.Compare(a.Spec.Flavor, b.Spec.Flavor),
			cmp.Compare(b2i(a.Name != a.Spec.Flavor), b2i(b.Name != b.Spec.Flavor)), cmp.Compare(a.Name, b.Name))
	})
	return slices.CompactFunc(items, func(a, b strata.CapacitySummary) bool { return a.Spec.Flavor == b.Spec.Flavor })
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
