package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningRequestConfigSpec is how the agent's ProvisioningRequest
// admission check asks the cluster autoscaler for capacity (Kueue's
// ProvisioningRequestConfig): an AdmissionCheck whose controllerName is
// kueue.x-k8s.io/provisioning-request names one in its parameters.
type ProvisioningRequestConfigSpec struct {
	// provisioningClassName is the ProvisioningRequests' class, which the
	// cluster autoscaler serves (check-capacity.autoscaling.x-k8s.io,
	// best-effort-atomic-scale-up.autoscaling.x-k8s.io, or a provider's).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ProvisioningClassName string `json:"provisioningClassName"`

	// parameters are copied into each ProvisioningRequest's
	// spec.parameters.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	Parameters map[string]string `json:"parameters,omitempty"`

	// managedResources: only the pod sets requesting one of these
	// resources are provisioned for; empty, every pod set is. A workload
	// with none is Ready at once.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	ManagedResources []corev1.ResourceName `json:"managedResources,omitempty"`

	// retryStrategy: how a failed ProvisioningRequest is retried.
	//
	// +optional
	RetryStrategy *ProvisioningRequestRetryStrategy `json:"retryStrategy,omitempty"`

	// podSetUpdates: node selectors the provisioned pods get from the
	// ProvisioningRequest's status.provisioningClassDetails, to run on
	// the nodes provisioned for them.
	//
	// +optional
	PodSetUpdates *ProvisioningRequestPodSetUpdates `json:"podSetUpdates,omitempty"`

	// podSetMergePolicy merges the pod sets of a workload that are alike
	// into one PodTemplate of the ProvisioningRequest, their counts
	// added: IdenticalPodTemplates, those whose pod templates (as they
	// run on the flavor) are identical; IdenticalWorkloadSchedulingRequirements,
	// those identical in what scheduling needs (the containers' and init
	// containers' requests, the pod's resources, node selector,
	// tolerations, affinity and resource claims). Unset, every pod set
	// has its own PodTemplate.
	//
	// +optional
	// +kubebuilder:validation:Enum=IdenticalPodTemplates;IdenticalWorkloadSchedulingRequirements
	PodSetMergePolicy *PodSetMergePolicy `json:"podSetMergePolicy,omitempty"`
}

// PodSetMergePolicy says which pod sets a ProvisioningRequest asks for
// with one PodTemplate.
type PodSetMergePolicy string

const (
	// IdenticalPodTemplates merges pod sets whose pod templates are
	// identical.
	IdenticalPodTemplates PodSetMergePolicy = "IdenticalPodTemplates"
	// IdenticalWorkloadSchedulingRequirements merges pod sets identical in
	// what scheduling needs.
	IdenticalWorkloadSchedulingRequirements PodSetMergePolicy = "IdenticalWorkloadSchedulingRequirements"
)

// ProvisioningRequestRetryStrategy says how failed requests are retried. A
// failed attempt (or one whose booking expired before the workload was
// admitted) puts the check in Retry: the reservation is taken back and,
// once the workload's quota is reserved again, the next attempt is made
// after backoffBaseSeconds·2^(n-1), at most backoffMaxSeconds. After
// backoffLimitCount retries the check is Rejected and the workload
// deactivated.
type ProvisioningRequestRetryStrategy struct {
	// backoffLimitCount is the number of retries (default 3).
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffLimitCount *int32 `json:"backoffLimitCount,omitempty"`

	// backoffBaseSeconds is the first retry's delay (default 60).
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffBaseSeconds *int32 `json:"backoffBaseSeconds,omitempty"`

	// backoffMaxSeconds caps the delay (default 1800).
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffMaxSeconds *int32 `json:"backoffMaxSeconds,omitempty"`
}

// ProvisioningRequestPodSetUpdates are the podSetUpdates of a Ready check.
type ProvisioningRequestPodSetUpdates struct {
	// nodeSelector entries, each from a detail of the provisioning class.
	//
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=8
	NodeSelector []ProvisioningRequestPodSetUpdatesNodeSelector `json:"nodeSelector,omitempty"`
}

// ProvisioningRequestPodSetUpdatesNodeSelector is one node selector entry.
type ProvisioningRequestPodSetUpdatesNodeSelector struct {
	// key of the node label.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`

	// valueFromProvisioningClassDetail names the entry of the
	// ProvisioningRequest's status.provisioningClassDetails that gives
	// the label's value; a missing entry adds nothing.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	ValueFromProvisioningClassDetail string `json:"valueFromProvisioningClassDetail"`
}

// ProvisioningRequestConfig configures the ProvisioningRequest admission
// check (Kueue's kind of the same name).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.provisioningClassName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProvisioningRequestConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ProvisioningRequestConfigSpec `json:"spec"`
}

// ProvisioningRequestConfigList is a list of ProvisioningRequestConfig.
//
// +kubebuilder:object:root=true
type ProvisioningRequestConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequestConfig `json:"items"`
}
