package v1beta1

// TopologyAssignment says how many pods of a pod set go to which topology
// domain, in the compact "slices" format of KEP-2724 (v1beta2). Zipping
// levels with each slice's valuesPerLevel gives the node selector of every
// domain; podCounts gives its pods. When the lowest level is
// kubernetes.io/hostname, levels holds only that level. Domains are listed in
// rank order: consecutive pod indexes go to consecutive domains.
//
// +kubebuilder:validation:XValidation:rule="self.slices.all(s, size(s.valuesPerLevel) == size(self.levels))",message="every slice must have one valuesPerLevel entry per level"
type TopologyAssignment struct {
	// levels are the node label keys of the assigned levels, highest first.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=316
	Levels []string `json:"levels"`

	// slices are assignments for subsets of the pods; the whole assignment is
	// their union, in order.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Slices []TopologyAssignmentSlice `json:"slices"`
}

// TopologyAssignmentSlice assigns pods to domainCount domains.
//
// +kubebuilder:validation:XValidation:rule="self.valuesPerLevel.all(v, !has(v.individual) || size(v.individual.roots) == self.domainCount)",message="valuesPerLevel[].individual.roots must have exactly domainCount entries"
// +kubebuilder:validation:XValidation:rule="!has(self.podCounts.individual) || size(self.podCounts.individual) == self.domainCount",message="podCounts.individual must have exactly domainCount entries"
type TopologyAssignmentSlice struct {
	// domainCount is the number of domains in this slice.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	DomainCount int32 `json:"domainCount"`

	// valuesPerLevel has one entry per level of the assignment: the label
	// values of the slice's domains at that level.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	ValuesPerLevel []TopologyAssignmentSliceLevelValues `json:"valuesPerLevel"`

	// podCounts is the number of pods in each domain of the slice.
	//
	// +required
	PodCounts TopologyAssignmentSlicePodCounts `json:"podCounts"`
}

// TopologyAssignmentSliceLevelValues are the label values of one level for
// every domain of a slice: one value shared by all (universal) or one value
// per domain (individual).
//
// +kubebuilder:validation:XValidation:rule="has(self.universal) != has(self.individual)",message="exactly one of universal and individual must be set"
type TopologyAssignmentSliceLevelValues struct {
	// universal is the value every domain of the slice has at this level.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Universal *string `json:"universal,omitempty"`

	// individual lists one value per domain of the slice.
	//
	// +optional
	Individual *TopologyAssignmentSliceLevelIndividualValues `json:"individual,omitempty"`
}

// TopologyAssignmentSliceLevelIndividualValues lists one value per domain as
// prefix + root + suffix.
type TopologyAssignmentSliceLevelIndividualValues struct {
	// prefix common to all values; unset when there is none.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Prefix *string `json:"prefix,omitempty"`

	// suffix common to all values; unset when there is none.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Suffix *string `json:"suffix,omitempty"`

	// roots are the values without prefix and suffix, one per domain.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100000
	// +kubebuilder:validation:items:MaxLength=63
	Roots []string `json:"roots"`
}

// TopologyAssignmentSlicePodCounts is the number of pods per domain of a
// slice: the same for all (universal) or one per domain (individual).
//
// +kubebuilder:validation:XValidation:rule="has(self.universal) != has(self.individual)",message="exactly one of universal and individual must be set"
type TopologyAssignmentSlicePodCounts struct {
	// universal is the pod count of every domain of the slice.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	Universal *int32 `json:"universal,omitempty"`

	// individual lists the pod count of each domain of the slice.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100000
	// +kubebuilder:validation:items:Minimum=1
	Individual []int32 `json:"individual,omitempty"`
}
