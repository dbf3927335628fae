// Package kinds registers the workload kinds Strata runs: adding a kind
// is its package under pkg/jobs and one line here.
package kinds

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/mpijob"
)

// All are the kinds, batch/v1 Job first.
var All = []jobs.Kind{batchjob.Kind, jobset.Kind, mpijob.Kind}

// Served splits the kinds into those whose API the cluster serves and
// those it does not (a CRD not installed): a controller of a kind whose
// API is missing would never sync.
func Served(mapper meta.RESTMapper) (served, missing []jobs.Kind) {
	for _, k := range All {
		gvk := k.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			missing = append(missing, k)
			continue
		}
		served = append(served, k)
	}
	return served, missing
}
