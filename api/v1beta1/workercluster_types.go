package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkerClusterSpec says how the hub reaches a worker cluster: exactly one of
// a kubeconfig Secret, a ClusterProfile or an Open Cluster Management
// ManagedCluster.
//
// +kubebuilder:validation:XValidation:rule="(has(self.kubeConfigSecretRef) ? 1 : 0) + (has(self.clusterProfileRef) ? 1 : 0) + (has(self.managedClusterName) ? 1 : 0) == 1",message="exactly one of kubeConfigSecretRef, clusterProfileRef and managedClusterName must be set"
type WorkerClusterSpec struct {
	// kubeConfigSecretRef is a Secret holding a kubeconfig for the worker.
	//
	// +optional
	KubeConfigSecretRef *SecretKeyReference `json:"kubeConfigSecretRef,omitempty"`

	// clusterProfileRef is a sigs.k8s.io/cluster-inventory-api ClusterProfile
	// whose access providers give the credentials, through the plugins of
	// the hub configuration's clusterProfile.accessProviders.
	//
	// +optional
	ClusterProfileRef *ObjectReference `json:"clusterProfileRef,omitempty"`

	// managedClusterName is an Open Cluster Management ManagedCluster,
	// reached through the ClusterProfile OCM publishes for it, or at its
	// client config with the token of the hub's ManagedServiceAccount.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ManagedClusterName *string `json:"managedClusterName,omitempty"`

	// unschedulable cordons the worker: the hub dispatches no new workloads
	// to it; what runs there stays.
	//
	// +optional
	// +kubebuilder:default=false
	Unschedulable bool `json:"unschedulable,omitempty"`

	// localQueueName is the LocalQueue the hub's copies use on this worker,
	// in the hub Job's namespace. By default a copy uses the LocalQueue of
	// the same name as the hub Job's.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	LocalQueueName string `json:"localQueueName,omitempty"`

	// onboarding, when set, opts the worker in to the teams onboarded on
	// the hub: before it sends a copy there, the hub creates the copy's
	// namespace and the LocalQueue the copy uses in it (pointing at
	// onboarding.clusterQueue) when they do not exist, so that a namespace
	// and LocalQueue made on the hub are enough. It never changes or
	// deletes what exists; the worker's ClusterQueue and its
	// namespaceSelector still decide what runs. The agent chart's hub
	// identity needs hubAccess.onboarding.
	//
	// +optional
	Onboarding *WorkerOnboarding `json:"onboarding,omitempty"`
}

// WorkerOnboarding says how the hub onboards teams on a worker.
type WorkerOnboarding struct {
	// clusterQueue is the worker's ClusterQueue the LocalQueues the hub
	// creates there point at.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClusterQueue string `json:"clusterQueue"`
}

