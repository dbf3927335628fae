package fleet

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/kinds"
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

// Summaries returns a worker's capacity summaries as last read, sorted by
// flavor; false when the worker is not connected (or not read yet).
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
	slices.SortFunc(list.Items, func(a, b strata.CapacitySummary) int {
		switch {
		case a.Spec.Flavor < b.Spec.Flavor:
			return -1
		case a.Spec.Flavor > b.Spec.Flavor:
			return 1
		}
		return 0
	})
	return list.Items, true, nil
}
