package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

func job(parallelism, completions int32, annotations map[string]string) *batchv1.Job {
	pod := corev1.PodSpec{
		NodeSelector: map[string]string{"gpu": "h100"},
		Tolerations:  []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), "nvidia.com/gpu": resource.MustParse("1")}}},
		},
	}
	return testutil.MakeJob("train", "ml").Queue("training").Parallelism(parallelism).Completions(completions).Indexed().
		PodAnnotations(annotations).PodSpec(pod).Obj()
}

func TestFromJobAndRequest(t *testing.T) {
	j := job(8, 16, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
	wl, errs := FromJob(j)
	if len(errs) != 0 {
		t.Fatalf("FromJob() errors: %v", errs)
	}
	if wl.Spec.QueueName != "training" || wl.Name != "job-train" || wl.Namespace != "ml" {
		t.Errorf("workload = %s/%s queue %q", wl.Namespace, wl.Name, wl.Spec.QueueName)
	}
	ps := wl.Spec.PodSets[0]
	if diff := cmp.Diff(&strata.PodSetTopologyRequest{Required: ptr.To(rack), PodIndexLabel: ptr.To(strata.JobCompletionIndexLabel)}, ps.TopologyRequest); diff != "" {
		t.Errorf("topology request (-want,+got):\n%s", diff)
	}
	got := Request(&ps)
	want := tas.Request{
		Count: 8,
		// max(init 6, 2+3) cpu, plus the GPU.
		PodRequests:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), "nvidia.com/gpu": resource.MustParse("1")},
		Mode:         tas.Required,
		Level:        rack,
		NodeSelector: map[string]string{"gpu": "h100"},
		Tolerations:  []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Request() (-want,+got):\n%s", diff)
	}
	ps.TopologyRequest.PodSetGroupName = ptr.To("leader-and-workers")
	if !Request(&ps).Grouped {
		t.Errorf("Request() of a pod set with podset-group-name is not Grouped")
	}
}

