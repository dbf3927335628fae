package workload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

func assignment(domains ...tas.DomainAssignment) *tas.Assignment {
	return &tas.Assignment{Levels: []string{"kubernetes.io/hostname"}, Domains: domains}
}

func on(host string, n int32) tas.DomainAssignment {
	return tas.DomainAssignment{Values: []string{host}, Count: n}
}

func TestGrowAssignment(t *testing.T) {
	cases := map[string]struct {
		a, added, want *tas.Assignment
	}{
		"new hosts after the old ones": {
			a: assignment(on("h1", 2), on("h2", 1)), added: assignment(on("h3", 2)),
			want: assignment(on("h1", 2), on("h2", 1), on("h3", 2)),
		},
		"the last host again: joined": {
			a: assignment(on("h1", 2), on("h2", 1)), added: assignment(on("h2", 1), on("h1", 1)),
			want: assignment(on("h1", 2), on("h2", 2), on("h1", 1)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, GrowAssignment(tc.a, tc.added)); diff != "" {
				t.Errorf("GrowAssignment (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestGrownAssignmentEncodes: a grown assignment that lists a host twice
// is written and read back as it is (the ranks of each entry kept).
func TestGrownAssignmentEncodes(t *testing.T) {
	grown := GrowAssignment(assignment(on("h1", 2), on("h2", 4)), assignment(on("h1", 1), on("h3", 1)))
	back, err := tas.Decode(tas.Encode(grown))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(grown.Domains, back.Domains); diff != "" {
		t.Errorf("decoded (-grown,+back):\n%s", diff)
	}
}

func TestShrinkAssignment(t *testing.T) {
	a := func() *tas.Assignment { return assignment(on("h1", 2), on("h2", 2), on("h3", 2)) }
	cases := map[string]struct {
		to     int32
		live   map[string]int32
		ranked bool
		want   *tas.Assignment
	}{
		"ranked: the last ranks go": {to: 3, ranked: true, want: assignment(on("h1", 2), on("h2", 1))},
		"unranked: where pods run stays": {to: 3, live: map[string]int32{tas.DomainKey([]string{"h2"}): 2, tas.DomainKey([]string{"h3"}): 1},
			want: assignment(on("h2", 2), on("h3", 1))},
		"unranked: the rest in order when fewer run": {to: 4, live: map[string]int32{tas.DomainKey([]string{"h3"}): 1},
			want: assignment(on("h1", 2), on("h2", 1), on("h3", 1))},
		"unranked: nothing runs": {to: 1, live: map[string]int32{}, want: assignment(on("h1", 1))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ShrinkAssignment(a(), tc.to, tc.live, tc.ranked)); diff != "" {
				t.Errorf("ShrinkAssignment (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestResizeOf(t *testing.T) {
	admitted := func(count, admittedCount int32, configure func(*strata.Workload)) *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.ElasticJobAnnotation: "true"}},
			Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: count}}}}
		wl.Status.Admission = &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Count: admittedCount,
			TopologyAssignment: tas.Encode(assignment(on("h1", admittedCount)))}}}
		if configure != nil {
			configure(wl)
		}
		return wl
	}
	cases := map[string]struct {
		wl     *strata.Workload
		want   Resize
		wantOK bool
	}{
		"scaled up":    {wl: admitted(5, 2, nil), want: Resize{From: 2, To: 5}, wantOK: true},
		"scaled down":  {wl: admitted(1, 2, nil), want: Resize{From: 2, To: 1}, wantOK: true},
		"as admitted":  {wl: admitted(2, 2, nil)},
		"not elastic":  {wl: admitted(5, 2, func(wl *strata.Workload) { wl.Annotations = nil })},
		"not admitted": {wl: admitted(5, 2, func(wl *strata.Workload) { wl.Status.Admission = nil })},
		"a failed node being replaced": {wl: admitted(5, 2, func(wl *strata.Workload) {
			wl.Status.UnhealthyNodes = []strata.UnhealthyNode{{Name: "h1"}}
		})},
		"deactivated": {wl: admitted(5, 2, func(wl *strata.Workload) { wl.Spec.Active = ptr.To(false) })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ResizeOf(tc.wl)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("ResizeOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestElasticJobValidation: an elastic Job is placed unconstrained and
// not with partial admission, as Kueue's webhook has it.
func TestElasticJobValidation(t *testing.T) {
	job := func(annotations, podAnnotations map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Annotations: annotations},
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: podAnnotations},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}}
	}
	elastic := map[string]string{strata.ElasticJobAnnotation: "true"}
	cases := map[string]struct {
		job  *batchv1.Job
		want []string
	}{
		"unconstrained": {job: job(elastic, nil)},
		"a required topology": {job: job(elastic, map[string]string{"kueue.x-k8s.io/podset-required-topology": "rack"}),
			want: []string{"is placed unconstrained: its pods may not name a topology (strata.dev/podset-required-topology)"}},
		"a preferred topology": {job: job(elastic, map[string]string{"kueue.x-k8s.io/podset-preferred-topology": "rack"}),
			want: []string{"may not name a topology (strata.dev/podset-preferred-topology)"}},
		"partial admission": {job: job(map[string]string{strata.ElasticJobAnnotation: "true", "kueue.x-k8s.io/job-min-parallelism": "2"}, nil),
			want: []string{"cannot also run with fewer pods (partial admission)"}},
		"not elastic: a topology is fine": {job: job(nil, map[string]string{"kueue.x-k8s.io/podset-required-topology": "rack"})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := JobPodSets(tc.job)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %q does not say %q", errs[i].Error(), w)
				}
			}
		})
	}
}
