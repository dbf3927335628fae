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
// flavors it admits on (in order of preference) with what quota, what it
// shares with its cohort, and when its workloads may preempt others.
//
// The quota is given in Kueue's shape, resourceGroups. The flat list
// flavors, Strata's first shape, keeps working: it is read as one resource
// group per flavor that covers only the resources it lists (see
// queue.Flavors). A queue has one or the other.
//
// +kubebuilder:validation:XValidation:rule="has(self.flavors) != has(self.resourceGroups)",message="exactly one of flavors and resourceGroups must be set (flavors is the older shape of resourceGroups)"
// +kubebuilder:validation:XValidation:rule="!has(self.flavors) || self.flavors.all(f, self.flavors.exists_one(o, o.name == f.name))",message="each flavor may appear only once in flavors"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, self.resourceGroups.exists_one(o, o.flavors.exists(x, x.name == f.name)) && g.flavors.exists_one(x, x.name == f.name)))",message="each flavor may appear in only one resource group, once"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(g, g.coveredResources.all(r, self.resourceGroups.exists_one(o, r in o.coveredResources)))",message="each resource may be covered by only one resource group"
// +kubebuilder:validation:XValidation:rule="!(has(self.admissionChecks) && has(self.admissionChecksStrategy))",message="admissionChecks and admissionChecksStrategy may not both be set"
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

	// flavors is the older, flat shape of resourceGroups: the flavors are
	// tried in this order, and a resource a flavor does not list is limited
	// only by capacity. Prefer resourceGroups.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Flavors []FlavorQuotas `json:"flavors,omitempty"`

	// resourceGroups are Kueue's quota: each group covers some resources
	// and lists flavors, in the order they are tried, with a quota for each
	// covered resource. A workload requesting a resource no group covers
	// is not admitted by this queue.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`

	// cohort is the name of the cohort this queue belongs to: the queues of
	// one cohort lend each other the nominal quota they do not use, within
	// each one's borrowingLimit and lendingLimit. A Cohort object of that
	// name, when there is one, gives the cohort quota of its own and a
	// parent (Kueue's hierarchical cohorts); without one the name is all
	// there is.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Cohort string `json:"cohort,omitempty"`

	// queueingStrategy is StrictFIFO or BestEffortFIFO (the default).
	//
	// +optional
	// +kubebuilder:default=BestEffortFIFO
	QueueingStrategy QueueingStrategy `json:"queueingStrategy,omitempty"`

	// preemption says which admitted workloads a pending workload of this
	// queue may preempt. By default it preempts none.
	//
	// +optional
	Preemption *ClusterQueuePreemption `json:"preemption,omitempty"`

	// flavorFungibility says whether a workload takes the first flavor
	// where it fits by borrowing or preempting, or tries the next flavors
	// first.
	//
	// +optional
	FlavorFungibility *FlavorFungibility `json:"flavorFungibility,omitempty"`

	// stopPolicy stops the queue, as Kueue's field does: Hold admits no
	// more workloads (admitted ones keep running), HoldAndDrain also
	// evicts the admitted ones, which wait in the queue again. None (the
	// default) admits. On a hub, a stopped queue dispatches nothing and
	// HoldAndDrain takes its dispatched workloads back from the workers.
	//
	// +optional
	// +kubebuilder:default=None
	StopPolicy *StopPolicy `json:"stopPolicy,omitempty"`

	// fairSharing weighs the queue against the other members of its
	// cohort when the agent's configuration turns fair sharing on
	// (fairSharing in the AgentConfiguration, Kueue's): heads are served
	// from the queue or cohort with the lowest share of what it borrows,
	// divided by its weight, and preemption takes from the highest.
	// Ignored otherwise.
	//
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`

	// admissionScope, with admissionMode UsageBasedAdmissionFairSharing,
	// orders the queue's pending workloads by the usage their LocalQueues
	// consumed lately (Kueue's admission fair sharing, KEP-4136) before
	// priority and age, when the agent's configuration sets
	// admissionFairSharing; ignored otherwise. See LocalQueue's
	// status.fairSharing and spec.fairSharing.
	//
	// +optional
	AdmissionScope *AdmissionScope `json:"admissionScope,omitempty"`

	// admissionChecks name the AdmissionChecks every workload of this
	// queue must pass, once its quota is reserved, before it is admitted
	// and its job starts (Kueue's field). While one does not exist or its
	// controller has not marked it Active, the queue admits nothing.
	// On a hub they are decided before a workload is dispatched: its
	// quota is reserved in the hub queue, and a worker is chosen once
	// every check is Ready; a check of MultiKueue's controller
	// (kueue.x-k8s.io/multikueue) is the hub's own part, not waited for.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	AdmissionChecks []string `json:"admissionChecks,omitempty"`

	// admissionChecksStrategy is admissionChecks with, for each check, the
	// flavors it applies to: a check listing onFlavors runs only for
	// workloads with a pod set admitted on one of them (Kueue's field).
	// A queue has admissionChecks or admissionChecksStrategy, not both.
	//
	// +optional
	AdmissionChecksStrategy *AdmissionChecksStrategy `json:"admissionChecksStrategy,omitempty"`
}

// AdmissionChecksStrategy lists a ClusterQueue's AdmissionChecks with the
// flavors each applies to.
type AdmissionChecksStrategy struct {
	// admissionChecks: each check and its flavors.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	AdmissionChecks []AdmissionCheckStrategyRule `json:"admissionChecks,omitempty"`
}

// AdmissionCheckStrategyRule is one AdmissionCheck of a ClusterQueue and
// the flavors it applies to.
type AdmissionCheckStrategyRule struct {
	// name of the AdmissionCheck.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// onFlavors: the check runs for a workload with a pod set admitted on
	// one of these flavors; for every workload when empty.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	OnFlavors []string `json:"onFlavors,omitempty"`
}

// AdmissionScope says how a ClusterQueue orders the workloads of its
// LocalQueues (Kueue's field).
type AdmissionScope struct {
	// admissionMode: UsageBasedAdmissionFairSharing (the LocalQueue that
	// consumed the least lately, divided by its weight, is served first)
	// or NoAdmissionFairSharing (priority, then age).
	//
	// +required
	AdmissionMode AdmissionMode `json:"admissionMode"`
}

// AdmissionMode is an AdmissionScope's mode.
//
// +kubebuilder:validation:Enum=UsageBasedAdmissionFairSharing;NoAdmissionFairSharing
type AdmissionMode string

// The admission modes (see AdmissionScope).
const (
	UsageBasedAdmissionFairSharing AdmissionMode = "UsageBasedAdmissionFairSharing"
	NoAdmissionFairSharing         AdmissionMode = "NoAdmissionFairSharing"
)

// FairSharing is a ClusterQueue's or Cohort's weight under fair sharing
// (Kueue's field).
//
// +kubebuilder:validation:XValidation:rule="!has(self.weight) || quantity(string(self.weight)).compareTo(quantity('0')) == 0 || quantity(string(self.weight)).isGreaterThan(quantity('1n'))",message="weight must be 0 or more than 1n (10^-9), as in Kueue"
type FairSharing struct {
	// weight gives the queue or cohort an advantage over its siblings when
	// competing for what their cohort lends: its share (the most, over
	// resources, of what it uses beyond its quota in proportion to what
	// its cohort could lend it) is divided by the weight. 0 means an
	// infinite share once it borrows: it is served last and preempted
	// first. Default 1.
	//
	// +optional
	// +kubebuilder:default=1
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// StopPolicy stops a ClusterQueue or LocalQueue.
//
// +kubebuilder:validation:Enum=None;Hold;HoldAndDrain
type StopPolicy string

const (
	// StopNone admits, the default.
	StopNone StopPolicy = "None"
	// StopHold admits nothing more; admitted workloads keep running.
	StopHold StopPolicy = "Hold"
	// StopHoldAndDrain admits nothing more and evicts the admitted workloads.
	StopHoldAndDrain StopPolicy = "HoldAndDrain"
)

// Stopped says whether a stop policy stops the queue (Hold or HoldAndDrain).
func Stopped(p *StopPolicy) bool { return p != nil && *p != "" && *p != StopNone }

// Drains says whether a stop policy evicts the queue's admitted workloads.
func Drains(p *StopPolicy) bool { return p != nil && *p == StopHoldAndDrain }

// Reasons of a stopped queue: the Active=False condition of the queue
// (Stopped), and the Evicted condition of a workload a HoldAndDrain queue
// evicted (ClusterQueueStopped, LocalQueueStopped), as Kueue names them.
const (
	QueueStopped                 = "Stopped"
	EvictedByClusterQueueStopped = "ClusterQueueStopped"
	EvictedByLocalQueueStopped   = "LocalQueueStopped"
)

// QueueTerminating is a ClusterQueue's Active=False reason while it is
// being deleted (Kueue's): it admits nothing, and a worker's agent keeps
// it (finalizer strata.dev/resource-in-use) until the workloads holding
// its quota finish. Its pending workloads wait with reason Stopped.
const QueueTerminating = "Terminating"

// QueueFlavorNotReady is an agent's ClusterQueue's Active=False reason
// while a flavor it lists does not exist, is not topology-aware, or its
// Topology does not exist.
const QueueFlavorNotReady = "FlavorNotReady"

// ResourceGroup is a set of resources whose quotas are given together, per
// flavor.
//
// +kubebuilder:validation:XValidation:rule="self.flavors.all(f, size(f.resources) == size(self.coveredResources) && f.resources.all(r, r.name in self.coveredResources))",message="each flavor must give a quota for every covered resource, and only for those"
type ResourceGroup struct {
	// coveredResources are the resources this group gives quota for.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	CoveredResources []corev1.ResourceName `json:"coveredResources"`

	// flavors are tried in this order when admitting a workload.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Flavors []FlavorQuotas `json:"flavors"`
}

// PreemptionPolicy says which workloads may be preempted.
//
// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrNewerEqualPriority;Any
type PreemptionPolicy string

// Preemption policies (Kueue's names).
const (
	PreemptionNever                     PreemptionPolicy = "Never"
	PreemptionLowerPriority             PreemptionPolicy = "LowerPriority"
	PreemptionLowerOrNewerEqualPriority PreemptionPolicy = "LowerOrNewerEqualPriority"
	PreemptionAny                       PreemptionPolicy = "Any"
)

// ClusterQueuePreemption are a queue's preemption policies (Kueue's).
//
// +kubebuilder:validation:XValidation:rule="self.withinClusterQueue != 'Any'",message="withinClusterQueue may be Never, LowerPriority or LowerOrNewerEqualPriority"
// +kubebuilder:validation:XValidation:rule="self.reclaimWithinCohort != 'LowerOrNewerEqualPriority'",message="reclaimWithinCohort may be Never, LowerPriority or Any"
// +kubebuilder:validation:XValidation:rule="!has(self.borrowWithinCohort) || self.borrowWithinCohort.policy == 'Never' || self.reclaimWithinCohort != 'Never'",message="borrowWithinCohort needs reclaimWithinCohort LowerPriority or Any (as in Kueue)"
type ClusterQueuePreemption struct {
	// withinClusterQueue: whether a pending workload may preempt admitted
	// workloads of its own queue: Never (the default), LowerPriority, or
	// LowerOrNewerEqualPriority (also those of equal priority that joined
	// the queue after it).
	//
	// +optional
	// +kubebuilder:default=Never
	WithinClusterQueue PreemptionPolicy `json:"withinClusterQueue,omitempty"`

	// reclaimWithinCohort: whether a pending workload that fits in its
	// queue's nominal quota may preempt workloads of other queues of the
	// cohort that borrow: Never (the default), LowerPriority, or Any.
	//
	// +optional
	// +kubebuilder:default=Never
	ReclaimWithinCohort PreemptionPolicy `json:"reclaimWithinCohort,omitempty"`

	// borrowWithinCohort: whether a pending workload that must borrow may
	// preempt workloads of other queues of the cohort.
	//
	// +optional
	BorrowWithinCohort *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`
}

