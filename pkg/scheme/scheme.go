// Package scheme builds the runtime.Scheme every Strata binary uses: the
// Kubernetes built-in kinds, strata.dev/v1beta1, and the kinds the hub reads
// worker clusters' credentials from: cluster-inventory-api's ClusterProfile
// and Open Cluster Management's ManagedCluster; and the workload kinds
// beyond batch/v1 (JobSet, MPIJob).
package scheme

import (
	kubeflowv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strataapi "strata.dev/strata/api/v1beta1"
)

// New returns a scheme with the built-in kinds, Strata's kinds and the
// worker cluster sources'.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(strataapi.AddToScheme(s))
	utilruntime.Must(inventoryv1alpha1.AddToScheme(s))
	utilruntime.Must(ocmclusterv1.Install(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	utilruntime.Must(kubeflowv2beta1.AddToScheme(s))
	utilruntime.Must(lwsv1.AddToScheme(s))
	return s
}
