package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The health probe: every probeInterval the hub asks each connected
// worker's API server for /readyz, each request bounded by probeTimeout; a
// worker that fails probeFailures probes in a row is down until one
// succeeds. Informers alone notice a dead API server only when their watch
// times out (a minute and more), during which the hub went on dispatching
// there; the probe notices within probeFailures × (probeInterval +
// probeTimeout), about 10 s. /readyz is open to every authenticated
// client (the system:public-info-viewer ClusterRole), so the hub's worker
// identity needs no permission for it.
var (
	probeInterval = 3 * time.Second
	probeTimeout  = 2 * time.Second
)

const probeFailures = 2

// health is one worker's probe state, guarded by Fleet.mu.
type health struct {
	failures int
	// down, when set, says why the worker is taken as unreachable.
	down string
	// otherCluster: down because the worker's address reaches another
	// cluster than the one the hub dispatched to (ErrClusterChanged).
	otherCluster bool
}

// DownReason says why a connected worker is taken as unreachable by the health
// probe, or "" when it answers (or is not connected: see Connect).
func (f *Fleet) DownReason(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.remotes[name]; r != nil {
		return r.health.down
	}
	return ""
}

// OtherCluster says whether the health probe found a connected worker's
// address reaching another cluster than the one the hub dispatched to:
// its connection is to be checked again now, not at the next periodic
// check.
func (f *Fleet) OtherCluster(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.remotes[name]
	return r != nil && r.health.otherCluster
}

// OnHealth calls fn with a worker's name each time the health probe takes
// it as down or as answering again. fn must not block.
func (f *Fleet) OnHealth(fn func(worker string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healthListeners = append(f.healthListeners, fn)
}

// probe asks a worker's API server for /readyz until ctx ends, and tells
// the fleet's listeners when the worker goes down or comes back.
func (f *Fleet) probe(ctx context.Context, name string, r *remote, ready func(context.Context) error) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := ready(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			// Answering: through the same address, maybe another cluster
			// (a name repointed, with or without an outage). Checked
			// every identityTTL at most; a worker found on another cluster
			// stays down until a check finds it on its own again.
			f.mu.Lock()
			other := r.health.otherCluster
			f.mu.Unlock()
			if ierr := f.SameCluster(ctx, name); errors.Is(ierr, ErrClusterChanged) || (ierr != nil && other) {
				err = ierr
			}
		}
		f.mu.Lock()
		was := r.health.down
		if err == nil {
			r.health = health{}
		} else if errors.Is(err, ErrClusterChanged) {
			r.health.failures = probeFailures
			r.health.down = err.Error()
			r.health.otherCluster = true
		} else {
			r.health.failures++
			if r.health.failures >= probeFailures {
				r.health.down = fmt.Sprintf("the worker's API server did not answer %d health probes in a row: %v", r.health.failures, err)
			}
		}
		changed := (was == "") != (r.health.down == "")
		healthListeners := f.healthListeners
		f.mu.Unlock()
		if changed {
			f.notify(ctx, name)
			for _, fn := range healthListeners {
				fn(name)
			}
		}
	}
}

// readyz returns a probe of the API server at cfg: GET /readyz.
func readyz(cfg *rest.Config) (func(context.Context) error, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = probeTimeout
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return rc.Get().AbsPath("/readyz").Do(ctx).Error()
	}, nil
}
