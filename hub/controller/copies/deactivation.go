package copies

import (
	"encoding/json"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
)

// maxDeactivationMessage bounds the worker's message kept in
// strata.DeactivatedByAnnotation.
const maxDeactivationMessage = 1024

// deactivation is what strata.DeactivatedByAnnotation holds: the outcome
// that the take-back of dispatch Dispatch is to record, once its copy is
// gone.
type deactivation struct {
	Dispatch string                 `json:"dispatch"`
	Result   strata.PlacementResult `json:"result"`
	Reason   string                 `json:"reason"`
	Cause    string                 `json:"cause"`
	Message  string                 `json:"message"`
}

// encodeDeactivation is strata.DeactivatedByAnnotation's value for the
// take-back of dispatch d that is to record o.
func encodeDeactivation(d string, o outcome) string {
	data, _ := json.Marshal(deactivation{Dispatch: d, Result: o.result, Reason: o.reason, Cause: o.cause,
		Message: intake.Truncate(o.message, maxDeactivationMessage)})
	return string(data)
}

// deactivatedBy returns the outcome that wl's strata.DeactivatedByAnnotation
// says the take-back of dispatch d is to record, when it names d: the
// hub's memory of that take-back, should the hub have restarted since it
// deactivated wl. An annotation of another (earlier) dispatch, or one that
// does not parse, says nothing.
func deactivatedBy(wl *strata.Workload, d string) (outcome, bool) {
	v, ok := wl.Annotations[strata.DeactivatedByAnnotation]
	if !ok || d == "" {
		return outcome{}, false
	}
	var a deactivation
	if err := json.Unmarshal([]byte(v), &a); err != nil || a.Dispatch != d || a.Cause == "" {
		return outcome{}, false
	}
	return outcome{result: a.Result, reason: a.Reason, cause: a.Cause, message: a.Message}, true
}
