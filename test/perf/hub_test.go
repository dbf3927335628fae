package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	hubcontroller "strata.dev/strata/hub/controller"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// hubBenchNamespace holds the benchmark's Jobs on the hub and their
// copies on the workers.
const hubBenchNamespace = "hub-bench"

// Stages of a hub Job, as the harness's watches see them.
const (
	hubCreated        = iota // just before the create call on the hub
	hubWorkload              // the hub Workload exists
	hubDispatched            // the hub Workload records a placement
	hubCopy                  // the copy's Workload exists on its worker
	hubWorkerAdmitted        // the copy's Workload is admitted on the worker
	hubAdmitted              // the hub Workload is Admitted
	hubStages
)

var hubStageNames = [hubStages]string{"created", "hub_workload", "dispatched", "copy_on_worker", "admitted_on_worker", "admitted_on_hub"}

// BenchmarkHub measures dispatch through the hub to three workers, the way
// ../shared/tools/multikueue-anchor measures Kueue's MultiKueue, so that
// the two compare (`make bench-hub`, docs/performance.md): one hub and three
// worker API servers (envtest, with that tool's in-flight limits), the
// hub's and the agents' controllers in this process as in the fleet
// integration suite, every worker with racks of 16 nodes of 8 CPUs (half
// as much again as the Jobs need, spread over the workers). STRATA_HUB_JOBS
// Jobs (1,000) of one pod of 1 CPU are created on the hub by
// STRATA_HUB_CREATORS (4) concurrent creators as fast as its API server
// takes them; nothing runs their pods. The measured window runs from the
// first creation to the last hub Workload admitted; it fails after
// STRATA_HUB_TIMEOUT_S (1,800) seconds. Results are key=value lines on
// stdout, named as that tool names them where they mean the same.
//
// STRATA_PERF_CPUPROFILE writes a CPU profile of this process during the
// window; its samples carry a "component" label (hub, agent, harness), so
// that `go tool pprof -tags` splits the process's CPU among them.
// STRATA_PERF_APISERVER_PROFILE writes one of the hub's API server.
// STRATA_PERF_HUB_CONFIG and STRATA_PERF_AGENT_CONFIG name configuration
// files to measure instead of the defaults.
func BenchmarkHub(b *testing.B) {
	jobs, creators := envInt("STRATA_HUB_JOBS", 1000), envInt("STRATA_HUB_CREATORS", 4)
	timeout := time.Duration(envInt("STRATA_HUB_TIMEOUT_S", 1800)) * time.Second
	const workerCount, nodesPerRack, nodeCPU = 3, 16, 8
	racksPerWorker := max(1, (3*jobs/2+workerCount*nodesPerRack*nodeCPU-1)/(workerCount*nodesPerRack*nodeCPU))
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("component", "harness"))
	pprof.SetGoroutineLabels(ctx)
	ctrl.SetLogger(cmdutil.LazyValues(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))))
	out := &keyValues{}
	out.add("jobs", jobs)
	out.add("workers", workerCount)
	out.add("creators", creators)
	out.add("cpu_per_job", 1)
	out.add("nodes_per_worker", racksPerWorker*nodesPerRack)

	setupStart := time.Now()
	inflight := map[string]string{"max-requests-inflight": "5000", "max-mutating-requests-inflight": "2500"}
	specs := []framework.ClusterSpec{{Name: "hub", Role: framework.Hub, APIServerFlags: inflight}}
	for i := range workerCount {
		specs = append(specs, framework.ClusterSpec{Name: fmt.Sprintf("w%d", i+1), Role: framework.Worker, APIServerFlags: inflight})
	}
	clusters, err := framework.Start(specs...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := clusters.Stop(); err != nil {
			b.Error(err)
		}
	}()
	hub, workers := clusters.Get("hub"), clusters.Items[1:]
	if dc, err := discovery.NewDiscoveryClientForConfig(hub.Config); err == nil {
		if v, err := dc.ServerVersion(); err == nil {
			out.add("kube_apiserver_version", v.GitVersion)
		}
	}
	hubCfg, err := config.LoadHub(os.Getenv("STRATA_PERF_HUB_CONFIG"))
	if err != nil {
		b.Fatal(err)
	}
	setupHubBench(b, ctx, hub, workers, hubCfg, jobs, racksPerWorker*nodesPerRack, nodeCPU)

	// The agents and the hub run with the binaries' client defaults: no
	// client-side limit to their own API servers (API Priority and
	// Fairness), the hub's built-in one to the workers.
	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	for _, w := range workers {
		pprof.Do(ctx, pprof.Labels("component", "agent", "cluster", w.Name), func(context.Context) {
			stops = append(stops, startAgent(b, unlimited(w.Config)))
		})
	}
	waitFor(b, 2*time.Minute, "every worker's capacity summary listing its nodes", func() (bool, error) {
		for _, w := range workers {
			var list strata.CapacitySummaryList
			if err := w.Client.List(ctx, &list); err != nil {
				return false, err
			}
			if len(list.Items) != 1 || list.Items[0].Status.Nodes != int32(racksPerWorker*nodesPerRack) {
				return false, nil
			}
		}
		return true, nil
	})
	pprof.Do(ctx, pprof.Labels("component", "hub"), func(context.Context) {
		stops = append(stops, startHub(b, unlimited(hub.Config), hubCfg))
	})
	for _, w := range workers {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubCfg.Namespace, Name: w.Name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": w.Kubeconfig}}
		if err := hub.Client.Create(ctx, s); err != nil {
			b.Fatal(err)
		}
		if err := hub.Client.Create(ctx, testutil.MakeWorkerCluster(w.Name).KubeConfigSecret(hubCfg.Namespace, s.Name).Obj()); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, 2*time.Minute, "every worker connected, with fresh summaries", func() (bool, error) {
		var list strata.WorkerClusterList
		if err := hub.Client.List(ctx, &list); err != nil {
			return false, err
		}
		ready := 0
		for _, wc := range list.Items {
			if meta.IsStatusConditionTrue(wc.Status.Conditions, strata.WorkerClusterConnected) &&
				meta.IsStatusConditionTrue(wc.Status.Conditions, strata.WorkerClusterSummariesFresh) {
				ready++
			}
		}
		return ready == workerCount, nil
	})

	// The harness follows everything by watches.
	progress := newHubProgress(jobs, len(workers), hubCfg.Origin)
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	hubWatch := startWatches(b, wctx, hub.Config, map[client.Object]func(any, bool){&strata.Workload{}: progress.onHubWorkload})
	workerWatches := make([]crcache.Cache, len(workers))
	for i, w := range workers {
		workerWatches[i] = startWatches(b, wctx, w.Config, map[client.Object]func(any, bool){
			// Only the copies' Workloads, as MultiKueue's anchor watches
			// only Workloads: the copy Jobs are counted from the workers'
			// API request counts.
			&strata.Workload{}: func(o any, gone bool) { progress.onCopyWorkload(i, o, gone) },
		})
	}
	hosts := map[string]string{}
	for _, c := range clusters.Items {
		hosts[c.Config.Host] = c.Name
	}
	groups, err := findCPUGroups(hosts)
	if err != nil {
		b.Fatal(err)
	}
	out.add("setup_s", seconds(time.Since(setupStart)))

	// The measured window.
	harness := unlimited(hub.Config)
	harness.QPS, harness.Burst = 1000, 2000
	creator, err := client.New(harness, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	writes0, reads0 := scrapeAllRequests(b, ctx, clusters.Items)
	out.add("loadavg_before", loadavg())
	cpu0 := groups.sample()
	stopProfile := startCPUProfile(b, os.Getenv("STRATA_PERF_CPUPROFILE"))
	// STRATA_PERF_APISERVER_PROFILE names a file for a CPU profile of the
	// hub's API server over the window's first 15 seconds.
	apiProfile := apiServerProfile(ctx, b, hub.Config, os.Getenv("STRATA_PERF_APISERVER_PROFILE"), 15)
	defer apiProfile()
	// STRATA_PERF_WORKER_APISERVER_PROFILE the same for w1's.
	workerAPIProfile := apiServerProfile(ctx, b, workers[0].Config, os.Getenv("STRATA_PERF_WORKER_APISERVER_PROFILE"), 15)
	defer workerAPIProfile()
	b.ResetTimer()
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		created <- parallel(jobs, creators, func(i int) error {
			j := hubBenchJob(fmt.Sprintf("hb-%06d", i))
			progress.mark(j.Name, hubCreated, time.Now())
			return creator.Create(ctx, j)
		})
	}()
	var createTime time.Duration
	tick := time.NewTicker(10 * time.Second)
	deadline := time.After(timeout)
	complete := false