// SecretKeyReference names a key of a Secret.
type SecretKeyReference struct {
	// namespace of the Secret.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the Secret.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret's data; defaults to "kubeconfig".
	//
	// +optional
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ObjectReference names a namespaced object.
type ObjectReference struct {
	// namespace of the object.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the object.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// WorkerClusterStatus reports the connection to the worker.
type WorkerClusterStatus struct {
	// conditions: Connected says whether the hub can reach the worker with
	// the permissions it needs, with a reason when it cannot.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// summaries are the capacity summaries last read from the worker, by
	// flavor name; at most 256 of them (MaxWorkerSummaries: the hub places
	// on every summary it reads, listed here or not).
	//
	// +optional
	// +listType=map
	// +listMapKey=flavor
	// +kubebuilder:validation:MaxItems=256
	Summaries []WorkerSummaryStatus `json:"summaries,omitempty"`

	// workloads is the number of live copies the hub has on the worker.
	//
	// +optional
	Workloads int32 `json:"workloads"`

	// clusterID identifies the cluster the hub reached and dispatched to:
	// the UID of its kube-system namespace. A credential that later
	// reaches a cluster of another ID is refused (Connected=False,
	// ClusterChanged) until the WorkerCluster's
	// strata.dev/accept-cluster-id annotation names the new one; two
	// WorkerClusters never connect to the same cluster.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ClusterID string `json:"clusterID,omitempty"`

	// fenceAfterSeconds is the duration the hub's last renewal of its
	// fencing Lease on this worker that may have landed carried: its
	// agent stops the hub's copies that long after it. 0 when that
	// renewal carried none (fencing was Disabled); unset before the hub
	// renewed it. A hub restarted with other fencing settings, while
	// this worker does not answer, counts with it: it places the
	// worker's workloads elsewhere only once the agent has certainly
	// stopped them by the duration the agent last saw, and never while
	// that was none.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	FenceAfterSeconds *int64 `json:"fenceAfterSeconds,omitempty"`

	// clusterSwitch is the last time the WorkerCluster was made to stand
	// for another cluster (strata.dev/accept-cluster-id). The workloads
	// dispatched to the old cluster before it are placed again only
	// replaceAfter after the hub's last renewal of the old cluster's
	// fencing Lease; a hub that restarted since, and so does not know
	// that renewal, counts replaceAfter from its own start.
	//
	// +optional
	ClusterSwitch *ClusterSwitchStatus `json:"clusterSwitch,omitempty"`
}

// MaxWorkerSummaries is how many summaries a WorkerCluster's status lists.
const MaxWorkerSummaries = 256

// WorkerSummaryStatus is the hub's view of one of a worker's summaries.
type WorkerSummaryStatus struct {
	// flavor summarized.
	//
	// +required
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor"`

	// summaryGeneration last read.
	//
	// +optional
	SummaryGeneration int64 `json:"summaryGeneration,omitempty"`

	// observedTime of that summary.
	//
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`

	// free is the free capacity of the flavor's schedulable nodes on the
	// worker, in all, as that summary tells it.
	//
	// +optional
	Free corev1.ResourceList `json:"free,omitempty"`

	// capacity is the allocatable capacity of all of the flavor's nodes on
	// the worker, schedulable or not, as that summary tells it: what free
	// is out of.
	//
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// largestFree is, for each level above the host, the domain with the
	// most free of the summary's main resource (a GPU, else the first
	// extended resource, else cpu) and how much: where the largest job
	// of that level could go.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	LargestFree []DomainFree `json:"largestFree,omitempty"`
}

// DomainFree is the free capacity of one resource in one domain.
type DomainFree struct {
	// level is the node label key of the domain's level.
	//
	// +required
	// +kubebuilder:validation:MaxLength=316
	Level string `json:"level"`

	// domain is the domain's values from the top level down, joined by '/'.
	//
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Domain string `json:"domain"`

	// resource is the resource counted.
	//
	// +required
	Resource corev1.ResourceName `json:"resource"`

	// free is how much of it is free there.
	//
	// +required
	Free resource.Quantity `json:"free"`
}

// WorkerCluster condition types.
const (
	// WorkerClusterConnected is True when the hub reaches the worker with the
	// permissions it needs.
	WorkerClusterConnected = "Connected"
	// WorkerClusterSummariesFresh is True when every capacity summary of
	// the worker was observed within the hub's summaryStaleAfter.
	WorkerClusterSummariesFresh = "SummariesFresh"
	// WorkerClusterDispatching is False when the worker refused the hub's
	// last copy for a reason of the worker's (a missing LocalQueue or
	// namespace, a permission the hub's credential lacks), naming it.
	WorkerClusterDispatching = "Dispatching"
	// WorkerClusterFenced is True while the hub renews its fencing Lease on
	// the worker, and False, naming the error, while it cannot (the worker
	// then gets no new copies). Set only with fencing Enabled.
	WorkerClusterFenced = "Fenced"
)

// ClusterSwitchStatus is a change of the cluster a WorkerCluster stands
// for.
type ClusterSwitchStatus struct {
	// from is the ID of the cluster the hub dispatched to before.
	//
	// +required
	// +kubebuilder:validation:MaxLength=128
	From string `json:"from"`

	// to is the ID of the cluster accepted instead.
	//
	// +required
	// +kubebuilder:validation:MaxLength=128
	To string `json:"to"`

	// time is when the hub accepted it.
	//
	// +required
	Time metav1.Time `json:"time"`
}

// WorkerCluster is a worker cluster the hub may dispatch workloads to
// (hub only).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wc
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].status`
// +kubebuilder:printcolumn:name="Fresh",type=string,JSONPath=`.status.conditions[?(@.type=="SummariesFresh")].status`
// +kubebuilder:printcolumn:name="Cordoned",type=boolean,JSONPath=`.spec.unschedulable`
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.workloads`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].reason`
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.status.clusterID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkerCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WorkerClusterSpec `json:"spec"`
	// +optional
	Status WorkerClusterStatus `json:"status,omitempty"`
}

// WorkerClusterList is a list of WorkerCluster.
//
// +kubebuilder:object:root=true
type WorkerClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerCluster `json:"items"`
}
