package workercluster

import (
	"fmt"
	"slices"
	"strings"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
)

// maxGoingCopies bounds the copies a Draining condition names.
const maxGoingCopies = 3

// goingCopies tells, for a Draining condition, which copies being deleted
// wait for which pods, as the worker's agent reports them
// (strata.GoingPodsAnnotation): "; waiting for the pods of ns/a: p-0
// (Terminating since ..., node n1)". "" when none reports pods.
func goingCopies(copies []jobs.Job) string {
	var parts []string
	for _, c := range copies {
		obj := c.Object()
		pods := obj.GetAnnotations()[strata.GoingPodsAnnotation]
		if obj.GetDeletionTimestamp().IsZero() || pods == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s/%s: %s", obj.GetNamespace(), obj.GetName(), pods))
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	more := ""
	if len(parts) > maxGoingCopies {
		more = fmt.Sprintf("; and %d more copies", len(parts)-maxGoingCopies)
		parts = parts[:maxGoingCopies]
	}
	return intake.Truncate(". Waiting for the pods of "+strings.Join(parts, "; of ")+more, intake.MaxConditionMessage/2)
}
