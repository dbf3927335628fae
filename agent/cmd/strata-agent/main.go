// Command strata-agent runs topology-aware scheduling on one worker cluster
// and publishes its capacity summaries for the hub.
package main

import (
	"os"

	"strata.dev/strata/agent"
	"strata.dev/strata/pkg/cmdutil"
)

func main() {
	os.Exit(cmdutil.Execute(agent.NewCommand()))
}
