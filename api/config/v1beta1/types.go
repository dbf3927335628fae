package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
)

// GroupVersion of the configuration files.
var GroupVersion = schema.GroupVersion{Group: "config.strata.dev", Version: "v1beta1"}

// Kinds of the configuration files.
const (
	AgentConfigurationKind = "AgentConfiguration"
	HubConfigurationKind   = "HubConfiguration"
)

// Algorithm is a placement algorithm of the TAS engine.
type Algorithm string

const (
	// BestFit fills the domains with the most free capacity first and picks
	// the last domain so that the least capacity is left over.
	BestFit Algorithm = "BestFit"
	// LeastFreeCapacity fills the domains with the least free capacity first,
	// which keeps large domains free.
	LeastFreeCapacity Algorithm = "LeastFreeCapacity"
)

// AgentConfiguration configures strata-agent.
//
// +kubebuilder:object:root=true
type AgentConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// topologyAwareScheduling chooses the placement algorithms.
	// +optional
	TopologyAwareScheduling TopologyAwareScheduling `json:"topologyAwareScheduling,omitempty"`

	// nodeFailure configures how failed nodes under admitted workloads are
	// detected and replaced (hot swap).
	// +optional
	NodeFailure NodeFailure `json:"nodeFailure,omitempty"`

	// summary configures the CapacitySummary objects the agent publishes.
	// +optional
	Summary Summary `json:"summary,omitempty"`

	// queueing configures admission from the ClusterQueues.
	// +optional
	Queueing Queueing `json:"queueing,omitempty"`

	// waitForPodsReady evicts and requeues an admitted workload whose pods
	// are not all ready (or succeeded) within a timeout, Kueue's
	// all-or-nothing with its defaults: on, a timeout of 30m, no blocking
	// of admissions, requeued after 60s doubling up to 3600s, without a
	// limit.
	// +optional
	WaitForPodsReady WaitForPodsReady `json:"waitForPodsReady,omitempty"`

	// fencing configures how the agent stops the copies of a hub that has
	// gone silent (the hub's fencing configuration, docs/reliability.md).
	// +optional
	Fencing AgentFencing `json:"fencing,omitempty"`

	// events configures the events the agent records.
	// +optional
	Events Events `json:"events,omitempty"`

	// fairSharing, when set, turns on Kueue's fair sharing between the
	// ClusterQueues and cohorts of a cohort tree: pending heads are served
	// from the member with the lowest share of what it borrows (divided by
	// its fairSharing.weight), and a workload preempts workloads of
	// members with a higher share, by preemptionStrategies, instead of by
	// the classical reclaimWithinCohort / borrowWithinCohort rules. Unset:
	// classical preemption, as in Kueue.
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`

	// admissionFairSharing, when set, keeps each LocalQueue's consumed
	// usage in its status and lets ClusterQueues whose admissionScope is
	// UsageBasedAdmissionFairSharing serve first the workloads of the
	// LocalQueue that consumed the least (Kueue's admission fair sharing).
	// Unset: no LocalQueue usage is kept, and admissionScope is ignored.
	// +optional
	AdmissionFairSharing *AdmissionFairSharing `json:"admissionFairSharing,omitempty"`

	// metrics configures optional metrics.
	// +optional
	Metrics Metrics `json:"metrics,omitempty"`
}

// Metrics configures optional metrics.
type Metrics struct {
	// localQueueMetrics exports metrics per LocalQueue, labelled with its
	// name and namespace (strata_local_queue_* on an agent,
	// strata_hub_local_queue_* on the hub): pending workloads by status,
	// active workloads, the Active condition, what its workloads reserve
	// and use, and the counters and wait times the ClusterQueue metrics
	// have (Kueue's LocalQueueMetrics feature). Off by default, as in
	// Kueue: a cluster with many namespaces gets many series.
	// +optional
	LocalQueueMetrics bool `json:"localQueueMetrics,omitempty"`
}

// AdmissionFairSharing configures admission fair sharing (Kueue's
// configuration field).
type AdmissionFairSharing struct {
	// usageHalfLifeTime is the time after which a LocalQueue's consumed
	// usage counts half: each sample moves it towards the usage of the
	// moment by 1 - 0.5^(time since the last sample / usageHalfLifeTime).
	// 0 (the default): only the usage of the moment counts.
	// +optional
	UsageHalfLifeTime metav1.Duration `json:"usageHalfLifeTime,omitempty"`

	// usageSamplingInterval is how often the consumed usage is sampled
	// (and written to the LocalQueue's status). Default 5m.
	// +optional
	UsageSamplingInterval *metav1.Duration `json:"usageSamplingInterval,omitempty"`

	// resourceWeights weigh the resources when usages are compared: a
	// LocalQueue's usage is the sum over resources of its consumed amount
	// (cores for cpu, bytes for memory, units otherwise) times the
	// resource's weight, divided by the LocalQueue's fairSharing.weight.
	// A resource not listed weighs 1; 0 leaves it out.
	// +optional
	ResourceWeights map[corev1.ResourceName]float64 `json:"resourceWeights,omitempty"`
}

// FairSharing configures fair sharing (Kueue's configuration field).
type FairSharing struct {
	// preemptionStrategies are the rules a preemption in the cohort tree
	// must satisfy, tried in order while the preemptor does not fit:
	// LessThanOrEqualToFinalShare (preempt a workload if the preemptor's
	// share with it admitted is at most the target's share without the
	// preempted workload) and LessThanInitialShare (if the preemptor's
	// share with it admitted is below the target's share as it is).
	// Default [LessThanOrEqualToFinalShare, LessThanInitialShare]; the
	// other accepted lists are either strategy alone.
	// +optional
	PreemptionStrategies []PreemptionStrategy `json:"preemptionStrategies,omitempty"`
}

// PreemptionStrategy is a fair-sharing preemption rule.
type PreemptionStrategy string

// The fair-sharing preemption strategies (see FairSharing).
const (
	LessThanOrEqualToFinalShare PreemptionStrategy = "LessThanOrEqualToFinalShare"
	LessThanInitialShare        PreemptionStrategy = "LessThanInitialShare"
)

// AgentFencing configures the agent's side of fencing: the hubs renew a
// Lease each (strata-fence-<origin>) in namespace; a hub's copies are
// stopped once the agent has not seen its Lease change for the Lease's
// duration (the hub's fencing.fenceAfter), measured on the agent's clock
// only. The agent keeps when it last saw each change in a Lease of its
// own (strata-agent-fence-<origin>), so that a restart never extends a
// copy's life.
type AgentFencing struct {
	// namespace holds the hubs' fencing Leases: the strata-agent chart's
	// namespace (default strata-system). A Lease elsewhere is ignored.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// TopologyAwareScheduling chooses the engine's algorithm per request kind.
type TopologyAwareScheduling struct {
	// requiredAlgorithm for podset-required-topology (default BestFit).
	// +optional
	RequiredAlgorithm Algorithm `json:"requiredAlgorithm,omitempty"`
	// preferredAlgorithm for podset-preferred-topology (default BestFit).
	// +optional
	PreferredAlgorithm Algorithm `json:"preferredAlgorithm,omitempty"`
	// unconstrainedAlgorithm for unconstrained and implicit requests
	// (default LeastFreeCapacity).
	// +optional
	UnconstrainedAlgorithm Algorithm `json:"unconstrainedAlgorithm,omitempty"`
	// balancedPlacement places preferred requests evenly over the fewest
	// domains instead of packing them greedily (KEP-2724 "Balanced
	// placement"). Default false.
	// +optional
	BalancedPlacement bool `json:"balancedPlacement,omitempty"`
	// partialSlices accepts a podset-slice-size (or a single layer of
	// podset-slice-required-topology-constraints) that does not divide the
	// pod count, as Kueue v0.20's TASPartialSlices does: the last
	// count % size pods form one partial slice, held by one domain of the
	// slice level and ranked last. Default false: KEP-2724 requires the
	// size to divide the pod set, and such a Job is Invalid. Set it alike
	// on the hub and on every agent.
	// +optional
	PartialSlices bool `json:"partialSlices,omitempty"`
}

// NodeFailure configures failed-node replacement.
type NodeFailure struct {
	// replaceFailedNodes turns hot swap on (default true). When off, failed
	// nodes are not replaced and workloads on them are not evicted by Strata.
	// +optional
	ReplaceFailedNodes *bool `json:"replaceFailedNodes,omitempty"`
	// notReadyDelay is how long a node must be NotReady before it counts as
	// failed (default 30s), when replaceOnPodTermination is off.
	// +optional
	NotReadyDelay *metav1.Duration `json:"notReadyDelay,omitempty"`
	// replaceOnPodTermination treats a NotReady node as failed at once when
	// all of the workload's pods on it are terminated or terminating, and
	// not before, whatever notReadyDelay says (default true): as in
	// KEP-2724 and Kueue's TASReplaceNodeOnPodTermination, the two rules
	// exclude each other. Off, a NotReady node fails after notReadyDelay.
	// +optional
	ReplaceOnPodTermination *bool `json:"replaceOnPodTermination,omitempty"`
	// replaceOnTaints treats untolerated NoExecute / NoSchedule taints as
	// node failures once the workload's pods there are failed, terminating
	// or unscheduled (default true).
	// +optional
	ReplaceOnTaints *bool `json:"replaceOnTaints,omitempty"`
	// failFast evicts and requeues a workload when the first replacement
	// search fails (default true).
	// +optional
	FailFast *bool `json:"failFast,omitempty"`
	// recoveryTimeout bounds retries when failFast is off (default 10m).
	// +optional
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`
}

