package workload

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

// Partial admission (Kueue's KEP-420): a pod set with a minCount is admitted
// with fewer pods when all of them do not fit, as many as fit and at least
// minCount. A batch/v1 Job asks for it with the job-min-parallelism
// annotation and runs with the admitted count as its parallelism.

// prefixed reads the annotation of the given name under strata.dev/ or
// kueue.x-k8s.io/: its key and value, and whether either is set; an error
// at path (the annotations map) when both are set and disagree.
func prefixed(m map[string]string, name string, path *field.Path) (key, value string, ok bool, errs field.ErrorList) {
	sv, sok := m[strata.Prefix+name]
	kv, kok := m[strata.KueuePrefix+name]
	switch {
	case sok && kok && sv != kv:
		return "", "", false, field.ErrorList{field.Invalid(path.Key(strata.KueuePrefix+name), kv,
			fmt.Sprintf("conflicts with %s=%q; set only one of them", strata.Prefix+name, sv))}
	case sok:
		return strata.Prefix + name, sv, true, nil
	case kok:
		return strata.KueuePrefix + name, kv, true, nil
	}
	return "", "", false, nil
}

var (
	minParallelismName   = strings.TrimPrefix(strata.JobMinParallelismAnnotation, strata.Prefix)
	completionsEqualName = strings.TrimPrefix(strata.JobCompletionsEqualParallelismAnnotation, strata.Prefix)
)

// JobMinCount is the fewest pods a Job of count pods may be admitted with
// (its job-min-parallelism annotation), nil when it does not ask for
// partial admission. Errors point into its annotations: a value that is
// not an integer between 1 and count−1 (as Kueue's), and a
// job-completions-equal-parallelism that is not "true" or "false", or is
// "true" on a Job that is not Indexed with completions equal to its
// parallelism (whose completions could not follow).
func JobMinCount(job *batchv1.Job, count int32) (*int32, field.ErrorList) {
	path := field.NewPath("metadata", "annotations")
	key, v, ok, errs := prefixed(job.Annotations, minParallelismName, path)
	if len(errs) > 0 || !ok {
		return nil, errs
	}
	n, err := strconv.ParseInt(v, 10, 32)
	switch {
	case count <= 1:
		return nil, field.ErrorList{field.Invalid(path.Key(key), v, fmt.Sprintf("a Job of %d pod cannot run with fewer", count))}
	case err != nil || n < 1 || n >= int64(count):
		return nil, field.ErrorList{field.Invalid(path.Key(key), v,
			fmt.Sprintf("must be an integer between 1 and %d (one less than the Job's %d pods)", count-1, count))}
	}
	ckey, cv, cok, errs := prefixed(job.Annotations, completionsEqualName, path)
	if len(errs) > 0 {
		return nil, errs
	}
	if cok {
		switch {
		case cv != "true" && cv != "false":
			return nil, field.ErrorList{field.Invalid(path.Key(ckey), cv, `must be "true" or "false"`)}
		case cv == "true" && (ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) != batchv1.IndexedCompletion ||
			job.Spec.Completions == nil || ptr.Deref(job.Spec.Parallelism, 1) != *job.Spec.Completions):
			return nil, field.ErrorList{field.Invalid(path.Key(ckey), cv,
				"needs an Indexed Job whose completions equal its parallelism (only those may change together)")}
		}
	}
	return ptr.To(int32(n)), nil
}

// JobCompletionsFollow says whether a Job's completions follow the
// parallelism it is admitted with (job-completions-equal-parallelism).
func JobCompletionsFollow(job *batchv1.Job) bool {
	_, v, ok, _ := prefixed(job.Annotations, completionsEqualName, field.NewPath("metadata", "annotations"))
	return ok && v == "true"
}

// PartialSizes are what a Job started with fewer pods than it asks for had
// in its spec before (strata.PartialAdmissionAnnotation).
type PartialSizes struct {
	Parallelism *int32 `json:"parallelism,omitempty"`
	Completions *int32 `json:"completions,omitempty"`
}

// JobPartialSizes reads a Job's PartialAdmissionAnnotation: the sizes it
// asked for before a partial admission started it, and whether it has a
// valid record.
func JobPartialSizes(job *batchv1.Job) (PartialSizes, bool) {
	v, ok := job.Annotations[strata.PartialAdmissionAnnotation]
	if !ok {
		return PartialSizes{}, false
	}
	var s PartialSizes
	if err := json.Unmarshal([]byte(v), &s); err != nil || s.Parallelism == nil {
		return PartialSizes{}, false
	}
	return s, true
}

// JobAsAsked is the Job as it asked to run: with the parallelism and
// completions a partial admission's start replaced (JobPartialSizes), so
// that its Workload keeps asking for all its pods while fewer run. The
// record counts only on a Job an admission started (AddedByAdmission)
// and only for more pods than it runs: the annotation is the user's to
// write too.
func JobAsAsked(job *batchv1.Job) *batchv1.Job {
	s, ok := JobPartialSizes(job)
	if _, started := job.Annotations[strata.AddedByAdmissionAnnotation]; !ok || !started || *s.Parallelism < ptr.Deref(job.Spec.Parallelism, 1) {
		return job
	}
	asked := *job
	asked.Spec.Parallelism = s.Parallelism
	if s.Completions != nil {
		asked.Spec.Completions = s.Completions
	}
	return &asked
}

