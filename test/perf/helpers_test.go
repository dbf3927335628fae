package perf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"strata.dev/strata/agent"
	"strata.dev/strata/agent/controller"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/test/integration/framework"
)

// agentChartConfig applies the strata-agent chart, rendered with helm, to
// cluster w (its RBAC, its admission policies, and a Deployment of no
// replica) and returns a REST config that authenticates as the chart's
// ServiceAccount with a token, as the agent does when installed: its
// requests are authorized by the chart's RBAC, and authenticated as a
// ServiceAccount's are (a cached token), not by a client certificate
// checked on every request.
func agentChartConfig(ctx context.Context, w *framework.Cluster) (*rest.Config, error) {
	const namespace = "strata-system"
	bin, err := framework.BinDir()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(w.Config)
	if err != nil {
		return nil, err
	}
	version, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	helm := exec.Command(filepath.Join(bin, "helm"), "template", "strata-agent", filepath.Join(framework.RepoRoot(), "charts", "strata-agent"),
		"--namespace", namespace, "--kube-version", version.GitVersion, "--set", "replicas=0")
	helm.Stderr = &stderr
	rendered, err := helm.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template strata-agent: %w: %s", err, stderr.String())
	}
	if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	apply := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", w.KubeconfigPath, "apply", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	if out, err := apply.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("applying the strata-agent chart: %w: %s", err, out)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "strata-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for ServiceAccount strata-agent: %w", err)
	}
	cfg := rest.AnonymousClientConfig(w.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// What the benchmarks share: knobs from the environment, setting up
// nodes and manifests on an API server alone, running the agent
// in-process, and waiting.

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envCount is envInt for a count that may be 0.
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// startCPUProfile profiles this process into path until the returned
// function is called; with no path it does nothing.
func startCPUProfile(b *testing.B, path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(errors.Join(err, f.Close()))
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// apiServerProfile takes a CPU profile of the API server cfg reaches over
// the next seconds into path (nothing when path is empty); the returned
// function waits until it is written.
func apiServerProfile(ctx context.Context, b *testing.B, cfg *rest.Config, path string, seconds int) func() {
	if path == "" {
		return func() {}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			b.Errorf("the API server's profile: %v", err)
		}
	}()
	return func() { <-done }
}

// parallel runs f(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startAgent runs the agent's controllers in-process with cfg.
func startAgent(b *testing.B, cfg *rest.Config) func() {
	b.Helper()
	// STRATA_PERF_AGENT_CONFIG names an agent configuration file to
	// measure instead of the defaults.
	agentCfg, err := config.LoadAgent(os.Getenv("STRATA_PERF_AGENT_CONFIG"))
	if err != nil {
		b.Fatal(err)
	}
	// As the strata-agent binary: no gzip on its API server's responses.
	cfg = rest.CopyConfig(cfg)
	cmdutil.Local(cfg)
	// As the binaries: informers start from the watch cache's lists.
	if err := cmdutil.InitialListsFromCache(os.LookupEnv); err != nil {
		b.Fatal(err)
	}
	opts := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		// As the binary: informers without managedFields (so that an
		// update is sent without them and keeps the server's), and Leases
		// of the fencing namespace only.
		Cache: crcache.Options{DefaultTransform: crcache.TransformStripManagedFields()},
	}
	agent.LeaseCache(agentCfg.Fencing.Namespace)(&opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.SetupControllers(ctx, mgr, agentCfg); err != nil {
		b.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// waitFor polls cond until it holds, failing the benchmark after timeout.
func waitFor(b *testing.B, timeout time.Duration, what string, cond func() (bool, error)) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			b.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// waitForJobPolicy waits until the API server applies an admission policy
// just installed to the Jobs created from then on, as applied says of
// probe() created in dry run. A new policy takes the API server a moment,
// and a Job created before escapes it: a backlog Job created running,
// whose pods the Job controller starts (and kwok finishes) before the
// agent holds it, is never gated, and the benchmark waited for its pods'
// ungating until it timed out.
func waitForJobPolicy(b *testing.B, ctx context.Context, c client.Client, probe func() *batchv1.Job, applied func(*batchv1.Job) bool) {
	b.Helper()
	waitFor(b, time.Minute, "the admission policy in effect", func() (bool, error) {
		j := probe()
		if err := c.Create(ctx, j, client.DryRunAll); err != nil {
			return false, err
		}
		return applied(j), nil
	})
}

// node returns a node with the given labels, cpu CPUs and 110 pods
// allocatable.
func node(name string, labels map[string]string, cpu string) *corev1.Node {
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Allocatable: resources, Capacity: resources},
	}
}

// createReadyNode creates n and makes it Ready and untainted: on an API
// server alone no kubelet reports for it, and no node lifecycle
// controller removes the not-ready taint the API server gives new nodes.
func createReadyNode(ctx context.Context, kube client.Client, n *corev1.Node) error {
	status := n.Status
	if err := kube.Create(ctx, n); err != nil {
		return err
	}
	n.Status = status
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}
	if err := kube.Status().Update(ctx, n); err != nil {
		return err
	}
	n.Spec.Taints = nil
	return kube.Update(ctx, n)
}

// applyManifest applies a file of the repository (path relative to its
// root) with kubectl on the cluster of kubeconfig.
func applyManifest(kubeconfig, path string) error {
	bin, err := framework.BinDir()
	if err != nil {
		return err
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f",
		filepath.Join(framework.RepoRoot(), path)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("applying %s: %w: %s", path, err, out)
	}
	return nil
}
