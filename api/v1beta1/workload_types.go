package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadSpec is what a Job asks for: its pod sets, its queue and priority.
// Strata writes it from the Job; users do not edit it. Managed fields
// track it as one field.
//
// +structType=atomic
type WorkloadSpec struct {
	// podSets are the groups of identical pods of the workload.
	//
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	PodSets []PodSet `json:"podSets"`

	// queueName is the LocalQueue, in the workload's namespace, that the
	// workload is submitted to; the LocalQueue names its ClusterQueue.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	QueueName string `json:"queueName"`

	// priorityClassName is the class the priority was taken from: a
	// WorkloadPriorityClass or a PriorityClass, as priorityClassSource says.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// priorityClassSource says what kind of class priorityClassName names:
	// strata.dev/workloadpriorityclass (a WorkloadPriorityClass, chosen by
	// the job's strata.dev/priority-class label) or
	// scheduling.k8s.io/priorityclass (the pods' PriorityClass); empty
	// without a class.
	//
	// +optional
	// +kubebuilder:validation:Enum="";strata.dev/workloadpriorityclass;scheduling.k8s.io/priorityclass
	PriorityClassSource string `json:"priorityClassSource,omitempty"`

	// priority orders workloads within a queue: higher first, then older first.
	//
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// active false holds the workload, as Kueue's Workload spec.active: it
	// is not dispatched or admitted, and one already dispatched or admitted
	// is taken back (evicted, reason Deactivated) and waits until active
	// is true again. On the hub this is how a user holds a job: the job's
	// own suspend field is Strata's, so a Kueue manifest with suspend: true
	// runs. Defaults to true.
	//
	// +optional
	// +kubebuilder:default=true
	Active *bool `json:"active,omitempty"`

	// maximumExecutionTimeSeconds, when set, is the longest the workload
	// may stay admitted, summed over its admissions (Kueue's KEP-3125,
	// from the job's strata.dev/max-exec-time-seconds or
	// kueue.x-k8s.io/max-exec-time-seconds label): past it, the workload
	// is deactivated (spec.active false, reason
	// MaximumExecutionTimeExceeded) and its job stopped.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaximumExecutionTimeSeconds *int32 `json:"maximumExecutionTimeSeconds,omitempty"`
}

// PodSet is a group of identical pods.
type PodSet struct {
	// name of the pod set, unique within the workload ("main" for a Job).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// count is the number of pods.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`

	// minCount, when set, lets the pod set be admitted with fewer pods than
	// count, down to minCount, when count does not fit (Kueue's partial
	// admission; a Job's job-min-parallelism annotation). The admission's
	// count says how many.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinCount *int32 `json:"minCount,omitempty"`

	// template is the pod template of the pod set, copied from the Job (which
	// the API server has already validated). It is stored without a schema:
	// that keeps the CRD small enough for a client-side kubectl apply.
	//
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +mapType=atomic
	// +kubebuilder:validation:Type=object
	Template corev1.PodTemplateSpec `json:"template"`

	// topologyRequest is the topology the pods ask for (from the pod-set
	// annotations). Unset on a topology-aware flavor means unconstrained
	// placement at the lowest level.
	//
	// +optional
	TopologyRequest *PodSetTopologyRequest `json:"topologyRequest,omitempty"`
}

