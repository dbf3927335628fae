package kubectlstrata

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/simulate"
	"strata.dev/strata/pkg/tas"
)

func newSimulateCommand() *cobra.Command {
	var (
		files      []string
		clusters   []string
		configFile string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "simulate [--cluster NAME=FILE_OR_DIR ...] -f FILE_OR_DIR [-f ...] [--config CONFIG] [-o table|json|yaml]",
		Short: "Place workloads on a cluster, or a fleet of clusters, described by files, offline",
		Long: `simulate answers "where would this job land on this cluster?" with the
engine strata-agent runs. It reads multi-document YAML or JSON: Nodes (as
'kubectl get nodes -o yaml' prints them), Pods bound to nodes (their requests
count as used), Topology, ResourceFlavor, optional ClusterQueue (flavor
order) and LocalQueues (a Job's strata.dev/queue-name names a LocalQueue of
its namespace when the input has one, else a ClusterQueue), and the
workloads: batch/v1 Jobs with the pod-set annotations, or
Workloads. Workloads are placed in file order, each taking capacity from the
next.

With --cluster NAME=FILE_OR_DIR (repeatable), simulate answers "which cluster
and flavor would the hub choose?": each --cluster input is one worker
(Nodes, Pods, Topologies, ResourceFlavors), summarized with the agent's own
summarizer; the -f inputs are the hub's side: an optional ClusterQueue
(flavor order) and the workloads, placed in file order with the hub's
placement policy, each reserving capacity on its cluster for the ones after
it. --config is then a HubConfiguration (algorithms, placement policy).`,
		Example: `  kubectl strata simulate -f cluster.yaml -f jobs/
  kubectl strata simulate --cluster west=west/ --cluster east=east.yaml -f queue.yaml -f jobs/
  kubectl get nodes -o yaml > nodes.yaml && kubectl strata simulate -f nodes.yaml -f tas.yaml -f job.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no input: pass the cluster and the workloads with -f FILE_OR_DIR")
			}
			if !validFormat(output) {
				return fmt.Errorf("unknown output format %q (want one of %s)", output, strings.Join(simulate.Formats, ", "))
			}
			if len(clusters) > 0 {
				return simulateFleet(cmd, clusters, files, configFile, output)
			}
			cfg, err := config.LoadAgent(configFile)
			if err != nil {
				return err
			}
			in, err := simulate.Load(files...)
			if err != nil {
				return err
			}
			if len(in.Workloads) == 0 {
				return fmt.Errorf("the input has no Job or Workload to place")
			}
			results, err := simulate.Run(in, tas.OptionsFrom(cfg.TopologyAwareScheduling))
			if err != nil {
				return err
			}
			return simulate.Write(cmd.OutOrStdout(), results, output)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file or directory of YAML/JSON to read (repeatable)")
	cmd.Flags().StringArrayVar(&clusters, "cluster", nil, "a worker cluster NAME=FILE_OR_DIR (repeatable): simulate the hub's choice over these clusters")
	cmd.Flags().StringVar(&configFile, "config", "", "configuration file: the AgentConfiguration (algorithms), or with --cluster the HubConfiguration; defaults apply when unset")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// simulateFleet is simulate --cluster.
func simulateFleet(cmd *cobra.Command, clusterArgs, files []string, configFile, output string) error {
	clusters, err := simulate.ParseClusterArgs(clusterArgs)
	if err != nil {
		return err
	}
	cfg, err := config.LoadHub(configFile)
	if err != nil {
		return err
	}
	fleet, err := simulate.LoadFleet(clusters, files)
	if err != nil {
		return err
	}
	if len(fleet.Hub.Workloads) == 0 {
		return fmt.Errorf("the hub's input (-f) has no Job or Workload to place")
	}
	results, err := simulate.RunFleet(fleet, cfg)
	if err != nil {
		return err
	}
	return simulate.Write(cmd.OutOrStdout(), results, output)
}

func validFormat(f string) bool {
	for _, x := range simulate.Formats {
		if f == x {
			return true
		}
	}
	return false
}
