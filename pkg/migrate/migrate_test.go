package migrate

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	strata "strata.dev/strata/api/v1beta1"
)

func objects(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func tm(kind string) metav1.TypeMeta { return typeMeta(kind) }

var opts = Options{HubNamespace: "strata-system", ClusterProfileNamespace: "fleet"}

func TestConvert(t *testing.T) {
	cases := []struct {
		name      string
		in        []string
		want      []client.Object
		wantNotes []string
	}{
		{
			name: "Topology (v1beta1 and v1alpha1)",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: default}
spec:
  levels: [{nodeLabel: cloud.provider.com/topology-block}, {nodeLabel: kubernetes.io/hostname}]`},
			want: []client.Object{&strata.Topology{TypeMeta: tm("Topology"), ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: strata.TopologySpec{Levels: []strata.TopologyLevel{{NodeLabel: "cloud.provider.com/topology-block"}, {NodeLabel: "kubernetes.io/hostname"}}}}},
		},
		{
			name: "ResourceFlavor, and one without a topology",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: tas-gpu
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", team: ml}
spec:
  nodeLabels: {cloud.provider.com/node-group: tas-gpu}
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  topologyName: default`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: plain}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: all-nodes}
spec: {topologyName: default}`},
			want: []client.Object{
				&strata.ResourceFlavor{TypeMeta: tm("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: "all-nodes"}, Spec: strata.ResourceFlavorSpec{TopologyName: ptr.To("default")}},
				&strata.ResourceFlavor{TypeMeta: tm("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
				&strata.ResourceFlavor{TypeMeta: tm("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: "tas-gpu", Annotations: map[string]string{"team": "ml"}},
					Spec: strata.ResourceFlavorSpec{NodeLabels: map[string]string{"cloud.provider.com/node-group": "tas-gpu"}, TopologyName: ptr.To("default"),
						Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
			},
			wantNotes: []string{
				"ResourceFlavor plain: spec.topologyName: not set: Strata admits only on topology-aware flavors, so ClusterQueues cannot admit on this one until it names a Topology",
				"to do: ResourceFlavor all-nodes: spec.nodeLabels: Strata needs nodeLabels beside topologyName (they select the topology's nodes): add the labels of this flavor's nodes, or the API server refuses the flavor",
			},
		},
		{
			name: "ClusterQueue with cohort, limits, preemption, fungibility, fair-sharing weight; what Strata lacks is noted",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohort: research
  queueingStrategy: StrictFIFO
  stopPolicy: Hold
  fairSharing: {weight: "2"}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: tas-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4, lendingLimit: 2}]
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt}`},
			want: []client.Object{&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: strata.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{}, Cohort: "research", QueueingStrategy: strata.StrictFIFO,
				ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}, Flavors: []strata.FlavorQuotas{{Name: "tas-gpu",
					Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8"), BorrowingLimit: ptr.To(resource.MustParse("4")), LendingLimit: ptr.To(resource.MustParse("2"))}}}}}},
				Preemption: &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny,
					BorrowWithinCohort: &strata.BorrowWithinCohort{Policy: strata.BorrowWithinCohortLowerPriority, MaxPriorityThreshold: ptr.To[int32](100)}},
				FlavorFungibility: &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor, WhenCanPreempt: strata.FungibilityPreempt},
				StopPolicy:        ptr.To(strata.StopHold),
				FairSharing:       &strata.FairSharing{Weight: ptr.To(resource.MustParse("2"))},
			}}},
			wantNotes: []string{
				"ClusterQueue team-a: spec.fairSharing: weight 2 carried over: it counts where the agent's configuration sets fairSharing (Kueue's Configuration fairSharing; the strata-agent chart's config.fairSharing)",
				"ClusterQueue team-a: spec.stopPolicy: carried over: the Strata queue is stopped too (Hold); set it to None when it should admit",
			},
		},
		{
			name: "ClusterQueue of Kueue v1beta2: cohortName and MayStopSearch",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}`},
			want: []client.Object{&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "team-b"}, Spec: strata.ClusterQueueSpec{
				Cohort: "research",
				ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
					Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("4")}}}}}},
				FlavorFungibility: &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityPreempt},
			}}},
		},
		{
			name: "ClusterQueue of two resource groups, a fungibility preference and fields Strata lacks: each noted",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-c}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: cpu-pool, resources: [{name: cpu, nominalQuota: 16}]}]
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8, futureLimit: 2}]}]
  preemption: {withinClusterQueue: LowerPriority, futurePolicy: Any}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}`},
			want: []client.Object{&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "team-c"}, Spec: strata.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				ResourceGroups: []strata.ResourceGroup{
					{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "cpu-pool", Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("16")}}}}},
					{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}, Flavors: []strata.FlavorQuotas{{Name: "a100", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}},
				},
				Preemption:        &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority},
				FlavorFungibility: &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor, WhenCanPreempt: strata.FungibilityTryNextFlavor},
			}}},
			wantNotes: []string{
				"ClusterQueue team-c: spec.flavorFungibility.preference: PreemptionOverBorrowing not carried over: Strata takes a flavor where the workload fits by borrowing before one where it must preempt (Kueue's BorrowingOverPreemption), so it may take another flavor than Kueue did",
				"ClusterQueue team-c: spec.preemption.futurePolicy: Strata has no such field: not carried over",
				"ClusterQueue team-c: spec.resourceGroups[1].flavors[0].resources[0].futureLimit: Strata has no such field: not carried over",
				"to do: ClusterQueue team-c: spec.resourceGroups: 2 resource groups: Strata admits a pod set on one flavor for all its resources, where Kueue picks a flavor per group, so a pod set asking for resources of two groups (cpu of one flavor and GPUs of another, say) is Inadmissible, and a group of pods alone is not enforced; give every flavor quota for all the resources its workloads ask for, in one group, or keep such workloads on Kueue",
			},
		},
		{
			name: "LocalQueue and WorkloadPriorityClass",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: team-a, namespace: ml}
