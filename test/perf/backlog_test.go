package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/replay"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// gpuResource is the GPUs of the backlog benchmark's nodes.
const gpuResource = corev1.ResourceName("nvidia.com/gpu")

// BenchmarkHubBacklog measures the hub with a backlog far larger than the
// fleet (`make bench-hub-backlog`, docs/performance.md): one hub and
// STRATA_BACKLOG_WORKERS (8) worker API servers (envtest), every worker
// with STRATA_BACKLOG_BLOCKS (2) blocks of 4 racks of 16 hosts of 8 GPUs;
// the agents run in this process, the hub as its own process (the
// strata-hub binary, built here), so that its CPU time and resident
// memory are its own. STRATA_PERF_CPUPROFILE writes a CPU profile of the
// hub during the quiet passes (below). STRATA_BACKLOG_JOBS (20,000) Jobs drawn as
// `kubectl strata simulate --generate-trace` draws them (1–64 pods of 1,
// 2, 4 or 8 GPUs; rack- and block-required and -preferred, or
// unconstrained) are created on the hub at once by 8 creators. Nothing
// runs their pods: the harness completes each copy on its worker once the
// worker admitted it and the Job's drawn duration, divided by
// STRATA_BACKLOG_TIME_SCALE (360) and at most a minute, has passed, so
// capacity frees continuously. The first window lasts until
// STRATA_BACKLOG_SECONDS (300) after the first creation; then
// STRATA_BACKLOG_MORE_JOBS (30,000) more Jobs are created and a second
// window of STRATA_BACKLOG_SECONDS2 (120) runs once the hub has them all.
// With STRATA_BACKLOG_AFTER_INTAKE_S, the first window ends that long
// after the hub has a Workload of every Job of the first submission.
//
// Reported (key=value lines): admissions per second in steady state (from
// the first completion to the end of the first window), hub CPU-seconds
// per admitted Job, the hub's resident memory with every Job of each
// submission pending, the hub's dispatch pass time p50/p99 in each window
// (strata_hub_dispatch_pass_seconds) with the pending count, API writes on
// the hub per Job, and the time from a copy's completion on a worker to
// the next admission on that worker. Last, completions stop and, once the
// fleet is quiet, ten passes over everything still pending are timed
// ("quiet"): on two cores shared by every API server, the windows' pass
// times are mostly waiting for a CPU.
func BenchmarkHubBacklog(b *testing.B) {
	workerCount := envInt("STRATA_BACKLOG_WORKERS", 8)
	blocks := envInt("STRATA_BACKLOG_BLOCKS", 2)
	jobs, more := envInt("STRATA_BACKLOG_JOBS", 20000), envCount("STRATA_BACKLOG_MORE_JOBS", 30000)
	window := time.Duration(envInt("STRATA_BACKLOG_SECONDS", 300)) * time.Second
	window2 := time.Duration(envInt("STRATA_BACKLOG_SECONDS2", 120)) * time.Second
	scale := float64(envInt("STRATA_BACKLOG_TIME_SCALE", 360))
	const racksPerBlock, hostsPerRack, gpusPerHost, creators = 4, 16, 8, 8
	nodesPerWorker := blocks * racksPerBlock * hostsPerRack
	ctx := context.Background()
	ctrl.SetLogger(cmdutil.LazyValues(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))))
	out := &keyValues{}
	out.add("workers", workerCount)
	out.add("nodes_per_worker", nodesPerWorker)
	out.add("gpus_per_worker", nodesPerWorker*gpusPerHost)
	out.add("jobs", jobs)
	out.add("more_jobs", more)

	trace := replay.Generate(replay.GenerateOptions{Jobs: jobs + more, Seed: 1})
	durations := make([]time.Duration, len(trace))
	for i, j := range trace {
		durations[i] = time.Duration(min(j.Duration/scale, 60) * float64(time.Second))
	}
	out.add("gpus_asked_first_submission", sumGPUs(trace[:jobs]))

	hubBin := buildHub(b)
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
	hubCfg, err := config.LoadHub("")
	if err != nil {
		b.Fatal(err)
	}
	setupBacklog(b, ctx, hub, workers, hubCfg, blocks, racksPerBlock, hostsPerRack, gpusPerHost)

	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	for _, w := range workers {
		stops = append(stops, startAgent(b, unlimited(w.Config)))
	}
	waitFor(b, 3*time.Minute, "every worker's capacity summary listing its nodes", func() (bool, error) {
		for _, w := range workers {
			var list strata.CapacitySummaryList
			if err := w.Client.List(ctx, &list); err != nil {
				return false, err
			}
			if len(list.Items) != 1 || list.Items[0].Status.Nodes != int32(nodesPerWorker) {
				return false, nil
			}
		}
		return true, nil
	})
	hubProc := startHubProcess(b, hubBin, hub.KubeconfigPath)
	stops = append(stops, hubProc.stop)
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

	run := newBacklogRun(workers, hubCfg.Origin, durations)
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	startWatches(b, wctx, hub.Config, map[client.Object]func(any, bool){&strata.Workload{}: run.onHubWorkload})
	for i, w := range workers {
		startWatches(b, wctx, w.Config, map[client.Object]func(any, bool){
			&strata.Workload{}: func(o any, gone bool) { run.onCopyWorkload(wctx, i, o, gone) },
		})
	}
	out.add("setup_s", seconds(time.Since(setupStart)))

	harness := unlimited(hub.Config)
	harness.QPS, harness.Burst = 1000, 2000
	creator, err := client.New(harness, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	var createdJobs atomic.Int64
	submit := func(from, to int) {
		t0 := time.Now()
		done := make(chan struct{})
		go func() {
			tick := time.NewTicker(10 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					fmt.Fprintf(os.Stderr, "  %4.0fs: creating, %d created; %s\n", time.Since(t0).Seconds(), createdJobs.Load(), run.counts())
				}
			}
		}()
		defer close(done)
		if err := parallel(to-from, creators, func(i int) error {
			defer createdJobs.Add(1)
			return creator.Create(ctx, backlogJob(fmt.Sprintf("bl-%06d", from+i), &trace[from+i]))
		}); err != nil {
			b.Fatalf("creating the Jobs: %v", err)
		}
	}
	// waitIntake waits until the hub has made a Workload of each of n Jobs,
	// or until, and reports how long that took (or how many it had made).
	waitIntake := func(n int, since, until time.Time, key string) {
		for run.hubWorkloads() < n && time.Now().Before(until) {
			time.Sleep(time.Second)
		}
		if got := run.hubWorkloads(); got < n {
			out.add(key+"_hub_workloads_made_by_deadline", got)
			return
		}
		out.add(key+"_all_hub_workloads_s", seconds(time.Since(since)))
	}
	progress := func(start time.Time, until time.Time, what string) {
		for time.Now().Before(until) {
			time.Sleep(min(10*time.Second, time.Until(until)))
			fmt.Fprintf(os.Stderr, "  %4.0fs: %s; %s\n", time.Since(start).Seconds(), what, run.counts())
		}
	}

	// The first submission.
	writes0, _ := scrapeAllRequests(b, ctx, clusters.Items)
	cpu0 := hubProc.cpu(b)
	pass0 := hubProc.passes(b)
	b.ResetTimer()
	start := time.Now()
	submit(0, jobs)
	out.add("create_s", seconds(time.Since(start)))
	waitIntake(jobs, start, start.Add(window), "first_submission")
	out.add("rss_mib_first_submission", hubProc.rssMiB(b))
	out.add("pending_first_submission", hubProc.gauge(b, "strata_hub_pending_workloads"))
	end := start.Add(window)
	if after := envInt("STRATA_BACKLOG_AFTER_INTAKE_S", 0); after > 0 && run.hubWorkloads() >= jobs {
		end = time.Now().Add(time.Duration(after) * time.Second)
	}
	progress(start, end, "first window")
	end1 := time.Now()
	cpu1 := hubProc.cpu(b)
	pass1 := hubProc.passes(b)
	writes1, _ := scrapeAllRequests(b, ctx, clusters.Items)
	admitted1, steady, firstDone := run.admissions(start, end1)
	out.add("admitted_first_window", admitted1)
	out.add("completed_first_window", run.completedCount())
	if !firstDone.IsZero() {
		out.add("first_completion_s", seconds(firstDone.Sub(start)))
		out.add("steady_admissions_per_s", f2(float64(steady)/end1.Sub(firstDone).Seconds()))
	}
	if admitted1 > 0 {
		out.add("hub_cpu_s_per_admitted_job", fmt.Sprintf("%.4f", (cpu1-cpu0)/float64(admitted1)))
	}
	out.add("hub_cpu_s_first_window", f2(cpu1-cpu0))
	reportPasses(out, "first_window", pass1.since(pass0))
	hubWrites := writes1[hub.Name].since(writes0[hub.Name])
	out.add("api_writes_hub_per_job", f2(hubWrites.total()/float64(jobs)))
	out.add("api_writes_hub_per_job_by_kind", fmt.Sprintf("%q", hubWrites.perJob(jobs)))
	if admitted1 > 0 {
		out.add("api_writes_hub_per_admitted_job", f2(hubWrites.total()/float64(admitted1)))
	}
	freed := run.freedToNextAdmission()
	out.add("freed_to_next_admission_count", len(freed))
	out.add("freed_to_next_admission_p50_ms", ms(percentile(freed, 50)))
	out.add("freed_to_next_admission_p90_ms", ms(percentile(freed, 90)))

	// The second: the hub with every Job of both pending.
	if more > 0 {
		start2 := time.Now()
		submit(jobs, jobs+more)
		out.add("create_s_second_submission", seconds(time.Since(start2)))
		waitIntake(jobs+more, start2, time.Now().Add(window2), "second_submission")
		out.add("rss_mib_second_submission", hubProc.rssMiB(b))
		out.add("pending_second_submission", hubProc.gauge(b, "strata_hub_pending_workloads"))
		passA := hubProc.passes(b)
		cpuA := hubProc.cpu(b)
		admittedA, _, _ := run.admissions(start, time.Now())
		progress(start2, time.Now().Add(window2), "second window")
		admittedB, _, _ := run.admissions(start, time.Now())
		reportPasses(out, "second_window", hubProc.passes(b).since(passA))
		out.add("admitted_second_window", admittedB-admittedA)
		out.add("hub_cpu_s_second_window", f2(hubProc.cpu(b)-cpuA))
		out.add("rss_mib_end", hubProc.rssMiB(b))
	}
	// Pass time without contention: completions stop, the fleet quiets
	// down, and ten passes are brought by touching a WorkerCluster, one
	// every two seconds, over everything still pending.
	run.freeze()
	time.Sleep(15 * time.Second)
	quiet0 := hubProc.passes(b)
	out.add("pending_quiet", hubProc.gauge(b, "strata_hub_pending_workloads"))
	out.add("rss_mib_quiet", hubProc.rssMiB(b))
	profiled := make(chan error, 1)
	if path := os.Getenv("STRATA_PERF_CPUPROFILE"); path != "" {
		go func() { profiled <- hubProc.profile(path, 20*time.Second) }()
	} else {
		profiled <- nil
	}
	for i := range 10 {
		wc := &strata.WorkerCluster{}
		if err := hub.Client.Get(ctx, types.NamespacedName{Name: workers[0].Name}, wc); err != nil {
			b.Fatal(err)
		}
		patch := client.MergeFrom(wc.DeepCopy())
		metav1.SetMetaDataLabel(&wc.ObjectMeta, "bench.strata.dev/touch", strconv.Itoa(i))
		if err := hub.Client.Patch(ctx, wc, patch); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	reportPasses(out, "quiet", hubProc.passes(b).since(quiet0))
	if err := <-profiled; err != nil {
		b.Error(err)
	}
	b.StopTimer()
	out.print()
	b.ReportMetric(float64(admitted1)/end1.Sub(start).Seconds(), "admissions/s")
}

