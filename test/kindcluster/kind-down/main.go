// Command kind-down deletes the e2e suite's kind clusters (make
// test-e2e-kind-down), through kind's Go API.
package main

import (
	"fmt"
	"os"

	"strata.dev/strata/test/kindcluster"
)

func main() {
	if err := kindcluster.DeleteAll(kindcluster.SuiteClusters...); err != nil {
		fmt.Fprintln(os.Stderr, "kind-down:", err)
		os.Exit(1)
	}
}