// Summary configures capacity summaries.
type Summary struct {
	// maxBytes is the size budget of one CapacitySummary; buckets are merged
	// (rounding free capacity down) to stay within it (default 512Ki).
	// +optional
	MaxBytes *int32 `json:"maxBytes,omitempty"`
	// minInterval is the least time between two writes of one summary
	// (default 250ms).
	// +optional
	MinInterval *metav1.Duration `json:"minInterval,omitempty"`
	// maxInterval bounds how far the time between two writes grows while
	// the capacity keeps changing: after each write that finds a change
	// already waiting, the next waits twice as long, from minInterval (or
	// 125ms when minInterval is 0) up to maxInterval; a change after a quiet spell is written minInterval
	// after the last write again. A backlog being admitted changes the
	// capacity at every admission; this keeps its summaries from costing
	// the API server as much as the admissions do. At least minInterval,
	// at most heartbeatInterval; equal to minInterval, the time between
	// writes stays minInterval (default 1s, or minInterval if greater, and
	// no more than heartbeatInterval).
	// +optional
	MaxInterval *metav1.Duration `json:"maxInterval,omitempty"`
	// heartbeatInterval is how often an unchanged summary is re-published
	// with a new observedTime (and the same summaryGeneration), so that the
	// hub, which treats summaries older than its dispatch.summaryStaleAfter
	// (default 2m) as stale, can tell a quiet worker from a silent one. Keep
	// it well under the hub's summaryStaleAfter; it must be at least
	// minInterval (default 30s).
	// +optional
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
}

