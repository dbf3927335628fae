// Package kubectlstrata is the kubectl-strata plugin: live views of a hub's
// worker clusters, a worker's capacity per topology domain and a Job's
// placement, and placements simulated offline.
package kubectlstrata

import (
	"fmt"

	"github.com/spf13/cobra"

	"strata.dev/strata/pkg/version"
)

// Name of the plugin binary.
const Name = "kubectl-strata"

// NewCommand returns the kubectl-strata command tree.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: Name,
		// Shown as "kubectl strata" when invoked as a kubectl plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl strata"},
		Short:       "Inspect Strata clusters and placements, and simulate placements offline",
		Long: `kubectl strata reads Strata's objects on a live cluster, through the
kubeconfig as kubectl does (--kubeconfig, --context, -n):

  clusters   on a hub: the worker clusters, their connection and summaries,
             and where the hub's workloads are
  topology   on a worker: free capacity per topology domain, from the
             agent's capacity summaries
  explain    on a hub or a worker: why a Job waits, or where it runs
  queue      on a hub or a worker: what waits in a queue, in order
  dashboard  all of the above as a live web page on localhost

and answers "where would this job land?" offline, from files (simulate),
and writes the Strata objects that mean the same as Kueue's (migrate).`,
		Version: version.String(Name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newClustersCommand(), newTopologyCommand(), newExplainCommand(), newSimulateCommand(), newMigrateCommand(), newQueueCommand(), newDashboardCommand())
	cmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String(Name))
			return err
		},
	})
	return cmd
}