func sumGPUs(jobs []replay.Job) int64 {
	var n int64
	for _, j := range jobs {
		n += j.GPUs()
	}
	return n
}

// setupBacklog creates the hub's and the workers' namespaces, queues,
// topologies and GPU nodes, and installs the charts' admission policies.
func setupBacklog(b *testing.B, ctx context.Context, hub *framework.Cluster, workers []*framework.Cluster, hubCfg *configv1beta1.HubConfiguration,
	blocks, racksPerBlock, hostsPerRack, gpusPerHost int) {
	b.Helper()
	if err := applyManifest(hub.KubeconfigPath, filepath.Join("charts", "strata-hub", "templates", "admission-policy.yaml")); err != nil {
		b.Fatal(err)
	}
	const quota = "1000000" // the fleet, not the quota, holds the Jobs back
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Namespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubBenchNamespace}},
		testutil.MakeClusterQueue("cq").Flavor("gpu", string(gpuResource), quota).Obj(),
		testutil.MakeLocalQueue("lq", hubBenchNamespace, "cq"),
	} {
		if err := hub.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	nodes := blocks * racksPerBlock * hostsPerRack
	for _, w := range workers {
		if err := applyManifest(w.KubeconfigPath, filepath.Join("charts", "strata-agent", "templates", "admission-policy.yaml")); err != nil {
			b.Fatal(err)
		}
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Dispatch.WorkerNamespace}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubBenchNamespace}},
			testutil.MakeTopology("gpu", block, rack, host).Obj(),
			testutil.MakeResourceFlavor("gpu").NodeLabel("pool", "gpu").TopologyName("gpu").Obj(),
			testutil.MakeClusterQueue("cq").Flavor("gpu", string(gpuResource), quota).Obj(),
			testutil.MakeLocalQueue("lq", hubBenchNamespace, "cq"),
		} {
			if err := w.Client.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		if err := parallel(nodes, 16, func(i int) error {
			name := fmt.Sprintf("%s-n%04d", w.Name, i)
			r := i / hostsPerRack
			n := gpuNode(name, map[string]string{"pool": "gpu", block: fmt.Sprintf("b%d", r/racksPerBlock), rack: fmt.Sprintf("b%d-r%d", r/racksPerBlock, r), host: name}, gpusPerHost)
			return createReadyNode(ctx, w.Client, n)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// gpuNode is a node of gpus GPUs, 64 CPUs and 110 pods.
func gpuNode(name string, labels map[string]string, gpus int) *corev1.Node {
	n := node(name, labels, "64")
	n.Status.Allocatable[gpuResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	return n
}

// backlogJob is a Job of j's shape in the hub's LocalQueue.
func backlogJob(name string, j *replay.Job) *batchv1.Job {
	return j.BatchJob(name, hubBenchNamespace, "lq", map[string]string{"rack": rack, "block": block})
}

// backlogRun follows the hub's Workloads and the copies' Workloads on the
// workers, and completes each admitted copy after its Job's duration.
type backlogRun struct {
	workers   []*framework.Cluster
	origin    string
	durations []time.Duration // by Job index

	mu       sync.Mutex
	hubSeen  map[string]bool
	admitted map[string]time.Time // hub Workloads admitted, by Job name
	// Per worker: when copies were admitted there, and when copies
	// completed there.
	admittedOn  [][]time.Time
	completedOn [][]time.Time
	started     map[types.UID]bool // copies whose completion is scheduled
	// frozen: no more completions.
	frozen atomic.Bool
}

// freeze stops completions.
func (r *backlogRun) freeze() { r.frozen.Store(true) }

func newBacklogRun(workers []*framework.Cluster, origin string, durations []time.Duration) *backlogRun {
	return &backlogRun{workers: workers, origin: origin, durations: durations, hubSeen: map[string]bool{}, admitted: map[string]time.Time{},
		admittedOn: make([][]time.Time, len(workers)), completedOn: make([][]time.Time, len(workers)), started: map[types.UID]bool{}}
}

func (r *backlogRun) onHubWorkload(o any, gone bool) {
	wl, ok := o.(*strata.Workload)
	if !ok || gone {
		return
	}
	job := jobOf(wl)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hubSeen[job] = true
	if _, done := r.admitted[job]; !done && meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
		r.admitted[job] = now
	}
}

func (r *backlogRun) onCopyWorkload(ctx context.Context, worker int, o any, gone bool) {
	wl, ok := o.(*strata.Workload)
	if !ok || gone || wl.Labels[strata.OriginLabel] != r.origin || wl.Status.Admission == nil {
		return
	}
	job := jobOf(wl)
	i, err := strconv.Atoi(strings.TrimPrefix(job, "bl-"))
	if err != nil || i >= len(r.durations) {
		return
	}
	r.mu.Lock()
	if r.started[wl.UID] {
		r.mu.Unlock()
		return
	}
	r.started[wl.UID] = true
	r.admittedOn[worker] = append(r.admittedOn[worker], time.Now())
	r.mu.Unlock()
	time.AfterFunc(r.durations[i], func() { r.complete(ctx, worker, job) })
}

// complete does what the worker's Job controller would when the copy's
// pods succeed.
func (r *backlogRun) complete(ctx context.Context, worker int, name string) {
	c := r.workers[worker].Client
	for ctx.Err() == nil && !r.frozen.Load() {
		var j batchv1.Job
		if err := c.Get(ctx, types.NamespacedName{Namespace: hubBenchNamespace, Name: name}, &j); err != nil {
			if apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if ptr.Deref(j.Spec.Suspend, false) {
			time.Sleep(200 * time.Millisecond) // the agent starts it once admitted
			continue
		}
		now := metav1.Now()
		started := metav1.NewTime(now.Add(-time.Second))
		j.Status = batchv1.JobStatus{StartTime: &started, CompletionTime: &now, Succeeded: ptr.Deref(j.Spec.Completions, 1), Ready: ptr.To[int32](0),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			}}
		if err := c.Status().Update(ctx, &j); err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.completedOn[worker] = append(r.completedOn[worker], time.Now())
		r.mu.Unlock()
		return
	}
}

func (r *backlogRun) hubWorkloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hubSeen)
}

func (r *backlogRun) completedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.completedOn {
		n += len(c)
	}
	return n
}