// BorrowWithinCohortPolicy says whether a borrowing workload may preempt in
// its cohort.
//
// +kubebuilder:validation:Enum=Never;LowerPriority
type BorrowWithinCohortPolicy string

// Borrow-within-cohort policies.
const (
	BorrowWithinCohortNever         BorrowWithinCohortPolicy = "Never"
	BorrowWithinCohortLowerPriority BorrowWithinCohortPolicy = "LowerPriority"
)

// BorrowWithinCohort is Kueue's borrowWithinCohort.
type BorrowWithinCohort struct {
	// policy: Never (the default) or LowerPriority: a workload that must
	// borrow may preempt workloads of lower priority of other queues of
	// the cohort.
	//
	// +optional
	// +kubebuilder:default=Never
	Policy BorrowWithinCohortPolicy `json:"policy,omitempty"`

	// maxPriorityThreshold: only workloads of at most this priority may be
	// preempted so (and always lower than the preemptor's).
	//
	// +optional
	MaxPriorityThreshold *int32 `json:"maxPriorityThreshold,omitempty"`
}

// FlavorFungibilityPolicy says what a workload does at the first flavor
// where it could be admitted only by borrowing or preempting.
//
// +kubebuilder:validation:Enum=Borrow;Preempt;TryNextFlavor
type FlavorFungibilityPolicy string

