package perf

import "testing"

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/strata.dev/v1beta1/namespaces/ns/workloads/w/status": "workloads/status",
		"/apis/strata.dev/v1beta1/namespaces/ns/workloads":          "workloads",
		"/api/v1/namespaces/ns/pods/p":                              "pods",
		"/api/v1/namespaces/ns":                                     "namespaces",
		"/apis/batch/v1/namespaces/ns/jobs/j":                       "jobs",
		"/apis/strata.dev/v1beta1/capacitysummaries/s/status":       "capacitysummaries/status",
		"/api/v1/nodes": "nodes",
		"/api":          "/api",
		"/api/v1":       "discovery",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}
