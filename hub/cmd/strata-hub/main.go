// Command strata-hub places Jobs submitted to the hub cluster on the worker
// cluster where they fit best and dispatches them there.
package main

import (
	"os"

	"strata.dev/strata/hub"
	"strata.dev/strata/pkg/cmdutil"
)

func main() {
	os.Exit(cmdutil.Execute(hub.NewCommand()))
}
