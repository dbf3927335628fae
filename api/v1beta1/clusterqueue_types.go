package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueingStrategy says how a ClusterQueue orders and admits its workloads.
//
// +kubebuilder:validation:Enum=StrictFIFO;BestEffortFIFO
type QueueingStrategy string

const (
	// StrictFIFO admits workloads strictly in order: a head that does not fit
	// blocks the workloads behind it.
	StrictFIFO QueueingStrategy = "StrictFIFO"
	// BestEffortFIFO admits workloads in order, but lets workloads that fit pass
	// a head that does not.
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// ClusterQueueSpec says which namespaces may submit to the queue, which
// flavors it admits on (in order of preference) and how it queues.
//
// +kubebuilder:validation:XValidation:rule="self.flavors.all(f, self.flavors.exists_one(o, o.name == f.name))",message="each flavor may appear only once in flavors"
type ClusterQueueSpec struct {
	// namespaceSelector selects the namespaces whose Jobs may use this queue.
	// An empty selector ({}) admits every namespace; when unset, no namespace
	// may use the queue (as in Kueue).
	//
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// clusterSelector (hub only) selects the WorkerClusters, by their
	// labels, that the queue's workloads may be dispatched to; all when
	// unset. Agents ignore it.
	//
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// flavors are tried in this order when admitting a workload.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Flavors []FlavorQuotas `json:"flavors"`

	// queueingStrategy is StrictFIFO or BestEffortFIFO (the default).
	//
	// +optional
	// +kubebuilder:default=BestEffortFIFO
	QueueingStrategy QueueingStrategy `json:"queueingStrategy,omitempty"`
}

// FlavorQuotas names a ResourceFlavor and optionally caps what the queue may
// use of it.
type FlavorQuotas struct {
	// name of the ResourceFlavor.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// resources caps the total requests of workloads admitted on this flavor
	// through this queue. Resources not listed are limited only by capacity.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceQuota `json:"resources,omitempty"`
}

// ResourceQuota is the quota of one resource.
type ResourceQuota struct {
	// name of the resource, e.g. cpu, memory or nvidia.com/gpu.
	//
	// +required
	Name corev1.ResourceName `json:"name"`

	// nominalQuota is the most of this resource the queue may use on the flavor.
	//
	// +required
	NominalQuota resource.Quantity `json:"nominalQuota"`
}

// ClusterQueueStatus reports the queue's state.
type ClusterQueueStatus struct {
	// conditions: Active says whether the queue can admit (all flavors and
	// topologies exist and are valid), with a reason when it cannot.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// pendingWorkloads is the number of workloads waiting in the queue.
	//
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads,omitempty"`

	// admittedWorkloads is the number of admitted, unfinished workloads.
	//
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads,omitempty"`

	// flavorsUsage is what admitted workloads use per flavor.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	FlavorsUsage []FlavorUsage `json:"flavorsUsage,omitempty"`
}

// FlavorUsage is the usage of one flavor.
type FlavorUsage struct {
	// name of the ResourceFlavor.
	//
	// +required
	Name string `json:"name"`

	// resources used by admitted workloads on the flavor.
	//
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// ClusterQueue is a cluster-scoped queue of workloads. Jobs reach it through
// a LocalQueue of their namespace, named by their strata.dev/queue-name
// label.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cq
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.queueingStrategy`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterQueueSpec `json:"spec"`
	// +optional
	Status ClusterQueueStatus `json:"status,omitempty"`
}

// ClusterQueueList is a list of ClusterQueue.
//
// +kubebuilder:object:root=true
type ClusterQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterQueue `json:"items"`
}
