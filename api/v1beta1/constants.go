package v1beta1

// Labels and annotations users put on Jobs. On a Job labelled with
// QueueNameLabel, every pod-set annotation below is also accepted with the
// KueuePrefix instead of Prefix (same name after the prefix, same meaning), so a
// Kueue TAS manifest works after changing one label.
const (
	// Prefix is the prefix of every label, annotation, gate and finalizer Strata owns.
	Prefix = "strata.dev/"
	// KueuePrefix is the prefix of the KEP-2724 pod-set annotations Strata also accepts.
	KueuePrefix = "kueue.x-k8s.io/"

	// QueueNameLabel on a Job names the LocalQueue, in the Job's namespace,
	// that the Job is submitted to (as kueue.x-k8s.io/queue-name does in
	// Kueue); the LocalQueue points at the ClusterQueue that admits it. Only
	// Jobs with this label are managed by Strata.
	QueueNameLabel = Prefix + "queue-name"

	// PriorityClassLabel on a Job names the WorkloadPriorityClass that
	// gives its workload a priority (kueue.x-k8s.io/priority-class is also
	// read on a Job with QueueNameLabel).
	PriorityClassLabel = Prefix + "priority-class"
	// KueuePriorityClassLabel is Kueue's label naming a
	// WorkloadPriorityClass, read on a Job without PriorityClassLabel.
	KueuePriorityClassLabel = KueuePrefix + "priority-class"
	// ElasticJobAnnotation ("true") on a batch/v1 Job is Kueue's opt-in to
	// resizing it while it runs (KEP-77): its admission follows its
	// parallelism in place, its running pods untouched (see the agent's
	// docs). Only unconstrained placement, and not with
	// JobMinParallelismAnnotation.
	ElasticJobAnnotation = KueuePrefix + "elastic-job"

	// PodSetRequiredTopologyAnnotation asks for all pods of the pod set in one
	// domain of the named level (a node label key of the Topology).
	PodSetRequiredTopologyAnnotation = Prefix + "podset-required-topology"
	// PodSetPreferredTopologyAnnotation asks for all pods in one domain of the
	// named level if possible, climbing levels until the pod set fits.
	PodSetPreferredTopologyAnnotation = Prefix + "podset-preferred-topology"
	// PodSetUnconstrainedTopologyAnnotation ("true") admits the pod set wherever
	// free capacity exists, without compactness constraints.
	PodSetUnconstrainedTopologyAnnotation = Prefix + "podset-unconstrained-topology"
	// PodSetSliceRequiredTopologyAnnotation asks for every slice of
	// PodSetSliceSizeAnnotation pods in one domain of the named level.
	PodSetSliceRequiredTopologyAnnotation = Prefix + "podset-slice-required-topology"
	// PodSetSliceSizeAnnotation is the number of pods in one slice.
	PodSetSliceSizeAnnotation = Prefix + "podset-slice-size"
	// PodSetSliceRequiredTopologyConstraintsAnnotation holds up to three slice
	// layers as JSON, coarsest first: [{"topology": "<label>", "size": "<n>"}, ...].
	PodSetSliceRequiredTopologyConstraintsAnnotation = Prefix + "podset-slice-required-topology-constraints"
	// PodSetGroupNameAnnotation puts pod sets (e.g. leader and workers) into one
	// group that gets one flavor and one common domain.
	PodSetGroupNameAnnotation = Prefix + "podset-group-name"
	// UnhealthyNodesEvictionThresholdAnnotation on a Job (Kueue's
	// tas-unhealthy-nodes-eviction-threshold, TASReplaceMultipleFailedNodes)
	// is how many failed nodes, 1 to 8, its workload keeps running with
	// while they are replaced one at a time, head of the queue first; one
	// more evicts it. While within it, a replacement search that finds
	// nothing waits for room (until the recovery timeout) instead of
	// evicting at once. Without it, a second failed node evicts. The Job's
	// Workload carries it.
	UnhealthyNodesEvictionThresholdAnnotation = Prefix + "tas-unhealthy-nodes-eviction-threshold"
	// JobMinParallelismAnnotation on a batch/v1 Job (Kueue's
	// job-min-parallelism, under either prefix) is the fewest pods it may
	// run with: when its parallelism does not fit, it is admitted with as
	// many pods as fit, at least this many, and started with that
	// parallelism (partial admission). Between 1 and its pod count less one.
	JobMinParallelismAnnotation = Prefix + "job-min-parallelism"
	// JobCompletionsEqualParallelismAnnotation "true" on a batch/v1 Job
	// with JobMinParallelismAnnotation (Kueue's
	// job-completions-equal-parallelism, under either prefix) sets its
	// completions to the parallelism it is admitted with, too. The Job
	// must be Indexed with completions equal to parallelism.
	JobCompletionsEqualParallelismAnnotation = Prefix + "job-completions-equal-parallelism"
	// MaxExecTimeSecondsLabel on a job of any kind (Kueue's
	// max-exec-time-seconds, under either prefix) is the longest, in
	// seconds, its Workload may stay admitted in all (a positive base-10
	// integer): past it, the Workload is deactivated and the job
	// stopped. Read when the Workload is created.
	MaxExecTimeSecondsLabel = Prefix + "max-exec-time-seconds"
	// KueueMaxExecTimeSecondsLabel is Kueue's spelling of
	// MaxExecTimeSecondsLabel, read when that is absent.
	KueueMaxExecTimeSecondsLabel = KueuePrefix + "max-exec-time-seconds"
)