// Queueing configures admission.
type Queueing struct {
	// ungateBatchPeriod batches the pod events of a workload before its pods
	// are ungated (default 500ms; KEP-2724 uses about 1s).
	// +optional
	UngateBatchPeriod *metav1.Duration `json:"ungateBatchPeriod,omitempty"`
}

// WaitForPodsReady configures how long the pods of an admitted workload
// may take to be ready (Kueue's waitForPodsReady). The agent keeps the
// workload's PodsReady condition: True once every admitted pod is ready or
// has succeeded. A workload not there within timeout of its admission, or
// within recoveryTimeout of a pod failing after that, is evicted (reason
// PodsReadyTimeout), its job suspended, and queued again after a backoff.
type WaitForPodsReady struct {
	// enable turns it on (default true, as in Kueue's configuration
	// v1beta2; false is Kueue's DisableWaitForPodsReady).
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// timeout is how long after its admission a workload's pods may take
	// to be ready (default 30m).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// blockAdmission admits nothing while an admitted workload's pods are
	// not all ready, so that workloads start one at a time (default
	// false).
	// +optional
	BlockAdmission *bool `json:"blockAdmission,omitempty"`
	// recoveryTimeout is how long the pods of a workload that was running
	// may take to be ready again after one failed (default: timeout; 0s
	// turns the check off).
	// +optional
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`
	// requeuingStrategy says when and how often an evicted workload is
	// queued again.
	// +optional
	RequeuingStrategy RequeuingStrategy `json:"requeuingStrategy,omitempty"`
}

// RequeuingStrategy is the backoff of a workload evicted for pods not
// ready: it waits about backoffBaseSeconds*2^(n-1) after its n-th
// eviction, at most backoffMaxSeconds, and is deactivated (spec.active
// false, reason RequeuingLimitExceeded) at the eviction that would exceed
// backoffLimitCount.
type RequeuingStrategy struct {
	// timestamp orders a requeued workload in its queue: Eviction (the
	// default) from its eviction, behind the workloads already waiting;
	// Creation from its creation, as before.
	// +optional
	Timestamp RequeuingTimestamp `json:"timestamp,omitempty"`
	// backoffLimitCount is how many times a workload may be requeued;
	// unset, without a limit.
	// +optional
	BackoffLimitCount *int32 `json:"backoffLimitCount,omitempty"`
	// backoffBaseSeconds is the first delay (default 60).
	// +optional
	BackoffBaseSeconds *int32 `json:"backoffBaseSeconds,omitempty"`
	// backoffMaxSeconds bounds the delay (default 3600).
	// +optional
	BackoffMaxSeconds *int32 `json:"backoffMaxSeconds,omitempty"`
}

// RequeuingTimestamp is the time a requeued workload is ordered by.
type RequeuingTimestamp string

const (
	// EvictionTimestamp orders it from its eviction.
	EvictionTimestamp RequeuingTimestamp = "Eviction"
	// CreationTimestamp orders it from its creation.
	CreationTimestamp RequeuingTimestamp = "Creation"
)

// HubConfiguration configures strata-hub.
//
// +kubebuilder:object:root=true
type HubConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// topologyAwareScheduling chooses the algorithms the hub plans with; keep
	// it equal to the agents' so hub and agent agree.
	// +optional
	TopologyAwareScheduling TopologyAwareScheduling `json:"topologyAwareScheduling,omitempty"`

	// dispatch configures how workloads are sent to worker clusters.
	// +optional
	Dispatch Dispatch `json:"dispatch,omitempty"`

	// origin identifies this hub on the workers: it labels every copy the
	// hub creates (strata.dev/origin), and the hub watches and collects only
	// copies with its own origin (default strata-hub).
	// +optional
	Origin string `json:"origin,omitempty"`

	// namespace is the hub's own namespace: the only one it reads the
	// kubeconfig Secrets of WorkerClusters from (default strata-system).
	// (The token Secrets of ManagedServiceAccounts are in their clusters'
	// namespaces; see managedCluster.)
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// clusterProfile configures WorkerClusters whose source is a
	// sigs.k8s.io/cluster-inventory-api ClusterProfile, and ManagedClusters
	// resolved through the ClusterProfile Open Cluster Management publishes.
	// +optional
	ClusterProfile ClusterProfile `json:"clusterProfile,omitempty"`

	// managedCluster configures WorkerClusters whose source is an Open
	// Cluster Management ManagedCluster.
	// +optional
	ManagedCluster ManagedCluster `json:"managedCluster,omitempty"`

	// fencing keeps a workload from running on two clusters when a worker
	// is cut off from the hub (docs/reliability.md).
	// +optional
	Fencing Fencing `json:"fencing,omitempty"`

	// kubeconfigs says what the kubeconfig of a WorkerCluster's
	// kubeConfigSecretRef may use beyond an https server with embedded
	// certificates and a token or embedded client certificate. Each is
	// refused unless allowed here: the kubeconfig comes from a Secret,
	// and what it names runs or is read inside the hub's container.
	// +optional
	Kubeconfigs KubeconfigPolicy `json:"kubeconfigs,omitempty"`

	// workerConnections tunes the hub's clients of its workers' API
	// servers, whatever gave their credentials.
	// +optional
	WorkerConnections WorkerConnections `json:"workerConnections,omitempty"`

	// events configures the events the hub records.
	// +optional
	Events Events `json:"events,omitempty"`

	// fairSharing, when set, turns on fair sharing between the hub's own
	// ClusterQueues of a cohort tree, as the agent's does between a
	// worker's (Kueue's fairSharing on a MultiKueue manager): pending hub
	// Workloads are dispatched by the tournament of shares of fleet quota,
	// and a hub queue takes back fleet quota by the strategies instead of
	// the classical rules. It says nothing of the workers' fair sharing,
	// which their agents' configurations set.
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`

	// admissionFairSharing, when set, keeps the usage of the hub's
	// LocalQueues (what their workloads admitted on workers hold) and lets
	// hub ClusterQueues whose admissionScope is
	// UsageBasedAdmissionFairSharing dispatch first the workloads of the
	// LocalQueue that consumed the least, as the agent's does (Kueue's
	// admissionFairSharing on a MultiKueue manager). It says nothing of
	// the workers', which their agents' configurations set.
	// +optional
	AdmissionFairSharing *AdmissionFairSharing `json:"admissionFairSharing,omitempty"`

	// metrics configures optional metrics (the hub's LocalQueues').
	// +optional
	Metrics Metrics `json:"metrics,omitempty"`
}