wait:
	for {
		select {
		case err := <-created:
			if err != nil {
				b.Fatalf("creating the Jobs: %v", err)
			}
			createTime = time.Since(start)
			created = nil
		case <-progress.done:
			complete = true
			break wait
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "  %3.0fs: %s\n", time.Since(start).Seconds(), progress.counts())
		case <-deadline:
			break wait
		}
	}
	wall := time.Since(start)
	cpu1 := groups.sample()
	b.StopTimer()
	stopProfile()
	tick.Stop()
	out.add("loadavg_after", loadavg())
	writes1, reads1 := scrapeAllRequests(b, ctx, clusters.Items)
	if created != nil {
		if err := <-created; err != nil {
			b.Fatalf("creating the Jobs: %v", err)
		}
		createTime = time.Since(start)
	}
	// Copies the watches have not shown yet, and copies taken back, are
	// given a moment (not measured).
	waitUntil(10*time.Second, func() bool { c := progress.copyCounts(); return c.workloads-c.workloadsGone == jobs })

	out.add("complete", complete)
	jobCopies := make([]apiCounts, len(workers))
	for i, w := range workers {
		jobCopies[i] = writes1[w.Name].since(writes0[w.Name])
	}
	progress.report(out, start, createTime, workers, jobCopies)
	reportFinal(b, ctx, out, hubWatch, workerWatches, hubCfg.Origin, jobs)
	reportObjectSizes(b, ctx, out, hub, workers)

	hubWrites := writes1[hub.Name].since(writes0[hub.Name])
	workerWrites := apiCounts{}
	for _, w := range workers {
		workerWrites.add(writes1[w.Name].since(writes0[w.Name]))
	}
	out.add("api_writes_per_job_hub", f2(hubWrites.total()/float64(jobs)))
	out.add("api_writes_per_job_hub_by_kind", fmt.Sprintf("%q", hubWrites.perJob(jobs)))
	out.add("api_writes_per_job_workers", f2(workerWrites.total()/float64(jobs)))
	out.add("api_writes_per_job_workers_by_kind", fmt.Sprintf("%q", workerWrites.perJob(jobs)))
	// Reads that reach the API server, not an informer: the hub reads each
	// Job whole once to copy it (its informer keeps Jobs lean).
	workerReads := apiCounts{}
	for _, w := range workers {
		workerReads.add(reads1[w.Name].since(reads0[w.Name]))
	}
	out.add("api_reads_per_job_hub_by_kind", fmt.Sprintf("%q", reads1[hub.Name].since(reads0[hub.Name]).perJob(jobs)))
	out.add("api_reads_per_job_workers_by_kind", fmt.Sprintf("%q", workerReads.perJob(jobs)))

	out.add("measured_wall_s", seconds(wall))
	cpu := map[string]float64{}
	for k, v := range cpu1 {
		cpu[k] = v - cpu0[k]
	}
	var total, apiservers, etcds float64
	for _, k := range slices.Sorted(maps.Keys(cpu)) {
		total += cpu[k]
		switch {
		case strings.HasPrefix(k, "kube-apiserver "):
			apiservers += cpu[k]
		case strings.HasPrefix(k, "etcd "):
			etcds += cpu[k]
		}
		out.add("cpu_s_"+strings.ReplaceAll(strings.ReplaceAll(k, " ", "_"), "-", "_"), f2(cpu[k]))
	}
	out.add("cpu_s_kube_apiservers", f2(apiservers))
	out.add("cpu_s_etcds", f2(etcds))
	out.add("cpu_s_per_job", fmt.Sprintf("%.3f", total/float64(jobs)))
	out.add("cpu_cores_busy_avg", f2(total/wall.Seconds()))
	out.print()

	if !complete {
		b.Fatalf("only %s within %s", progress.counts(), timeout)
	}
	b.ReportMetric(float64(jobs)/progress.last(hubAdmitted).Sub(start).Seconds(), "jobs/s")
	b.ReportMetric(pct(progress.latencies(hubCreated, hubAdmitted), 50).Seconds(), "p50-s")
	b.ReportMetric(total/float64(jobs), "cpu-s/job")
}

