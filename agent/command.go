// Package agent is strata-agent: the worker-cluster side of Strata.
package agent

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"strata.dev/strata/agent/controller"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/version"
)

// Name of the binary, also its leader-election lease and user agent.
const Name = "strata-agent"

// NewCommand returns the strata-agent command.
func NewCommand() *cobra.Command {
	var opts cmdutil.Options
	cmd := &cobra.Command{
		Use:     Name,
		Short:   "Topology-aware scheduling of batch/v1 Jobs on one worker cluster",
		Long:    "strata-agent admits Jobs labelled strata.dev/queue-name on this cluster with topology-aware scheduling, and publishes CapacitySummary objects for the Strata hub.",
		Version: version.String(Name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadAgent(opts.ConfigFile)
			if err != nil {
				return err
			}
			mgr, err := opts.NewManager(Name, scheme.New(), nil)
			if err != nil {
				return err
			}
			ctx := ctrl.SetupSignalHandler()
			if err := controller.SetupControllers(ctx, mgr, cfg); err != nil {
				return err
			}
			ctrl.Log.WithName("setup").Info("Starting", "version", version.Version,
				"requiredAlgorithm", cfg.TopologyAwareScheduling.RequiredAlgorithm,
				"preferredAlgorithm", cfg.TopologyAwareScheduling.PreferredAlgorithm,
				"unconstrainedAlgorithm", cfg.TopologyAwareScheduling.UnconstrainedAlgorithm)
			return mgr.Start(ctx)
		},
	}
	opts.AddFlags(cmd)
	return cmd
}
