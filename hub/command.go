// Package hub is strata-hub: the fleet side of Strata.
package hub

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"strata.dev/strata/hub/controller"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/version"
)

// Name of the binary, also its leader-election lease and user agent.
const Name = "strata-hub"

// NewCommand returns the strata-hub command.
func NewCommand() *cobra.Command {
	var opts cmdutil.Options
	cmd := &cobra.Command{
		Use:     Name,
		Short:   "Federated topology-aware placement of batch/v1 Jobs across worker clusters",
		Long:    "strata-hub picks, for every Job labelled strata.dev/queue-name on the hub cluster, the worker cluster and flavor where its pods fit best, and dispatches it there.",
		Version: version.String(Name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadHub(opts.ConfigFile)
			if err != nil {
				return err
			}
			mgr, err := opts.NewManager(Name, scheme.New(), kinds.HubTransform())
			if err != nil {
				return err
			}
			if _, err := controller.SetupControllers(mgr, cfg, controller.WithRestartOnNewAPIs(cmdutil.DefaultAPIWatchInterval)); err != nil {
				return err
			}
			ctrl.Log.WithName("setup").Info("Starting", "version", version.Version,
				"admissionTimeout", cfg.Dispatch.AdmissionTimeout.Duration,
				"summaryStaleAfter", cfg.Dispatch.SummaryStaleAfter.Duration)
			return cmdutil.Restartable(mgr.Start(ctrl.SetupSignalHandler()))
		},
	}
	opts.AddFlags(cmd)
	return cmd
}