// setupHubBench creates the hub's and the workers' namespaces, queues and
// nodes, and installs the charts' admission policies.
func setupHubBench(b *testing.B, ctx context.Context, hub *framework.Cluster, workers []*framework.Cluster, hubCfg *configv1beta1.HubConfiguration,
	jobs, nodes, nodeCPU int) {
	b.Helper()
	if err := applyManifest(hub.KubeconfigPath, filepath.Join("charts", "strata-hub", "templates", "admission-policy.yaml")); err != nil {
		b.Fatal(err)
	}
	// The ClusterQueues' quota is the Jobs' CPUs, as MultiKueue's tool gives.
	cpu := fmt.Sprint(jobs)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Namespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubBenchNamespace}},
		testutil.MakeClusterQueue("cq").Flavor("perf", "cpu", cpu).Obj(),
		testutil.MakeLocalQueue("lq", hubBenchNamespace, "cq"),
	} {
		if err := hub.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	for _, w := range workers {
		if err := applyManifest(w.KubeconfigPath, filepath.Join("charts", "strata-agent", "templates", "admission-policy.yaml")); err != nil {
			b.Fatal(err)
		}
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Dispatch.WorkerNamespace}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubBenchNamespace}},
			testutil.MakeTopology("perf", rack, host).Obj(),
			testutil.MakeResourceFlavor("perf").NodeLabel("pool", "perf").TopologyName("perf").Obj(),
			testutil.MakeClusterQueue("cq").Flavor("perf", "cpu", cpu).Obj(),
			testutil.MakeLocalQueue("lq", hubBenchNamespace, "cq"),
		} {
			if err := w.Client.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		if err := parallel(nodes, 16, func(i int) error {
			name := fmt.Sprintf("%s-n%04d", w.Name, i)
			return createReadyNode(ctx, w.Client, node(name, map[string]string{"pool": "perf", rack: fmt.Sprintf("rack-%d", i/16), host: name}, fmt.Sprint(nodeCPU)))
		}); err != nil {
			b.Fatal(err)
		}
	}
	// The hub's policy gives the Jobs to the hub (spec.managedBy).
	waitForJobPolicy(b, ctx, hub.Client, func() *batchv1.Job { return hubBenchJob("policy-probe") },
		func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.ManagedBy, "") == "strata.dev/hub" })
}

