package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadPriorityClass gives a workload its priority in queueing and
// preemption without changing its pods' priority (Kueue's
// WorkloadPriorityClass). A job chooses one with the label
// strata.dev/priority-class, or kueue.x-k8s.io/priority-class on a job that
// carries Strata's queue label; a job without either takes its priority
// from its pods' PriorityClass.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=wpc
// +kubebuilder:printcolumn:name="Value",type=integer,JSONPath=`.value`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadPriorityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// value is the priority of the workloads of this class: higher is
	// admitted first and may preempt lower.
	//
	// +required
	Value int32 `json:"value"`

	// description says what the class is for.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Description string `json:"description,omitempty"`
}

// WorkloadPriorityClassList is a list of WorkloadPriorityClass.
//
// +kubebuilder:object:root=true
type WorkloadPriorityClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadPriorityClass `json:"items"`
}
