package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalQueueSpec says which ClusterQueue admits the workloads of a
// LocalQueue.
type LocalQueueSpec struct {
	// clusterQueue is the name of the ClusterQueue that admits the
	// workloads submitted to this LocalQueue. The ClusterQueue's
	// namespaceSelector must select the LocalQueue's namespace. As in
	// Kueue, it may change; pending workloads then wait in the new
	// ClusterQueue, admitted ones keep their admission.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClusterQueue string `json:"clusterQueue"`

	// stopPolicy stops the queue, as Kueue's field does: Hold admits no
	// more of its workloads (admitted ones keep running), HoldAndDrain also
	// evicts the admitted ones, which wait in the queue again. None (the
	// default) admits.
	//
	// +optional
	// +kubebuilder:default=None
	StopPolicy *StopPolicy `json:"stopPolicy,omitempty"`

	// fairSharing weighs the queue under admission fair sharing (its
	// ClusterQueue's admissionScope): its consumed usage is divided by the
	// weight, so a queue of weight 2 is served as if it had used half as
	// much. 0: served after every queue that has a finite usage. Default 1.
	//
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`
}

// LocalQueueActive is the condition type that says whether a LocalQueue's
// workloads can be admitted: False with reason
// LocalQueueClusterQueueMissing while its ClusterQueue does not exist,
// and QueueStopped while it or its ClusterQueue is stopped.
const (
	LocalQueueActive = "Active"
	// LocalQueueClusterQueueMissing is the reason of an Active=False
	// LocalQueue whose ClusterQueue does not exist.
	LocalQueueClusterQueueMissing = "ClusterQueueDoesNotExist"
	// LocalQueueReady is the reason of an Active=True LocalQueue.
	LocalQueueReady = "Ready"
)

// LocalQueueStatus is written by the agent (or the hub).
type LocalQueueStatus struct {
	// conditions: Active.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// pendingWorkloads is the number of the queue's workloads that are not
	// admitted and not finished, including those that cannot be admitted
	// as written.
	//
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads,omitempty"`

	// admittedWorkloads is the number of the queue's admitted, unfinished
	// workloads.
	//
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads,omitempty"`

	// reservingWorkloads is the number of the queue's unfinished
	// workloads holding quota: the admitted ones and those whose
	// AdmissionChecks are not all Ready yet (Kueue's field).
	//
	// +optional
	ReservingWorkloads int32 `json:"reservingWorkloads,omitempty"`

	// fairSharing is the queue's usage under admission fair sharing, kept
	// while the agent's configuration sets admissionFairSharing.
	//
	// +optional
	FairSharing *LocalQueueFairSharingStatus `json:"fairSharing,omitempty"`
}

// LocalQueueFairSharingStatus is a LocalQueue's fair-sharing state
// (Kueue's field).
type LocalQueueFairSharingStatus struct {
	// admissionFairSharingStatus is the queue's consumed usage.
	//
	// +optional
	AdmissionFairSharingStatus *AdmissionFairSharingStatus `json:"admissionFairSharingStatus,omitempty"`
}

// AdmissionFairSharingStatus is the usage a LocalQueue consumed lately.
type AdmissionFairSharingStatus struct {
	// consumedResources is the exponentially decayed average of the
	// resources the queue's admitted workloads held, sampled every
	// admissionFairSharing.usageSamplingInterval: each sample moves it
	// towards the usage of the moment by 1 - 0.5^(elapsed/usageHalfLifeTime).
	//
	// +optional
	ConsumedResources corev1.ResourceList `json:"consumedResources,omitempty"`

	// lastUpdate is when consumedResources was last sampled.
	//
	// +required
	LastUpdate metav1.Time `json:"lastUpdate"`
}

// LocalQueue is a namespaced queue that users submit Jobs to: the
// strata.dev/queue-name label of a Job names a LocalQueue in the Job's
// namespace, which points at the ClusterQueue that admits the Job.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lq
// +kubebuilder:printcolumn:name="ClusterQueue",type=string,JSONPath=`.spec.clusterQueue`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec LocalQueueSpec `json:"spec"`
	// +optional
	Status LocalQueueStatus `json:"status,omitempty"`
}

// LocalQueueList is a list of LocalQueue.
//
// +kubebuilder:object:root=true
type LocalQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalQueue `json:"items"`
}