spec: {clusterQueue: team-a, stopPolicy: Hold}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: urgent`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: default}
value: 10`},
			want: []client.Object{
				&strata.WorkloadPriorityClass{TypeMeta: tm("WorkloadPriorityClass"), ObjectMeta: metav1.ObjectMeta{Name: "default"}, Value: 10},
				&strata.WorkloadPriorityClass{TypeMeta: tm("WorkloadPriorityClass"), ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000, Description: "urgent"},
				&strata.LocalQueue{TypeMeta: tm("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ml"}, Spec: strata.LocalQueueSpec{ClusterQueue: "team-a", StopPolicy: ptr.To(strata.StopHold)}},
			},
			wantNotes: []string{
				"LocalQueue ml/team-a: spec.stopPolicy: carried over: the Strata queue is stopped too (Hold); set it to None when it should admit",
				"WorkloadPriorityClass default: the default class, as in Kueue (WorkloadPriorityClass defaulting): the charts' admission policies label a job created without a priority-class label strata.dev/priority-class: default",
			},
		},
		{
			name: "a worker's admission checks: per flavor, with parameters",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: gpus}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: spot, resources: [{name: cpu, nominalQuota: 8}]}]
  admissionChecksStrategy:
    admissionChecks:
    - {name: budget}
    - {name: capacity, onFlavors: [spot]}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: budget}
spec:
  controllerName: example.com/budget
  retryDelayMinutes: 5
  parameters: {apiGroup: example.com, kind: BudgetConfig, name: team-a}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: capacity}
