package kinds

import (
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// HubTransform is the transform of the hub's informers: what
// cache.TransformStripManagedFields drops, and the pod templates of the
// hub's Workloads and of the jobs of its kinds (Hub) made lean
// (workload.LeanTemplate). With thousands of jobs waiting, their
// templates are most of the hub's memory, and nothing the hub reads from
// its informers needs more: it places and charges what a lean template
// keeps, and builds a worker's copy from the job read whole from the API
// server.
//
// An object read through these informers must therefore never be written
// back whole (Update, or a patch computed against a full object): only
// its status, or metadata with a patch computed from the lean object
// itself.
func HubTransform() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		switch o := out.(type) {
		case *strata.Workload:
			workload.LeanWorkload(o)
		case client.Object:
			// Every template, also those the pod sets do not name (a
			// LeaderWorkerSet's workers' template when each group is its
			// leader alone).
			if j, ok := jobs.AdaptAny(Hub, o); ok {
				for _, t := range jobs.ObjectTemplates(j) {
					workload.LeanTemplate(t)
				}
			}
		}
		return out, nil
	}
}