// PodSetTopologyRequest is the topology request of a pod set, parsed from the
// podset-* annotations of its pod template.
//
// +kubebuilder:validation:XValidation:rule="(has(self.required) ? 1 : 0) + (has(self.preferred) ? 1 : 0) + ((has(self.unconstrained) && self.unconstrained) ? 1 : 0) <= 1",message="required, preferred and unconstrained are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="has(self.podSetSliceRequiredTopology) == has(self.podSetSliceSize)",message="podSetSliceRequiredTopology and podSetSliceSize must be set together"
// +kubebuilder:validation:XValidation:rule="!has(self.podSetSliceRequiredTopologyConstraints) || !has(self.podSetSliceRequiredTopology)",message="podSetSliceRequiredTopologyConstraints cannot be combined with podSetSliceRequiredTopology and podSetSliceSize"
type PodSetTopologyRequest struct {
	// required is the level (node label key) whose one domain must hold all pods.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Required *string `json:"required,omitempty"`

	// preferred is the level whose one domain should hold all pods; higher
	// levels are tried when it does not fit, and at the top the pods spread.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Preferred *string `json:"preferred,omitempty"`

	// unconstrained places pods wherever free capacity exists.
	//
	// +optional
	Unconstrained *bool `json:"unconstrained,omitempty"`

	// podIndexLabel is the pod label holding a pod's index within the pod set
	// (batch.kubernetes.io/job-completion-index for indexed Jobs); ranks then
	// follow the assignment's domain order.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=316
	PodIndexLabel *string `json:"podIndexLabel,omitempty"`

	// podIndexOffset is the index of the pod set's first pod when indexes
	// continue across pod sets (an LWS or MPIJob leader has index 0, its
	// workers start at 1): a pod's rank in the assignment is its index
	// minus the offset.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	PodIndexOffset *int32 `json:"podIndexOffset,omitempty"`

	// subGroupIndexLabel is the pod label holding the index of a replicated
	// sub-group (e.g. jobset.sigs.k8s.io/job-index).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=316
	SubGroupIndexLabel *string `json:"subGroupIndexLabel,omitempty"`

	// subGroupCount is the number of replicated sub-groups in the pod set.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	SubGroupCount *int32 `json:"subGroupCount,omitempty"`

	// podSetGroupName groups pod sets (e.g. leader and workers) that get one
	// flavor and one common domain.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	PodSetGroupName *string `json:"podSetGroupName,omitempty"`

	// podSetSliceRequiredTopology is the level whose one domain must hold each
	// slice of podSetSliceSize pods.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	PodSetSliceRequiredTopology *string `json:"podSetSliceRequiredTopology,omitempty"`

	// podSetSliceSize is the number of pods in one slice. When it does not
	// divide count, the last count % podSetSliceSize pods form one partial
	// slice, held by the last slice-level domain of the assignment. A job's
	// annotations may ask for that only where topologyAwareScheduling.
	// partialSlices is set (KEP-2724 requires the size to divide count).
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	PodSetSliceSize *int32 `json:"podSetSliceSize,omitempty"`

	// podSetSliceRequiredTopologyConstraints are up to three slice layers,
	// coarsest first; each layer's size is a multiple of the next one's.
	// With more than one layer, the first layer's size divides count; a
	// single layer may leave a partial slice, as podSetSliceSize does (a
	// job's annotations only with topologyAwareScheduling.partialSlices).
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(o, o.topology == c.topology))",message="each topology level may appear in only one layer"
	// +kubebuilder:validation:XValidation:rule="size(self) < 2 || self[0].size % self[1].size == 0",message="the size of layer 0 must be a multiple of the size of layer 1"
	// +kubebuilder:validation:XValidation:rule="size(self) < 3 || self[1].size % self[2].size == 0",message="the size of layer 1 must be a multiple of the size of layer 2"
	PodSetSliceRequiredTopologyConstraints []PodSetSliceTopologyConstraint `json:"podSetSliceRequiredTopologyConstraints,omitempty"`

	// topologySpreading spreads the pod sets of matching workloads over the
	// domains of a level (Kueue v0.20's podset-topology-spreading
	// annotation): a domain may take this pod set (or its pod-set group)
	// only while its share of the matching admitted ones is at most
	// maxShareAllowingPlacement.
	//
	// +optional
	TopologySpreading *TopologySpreading `json:"topologySpreading,omitempty"`
}

// TopologySpreading is the podset-topology-spreading annotation.
type TopologySpreading struct {
	// workloadLabelSelectors select, among the admitted Workloads of the
	// namespace, those whose pod sets the rules count (all must match the
	// Workload's labels, its job's labels copied). Empty: the Workloads of
	// the same job (the same controller).
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	WorkloadLabelSelectors []metav1.LabelSelectorRequirement `json:"workloadLabelSelectors,omitempty"`

	// rules, one or two, each on its own level.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	Rules []TopologySpreadingRule `json:"rules"`
}

// TopologySpreadingRule spreads over the domains of one level.
type TopologySpreadingRule struct {
	// topologyKey is the level (node label key).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	TopologyKey string `json:"topologyKey"`

	// maxShareAllowingPlacement, between 0 and 1 exclusive: a domain whose
	// share of the matching admitted pod sets is above it takes no more
	// (checked before this one is counted; with none admitted, any may).
	//
	// +required
	MaxShareAllowingPlacement resource.Quantity `json:"maxShareAllowingPlacement"`

	// enforcementMode: Required (default) keeps the pod set out of domains
	// above the share; Preferred places it there only when no other domain
	// holds it.
	//
	// +optional
	// +kubebuilder:validation:Enum=Required;Preferred
	EnforcementMode string `json:"enforcementMode,omitempty"`
}