func (r *backlogRun) counts() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var onWorkers, completed int
	for i := range r.admittedOn {
		onWorkers += len(r.admittedOn[i])
		completed += len(r.completedOn[i])
	}
	return fmt.Sprintf("hub workloads %d, admitted on the hub %d, on workers %d, completed %d", len(r.hubSeen), len(r.admitted), onWorkers, completed)
}

// admissions counts the hub admissions in [from, to], those after the
// first completion, and when that was.
func (r *backlogRun) admissions(from, to time.Time) (all, steady int, firstDone time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.completedOn {
		if len(c) > 0 && (firstDone.IsZero() || c[0].Before(firstDone)) {
			firstDone = c[0]
		}
	}
	for _, t := range r.admitted {
		if t.Before(from) || t.After(to) {
			continue
		}
		all++
		if !firstDone.IsZero() && t.After(firstDone) {
			steady++
		}
	}
	return all, steady, firstDone
}

// freedToNextAdmission is, for every completion on a worker, the time to
// the next admission of a copy on that worker.
func (r *backlogRun) freedToNextAdmission() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for w := range r.completedOn {
		adm := slices.SortedFunc(slices.Values(r.admittedOn[w]), func(a, b time.Time) int { return a.Compare(b) })
		for _, c := range r.completedOn[w] {
			i, _ := slices.BinarySearchFunc(adm, c, func(a, t time.Time) int { return a.Compare(t) })
			if i < len(adm) {
				out = append(out, adm[i].Sub(c))
			}
		}
	}
	return out
}