// sliceUnit is what a pod set's count must be a multiple of for its
// slices: the least common multiple of its slice sizes; 1 without slices,
// or with one slice layer when partial slices are allowed (its last slice
// may be partial).
func sliceUnit(ps *strata.PodSet, partialSlices bool) int32 {
	r := ps.TopologyRequest
	if r == nil {
		return 1
	}
	var sizes []int32
	if r.PodSetSliceSize != nil {
		sizes = append(sizes, *r.PodSetSliceSize)
	}
	for _, c := range r.PodSetSliceRequiredTopologyConstraints {
		sizes = append(sizes, c.Size)
	}
	if len(sizes) == 0 || partialSlices && len(r.PodSetSliceRequiredTopologyConstraints) <= 1 {
		return 1
	}
	unit := int64(1)
	for _, size := range sizes {
		if size < 1 {
			continue
		}
		g, b := unit, int64(size)
		for b != 0 {
			g, b = b, g%b
		}
		unit = unit / g * int64(size)
		if unit > math.MaxInt32 {
			return math.MaxInt32
		}
	}
	return int32(unit)
}

// fewest is the fewest pods a pod set may be admitted with: its minCount,
// up to a whole number of slices (sliceUnit); its count when it has no
// minCount or cannot run with fewer.
func fewest(ps *strata.PodSet, partialSlices bool) int32 {
	if ps.MinCount == nil || *ps.MinCount >= ps.Count {
		return ps.Count
	}
	u := sliceUnit(ps, partialSlices)
	lo := (*ps.MinCount + u - 1) / u * u
	if lo >= ps.Count || lo < *ps.MinCount {
		return ps.Count
	}
	return lo
}

// Reducible is the number of pods a workload's pod sets may be admitted
// without, in all (count less the fewest each may run with).
func Reducible(podSets []strata.PodSet, partialSlices bool) int32 {
	var total int32
	for i := range podSets {
		total += podSets[i].Count - fewest(&podSets[i], partialSlices)
	}
	return total
}

// ReducedCounts are the pod sets' counts with about k of the Reducible
// pods taken away, shared out in proportion to what each may lose, each
// rounded down to whole slices and never below the fewest it may run with:
// k = 0 gives every count, k = Reducible every minimum. More taken away
// never gives more pods.
func ReducedCounts(podSets []strata.PodSet, k int32, partialSlices bool) []int32 {
	total := Reducible(podSets, partialSlices)
	counts := make([]int32, len(podSets))
	for i := range podSets {
		ps := &podSets[i]
		counts[i] = ps.Count
		lo := fewest(ps, partialSlices)
		if total == 0 || lo == ps.Count {
			continue
		}
		delta := int64(ps.Count - lo)
		c := ps.Count - int32(delta*int64(k)/int64(total))
		if c < ps.Count {
			u := sliceUnit(ps, partialSlices)
			c -= c % u
		}
		counts[i] = max(c, lo)
	}
	return counts
}

// JobRunningPartially says, for a Job a partial admission started (its
// record, PartialAdmissionAnnotation, on a Job an admission started), how
// many pods it runs at once now; false for any other Job.
func JobRunningPartially(job *batchv1.Job) (int32, bool) {
	_, recorded := job.Annotations[strata.PartialAdmissionAnnotation]
	_, started := job.Annotations[strata.AddedByAdmissionAnnotation]
	if !recorded || !started {
		return 0, false
	}
	return JobPodCount(job), true
}

// AdmitsCount says whether an admission of count pods is one of the pod
// set's: all its pods, or, with a minCount, at least that many.
func AdmitsCount(ps *strata.PodSet, count int32) bool {
	return count == ps.Count || (ps.MinCount != nil && count >= *ps.MinCount && count < ps.Count)
}

// WithCounts is a copy of wl whose pod sets ask for counts (one per pod
// set): the workload as admitted with fewer pods.
func WithCounts(wl *strata.Workload, counts []int32) *strata.Workload {
	sized := wl.DeepCopy()
	for i := range sized.Spec.PodSets {
		sized.Spec.PodSets[i].Count = counts[i]
	}
	return sized
}

// FewestTakenAway is the fewest pods, 1..total (Reducible), taken away
// (ReducedCounts) with which a workload is admissible, and what try
// found for it, given that more taken away never makes it less so; false
// when not even total is. try is called O(log total) times, once per k.
func FewestTakenAway[T any](total int32, try func(k int32) (T, bool)) (int32, T, bool) {
	type tried struct {
		v  T
		ok bool
	}
	memo := map[int32]tried{}
	at := func(k int32) tried {
		r, done := memo[k]
		if !done {
			r.v, r.ok = try(k)
			memo[k] = r
		}
		return r
	}
	if total <= 0 || !at(total).ok {
		var none T
		return 0, none, false
	}
	k := int32(sort.Search(int(total), func(i int) bool { return at(int32(i + 1)).ok })) + 1
	r := at(k)
	return k, r.v, true
}

// FewerPods says which pod sets counts (one per pod set) admit with fewer
// pods than they ask for: "8 of the 12 pods of pod set main, ..."; ""
// when none.
func FewerPods(podSets []strata.PodSet, counts []int32) string {
	var parts []string
	for i, c := range counts {
		if ps := &podSets[i]; c < ps.Count {
			parts = append(parts, fmt.Sprintf("%d of the %d pods of pod set %s", c, ps.Count, ps.Name))
		}
	}
	return strings.Join(parts, ", ")
}
