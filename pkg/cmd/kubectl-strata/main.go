// Command kubectl-strata is the kubectl plugin of Strata ("kubectl strata").
package main

import (
	"os"

	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/kubectlstrata"
)

func main() {
	os.Exit(cmdutil.Execute(kubectlstrata.NewCommand()))
}
