// Package kinds registers the workload kinds Strata runs. Adding a kind
// is its package under pkg/jobs — its jobs.Kind and jobs.Job, and its
// jobs.Registration — and one line here, Registered; then its RBAC and
// admission policies in both charts. The conformance test
// (conformance_test.go) checks all of it for every kind registered here;
// docs/development.md, "Adding a workload kind", lists the steps.
package kinds

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/jobs/mpijob"
)

// Registered are the kinds' registrations, batch/v1 Job first: every
// binary's scheme (pkg/scheme), the hub's and the agent's controllers,
// kubectl strata explain and simulate work through them.
var Registered = []jobs.Registration{batchjob.Registration, jobset.Registration, mpijob.Registration, lws.Registration}

// Hub are the kinds the hub dispatches: every registered kind (a whole
// LeaderWorkerSet is one hub Workload, a Workload per group on the
// worker).
var Hub = kindsOf(func(jobs.Registration) bool { return true })

// All are the kinds whose objects are one workload each on a worker,
// which the agent's job reconciler runs, batch/v1 Job first: those
// without a controller of their own (a LeaderWorkerSet is one workload
// per group, which its own controller keeps).
var All = kindsOf(func(r jobs.Registration) bool { return r.AgentController == nil })

func kindsOf(keep func(jobs.Registration) bool) []jobs.Kind {
	var out []jobs.Kind
	for _, r := range Registered {
		if keep(r) {
			out = append(out, r.Kind)
		}
	}
	return out
}

// Serves says whether the cluster serves kind k's API (its CRD is
// installed): a controller of a kind whose API is missing would never
// sync.
func Serves(k jobs.Kind, mapper meta.RESTMapper) bool {
	gvk := k.GroupVersionKind()
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// Served splits kinds ks into those whose API the cluster serves and
// those it does not (see Serves).
func Served(ks []jobs.Kind, mapper meta.RESTMapper) (served, missing []jobs.Kind) {
	for _, k := range ks {
		if !Serves(k, mapper) {
			missing = append(missing, k)
			continue
		}
		served = append(served, k)
	}
	return served, missing
}