// Flavor fungibility policies (Kueue v1beta1's names).
const (
	FungibilityBorrow        FlavorFungibilityPolicy = "Borrow"
	FungibilityPreempt       FlavorFungibilityPolicy = "Preempt"
	FungibilityTryNextFlavor FlavorFungibilityPolicy = "TryNextFlavor"
)

// FlavorFungibility is Kueue's flavorFungibility.
//
// +kubebuilder:validation:XValidation:rule="self.whenCanBorrow != 'Preempt'",message="whenCanBorrow may be Borrow or TryNextFlavor"
// +kubebuilder:validation:XValidation:rule="self.whenCanPreempt != 'Borrow'",message="whenCanPreempt may be Preempt or TryNextFlavor"
type FlavorFungibility struct {
	// whenCanBorrow: Borrow (the default) admits on the first flavor where
	// the workload fits by borrowing; TryNextFlavor first tries the next
	// flavors without borrowing.
	//
	// +optional
	// +kubebuilder:default=Borrow
	WhenCanBorrow FlavorFungibilityPolicy `json:"whenCanBorrow,omitempty"`

	// whenCanPreempt: TryNextFlavor (the default) tries every flavor
	// without preemption before preempting on the first flavor where that
	// helps; Preempt preempts on the first flavor where it helps.
	//
	// +optional
	// +kubebuilder:default=TryNextFlavor
	WhenCanPreempt FlavorFungibilityPolicy `json:"whenCanPreempt,omitempty"`
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

	// nominalQuota is the most of this resource the queue may use on the
	// flavor without borrowing from its cohort.
	//
	// +required
	NominalQuota resource.Quantity `json:"nominalQuota"`

	// borrowingLimit is the most the queue may borrow from its cohort
	// beyond nominalQuota; unlimited when unset. Only with a cohort.
	//
	// +optional
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`

	// lendingLimit is the most of nominalQuota the queue lends to its
	// cohort when it does not use it; all of it when unset. The rest is
	// kept for the queue alone. Only with a cohort.
	//
	// +optional
	LendingLimit *resource.Quantity `json:"lendingLimit,omitempty"`
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

	// reservingWorkloads is the number of unfinished workloads holding
	// the queue's quota: the admitted ones and those whose AdmissionChecks
	// are not all Ready yet (Kueue's field).
	//
	// +optional
	ReservingWorkloads int32 `json:"reservingWorkloads,omitempty"`

	// flavorsUsage is what admitted workloads use per flavor.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	FlavorsUsage []FlavorUsage `json:"flavorsUsage,omitempty"`

	// flavorsReservation is the quota admitted workloads hold per flavor
	// and resource, in Kueue's shape: the total, the part of it borrowed
	// from the cohort, and (Strata's addition) the part of this queue's
	// unused nominal quota that other queues of the cohort borrow.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	FlavorsReservation []FlavorReservation `json:"flavorsReservation,omitempty"`

	// fairSharing is the queue's share under fair sharing, when the
	// agent's configuration turns it on.
	//
	// +optional
	FairSharing *FairSharingStatus `json:"fairSharing,omitempty"`
}

// FairSharingStatus is a queue's share under fair sharing (Kueue's field).
type FairSharingStatus struct {
	// weightedShare is the most, over resources, of what the queue uses
	// beyond its quota per mille of what its cohort could let it have,
	// divided by its weight and rounded up: 0 when it borrows nothing,
	// 9223372036854775807 when its weight is 0 and it borrows.
	WeightedShare int64 `json:"weightedShare"`
}

// FlavorReservation is the quota held on one flavor.
type FlavorReservation struct {
	// name of the ResourceFlavor.
	//
	// +required
	Name string `json:"name"`

	// resources held on the flavor.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceReservation `json:"resources,omitempty"`
}

// ResourceReservation is the quota held of one resource.
type ResourceReservation struct {
	// name of the resource.
	//
	// +required
	Name corev1.ResourceName `json:"name"`

	// total held by admitted workloads of the queue.
	//
	// +optional
	Total resource.Quantity `json:"total,omitempty"`

	// borrowed is the part of total beyond nominalQuota.
	//
	// +optional
	Borrowed resource.Quantity `json:"borrowed,omitempty"`

	// lent is the part of this queue's unused nominal quota that other
	// queues of the cohort use now.
	//
	// +optional
	Lent resource.Quantity `json:"lent,omitempty"`
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
// +kubebuilder:printcolumn:name="Cohort",type=string,JSONPath=`.spec.cohort`
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