// Enforcement modes of a TopologySpreadingRule.
const (
	SpreadingRequired  = "Required"
	SpreadingPreferred = "Preferred"
)

// PodSetSliceTopologyConstraint is one layer of a multi-layer slice request.
type PodSetSliceTopologyConstraint struct {
	// topology is the level (node label key) of this layer.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Topology string `json:"topology"`

	// size is the number of pods in each group of this layer.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	Size int32 `json:"size"`
}

// WorkloadStatus is where the workload stands. Strata's controllers write
// it whole, with updates; managed fields track it as one field.
//
// +structType=atomic
type WorkloadStatus struct {
	// conditions: Admitted, Finished, Evicted, Invalid and PodsReady, each
	// with a reason a person can act on.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// admission is set when the workload is admitted: the flavor, counts and
	// topology assignment of each pod set.
	//
	// +optional
	Admission *Admission `json:"admission,omitempty"`

	// unhealthyNodes are failed nodes that run pods of this workload, for
	// which the agent is searching replacements.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	UnhealthyNodes []UnhealthyNode `json:"unhealthyNodes,omitempty"`

	// placement records the hub's choice of worker cluster (hub only).
	//
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// reclaimablePods are, per pod set, the pods that finished and whose
	// places will not be taken again (Kueue's reclaimablePods): of a Job,
	// its parallelism less the completions it still needs; of a JobSet,
	// the pods of its succeeded Jobs. Their capacity, on the nodes where
	// they ran, and their quota are released before the workload ends.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ReclaimablePods []ReclaimablePod `json:"reclaimablePods,omitempty"`

	// requeueState counts the times the workload was evicted because its
	// pods were not ready in time (Evicted reason PodsReadyTimeout) and
	// says when it may be admitted again (Kueue's requeueState).
	//
	// +optional
	RequeueState *RequeueState `json:"requeueState,omitempty"`

	// accumulatedPastExecutionTimeSeconds is how long, in seconds, the
	// workload was admitted in its earlier admissions, counted for
	// spec.maximumExecutionTimeSeconds only (Kueue's
	// accumulatedPastExexcutionTimeSeconds); reset when the workload is
	// deactivated for exceeding it.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	AccumulatedPastExecutionTimeSeconds *int32 `json:"accumulatedPastExecutionTimeSeconds,omitempty"`

	// admissionChecks are the states of the AdmissionChecks of the queue
	// that reserved the workload's quota (Kueue's admissionChecks): each
	// check's controller sets its state; the workload is admitted, and its
	// job starts, once every one is Ready. Retry takes the reservation
	// back and queues the workload again; Rejected deactivates it.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	AdmissionChecks []AdmissionCheckState `json:"admissionChecks,omitempty"`
}

// CheckState is the state of one AdmissionCheck for one workload.
//
// +kubebuilder:validation:Enum=Pending;Ready;Retry;Rejected
type CheckState string

// The AdmissionCheck states (Kueue's).
const (
	// CheckStatePending: the check has not decided yet.
	CheckStatePending CheckState = "Pending"
	// CheckStateReady: the check lets the workload be admitted.
	CheckStateReady CheckState = "Ready"
	// CheckStateRetry: the reservation is taken back and the workload
	// queued again; the check is Pending again.
	CheckStateRetry CheckState = "Retry"
	// CheckStateRejected: the workload is deactivated (spec.active false).
	CheckStateRejected CheckState = "Rejected"
)

// AdmissionCheckState is one AdmissionCheck's state for a workload.
type AdmissionCheckState struct {
	// name of the AdmissionCheck.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// state: Pending, Ready, Retry or Rejected.
	//
	// +required
	State CheckState `json:"state"`

	// lastTransitionTime is when the state last changed.
	//
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`

	// message says why, for a person.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`

	// podSetUpdates are what the check adds to the pods of each pod set
	// when the job starts (labels, annotations, node selector,
	// tolerations), e.g. to put them on nodes it provisioned.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	PodSetUpdates []PodSetUpdate `json:"podSetUpdates,omitempty"`
}

