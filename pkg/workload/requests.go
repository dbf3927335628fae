package workload

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// TemplateRequests are the resources each pod of a template requests, as
// the API server makes its pods: a limit stands for the request of the
// same resource that its container does not set, and a pod-level limit
// for the pod-level request of a resource no container requests (one a
// container requests is then the containers' sum). The API server
// defaults a Pod's requests so, not a pod template's; Kueue's Workloads
// count limits the same way. A GPU asked for only as a limit
// (`nvidia.com/gpu` in limits) is requested.
func TemplateRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec}
	if limitsMissRequests(spec) {
		pod.Spec.Containers = limitsAsRequests(spec.Containers)
		pod.Spec.InitContainers = limitsAsRequests(spec.InitContainers)
		if spec.Resources != nil {
			r := podLevelRequests(*spec.Resources, pod.Spec.Containers, pod.Spec.InitContainers)
			pod.Spec.Resources = &r
		}
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// podLevelRequests are pod-level resources r with, for each limit of a
// resource that neither r nor any container requests, the limit as
// request.
func podLevelRequests(r corev1.ResourceRequirements, containers ...[]corev1.Container) corev1.ResourceRequirements {
	var requests corev1.ResourceList
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok || containersRequest(name, containers...) {
			continue
		}
		if requests == nil {
			requests = r.Requests.DeepCopy()
			if requests == nil {
				requests = corev1.ResourceList{}
			}
		}
		requests[name] = q.DeepCopy()
	}
	if requests != nil {
		r.Requests = requests
	}
	return r
}

// containersRequest says whether a container of cs requests name.
func containersRequest(name corev1.ResourceName, cs ...[]corev1.Container) bool {
	for _, list := range cs {
		for i := range list {
			if _, ok := list[i].Resources.Requests[name]; ok {
				return true
			}
		}
	}
	return false
}

// limitsMissRequests says whether some limit of spec has no request.
func limitsMissRequests(spec *corev1.PodSpec) bool {
	miss := func(r corev1.ResourceRequirements) bool {
		for name := range r.Limits {
			if _, ok := r.Requests[name]; !ok {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			if miss(cs[i].Resources) {
				return true
			}
		}
	}
	return spec.Resources != nil && miss(*spec.Resources)
}

// limitsAsRequests returns copies of cs whose missing requests are their
// limits.
func limitsAsRequests(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = cs[i]
		out[i].Resources = withLimitsAsRequests(cs[i].Resources)
	}
	return out
}

func withLimitsAsRequests(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	var requests corev1.ResourceList
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if requests == nil {
			requests = r.Requests.DeepCopy()
			if requests == nil {
				requests = corev1.ResourceList{}
			}
		}
		requests[name] = q.DeepCopy()
	}
	if requests != nil {
		r.Requests = requests
	}
	return r
}