spec:
  controllerName: example.com/capacity`},
			want: []client.Object{
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "gpus"}, Spec: strata.ClusterQueueSpec{
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "spot", Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("8")}}}}}},
					AdmissionChecksStrategy: &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{
						{Name: "budget"}, {Name: "capacity", OnFlavors: []string{"spot"}}}},
				}},
				&strata.AdmissionCheck{TypeMeta: tm("AdmissionCheck"), ObjectMeta: metav1.ObjectMeta{Name: "budget"}, Spec: strata.AdmissionCheckSpec{
					ControllerName: "example.com/budget", Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "example.com", Kind: "BudgetConfig", Name: "team-a"}}},
				&strata.AdmissionCheck{TypeMeta: tm("AdmissionCheck"), ObjectMeta: metav1.ObjectMeta{Name: "capacity"}, Spec: strata.AdmissionCheckSpec{ControllerName: "example.com/capacity"}},
			},
			wantNotes: []string{
				"AdmissionCheck budget: spec.retryDelayMinutes: not carried over (deprecated in Kueue): a check that asks to retry queues the workload again at once",
				"AdmissionCheck budget: spec.controllerName: carried over: the controller example.com/budget must set the check's states on strata.dev Workloads (status.admissionChecks) and mark it Active",
				"AdmissionCheck capacity: spec.controllerName: carried over: the controller example.com/capacity must set the check's states on strata.dev Workloads (status.admissionChecks) and mark it Active",
				"ClusterQueue gpus: spec.admissionChecks: budget, capacity carried over: on a worker the agent reserves quota and admits once each check is Ready (on a hub, before it dispatches)",
			},
		},
		{
			name: "admission fair sharing: a ClusterQueue's admissionScope and a LocalQueue's weight",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: ml}
spec: {clusterQueue: shared, fairSharing: {weight: "2"}}`},
			want: []client.Object{
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: strata.ClusterQueueSpec{
					AdmissionScope: &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing},
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f", Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("8")}}}}}},
				}},
				&strata.LocalQueue{TypeMeta: tm("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ml"}, Spec: strata.LocalQueueSpec{
					ClusterQueue: "shared", FairSharing: &strata.FairSharing{Weight: ptr.To(resource.MustParse("2"))}}},
			},
			wantNotes: []string{
				"ClusterQueue shared: spec.admissionScope: carried over: the queue orders its workloads by their LocalQueues' usage where the agent's configuration sets admissionFairSharing (Kueue's Configuration admissionFairSharing; the strata-agent chart's config.admissionFairSharing)",
				"LocalQueue ml/team-a: spec.fairSharing: weight 2 carried over: it counts under admission fair sharing (its ClusterQueue's admissionScope, and admissionFairSharing in the agent's configuration)",
			},
		},
		{
			name: "a v1beta1 Cohort's parent; a LocalQueue named default; a check not in the input; a flavor's nodeTaints carried over",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: team-a}
spec: {parent: root}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: qa}
spec:
  cohort: team-a
  admissionChecks: [mk]
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: default, namespace: ml}
spec: {clusterQueue: qa}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeLabels: {pool: a}
  topologyName: t
  nodeTaints: [{key: gpu, value: "true", effect: NoSchedule}]`},
			want: []client.Object{
				&strata.ResourceFlavor{TypeMeta: tm("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: strata.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "a"},
					TopologyName: ptr.To("t"), NodeTaints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
				&strata.Cohort{TypeMeta: tm("Cohort"), ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: strata.CohortSpec{ParentName: "root"}},
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "qa"}, Spec: strata.ClusterQueueSpec{Cohort: "team-a",
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
						Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("1")}}}}}}}},
				&strata.LocalQueue{TypeMeta: tm("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ml"}, Spec: strata.LocalQueueSpec{ClusterQueue: "qa"}},
			},
			wantNotes: []string{
				"to do: ClusterQueue qa: spec.admissionChecks: AdmissionCheck mk is not in the input: pass it (and its MultiKueueConfig) to migrate; if it is MultiKueue's, its clusters become the queue's clusterSelector, and without one the hub queue dispatches to every worker",
				"LocalQueue ml/default: the namespace's default queue, as in Kueue (LocalQueue defaulting): the charts' admission policies label a job of namespace ml created without a queue label strata.dev/queue-name: default",
			},
		},
		{
			name: "jobs: both queue labels, a kind Strata does not run, an annotation Strata reads",
			in: []string{`apiVersion: batch/v1
