// Package inuse keeps objects from going while something still uses
// them, as Kueue's resource-in-use finalizer does: on a worker, a
// ClusterQueue stays (terminating, admitting nothing) until the workloads
// holding its quota finish, a ResourceFlavor until no ClusterQueue names
// it, and a Topology until no ResourceFlavor names it; on a hub, a
// ClusterQueue until the workloads it dispatched finish. The agent and
// the hub wire a Reconciler per kind with what uses it.
package inuse

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

// Finalizer holds an object while something uses it.
const Finalizer = "strata.dev/resource-in-use"

// Action is what the reconciler does to an object's finalizers.
type Action int

const (
	// None leaves it.
	None Action = iota
	// Add adds the finalizer: the object is live and does not have it.
	Add
	// Remove removes the finalizer: the object is being deleted and
	// nothing uses it.
	Remove
	// Wait leaves it: the object is being deleted and something still
	// uses it.
	Wait
)

// Decide is what to do to obj, used by users (their names; empty: by
// nothing). A live object gets the finalizer; one being deleted loses it
// once nothing uses it. An object being deleted without it (deleted
// before the agent added it, or after someone removed it) is left alone.
func Decide(obj client.Object, users []string) Action {
	has := controllerutil.ContainsFinalizer(obj, Finalizer)
	switch {
	case obj.GetDeletionTimestamp().IsZero() && !has:
		return Add
	case obj.GetDeletionTimestamp().IsZero() || !has:
		return None
	case len(users) > 0:
		return Wait
	}
	return Remove
}

// QueueUsers are the workloads (namespace/name) among wls that hold quota
// of ClusterQueue name: admitted there (quota reserved, with or without
// their AdmissionChecks) and not finished. An evicted workload holds it
// until its admission is taken back, once its pods are gone.
func QueueUsers(name string, wls []*strata.Workload) []string {
	var out []string
	for _, wl := range wls {
		if HoldsQuota(wl) && wl.Status.Admission.ClusterQueue == name {
			out = append(out, wl.Namespace+"/"+wl.Name)
		}
	}
	slices.Sort(out)
	return out
}

// HoldsQuota says whether a workload holds the quota of the ClusterQueue
// of its admission.
func HoldsQuota(wl *strata.Workload) bool {
	return wl.Status.Admission != nil && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)
}

// FlavorUsers are the ClusterQueues among cqs that name flavor name in
// their quotas (spec.resourceGroups or spec.flavors), as Kueue holds a
// ResourceFlavor.
func FlavorUsers(name string, cqs []strata.ClusterQueue) []string {
	var out []string
	for i := range cqs {
		if slices.ContainsFunc(queue.Flavors(&cqs[i]), func(f strata.FlavorQuotas) bool { return f.Name == name }) {
			out = append(out, cqs[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// TopologyUsers are the ResourceFlavors among rfs whose spec.topologyName
// is name.
func TopologyUsers(name string, rfs []strata.ResourceFlavor) []string {
	var out []string
	for i := range rfs {
		if t := rfs[i].Spec.TopologyName; t != nil && *t == name {
			out = append(out, rfs[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// WaitMessage says why a deletion waits: kind's object is used by users,
// described as what (at most five named).
func WaitMessage(kind, name, what string, users []string) string {
	shown := users
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(users)-5)
	}
	return fmt.Sprintf("%s %s is being deleted and is still used by %d %s (%s%s): it goes once none is left (finalizer %s)",
		kind, name, len(users), what, strings.Join(shown, ", "), more, Finalizer)
}
