// Package perf measures strata-agent on a kwok cluster: admissions per
// second from a backlog of Jobs, and the time from a Job's creation to all
// of its pods ungated. Run with `make bench-agent`; results go into
// docs/performance.md. It is a benchmark, run once per invocation
// (-benchtime 1x), not a test.
package perf

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"strata.dev/strata/agent/controller"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/kwokcluster"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = strata.HostnameLabel
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{strata.QueueNameLabel: "perf"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"strata.dev/podset-preferred-topology": rack}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "c", Image: "fake", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				}}},
			},
		},
	}
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

func BenchmarkAgent(b *testing.B) {
	nodes, jobs, latencyJobs := envInt("STRATA_PERF_NODES", 5000), envInt("STRATA_PERF_JOBS", 1000), envInt("STRATA_PERF_LATENCY_JOBS", 100)
	ctx := context.Background()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	tmp := b.TempDir()
	// The Job controller creates the pods; at kube-controller-manager's
	// default 20 queries per second it, not Strata, would set the pace.
	cluster, err := kwokcluster.Create("strata-perf", tmp,
		"kube-controller-manager=kube-api-qps=300", "kube-controller-manager=kube-api-burst=600")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cluster.Delete(); err != nil {
			b.Error(err)
		}
	}()
	agentKC, err := cluster.InstallAgentChart(tmp)
	if err != nil {
		b.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	admin.QPS, admin.Burst = 1000, 2000
	kube, err := client.New(admin, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}

	b.Logf("creating %d nodes (16 per rack, 16 racks per block, 8 CPUs)", nodes)
	if err := parallel(nodes, 32, func(i int) error {
		name := fmt.Sprintf("perf-%05d", i)
		return kube.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"pool": "perf", block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: name, "type": "kwok",
			}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
			},
		})
	}); err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{
		testutil.MakeTopology("perf", block, rack, host).Obj(),
		testutil.MakeResourceFlavor("perf").NodeLabel("pool", "perf").TopologyName("perf").Obj(),
		testutil.MakeClusterQueue("perf").Flavor("perf").Obj(),
	} {
		if err := kube.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, 5*time.Minute, "nodes ready and untainted", func() (bool, error) {
		var list corev1.NodeList
		if err := kube.List(ctx, &list); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
					ready++
				}
			}
		}
		return ready == nodes, nil
	})

	b.Logf("creating a backlog of %d Jobs (2 pods, preferred rack) with no agent running", jobs)
	if err := parallel(jobs, 16, func(i int) error { return kube.Create(ctx, job(fmt.Sprintf("backlog-%04d", i))) }); err != nil {
		b.Fatal(err)
	}

	agentCfg, err := clientcmd.BuildConfigFromFlags("", agentKC)
	if err != nil {
		b.Fatal(err)
	}
	agentCfg.QPS, agentCfg.Burst = 200, 400 // the binaries' defaults
	stop := startAgent(b, agentCfg)
	defer stop()
	start := time.Now()
	b.ResetTimer()
	waitFor(b, 10*time.Minute, "the backlog admitted", func() (bool, error) {
		n, err := admitted(ctx, kube, "backlog-")
		return n == jobs, err
	})
	elapsed := time.Since(start)
	b.ReportMetric(float64(jobs)/elapsed.Seconds(), "admissions/s")
	b.Logf("backlog of %d admitted in %s: %.1f admissions/s", jobs, elapsed.Round(time.Millisecond), float64(jobs)/elapsed.Seconds())

	b.Logf("creating %d Jobs, 10 per second, and timing creation to all pods ungated", latencyJobs)
	lat := measureUngate(b, ctx, admin, kube, latencyJobs)
	b.ReportMetric(pct(lat.admit, 50).Seconds(), "p50-admit-s")
	b.ReportMetric(pct(lat.ungate, 50).Seconds(), "p50-pod-ungate-s")
	b.ReportMetric(pct(lat.total, 50).Seconds(), "p50-job-to-ungated-s")
	for _, m := range []struct {
		what string
		ds   []time.Duration
	}{
		{"Job created -> admitted", lat.admit},
		{"pod created -> ungated", lat.ungate},
		{"Job created -> all pods ungated", lat.total},
	} {
		b.Logf("%s: p50 %s, p90 %s, max %s", m.what, pct(m.ds, 50).Round(time.Millisecond), pct(m.ds, 90).Round(time.Millisecond), pct(m.ds, 100).Round(time.Millisecond))
	}
}

