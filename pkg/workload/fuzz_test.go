package workload

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// FuzzParseTopologyRequest: whatever a user writes in a pod template's
// annotations, parsing never panics, and a request it accepts, or keeps
// usable (a partial slice, which topologyAwareScheduling.partialSlices
// allows), passes the Workload schema (so the API server never rejects the
// Workload that carries it).
func FuzzParseTopologyRequest(f *testing.F) {
	f.Add("kueue.x-k8s.io/podset-required-topology", "cloud.provider.com/topology-rack", "kueue.x-k8s.io/podset-slice-size", "4", int32(8), int32(0))
	f.Add("strata.dev/podset-slice-required-topology", "kubernetes.io/hostname", "strata.dev/podset-slice-size", "x", int32(12), int32(4))
	f.Add("kueue.x-k8s.io/podset-slice-required-topology-constraints", `[{"topology":"b","size":32},{"topology":"r","size":16}]`, "kueue.x-k8s.io/podset-group-name", "g", int32(64), int32(0))
	f.Add("kueue.x-k8s.io/podset-unconstrained-topology", "true", "kueue.x-k8s.io/podset-preferred-topology", "r", int32(-1), int32(-3))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, count, defaultSlice int32) {
		req, errs := ParseTopologyRequest(map[string]string{k1: v1, k2: v2}, count, defaultSlice, field.NewPath("a"))
		if !RequestUsable(errs) || req == nil || count < 0 {
			return
		}
		spec := strata.WorkloadSpec{QueueName: "q", PodSets: []strata.PodSet{{Name: "main", Count: count, TopologyRequest: req}}}
		if errs := ValidateSpec(&spec, field.NewPath("spec")); len(errs) > 0 {
			t.Fatalf("annotations %q=%q, %q=%q (count %d) were accepted, but the Workload breaks its schema: %v", k1, v1, k2, v2, count, errs)
		}
	})
}

// FuzzTopologyHints: a copy's strata.dev/topology-hint annotation, whatever
// it holds, is read or refused with an error, never a panic.
func FuzzTopologyHints(f *testing.F) {
	f.Add(`{"main":{"levels":["r"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"r1"}],"podCounts":{"universal":4}}]}}`)
	f.Add(`{"main":null}`)
	f.Add(`{"main":{"levels":[],"slices":[{"domainCount":-1}]}}`)
	f.Fuzz(func(t *testing.T, v string) {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.TopologyHintAnnotation: v}}}
		hints, err := TopologyHints(wl)
		if err != nil {
			return
		}
		for name, a := range hints {
			for _, d := range a.Domains {
				if len(d.Values) != len(a.Levels) {
					t.Fatalf("pod set %s: domain %v for levels %v", name, d.Values, a.Levels)
				}
			}
		}
	})
}

// FuzzJobPodSets: any Job's counts and annotations give pod sets without
// panicking, and never a negative count, nor one over MaxPodSetPods
// without an error.
func FuzzJobPodSets(f *testing.F) {
	f.Add(int32(4), int32(8), "kueue.x-k8s.io/podset-required-topology", "r", true)
	f.Add(int32(-1), int32(0), "strata.dev/podset-slice-size", "-2", false)
	f.Add(int32(2147483647), int32(MaxPodSetPods+1), "", "", true)
	f.Fuzz(func(t *testing.T, parallelism, completions int32, k, v string, indexed bool) {
		j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(completions),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{k: v}}}}}
		if indexed {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}
		podSets, errs := JobPodSets(j)
		if len(podSets) != 1 {
			t.Fatalf("%d pod sets", len(podSets))
		}
		if !RequestUsable(errs) && podSets[0].TopologyRequest != nil {
			t.Fatalf("invalid annotations %q=%q kept a topology request", k, v)
		}
		if n := podSets[0].Count; n < 0 || n > MaxPodSetPods && len(errs) == 0 {
			t.Fatalf("parallelism %d, completions %d: a count of %d (errors: %v)", parallelism, completions, n, errs)
		}
	})
}
