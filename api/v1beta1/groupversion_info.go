package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "strata.dev", Version: "v1beta1"}

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Topology{}, &TopologyList{},
		&ResourceFlavor{}, &ResourceFlavorList{},
		&ClusterQueue{}, &ClusterQueueList{},
		&LocalQueue{}, &LocalQueueList{},
		&Workload{}, &WorkloadList{},
		&CapacitySummary{}, &CapacitySummaryList{},
		&WorkerCluster{}, &WorkerClusterList{},
		&WorkloadPriorityClass{}, &WorkloadPriorityClassList{},
		&Cohort{}, &CohortList{},
		&AdmissionCheck{}, &AdmissionCheckList{},
		&ProvisioningRequestConfig{}, &ProvisioningRequestConfigList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