// buildHub builds the strata-hub binary into a temporary directory.
func buildHub(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "strata-hub")
	cmd := exec.Command("go", "build", "-o", bin, "./hub/cmd/strata-hub")
	cmd.Dir = framework.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building strata-hub: %v: %s", err, out)
	}
	return bin
}

// hubProcess is the hub running as its own process.
type hubProcess struct {
	cmd     *exec.Cmd
	metrics string // its metrics URL
	pprof   string // its profiles' URL
	done    chan error
}

// startHubProcess runs the strata-hub binary against the hub API server
// of kubeconfig, with its default configuration, metrics on a free local
// port, its log in a file whose end is printed if the benchmark fails.
func startHubProcess(b *testing.B, bin, kubeconfig string) *hubProcess {
	b.Helper()
	logPath := filepath.Join(b.TempDir(), "strata-hub.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = logFile.Close()
		if b.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				b.Logf("the end of strata-hub's log:\n%s", data[max(0, len(data)-8192):])
			}
		}
	})
	addr := freeAddr(b)
	pprofAddr := freeAddr(b)
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--metrics-bind-address", addr, "--health-probe-bind-address", "0",
		"--pprof-bind-address", pprofAddr, "--zap-log-level", "error")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Gone with this process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &hubProcess{cmd: cmd, metrics: "http://" + addr + "/metrics", pprof: "http://" + pprofAddr + "/debug/pprof/", done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	waitFor(b, time.Minute, "the hub's metrics endpoint", func() (bool, error) {
		select {
		case err := <-p.done:
			return false, fmt.Errorf("strata-hub exited: %w", err)
		default:
		}
		_, err := p.scrape()
		return err == nil, nil
	})
	return p
}

