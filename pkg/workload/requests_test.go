package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTemplateRequests(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	container := func(requests, limits corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
	}
	cases := map[string]struct {
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		"requests alone": {
			spec: corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"), nil)}},
			want: rl("cpu", "1"),
		},
		"a GPU asked for only as a limit is requested": {
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("nvidia.com/gpu", "8"))}},
			want: rl("nvidia.com/gpu", "8"),
		},
		"a request set beside its limit stays": {
			spec: corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"), rl("cpu", "4", "memory", "2Gi"))}},
			want: rl("cpu", "1", "memory", "2Gi"),
		},
		"init containers and sidecars too": {
			spec: corev1.PodSpec{
				Containers:     []corev1.Container{container(nil, rl("cpu", "2"))},
				InitContainers: []corev1.Container{container(nil, rl("cpu", "3"))},
			},
			want: rl("cpu", "3"),
		},
		// The API server: a pod-level limit is the pod-level request only
		// of a resource no container requests; else the containers' sum.
		"a pod-level limit of a resource a container requests": {
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(rl("cpu", "1"), nil)},
				Resources:  &corev1.ResourceRequirements{Limits: rl("cpu", "4")},
			},
			want: rl("cpu", "1"),
		},
		"a pod-level limit of a resource no container requests": {
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(rl("memory", "1Gi"), nil)},
				Resources:  &corev1.ResourceRequirements{Limits: rl("cpu", "4")},
			},
			want: rl("cpu", "4", "memory", "1Gi"),
		},
		"a pod-level limit of a resource a container asks for only as a limit": {
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(nil, rl("cpu", "2"))},
				Resources:  &corev1.ResourceRequirements{Limits: rl("cpu", "4")},
			},
			want: rl("cpu", "2"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.spec.DeepCopy()
			got := TemplateRequests(&tc.spec)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("TemplateRequests() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &tc.spec); diff != "" {
				t.Errorf("the template changed (-before,+after):\n%s", diff)
			}
		})
	}
}
