package scheduler

import (
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"strata.dev/strata/pkg/metrics"
)

// TestRecordAttempt: a pass with pending workloads is an admission
// attempt, a success when it admitted one or more (Kueue's
// kueue_admission_attempts_total); a pass with nothing pending is none.
func TestRecordAttempt(t *testing.T) {
	cases := []struct {
		name              string
		tried, admitted   int
		success, rejected float64
	}{
		{name: "nothing pending", tried: 0, admitted: 0},
		{name: "none admitted", tried: 3, admitted: 0, rejected: 1},
		{name: "some admitted", tried: 3, admitted: 2, success: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			count := func(result string) float64 {
				return promtest.ToFloat64(metrics.AdmissionAttempts.WithLabelValues(result))
			}
			success, rejected := count(metrics.AttemptSuccess), count(metrics.AttemptInadmissible)
			recordAttempt(c.tried, c.admitted, time.Millisecond)
			if got := count(metrics.AttemptSuccess) - success; got != c.success {
				t.Errorf("success attempts counted: %v, want %v", got, c.success)
			}
			if got := count(metrics.AttemptInadmissible) - rejected; got != c.rejected {
				t.Errorf("inadmissible attempts counted: %v, want %v", got, c.rejected)
			}
		})
	}
}