// freeAddr is a free local TCP address.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return addr
}

// profile writes a CPU profile of the hub over d into path.
func (p *hubProcess) profile(path string, d time.Duration) error {
	resp, err := http.Get(fmt.Sprintf("%sprofile?seconds=%d", p.pprof, max(1, int(d.Seconds())))) //nolint:noctx // a local scrape
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (p *hubProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		_ = err // stopped by a signal: not a failure
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		_ = err
	}
}

func (p *hubProcess) scrape() ([]byte, error) {
	resp, err := http.Get(p.metrics) //nolint:noctx // a local scrape
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// cpu is the hub's CPU time so far, in seconds.
func (p *hubProcess) cpu(b *testing.B) float64 {
	b.Helper()
	st, err := readProcStat(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return st.cpu
}

// rssMiB is the hub's resident memory, in MiB.
func (p *hubProcess) rssMiB(b *testing.B) int {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	kib, err := parseVMRSS(data)
	if err != nil {
		b.Fatal(err)
	}
	return int(kib / 1024)
}

// parseVMRSS reads the VmRSS line of /proc/<pid>/status, in KiB.
func parseVMRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in %q", status)
}

// gauge is the value of an unlabelled metric of the hub.
func (p *hubProcess) gauge(b *testing.B, name string) string {
	b.Helper()
	text, err := p.scrape()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(text), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return rest
		}
	}
	return "unknown"
}

