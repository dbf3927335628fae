// Package v1beta1 holds the strata.dev/v1beta1 API: the objects admins create
// (Topology, ResourceFlavor, ClusterQueue, WorkerCluster), the Workload that
// Strata keeps for every managed Job, and the CapacitySummary agents publish.
//
// +kubebuilder:object:generate=true
// +groupName=strata.dev
package v1beta1