kind: Job
metadata:
  name: both
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: q, strata.dev/queue-name: q}
  annotations: {kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold: "1"}`, `apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: ray
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: q}`, `apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: old-mpi
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: q}`, `apiVersion: batch/v1
kind: Job
metadata:
  name: annotated
  namespace: ml
  annotations: {kueue.x-k8s.io/queue-name: q}`},
			wantNotes: []string{
				"to do: Job ml/both: metadata.labels.kueue.x-k8s.io/queue-name: remove it: the job has strata.dev/queue-name too, and Kueue, while it runs beside Strata, would manage it as well",
				"RayJob ml/ray: metadata.labels.kueue.x-k8s.io/queue-name: Strata does not run RayJob (ray.io/v1): keep it on Kueue (Strata runs batch/v1 Jobs, jobset.x-k8s.io/v1alpha2 JobSets, kubeflow.org/v2beta1 MPIJobs and leaderworkerset.x-k8s.io/v1 LeaderWorkerSets)",
				"MPIJob ml/old-mpi: metadata.labels.kueue.x-k8s.io/queue-name: Strata does not run MPIJob (kubeflow.org/v1): keep it on Kueue (Strata runs batch/v1 Jobs, jobset.x-k8s.io/v1alpha2 JobSets, kubeflow.org/v2beta1 MPIJobs and leaderworkerset.x-k8s.io/v1 LeaderWorkerSets)",
				"to do: Job ml/annotated: metadata.annotations.kueue.x-k8s.io/queue-name: label the job strata.dev/queue-name: q instead (Strata reads its own label; migrate converts Kueue's objects, not jobs)",
			},
		},
		{
			name: "stopPolicy None is Kueue's default: nothing is lost",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: ml}
spec: {clusterQueue: cq, stopPolicy: None}`},
			want: []client.Object{&strata.LocalQueue{TypeMeta: tm("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ml"}, Spec: strata.LocalQueueSpec{ClusterQueue: "cq"}}},
		},
		{
			name: "MultiKueue: clusters become WorkerClusters, the check a clusterSelector",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: hub-q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 100}]}]
  admissionChecks: [sample-multikueue, provisioning]`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: sample-multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: multikueue-test}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: provisioning}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueConfig
metadata: {name: multikueue-test}
spec: {clusters: [worker1, worker2]}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata: {name: worker1}
spec:
  kubeConfig: {locationType: Secret, location: worker1-secret}`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker2}
spec:
  clusterSource: {clusterProfileRef: {name: worker2-profile}}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata: {name: on-disk}
