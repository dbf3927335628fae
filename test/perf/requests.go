package perf

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// requests counts the API requests a client makes, by verb and resource,
// so that the benchmark can say what each Job costs the API server.
// Watches are left out: they are long-lived, not per Job.
type requests struct {
	mu      sync.Mutex
	n       map[string]int
	latency []time.Duration // of writes
}

// wrap makes cfg's transport count into r.
func (r *requests) wrap(cfg *rest.Config) {
	r.n = map[string]int{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				return rt.RoundTrip(req)
			}
			start := time.Now()
			resp, err := rt.RoundTrip(req)
			r.mu.Lock()
			r.n[req.Method+" "+resourceOf(req.URL.Path)]++
			if req.Method != http.MethodGet {
				r.latency = append(r.latency, time.Since(start))
			}
			r.mu.Unlock()
			return resp, err
		})
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// resourceOf is the resource (and subresource) a request path names:
// /apis/strata.dev/v1beta1/namespaces/ns/workloads/w/status is
// workloads/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}

// perJob describes the writes counted so far divided by jobs, most
// frequent first, and resets the counts.
func (r *requests) perJob(jobs int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type count struct {
		what string
		n    int
	}
	var writes, reads []count
	total := 0
	for what, n := range r.n {
		if strings.HasPrefix(what, "GET ") {
			reads = append(reads, count{what, n})
			continue
		}
		writes = append(writes, count{what, n})
		total += n
	}
	byCount := func(a, b count) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.what, b.what)
	}
	slices.SortFunc(writes, byCount)
	slices.SortFunc(reads, byCount)
	out := []string{fmt.Sprintf("%.2f", float64(total)/float64(jobs))}
	for _, w := range writes {
		out = append(out, fmt.Sprintf("%s %.2f", w.what, float64(w.n)/float64(jobs)))
	}
	if len(r.latency) > 0 {
		out = append(out, fmt.Sprintf("write latency p50 %s p90 %s",
			pct(r.latency, 50).Round(time.Millisecond), pct(r.latency, 90).Round(time.Millisecond)))
	}
	// Reads (lists and gets, not watches) are few and come mostly from
	// start-up: counted, not divided.
	var rs []string
	for _, rd := range reads {
		rs = append(rs, fmt.Sprintf("%s %d", rd.what, rd.n))
	}
	if len(rs) > 0 {
		out = append(out, "reads: "+strings.Join(rs, " "))
	}
	clear(r.n)
	r.latency = nil
	return strings.Join(out, ", ")
}

// pct is the p-th percentile (0-100) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
