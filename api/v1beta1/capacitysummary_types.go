package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

	// vectors are the distinct resource vectors the domains refer to by
	// position: free amounts and node capacities, one amount per resource
	// of resources, in milli-units (cpu in millicores, memory in
	// thousandths of a byte). Listing each vector once keeps summaries of
	// large, uniform clusters small.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	Vectors []ResourceVector `json:"vectors,omitempty"`

	// domains are the leaf domains with their nodes' free capacity.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	Domains []SummaryDomain `json:"domains,omitempty"`

	// taintSets are the distinct sets of NoSchedule and NoExecute taints
	// of the schedulable nodes that have any (without timeAdded), which
	// the domains' freeTaints refer to: only pods that tolerate every
	// taint of a set may use those nodes.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	TaintSets []TaintSet `json:"taintSets,omitempty"`

	// nodeLabels are the labels of the summarized nodes that can decide
	// where pods go, other than the topology's levels: the labels every
	// node shares, and the distinct sets of the others that the domains'
	// freeLabels and capacityLabels refer to. With them the hub evaluates
	// node selectors and required node affinity as the worker would.
	// Absent from summaries of agents that do not publish labels: the hub
	// then checks no selector.
	//
	// +optional
	NodeLabels *SummaryNodeLabels `json:"nodeLabels,omitempty"`

	// nodes is the number of schedulable nodes summarized.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Nodes int32 `json:"nodes,omitempty"`

	// coarsened is true when amounts were rounded down or nodes of a
	// domain merged (element-wise minimum) to stay within the size budget.
	//
	// +optional
	Coarsened bool `json:"coarsened,omitempty"`

	// understated lists the resources whose free amounts the summary
	// reports lower than they are, to stay within its size budget, with
	// the total amount left out. Counted resources (pods, GPUs and other
	// extended resources) are only ever understated when the budget could
	// not be met otherwise, and the Ready condition then says so.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Understated []UnderstatedResource `json:"understated,omitempty"`

	// dispatches lists the hub dispatches this summary's free capacity
	// accounts for: every Workload of the flavor that the agent has admitted
	// and that a hub dispatched, as "<hub workload UID>/<dispatch
	// generation>" (the copy's strata.dev/hub-workload-uid and
	// strata.dev/dispatch-generation labels), sorted. A hub holds its
	// in-flight reservation for a dispatch until it reads a summary that
	// lists it — from then on the free capacity counts the workload — or
	// until the copy is gone, finished or rejected; so the workload is
	// counted exactly once. The list counts against the summary's size
	// budget.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100000
	// +kubebuilder:validation:items:MaxLength=96
	Dispatches []string `json:"dispatches,omitempty"`

	// queues lists every worker ClusterQueue with a quota on the flavor,
	// with the quota its workloads admitted on the flavor hold there (their
	// requests, less their reclaimable pods) and the agent holds there for
	// its preemptors, captured with dispatches (left out when it would
	// take more than an eighth of the summary's budget): a
	// hub keeps its books of the worker's queues from it rather than from
	// the queues' status, which is written apart from the summary, so that
	// each dispatch is counted exactly once — here once listed in
	// dispatches, as in flight before. Absent from agents older than this
	// field (the hub then reads the queues' status).
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Queues []QueueUsage `json:"queues,omitempty"`

	// preemptible tells the hub what preempting would free: per
	// ClusterQueue and priority, the flavor's free capacity once every
	// workload of that ClusterQueue admitted on the flavor with that
	// priority or lower is gone. A hub that finds a workload fits nowhere
	// looks here for the one worker where a preemption lets it in (see
	// docs/placement.md). In turns: every clusterQueue's lowest priority
	// (queues by name), then every clusterQueue's next, so that within a
	// queue priorities ascend; bounded by the summary's size budget
	// (entries that do not fit are left out, never approximated upwards).
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Preemptible []PreemptibleCapacity `json:"preemptible,omitempty"`

	// fairSharing: the agent serves and preempts by fair sharing (its
	// configuration's fairSharing). A hub then expects a copy to take
	// from another queue of the worker's cohort only where the copy's
	// queue stays within its nominal quota, which fair sharing always
	// allows; beyond it, only the shares decide, which the hub does not
	// predict.
	//
	// +optional
	FairSharing bool `json:"fairSharing,omitempty"`

	// priorityClasses are the worker's WorkloadPriorityClasses and
	// PriorityClasses with their values, by source and name, listed while
	// some ClusterQueue there may preempt: all of them, or none when they
	// are more than 64 or would take more than a sixteenth of the
	// summary's budget. A hub compares a copy's priority with the
	// preemptible entries' in the worker's terms: the value its hub
	// Workload's class has here, so that a class of another value on a
	// worker does not mislead its choice; a class the list does not name
	// is one the worker lacks (its agent refuses the copy), where the hub
	// counts on no preemption. Without the list, a class counts at the
	// hub's value. Absent from agents older than this field.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	PriorityClasses []SummaryPriorityClass `json:"priorityClasses,omitempty"`

	// inFlight is set only on the hub's copy of a worker's summary (see
	// WorkerClusterLabel): the hub's in-flight reservations on the flavor
	// there, per leaf domain — the capacity of workloads the hub
	// dispatched that this summary does not count yet. Agents never set
	// it.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	InFlight []InFlightDomain `json:"inFlight,omitempty"`

	// conditions: Ready says whether the summary is current and complete.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SummaryPriorityClass is a priority class of a worker and its value.
