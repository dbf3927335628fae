package replay

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// BatchJob is j as a batch/v1 Job named name in namespace, queued in
// LocalQueue localQueue: j.Pods pods of j.GPUsPerPod GPUs (requests and
// limits), its topology request as the pod template's annotation, with
// levels mapping the trace's level names ("rack", "block") to node
// labels. What the benchmarks submit for a trace.
func (j *Job) BatchJob(name, namespace, localQueue string, levels map[string]string) *batchv1.Job {
	ann := map[string]string{}
	switch j.Mode {
	case Required:
		ann[strata.PodSetRequiredTopologyAnnotation] = levels[j.Level]
	case Preferred:
		ann[strata.PodSetPreferredTopologyAnnotation] = levels[j.Level]
	}
	gpus := corev1.ResourceList{GPU: *resource.NewQuantity(j.GPUsPerPod, resource.DecimalSI)}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{strata.QueueNameLabel: localQueue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(j.Pods), Completions: ptr.To(j.Pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: ann},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus.DeepCopy()},
				}}},
			},
		},
	}
}
