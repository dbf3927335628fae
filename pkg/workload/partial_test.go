package workload

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestJobMinCount(t *testing.T) {
	indexed := func(parallelism, completions int32, annotations map[string]string) *batchv1.Job {
		j := job(parallelism, completions, nil)
		j.Annotations = annotations
		return j
	}
	nonIndexed := func(parallelism int32, annotations map[string]string) *batchv1.Job {
		j := job(parallelism, parallelism, nil)
		j.Annotations = annotations
		j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
		return j
	}
	key := func(k string) string { return field.NewPath("metadata", "annotations").Key(k).String() }
	for name, tc := range map[string]struct {
		job      *batchv1.Job
		want     *int32
		wantErrs []string
	}{
		"none":                 {job: nonIndexed(4, nil)},
		"strata's":             {job: nonIndexed(4, map[string]string{"strata.dev/job-min-parallelism": "2"}), want: ptr.To[int32](2)},
		"Kueue's":              {job: nonIndexed(4, map[string]string{"kueue.x-k8s.io/job-min-parallelism": "3"}), want: ptr.To[int32](3)},
		"both, the same value": {job: nonIndexed(4, map[string]string{"kueue.x-k8s.io/job-min-parallelism": "3", "strata.dev/job-min-parallelism": "3"}), want: ptr.To[int32](3)},
		"both, different values": {job: nonIndexed(4, map[string]string{"kueue.x-k8s.io/job-min-parallelism": "3", "strata.dev/job-min-parallelism": "2"}),
			wantErrs: []string{key("kueue.x-k8s.io/job-min-parallelism")}},
		"zero":             {job: nonIndexed(4, map[string]string{"strata.dev/job-min-parallelism": "0"}), wantErrs: []string{key("strata.dev/job-min-parallelism")}},
		"all the pods":     {job: nonIndexed(4, map[string]string{"strata.dev/job-min-parallelism": "4"}), wantErrs: []string{key("strata.dev/job-min-parallelism")}},
		"not a number":     {job: nonIndexed(4, map[string]string{"strata.dev/job-min-parallelism": "two"}), wantErrs: []string{key("strata.dev/job-min-parallelism")}},
		"one pod, min one": {job: nonIndexed(1, map[string]string{"strata.dev/job-min-parallelism": "1"}), wantErrs: []string{key("strata.dev/job-min-parallelism")}},
		"completions cap":  {job: job(8, 3, nil), want: nil},
		"completions follow, Indexed": {job: indexed(4, 4, map[string]string{"strata.dev/job-min-parallelism": "1", "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}),
			want: ptr.To[int32](1)},
		"completions follow, NonIndexed": {job: nonIndexed(4, map[string]string{"strata.dev/job-min-parallelism": "1", "strata.dev/job-completions-equal-parallelism": "true"}),
			wantErrs: []string{key("strata.dev/job-completions-equal-parallelism")}},
		"completions follow, more completions": {job: indexed(4, 8, map[string]string{"strata.dev/job-min-parallelism": "1", "strata.dev/job-completions-equal-parallelism": "true"}),
			wantErrs: []string{key("strata.dev/job-completions-equal-parallelism")}},
		"completions follow, not a boolean": {job: indexed(4, 4, map[string]string{"strata.dev/job-min-parallelism": "1", "strata.dev/job-completions-equal-parallelism": "yes"}),
			wantErrs: []string{key("strata.dev/job-completions-equal-parallelism")}},
	} {
		t.Run(name, func(t *testing.T) {
			got, errs := JobMinCount(tc.job, JobPodCount(tc.job))
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Field)
			}
			if diff := cmp.Diff(tc.wantErrs, gotErrs); diff != "" {
				t.Errorf("errors (-want,+got):\n%s\n%v", diff, errs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("min count (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestJobPodSetsAsAsked: a Job a partial admission started with fewer pods
// still asks for all of them, with its minCount.
func TestJobPodSetsAsAsked(t *testing.T) {
	j := job(3, 3, nil)
	j.Annotations = map[string]string{
		strata.JobMinParallelismAnnotation: "2",
		strata.PartialAdmissionAnnotation:  `{"parallelism":6,"completions":6}`,
		strata.AddedByAdmissionAnnotation:  "{}",
	}
	if n, ok := JobRunningPartially(j); !ok || n != 3 {
		t.Errorf("JobRunningPartially() = %d, %t; want 3, true", n, ok)
	}
	podSets, errs := JobPodSets(j)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, want := podSets[0].Count, int32(6); got != want {
		t.Errorf("count = %d, want %d", got, want)
	}
	if diff := cmp.Diff(ptr.To[int32](2), podSets[0].MinCount); diff != "" {
		t.Errorf("min count (-want,+got):\n%s", diff)
	}
	// A record is believed only on a Job an admission started, and only
	// for more pods than it runs (the user may write it too).
	for name, annotations := range map[string]map[string]string{
		"unreadable":         {strata.PartialAdmissionAnnotation: "{broken", strata.AddedByAdmissionAnnotation: "{}"},
		"not started":        {strata.PartialAdmissionAnnotation: `{"parallelism":6}`},
		"fewer than it runs": {strata.PartialAdmissionAnnotation: `{"parallelism":1}`, strata.AddedByAdmissionAnnotation: "{}"},
	} {
		j.Annotations = annotations
		if podSets, _ := JobPodSets(j); podSets[0].Count != 3 {
			t.Errorf("%s record: count = %d, want the spec's 3", name, podSets[0].Count)
		}

	}
}

// TestReclaimableUnderPartialAdmission: reclaimable pods are counted
// against the pods a pod set asks for; an admission of fewer holds only
// those of its own that the rest of the job does not need.
func TestReclaimableUnderPartialAdmission(t *testing.T) {
	wl := &strata.Workload{
		Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: 6, MinCount: ptr.To[int32](2)}}},
		Status: strata.WorkloadStatus{
			ReclaimablePods: []strata.ReclaimablePod{{Name: "main", Count: 4}},
			Admission:       &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Count: 4}}},
		},
	}
	// 2 pods still needed of the 6 asked: of the 4 admitted, 2 are not.
	if got := Reclaimable(wl, "main"); got != 2 {
		t.Errorf("Reclaimable() = %d, want 2", got)
	}
	wl.Status.Admission.PodSetAssignments[0].Count = 2
	if got := Reclaimable(wl, "main"); got != 0 {
		t.Errorf("admitted with 2: Reclaimable() = %d, want 0", got)
	}
	wl.Status.Admission.PodSetAssignments[0].Count = 6
	if got := Reclaimable(wl, "main"); got != 4 {
		t.Errorf("admitted whole: Reclaimable() = %d, want 4", got)
	}
}

func TestReducedCounts(t *testing.T) {
	ps := func(count int32, minCount *int32) strata.PodSet {
		return strata.PodSet{Name: "p", Count: count, MinCount: minCount}
	}
	sliced := func(count int32, minCount int32, sizes ...int32) strata.PodSet {
		p := ps(count, ptr.To(minCount))
		p.TopologyRequest = &strata.PodSetTopologyRequest{PodSetSliceSize: ptr.To(sizes[0])}
		if len(sizes) > 1 {
			for _, size := range sizes {
				p.TopologyRequest.PodSetSliceRequiredTopologyConstraints = append(p.TopologyRequest.PodSetSliceRequiredTopologyConstraints,
					strata.PodSetSliceTopologyConstraint{Topology: "l", Size: size})
			}
		}
		return p
	}
	for name, tc := range map[string]struct {
		podSets       []strata.PodSet
		partialSlices bool
		reducible     int32
		k             int32
		want          []int32
	}{
		"slices of 4: whole slices, the minimum rounded up to one": {
			podSets: []strata.PodSet{sliced(16, 3, 4)}, reducible: 12, k: 3, want: []int32{12}},
		"slices of 4, at the minimum":         {podSets: []strata.PodSet{sliced(16, 3, 4)}, reducible: 12, k: 12, want: []int32{4}},
		"slices of 4, partial slices allowed": {podSets: []strata.PodSet{sliced(16, 3, 4)}, partialSlices: true, reducible: 13, k: 3, want: []int32{13}},
		"two layers, 4 and 2: whole outer slices even with partial slices allowed": {
			podSets: []strata.PodSet{sliced(12, 2, 4, 2)}, partialSlices: true, reducible: 8, k: 3, want: []int32{8}},
		"slices: no whole slice below count at or above the minimum": {podSets: []strata.PodSet{sliced(8, 5, 4)}, k: 2, want: []int32{8}},
		"no minCount":           {podSets: []strata.PodSet{ps(4, nil)}, k: 1, want: []int32{4}},
		"one pod set, none off": {podSets: []strata.PodSet{ps(8, ptr.To[int32](2))}, reducible: 6, k: 0, want: []int32{8}},
		"one pod set, 3 off":    {podSets: []strata.PodSet{ps(8, ptr.To[int32](2))}, reducible: 6, k: 3, want: []int32{5}},
		"one pod set, all off":  {podSets: []strata.PodSet{ps(8, ptr.To[int32](2))}, reducible: 6, k: 6, want: []int32{2}},
		"in proportion, rounded so that none goes below its minCount": {
			podSets: []strata.PodSet{ps(1, nil), ps(10, ptr.To[int32](4)), ps(5, ptr.To[int32](3))}, reducible: 8, k: 5,
			// 6·5/8 = 3 off the second, 2·5/8 = 1 off the third.
			want: []int32{1, 7, 4}},
		"minCount not below count": {podSets: []strata.PodSet{ps(3, ptr.To[int32](3))}, k: 1, want: []int32{3}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Reducible(tc.podSets, tc.partialSlices); got != tc.reducible {
				t.Errorf("Reducible() = %d, want %d", got, tc.reducible)
			}
			if diff := cmp.Diff(tc.want, ReducedCounts(tc.podSets, tc.k, tc.partialSlices)); diff != "" {
				t.Errorf("ReducedCounts() (-want,+got):\n%s", diff)
			}
			// More taken away never gives more pods (the binary search
			// relies on it), nor fewer than the minimum.
			prev := ReducedCounts(tc.podSets, 0, tc.partialSlices)
			for k := int32(1); k <= tc.reducible; k++ {
				cur := ReducedCounts(tc.podSets, k, tc.partialSlices)
				for i := range cur {
					if cur[i] > prev[i] || tc.podSets[i].MinCount != nil && cur[i] < *tc.podSets[i].MinCount {
						t.Errorf("k=%d: counts %v after %v", k, cur, prev)
					}
				}
				prev = cur
			}
		})
	}
}