spec:
  kubeConfig: {locationType: Path, location: /etc/kueue/w3.kubeconfig}`},
			want: []client.Object{
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "hub-q"}, Spec: strata.ClusterQueueSpec{
					NamespaceSelector: &metav1.LabelSelector{},
					ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{ConfigLabelPrefix + "multikueue-test": "true"}},
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
						Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("100")}}}}}},
					AdmissionChecks: []string{"provisioning"},
				}},
				&strata.WorkerCluster{TypeMeta: tm("WorkerCluster"), ObjectMeta: metav1.ObjectMeta{Name: "on-disk"}},
				&strata.AdmissionCheck{TypeMeta: tm("AdmissionCheck"), ObjectMeta: metav1.ObjectMeta{Name: "provisioning"},
					Spec: strata.AdmissionCheckSpec{ControllerName: "kueue.x-k8s.io/provisioning-request"}},
				&strata.WorkerCluster{TypeMeta: tm("WorkerCluster"), ObjectMeta: metav1.ObjectMeta{Name: "worker1", Labels: map[string]string{ConfigLabelPrefix + "multikueue-test": "true"}},
					Spec: strata.WorkerClusterSpec{KubeConfigSecretRef: &strata.SecretKeyReference{Namespace: "strata-system", Name: "worker1-secret", Key: "kubeconfig"}}},
				&strata.WorkerCluster{TypeMeta: tm("WorkerCluster"), ObjectMeta: metav1.ObjectMeta{Name: "worker2", Labels: map[string]string{ConfigLabelPrefix + "multikueue-test": "true"}},
					Spec: strata.WorkerClusterSpec{ClusterProfileRef: &strata.ObjectReference{Namespace: "fleet", Name: "worker2-profile"}}},
			},
			wantNotes: []string{
				"AdmissionCheck provisioning: spec.controllerName: Kueue's ProvisioningRequest check: the agent runs it (with KEP-2724's delayed topology assignment); its ProvisioningRequestConfig must be migrated too, and the worker must serve the cluster autoscaler's ProvisioningRequest CRD",
				"MultiKueueConfig multikueue-test: spec.clusters: their order is not kept: a Strata hub places each job on the worker where it fits best, not on the first listed",
				"ClusterQueue hub-q: spec.admissionChecks: provisioning carried over: on a worker the agent reserves quota and admits once each check is Ready (on a hub, before it dispatches)",
				"to do: MultiKueueCluster worker1: spec.kubeConfig: copy Secret worker1-secret (key kubeconfig) from Kueue's namespace to strata-system, where strata-hub reads it; the hub's identity on the worker needs the permissions in docs/admin-guide.md, which MultiKueue's does not all have",
				"to do: MultiKueueCluster on-disk: spec.kubeConfig: a kubeconfig file on Kueue's disk (/etc/kueue/w3.kubeconfig) cannot be carried over: put it in a Secret in namespace strata-system (key kubeconfig) and set spec.kubeConfigSecretRef, or the API server refuses the WorkerCluster",
			},
		},
		{
			name: "ProvisioningRequest check: its config carried over, the parameters pointed at Strata's kind",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: prov}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: prov-config}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ProvisioningRequestConfig
metadata: {name: prov-config}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  parameters: {ValidUntilSeconds: "60"}
  managedResources: [nvidia.com/gpu]
  retryStrategy: {backoffLimitCount: 2, backoffBaseSeconds: 30, backoffMaxSeconds: 600}
  podSetUpdates:
    nodeSelector: [{key: cloud.example.com/node-group, valueFromProvisioningClassDetail: nodeGroup}]
  podSetMergePolicy: IdenticalPodTemplates`},
			want: []client.Object{
				&strata.AdmissionCheck{TypeMeta: tm("AdmissionCheck"), ObjectMeta: metav1.ObjectMeta{Name: "prov"},
					Spec: strata.AdmissionCheckSpec{ControllerName: "kueue.x-k8s.io/provisioning-request",
						Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "strata.dev", Kind: "ProvisioningRequestConfig", Name: "prov-config"}}},
				&strata.ProvisioningRequestConfig{TypeMeta: tm("ProvisioningRequestConfig"), ObjectMeta: metav1.ObjectMeta{Name: "prov-config"},
					Spec: strata.ProvisioningRequestConfigSpec{
						ProvisioningClassName: "check-capacity.autoscaling.x-k8s.io",
						Parameters:            map[string]string{"ValidUntilSeconds": "60"},
						ManagedResources:      []corev1.ResourceName{"nvidia.com/gpu"},
						RetryStrategy:         &strata.ProvisioningRequestRetryStrategy{BackoffLimitCount: ptr.To[int32](2), BackoffBaseSeconds: ptr.To[int32](30), BackoffMaxSeconds: ptr.To[int32](600)},
						PodSetUpdates: &strata.ProvisioningRequestPodSetUpdates{NodeSelector: []strata.ProvisioningRequestPodSetUpdatesNodeSelector{
							{Key: "cloud.example.com/node-group", ValueFromProvisioningClassDetail: "nodeGroup"}}},
						PodSetMergePolicy: ptr.To(strata.IdenticalPodTemplates),
					}},
			},
			wantNotes: []string{
				"AdmissionCheck prov: spec.controllerName: Kueue's ProvisioningRequest check: the agent runs it (with KEP-2724's delayed topology assignment); its ProvisioningRequestConfig must be migrated too, and the worker must serve the cluster autoscaler's ProvisioningRequest CRD",
			},
		},
		{
			name: "what is not a queue object: Workload, other groups",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: job-x, namespace: ml}`, `apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ml}`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: odd}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]
  someNewField: x`},
			want: []client.Object{&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "odd"}, Spec: strata.ClusterQueueSpec{
				ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
					Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("1")}}}}}},
			}}},
			wantNotes: []string{
				"Workload ml/job-x: Workloads are not migrated: Strata creates one for each job; run the job through Strata's queue label instead",
				"ConfigMap ml/c: not a Kueue object (v1): migrate reads kueue.x-k8s.io objects only",
				"ClusterQueue odd: spec.someNewField: Strata has no such field",
			},
		},
		{
			name: "hierarchical cohorts carried over with their quota and weight; a queue without quota, a LocalQueue without a ClusterQueue: to do",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team-a}
