// Package kubectlstrata is the kubectl-strata plugin: inspecting topologies,
// capacity and placements, and simulating placements offline.
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
		Short:       "Inspect and simulate Strata topology-aware placements",
		Version:     version.String(Name),
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newSimulateCommand())
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
