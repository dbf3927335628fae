// Package testutil has chainable builders for Strata and Kubernetes test
// objects: MakeWorkload("w", "ns").PodSets(...).Obj().
package testutil

import (
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// TopologyWrapper builds a Topology.
type TopologyWrapper struct{ strata.Topology }

// MakeTopology starts a Topology with the given levels, highest first.
func MakeTopology(name string, levels ...string) *TopologyWrapper {
	w := &TopologyWrapper{strata.Topology{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	for _, l := range levels {
		w.Spec.Levels = append(w.Spec.Levels, strata.TopologyLevel{NodeLabel: l})
	}
	return w
}

// Obj returns the Topology.
func (w *TopologyWrapper) Obj() *strata.Topology { return &w.Topology }

// ResourceFlavorWrapper builds a ResourceFlavor.
type ResourceFlavorWrapper struct{ strata.ResourceFlavor }

// MakeResourceFlavor starts a ResourceFlavor.
func MakeResourceFlavor(name string) *ResourceFlavorWrapper {
	return &ResourceFlavorWrapper{strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// NodeLabel adds a node label.
func (w *ResourceFlavorWrapper) NodeLabel(k, v string) *ResourceFlavorWrapper {
	if w.Spec.NodeLabels == nil {
		w.Spec.NodeLabels = map[string]string{}
	}
	w.Spec.NodeLabels[k] = v
	return w
}

// TopologyName sets the topology.
func (w *ResourceFlavorWrapper) TopologyName(t string) *ResourceFlavorWrapper {
	w.Spec.TopologyName = &t
	return w
}

// Obj returns the ResourceFlavor.
func (w *ResourceFlavorWrapper) Obj() *strata.ResourceFlavor { return &w.ResourceFlavor }

// ClusterQueueWrapper builds a ClusterQueue.
type ClusterQueueWrapper struct{ strata.ClusterQueue }

// MakeClusterQueue starts a ClusterQueue open to every namespace.
func MakeClusterQueue(name string) *ClusterQueueWrapper {
	return &ClusterQueueWrapper{strata.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       strata.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}},
	}}
}

// Flavor appends a flavor with optional quotas as name/quantity pairs.
func (w *ClusterQueueWrapper) Flavor(name string, quotas ...string) *ClusterQueueWrapper {
	fq := strata.FlavorQuotas{Name: name}
	for i := 0; i+1 < len(quotas); i += 2 {
		fq.Resources = append(fq.Resources, strata.ResourceQuota{
			Name: corev1.ResourceName(quotas[i]), NominalQuota: resource.MustParse(quotas[i+1]),
		})
	}
	w.Spec.Flavors = append(w.Spec.Flavors, fq)
	return w
}

// ResourceGroup appends a resource group covering resources, with flavors
// added by GroupFlavor.
func (w *ClusterQueueWrapper) ResourceGroup(resources ...string) *ClusterQueueWrapper {
	g := strata.ResourceGroup{}
	for _, r := range resources {
		g.CoveredResources = append(g.CoveredResources, corev1.ResourceName(r))
	}
	w.Spec.ResourceGroups = append(w.Spec.ResourceGroups, g)
	return w
}

// GroupFlavor appends to the last resource group a flavor with the nominal
// quota of each covered resource, in order.
func (w *ClusterQueueWrapper) GroupFlavor(name string, nominal ...string) *ClusterQueueWrapper {
	g := &w.Spec.ResourceGroups[len(w.Spec.ResourceGroups)-1]
	fq := strata.FlavorQuotas{Name: name}
	for i, r := range g.CoveredResources {
		fq.Resources = append(fq.Resources, strata.ResourceQuota{Name: r, NominalQuota: resource.MustParse(nominal[i])})
	}
	g.Flavors = append(g.Flavors, fq)
	return w
}

// Limits sets the borrowing and lending limits ("" for none) of a
// resource on the last flavor of the last resource group.
func (w *ClusterQueueWrapper) Limits(res, borrowing, lending string) *ClusterQueueWrapper {
	g := &w.Spec.ResourceGroups[len(w.Spec.ResourceGroups)-1]
	fq := &g.Flavors[len(g.Flavors)-1]
	for i := range fq.Resources {
		if fq.Resources[i].Name != corev1.ResourceName(res) {
			continue
		}
		if borrowing != "" {
			fq.Resources[i].BorrowingLimit = ptr.To(resource.MustParse(borrowing))
		}
		if lending != "" {
			fq.Resources[i].LendingLimit = ptr.To(resource.MustParse(lending))
		}
	}
	return w
}

// Cohort sets the cohort.
func (w *ClusterQueueWrapper) Cohort(name string) *ClusterQueueWrapper {
	w.Spec.Cohort = name
	return w
}

// Preemption sets the preemption policies.
func (w *ClusterQueueWrapper) Preemption(p strata.ClusterQueuePreemption) *ClusterQueueWrapper {
	w.Spec.Preemption = &p
	return w
}

// Obj returns the ClusterQueue.
func (w *ClusterQueueWrapper) Obj() *strata.ClusterQueue { return &w.ClusterQueue }

// MakeWorkloadPriorityClass returns a WorkloadPriorityClass.
func MakeWorkloadPriorityClass(name string, value int32) *strata.WorkloadPriorityClass {
	return &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
}

// MakeLocalQueue returns a LocalQueue in namespace ns pointing at
// ClusterQueue cq.
func MakeLocalQueue(name, ns, cq string) *strata.LocalQueue {
	return &strata.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       strata.LocalQueueSpec{ClusterQueue: cq},
	}
}

// WorkloadWrapper builds a Workload.
type WorkloadWrapper struct{ strata.Workload }

// MakeWorkload starts a Workload in queue "default".
func MakeWorkload(name, ns string) *WorkloadWrapper {
	return &WorkloadWrapper{strata.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       strata.WorkloadSpec{QueueName: "default"},
	}}
}