spec: {parentName: root, fairSharing: {weight: 2}}`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: root}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8, lendingLimit: 2}]}]`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: qa}
spec:
  cohortName: team-a
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: qb}
spec: {cohortName: root}`, `apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {}`},
			want: []client.Object{
				&strata.Cohort{TypeMeta: tm("Cohort"), ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: strata.CohortSpec{
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
						Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("8"), LendingLimit: ptr.To(resource.MustParse("2"))}}}}}}}},
				&strata.Cohort{TypeMeta: tm("Cohort"), ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: strata.CohortSpec{ParentName: "root",
					FairSharing: &strata.FairSharing{Weight: ptr.To(resource.MustParse("2"))}}},
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "qa"}, Spec: strata.ClusterQueueSpec{Cohort: "team-a",
					ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"}, Flavors: []strata.FlavorQuotas{{Name: "f",
						Resources: []strata.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("1")}}}}}}}},
				&strata.ClusterQueue{TypeMeta: tm("ClusterQueue"), ObjectMeta: metav1.ObjectMeta{Name: "qb"}, Spec: strata.ClusterQueueSpec{Cohort: "root"}},
				&strata.LocalQueue{TypeMeta: tm("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: "ml"}},
			},
			wantNotes: []string{
				"Cohort team-a: spec.fairSharing: weight 2 carried over: it counts where the agent's configuration sets fairSharing (Kueue's Configuration fairSharing; the strata-agent chart's config.fairSharing)",
				"to do: ClusterQueue qb: spec.resourceGroups: Kueue allows a ClusterQueue without quota; Strata needs resourceGroups: give it the quota it should have, or the API server refuses it (a nominalQuota of 0 for each resource on each flavor it uses borrows all of it from cohort root, as Kueue does)",
				"to do: LocalQueue ml/lq: spec.clusterQueue: not set (Kueue allows it): name the ClusterQueue this LocalQueue leads to, or the API server refuses it",
			},
		},
		{
			name: "a MultiKueueConfig whose name is no label name, its other fields; a job queued by Kueue",
			in: []string{`apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueConfig
metadata: {name: gpu-training-clusters-us-east-and-us-west-production-configuration}
spec: {clusters: [west, east], quotaManagement: Automated}`, `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: team-a, kueue.x-k8s.io/priority-class: high, kueue.x-k8s.io/max-exec-time-seconds: "600"}
  annotations: {kueue.x-k8s.io/max-exec-time-seconds: "600", kueue.x-k8s.io/job-min-parallelism: "2"}`},
			wantNotes: []string{
				"MultiKueueConfig gpu-training-clusters-us-east-and-us-west-production-configuration: metadata.name: not a valid label name (name part must be no more than 63 bytes): its WorkerClusters and ClusterQueues use label multikueue-config.strata.dev/gpu-training-clusters-us-east-and-us-west-production-c-7aa2a6cf instead",
				"MultiKueueConfig gpu-training-clusters-us-east-and-us-west-production-configuration: spec.clusters: their order is not kept: a Strata hub places each job on the worker where it fits best, not on the first listed",
				"MultiKueueConfig gpu-training-clusters-us-east-and-us-west-production-configuration: spec.quotaManagement: a Strata hub keeps the quota itself (its ClusterQueues); the workers' quotas are their own",
				"to do: Job ml/train: metadata.labels.kueue.x-k8s.io/queue-name: replace it with strata.dev/queue-name: team-a (Strata reads its own label; a job with both would be managed by Kueue and Strata; migrate converts Kueue's objects, not jobs)",
				"Job ml/train: metadata.annotations.kueue.x-k8s.io/max-exec-time-seconds: Kueue's annotation; Strata does not read it",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Convert(objects(t, tc.in...), opts)
			if diff := cmp.Diff(tc.want, res.Objects); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			var notes []string
			for _, n := range res.Notes {
				s := n.String()
				if n.ToDo {
					s = "to do: " + s
				}
				notes = append(notes, s)
			}
			if diff := cmp.Diff(tc.wantNotes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConvertLimits: a Kueue ClusterQueue whose lists are longer than
// Strata's API allows is a to do, not an object the API server refuses
// without a word.
func TestConvertLimits(t *testing.T) {
	var flavors []any
	for i := range 17 {
		flavors = append(flavors, map[string]any{"name": fmt.Sprintf("f%d", i), "resources": []any{map[string]any{"name": "cpu", "nominalQuota": "1"}}})
	}
	cq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": map[string]any{"name": "wide"},
		"spec": map[string]any{"resourceGroups": []any{map[string]any{"coveredResources": []any{"cpu"}, "flavors": flavors}}}}}
	res := Convert([]*unstructured.Unstructured{cq}, opts)
	var notes []string
	for _, n := range res.Notes {
		notes = append(notes, fmt.Sprintf("%v %s", n.ToDo, n))
	}
	want := []string{"true ClusterQueue wide: spec.resourceGroups[0].flavors: 17 items, more than the 16 Strata allows: split the queue or trim the list, or the API server refuses it"}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}
