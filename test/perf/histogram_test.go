package perf

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHistogram(t *testing.T) {
	text := `# TYPE strata_hub_dispatch_pass_seconds histogram
strata_hub_dispatch_pass_seconds_bucket{le="0.01"} 10
strata_hub_dispatch_pass_seconds_bucket{le="0.1"} 90
strata_hub_dispatch_pass_seconds_bucket{le="1"} 100
strata_hub_dispatch_pass_seconds_bucket{le="+Inf"} 100
strata_hub_dispatch_pass_seconds_sum 4.5
strata_hub_dispatch_pass_seconds_count 100
`
	h, err := parseHistogram([]byte(text), "strata_hub_dispatch_pass_seconds")
	if err != nil {
		t.Fatal(err)
	}
	want := histogram{bounds: []float64{0.01, 0.1, 1, math.Inf(1)}, counts: []float64{10, 90, 100, 100}, sum: 4.5}
	if diff := cmp.Diff(want, h, cmp.AllowUnexported(histogram{})); diff != "" {
		t.Errorf("parse (-want,+got):\n%s", diff)
	}
	for _, tc := range []struct {
		q, want float64
	}{
		{0.05, 0.005}, // within the first bucket, from 0
		{0.5, 0.055},  // 50 of the 80 in (0.01, 0.1]
		{0.99, 0.91},  // 9 of the 10 in (0.1, 1]
		{1, 1},
	} {
		if got := h.quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	earlier := histogram{bounds: h.bounds, counts: []float64{10, 10, 10, 10}, sum: 0.05}
	d := h.since(earlier)
	if diff := cmp.Diff([]float64{0, 80, 90, 90}, d.counts); diff != "" {
		t.Errorf("since (-want,+got):\n%s", diff)
	}
	if _, err := parseHistogram([]byte("other_metric 1\n"), "strata_hub_dispatch_pass_seconds"); err == nil {
		t.Error("parseHistogram of a text without it: no error")
	}
}

func TestParseVMRSS(t *testing.T) {
	got, err := parseVMRSS([]byte("Name:\tstrata-hub\nVmPeak:\t 2000 kB\nVmRSS:\t  123456 kB\nThreads:\t12\n"))
	if err != nil || got != 123456 {
		t.Errorf("parseVMRSS = %d, %v; want 123456", got, err)
	}
	if _, err := parseVMRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("parseVMRSS without VmRSS: no error")
	}
}