// TestFromJobSlicesAlone: a Kueue manifest with slice annotations and no
// main level (alone, or with podset-unconstrained-topology) is an
// unconstrained request with slice layers.
func TestFromJobSlicesAlone(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"slices alone": {
			"kueue.x-k8s.io/podset-slice-required-topology": host,
			"kueue.x-k8s.io/podset-slice-size":              "2",
		},
		"slices with unconstrained": {
			"kueue.x-k8s.io/podset-unconstrained-topology":  "true",
			"kueue.x-k8s.io/podset-slice-required-topology": host,
			"kueue.x-k8s.io/podset-slice-size":              "2",
		},
	} {
		t.Run(name, func(t *testing.T) {
			wl, errs := FromJob(job(8, 8, annotations))
			if len(errs) != 0 {
				t.Fatalf("FromJob() errors: %v", errs)
			}
			ps := &wl.Spec.PodSets[0]
			if errs := ValidateSpec(&wl.Spec, nil); len(errs) != 0 {
				t.Fatalf("ValidateSpec() errors: %v", errs)
			}
			if err := ValidateAgainstTopology(ps.TopologyRequest, "default", []string{block, rack, host}); err != nil {
				t.Fatalf("ValidateAgainstTopology() error: %v", err)
			}
			got := Request(ps)
			if got.Mode != tas.Unconstrained || got.Level != "" || got.Count != 8 {
				t.Errorf("Request() = %v level %q count %d, want unconstrained, no level, 8", got.Mode, got.Level, got.Count)
			}
			if diff := cmp.Diff([]tas.Layer{{Level: host, Size: 2}}, got.Layers); diff != "" {
				t.Errorf("Request().Layers (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFromJobErrors(t *testing.T) {
	j := job(3, 3, map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-slice-required-topology": host, "strata.dev/podset-slice-size": "0"})
	delete(j.Labels, strata.QueueNameLabel)
	_, errs := FromJob(j)
	want := []string{
		"metadata.labels[strata.dev/queue-name]: Required value: names the ClusterQueue of the Job",
		`spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "0": must be a whole number of pods, at least 1`,
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want,+got):\n%s", diff)
	}
}

func TestPodCountAndImplicitDefault(t *testing.T) {
	j := job(8, 4, nil)
	if n := JobPodCount(j); n != 4 {
		t.Errorf("JobPodCount() = %d, want 4 (completions cap parallelism)", n)
	}
	wl, _ := FromJob(j)
	if r := Request(&wl.Spec.PodSets[0]); r.Mode != tas.Unconstrained || r.Count != 4 {
		t.Errorf("Request() without annotations = %v count %d, want unconstrained 4", r.Mode, r.Count)
	}
}

// TestJobPodSetsBound: a Job's pods at once are never negative; at
// MaxPodSetPods they are taken, one over refused at the field that
// counts them.
func TestJobPodSetsBound(t *testing.T) {
	type result struct {
		Count  int32
		Errors []string
	}
	over := func(path string, n int) []string {
		return []string{path + ": Invalid value: " + strconv.Itoa(n) + ": parallelism, capped by completions: " + strconv.Itoa(n) +
			" pods, more than the 100000 one pod set may have under Strata; lower it, or split the workload"}
	}
	cases := map[string]struct {
		parallelism, completions int32
		want                     result
	}{
		"negative parallelism: no pods, invalid": {parallelism: -1, completions: 4, want: result{Count: 0, Errors: []string{"spec.parallelism: Invalid value: -1: must be greater than or equal to 0"}}},
		"at the bound":                           {parallelism: MaxPodSetPods, completions: math.MaxInt32, want: result{Count: MaxPodSetPods}},
		"parallelism one over":                   {parallelism: MaxPodSetPods + 1, completions: math.MaxInt32, want: result{Count: MaxPodSetPods + 1, Errors: over("spec.parallelism", MaxPodSetPods+1)}},
		"completions one over, parallelism more": {parallelism: math.MaxInt32, completions: MaxPodSetPods + 1, want: result{Count: MaxPodSetPods + 1, Errors: over("spec.completions", MaxPodSetPods+1)}},
		"int32's end":                            {parallelism: math.MaxInt32, completions: math.MaxInt32, want: result{Count: math.MaxInt32, Errors: over("spec.parallelism", math.MaxInt32)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			podSets, errs := JobPodSets(job(tc.parallelism, tc.completions, nil))
			got := result{Count: podSets[0].Count}
			for _, e := range errs {
				got.Errors = append(got.Errors, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobPodSets() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestJobWorkloadName(t *testing.T) {
	long := strings.Repeat("a", 63)
	cases := map[string]struct {
		job  string
		want string
	}{
		"short":                   {job: "train", want: "job-train"},
		"59 characters still fit": {job: strings.Repeat("a", 59), want: "job-" + strings.Repeat("a", 59)},
		"60 characters are cut":   {job: long[:60], want: "job-" + long[:48] + "-" + hashOf(long[:60])},
		"63 characters":           {job: long, want: "job-" + long[:48] + "-" + hashOf(long)},
		"cut before a dash":       {job: strings.Repeat("b", 47) + "--" + long[:14], want: "job-" + strings.Repeat("b", 47) + "-" + hashOf(strings.Repeat("b", 47)+"--"+long[:14])},
		"cut before a dot":        {job: strings.Repeat("b", 47) + ".c" + long[:14], want: "job-" + strings.Repeat("b", 47) + "-" + hashOf(strings.Repeat("b", 47)+".c"+long[:14])},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := JobWorkloadName(tc.job)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobWorkloadName(%q) (-want,+got):\n%s", tc.job, diff)
			}
			if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
				t.Errorf("%q is not a label value: %v", got, msgs)
			}
			if msgs := validation.IsDNS1123Subdomain(got); len(msgs) > 0 {
				t.Errorf("%q is not a DNS subdomain: %v", got, msgs)
			}
		})
	}
	// Long names that share the kept part still get different Workloads.
	a, b := JobWorkloadName(long[:62]+"x"), JobWorkloadName(long[:62]+"y")
	if a == b {
		t.Errorf("JobWorkloadName() = %q for two different Jobs", a)
	}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

func TestFromJobDispatchMetadata(t *testing.T) {
	cases := map[string]struct {
		labels, annotations         map[string]string
		wantLabels, wantAnnotations map[string]string
	}{
		"a Job of no hub: its labels, nothing else": {
			labels: map[string]string{"team": "ml"},
		},
		"a hub's copy: the three labels and the pinned flavor": {
			labels: map[string]string{
				strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3", "team": "ml",
			},
			annotations: map[string]string{strata.FlavorAnnotation: "h100", "note": "kept on the Job"},
			wantLabels: map[string]string{
				strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3",
			},
			wantAnnotations: map[string]string{strata.FlavorAnnotation: "h100"},
		},
		"a hub's copy whose pod set the hub pinned": {
			annotations:     map[string]string{strata.PodSetFlavorsAnnotation: "main=h100", "note": "kept on the Job"},
			wantAnnotations: map[string]string{strata.PodSetFlavorsAnnotation: "main=h100"},
		},
		"only what the Job has": {
			labels:     map[string]string{strata.HubWorkloadUIDLabel: "0b6c"},
			wantLabels: map[string]string{strata.HubWorkloadUIDLabel: "0b6c"},
		},
		"a pinned flavor alone": {
			annotations:     map[string]string{strata.FlavorAnnotation: "h100"},
			wantAnnotations: map[string]string{strata.FlavorAnnotation: "h100"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := job(2, 2, nil)
			for k, v := range tc.labels {
				j.Labels[k] = v
			}
			j.Annotations = tc.annotations
			wl, errs := FromJob(j)
			if len(errs) != 0 {
				t.Fatalf("FromJob() errors: %v", errs)
			}
			// Every label of the Job is the Workload's (the dispatch
			// contract's, and the rest for topology spreading's selectors).
			want := map[string]string{strata.QueueNameLabel: j.Labels[strata.QueueNameLabel]}
			for k, v := range tc.labels {
				want[k] = v
			}
			for k, v := range tc.wantLabels {
				if want[k] != v {
					t.Errorf("label %s = %q in the Job, want %q carried", k, want[k], v)
				}
			}
			if diff := cmp.Diff(want, wl.Labels); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAnnotations, wl.Annotations); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFromJobPriorityClass: the Job's labels name a WorkloadPriorityClass
// (Strata's label before Kueue's), which leaves the pods' PriorityClass
// alone; without one, the Workload takes the pods' PriorityClass.
func TestFromJobPriorityClass(t *testing.T) {
	type class struct{ Name, Source string }
	cases := map[string]struct {
		labels   map[string]string
		podClass string
		want     class
	}{
		"strata label": {
			labels:   map[string]string{strata.PriorityClassLabel: "high"},
			podClass: "pods",
			want:     class{Name: "high", Source: strata.WorkloadPriorityClassSource},
		},
		"kueue label": {
			labels:   map[string]string{strata.KueuePriorityClassLabel: "kueue-high"},
			podClass: "pods",
			want:     class{Name: "kueue-high", Source: strata.WorkloadPriorityClassSource},
		},
		"both labels: strata's wins": {
			labels: map[string]string{strata.PriorityClassLabel: "high", strata.KueuePriorityClassLabel: "kueue-high"},
			want:   class{Name: "high", Source: strata.WorkloadPriorityClassSource},
		},
		"empty strata label: kueue's": {
			labels: map[string]string{strata.PriorityClassLabel: "", strata.KueuePriorityClassLabel: "kueue-high"},
			want:   class{Name: "kueue-high", Source: strata.WorkloadPriorityClassSource},
		},
		"no label: the pods' PriorityClass": {
			podClass: "pods",
			want:     class{Name: "pods", Source: strata.PodPriorityClassSource},
		},
		"no class at all": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := job(2, 2, nil)
			for k, v := range tc.labels {
				j.Labels[k] = v
			}
			j.Spec.Template.Spec.PriorityClassName = tc.podClass
			wl, errs := FromJob(j)
			if len(errs) != 0 {
				t.Fatalf("FromJob() errors: %v", errs)
			}
			if diff := cmp.Diff(tc.want, class{Name: wl.Spec.PriorityClassName, Source: wl.Spec.PriorityClassSource}); diff != "" {
				t.Errorf("priority class (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.podClass, wl.Spec.PodSets[0].Template.Spec.PriorityClassName); diff != "" {
				t.Errorf("pod template's PriorityClass (-want,+got):\n%s", diff)
			}
			if wl.Spec.Priority != nil {
				t.Errorf("priority = %d, want none before intake resolves the class", *wl.Spec.Priority)
			}
		})
	}
}

func TestCarryDispatch(t *testing.T) {
	copyOf := metav1.ObjectMeta{
		Labels: map[string]string{
			strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3", strata.QueueNameLabel: "q",
		},
		Annotations: map[string]string{strata.FlavorAnnotation: "h100", strata.DispatchTimeAnnotation: "2026-11-24T09:00:00.000003Z"},
	}
	cases := map[string]struct {
		dst, src    metav1.ObjectMeta
		want        metav1.ObjectMeta
		wantChanged bool
	}{
		"a Workload without them gets them": {
			dst: metav1.ObjectMeta{Annotations: map[string]string{strata.InvalidAnnotation: "InvalidJob"}},
			src: copyOf,
			want: metav1.ObjectMeta{
				Labels: map[string]string{
					strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3",
				},
				Annotations: map[string]string{strata.FlavorAnnotation: "h100", strata.DispatchTimeAnnotation: "2026-11-24T09:00:00.000003Z", strata.InvalidAnnotation: "InvalidJob"},
			},
			wantChanged: true,
		},
		"a Workload with them: unchanged": {
			dst: metav1.ObjectMeta{
				Labels: map[string]string{
					strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3", "other": "x",
				},
				Annotations: map[string]string{strata.FlavorAnnotation: "h100", strata.DispatchTimeAnnotation: "2026-11-24T09:00:00.000003Z"},
			},
			src: copyOf,
			want: metav1.ObjectMeta{
				Labels: map[string]string{
					strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3", "other": "x",
				},
				Annotations: map[string]string{strata.FlavorAnnotation: "h100", strata.DispatchTimeAnnotation: "2026-11-24T09:00:00.000003Z"},
			},
		},
		"another value (a tenant's edit of the copy) is not carried": {
			dst: metav1.ObjectMeta{
				Labels:      map[string]string{strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "2"},
				Annotations: map[string]string{strata.FlavorAnnotation: "a100", strata.DispatchTimeAnnotation: "2026-11-24T08:00:00Z"},
			},
			src: copyOf,
			want: metav1.ObjectMeta{
				Labels:      map[string]string{strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "2"},
				Annotations: map[string]string{strata.FlavorAnnotation: "a100", strata.DispatchTimeAnnotation: "2026-11-24T08:00:00Z"},
			},
		},
		"a Job without them removes nothing": {
			dst: metav1.ObjectMeta{
				Labels:      map[string]string{strata.HubWorkloadUIDLabel: "0b6c"},
				Annotations: map[string]string{strata.FlavorAnnotation: "h100"},
			},
			src: metav1.ObjectMeta{Labels: map[string]string{strata.QueueNameLabel: "q"}},
			want: metav1.ObjectMeta{
				Labels:      map[string]string{strata.HubWorkloadUIDLabel: "0b6c"},
				Annotations: map[string]string{strata.FlavorAnnotation: "h100"},
			},
		},
		"neither has them": {
			src: metav1.ObjectMeta{Labels: map[string]string{strata.QueueNameLabel: "q"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := *tc.dst.DeepCopy()
			changed := CarryDispatch(&got, &tc.src)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CarryDispatch() result (-want,+got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("CarryDispatch() = %t, want %t", changed, tc.wantChanged)
			}
		})
	}
}

func TestDispatchKey(t *testing.T) {
	cases := map[string]struct {
		labels map[string]string
		want   string
	}{
		"both labels":        {labels: map[string]string{strata.HubWorkloadUIDLabel: "0b6c", strata.DispatchGenerationLabel: "3"}, want: "0b6c/3"},
		"no labels":          {},
		"no generation":      {labels: map[string]string{strata.HubWorkloadUIDLabel: "0b6c"}},
		"no hub UID":         {labels: map[string]string{strata.DispatchGenerationLabel: "3"}},
		"an empty hub UID":   {labels: map[string]string{strata.HubWorkloadUIDLabel: "", strata.DispatchGenerationLabel: "3"}},
		"origin is not part": {labels: map[string]string{strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "u", strata.DispatchGenerationLabel: "1"}, want: "u/1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			if diff := cmp.Diff(tc.want, DispatchKey(wl)); diff != "" {
				t.Errorf("DispatchKey() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRankedPodSet(t *testing.T) {
	idx := ptr.To("index")
	ps := func(name string, count int32, group string, offset *int32) strata.PodSet {
		r := &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodIndexLabel: idx, PodIndexOffset: offset}
		if group != "" {
			r.PodSetGroupName = ptr.To(group)
		}
		return strata.PodSet{Name: name, Count: count, TopologyRequest: r}
	}
	cases := map[string]struct {
		podSets []strata.PodSet
		i       int
		want    *int32
	}{
		"a leader and its workers grouped: the workers start after the leader": {
			podSets: []strata.PodSet{ps("leader", 1, "g", nil), ps("workers", 3, "g", nil)}, i: 1, want: ptr.To[int32](1),
		},
		"the first pod set of a group": {
			podSets: []strata.PodSet{ps("leader", 1, "g", nil), ps("workers", 3, "g", nil)}, i: 0,
		},
		"an offset of its own is kept": {
			podSets: []strata.PodSet{ps("leader", 1, "g", nil), ps("workers", 3, "g", ptr.To[int32](0))}, i: 1, want: ptr.To[int32](0),
		},
		"another group's pod sets do not count": {
			podSets: []strata.PodSet{ps("a", 2, "g1", nil), ps("b", 1, "g2", nil), ps("c", 3, "g2", nil)}, i: 2, want: ptr.To[int32](1),
		},
		"not grouped": {
			podSets: []strata.PodSet{ps("leader", 1, "", nil), ps("workers", 3, "", nil)}, i: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.podSets[tc.i].DeepCopy()
			got := RankedPodSet(tc.podSets, tc.i)
			if diff := cmp.Diff(tc.want, got.TopologyRequest.PodIndexOffset); diff != "" {
				t.Errorf("offset (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &tc.podSets[tc.i]); diff != "" {
				t.Errorf("the Workload's pod set changed (-before,+after):\n%s", diff)
			}
		})
	}
}

func TestUnhealthyNodesThreshold(t *testing.T) {
	const (
		own   = "strata.dev/tas-unhealthy-nodes-eviction-threshold"
		kueue = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
	)
	cases := map[string]struct {
		annotations map[string]string
		want        int
		wantSet     bool
		wantErrs    []string
	}{
		"not set":          {},
		"strata.dev":       {annotations: map[string]string{own: "3"}, want: 3, wantSet: true},
		"kueue.x-k8s.io":   {annotations: map[string]string{kueue: "8"}, want: 8, wantSet: true},
		"both, same value": {annotations: map[string]string{own: "1", kueue: "1"}, want: 1, wantSet: true},
		"both, different values": {annotations: map[string]string{own: "1", kueue: "2"},
			wantErrs: []string{`metadata.annotations[kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold]: Invalid value: "2": conflicts with strata.dev/tas-unhealthy-nodes-eviction-threshold="1"; set only one of them`}},
		"zero": {annotations: map[string]string{kueue: "0"},
			wantErrs: []string{`metadata.annotations[kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold]: Invalid value: "0": must be an integer between 1 and 8`}},
		"nine": {annotations: map[string]string{own: "9"},
			wantErrs: []string{`metadata.annotations[strata.dev/tas-unhealthy-nodes-eviction-threshold]: Invalid value: "9": must be an integer between 1 and 8`}},
		"not a number": {annotations: map[string]string{own: "two"},
			wantErrs: []string{`metadata.annotations[strata.dev/tas-unhealthy-nodes-eviction-threshold]: Invalid value: "two": must be an integer between 1 and 8`}},
		"spaces": {annotations: map[string]string{own: " 2"},
			wantErrs: []string{`metadata.annotations[strata.dev/tas-unhealthy-nodes-eviction-threshold]: Invalid value: " 2": must be an integer between 1 and 8`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, set, errs := UnhealthyNodesThreshold(tc.annotations, field.NewPath("metadata", "annotations"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			if n != tc.want || set != tc.wantSet {
				t.Errorf("UnhealthyNodesThreshold() = %d, %t; want %d, %t", n, set, tc.want, tc.wantSet)
			}
		})
	}
}

func TestFromJobCarriesTheUnhealthyNodesThreshold(t *testing.T) {
	j := job(2, 2, nil)
	j.Annotations = map[string]string{"kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold": "2", "unrelated": "x"}
	wl, errs := FromJob(j)
	if len(errs) > 0 {
		t.Fatalf("FromJob: %v", errs)
	}
	if diff := cmp.Diff(map[string]string{"kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold": "2"}, wl.Annotations); diff != "" {
		t.Errorf("Workload annotations (-want,+got):\n%s", diff)
	}
	j.Annotations["kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"] = "10"
	if _, errs := FromJob(j); len(errs) != 1 || !strings.Contains(errs[0].Error(), "must be an integer between 1 and 8") {
		t.Errorf("FromJob with 10: errors %v, want one naming the range", errs)
	}
}

// TestPriorityClassOfALaterPodSet: the first pod set that names a
// PriorityClass gives it (Kueue's), not only the first pod set.
func TestPriorityClassOfALaterPodSet(t *testing.T) {
	podSets := []strata.PodSet{{Name: "driver"}, {Name: "workers"}, {Name: "other"}}
	podSets[1].Template.Spec.PriorityClassName = "high"
	podSets[2].Template.Spec.PriorityClassName = "low"
	name, source := PriorityClass(nil, podSets)
	if name != "high" || source != strata.PodPriorityClassSource {
		t.Errorf("PriorityClass() = %q, %q; want high, %s", name, source, strata.PodPriorityClassSource)
	}
}

func TestMoreReclaimable(t *testing.T) {
	rp := func(pairs ...any) []strata.ReclaimablePod {
		var out []strata.ReclaimablePod
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, strata.ReclaimablePod{Name: pairs[i].(string), Count: int32(pairs[i+1].(int))})
		}
		return out
	}
	cases := map[string]struct {
		recorded, now, want []strata.ReclaimablePod
	}{
		"none":                         {},
		"first report":                 {now: rp("workers", 2), want: rp("workers", 2)},
		"more":                         {recorded: rp("workers", 2), now: rp("workers", 3), want: rp("workers", 3)},
		"fewer (a JobSet restarted)":   {recorded: rp("workers", 2), now: rp("workers", 0), want: rp("workers", 2)},
		"a pod set no longer reported": {recorded: rp("leader", 1, "workers", 2), now: rp("workers", 3), want: rp("workers", 3, "leader", 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MoreReclaimable(tc.recorded, tc.now)); diff != "" {
				t.Errorf("MoreReclaimable (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestUntoleratedFlavorTaint(t *testing.T) {
	flavor := &strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: strata.ResourceFlavorSpec{
		NodeTaints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}}
	withTolerations := func(tols ...corev1.Toleration) *strata.Workload {
		ps := testutil.MakePodSet("main", 1, "cpu", "1").Obj()
		ps.Template.Spec.Tolerations = tols
		return testutil.MakeWorkload("w", "ns").PodSets(ps).Obj()
	}
	tolerates := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}
	cases := map[string]struct {
		flavor *strata.ResourceFlavor
		wl     *strata.Workload
		want   string
	}{
		"no taints": {flavor: &strata.ResourceFlavor{}, wl: withTolerations()},
		"untolerated (PreferNoSchedule does not count)": {flavor: flavor, wl: withTolerations(), want: "untolerated taint nvidia.com/gpu=present:NoSchedule in flavor gpu"},
		"the pods tolerate it":                          {flavor: flavor, wl: withTolerations(tolerates)},
		"the flavor's tolerations do": {flavor: func() *strata.ResourceFlavor {
			f := flavor.DeepCopy()
			f.Spec.Tolerations = []corev1.Toleration{tolerates}
			return f
		}(), wl: withTolerations()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := UntoleratedFlavorTaint(tc.flavor, tc.wl); got != tc.want {
				t.Errorf("UntoleratedFlavorTaint = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPodSetFlavors: a hub's strata.dev/pod-set-flavors pins each pod set
// to its flavor; FlavorRefusal refuses a flavor that is not every given
// pod set's; an annotation that is not the hub's is an error, never a
// guess.
func TestPodSetFlavors(t *testing.T) {
	two := testutil.MakeWorkload("w", "ns").PodSets(testutil.MakePodSet("launcher", 1, "cpu", "1").Obj(),
		testutil.MakePodSet("worker", 4, "cpu", "1").Obj()).Obj()
	flavor := func(name string) *strata.ResourceFlavor {
		return &strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	cases := map[string]struct {
		annotation *string
		want       map[string]string
		wantErr    string
		// refusals of each flavor for the whole workload, and for its
		// worker pod set alone.
		refusal, workerRefusal map[string]string
	}{
		"none": {
			refusal: map[string]string{"cpu": "", "gpu": ""},
		},
		"each pod set on its flavor": {
			annotation: ptr.To("launcher=cpu, worker = gpu"),
			want:       map[string]string{"launcher": "cpu", "worker": "gpu"},
			refusal: map[string]string{
				"cpu": "the hub placed pod set worker on flavor gpu (annotation strata.dev/pod-set-flavors)",
				"gpu": "the hub placed pod set launcher on flavor cpu (annotation strata.dev/pod-set-flavors)",
			},
			workerRefusal: map[string]string{"cpu": "the hub placed pod set worker on flavor gpu (annotation strata.dev/pod-set-flavors)", "gpu": ""},
		},
		"both on one flavor": {
			annotation: ptr.To("worker=gpu,launcher=gpu"),
			want:       map[string]string{"launcher": "gpu", "worker": "gpu"},
			refusal:    map[string]string{"gpu": "", "cpu": "the hub placed pod set launcher on flavor gpu (annotation strata.dev/pod-set-flavors)"},
		},
		"a pod set left out": {
			annotation: ptr.To("launcher=cpu"),
			wantErr:    `annotation strata.dev/pod-set-flavors="launcher=cpu": no flavor for pod set worker`,
			refusal:    map[string]string{"cpu": `annotation strata.dev/pod-set-flavors="launcher=cpu": no flavor for pod set worker`},
			// The worker pod set alone has no flavor either.
			workerRefusal: map[string]string{"cpu": `annotation strata.dev/pod-set-flavors="launcher=cpu": no flavor for pod set worker`},
		},
		"a pod set the workload lacks": {
			annotation: ptr.To("launcher=cpu,worker=gpu,driver=cpu"),
			wantErr:    `annotation strata.dev/pod-set-flavors="launcher=cpu,worker=gpu,driver=cpu": the workload has no pod set driver`,
		},
		"a pod set named twice": {
			annotation: ptr.To("launcher=cpu,worker=gpu,worker=cpu"),
			wantErr:    `annotation strata.dev/pod-set-flavors="launcher=cpu,worker=gpu,worker=cpu": pod set worker is named twice`,
			refusal:    map[string]string{"gpu": `annotation strata.dev/pod-set-flavors="launcher=cpu,worker=gpu,worker=cpu": pod set worker is named twice`},
		},
		"not name=flavor": {
			annotation: ptr.To("launcher=cpu,gpu"),
			wantErr:    `annotation strata.dev/pod-set-flavors="launcher=cpu,gpu": "gpu" is not name=flavor`,
		},
		"empty": {
			annotation: ptr.To(""),
			wantErr:    `annotation strata.dev/pod-set-flavors="": "" is not name=flavor`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := two.DeepCopy()
			if tc.annotation != nil {
				metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.PodSetFlavorsAnnotation, *tc.annotation)
			}
			got, err := PinnedPodSetFlavors(wl)
			if gotErr := fmt.Sprint(err); err != nil && gotErr != tc.wantErr || err == nil && tc.wantErr != "" {
				t.Errorf("PinnedPodSetFlavors() error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PinnedPodSetFlavors() (-want,+got):\n%s", diff)
			}
			for f, want := range tc.refusal {
				if got := FlavorRefusal(flavor(f), wl); got != want {
					t.Errorf("FlavorRefusal(%s) = %q, want %q", f, got, want)
				}
			}
			for f, want := range tc.workerRefusal {
				if got := FlavorRefusal(flavor(f), WithPodSets(wl, []int{1})); got != want {
					t.Errorf("FlavorRefusal(%s) of the worker pod set = %q, want %q", f, got, want)
				}
			}
		})
	}
	if got := FormatPodSetFlavors([]strata.PodSetFlavor{{Name: "launcher", Flavor: "cpu"}, {Name: "worker", Flavor: "gpu"}}); got != "launcher=cpu,worker=gpu" {
		t.Errorf("FormatPodSetFlavors() = %q", got)
	}
}

// TestOutdatedByJob: a hub Workload evicted because its job changed is
// outdated until its spec's generation moves past the eviction's.
func TestOutdatedByJob(t *testing.T) {
	evicted := func(status metav1.ConditionStatus, reason string, observed int64) metav1.Condition {
		return metav1.Condition{Type: strata.WorkloadEvicted, Status: status, Reason: reason, ObservedGeneration: observed}
	}
	cases := map[string]struct {
		conditions []metav1.Condition
		want       bool
	}{
		"never evicted":                        {},
		"evicted for its job's change":         {conditions: []metav1.Condition{evicted(metav1.ConditionTrue, strata.EvictedByJobChange, 3)}, want: true},
		"its spec brought up to date since":    {conditions: []metav1.Condition{evicted(metav1.ConditionTrue, strata.EvictedByJobChange, 2)}},
		"evicted for another reason":           {conditions: []metav1.Condition{evicted(metav1.ConditionTrue, strata.EvictedByPreemption, 3)}},
		"the eviction over (dispatched again)": {conditions: []metav1.Condition{evicted(metav1.ConditionFalse, strata.EvictedByJobChange, 3)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: strata.WorkloadStatus{Conditions: tc.conditions}}
			if got := OutdatedByJob(wl); got != tc.want {
				t.Errorf("OutdatedByJob() = %t, want %t", got, tc.want)
			}
		})
	}
}