// hubBenchJob is a Job of one pod of 1 CPU in the hub's LocalQueue, as
// MultiKueue's tool creates them (the hub's admission policy sets
// spec.managedBy).
func hubBenchJob(name string) *batchv1.Job {
	return testutil.MakeJob(name, hubBenchNamespace).Queue("lq").Parallelism(1).Completions(1).Image("registry.k8s.io/pause:3.10").
		Request("cpu", "1").Obj()
}

// unlimited is a copy of cfg without a client-side rate limit: the
// binaries' default, leaving it to the API server's Priority and Fairness.
func unlimited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

// startHub runs the hub's controllers in-process with cfg.
func startHub(b *testing.B, cfg *rest.Config, hubCfg *configv1beta1.HubConfiguration) func() {
	b.Helper()
	// As the strata-hub binary: no gzip on its own API server's responses.
	cfg = rest.CopyConfig(cfg)
	cmdutil.Local(cfg)
	// As the binaries: informers start from the watch cache's lists.
	if err := cmdutil.InitialListsFromCache(os.LookupEnv); err != nil {
		b.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The agents register controllers of the same names in this process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      crcache.Options{DefaultTransform: kinds.HubTransform()},
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := hubcontroller.SetupControllers(mgr, hubCfg); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// startWatches starts informers of the benchmark's namespace on the
// cluster of cfg, calling each kind's handler on every change (gone:
// deleted), and waits for them to sync.
func startWatches(b *testing.B, ctx context.Context, cfg *rest.Config, handlers map[client.Object]func(o any, gone bool)) crcache.Cache {
	b.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := crcache.New(cfg, crcache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]crcache.Config{hubBenchNamespace: {}}})
	if err != nil {
		b.Fatal(err)
	}
	for obj, on := range handlers {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { on(o, false) },
			UpdateFunc: func(_, o any) { on(o, false) },
			DeleteFunc: func(o any) {
				if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				on(o, true)
			},
		}); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the harness's informers did not sync")
	}
	return c
}

// hubProgress records, from the harness's watches, when each Job reached
// each stage, where it was admitted, and the copies on the workers.
type hubProgress struct {
	origin string
	want   int
	done   chan struct{}

	mu sync.Mutex
	at map[string]*[hubStages]time.Time // by Job name
	// cluster is the worker each Job was admitted on, as the hub records it.
	cluster  map[string]string
	admitted int
	// copies per worker: the UIDs of the copies' Workloads seen, and of
	// those deleted.
	copies []copySet
}