func TestAdmitsCount(t *testing.T) {
	partial := &strata.PodSet{Count: 6, MinCount: ptr.To[int32](2)}
	whole := &strata.PodSet{Count: 6}
	for _, tc := range []struct {
		ps    *strata.PodSet
		count int32
		want  bool
	}{
		{whole, 6, true}, {whole, 5, false}, {whole, 7, false},
		{partial, 6, true}, {partial, 2, true}, {partial, 4, true}, {partial, 1, false}, {partial, 7, false},
	} {
		if got := AdmitsCount(tc.ps, tc.count); got != tc.want {
			t.Errorf("AdmitsCount(count %d, minCount %v, %d) = %t, want %t", tc.ps.Count, tc.ps.MinCount, tc.count, got, tc.want)
		}
	}
}

func TestCappedCounts(t *testing.T) {
	podSets := []strata.PodSet{
		{Name: "main", Count: 8, MinCount: ptr.To[int32](2)},
		{Name: "other", Count: 4},
	}
	cases := []struct {
		name   string
		cap    *string
		want   []int32
		wantOK bool
	}{
		{name: "no cap"},
		{name: "capped", cap: ptr.To("main=6"), want: []int32{6, 4}, wantOK: true},
		{name: "never below minCount", cap: ptr.To("main=1"), want: []int32{2, 4}, wantOK: true},
		{name: "a pod set without minCount is capped too", cap: ptr.To("main=6, other=3"), want: []int32{6, 3}, wantOK: true},
		{name: "not above its count", cap: ptr.To("main=9"), want: []int32{8, 4}, wantOK: true},
		{name: "entries that do not parse are not read", cap: ptr.To("main=six,other,=3,gone=1,other=-1"), want: []int32{8, 4}, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: podSets}}
			if tc.cap != nil {
				wl.Annotations = map[string]string{strata.PodSetCountsAnnotation: *tc.cap}
			}
			got, ok := CappedCounts(wl)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CappedCounts (-want,+got):\n%s", diff)
			}
		})
	}
	if got, want := FormatPodSetCounts([]strata.PodSetCount{{Name: "main", Count: 6}, {Name: "other", Count: 3}}), "main=6,other=3"; got != want {
		t.Errorf("FormatPodSetCounts = %q, want %q", got, want)
	}
}