// Events configures the events recorded on the hot path.
type Events struct {
	// admissions is PerClusterQueue (default) or PerWorkload.
	// PerClusterQueue records one event on the ClusterQueue at most every
	// 30s, counting the workloads it admitted and naming the first five:
	// no API write per Job for a record each Workload's Admitted condition
	// already keeps. PerWorkload records an event on each Job when it is
	// admitted (Admitted on the hub, with the worker and why there; Started
	// on the agent), as Kueue does: one more API write per Job. Events
	// about refusals, evictions, preemptions and node failures are one per
	// workload either way.
	// +optional
	Admissions AdmissionEvents `json:"admissions,omitempty"`
}

// AdmissionEvents says how admissions are recorded as events.
type AdmissionEvents string

const (
	// AdmissionEventsPerClusterQueue records a digest per ClusterQueue.
	AdmissionEventsPerClusterQueue AdmissionEvents = "PerClusterQueue"
	// AdmissionEventsPerWorkload records an event per admitted workload.
	AdmissionEventsPerWorkload AdmissionEvents = "PerWorkload"
)

// Fencing configures how a worker cut off from the hub stops the hub's
// copies before the hub places them elsewhere. The hub renews a Lease per
// worker, in that worker (dispatch.workerNamespace, named
// strata-fence-<origin>); the worker's agent stops every copy of this hub
// (suspends it; its pods go, its capacity is free) once the Lease has not
// been renewed for fenceAfter, and admits none until it is renewed again.
// The hub places the workloads of a worker it cannot reach elsewhere only
// after replaceAfter, which must exceed fenceAfter by at least
// FencingClockMargin.
type Fencing struct {
	// mode is Enabled (default) or Disabled. Disabled: no Lease, no agent
	// ever stops a copy for the hub's silence, and the hub never places a
	// workload elsewhere while its worker is unreachable (it waits, for as
	// long as the partition lasts, and says so on the Workload).
	// +optional
	Mode FencingMode `json:"mode,omitempty"`
	// fenceAfter is how long a worker's agent runs the hub's copies without
	// the hub renewing its Lease there (default 10m).
	// +optional
	FenceAfter *metav1.Duration `json:"fenceAfter,omitempty"`
	// replaceAfter is how long after the hub last renewed the Lease of an
	// unreachable worker it places that worker's workloads elsewhere
	// (default 15m; at least fenceAfter + 1m).
	// +optional
	ReplaceAfter *metav1.Duration `json:"replaceAfter,omitempty"`
	// renewInterval is how often the hub renews each worker's Lease
	// (default fenceAfter / 5; at most fenceAfter / 3).
	// +optional
	RenewInterval *metav1.Duration `json:"renewInterval,omitempty"`
}

