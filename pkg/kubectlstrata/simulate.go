package kubectlstrata

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/replay"
	"strata.dev/strata/pkg/simulate"
	"strata.dev/strata/pkg/tas"
)

func newSimulateCommand() *cobra.Command {
	var (
		files      []string
		clusters   []string
		configFile string
		output     string
		trace      string
		policies   string
		preempt    string
		plot       string
		highShare  float64
		seed       uint64
		generate   int
		rate       float64
		// --generate-cluster
		generateNodes int
		clusterName   string
		busy          float64
	)
	cmd := &cobra.Command{
		Use:   "simulate [--cluster NAME=FILE_OR_DIR ...] (-f FILE_OR_DIR [-f ...] | --trace FILE) [--config CONFIG] [-o table|json|yaml]",
		Short: "Place workloads on a cluster, or a fleet of clusters, described by files, offline",
		Long: `simulate answers "where would this job land on this cluster?" with the
engine strata-agent runs. It reads multi-document YAML or JSON: Nodes (as
'kubectl get nodes -o yaml' prints them), Pods bound to nodes (their requests
count as used), Topology, ResourceFlavor, optional ClusterQueue (flavor
order) and LocalQueues (a Job's strata.dev/queue-name names a LocalQueue of
its namespace when the input has one, else a ClusterQueue), and the
workloads: batch/v1 Jobs, JobSets, MPIJobs (kubeflow.org/v2beta1) and
LeaderWorkerSets (one workload per group) with the pod-set annotations, or
Workloads. Workloads are served as the agent serves its queues: each
ClusterQueue's by priority, then in the order they were queued (creation
time, or file order without one), the heads of every queue in turn; each
takes capacity from the ones after it. Rows are in file order.

With --cluster NAME=FILE_OR_DIR (repeatable), simulate answers "which cluster
and flavor would the hub choose?": each --cluster input is one worker
(Nodes, Pods, Topologies, ResourceFlavors), summarized with the agent's own
summarizer; the -f inputs are the hub's side: its ClusterQueues (flavor
order and fleet quota, as on the hub) and the workloads, placed by priority, then in the order
they were queued, with the hub's placement policy, each reserving capacity
on its cluster for the ones after it. --config is then a HubConfiguration (algorithms, placement policy).

With --trace FILE and --cluster, simulate replays a workload trace (CSV:
name, arrival_seconds, duration_seconds, pods, gpus_per_pod, topology, and
optionally priority) over the fleet in simulated time under several
dispatch policies side by side — the hub's compact and spread, first-fit,
any-fit and no-topology — and reports waits, makespan, GPU utilisation and
how often topology requests were met; --plot writes utilisation and queue
length over time as a PNG. A trace with priorities is replayed under each
--preemption mode too (none, first-cluster: preempt on the first cluster
where it helps, fleet: the hub's choice of the one cluster where it costs
least), with the high-priority Jobs' waits and the preemptions reported.
--generate-trace N writes a synthetic trace, --generate-cluster N a cluster of
N GPU hosts to replay it over.`,
		Example: `  kubectl strata simulate -f cluster.yaml -f jobs/
  kubectl strata simulate --cluster west=west/ --cluster east=east.yaml -f queue.yaml -f jobs/
  kubectl strata simulate --generate-trace 2000 --arrivals-per-hour 900 > trace.csv
  kubectl strata simulate --generate-cluster 2000 --busy 0.25 --name c1 > c1.yaml
  kubectl strata simulate --cluster c1=c1.yaml --cluster c2=c2.yaml --trace trace.csv --plot replay.png
  kubectl get nodes -o yaml > nodes.yaml && kubectl strata simulate -f nodes.yaml -f tas.yaml -f job.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if generate > 0 || generateNodes > 0 {
				switch {
				case generate > 0 && generateNodes > 0:
					return fmt.Errorf("--generate-trace and --generate-cluster: one at a time")
				case len(files) > 0 || len(clusters) > 0 || trace != "":
					return fmt.Errorf("--generate-trace and --generate-cluster write to standard output and take no -f, --cluster or --trace")
				case generateNodes > 0:
					return simulate.GenerateCluster(cmd.OutOrStdout(), simulate.ClusterOptions{Name: clusterName, Nodes: generateNodes, Busy: busy, Seed: seed})
				}
				if highShare < 0 || highShare > 1 {
					return fmt.Errorf("--high-priority-share %v: want a share between 0 and 1", highShare)
				}
				return replay.WriteCSV(cmd.OutOrStdout(), replay.Generate(replay.GenerateOptions{Jobs: generate, Seed: seed, ArrivalsPerHour: rate, HighPriorityShare: highShare}))
			}
			if trace != "" {
				if len(files) > 0 {
					return fmt.Errorf("--trace gives the Jobs: pass the clusters with --cluster NAME=FILE_OR_DIR, not -f")
				}
				if len(clusters) == 0 {
					return fmt.Errorf("--trace replays over a fleet: pass its clusters with --cluster NAME=FILE_OR_DIR")
				}
				if !validFormat(output) {
					return fmt.Errorf("unknown output format %q (want one of %s)", output, strings.Join(simulate.Formats, ", "))
				}
				return simulateTrace(cmd, clusters, trace, traceOptions{policies: policies, preemptions: preempt, plot: plot, config: configFile, output: output, seed: seed})
			}
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
			in.FairSharing = cfg.FairSharing
			in.AdmissionFairSharing = cfg.AdmissionFairSharing
			results, err := simulate.Run(in, tas.OptionsFrom(cfg.TopologyAwareScheduling))
			if err != nil {
				return err
			}
			return writeResults(cmd, results, output)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file or directory of YAML/JSON to read (repeatable)")
	cmd.Flags().StringArrayVar(&clusters, "cluster", nil, "a worker cluster NAME=FILE_OR_DIR (repeatable): simulate the hub's choice over these clusters")
	cmd.Flags().StringVar(&configFile, "config", "", "configuration file: the AgentConfiguration (algorithms), or with --cluster the HubConfiguration; defaults apply when unset")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	cmd.Flags().StringVar(&trace, "trace", "", "a workload trace (CSV, docs/performance.md#trace-replay) to replay over the --cluster fleet in simulated time, under each of --policies")
	cmd.Flags().StringVar(&policies, "policies", "all", "with --trace: the dispatch policies to compare, comma-separated: compact, spread, first-fit, any-fit, no-topology")
	cmd.Flags().StringVar(&preempt, "preemption", "", "with --trace: the preemption modes to compare, comma-separated: none, first-cluster, fleet, or all (default: all when the trace has priorities, else none)")
	cmd.Flags().Float64Var(&highShare, "high-priority-share", 0, "with --generate-trace: the share of Jobs of priority 100 (the others 0); the trace then has a priority column")
	cmd.Flags().StringVar(&plot, "plot", "", "with --trace: write a PNG of GPU utilisation and queue length over time per policy to this file")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "with --trace, the seed of any-fit's draws; with --generate-trace, of the trace")
	cmd.Flags().IntVar(&generate, "generate-trace", 0, "write a synthetic trace of this many Jobs (CSV) to standard output")
	cmd.Flags().Float64Var(&rate, "arrivals-per-hour", 600, "with --generate-trace: the mean arrival rate")
	cmd.Flags().IntVar(&generateNodes, "generate-cluster", 0, "write a cluster of this many 8-GPU hosts (16 to a rack, 8 racks to a block; YAML for --cluster) to standard output")
	cmd.Flags().StringVar(&clusterName, "name", "gpu", "with --generate-cluster: the prefix of the nodes' names")
	cmd.Flags().Float64Var(&busy, "busy", 0, "with --generate-cluster: the share of hosts running a pod of 1, 2 or 4 GPUs of someone else's, for good")
	return cmd
}

// traceOptions are simulate --trace's flags.
type traceOptions struct {
	policies, preemptions, plot, config, output string
	seed                                        uint64
}

// simulateTrace is simulate --trace: the trace replayed over the fleet
// under each policy, a table (or JSON/YAML) of the outcomes, and a plot.
func simulateTrace(cmd *cobra.Command, clusterArgs []string, trace string, o traceOptions) error {
	ps, err := replay.ParsePolicies(o.policies)
	if err != nil {
		return err
	}
	plot, configFile, output, seed := o.plot, o.config, o.output, o.seed
	clusters, err := simulate.ParseClusterArgs(clusterArgs)
	if err != nil {
		return err
	}
	cfg, err := config.LoadHub(configFile)
	if err != nil {
		return err
	}
	f, err := os.Open(trace)
	if err != nil {
		return err
	}
	jobs, err := replay.ReadCSV(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", trace, err)
	}
	fleet, err := simulate.LoadClusters(clusters)
	if err != nil {
		return err
	}
	summaries, err := fleet.Summaries()
	if err != nil {
		return err
	}
	preemptions := o.preemptions
	if preemptions == "" && slices.ContainsFunc(jobs, func(j replay.Job) bool { return j.Priority != jobs[0].Priority }) {
		preemptions = "all"
	}
	modes, err := replay.ParsePreemptions(preemptions)
	if err != nil {
		return err
	}
	var results []*replay.Result
	for _, p := range ps {
		for _, m := range modes {
			r, err := replay.Run(summaries, jobs, p, replay.Options{Seed: seed, TAS: tas.OptionsFrom(cfg.TopologyAwareScheduling), Preemption: m})
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	if plot != "" {
		out, err := os.Create(plot)
		if err != nil {
			return err
		}
		if err := replay.WritePNG(out, results); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	switch output {
	case "table":
		return replay.WriteTable(cmd.OutOrStdout(), results)
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	default:
		b, err := yaml.Marshal(results)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
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
	return writeResults(cmd, results, output)
}

// writeResults prints every job's outcome, and then fails when some jobs
// are invalid: the others are placed as the cluster would (an invalid
// job's Workload is marked Invalid there, and the queue goes on), and a
// script checking its manifests still sees the failure.
func writeResults(cmd *cobra.Command, results []simulate.Result, output string) error {
	if err := simulate.Write(cmd.OutOrStdout(), results, output); err != nil {
		return err
	}
	if n := simulate.Invalid(results); n > 0 {
		return fmt.Errorf("%d of %d workloads are invalid as written (their rows say why): the cluster would mark them Invalid (reason InvalidJob) and admit none of them", n, len(results))
	}
	return nil
}

func validFormat(f string) bool {
	for _, x := range simulate.Formats {
		if f == x {
			return true
		}
	}
	return false
}