type copySet struct {
	workloads, workloadsGone map[types.UID]bool
}

func newHubProgress(jobs, workers int, origin string) *hubProgress {
	p := &hubProgress{origin: origin, want: jobs, done: make(chan struct{}), at: make(map[string]*[hubStages]time.Time, jobs),
		cluster: make(map[string]string, jobs), copies: make([]copySet, workers)}
	for i := range p.copies {
		p.copies[i] = copySet{workloads: map[types.UID]bool{}, workloadsGone: map[types.UID]bool{}}
	}
	return p
}

// mark records that job reached stage at t, unless it did before.
func (p *hubProgress) mark(job string, stage int, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.markLocked(job, stage, t)
}

func (p *hubProgress) markLocked(job string, stage int, t time.Time) bool {
	ts := p.at[job]
	if ts == nil {
		ts = &[hubStages]time.Time{}
		p.at[job] = ts
	}
	if !ts[stage].IsZero() {
		return false
	}
	ts[stage] = t
	return true
}

// jobOf is the Job a Workload belongs to.
func jobOf(wl *strata.Workload) string {
	if owner := metav1.GetControllerOfNoCopy(wl); owner != nil && owner.Kind == "Job" {
		return owner.Name
	}
	return strings.TrimPrefix(wl.Name, "job-")
}

func (p *hubProgress) onHubWorkload(o any, gone bool) {
	wl, ok := o.(*strata.Workload)
	if !ok || gone {
		return
	}
	now := time.Now()
	job := jobOf(wl)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.markLocked(job, hubWorkload, now)
	if cluster, _, _, ok := placed(wl); ok {
		// When the hub decided it (this process's clock): the record may
		// reach the status only with the admission (the dispatch journal).
		at := now
		if t := wl.Status.Placement.DispatchTime; t != nil && t.Time.Before(now) {
			at = t.Time
		}
		p.markLocked(job, hubDispatched, at)
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) && p.markLocked(job, hubAdmitted, now) {
			p.cluster[job] = cluster
			p.admitted++
			if p.admitted == p.want {
				close(p.done)
			}
		}
	}
}

// placed is where a hub Workload is dispatched now.
func placed(wl *strata.Workload) (cluster string, generation int64, attempts []strata.PlacementAttempt, ok bool) {
	pl := wl.Status.Placement
	if pl == nil || pl.Cluster == "" {
		return "", 0, nil, false
	}
	return pl.Cluster, pl.DispatchGeneration, pl.Attempts, true
}

func (p *hubProgress) onCopyWorkload(worker int, o any, gone bool) {
	wl, ok := o.(*strata.Workload)
	if !ok || wl.Labels[strata.OriginLabel] != p.origin {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.copies[worker].workloads[wl.UID] = true
	if gone {
		p.copies[worker].workloadsGone[wl.UID] = true
		return
	}
	p.markLocked(jobOf(wl), hubCopy, now)
	if wl.Status.Admission != nil {
		p.markLocked(jobOf(wl), hubWorkerAdmitted, now)
	}
}

type copyCounts struct{ workloads, workloadsGone int }

func (p *hubProgress) copyCounts() copyCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c copyCounts
	for _, s := range p.copies {
		c.workloads += len(s.workloads)
		c.workloadsGone += len(s.workloadsGone)
	}
	return c
}

// counts says how many Jobs reached each stage.
func (p *hubProgress) counts() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n [hubStages]int
	for _, ts := range p.at {
		for s, t := range ts {
			if !t.IsZero() {
				n[s]++
			}
		}
	}
	parts := make([]string, 0, hubStages)
	for s, c := range n {
		parts = append(parts, fmt.Sprintf("%s %d", hubStageNames[s], c))
	}
	return strings.Join(parts, ", ")
}

// latencies lists, over the Jobs that reached both, the time from stage
// from to stage to.
func (p *hubProgress) latencies(from, to int) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, ts := range p.at {
		if !ts[from].IsZero() && !ts[to].IsZero() {
			out = append(out, ts[to].Sub(ts[from]))
		}
	}
	return out
}