// FencingMode says whether fencing is on.
type FencingMode string

const (
	// FencingEnabled means agents stop the copies of a silent hub, and the hub
	// places the workloads of an unreachable worker elsewhere after
	// replaceAfter.
	FencingEnabled FencingMode = "Enabled"
	// FencingDisabled means nothing is stopped for the hub's silence, and
	// nothing is placed elsewhere while its worker is unreachable.
	FencingDisabled FencingMode = "Disabled"
)

// WorkerConnections tunes the hub's clients of its workers' API servers.
type WorkerConnections struct {
	// compression asks the workers' API servers to gzip their responses
	// and watch streams. Off by default, as kube-controller-manager and
	// kube-scheduler leave it off: the hub's streams are small (copies,
	// summaries), and gzip costs the workers' API servers and the hub CPU
	// for every event. Turn it on for workers behind a slow or metered
	// link.
	// +optional
	Compression bool `json:"compression,omitempty"`
}

// KubeconfigPolicy allows what worker kubeconfigs may use.
type KubeconfigPolicy struct {
	// allowExec lets kubeconfigs run exec credential plugins and auth
	// providers: commands in the hub's container.
	// +optional
	AllowExec bool `json:"allowExec,omitempty"`
	// allowFiles lets kubeconfigs name files of the hub's filesystem
	// (tokenFile, client-certificate, client-key, certificate-authority).
	// +optional
	AllowFiles bool `json:"allowFiles,omitempty"`
	// allowInsecure lets kubeconfigs skip TLS verification
	// (insecure-skip-tls-verify) or reach their server over plain http.
	// +optional
	AllowInsecure bool `json:"allowInsecure,omitempty"`
}

