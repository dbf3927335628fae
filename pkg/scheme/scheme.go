// Package scheme builds the runtime.Scheme every Strata binary uses: the
// Kubernetes built-in kinds, strata.dev/v1beta1, and the kinds the hub reads
// worker clusters' credentials from: cluster-inventory-api's ClusterProfile
// and Open Cluster Management's ManagedCluster; and the workload kinds
// registered in pkg/jobs/kinds (JobSet, MPIJob, LeaderWorkerSet, ...).
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	strataapi "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/kinds"
)

// New returns a scheme with the built-in kinds, Strata's kinds, the
// worker cluster sources' and the registered workload kinds'.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(strataapi.AddToScheme(s))
	utilruntime.Must(inventoryv1alpha1.AddToScheme(s))
	utilruntime.Must(ocmclusterv1.Install(s))
	for _, r := range kinds.Registered {
		utilruntime.Must(r.AddToScheme(s))
	}
	return s
}
