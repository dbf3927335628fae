// Package agent is strata-agent: the worker-cluster side of Strata.
package agent

import (
	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			mgr, err := opts.NewManager(Name, scheme.New(), nil, LeaseCache(cfg.Fencing.Namespace))
			if err != nil {
				return err
			}
			ctx := ctrl.SetupSignalHandler()
			if err := controller.SetupControllers(ctx, mgr, cfg, controller.WithRestartOnNewAPIs(cmdutil.DefaultAPIWatchInterval)); err != nil {
				return err
			}
			ctrl.Log.WithName("setup").Info("Starting", "version", version.Version,
				"requiredAlgorithm", cfg.TopologyAwareScheduling.RequiredAlgorithm,
				"preferredAlgorithm", cfg.TopologyAwareScheduling.PreferredAlgorithm,
				"unconstrainedAlgorithm", cfg.TopologyAwareScheduling.UnconstrainedAlgorithm)
			return cmdutil.Restartable(mgr.Start(ctx))
		},
	}
	opts.AddFlags(cmd)
	return cmd
}

// LeaseCache limits the agent's cache of Leases to the fencing namespace,
// where the hubs' fencing Leases and the agent's records of them are: the
// rest of a cluster's Leases (every node's heartbeat in kube-node-lease,
// every 10 s) are not its business.
func LeaseCache(namespace string) func(*ctrl.Options) {
	return func(o *ctrl.Options) {
		if o.Cache.ByObject == nil {
			o.Cache.ByObject = map[client.Object]cache.ByObject{}
		}
		o.Cache.ByObject[&coordinationv1.Lease{}] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	}
}
