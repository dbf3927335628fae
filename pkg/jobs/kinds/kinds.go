// Package kinds registers the workload kinds Strata runs: adding a kind
// is its package under pkg/jobs and one line here.
package kinds

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"

	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/jobs/mpijob"
)

// All are the kinds whose objects are one workload each, batch/v1 Job
// first. (A LeaderWorkerSet is one workload per group on a worker, which
// the agent's own controller keeps.)
var All = []jobs.Kind{batchjob.Kind, jobset.Kind, mpijob.Kind}

// Hub are the kinds the hub dispatches: All, and whole LeaderWorkerSets
// (one hub Workload each, a Workload per group on the worker).
var Hub = append(slices.Clone(All), lws.SetKind)

// Served splits kinds ks into those whose API the cluster serves and
// those it does not (a CRD not installed): a controller of a kind whose
// API is missing would never sync.
func Served(ks []jobs.Kind, mapper meta.RESTMapper) (served, missing []jobs.Kind) {
	for _, k := range ks {
		gvk := k.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			missing = append(missing, k)
			continue
		}
		served = append(served, k)
	}
	return served, missing
}
