package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionCheckSpec names the controller that decides the check for each
// workload, and where its parameters are (Kueue's AdmissionCheck).
type AdmissionCheckSpec struct {
	// controllerName identifies the controller that sets this check's
	// state on workloads (status.admissionChecks) and marks the check
	// Active. It cannot change.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="controllerName is immutable"
	ControllerName string `json:"controllerName"`

	// parameters name an object holding the check's configuration, read
	// by its controller.
	//
	// +optional
	Parameters *AdmissionCheckParametersReference `json:"parameters,omitempty"`
}

// AdmissionCheckParametersReference names an object of the check's
// controller.
type AdmissionCheckParametersReference struct {
	// apiGroup of the object.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`

	// kind of the object.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name of the object.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AdmissionCheckStatus is what the check's controller reports.
type AdmissionCheckStatus struct {
	// conditions: Active, set True by the check's controller when it runs
	// the check. A ClusterQueue naming a check that is not Active admits
	// nothing.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AdmissionCheckActive is the AdmissionCheck condition its controller sets
// True when it runs the check.
const AdmissionCheckActive = "Active"

// AdmissionCheck is a cluster-scoped condition, decided by a controller,
// that a workload of a ClusterQueue naming it must meet, after its quota is
// reserved, before it is admitted (Kueue's AdmissionCheck).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Controller",type=string,JSONPath=`.spec.controllerName`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AdmissionCheck struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AdmissionCheckSpec `json:"spec"`

	// +optional
	Status AdmissionCheckStatus `json:"status,omitempty"`
}

// AdmissionCheckList is a list of AdmissionCheck.
//
// +kubebuilder:object:root=true
type AdmissionCheckList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AdmissionCheck `json:"items"`
}
