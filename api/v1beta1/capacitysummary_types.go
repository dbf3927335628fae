package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacitySummarySpec names what the summary describes.
type CapacitySummarySpec struct {
	// flavor is the topology-aware ResourceFlavor summarized.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="flavor is immutable"
	Flavor string `json:"flavor"`
}

// CapacitySummaryStatus is the free capacity of one flavor's nodes, grouped
// by topology domain. It never reports more capacity than exists: when the
// size budget forces coarsening, free amounts are rounded down.
type CapacitySummaryStatus struct {
	// summaryGeneration increases with every published change.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	SummaryGeneration int64 `json:"summaryGeneration,omitempty"`

	// observedTime is when the agent's capacity view was read.
	//
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`

	// levels are the flavor Topology's levels, highest first, including the
	// host level if the topology has one.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Levels []string `json:"levels,omitempty"`

	// leafLevels is how many of levels each domain's values cover: the levels
	// down to the lowest one above the host.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	LeafLevels int32 `json:"leafLevels,omitempty"`

	// resources are the columns of every bucket's free vector.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Resources []corev1.ResourceName `json:"resources,omitempty"`

	// domains are the leaf domains with their nodes' free capacity.
	//
	// +optional
	// +listType=atomic
	Domains []SummaryDomain `json:"domains,omitempty"`

	// nodes is the number of nodes summarized.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Nodes int32 `json:"nodes,omitempty"`

	// coarsened is true when buckets were merged (rounding free capacity
	// down) to stay within the size budget.
	//
	// +optional
	Coarsened bool `json:"coarsened,omitempty"`

	// conditions: Ready says whether the summary is current and complete.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SummaryDomain is one leaf domain: its label values and its nodes' free
// capacity in buckets of equal free vectors.
type SummaryDomain struct {
	// values of the domain, one per level down to the leaf level.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Values []string `json:"values"`

	// buckets of nodes with the same free vector.
	//
	// +required
	// +listType=atomic
	Buckets []CapacityBucket `json:"buckets"`
}

// CapacityBucket is a number of nodes that each have (at least) the same free
// capacity.
type CapacityBucket struct {
	// free amount of each resource of the summary's resources, in
	// milli-units (cpu in millicores, memory in thousandths of a byte).
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Free []int64 `json:"free"`

	// nodes in the bucket.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	Nodes int32 `json:"nodes"`
}

// CapacitySummary is written by the agent, one per topology-aware flavor,
// and read by the hub to plan placements.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=capsum
// +kubebuilder:printcolumn:name="Flavor",type=string,JSONPath=`.spec.flavor`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.status.summaryGeneration`
// +kubebuilder:printcolumn:name="Observed",type=date,JSONPath=`.status.observedTime`
type CapacitySummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CapacitySummarySpec `json:"spec"`
	// +optional
	Status CapacitySummaryStatus `json:"status,omitempty"`
}

// CapacitySummaryList is a list of CapacitySummary.
//
// +kubebuilder:object:root=true
type CapacitySummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacitySummary `json:"items"`
}