// Queue sets the queue.
func (w *WorkloadWrapper) Queue(q string) *WorkloadWrapper {
	w.Spec.QueueName = q
	return w
}

// PodSets appends pod sets.
func (w *WorkloadWrapper) PodSets(ps ...strata.PodSet) *WorkloadWrapper {
	w.Spec.PodSets = append(w.Spec.PodSets, ps...)
	return w
}

// Admission sets status.admission.
func (w *WorkloadWrapper) Admission(a *strata.Admission) *WorkloadWrapper {
	w.Status.Admission = a
	return w
}

// Obj returns the Workload.
func (w *WorkloadWrapper) Obj() *strata.Workload { return &w.Workload }

// PodSetWrapper builds a PodSet.
type PodSetWrapper struct{ strata.PodSet }

// MakePodSet starts a pod set of count pods with one container requesting
// the given resources as name/quantity pairs.
func MakePodSet(name string, count int32, requests ...string) *PodSetWrapper {
	rl := corev1.ResourceList{}
	for i := 0; i+1 < len(requests); i += 2 {
		rl[corev1.ResourceName(requests[i])] = resource.MustParse(requests[i+1])
	}
	return &PodSetWrapper{strata.PodSet{
		Name:  name,
		Count: count,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl},
			}},
		}},
	}}
}

func (w *PodSetWrapper) request() *strata.PodSetTopologyRequest {
	if w.TopologyRequest == nil {
		w.TopologyRequest = &strata.PodSetTopologyRequest{}
	}
	return w.TopologyRequest
}

// Required sets a required level.
func (w *PodSetWrapper) Required(level string) *PodSetWrapper {
	w.request().Required = &level
	return w
}

// Preferred sets a preferred level.
func (w *PodSetWrapper) Preferred(level string) *PodSetWrapper {
	w.request().Preferred = &level
	return w
}

// Unconstrained marks the request unconstrained.
func (w *PodSetWrapper) Unconstrained() *PodSetWrapper {
	w.request().Unconstrained = ptr.To(true)
	return w
}

// Slice sets a two-level slice request.
func (w *PodSetWrapper) Slice(level string, size int32) *PodSetWrapper {
	r := w.request()
	r.PodSetSliceRequiredTopology = &level
	r.PodSetSliceSize = &size
	return w
}

// SliceLayer appends a multi-layer slice constraint.
func (w *PodSetWrapper) SliceLayer(level string, size int32) *PodSetWrapper {
	r := w.request()
	r.PodSetSliceRequiredTopologyConstraints = append(r.PodSetSliceRequiredTopologyConstraints,
		strata.PodSetSliceTopologyConstraint{Topology: level, Size: size})
	return w
}

// Obj returns the PodSet.
func (w *PodSetWrapper) Obj() strata.PodSet { return w.PodSet }

// WorkerClusterWrapper builds a WorkerCluster.
type WorkerClusterWrapper struct{ strata.WorkerCluster }

// MakeWorkerCluster starts a WorkerCluster with no source.
func MakeWorkerCluster(name string) *WorkerClusterWrapper {
	return &WorkerClusterWrapper{strata.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// KubeConfigSecret sets the kubeconfig Secret source.
func (w *WorkerClusterWrapper) KubeConfigSecret(ns, name string) *WorkerClusterWrapper {
	w.Spec.KubeConfigSecretRef = &strata.SecretKeyReference{Namespace: ns, Name: name}
	return w
}

// ClusterProfile sets the ClusterProfile source.
func (w *WorkerClusterWrapper) ClusterProfile(ns, name string) *WorkerClusterWrapper {
	w.Spec.ClusterProfileRef = &strata.ObjectReference{Namespace: ns, Name: name}
	return w
}

// ManagedCluster sets the OCM ManagedCluster source.
func (w *WorkerClusterWrapper) ManagedCluster(name string) *WorkerClusterWrapper {
	w.Spec.ManagedClusterName = &name
	return w
}

// Obj returns the WorkerCluster.
func (w *WorkerClusterWrapper) Obj() *strata.WorkerCluster { return &w.WorkerCluster }

// CapacitySummaryWrapper builds a CapacitySummary.
type CapacitySummaryWrapper struct{ strata.CapacitySummary }

// MakeCapacitySummary starts a summary of flavor.
func MakeCapacitySummary(flavor string) *CapacitySummaryWrapper {
	return &CapacitySummaryWrapper{strata.CapacitySummary{
		ObjectMeta: metav1.ObjectMeta{Name: flavor},
		Spec:       strata.CapacitySummarySpec{Flavor: flavor},
	}}
}

// Obj returns the CapacitySummary.
func (w *CapacitySummaryWrapper) Obj() *strata.CapacitySummary { return &w.CapacitySummary }

// JobPod is the pod the Job controller would create for job's completion
// index i: the template's labels, annotations and spec, the Job's name and
// the index as labels, the Job as controller owner.
func JobPod(job *batchv1.Job, i int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("%s-%d", job.Name, i),
			Namespace:       job.Namespace,
			Labels:          maps.Clone(job.Spec.Template.Labels),
			Annotations:     maps.Clone(job.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[batchv1.JobNameLabel] = job.Name
	p.Labels[strata.JobCompletionIndexLabel] = fmt.Sprint(i)
	return p
}
