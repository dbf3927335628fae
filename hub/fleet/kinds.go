package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/kinds"
)

// Copies of kinds other than batch/v1 Jobs are watched once the worker
// serves the kind (its CRD is installed): every worker serves Jobs, but a
// cluster without JobSet's CRD would never sync an informer of JobSets,
// and with it the whole connection. Each such kind gets its own cache,
// started when discovery first finds the kind (asked at the connection and
// then every kindRecheck while missing, so a CRD installed later is found;
// a failed discovery is retried after kindRetry); until that cache is
// synced, copies of the kind on the worker are not read (ErrNotConnected
// for them) and the dispatcher sends none there.
var kindRecheck = 30 * time.Second

// kindRetry is how soon discovery is asked again after it failed.
var kindRetry = 3 * time.Second

// kindWatch is the cache of one optional kind's copies on a worker.
type kindWatch struct {
	kind    jobs.Kind
	cache   crcache.Cache
	synced  bool
	started time.Time
}

// kindSyncWait bounds how long a worker's new capacity summaries wait for
// its copies of a kind to be read (CopiesPending): a watch that never
// syncs (a list the hub's credential may not make there) does not keep
// the worker out of placement for good.
var kindSyncWait = time.Minute

// CopiesPending names the kinds whose copies on a connected worker are not
// read yet: its discovery has not answered for the kind, or says it serves
// it and the watch is not made or not synced. Until they are, which
// dispatches its summaries count cannot be told (a restarted hub reads
// them after the summaries). Bounded by kindSyncWait from the connection
// and from each watch's start, so that a kind whose watch never syncs (a
// list the hub's credential may not make there) does not keep the worker
// out of placement for good.
func (f *Fleet) CopiesPending(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.remotes[name]
	if r == nil {
		return nil
	}
	var out []string
	for _, k := range kinds.Hub {
		if k == batchjob.Kind {
			continue
		}
		gvk := k.GroupVersionKind()
		w := r.kinds[gvk]
		served, known := r.discovered[gvk]
		switch {
		case w != nil && w.synced:
		case w != nil:
			if f.clock.Since(w.started) < kindSyncWait {
				out = append(out, gvk.Kind)
			}
		case (served || !known) && f.clock.Since(r.connectedAt) < kindSyncWait:
			out = append(out, gvk.Kind)
		}
	}
	slices.Sort(out)
	return out
}

// ErrKindNotServed says the worker does not serve a kind (its CRD is not
// installed there).
var ErrKindNotServed = errors.New("kind not served")

// watchKinds looks, until ctx ends, for the optional kinds the worker
// serves (asking its discovery with cfg, whose timeout bounds each
// request) and watches the hub's copies of each it finds (with watchCfg,
// without one).
func (f *Fleet) watchKinds(ctx context.Context, name string, r *remote, cfg, watchCfg *rest.Config) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return
	}
	for {
		missing, unknown := 0, 0
		for _, k := range kinds.Hub {
			if k == batchjob.Kind {
				continue
			}
			gvk := k.GroupVersionKind()
			f.mu.Lock()
			_, watched := r.kinds[gvk]
			f.mu.Unlock()
			if watched {
				continue
			}
			served, err := serves(dc, k)
			f.mu.Lock()
			if err == nil {
				r.discovered[gvk] = served
			}
			f.mu.Unlock()
			if err != nil {
				unknown++
				continue
			}
			if !served {
				missing++
				continue
			}
			if err := f.watchKind(ctx, name, r, watchCfg, k); err != nil {
				missing++
			}
		}
		if missing == 0 && unknown == 0 {
			return
		}
		next := kindRecheck
		if unknown > 0 {
			next = kindRetry // the worker did not answer: ask again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// serves asks the worker's discovery whether it serves kind k.
func serves(dc discovery.DiscoveryInterface, k jobs.Kind) (bool, error) {
	gvk := k.GroupVersionKind()
	list, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, res := range list.APIResources {
		if res.Kind == gvk.Kind {
			return true, nil
		}
	}
	return false, nil
}

// watchKind starts the cache of kind k's copies on the worker; once it is
// synced, the connection's listeners hear of it (what waited for those
// copies goes on).
func (f *Fleet) watchKind(ctx context.Context, name string, r *remote, cfg *rest.Config, k jobs.Kind) error {
	mine := labels.SelectorFromSet(labels.Set{strata.OriginLabel: f.origin})
	c, err := crcache.New(cfg, crcache.Options{
		Scheme:                      f.scheme,
		ByObject:                    map[client.Object]crcache.ByObject{k.NewObject(): {Label: mine}},
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            crcache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, k.NewObject(), crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.copyChanged(name, o) },
		UpdateFunc: func(_, o any) { f.copyChanged(name, o) },
		DeleteFunc: func(o any) { f.copyChanged(name, o) },
	}); err != nil {
		return err
	}
	w := &kindWatch{kind: k, cache: c, started: f.clock.Now()}
	f.mu.Lock()
	r.kinds[k.GroupVersionKind()] = w
	f.mu.Unlock()
	go func() { _ = c.Start(ctx) }()
	go func() {
		if !c.WaitForCacheSync(ctx) {
			return
		}
		f.mu.Lock()
		w.synced = true
		listeners := f.connectedListeners
		f.mu.Unlock()
		for _, fn := range listeners {
			fn(name)
		}
	}()
	return nil
}

// Serves says whether a connected worker serves kind k, as far as the hub
// knows: batch/v1 Jobs always; another kind once discovery found it there.
// known is false while the worker's discovery has not answered.
func (f *Fleet) Serves(name string, k jobs.Kind) (served, known bool) {
	if k == batchjob.Kind {
		return true, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.remotes[name]
	if r == nil {
		return false, false
	}
	if _, ok := r.kinds[k.GroupVersionKind()]; ok {
		return true, true
	}
	served, known = r.discovered[k.GroupVersionKind()]
	return served, known
}

// reader returns the cache of kind k's copies on a connected worker.
// f.mu is held.
func (r *remote) reader(name string, k jobs.Kind) (client.Reader, error) {
	if k == batchjob.Kind {
		return r.cache, nil
	}
	w := r.kinds[k.GroupVersionKind()]
	served, known := r.discovered[k.GroupVersionKind()]
	switch {
	case w == nil && (served || !known):
		return nil, fmt.Errorf("worker %s: its %ss not watched yet: %w", name, k.GroupVersionKind().Kind, ErrNotConnected)
	case w == nil:
		return nil, fmt.Errorf("worker %s does not serve %s (its CRD is not installed there): %w", name, jobs.Resource(k), ErrKindNotServed)
	case !w.synced:
		return nil, fmt.Errorf("worker %s: its %ss not read yet: %w", name, k.GroupVersionKind().Kind, ErrNotConnected)
	}
	return w.cache, nil
}
