package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrClusterChanged says a worker's credential now reaches another cluster
// than the one the hub dispatched to.
var ErrClusterChanged = errors.New("the worker's address now reaches another cluster")

// identityTTL is how long a check of a worker's identity is taken as
// current.
const identityTTL = 10 * time.Second

// SetClusterID records the identity (the UID of namespace kube-system) of
// the cluster the hub dispatched to under a worker's name.
//
// A changed identity (the WorkerCluster accepted another cluster, by
// strata.dev/accept-cluster-id) is remembered with the hub's last renewal
// of the old cluster's fencing Lease: the workloads dispatched there are
// placed again only replaceAfter after it (ClusterSwitch).
func (f *Fleet) SetClusterID(name, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.clusterIDs[name]
	if prev != id {
		delete(f.identityChecked, name)
	}
	if prev != "" && prev != id {
		last, ok := f.renewed[name]
		if !ok {
			last = f.startedAt
		}
		f.switches[name] = ClusterSwitch{At: f.clock.Now(), LastRenewal: last, From: prev, To: id}
	}
	f.clusterIDs[name] = id
}

// RestoreSwitch takes back a cluster switch a WorkerCluster's status
// records (written by an earlier hub process) when this process saw none
// of its own for that cluster. It does not know the earlier process's
// last renewal of the old cluster's Lease, so it assumes the worst: the
// moment this process started (every renewal of the old cluster came
// before it).
func (f *Fleet) RestoreSwitch(name, from, to string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sw, ok := f.switches[name]; ok && sw.To == to {
		return
	}
	f.switches[name] = ClusterSwitch{At: at, LastRenewal: f.startedAt, From: from, To: to}
}

// ClusterSwitch is a worker name that came to stand for another cluster:
// when, the hub's last renewal of the old cluster's fencing Lease, and
// both identities.
type ClusterSwitch struct {
	At, LastRenewal time.Time
	From, To        string
}

// Switched returns the last cluster switch of a worker name this process
// saw; ok is false when it saw none.
func (f *Fleet) Switched(name string) (ClusterSwitch, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.switches[name]
	return s, ok
}

// SameCluster checks, with a read from the worker, that its address still
// reaches the cluster the hub dispatched to: call it before acting on a
// copy found gone there (a DNS or load-balancer name repointed to another
// cluster makes every copy look gone). nil when it does, or when no
// identity is recorded yet; a check is reused for identityTTL.
func (f *Fleet) SameCluster(ctx context.Context, name string) error {
	f.mu.Lock()
	want, at := f.clusterIDs[name], f.identityChecked[name]
	f.mu.Unlock()
	if want == "" || (!at.IsZero() && f.clock.Since(at) < identityTTL) {
		return nil
	}
	return f.CheckCluster(ctx, name)
}

// CheckCluster is SameCluster without reusing an earlier check: call it
// right before a write that acts on what a read from the worker showed
// (the orphan sweep, a renewal of the fencing Lease), which a repointed
// address would make the hub do on another cluster.
func (f *Fleet) CheckCluster(ctx context.Context, name string) error {
	f.mu.Lock()
	r, want := f.remotes[name], f.clusterIDs[name]
	f.mu.Unlock()
	if want == "" {
		return nil
	}
	if r == nil {
		return fmt.Errorf("worker %s: %w", name, ErrNotConnected)
	}
	return f.checkCluster(ctx, name, r.client, want)
}

// checkCluster reads the identity of the cluster c reaches and compares
// it with want, the one recorded for worker name.
func (f *Fleet) checkCluster(ctx context.Context, name string, c client.Client, want string) error {
	got, err := readClusterID(ctx, c)
	if err != nil {
		return err
	}
	if got != want {
		f.mu.Lock()
		delete(f.identityChecked, name)
		f.mu.Unlock()
		return fmt.Errorf("worker %s: %w (ID %s, not %s)", name, ErrClusterChanged, got, want)
	}
	f.mu.Lock()
	f.identityChecked[name] = f.clock.Now()
	f.mu.Unlock()
	return nil
}

// readClusterID reads the UID of the kube-system namespace through c.
func readClusterID(ctx context.Context, c client.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var ns corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("reading the worker's identity (the UID of namespace kube-system): %w", err)
	}
	return string(ns.UID), nil
}
