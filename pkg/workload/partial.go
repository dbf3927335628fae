package workload

import (
	"encoding/json"
	"fmt"
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
	if err != nil || n < 1 || n >= int64(count) {
		return nil, field.ErrorList{field.Invalid(path.Key(key), v,
			fmt.Sprintf("must be an integer between 1 and %d (one less than the Job's %d pods)", max(count-1, 1), count))}
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

// asAsked is the Job as it asked to run: with the parallelism and
// completions a partial admission's start replaced (JobPartialSizes), so
// that its Workload keeps asking for all its pods while fewer run.
func asAsked(job *batchv1.Job) *batchv1.Job {
	s, ok := JobPartialSizes(job)
	if !ok {
		return job
	}
	asked := *job
	asked.Spec.Parallelism = s.Parallelism
	if s.Completions != nil {
		asked.Spec.Completions = s.Completions
	}
	return &asked
}

// Reducible is the number of pods a workload's pod sets may be admitted
// without, in all (count − minCount over the pod sets with a minCount).
func Reducible(podSets []strata.PodSet) int32 {
	var total int32
	for _, ps := range podSets {
		if ps.MinCount != nil && *ps.MinCount < ps.Count {
			total += ps.Count - *ps.MinCount
		}
	}
	return total
}

// ReducedCounts are the pod sets' counts with k of the Reducible pods
// taken away, shared out in proportion to what each may lose (rounded
// down, so that no pod set goes below its minCount): k = 0 gives every
// count, k = Reducible every minCount.
func ReducedCounts(podSets []strata.PodSet, k int32) []int32 {
	total := Reducible(podSets)
	counts := make([]int32, len(podSets))
	for i, ps := range podSets {
		counts[i] = ps.Count
		if total == 0 || ps.MinCount == nil || *ps.MinCount >= ps.Count {
			continue
		}
		delta := int64(ps.Count - *ps.MinCount)
		counts[i] = ps.Count - int32(delta*int64(k)/int64(total))
	}
	return counts
}

// AdmitsCount says whether an admission of count pods is one of the pod
// set's: all its pods, or, with a minCount, at least that many.
func AdmitsCount(ps *strata.PodSet, count int32) bool {
	return count == ps.Count || (ps.MinCount != nil && count >= *ps.MinCount && count < ps.Count)
}
