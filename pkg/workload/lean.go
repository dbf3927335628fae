package workload

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// LeanTemplate reduces a pod template in place to what placing its pods
// and charging their quota read: its annotations (topology requests), the
// pod's priority, node selector, node affinity, tolerations, scheduling
// gates, overhead and pod-level resources, and each container's name,
// resources and restart policy (which tells a sidecar). Everything else —
// images, commands, environment, volumes, probes, the template's labels —
// goes. Request, Shape and the quota requests of a lean template are
// those of the full one, and LeanTemplate of a lean template changes
// nothing.
//
// The hub keeps its jobs and Workloads lean (see LeanObject): a pending
// job is about half as large in memory without its pod templates, and a
// hub Workload is never run, only placed and charged. What a worker gets
// is built from the job read whole from the API server.
func LeanTemplate(t *corev1.PodTemplateSpec) {
	s := t.Spec
	t.ObjectMeta = metav1.ObjectMeta{Annotations: t.Annotations}
	t.Spec = corev1.PodSpec{
		RestartPolicy:     s.RestartPolicy,
		NodeSelector:      s.NodeSelector,
		Tolerations:       s.Tolerations,
		PriorityClassName: s.PriorityClassName,
		Priority:          s.Priority,
		SchedulingGates:   s.SchedulingGates,
		Overhead:          s.Overhead,
		Resources:         s.Resources,
		Containers:        leanContainers(s.Containers),
		InitContainers:    leanContainers(s.InitContainers),
	}
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil {
		t.Spec.Affinity = &corev1.Affinity{NodeAffinity: s.Affinity.NodeAffinity}
	}
}

// leanContainers keeps of each container its name, resources and restart
// policy.
func leanContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

// LeanWorkload makes the templates of a Workload's pod sets lean (see
// LeanTemplate).
func LeanWorkload(wl *strata.Workload) {
	for i := range wl.Spec.PodSets {
		LeanTemplate(&wl.Spec.PodSets[i].Template)
	}
}