// PodSetUpdate is what an AdmissionCheck adds to a pod set's pods.
type PodSetUpdate struct {
	// name of the pod set.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// labels to add to the pods.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to add to the pods.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	Annotations map[string]string `json:"annotations,omitempty"`

	// nodeSelector entries to add to the pods.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations to add to the pods.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// RequeueState is the backoff of a workload evicted for pods not ready.
type RequeueState struct {
	// count is how many times the workload was evicted for pods not
	// ready in time.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count *int32 `json:"count,omitempty"`

	// requeueAt is when the workload may be admitted again; before it,
	// the agent leaves it out (Admitted=False, reason PodsReadyTimeout)
	// and the workloads behind it in its queue go ahead.
	//
	// +optional
	RequeueAt *metav1.Time `json:"requeueAt,omitempty"`
}

// ReclaimablePod is how many pods of a pod set are reclaimable.
type ReclaimablePod struct {
	// name of the pod set.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// count of its pods whose capacity and quota are released.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// PodSetCount is how many pods of a pod set.
type PodSetCount struct {
	// name of the pod set.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// count of its pods.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// PodSetFlavor is the flavor of one pod set.
type PodSetFlavor struct {
	// name of the pod set.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// flavor the pod set is placed on.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor"`
}

// Admission is how a workload was admitted.
type Admission struct {
	// clusterQueue that admitted the workload.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClusterQueue string `json:"clusterQueue"`

	// podSetAssignments has one entry per pod set.
	//
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// PodSetAssignment is the admission of one pod set.
type PodSetAssignment struct {
	// name of the pod set.
	//
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// flavor is the ResourceFlavor the pod set was admitted on.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor"`

	// count is the number of admitted pods.
	//
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`

	// resourceUsage is the total requests of the admitted pods.
	//
	// +optional
	ResourceUsage corev1.ResourceList `json:"resourceUsage,omitempty"`

	// topologyAssignment places the pods in topology domains (topology-aware
	// flavors only).
	//
	// +optional
	TopologyAssignment *TopologyAssignment `json:"topologyAssignment,omitempty"`

	// delayedTopologyRequest says that the pod set's topology assignment
	// waits for the AdmissionChecks (KEP-2724's support for
	// ProvisioningRequests): Pending when its quota was reserved on a
	// flavor whose ProvisioningRequest check must first provision nodes,
	// without a topologyAssignment; Ready once the scheduler's second pass
	// placed it, after every check was Ready.
	//
	// +optional
	DelayedTopologyRequest *DelayedTopologyRequestState `json:"delayedTopologyRequest,omitempty"`
}

// DelayedTopologyRequestState is the state of a delayed topology
// assignment.
//
// +kubebuilder:validation:Enum=Pending;Ready
type DelayedTopologyRequestState string

// The states of a delayed topology assignment.
const (
	// DelayedTopologyRequestPending: the assignment waits for the
	// AdmissionChecks, then the scheduler's second pass.
	DelayedTopologyRequestPending DelayedTopologyRequestState = "Pending"
	// DelayedTopologyRequestReady: the second pass assigned it.
	DelayedTopologyRequestReady DelayedTopologyRequestState = "Ready"
)

// UnhealthyNode is a failed node running pods of the workload.
type UnhealthyNode struct {
	// name of the node.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PlacementResult is the outcome of one dispatch of a workload to a cluster.
//
// +kubebuilder:validation:Enum=Dispatched;Admitted;Rejected;TimedOut;Unreachable;Evicted
type PlacementResult string

// Placement results.
const (
	PlacementDispatched  PlacementResult = "Dispatched"
	PlacementAdmitted    PlacementResult = "Admitted"
	PlacementRejected    PlacementResult = "Rejected"
	PlacementTimedOut    PlacementResult = "TimedOut"
	PlacementUnreachable PlacementResult = "Unreachable"
	PlacementEvicted     PlacementResult = "Evicted"
)

// Placement is the hub's record of where a workload was sent.
type Placement struct {
	// cluster is the WorkerCluster holding the live copy; empty while the
	// workload waits on the hub.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// flavor the hub planned on in that cluster.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor,omitempty"`

	// dispatchGeneration increases with every dispatch; copies of older
	// generations are stale and are removed before a new dispatch starts.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	DispatchGeneration int64 `json:"dispatchGeneration,omitempty"`

	// dispatchTime is when the hub decided the current dispatch; later
	// dispatches have later times, also within one placement pass. The
	// copy carries it (annotation strata.dev/dispatch-time) so that the
	// worker's agent admits copies of equal priority in the order the hub
	// placed them, and packs them onto its nodes as the hub's reservations
	// assumed.
	//
	// +optional
	DispatchTime *metav1.MicroTime `json:"dispatchTime,omitempty"`

	// preemptUpTo, when set, is the priority up to which the current copy
	// may preempt workloads of its ClusterQueue on the worker: the hub
	// found that the workload fits nowhere as the fleet stands and chose
	// this worker as the one where preempting costs least. The copy
	// carries it (annotation strata.dev/preempt-up-to); a copy without it
	// never preempts.
	//
	// +optional
	PreemptUpTo *int32 `json:"preemptUpTo,omitempty"`

	// podSetCounts, when set, are the pods of each pod set the hub placed
	// the workload with, fewer than it asks for (partial admission: at
	// least each pod set's minCount, where all its pods fit on no worker
	// or in its ClusterQueue's quota). Its queue is charged for as many
	// until its copy is admitted (then for the admitted pods), and the
	// copy (annotation strata.dev/pod-set-counts) is admitted with at
	// most as many.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	PodSetCounts []PodSetCount `json:"podSetCounts,omitempty"`

	// podSetFlavors, when set, are the flavors of the workload's pod sets
	// on that cluster, which differ: its pod sets fit on no one flavor,
	// and the hub placed each (or each PodSet group) on the first flavor
	// of its ClusterQueue that holds it, as the worker's agent admits such
	// a workload. flavor is then the first pod set's, or, with
	// preemptUpTo, the one where the worker preempts for the pod sets
	// that do not fit now. Its queue is charged on each pod set's flavor,
	// and the copy (annotation strata.dev/pod-set-flavors) is admitted
	// with each pod set on its own.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	PodSetFlavors []PodSetFlavor `json:"podSetFlavors,omitempty"`

	// topologyHint is the placement the hub planned for the current
	// dispatch, per pod set at the worker summary's leaf level (what the
	// copy's strata.dev/topology-hint carries). The hub counts it for
	// topology spreading across the fleet; it is left out when longer
	// than 16 KiB.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	TopologyHint string `json:"topologyHint,omitempty"`

	// attempts are the most recent dispatches, oldest first.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Attempts []PlacementAttempt `json:"attempts,omitempty"`
}

// PlacementAttempt is one dispatch and its outcome.
type PlacementAttempt struct {
	// cluster the workload was sent to.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// flavor planned on.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor,omitempty"`

	// dispatchGeneration of this attempt.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	DispatchGeneration int64 `json:"dispatchGeneration"`

	// result of the attempt.
	//
	// +required
	Result PlacementResult `json:"result"`

	// time of the last change of result.
	//
	// +required
	Time metav1.Time `json:"time"`

	// reason is the result's cause in CamelCase, when the hub knows one
	// (a worker's refusal: NamespaceNotFound, LocalQueueNotFound,
	// NamespaceNotAllowed, QuotaExceeded, ...).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// message explains the result.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Workload condition types.
const (
	// WorkloadAdmitted is True once the workload has an admission.
	WorkloadAdmitted = "Admitted"
	// WorkloadFinished is True once the Job succeeded or failed.
	WorkloadFinished = "Finished"
	// WorkloadEvicted is True when an admitted workload was sent back to the queue.
	WorkloadEvicted = "Evicted"
	// WorkloadResized is True once an elastic workload's admission
	// follows its job's new size in place (ElasticJobAnnotation), False
	// while a resize waits, saying for what.
	WorkloadResized = "Resized"
	// WorkloadCopyGoing is True on a hub Workload while the hub takes its
	// copy back and waits for the copy and its pods to be gone before
	// placing it again; its message names the pods the worker's agent
	// reported (strata.dev/going-pods).
	WorkloadCopyGoing = "CopyGoing"
	// WorkloadWorkerUnreachable is True on a hub Workload while the worker
	// of its dispatch does not answer; its message says when the hub
	// places it elsewhere.
	WorkloadWorkerUnreachable = "WorkerUnreachable"
	// WorkloadInvalid is True when the Job cannot be admitted as written
	// (bad annotations, unknown queue, namespace not allowed).
	WorkloadInvalid = "Invalid"
	// WorkloadPreempted is True when the workload was evicted to make room
	// for another; its reason says under which policy (InClusterQueue,
	// InCohortReclamation, InCohortReclaimWhileBorrowing,
	// InCohortFairSharing, Kueue's names).
	WorkloadPreempted = "Preempted"
	// WorkloadPodsReady is True once every pod of an admitted workload is
	// ready or has succeeded (the agent's waitForPodsReady, Kueue's
	// condition); False, reason WaitForStart or WaitForRecovery, while it
	// waits for them.
	WorkloadPodsReady = "PodsReady"
	// WorkloadRequeued says whether an evicted or deactivated workload
	// is back in its queue (Kueue's condition): False while it waits out
	// a waitForPodsReady backoff (reason PodsReadyTimeout), is
	// deactivated (Deactivated) or its queue stopped it
	// (ClusterQueueStopped, LocalQueueStopped), or, a hub's copy, its
	// hub is fenced (Fenced); True once it queues again (BackoffFinished,
	// Reactivated, ClusterQueueRestarted, LocalQueueRestarted,
	// FenceLifted), or at once after an eviction that needs no wait
	// (reason Preempted).
	WorkloadRequeued = "Requeued"
	// WorkloadQuotaReserved is True while a workload of a queue with
	// AdmissionChecks holds its quota and waits for its checks (Kueue's
	// condition); Admitted turns True once every check is Ready. A queue
	// without checks admits at once and does not set it.
	WorkloadQuotaReserved = "QuotaReserved"
)

// Reasons for a workload of a queue with AdmissionChecks.
const (
	// WaitingForAdmissionChecks: Admitted=False while its quota is
	// reserved and some check is not Ready.
	WaitingForAdmissionChecks = "WaitingForAdmissionChecks"
	// EvictedByAdmissionCheck: Evicted=True after a check asked to retry.
	EvictedByAdmissionCheck = "AdmissionCheck"
	// AdmissionCheckRejected: in the message of a workload deactivated
	// because a check rejected it.
	AdmissionCheckRejected = "AdmissionCheckRejected"
	// QueueAdmissionCheckNotReady: a ClusterQueue's Active=False reason
	// (and its workloads' Admitted=False reason) while one of its checks
	// does not exist or is not Active.
	QueueAdmissionCheckNotReady = "AdmissionCheckNotReady"
	// WaitingForTopologyAssignment: Admitted=False while every check is
	// Ready and the scheduler's second pass has not yet placed a pod set
	// whose topology assignment was delayed (delayedTopologyRequest
	// Pending).
	WaitingForTopologyAssignment = "WaitingForTopologyAssignment"
	// EvictedByTopologyAssignment: Evicted=True when the second pass could
	// not place a delayed pod set within its time limit: the reservation
	// is taken back and the workload queued again.
	EvictedByTopologyAssignment = "TopologyAssignmentFailed"
	// ProvisioningRequestControllerName is the controllerName of Kueue's
	// ProvisioningRequest AdmissionCheck, which Strata's agent implements:
	// a flavor such a check applies to reserves quota only, and its
	// topology is assigned once the check is Ready (KEP-2724).
	ProvisioningRequestControllerName = "kueue.x-k8s.io/provisioning-request"
	// ProvisioningRequestParameterPrefix begins a job's annotations that
	// pass a parameter to the ProvisioningRequests made for it, as in
	// Kueue: provreq.kueue.x-k8s.io/ValidUntilSeconds: "60" sets the
	// ValidUntilSeconds parameter, over the ProvisioningRequestConfig's.
	// The job's Workload carries them, as made.
	ProvisioningRequestParameterPrefix = "provreq.kueue.x-k8s.io/"
)

// Reasons of the Requeued condition once True, beside the eviction
// reasons (Kueue's).
const (
	// RequeuedBackoffFinished: its waitForPodsReady backoff is over (its
	// requeueState.requeueAt is cleared; the count stays).
	RequeuedBackoffFinished = "BackoffFinished"
	// RequeuedReactivated: spec.active became true again.
	RequeuedReactivated = "Reactivated"
	// RequeuedClusterQueueRestarted and RequeuedLocalQueueRestarted: the
	// queue that stopped it admits again (stopPolicy None).
	RequeuedClusterQueueRestarted = "ClusterQueueRestarted"
	RequeuedLocalQueueRestarted   = "LocalQueueRestarted"
	// RequeuedFenceLifted: the hub of a copy an agent evicted because
	// that hub went silent (Evicted, Admitted and Requeued False, reason
	// EvictedByFencing) renews its fencing Lease again.
	RequeuedFenceLifted = "FenceLifted"
)

// EvictedByFencing is the reason of the Evicted, Admitted and Requeued
// conditions of a hub's copy that an agent stopped because that hub went
// silent for longer than its fencing Lease allows, and of the Admitted
// condition of such a copy while the agent holds it.
const EvictedByFencing = "Fenced"

// Reasons of the PodsReady condition (Kueue's), and the Evicted and
// Admitted reasons of a workload whose pods were not ready in time.
const (
	// PodsReadyStarted: every pod became ready since the admission.
	PodsReadyStarted = "Started"
	// PodsReadyRecovered: every pod is ready again after one failed.
	PodsReadyRecovered = "Recovered"
	// PodsReadyWaitForStart: not every pod has been ready since the
	// admission.
	PodsReadyWaitForStart = "WaitForStart"
	// PodsReadyWaitForRecovery: every pod was ready, then one was not.
	PodsReadyWaitForRecovery = "WaitForRecovery"
	// EvictedByPodsReadyTimeout: the pods were not ready within
	// waitForPodsReady's timeout (or recoveryTimeout); the workload waits
	// for its requeueState.requeueAt, then queues again.
	EvictedByPodsReadyTimeout = "PodsReadyTimeout"
	// RequeuingLimitExceeded: evicted for pods not ready more times than
	// waitForPodsReady's backoffLimitCount allows; the workload is
	// deactivated (spec.active false).
	RequeuingLimitExceeded = "RequeuingLimitExceeded"
	// MaximumExecutionTimeExceeded: the workload was admitted for longer
	// than its spec.maximumExecutionTimeSeconds in all; it is deactivated
	// (spec.active false).
	MaximumExecutionTimeExceeded = "MaximumExecutionTimeExceeded"
	// WorkloadDeactivationTarget (Kueue's condition type) is True on an
	// admitted workload about to be deactivated, its reason saying why
	// (MaximumExecutionTimeExceeded); the eviction that follows the
	// deactivation removes it and says the reason.
	WorkloadDeactivationTarget = "DeactivationTarget"
	// WaitingForPodsReady: the workload fits, but the agent admits nothing
	// while an admitted workload's pods are not all ready
	// (waitForPodsReady.blockAdmission).
	WaitingForPodsReady = "WaitingForPodsReady"
)

// EvictedByJobChange is the reason of the Evicted condition of a hub
// Workload dispatched, not admitted yet, whose job's pod sets changed: its
// copy, made of the job as it was, is taken back; the Workload's spec is
// brought up to date once it is, and it is dispatched again as the job is
// now. Its ObservedGeneration is the spec generation it was evicted at.
const EvictedByJobChange = "JobChanged"

// Priority class sources (Workload spec.priorityClassSource).
const (
	WorkloadPriorityClassSource = "strata.dev/workloadpriorityclass"
	PodPriorityClassSource      = "scheduling.k8s.io/priorityclass"
)

// Reasons of the Preempted condition, and the Evicted condition's reason
// for a preempted workload.
const (
	PreemptedInClusterQueue                = "InClusterQueue"
	PreemptedInCohortReclamation           = "InCohortReclamation"
	PreemptedInCohortReclaimWhileBorrowing = "InCohortReclaimWhileBorrowing"
	// PreemptedInCohortFairSharing: taken under fair sharing from a member
	// of the cohort tree whose share is higher than the preemptor's.
	PreemptedInCohortFairSharing = "InCohortFairSharing"
	EvictedByPreemption          = "Preempted"
)

// AdmittedAfterPreempting starts the part of an agent's Admitted=True
// message that names the workloads it preempted to admit this one
// ("admitted by ClusterQueue q on flavor f; after preempting 2
// workload(s): ns/a, ns/b"); the hub keeps it in the dispatch's attempt.
const AdmittedAfterPreempting = "after preempting "

// Workload is Strata's record of a Job: what it asks for and how it was
// admitted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wl
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.placement.cluster`
// +kubebuilder:printcolumn:name="Flavor",type=string,JSONPath=`.status.admission.podSetAssignments[0].flavor`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WorkloadSpec `json:"spec"`
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadList is a list of Workload.
//
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

// GetTopologySpreading returns the request's topology spreading; nil for a
// nil request.
func (r *PodSetTopologyRequest) GetTopologySpreading() *TopologySpreading {
	if r == nil {
		return nil
	}
	return r.TopologySpreading
}
