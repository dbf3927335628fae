package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CohortSpec places a cohort in a tree of cohorts and gives it quota of
// its own, as Kueue's Cohort does.
type CohortSpec struct {
	// parentName is the cohort this one belongs to: what the queues of this
	// cohort's subtree do not use is lent up the tree, within each node's
	// lendingLimit, and a queue may borrow from every cohort on its path to
	// the root, within each node's borrowingLimit. A root when unset. A
	// parent that has no Cohort object is a cohort without quota. A cohort
	// on a cycle of parents admits nothing: the ClusterQueues under it are
	// inactive (reason CohortCycle) until the cycle is broken.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ParentName string `json:"parentName,omitempty"`

	// resourceGroups is quota the cohort itself holds, shared by its
	// subtree, in a ClusterQueue's shape: nominalQuota per flavor and
	// resource, with borrowingLimit (the most the cohort's subtree may take
	// from its parent beyond what it holds) and lendingLimit (the most of
	// its subtree's unused quota its parent may use). The flavors' order
	// does not matter here: a workload's flavor is chosen by its
	// ClusterQueue.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`

	// fairSharing weighs the cohort against its siblings under fair
	// sharing, as a ClusterQueue's (ignored unless fair sharing is on).
	//
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`
}

// Cohort is a named set of ClusterQueues (those whose spec.cohort names
// it) and of other cohorts (those whose spec.parentName names it), with
// quota of its own: Kueue's hierarchical cohorts. A ClusterQueue may name
// a cohort that has no Cohort object; it is then a root without quota, as
// flat cohorts always were.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parentName) || self.spec.parentName != self.metadata.name",message="a cohort cannot be its own parent"
type Cohort struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec CohortSpec `json:"spec,omitempty"`
}

// CohortList is a list of Cohort.
//
// +kubebuilder:object:root=true
type CohortList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cohort `json:"items"`
}

// QueueCohortCycle is a ClusterQueue's Active=False reason while its
// cohort is on a cycle of Cohort parents.
const QueueCohortCycle = "CohortCycle"