// first and last are when the first and the last Job reached stage.
func (p *hubProgress) first(stage int) time.Time { return p.extreme(stage, false) }
func (p *hubProgress) last(stage int) time.Time  { return p.extreme(stage, true) }

func (p *hubProgress) extreme(stage int, last bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e time.Time
	for _, ts := range p.at {
		t := ts[stage]
		if !t.IsZero() && (e.IsZero() || t.After(e) == last) {
			e = t
		}
	}
	return e
}

func (p *hubProgress) reached(stage int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ts := range p.at {
		if !ts[stage].IsZero() {
			n++
		}
	}
	return n
}

// report adds the timings and the copies' counts to out.
// writes are the workers' API writes in the measured window, by worker:
// their "POST jobs" and "DELETE jobs" are the copy Jobs created and
// deleted (the hub is the only client that creates Jobs there).
func (p *hubProgress) report(out *keyValues, start time.Time, createTime time.Duration, workers []*framework.Cluster, writes []apiCounts) {
	out.add("admitted", p.reached(hubAdmitted))
	out.add("admitted_on_worker", p.reached(hubWorkerAdmitted))
	out.add("create_s", seconds(createTime))
	out.add("create_rate_per_s", f2(float64(p.want)/createTime.Seconds()))
	for _, r := range []struct {
		stage  int
		suffix string
	}{{hubAdmitted, ""}, {hubWorkerAdmitted, "_on_worker"}} {
		n := p.reached(r.stage)
		if n == 0 {
			continue
		}
		first, last := p.first(r.stage), p.last(r.stage)
		out.add("all_admitted"+r.suffix+"_s", seconds(last.Sub(start)))
		out.add("throughput"+r.suffix+"_per_s", f2(float64(n)/last.Sub(start).Seconds()))
		out.add("first_admitted"+r.suffix+"_s", seconds(first.Sub(start)))
		if n > 1 && last.After(first) {
			out.add("admit_rate"+r.suffix+"_first_to_last_per_s", f2(float64(n-1)/last.Sub(first).Seconds()))
		}
		ls := p.latencies(hubCreated, r.stage)
		for _, q := range []int{50, 90, 99, 100} {
			name := fmt.Sprintf("p%d", q)
			if q == 100 {
				name = "max"
			}
			out.add(fmt.Sprintf("latency_created_to_%s_%s_ms", hubStageNames[r.stage], name), ms(percentile(ls, q)))
		}
	}
	// Stage by stage.
	for s := hubCreated + 1; s < hubStages; s++ {
		ls := p.latencies(s-1, s)
		if len(ls) == 0 {
			continue
		}
		out.add(fmt.Sprintf("stage_%s_to_%s_p50_ms", hubStageNames[s-1], hubStageNames[s]), ms(percentile(ls, 50)))
		out.add(fmt.Sprintf("stage_%s_to_%s_p90_ms", hubStageNames[s-1], hubStageNames[s]), ms(percentile(ls, 90)))
	}
	p.mu.Lock()
	won := map[string]int{}
	for _, c := range p.cluster {
		won[c]++
	}
	p.mu.Unlock()
	for _, w := range workers {
		out.add("admitted_on_"+w.Name, won[w.Name])
	}
	c := p.copyCounts()
	var created, deleted float64
	for i, w := range workers {
		out.add("remote_jobs_created_"+w.Name, writes[i]["POST jobs"])
		created += writes[i]["POST jobs"]
		deleted += writes[i]["DELETE jobs"]
	}
	out.add("remote_jobs_created", created)
	out.add("remote_jobs_created_per_job", f2(created/float64(p.want)))
	out.add("remote_jobs_deleted", deleted)
	out.add("remote_workloads_created", c.workloads)
	out.add("remote_workloads_created_per_job", f2(float64(c.workloads)/float64(p.want)))
	out.add("remote_workloads_deleted", c.workloadsGone)
}

