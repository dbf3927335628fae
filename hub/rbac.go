package hub

// The permissions strata-hub needs on the hub cluster; `make manifests`
// turns them into the chart's ClusterRole. What the hub may do on worker
// clusters is granted there, through the credential it is given.
//
// +kubebuilder:rbac:groups=strata.dev,resources=topologies;resourceflavors;clusterqueues;cohorts;admissionchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=clusterqueues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=clusterqueues,verbs=update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=localqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=localqueues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