// ClusterProfile configures how the hub obtains credentials from
// ClusterProfiles.
type ClusterProfile struct {
	// accessProviders are the credential plugins the hub may run, by the
	// name a ClusterProfile's status.accessProviders lists them under; of
	// those a ClusterProfile offers, the first in this list is used.
	// Without any, ClusterProfile sources cannot connect.
	// +optional
	AccessProviders []AccessProvider `json:"accessProviders,omitempty"`
}

// AccessProvider is an entry of the cluster-inventory-api provider file
// (sigs.k8s.io/cluster-inventory-api/pkg/access), with the same fields.
type AccessProvider struct {
	// name of the provider in ClusterProfiles' status.accessProviders.
	Name string `json:"name"`
	// execConfig is the exec credential plugin, as in a kubeconfig:
	// command, args, env, apiVersion (default
	// client.authentication.k8s.io/v1), provideClusterInfo. It always runs
	// non-interactively.
	ExecConfig *clientcmdapi.ExecConfig `json:"execConfig"`
	// profileSourcedCLIArgsPolicy says whether the arguments a
	// ClusterProfile adds to the plugin's are appended (Append) or not
	// (Ignore, the default).
	// +optional
	ProfileSourcedCLIArgsPolicy access.ProfileSourcedCLIArgsPolicy `json:"profileSourcedCLIArgsPolicy,omitempty"`
	// profileSourcedEnvVarsPolicy says whether the environment variables a
	// ClusterProfile adds are used: AppendIfNotExists, Replace, or Ignore
	// (the default).
	// +optional
	ProfileSourcedEnvVarsPolicy access.ProfileSourcedEnvVarsPolicy `json:"profileSourcedEnvVarsPolicy,omitempty"`
}

