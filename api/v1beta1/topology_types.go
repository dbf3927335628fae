package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TopologySpec describes the hierarchy of a data center as node labels.
type TopologySpec struct {
	// levels are the topology levels, from the highest (e.g. block) to the
	// lowest (e.g. rack or kubernetes.io/hostname). Every node used for
	// topology-aware scheduling carries one label per level; label values need
	// not be unique across parents. The levels may change while
	// kubernetes.io/hostname is the lowest level, before and after (as in
	// Kueue v0.20): admitted workloads keep their assignments (they name
	// hosts), pending ones are placed on the new levels. Otherwise create a
	// new Topology.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.exists_one(o, o.nodeLabel == l.nodeLabel))",message="each nodeLabel may appear in only one level"
	// +kubebuilder:validation:XValidation:rule="!self.exists(l, l.nodeLabel == 'kubernetes.io/hostname') || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",message="kubernetes.io/hostname can only be the last (lowest) level"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf || (oldSelf[size(oldSelf) - 1].nodeLabel == 'kubernetes.io/hostname' && self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname')",message="levels may change only while kubernetes.io/hostname is the lowest level, before and after; create a new Topology instead"
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level of a Topology.
type TopologyLevel struct {
	// nodeLabel is the node label key whose values name the domains of this
	// level, e.g. cloud.provider.com/topology-rack.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +kubebuilder:validation:XValidation:rule="self.split('/')[size(self.split('/')) - 1].size() <= 63",message="the name part of a label key (after the last '/') must be at most 63 characters"
	NodeLabel string `json:"nodeLabel"`
}

// Topology is a cluster-scoped description of a data center hierarchy,
// referenced by ResourceFlavors that use topology-aware scheduling.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Levels",type=string,JSONPath=`.spec.levels[*].nodeLabel`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Topology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TopologySpec `json:"spec"`
}

// TopologyList is a list of Topology.
//
// +kubebuilder:object:root=true
type TopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topology `json:"items"`
}
