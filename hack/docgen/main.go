// Command docgen writes the generated reference pages under
// docs/reference: the CRDs' fields (from the charts' CRDs), the
// configuration files' fields (from api/config/v1beta1) and the charts'
// values (from their commented values.yaml). make generate runs it from
// the repository's root, and make verify fails when a page is stale.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

// run writes the pages of the repository at root.
func run(root string) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	for name, data := range pages {
		if err := os.WriteFile(filepath.Join(root, "docs", "reference", name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Pages renders every reference page of the repository at root, by file
// name.
func Pages(root string) (map[string][]byte, error) {
	crds, err := CRDReference(root, filepath.Join("charts", "strata-hub", "crds"))
	if err != nil {
		return nil, err
	}
	config, err := ConfigReference(root, filepath.Join("api", "config", "v1beta1"))
	if err != nil {
		return nil, err
	}
	var values bytes.Buffer
	fmt.Fprintf(&values, header, "charts/*/values.yaml")
	values.WriteString("# Chart values\n\nEvery value of the two charts, with its default and the comment above it in `values.yaml`. " +
		"[install.md](../install.md) and [admin-guide.md](../admin-guide.md) say when to set them.\n")
	for _, chart := range []string{"strata-agent", "strata-hub"} {
		v, err := ValuesReference(root, filepath.Join("charts", chart))
		if err != nil {
			return nil, err
		}
		values.Write(v)
	}
	return map[string][]byte{"crds.md": crds, "config.md": config, "values.md": values.Bytes()}, nil
}
