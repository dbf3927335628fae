// Package fleet is the hub's view of its worker clusters: one connection
// per worker, with an informer of the worker's CapacitySummaries, kept
// current by the WorkerCluster controller. It is a manager Runnable: the
// connections live as long as the manager.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
)

// Fleet holds a connection to every registered worker. It is safe for
// concurrent use.
type Fleet struct {
	scheme *runtime.Scheme
	// changed receives a worker's name whenever its summaries change or its
	// connection ends.
	changed chan string

	mu      sync.Mutex
	ctx     context.Context // the manager's, once started
	started chan struct{}
	remotes map[string]*remote
	// targets are the placement targets of every worker, by flavor.
	targets map[string]map[string]*placement.Target
}

// remote is one worker's connection.
type remote struct {
	// identity says which credential the connection uses; a new one
	// replaces the connection.
	identity string
	cache    crcache.Cache
	cancel   context.CancelFunc
	synced   bool
}

// New returns an empty fleet.
func New(scheme *runtime.Scheme) *Fleet {
	return &Fleet{scheme: scheme, changed: make(chan string, 1024), started: make(chan struct{}), remotes: map[string]*remote{},
		targets: map[string]map[string]*placement.Target{}}
}

// Changed receives the names of workers whose summaries changed.
func (f *Fleet) Changed() <-chan string { return f.changed }

// Start keeps the connections until ctx ends, then closes them.
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	close(f.started)
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, r := range f.remotes {
		r.cancel()
		delete(f.remotes, name)
	}
	return nil
}

// NeedLeaderElection is true: only the leader talks to the workers.
func (f *Fleet) NeedLeaderElection() bool { return true }

// Connect makes sure worker name is connected with cfg, identified by
// identity (a connection with another identity is replaced), and waits up
// to timeout for its summaries to be read. An error says why the worker
// cannot be reached; the connection is kept and retried by the informer.
func (f *Fleet) Connect(ctx context.Context, name, identity string, cfg *rest.Config, timeout time.Duration) error {
	select {
	case <-f.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	r := f.remotes[name]
	if r != nil && r.identity != identity {
		r.cancel()
		delete(f.remotes, name)
		r = nil
	}
	if r == nil {
		var err error
		if r, err = f.connect(name, identity, cfg); err != nil {
			f.mu.Unlock()
			return err
		}
		f.remotes[name] = r
	}
	synced := r.synced
	f.mu.Unlock()
	if synced {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !r.cache.WaitForCacheSync(wait) {
		return fmt.Errorf("the worker's capacity summaries could not be read within %s", timeout)
	}
	f.mu.Lock()
	r.synced = true
	f.mu.Unlock()
	return nil
}

// connect starts an informer of the worker's CapacitySummaries. f.mu is held.
func (f *Fleet) connect(name, identity string, cfg *rest.Config) (*remote, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "strata-hub"
	c, err := crcache.New(cfg, crcache.Options{
		Scheme: f.scheme,
		ByObject: map[client.Object]crcache.ByObject{
			&strata.CapacitySummary{}: {},
		},
		// A worker the hub cannot reach must not block the hub: reads fail
		// fast and the informer retries with its own backoff.
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("a client for the worker: %w", err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	inf, err := c.GetInformer(ctx, &strata.CapacitySummary{}, crcache.BlockUntilSynced(false))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the worker's capacity summaries: %w", err)
	}
	notify := func() {
		select {
		case f.changed <- name:
		default: // a full queue: a resync brings the worker back
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		if err := c.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			notify()
		}
	}()
	return &remote{identity: identity, cache: c, cancel: cancel}, nil
}

// Forget drops a worker: its connection and its targets, with their
// reservations (the WorkerCluster is gone).
func (f *Fleet) Forget(name string) {
	f.Disconnect(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.targets, name)
}

// Disconnect closes a worker's connection; its targets stay, unavailable.
func (f *Fleet) Disconnect(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.remotes[name]; r != nil {
		r.cancel()
		delete(f.remotes, name)
	}
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