// Labels, annotations and gates Strata writes.
const (
	// AddedByAdmissionAnnotation on a job records, as JSON, what
	// strata-agent's start added to its pod templates for an admission.
	AddedByAdmissionAnnotation = Prefix + "added-by-admission"
	// PartialAdmissionAnnotation on a batch/v1 Job started with fewer pods
	// than it asks for records, as JSON, the parallelism and completions
	// its spec had before ({"parallelism":4,"completions":4}): its
	// Workload keeps asking for those, and they come back when the
	// admission is taken back.
	PartialAdmissionAnnotation = Prefix + "partial-admission"
	// GatedStartAnnotation on a hub's copy says that the hub wrote its pod
	// templates' scheduling gate and Workload labels and sent it running
	// (jobs.GatedStart): no admission wrote them, and taking an admission
	// back removes only those.
	GatedStartAnnotation = Prefix + "gated-start"
	// ReleasedFlavorAnnotation on a pod names the ResourceFlavor whose
	// admission strata-agent's ungater released it on, so that a pod that
	// runs after its Workload was admitted again on another flavor is told
	// from one that runs as admitted (a LeaderWorkerSet's pods, which are
	// stopped one by one).
	ReleasedFlavorAnnotation = Prefix + "released-flavor"
	// TopologySchedulingGate holds a pod until the node selector of its
	// assigned topology domain has been injected.
	TopologySchedulingGate = Prefix + "topology"
	// InvalidAnnotation on a Workload holds the reason its Job cannot be
	// admitted as written (the Invalid condition has the message). The
	// agent writes it with the Workload's spec, so that a scheduler never
	// sees an invalid spec without it; workloads that carry it are not
	// admitted.
	InvalidAnnotation = Prefix + "invalid"
	// WorkloadLabel on a pod template (and so on its pods) names the
	// admitted Workload.
	WorkloadLabel = Prefix + "workload"
	// PodSetLabel on a pod template names the Workload pod set it belongs to.
	PodSetLabel = Prefix + "podset"
	// TASLabel marks pod templates (and so pods) admitted with topology-aware scheduling.
	TASLabel = Prefix + "tas"
	// OwnerUIDLabel on a pod template (and so on its pods) is the UID of
	// the object whose Workload was admitted, for kinds whose pods are not
	// controlled by that object directly (a JobSet's pods belong to its
	// Jobs): the agent acts only on the pods of the Workload's owner.
	OwnerUIDLabel = Prefix + "owner-uid"
	// ManagedByController is the Job spec.managedBy value on hub Jobs, so the
	// hub cluster's Job controller leaves them alone.
	ManagedByController = Prefix + "hub"

	// HostnameLabel is the well-known node label for the host level.
	HostnameLabel = "kubernetes.io/hostname"
	// JobCompletionIndexLabel is the pod index label of indexed batch/v1 Jobs.
	JobCompletionIndexLabel = "batch.kubernetes.io/job-completion-index"
)

