package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fqName reads a metric's name from its description.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// TestEveryMetricIsDocumented: docs/operations.md's tables name every
// metric the binaries serve, so that a new one cannot go undocumented.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range registered {
		ch := make(chan *prometheus.Desc, 4)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names = append(names, m[1])
		}
	}
	if len(names) < 40 {
		t.Fatalf("%d metrics described, want every one: %v", len(names), names)
	}
	for _, name := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not in docs/operations.md", name)
		}
	}
}
