package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceFlavorSpec describes a kind of node (e.g. one GPU model in one node
// pool) and, for topology-aware scheduling, the Topology of those nodes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) > 0)",message="nodeLabels must have at least one entry when topologyName is set: they select the nodes of the topology"
type ResourceFlavorSpec struct {
	// nodeLabels select the nodes of this flavor; they are also added as a node
	// selector to the pods admitted on it.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// nodeTaints are taints the nodes of this flavor carry; workloads that do
	// not tolerate them are not admitted on the flavor.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	NodeTaints []corev1.Taint `json:"nodeTaints,omitempty"`

	// tolerations are added to the pods admitted on this flavor.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// topologyName names the Topology of this flavor's nodes. When set, pods
	// admitted on the flavor are placed with topology-aware scheduling.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TopologyName *string `json:"topologyName,omitempty"`
}

// ResourceFlavor is a cluster-scoped kind of node capacity.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=flavor;flavors;rf
// +kubebuilder:printcolumn:name="Topology",type=string,JSONPath=`.spec.topologyName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorList is a list of ResourceFlavor.
//
// +kubebuilder:object:root=true
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}
