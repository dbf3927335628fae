package perf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseWrites(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="strata.dev",resource="workloads",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 1990
apiserver_request_total{code="409",component="apiserver",dry_run="",group="strata.dev",resource="workloads",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="strata.dev",resource="workloads",scope="namespace",subresource="",verb="LIST",version="v1beta1"} 7
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 5
`
	got, err := parseWrites([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := apiCounts{"POST jobs": 1000, "PUT workloads/status": 2000, "conflict PUT workloads/status": 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if got, want := got.total(), 3000.0; got != want {
		t.Errorf("total() = %v, want %v", got, want)
	}
	later := apiCounts{"POST jobs": 1500, "PUT workloads/status": 2000, "conflict PUT workloads/status": 10, "POST events": 4}
	if diff := cmp.Diff(apiCounts{"POST jobs": 500, "POST events": 4}, later.since(got)); diff != "" {
		t.Errorf("since (-want,+got):\n%s", diff)
	}
	if got, want := later.since(got).perJob(4), "POST jobs:125.00,POST events:1.00"; got != want {
		t.Errorf("perJob = %q, want %q", got, want)
	}
	reads, err := parseRequests([]byte(text), readVerbs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(apiCounts{"LIST workloads": 7}, reads); diff != "" {
		t.Errorf("reads (-want,+got):\n%s", diff)
	}
}
