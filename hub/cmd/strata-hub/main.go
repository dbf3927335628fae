// Command strata-hub places Jobs submitted to the hub cluster on the worker
// cluster where they fit best and dispatches them there.
package main

import (
	"os"

	// The hub image has no CA bundle; a worker endpoint whose kubeconfig,
	// ClusterProfile or ManagedCluster names no CA is then checked against
	// these (Mozilla's) roots. Where the system has roots, they are used.
	_ "golang.org/x/crypto/x509roots/fallback"

	"strata.dev/strata/hub"
	"strata.dev/strata/pkg/cmdutil"
)

func main() {
	os.Exit(cmdutil.Execute(hub.NewCommand()))
}