// passStats are the hub's dispatch passes and placement decisions so far.
type passStats struct {
	passes, decisions histogram
}

func (p *hubProcess) passes(b *testing.B) passStats {
	b.Helper()
	text, err := p.scrape()
	if err != nil {
		b.Fatal(err)
	}
	var st passStats
	if st.passes, err = parseHistogram(text, "strata_hub_dispatch_pass_seconds"); err != nil {
		b.Fatal(err)
	}
	if st.decisions, err = parseHistogram(text, "strata_hub_placement_latency_seconds"); err != nil {
		b.Fatal(err)
	}
	return st
}

func (st passStats) since(earlier passStats) passStats {
	return passStats{passes: st.passes.since(earlier.passes), decisions: st.decisions.since(earlier.decisions)}
}

// histogram is a Prometheus histogram's cumulative buckets.
type histogram struct {
	bounds []float64 // upper bounds, ascending, the last +Inf
	counts []float64 // cumulative
	sum    float64
}

// parseHistogram reads the histogram name from a metrics text.
func parseHistogram(text []byte, name string) (histogram, error) {
	var h histogram
	for line := range strings.SplitSeq(string(text), "\n") {
		switch {
		case strings.HasPrefix(line, name+"_bucket{"):
			m := metricLabel.FindStringSubmatch(line)
			if m == nil || m[1] != "le" {
				return h, fmt.Errorf("malformed bucket %q", line)
			}
			le, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return h, fmt.Errorf("bucket bound in %q: %w", line, err)
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return h, fmt.Errorf("bucket count in %q: %w", line, err)
			}
			h.bounds, h.counts = append(h.bounds, le), append(h.counts, v)
		case strings.HasPrefix(line, name+"_sum "):
			v, err := strconv.ParseFloat(strings.TrimPrefix(line, name+"_sum "), 64)
			if err != nil {
				return h, err
			}
			h.sum = v
		}
	}
	if len(h.bounds) == 0 {
		return h, fmt.Errorf("no histogram %s", name)
	}
	return h, nil
}

// since is the histogram of what was observed after earlier.
func (h histogram) since(earlier histogram) histogram {
	out := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum - earlier.sum}
	if len(earlier.counts) == len(h.counts) {
		for i := range out.counts {
			out.counts[i] -= earlier.counts[i]
		}
	}
	return out
}

func (h histogram) count() float64 { return h.counts[len(h.counts)-1] }

// quantile estimates the q-quantile (0-1) by linear interpolation within
// the bucket that holds it, as Prometheus's histogram_quantile does.
func (h histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if math.IsInf(h.bounds[i], 1) {
				return lower
			}
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return lower
}

// reportPasses adds a window's pass count, mean, p50 and p99, and the
// placement decisions made (the engine run on the targets), to out.
func reportPasses(out *keyValues, window string, st passStats) {
	h := st.passes
	out.add("decisions_"+window, st.decisions.count())
	out.add("passes_"+window, h.count())
	if h.count() == 0 {
		return
	}
	out.add("pass_mean_ms_"+window, f2(1000*h.sum/h.count()))
	out.add("pass_p50_ms_"+window, f2(1000*h.quantile(0.5)))
	out.add("pass_p99_ms_"+window, f2(1000*h.quantile(0.99)))
}
