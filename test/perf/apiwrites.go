package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// apiCounts are the requests of some verbs (writes, or reads) an API
// server served, from its own apiserver_request_total metric: by "VERB
// resource[/subresource]" (POST jobs, PUT workloads/status, GET jobs),
// whoever sent them. Unlike a client-side counter (requests), this counts
// every client of the server, including those a benchmark cannot wrap,
// such as the hub's connections to its workers.
type apiCounts map[string]float64

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// readVerbs are the verbs of apiserver_request_total that read. Watches
// are left out: they are long-lived, not per Job.
var readVerbs = map[string]bool{"GET": true, "LIST": true}

// conflictPrefix starts the apiCounts keys of writes answered 409
// Conflict ("conflict PUT workloads/status"), counted under their own key
// too.
const conflictPrefix = "conflict "

var metricLabel = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// scrapeRequests reads the write and the read counts of the API server of
// cfg.
func scrapeRequests(ctx context.Context, cfg *rest.Config) (writes, reads apiCounts, err error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	text, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	if writes, err = parseRequests(text, writeVerbs); err != nil {
		return nil, nil, err
	}
	reads, err = parseRequests(text, readVerbs)
	return writes, reads, err
}

// parseWrites sums apiserver_request_total's write verbs in a metrics
// text by verb and resource.
func parseWrites(text []byte) (apiCounts, error) { return parseRequests(text, writeVerbs) }

// parseRequests sums apiserver_request_total's counts of the given verbs
// in a metrics text by verb and resource.
func parseRequests(text []byte, verbs map[string]bool) (apiCounts, error) {
	out := apiCounts{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return nil, fmt.Errorf("malformed metric line %q", line)
		}
		labels := map[string]string{}
		for _, m := range metricLabel.FindAllStringSubmatch(rest[:end], -1) {
			labels[m[1]] = m[2]
		}
		if !verbs[labels["verb"]] {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest[end+1:])[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		what := labels["resource"]
		if labels["subresource"] != "" {
			what += "/" + labels["subresource"]
		}
		out[labels["verb"]+" "+what] += v
		if labels["code"] == "409" {
			out[conflictPrefix+labels["verb"]+" "+what] += v
		}
	}
	return out, sc.Err()
}

// since is what was written after before.
func (w apiCounts) since(before apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range w {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// add adds o's counts to w.
func (w apiCounts) add(o apiCounts) {
	for k, v := range o {
		w[k] += v
	}
}

// total is the number of writes (conflicts included once).
func (w apiCounts) total() float64 {
	t := 0.0
	for k, v := range w {
		if !strings.HasPrefix(k, conflictPrefix) {
			t += v
		}
	}
	return t
}

// perJob describes the writes divided by jobs: the total, then each kind,
// most frequent first, "POST jobs:1.00,PUT workloads/status:2.00".
func (w apiCounts) perJob(jobs int) string {
	keys := slices.Collect(maps.Keys(w))
	slices.SortFunc(keys, func(a, b string) int {
		if w[a] != w[b] {
			if w[a] > w[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%.2f", k, w[k]/float64(jobs)))
	}
	return strings.Join(parts, ",")
}
