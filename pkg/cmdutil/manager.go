// Package cmdutil holds what the strata-agent and strata-hub commands share:
// process flags, logging and the controller manager they run.
package cmdutil

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the process basics every daemon takes as flags; behaviour
// lives in the configuration file.
type Options struct {
	ConfigFile              string
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	PprofBindAddress        string
	LeaderElect             bool
	LeaderElectionNamespace string
	KubeAPIQPS              float32
	KubeAPIBurst            int
	Zap                     zap.Options
}

// AddFlags registers the options on cmd, plus controller-runtime's
// --kubeconfig flag.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.ConfigFile, "config", "", "path of the configuration file; defaults apply when unset")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "", "address of Go's /debug/pprof/ profiling endpoints (for example 127.0.0.1:8082); empty (the default) disables them")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader so that only one replica acts at a time")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease; defaults to the pod's namespace")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", -1, "client-side limit of queries per second to the API server; negative (the default) leaves it to the server's API Priority and Fairness")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 0, "burst of queries to the API server when --kube-api-qps is positive")
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	o.Zap.BindFlags(gfs)
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		gfs.Var(f.Value, f.Name, f.Usage)
	}
	fs.AddGoFlagSet(gfs)
}

// NewManager creates the controller manager for a daemon named name, with
// health checks, metrics and (optionally) leader election. transform,
// when not nil, replaces the informers' default transform (which drops
// managedFields); tune, when given, changes the manager's options last.
func (o *Options) NewManager(name string, scheme *runtime.Scheme, transform toolscache.TransformFunc, tune ...func(*ctrl.Options)) (ctrl.Manager, error) {
	ctrl.SetLogger(LazyValues(zap.New(zap.UseFlagOptions(&o.Zap))))
	if soft, err := SoftMemoryLimit(); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Not setting a soft memory limit; set GOMEMLIMIT below the container's memory limit")
	} else if soft > 0 {
		ctrl.Log.WithName("setup").Info("Soft memory limit set from the container's memory limit (GOMEMLIMIT overrides it)", "bytes", soft)
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to connect to: %w (pass --kubeconfig, set KUBECONFIG, or run in a pod)", err)
	}
	restConfig.UserAgent = name
	restConfig.QPS, restConfig.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	Local(restConfig)
	if err := InitialListsFromCache(os.LookupEnv); err != nil {
		return nil, err
	}
	if transform == nil {
		transform = cache.TransformStripManagedFields()
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		// Nothing reads managedFields; without them the informers' copies
		// of Jobs, Workloads and Pods take about half the memory. An
		// update sent without them keeps the server's.
		Cache:                   cache.Options{DefaultTransform: transform},
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        name + ".strata.dev",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	}
	for _, t := range tune {
		t(&mgrOpts)
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := errors.Join(
		mgr.AddHealthzCheck("ping", healthz.Ping),
		mgr.AddReadyzCheck("ping", healthz.Ping),
	); err != nil {
		return nil, fmt.Errorf("adding health checks: %w", err)
	}
	return mgr, nil
}

// Execute runs cmd and returns the process exit code: 0 on success, 1 on an
// error (printed once, without the usage text unless a flag was wrong).
func Execute(cmd *cobra.Command) int {
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
		return 1
	}
	return 0
}

// Local tunes cfg for a daemon's clients of its own cluster's API server:
// no gzip of responses and watch streams, as kube-controller-manager and
// kube-scheduler do. On the cluster's own network compression saves no
// time and costs CPU on both sides for every event (2–3 % of all the
// CPU of make bench-hub, docs/performance.md).
func Local(cfg *rest.Config) {
	cfg.DisableCompression = true
}

// watchListEnv is the environment variable with which client-go lets a
// process choose its WatchListClient feature.
const watchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// InitialListsFromCache makes this process's informers start from a list
// the API server answers from its watch cache, instead of client-go's
// streaming list (its WatchListClient feature, on by default since
// Kubernetes 1.35), unless the environment (lookup, os.LookupEnv in a
// daemon) sets KUBE_FEATURE_WatchListClient, which then decides.
//
// Why: a streaming list is a watch whose initial events end with a
// bookmark, and the API server sends bookmarks for a kind only about once
// a second. A kind that nobody writes at that moment (no Workload yet on a
// new cluster, no Cohort, no WorkloadPriorityClass) therefore ends its
// list up to a second or more after the others, and the controller
// manager starts no controller before every informer of its cache has
// synced: each restart's first admission came about a second later
// (docs/performance.md, 2026-12-04). A list from the watch cache answers
// at once; what streaming saves, the API server's memory for one large
// list response, matters for thousands of clients listing together, not
// for one agent or hub per cluster.
func InitialListsFromCache(lookup func(string) (string, bool)) error {
	if _, set := lookup(watchListEnv); set {
		return nil
	}
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return fmt.Errorf("client-go's feature gates cannot be set; set %s=false to start informers from the watch cache", watchListEnv)
	}
	if err := gates.Set(clientfeatures.WatchListClient, false); err != nil {
		return fmt.Errorf("turning off client-go's streaming lists: %w", err)
	}
	return nil
}
