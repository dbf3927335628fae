package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPagesAreCurrent: the committed reference pages are what the sources
// give now (make verify checks it too), and they carry what a reader
// looks for.
func TestPagesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, "docs", "reference", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/reference/%s is stale: run make generate", name)
		}
	}
	for name, wants := range map[string][]string{
		"crds.md": {
			"| `spec.cohort` | string |",
			"| `spec.preemption.withinClusterQueue` | string (Never, LowerPriority, LowerOrNewerEqualPriority, Any) | (default \"Never\")",
			"| `value` | integer | (required) value is the priority",
		},
		"config.md": {"## HubConfiguration", "| `dispatch` |"},
		"values.md": {"## strata-hub", "| `image.tag` | `\"\"` | defaults to the chart's appVersion |"},
	} {
		for _, w := range wants {
			if !strings.Contains(string(pages[name]), w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
}