// ManagedCluster configures how the hub reaches Open Cluster Management
// ManagedClusters that OCM publishes no usable ClusterProfile for: at
// spec.managedClusterClientConfigs, with the token of a
// ManagedServiceAccount.
type ManagedCluster struct {
	// serviceAccountName is the ManagedServiceAccount the hub authenticates
	// as. The managed-serviceaccount addon projects its token into the Secret
	// of the same name, key token, in the cluster's namespace on the hub;
	// the hub reads only that Secret (default strata-hub).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// clusterProfileNamespace is where OCM publishes the ClusterProfiles
	// the hub looks for first: the namespace a ManagedClusterSet is bound
	// to with a ManagedClusterSetBinding (default: the hub's namespace).
	// +optional
	ClusterProfileNamespace string `json:"clusterProfileNamespace,omitempty"`
}

// Dispatch configures dispatching.
type Dispatch struct {
	// admissionTimeout is how long a worker may take to admit a dispatched
	// workload before the hub removes the copy and places it elsewhere
	// (default 5m).
	// +optional
	AdmissionTimeout *metav1.Duration `json:"admissionTimeout,omitempty"`
	// pendingTimeout is how long a copy may wait on a worker whose agent
	// says it cannot admit it now (its Workload Pending: no room, quota,
	// behind other workloads) before the hub removes it and places it where
	// it fits now; that worker then gets no new copy of it for
	// rejectionBackoff (default 30s). admissionTimeout still bounds copies
	// the agent has said nothing about.
	// +optional
	PendingTimeout *metav1.Duration `json:"pendingTimeout,omitempty"`
	// summaryStaleAfter is the age after which a worker's summary is stale and
	// the worker receives no new workloads (default 2m).
	// +optional
	SummaryStaleAfter *metav1.Duration `json:"summaryStaleAfter,omitempty"`
	// workerNamespace is the namespace of the strata-agent chart on the
	// workers, where the hub renews its fencing Lease (default
	// strata-system). Summaries are cluster-scoped.
	// +optional
	WorkerNamespace string `json:"workerNamespace,omitempty"`
	// placementPolicy ranks the (cluster, flavor) candidates where a
	// workload fits: Compact (default) or Spread.
	// +optional
	PlacementPolicy PlacementPolicy `json:"placementPolicy,omitempty"`
	// rejectionBackoff is how long a worker that refused a workload (or did
	// not admit it in time) gets no new copy of that workload; doubled at
	// every further refusal of the same worker, up to 512 times this value
	// (default 1m).
	// +optional
	RejectionBackoff *metav1.Duration `json:"rejectionBackoff,omitempty"`
	// finishedRetention is how long a finished copy stays on its worker once
	// its final status is on the hub (default 10m).
	// +optional
	FinishedRetention *metav1.Duration `json:"finishedRetention,omitempty"`
	// orphanCheckInterval is how often the hub looks on every worker for
	// copies whose hub Workload no longer exists, and removes them (default
	// 1m).
	// +optional
	OrphanCheckInterval *metav1.Duration `json:"orphanCheckInterval,omitempty"`
	// summaryCopyInterval is how often, at most, the hub writes its copy
	// of each worker's capacity summary into the hub cluster: a
	// CapacitySummary "<worker>.<flavor>" labelled strata.dev/worker-cluster,
	// with the hub's in-flight reservations there, which kubectl strata
	// dashboard reads (default 10s). 0 stops the copies.
	// +optional
	SummaryCopyInterval *metav1.Duration `json:"summaryCopyInterval,omitempty"`
	// createNamespaces lets the hub create a copy's namespace on a worker
	// that does not have it; otherwise the worker refuses the copy, and the
	// WorkerCluster's Dispatching condition names the namespace.
	// +optional
	CreateNamespaces bool `json:"createNamespaces,omitempty"`
}

// PlacementPolicy is how the hub ranks the clusters and flavors where a
// workload fits.
type PlacementPolicy string

const (
	// Compact prefers the most compact placement (the lowest level at which
	// one domain holds every pod), then the best fit (the least room left
	// in that domain, which keeps large domains free for large workloads),
	// then the ClusterQueue's flavor order, then the cluster's name.
	Compact PlacementPolicy = "Compact"
	// Spread prefers the most compact placement too, then the most room
	// left in the chosen domain, which balances load over clusters.
	Spread PlacementPolicy = "Spread"
)