type SummaryPriorityClass struct {
	// source is the class's kind, as a Workload's priorityClassSource
	// names it.
	//
	// +required
	// +kubebuilder:validation:Enum=strata.dev/workloadpriorityclass;scheduling.k8s.io/priorityclass
	Source string `json:"source"`

	// name of the class.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// value is the class's priority on the worker.
	//
	// +required
	Value int32 `json:"value"`
}

// InFlightDomain is what the hub's in-flight reservations take in one
// leaf domain of a summary.
type InFlightDomain struct {
	// values of the domain, as the summary's domains list them.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Values []string `json:"values"`

	// workloads is how many dispatches hold a reservation there.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Workloads int32 `json:"workloads"`

	// pods is how many of their pods the reservations put there.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Pods int32 `json:"pods"`

	// requests are those pods' requests, summed.
	//
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// QueueUsage is the quota a ClusterQueue's workloads hold on a flavor.
type QueueUsage struct {
	// name is the ClusterQueue's.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// usage is the quota held, per resource of the queue's quota on the
	// flavor (empty when nothing is admitted there).
	//
	// +optional
	Usage corev1.ResourceList `json:"usage,omitempty"`

	// provisions: the queue's admission checks on this flavor include a
	// ProvisioningRequest check (KEP-2724's delayed topology assignment).
	// Its agent reserves quota alone for a workload there, asks the
	// cluster autoscaler for nodes, and assigns the topology once they
	// are provisioned: a hub may send there a copy that the flavor's
	// nodes cannot hold now, when its quota can.
	//
	// +optional
	Provisions bool `json:"provisions,omitempty"`
}

// PreemptibleCapacity is a flavor's free capacity once the workloads of
// one ClusterQueue up to a priority are preempted.
type PreemptibleCapacity struct {
	// clusterQueue is the worker's ClusterQueue whose workloads go.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	ClusterQueue string `json:"clusterQueue"`

	// priority: every workload of clusterQueue admitted on the flavor
	// with this priority or lower goes.
	//
	// +required
	Priority int32 `json:"priority"`

	// workloads is how many workloads that is.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Workloads int32 `json:"workloads"`

	// reclaim: the entry is what a workload of another ClusterQueue of
	// clusterQueue's cohort takes back when it reclaims: clusterQueue's
	// workloads of priority ≤ priority in the order the agent's search
	// takes them (the most recently admitted first within a priority),
	// only while clusterQueue still borrows what it borrows now; workloads
	// is how many that is, from the first. Without it, every workload of
	// clusterQueue up to priority goes (for a workload of clusterQueue
	// itself). Agents older than this field list only such entries, for
	// both.
	//
	// +optional
	Reclaim bool `json:"reclaim,omitempty"`

	// holding, when set, makes the entry count only those workloads of
	// clusterQueue that hold some of this resource on the flavor: all a
	// preemption search takes for a preemptor short of it alone (a search
	// takes a workload only when it holds some of what the preemptor is
	// short of). workloads, requests, resources and domains are of those;
	// a reclaim entry then ends where clusterQueue stops borrowing this
	// resource. The agent lists such entries where clusterQueue's
	// workloads do not all hold the same resources, beside the entries of
	// all of them. The entries of one clusterQueue, reclaim and holding
	// are one series, ascending in priority, each entry freeing what the
	// one before it frees and more. Hubs older than this field take them
	// for entries of the series of all the queue's workloads: they count
	// on no more than the workloads each entry lists.
	//
	// +optional
	Holding corev1.ResourceName `json:"holding,omitempty"`

	// resources are the resources every one of those workloads holds on
	// the flavor (of a reclaim entry, only those clusterQueue borrows
	// too): a preemption search takes a workload only when it holds some
	// of what the preemptor is short of, so the hub counts on the entry
	// only for a preemptor short of one of them. Absent from agents older
	// than this field.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Resources []corev1.ResourceName `json:"resources,omitempty"`

	// requests is the quota those workloads hold on the flavor in
	// clusterQueue (their requests, less their reclaimable pods'): what
	// preempting them gives back to the queue. The hub checks the queue's
	// quota with it when the queue, not the capacity, keeps a workload
	// out. Absent from agents older than this field.
	//
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// domains are the domains whose free capacity then differs from
	// the summary's; every other domain is as the summary lists it.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	Domains []PreemptibleDomain `json:"domains,omitempty"`
}

// PreemptibleDomain is one domain's free capacity in a
// PreemptibleCapacity, encoded as a SummaryDomain's free.
type PreemptibleDomain struct {
	// index is the domain's position in the summary's domains.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Index int32 `json:"index"`

	// free, freeTaints and freeLabels replace the domain's.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=262144
	Free []int32 `json:"free,omitempty"`

	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=131072
	FreeTaints []int32 `json:"freeTaints,omitempty"`

	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=131072
	FreeLabels []int32 `json:"freeLabels,omitempty"`
}

// ResourceVector holds one amount per resource of a summary's resources,
// in milli-units.
//
// +kubebuilder:validation:MaxItems=32
type ResourceVector []int64

// SummaryDomain is one leaf domain: its label values, its schedulable
// nodes' free capacity and all its nodes' capacity, each as pairs of a
// position in the summary's vectors and a number of nodes.
type SummaryDomain struct {
	// values of the domain, one per level down to the leaf level.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Values []string `json:"values"`

	// free lists the domain's schedulable nodes by free capacity: pairs of
	// a position in vectors and the number of nodes with that free vector
	// (at least one).
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=262144
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=131072
	Free []int32 `json:"free,omitempty"`

	// freeTaints, when the domain has nodes with NoSchedule or NoExecute
	// taints, holds one number per pair of free: 0 when the pair's nodes
	// have no such taints, otherwise 1 + the position of their taints in
	// taintSets. Absent when no node of the domain has such taints.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=131072
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=64
	FreeTaints []int32 `json:"freeTaints,omitempty"`

	// freeLabels, when the summary has label sets and some of the domain's
	// schedulable nodes carry listed keys, holds one number per pair of
	// free: 0 when the pair's nodes have none of the listed keys, otherwise
	// 1 + the position of their labels in nodeLabels.sets.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=131072
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=64
	FreeLabels []int32 `json:"freeLabels,omitempty"`

	// capacityLabels is freeLabels for the pairs of capacity.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=131072
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=64
	CapacityLabels []int32 `json:"capacityLabels,omitempty"`

	// capacity lists all of the domain's nodes, schedulable or not, by
	// allocatable capacity, as pairs like free: what the domain holds when
	// empty, which tells "never fits here" from "not now".
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=262144
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=131072
	Capacity []int32 `json:"capacity,omitempty"`
}

// TaintSet is the NoSchedule and NoExecute taints of some of a summary's
// nodes.
type TaintSet struct {
	// taints of the nodes, sorted by key, value and effect.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Taints []corev1.Taint `json:"taints"`
}

// SummaryNodeLabels are the labels of a summary's nodes. A key is known
// for every node: its value is in common, or in the node's set when keys
// lists it, or the node does not have it — unless omittedKeys lists it,
// which the hub then cannot check.
type SummaryNodeLabels struct {
	// common are the labels that every summarized node has, with the same
	// value (a flavor's nodeLabels among them).
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Common map[string]string `json:"common,omitempty"`

	// keys are the keys whose values sets list, sorted.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=317
	Keys []string `json:"keys,omitempty"`

	// omittedKeys are keys that some nodes have but the summary does not
	// list, to stay within its bounds (too many distinct values, such as a
	// node's own name or ID), sorted. Selectors on them are not checked.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=317
	OmittedKeys []string `json:"omittedKeys,omitempty"`

	// sets are the distinct labels of keys that nodes have, referred to
	// from 1 by the domains' freeLabels and capacityLabels.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Sets []LabelSet `json:"sets,omitempty"`
}

// LabelSet is the labels of some of a summary's nodes, of the summary's
// listed keys.
type LabelSet struct {
	// labels of the nodes.
	//
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels"`
}

// UnderstatedResource is a resource the summary reports less of than there
// is.
type UnderstatedResource struct {
	// name of the resource.
	//
	// +required
	Name corev1.ResourceName `json:"name"`

	// amount left out of the summary, over all nodes.
	//
	// +required
	Amount resource.Quantity `json:"amount"`
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