func admitted(ctx context.Context, kube client.Client, prefix string) (int, error) {
	var list strata.WorkloadList
	if err := kube.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for _, wl := range list.Items {
		if len(wl.Name) > len("job-"+prefix) && wl.Name[:len("job-"+prefix)] == "job-"+prefix &&
			meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			n++
		}
	}
	return n, nil
}

// startAgent runs the agent's controllers in-process with cfg.
func startAgent(b *testing.B, cfg *rest.Config) func() {
	b.Helper()
	agentCfg, err := config.LoadAgent("")
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
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

// latencies of the Jobs created at a steady rate.
type latencies struct {
	admit  []time.Duration // Job created -> Workload admitted
	ungate []time.Duration // pod created (by the Job controller) -> pod ungated
	total  []time.Duration // Job created -> all its pods ungated
}

// measureUngate creates n Jobs at 10 per second and measures them.
func measureUngate(b *testing.B, ctx context.Context, cfg *rest.Config, kube client.Client, n int) latencies {
	b.Helper()
	cache, err := crcache.New(cfg, crcache.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	ungated := map[string]time.Time{}    // pod name -> first seen ungated
	podLag := map[string]time.Duration{} // pod name -> creation to ungated
	admittedAt := map[string]time.Time{} // workload name -> first seen admitted
	inf, err := cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		b.Fatal(err)
	}
	record := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Labels[strata.WorkloadLabel] == "" {
			return
		}
		if slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == strata.TopologySchedulingGate }) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := ungated[p.Name]; !seen {
			ungated[p.Name] = time.Now()
			podLag[p.Name] = time.Since(p.CreationTimestamp.Time)
		}
	}
	wlInf, err := cache.GetInformer(ctx, &strata.Workload{})
	if err != nil {
		b.Fatal(err)
	}
	recordWL := func(o any) {
		wl, ok := o.(*strata.Workload)
		if !ok || !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := admittedAt[wl.Name]; !seen {
			admittedAt[wl.Name] = time.Now()
		}
	}
	if _, err := wlInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: recordWL, UpdateFunc: func(_, o any) { recordWL(o) }}); err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		b.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = cache.Start(cctx) }()
	cache.WaitForCacheSync(cctx)

	created := make([]time.Time, n)
	pace := time.NewTicker(100 * time.Millisecond) // 10 Jobs per second
	defer pace.Stop()
	for i := range n {
		created[i] = time.Now()
		if err := kube.Create(ctx, job(fmt.Sprintf("latency-%04d", i))); err != nil {
			b.Fatal(err)
		}
		<-pace.C
	}
	var lat latencies
	waitFor(b, 5*time.Minute, "every latency Job's pods ungated", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		lat = latencies{}
		for i := range n {
			last := time.Time{}
			count := 0
			for name, t := range ungated {
				if len(name) > len(fmt.Sprintf("latency-%04d-", i)) && name[:len(fmt.Sprintf("latency-%04d-", i))] == fmt.Sprintf("latency-%04d-", i) {
					count++
					if t.After(last) {
						last = t
					}
				}
			}
			at, ok := admittedAt[fmt.Sprintf("job-latency-%04d", i)]
			if count < 2 || !ok {
				return false, nil
			}
			lat.total = append(lat.total, last.Sub(created[i]))
			lat.admit = append(lat.admit, at.Sub(created[i]))
		}
		for name, d := range podLag {
			if len(name) > 8 && name[:8] == "latency-" {
				lat.ungate = append(lat.ungate, d)
			}
		}
		return true, nil
	})
	return lat
}

// pct is the p-th percentile (0-100) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
