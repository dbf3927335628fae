package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ErrNewAPI stops a manager whose cluster began to serve an API the
// process found missing at its start (APIWatch): the process exits, and
// its Deployment starts it again with the controllers of that API.
var ErrNewAPI = errors.New("the cluster serves an API it did not serve at start")

// DefaultAPIWatchInterval is how often an APIWatch asks the API server
// for the APIs it waits for.
const DefaultAPIWatchInterval = 30 * time.Second

// APIWatch is a manager Runnable, on every replica, that waits for the
// APIs a process found missing at its start (an optional workload kind's
// CRD, the cluster autoscaler's ProvisioningRequest), which its
// controllers are set up without: once the cluster serves one, it stops
// the manager with ErrNewAPI, so that the process starts again and runs
// them. A CRD installed after strata-agent or strata-hub thus needs no
// manual restart.
type APIWatch struct {
	missing  []schema.GroupVersionKind
	served   func(schema.GroupVersionKind) (bool, error)
	interval time.Duration
}

// NewAPIWatch returns an APIWatch of the kinds missing, asking the API
// server of cfg through discovery every DefaultAPIWatchInterval.
func NewAPIWatch(cfg *rest.Config, missing []schema.GroupVersionKind) (*APIWatch, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &APIWatch{missing: missing, served: servedBy(dc), interval: DefaultAPIWatchInterval}, nil
}

// WithInterval sets how often the watch asks.
func (w *APIWatch) WithInterval(d time.Duration) *APIWatch {
	w.interval = d
	return w
}

// servedBy says through discovery whether the API server serves a kind.
func servedBy(dc discovery.DiscoveryInterface) func(schema.GroupVersionKind) (bool, error) {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Kind == gvk.Kind {
				return true, nil
			}
		}
		return false, nil
	}
}

// NeedLeaderElection is false: every replica set its controllers up
// without the API.
func (w *APIWatch) NeedLeaderElection() bool { return false }

// Start asks every interval until one of the missing kinds is served,
// then returns ErrNewAPI naming it; nil when ctx ends first, or at once
// when nothing is missing.
func (w *APIWatch) Start(ctx context.Context) error {
	if len(w.missing) == 0 {
		return nil
	}
	log := ctrl.Log.WithName("api-watch")
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		for _, gvk := range w.missing {
			served, err := w.served(gvk)
			if err != nil {
				log.V(2).Info("Asking whether the cluster serves an API; asking again later", "kind", gvk.String(), "error", err.Error())
				continue
			}
			if served {
				log.Info("The cluster serves an API it did not serve at start: restarting to run its controllers", "kind", gvk.String())
				return fmt.Errorf("%w: %s", ErrNewAPI, gvk)
			}
		}
	}
}

// Restartable is a manager's end as its command returns it: nil when an
// APIWatch stopped it (ErrNewAPI; the process exits 0, and its Deployment
// starts it again), err otherwise.
func Restartable(err error) error {
	if errors.Is(err, ErrNewAPI) {
		ctrl.Log.WithName("setup").Info("Exiting so that the restarted process runs the controllers of an API the cluster now serves", "reason", err.Error())
		return nil
	}
	return err
}

// Unserved are the kinds of objs (typed objects of s) that mapper finds
// no API for: CRDs older than the process (helm upgrade does not update a
// chart's crds/), for an APIWatch.
func Unserved(mapper meta.RESTMapper, s *runtime.Scheme, objs ...runtime.Object) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			continue
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			out = append(out, gvk)
		}
	}
	return out
}