// reportFinal adds what the hub Workloads' placements say of refusals, and
// the copies left on the workers, to out.
func reportFinal(b *testing.B, ctx context.Context, out *keyValues, hubWatch crcache.Cache, workerWatches []crcache.Cache, origin string, jobs int) {
	b.Helper()
	var wls strata.WorkloadList
	if err := hubWatch.List(ctx, &wls); err != nil {
		b.Fatal(err)
	}
	results := map[strata.PlacementResult]int{}
	firstTime := 0
	for i := range wls.Items {
		wl := &wls.Items[i]
		_, gen, attempts, ok := placed(wl)
		if !ok {
			continue
		}
		for _, a := range attempts {
			results[a.Result]++
		}
		if gen == 1 && len(attempts) == 1 && attempts[0].Result == strata.PlacementAdmitted {
			firstTime++
		}
	}
	out.add("rejections", results[strata.PlacementRejected]+results[strata.PlacementTimedOut]+results[strata.PlacementUnreachable]+results[strata.PlacementEvicted])
	out.add("rejected", results[strata.PlacementRejected])
	out.add("timed_out", results[strata.PlacementTimedOut])
	out.add("admitted_first_time", firstTime)
	out.add("admitted_first_time_pct", f2(100*float64(firstTime)/float64(jobs)))
	var finalJobs, finalWls, finalAdmitted int
	for _, c := range workerWatches {
		var jl batchv1.JobList
		if err := c.List(ctx, &jl, client.MatchingLabels{strata.OriginLabel: origin}); err != nil {
			b.Fatal(err)
		}
		finalJobs += len(jl.Items)
		var wl strata.WorkloadList
		if err := c.List(ctx, &wl, client.MatchingLabels{strata.OriginLabel: origin}); err != nil {
			b.Fatal(err)
		}
		finalWls += len(wl.Items)
		for i := range wl.Items {
			if wl.Items[i].Status.Admission != nil {
				finalAdmitted++
			}
		}
	}
	out.add("remote_jobs_final", finalJobs)
	out.add("remote_workloads_final", finalWls)
	out.add("remote_workloads_final_admitted", finalAdmitted)
}

// reportObjectSizes records the size of one stored object of each kind a Job
// makes (as JSON, and of it the managed fields), read from the API servers
// with the admin client: what every write, watch event and decode of that
// kind costs in proportion to. STRATA_PERF_DUMP_DIR keeps the objects.
func reportObjectSizes(b *testing.B, ctx context.Context, out *keyValues, hub *framework.Cluster, workers []*framework.Cluster) {
	b.Helper()
	dir := os.Getenv("STRATA_PERF_DUMP_DIR")
	size := func(name string, c client.Client, list client.ObjectList) {
		if err := c.List(ctx, list, client.Limit(1)); err != nil {
			b.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil || len(items) == 0 {
			return
		}
		obj := items[0].(client.Object)
		whole, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		mf, err := json.Marshal(obj.GetManagedFields())
		if err != nil {
			b.Fatal(err)
		}
		out.add("object_bytes_"+name, len(whole))
		out.add("object_bytes_"+name+"_managed_fields", len(mf))
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, name+".json"), whole, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	size("hub_job", hub.Client, &batchv1.JobList{})
	size("hub_workload", hub.Client, &strata.WorkloadList{})
	for _, w := range workers {
		var wl strata.WorkloadList
		if err := w.Client.List(ctx, &wl, client.Limit(1)); err != nil || len(wl.Items) == 0 {
			continue
		}
		size("worker_job", w.Client, &batchv1.JobList{})
		size("worker_workload", w.Client, &strata.WorkloadList{})
		break
	}
}

// scrapeAllRequests reads every cluster's write and read counts, by
// cluster name.
func scrapeAllRequests(b *testing.B, ctx context.Context, clusters []*framework.Cluster) (writes, reads map[string]apiCounts) {
	b.Helper()
	writes, reads = map[string]apiCounts{}, map[string]apiCounts{}
	for _, c := range clusters {
		w, r, err := scrapeRequests(ctx, c.Config)
		if err != nil {
			b.Fatal(err)
		}
		writes[c.Name], reads[c.Name] = w, r
	}
	return writes, reads
}

// waitUntil polls cond for up to timeout.
func waitUntil(timeout time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ",")
}

// percentile is the nearest-rank p-th percentile (0-100) of ds, 0 for none.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	rank := (p*len(s) + 99) / 100
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) string      { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
func seconds(d time.Duration) string { return f2(d.Seconds()) }
func f2(v float64) string            { return fmt.Sprintf("%.2f", v) }

// keyValues are results printed as key=value lines, in the order added.
type keyValues struct{ lines []string }

func (kv *keyValues) add(key string, value any) {
	kv.lines = append(kv.lines, fmt.Sprintf("%s=%v", key, value))
}

func (kv *keyValues) print() {
	for _, l := range kv.lines {
		fmt.Println(l)
	}
}