func TestFewestTakenAway(t *testing.T) {
	cases := []struct {
		name string
		// total is Reducible; admissible from is the fewest taken away
		// that admits (0: none does).
		total, from int32
		wantK       int32
		wantOK      bool
	}{
		{name: "nothing to take away", total: 0, from: 1},
		{name: "not even the fewest pods", total: 10, from: 0},
		{name: "one taken away", total: 10, from: 1, wantK: 1, wantOK: true},
		{name: "the middle", total: 10, from: 6, wantK: 6, wantOK: true},
		{name: "only the fewest pods", total: 10, from: 10, wantK: 10, wantOK: true},
		{name: "one to take away", total: 1, from: 1, wantK: 1, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[int32]int{}
			k, v, ok := FewestTakenAway(tc.total, func(k int32) (string, bool) {
				calls[k]++
				return fmt.Sprintf("taken %d", k), tc.from > 0 && k >= tc.from
			})
			if k != tc.wantK || ok != tc.wantOK {
				t.Fatalf("got %d, %v; want %d, %v", k, ok, tc.wantK, tc.wantOK)
			}
			if want := fmt.Sprintf("taken %d", k); ok && v != want {
				t.Errorf("value %q, want %q: what try found for k", v, want)
			}
			for k, n := range calls {
				if n > 1 {
					t.Errorf("try(%d) called %d times, want once", k, n)
				}
			}
			if limit := 2 + bits.Len32(uint32(tc.total)); len(calls) > limit {
				t.Errorf("try called for %d counts, want at most %d", len(calls), limit)
			}
		})
	}
}

func TestFewerPods(t *testing.T) {
	podSets := []strata.PodSet{{Name: "leader", Count: 1}, {Name: "workers", Count: 12}, {Name: "ps", Count: 4}}
	cases := []struct {
		counts []int32
		want   string
	}{
		{counts: []int32{1, 12, 4}, want: ""},
		{counts: []int32{1, 8, 4}, want: "8 of the 12 pods of pod set workers"},
		{counts: []int32{1, 8, 2}, want: "8 of the 12 pods of pod set workers, 2 of the 4 pods of pod set ps"},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, FewerPods(podSets, tc.counts)); diff != "" {
			t.Errorf("FewerPods(%v) (-want,+got):\n%s", tc.counts, diff)
		}
	}
}