// WorkerClusterLabel on a CapacitySummary in the hub cluster names the
// WorkerCluster whose summary it copies: the hub keeps one such copy per
// worker and flavor, named "<worker>.<flavor>", for readers of the hub's
// API alone (kubectl strata dashboard). An agent publishes and collects
// only unlabelled summaries, and the hub reads only unlabelled ones from
// its workers, so a hub cluster that is also a worker is not confused.
const WorkerClusterLabel = Prefix + "worker-cluster"

// The dispatch contract: what the hub puts on the copy of a Job it creates
// on a worker, and the agent carries from that Job to its Workload.
const (
	// OriginLabel holds the identity of the hub that dispatched the Job
	// (HubConfiguration.origin). The hub watches and collects only the copies
	// labelled with its own origin.
	OriginLabel = Prefix + "origin"
	// FencingLeasePrefix starts the name of the Lease a hub renews on each
	// worker, in the agent's namespace: strata-fence-<origin>. While the hub
	// renews it, the agent runs the hub's copies; once it has not for the
	// Lease's duration, the agent stops them.
	FencingLeasePrefix = "strata-fence-"
	// RevokedDispatchesAnnotation on a hub's fencing Lease lists, comma
	// separated, the dispatches (hub Workload UID "/" dispatch generation)
	// whose copies on that worker must not run: the hub placed their
	// workloads elsewhere while it could not reach the worker, or could not
	// delete them. The agent admits none of them and stops those admitted.
	RevokedDispatchesAnnotation = Prefix + "revoked-dispatches"
	// HubWorkloadUIDLabel holds the UID of the hub Workload the copy belongs
	// to.
	HubWorkloadUIDLabel = Prefix + "hub-workload-uid"
	// DispatchGenerationLabel holds the dispatch generation: how many times
	// the hub has dispatched that Workload, this copy included. A copy whose
	// generation is not the hub Workload's current one is stale.
	DispatchGenerationLabel = Prefix + "dispatch-generation"
	// FlavorAnnotation pins the ResourceFlavor the copy must be admitted on:
	// the agent tries only that flavor and says so when its ClusterQueue
	// does not have it.
	FlavorAnnotation = Prefix + "flavor"
	// DispatchTimeAnnotation holds when the hub decided the copy's dispatch
	// (RFC 3339 with microseconds). The agent orders copies of equal
	// priority by it rather than by their creation time, so that it admits
	// them in the order the hub reserved their placements.
	DispatchTimeAnnotation = Prefix + "dispatch-time"
	// PreemptUpToAnnotation, on a hub's copy, is the priority up to which
	// the copy may preempt workloads of its ClusterQueue on the worker
	// (the hub's Workload status.placement.preemptUpTo). A copy of the
	// hub without it never preempts: the hub chooses the one worker that
	// preempts for a workload.
	PreemptUpToAnnotation = Prefix + "preempt-up-to"
	// PodSetCountsAnnotation, on a hub's copy, caps the pods of its pod
	// sets the worker admits, as "name=count,..." (the hub's Workload
	// status.placement.podSetCounts): the hub placed it with fewer than
	// it asks for (partial admission) and charged its quota for those.
	PodSetCountsAnnotation = Prefix + "pod-set-counts"
	// PodSetFlavorsAnnotation, on a hub's copy, pins each of its pod sets
	// to a ResourceFlavor, as "name=flavor,...", every pod set named once:
	// the hub placed its pod sets on different flavors of the worker (as
	// the worker's agent admits a workload whose pod sets fit on no one
	// flavor). The agent admits each pod set on its flavor alone and says
	// so when its ClusterQueue lacks one; it rules over FlavorAnnotation.
	PodSetFlavorsAnnotation = Prefix + "pod-set-flavors"
	// DispatchWorkloadsAnnotation holds, on a copy the worker admits as
	// several Workloads (a LeaderWorkerSet's groups), how many: the agent's
	// summary lists the dispatch once all of them count.
	DispatchWorkloadsAnnotation = Prefix + "dispatch-workloads"
	// TopologyHintAnnotation holds, per pod set, the placement the hub
	// reserved for the copy on the worker's summary (JSON: pod set name to
	// TopologyAssignment, at the summary's leaf level). The agent places
	// each pod set in those domains when they have room for it, so that
	// its capacity is taken where the hub counted it; otherwise it places
	// the pod set on its own.
	TopologyHintAnnotation = Prefix + "topology-hint"
	// RequeueCountAnnotation holds, on a hub's copy, how many times the
	// Job's earlier copies were evicted because their pods were not ready
	// in time (the hub Workload's status.requeueState.count). The worker's
	// waitForPodsReady counts on from it, so that its backoff and its
	// backoffLimitCount apply to the Job across the fleet, not to each
	// copy alone.
	RequeueCountAnnotation = Prefix + "requeue-count"
	// CopySignatureAnnotation holds, on a hub's copy, the hub's keyed
	// signature (HMAC-SHA256) of the copy's origin, kind, namespace, name,
	// hub Workload UID and dispatch generation. Labels alone do not make
	// a copy the hub's: anyone who may label a Job on a worker can put the
	// hub's on it. The hub deletes, as an orphan, only a copy it signed or
	// one its own records name; the key stays on the hub.
	CopySignatureAnnotation = Prefix + "copy-signature"
	// GoingPodsAnnotation, on a hub's copy being deleted, lists the pods
	// that still keep it (at most 10: name, phase or Terminating since
	// when, node). The worker's agent writes it; the hub, which may not
	// read pods on workers, shows it on the hub Workload (CopyGoing) and
	// on a draining WorkerCluster, so that a take-back held by pods stuck
	// Terminating (a node that does not answer) says which.
	GoingPodsAnnotation = Prefix + "going-pods"
	// DeactivatedByAnnotation, on a hub Workload, is written with
	// spec.active: false when the hub deactivates it because a worker
	// deactivated its copy past waitForPodsReady's backoffLimitCount
	// (RequeuingLimitExceeded): the dispatch it ends and the worker's
	// message, as JSON. The take-back's record that follows (the attempt's
	// cause RequeuingLimitExceeded) then survives a hub restart while the
	// copy is deleted. It names a dispatch, so once that dispatch is
	// recorded it says nothing any more.
	DeactivatedByAnnotation = Prefix + "deactivated-by"

	// OnboardedByLabel marks the namespaces and LocalQueues a hub created
	// on a worker for WorkerCluster.spec.onboarding: the hub's origin.
	OnboardedByLabel = Prefix + "onboarded-by"
	// HubOnboardingLabel on a worker namespace, set to
	// HubOnboardingAllowed by the worker's administrators, lets a hub's
	// onboarding create LocalQueues in it although the hub did not create
	// the namespace.
	HubOnboardingLabel = Prefix + "hub-onboarding"
	// HubOnboardingAllowed is HubOnboardingLabel's opt-in value.
	HubOnboardingAllowed = "allowed"
	// DrainFinalizer on a WorkerCluster keeps it, once deleted, until no
	// hub Workload is dispatched there any more: its copies are taken back
	// (and their pods gone) before their workloads are placed elsewhere.
	DrainFinalizer = Prefix + "drain"
	// CopyGoneFinalizer on a hub Workload keeps it, once deleted, until
	// its copy is gone from its worker, or known stopped there (fencing):
	// the Workload of the same job created again under its name is placed
	// only then, never beside a copy that may still run. The hub's intake
	// creates every hub Workload with it.
	CopyGoneFinalizer = Prefix + "copy-gone"
	// PodsGoneFinalizer on a hub's copy Workload on a worker keeps it,
	// once deleted with its job (kubectl delete job on the worker: the
	// job goes at once, its pods terminate for their grace period), until
	// no pod of it runs. The worker's agent creates every copy Workload
	// with it and removes it then; the hub counts a copy Workload so held
	// as running, and places its workload again only once it is gone.
	PodsGoneFinalizer = Prefix + "pods-gone"
	// AcceptClusterIDAnnotation on a WorkerCluster, set to the cluster ID
	// its credential now reaches, accepts that the worker changed: the
	// copies the hub dispatched to the cluster it reached before are given
	// up (their workloads are placed again) and the new cluster is
	// recorded. Without it, a credential that reaches another cluster is
	// refused.
	AcceptClusterIDAnnotation = Prefix + "accept-cluster-id"
	// AbandonCopiesAnnotation ("true") on a WorkerCluster being deleted
	// gives up its copies without waiting for them to be known gone: an
	// administrator's statement that the worker is lost for good, or that
	// its copies were stopped there by other means.
	AbandonCopiesAnnotation = Prefix + "abandon-copies"
)
