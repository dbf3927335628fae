package agent

// The permissions strata-agent needs on its worker cluster; `make manifests`
// turns them into the chart's ClusterRole, with those on the workload kinds,
// which each kind's package under pkg/jobs gives (roleName=strata-agent).
//
// +kubebuilder:rbac:groups=strata.dev,resources=topologies;resourceflavors;clusterqueues;localqueues;cohorts;admissionchecks;provisioningrequestconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=admissionchecks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=topologies;resourceflavors;clusterqueues,verbs=update;patch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=provisioningrequests,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=strata.dev,resources=clusterqueues/status;localqueues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=capacitysummaries,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=capacitysummaries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes;namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
