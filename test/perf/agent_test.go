// Package perf measures strata-agent: admissions per second from a
// backlog of Jobs and the time from a Job's creation to all of its pods
// ungated (`make bench-agent`, on an API server alone, and
// `make bench-agent-kwok`, on a whole kwok cluster), and hot swap
// (`make bench-hotswap`). Results go into docs/performance.md. These are
// benchmarks, run once per invocation (-benchtime 1x), not tests.
package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = strata.HostnameLabel
)

func job(name string) *batchv1.Job {
	return testutil.MakeJob(name, "default").Queue("perf").Parallelism(2).Completions(2).Indexed().Image("fake").Request("cpu", "1").
		PodAnnotations(map[string]string{"strata.dev/podset-preferred-topology": rack}).Obj()
}

// benchCluster is where BenchmarkAgent runs the agent.
type benchCluster struct {
	admin, agent *rest.Config
	// jobController creates the pods of started Jobs and finishes them.
	// Without one (an API server alone) the harness creates the pods.
	jobController bool
	// nodeStatus: the nodes' status must be written by the harness.
	nodeStatus bool
	stop       func() error
}

// kwokBenchCluster is a whole cluster: kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and kwok's fake kubelets, the
// agent installed with its chart and running with its service account.
func kwokBenchCluster(b *testing.B, tmp string) benchCluster {
	// The Job controller creates the pods; at kube-controller-manager's
	// default 20 queries per second and 5 concurrent Job syncs it, not
	// Strata, would set the pace.
	cluster, err := kwokcluster.Create("strata-perf", tmp, kwokcluster.ExtraArgs(
		"kube-controller-manager=kube-api-qps=300", "kube-controller-manager=kube-api-burst=600",
		"kube-controller-manager=concurrent-job-syncs=20"),
		kwokcluster.HeartbeatFactor(float64(envInt("STRATA_PERF_HEARTBEAT_FACTOR", 25))))
	if err != nil {
		b.Fatal(err)
	}
	bc := benchCluster{jobController: true, stop: cluster.Delete}
	agentKC, err := cluster.InstallAgentChart(tmp)
	if err != nil {
		b.Fatal(errors.Join(err, bc.stop()))
	}
	if bc.admin, err = clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig); err != nil {
		b.Fatal(errors.Join(err, bc.stop()))
	}
	if bc.agent, err = clientcmd.BuildConfigFromFlags("", agentKC); err != nil {
		b.Fatal(errors.Join(err, bc.stop()))
	}
	return bc
}

// apiServerBenchCluster is a kube-apiserver and etcd alone (envtest) with
// the agent chart applied (its RBAC and admission policies; nothing runs
// its Deployment): the agent is all that runs, as the chart's
// ServiceAccount, and the harness stands in for the Job controller.
func apiServerBenchCluster(b *testing.B) benchCluster {
	clusters, err := framework.Start(framework.ClusterSpec{Name: "perf", Role: framework.Worker})
	if err != nil {
		b.Fatal(err)
	}
	w := clusters.Get("perf")
	bc := benchCluster{admin: rest.CopyConfig(w.Config), nodeStatus: true, stop: clusters.Stop}
	if bc.agent, err = agentChartConfig(context.Background(), w); err != nil {
		b.Fatal(errors.Join(err, bc.stop()))
	}
	return bc
}

// BenchmarkAgent measures the agent's admissions per second from a
// backlog of Jobs and the time from a Job's creation to all its pods
// ungated, on 5,000 nodes. STRATA_PERF_CLUSTER says where: "apiserver"
// (the default: the agent alone on an API server, what the agent costs) or
// "kwok" (a whole cluster on the same machine, what a user would see on
// it).
func BenchmarkAgent(b *testing.B) {
	nodes, jobs, latencyJobs := envInt("STRATA_PERF_NODES", 5000), envInt("STRATA_PERF_JOBS", 1000), envInt("STRATA_PERF_LATENCY_JOBS", 100)
	ctx := context.Background()
	ctrl.SetLogger(cmdutil.LazyValues(zap.New(zap.WriteTo(os.Stderr), func(o *zap.Options) { o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder })))
	tmp := b.TempDir()
	var bc benchCluster
	switch kind := os.Getenv("STRATA_PERF_CLUSTER"); kind {
	case "", "apiserver":
		bc = apiServerBenchCluster(b)
	case "kwok":
		bc = kwokBenchCluster(b, tmp)
	default:
		b.Fatalf("STRATA_PERF_CLUSTER=%q: want apiserver or kwok", kind)
	}
	defer func() {
		if err := bc.stop(); err != nil {
			b.Error(err)
		}
	}()
	admin := bc.admin
	admin.QPS, admin.Burst = 1000, 2000
	kube, err := client.New(admin, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}

	// The harness watches; polling LISTs of thousands of objects would load
	// the API server it measures.
	watch, err := crcache.New(admin, crcache.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	for _, o := range []client.Object{&corev1.Node{}, &corev1.Pod{}, &strata.Workload{}, &batchv1.Job{}} {
		if _, err := watch.GetInformer(wctx, o); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = watch.Start(wctx) }()
	watch.WaitForCacheSync(wctx)
	if !bc.jobController {
		if err := fakeJobController(wctx, watch, kube); err != nil {
			b.Fatal(err)
		}
	}

	b.Logf("creating %d nodes (16 per rack, 16 racks per block, 8 CPUs)", nodes)
	if err := parallel(nodes, 32, func(i int) error {
		name := fmt.Sprintf("perf-%05d", i)
		n := node(name, map[string]string{
			"pool": "perf", block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: name, "type": "kwok",
		}, "8")
		n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		if !bc.nodeStatus {
			return kube.Create(ctx, n) // kwok reports for it
		}
		return createReadyNode(ctx, kube, n)
	}); err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{
		testutil.MakeTopology("perf", block, rack, host).Obj(),
		testutil.MakeResourceFlavor("perf").NodeLabel("pool", "perf").TopologyName("perf").Obj(),
		testutil.MakeClusterQueue("perf").Flavor("perf").Obj(),
		testutil.MakeLocalQueue("perf", "default", "perf"),
	} {
		if err := kube.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, 5*time.Minute, "nodes ready and untainted", func() (bool, error) {
		var list corev1.NodeList
		if err := watch.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
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

	// The chart's policy suspends them at creation.
	waitForJobPolicy(b, ctx, kube, func() *batchv1.Job { return job("policy-probe") },
		func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	b.Logf("creating a backlog of %d Jobs (2 pods, preferred rack) with no agent running", jobs)
	if err := parallel(jobs, 16, func(i int) error { return kube.Create(ctx, job(fmt.Sprintf("backlog-%04d", i))) }); err != nil {
		b.Fatal(err)
	}

	agentCfg := bc.agent
	agentCfg.QPS, agentCfg.Burst = -1, 0 // the binaries' defaults: API Priority and Fairness limits
	var reqs requests
	reqs.wrap(agentCfg)
	backlog := watchBacklog(b, ctx, watch, "backlog-")
	// STRATA_PERF_CPUPROFILE names a file for a CPU profile of this
	// process (the agent and the harness) while the backlog is admitted.
	stopProfile := startCPUProfile(b, os.Getenv("STRATA_PERF_CPUPROFILE"))
	// STRATA_PERF_APISERVER_PROFILE names a file for a CPU profile of the
	// API server over the first 8 seconds after the agent starts.
	apiProfile := apiServerProfile(ctx, b, bc.admin, os.Getenv("STRATA_PERF_APISERVER_PROFILE"), 8)
	defer apiProfile()
	// On the apiserver setup the API server and etcd are this process's
	// children: their CPU, and this process's, over the admission window
	// says what an admission costs whatever the machine's speed that day.
	var groups cpuGroups
	if !bc.jobController {
		if groups, err = findCPUGroups(map[string]string{bc.admin.Host: "perf"}); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := groups.sample()
	stop := startAgent(b, agentCfg)
	defer stop()
	start := time.Now()
	b.ResetTimer()
	waitFor(b, 10*time.Minute, "the backlog admitted", func() (bool, error) {
		return backlog.count(backlogAdmitted) == jobs, nil
	})
	cpu1, admittedAt := groups.sample(), time.Now()
	stopProfile()
	// The rate is taken from the first admission to the last; the time
	// before the first is the agent's start-up (its informers' initial
	// lists), reported on its own.
	first, last := backlog.span(backlogAdmitted)
	rate := float64(jobs-1) / last.Sub(first).Seconds()
	b.ReportMetric(rate, "admissions/s")
	b.ReportMetric(first.Sub(start).Seconds(), "first-admission-s")
	b.Logf("backlog of %d admitted at %.1f admissions/s (first to last admission, %s), the first %s after the agent started (%.1f/s counting that)",
		jobs, rate, last.Sub(first).Round(time.Millisecond), first.Sub(start).Round(time.Millisecond), float64(jobs)/last.Sub(start).Seconds())
	b.Logf("  Workloads created (0/10/50/100%%): %s; admitted: %s", backlog.quantiles(start, backlogCreated), backlog.quantiles(start, backlogAdmitted))
	b.Logf("  agent API writes per Job while admitting: %s", reqs.perJob(jobs))
	if groups != nil {
		var total float64
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(cpu1)) {
			d := cpu1[name] - cpu0[name]
			total += d
			parts = append(parts, fmt.Sprintf("%s %.2fs", name, d))
		}
		b.ReportMetric(1000*total/float64(jobs), "cpu-ms/admission")
		b.Logf("  CPU from the agent's start to the last admission: %.2fs (%s), %.2f cores busy, %.2f ms per admission",
			total, strings.Join(parts, ", "), total/admittedAt.Sub(start).Seconds(), 1000*total/float64(jobs))
	}

	// The backlog's Jobs are started, their pods created by the Job
	// controller and ungated; phase 2 measures a settled system.
	waitFor(b, 10*time.Minute, "the backlog's pods ungated", func() (bool, error) {
		return backlog.count(backlogUngated) == 2*jobs, nil
	})
	drained := time.Since(start)
	b.ReportMetric(float64(jobs)/drained.Seconds(), "jobs-ungated/s")
	b.Logf("backlog of %d Jobs started and all %d pods ungated in %s: %.1f Jobs/s", jobs, 2*jobs, drained.Round(time.Millisecond), float64(jobs)/drained.Seconds())
	b.Logf("  pods ungated (0/10/50/100%%): %s", backlog.quantiles(start, backlogUngated))

	if bc.jobController {
		// Then the backlog runs to completion (kwok finishes pods at once),
		// so that phase 2 sees a quiet cluster.
		waitFor(b, 10*time.Minute, "the backlog finished", func() (bool, error) {
			return backlog.count(backlogFinished) == jobs, nil
		})
		b.Logf("backlog finished after %s", time.Since(start).Round(time.Millisecond))
		b.Logf("agent API writes per Job, from admitted to finished: %s", reqs.perJob(jobs))
	} else {
		// Nothing schedules or runs the ungated pods: the cluster is quiet,
		// and the backlog keeps a quarter of its capacity.
		b.Logf("agent API writes per Job, from admitted to ungated: %s", reqs.perJob(jobs))
	}
	logObjectSizes(b, ctx, kube, &strata.WorkloadList{}, &batchv1.JobList{}, &corev1.PodList{})
	var summaries strata.CapacitySummaryList
	if err := kube.List(ctx, &summaries); err == nil {
		for _, cs := range summaries.Items {
			data, _ := json.Marshal(cs.Status)
			b.Logf("capacity summary %s: %d bytes, %d domains, generation %d", cs.Name, len(data), len(cs.Status.Domains), cs.Status.SummaryGeneration)
		}
	}

	b.Logf("creating %d Jobs, 10 per second, and timing each stage from creation to all pods ungated", latencyJobs)
	at := measureUngate(b, ctx, watch, kube, latencyJobs)
	total := between(at, 0, len(stages)-1)
	b.ReportMetric(pct(between(at, 0, 2), 50).Seconds(), "p50-admit-s")
	b.ReportMetric(pct(total, 50).Seconds(), "p50-job-to-ungated-s")
	for i := 1; i < len(stages); i++ {
		ds := between(at, i-1, i)
		b.Logf("  %-14s -> %-14s p50 %6s  p90 %6s  max %6s", stages[i-1], stages[i],
			pct(ds, 50).Round(time.Millisecond), pct(ds, 90).Round(time.Millisecond), pct(ds, 100).Round(time.Millisecond))
	}
	b.Logf("agent API writes per Job, up to ungated: %s", reqs.perJob(latencyJobs))
	b.Logf("Job created -> all pods ungated: p50 %s, p90 %s, max %s", pct(total, 50).Round(time.Millisecond), pct(total, 90).Round(time.Millisecond), pct(total, 100).Round(time.Millisecond))
}

// Stages of the backlog the harness follows from its watches.
const (
	backlogCreated  = iota // the Workload exists
	backlogAdmitted        // the Workload is admitted
	backlogUngated         // a pod left the topology gate (counted per pod)
	backlogFinished        // the Workload is finished
	backlogStages
)

// backlogProgress records when the harness first saw each backlog Workload
// (or pod) reach each stage: events, not polling LISTs of thousands of
// objects, which would take CPU from what is measured.
type backlogProgress struct {
	mu sync.Mutex
	at [backlogStages]map[string]time.Time
}

// watchBacklog follows the Workloads and pods of the Jobs named with
// prefix.
func watchBacklog(b *testing.B, ctx context.Context, cache crcache.Cache, prefix string) *backlogProgress {
	b.Helper()
	p := &backlogProgress{}
	for i := range p.at {
		p.at[i] = map[string]time.Time{}
	}
	mark := func(stage int, name string, now time.Time) {
		if _, seen := p.at[stage][name]; !seen {
			p.at[stage][name] = now
		}
	}
	onWorkload := func(o any) {
		wl, ok := o.(*strata.Workload)
		if !ok || !strings.HasPrefix(wl.Name, "job-"+prefix) {
			return
		}
		now := time.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		mark(backlogCreated, wl.Name, now)
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			mark(backlogAdmitted, wl.Name, now)
		}
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			mark(backlogFinished, wl.Name, now)
		}
	}
	onPod := func(o any) {
		pod, ok := o.(*corev1.Pod)
		if !ok || !strings.HasPrefix(pod.Name, prefix) || pod.Labels[strata.WorkloadLabel] == "" || workload.TopologyGated(pod) {
			return
		}
		now := time.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		mark(backlogUngated, pod.Name, now)
	}
	for _, h := range []struct {
		obj client.Object
		on  func(any)
	}{{&strata.Workload{}, onWorkload}, {&corev1.Pod{}, onPod}} {
		inf, err := cache.GetInformer(ctx, h.obj)
		if err != nil {
			b.Fatal(err)
		}
		on := h.on
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }}); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// count is how many Workloads (pods for backlogUngated) reached stage.
func (p *backlogProgress) count(stage int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.at[stage])
}

// span is when the first and the last Workload reached stage.
func (p *backlogProgress) span(stage int) (first, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.at[stage] {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// quantiles says when the first, 10, 50 and 100% of the Workloads reached stage,
// after start.
func (p *backlogProgress) quantiles(start time.Time, stage int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.at[stage]) == 0 {
		return "none"
	}
	var ds []time.Duration
	for _, t := range p.at[stage] {
		ds = append(ds, t.Sub(start))
	}
	var out []string
	for _, q := range []int{0, 10, 50, 100} {
		out = append(out, pct(ds, q).Round(100*time.Millisecond).String())
	}
	return strings.Join(out, " / ")
}

// stages of a Job's way from creation to all pods ungated, in order, as
// the harness's informers see them.
var stages = []string{"created", "workload", "admitted", "started", "pods created", "pods ungated"}

// timeline records when each Job (by name) first reached each stage.
type timeline struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (t *timeline) mark(job string, stage int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.at[job]
	if ts == nil {
		ts = make([]time.Time, len(stages))
		t.at[job] = ts
	}
	if ts[stage].IsZero() {
		ts[stage] = time.Now()
	}
}

// measureUngate creates n Jobs at 10 per second and returns, per Job, when
// it reached each stage.
func measureUngate(b *testing.B, ctx context.Context, cache crcache.Cache, kube client.Client, n int) map[string][]time.Time {
	b.Helper()
	tl := &timeline{at: map[string][]time.Time{}}
	const prefix = "latency-"
	onWorkload := func(o any) {
		wl, ok := o.(*strata.Workload)
		if !ok || !strings.HasPrefix(wl.Name, "job-"+prefix) {
			return
		}
		job := strings.TrimPrefix(wl.Name, "job-")
		tl.mark(job, 1)
		if wl.Status.Admission != nil {
			tl.mark(job, 2)
		}
	}
	onJob := func(o any) {
		if j, ok := o.(*batchv1.Job); ok && strings.HasPrefix(j.Name, prefix) && !ptr.Deref(j.Spec.Suspend, false) {
			tl.mark(j.Name, 3)
		}
	}
	podsSeen := map[string]map[string]bool{} // job -> pod -> ungated
	onPod := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || !strings.HasPrefix(p.Name, prefix) {
			return
		}
		job := p.Labels[batchv1.JobNameLabel]
		tl.mu.Lock()
		if podsSeen[job] == nil {
			podsSeen[job] = map[string]bool{}
		}
		podsSeen[job][p.Name] = podsSeen[job][p.Name] || !slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == strata.TopologySchedulingGate })
		seen, ungated := len(podsSeen[job]), 0
		for _, u := range podsSeen[job] {
			if u {
				ungated++
			}
		}
		tl.mu.Unlock()
		if seen == 2 {
			tl.mark(job, 4)
		}
		if ungated == 2 {
			tl.mark(job, 5)
		}
	}
	for _, h := range []struct {
		obj client.Object
		fn  func(any)
	}{{&strata.Workload{}, onWorkload}, {&batchv1.Job{}, onJob}, {&corev1.Pod{}, onPod}} {
		inf, err := cache.GetInformer(ctx, h.obj)
		if err != nil {
			b.Fatal(err)
		}
		fn := h.fn
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: fn, UpdateFunc: func(_, o any) { fn(o) }}); err != nil {
			b.Fatal(err)
		}
	}
	cache.WaitForCacheSync(ctx)

	pace := time.NewTicker(100 * time.Millisecond) // 10 Jobs per second
	defer pace.Stop()
	for i := range n {
		name := fmt.Sprintf("%s%04d", prefix, i)
		start := time.Now()
		if err := kube.Create(ctx, job(name)); err != nil {
			b.Fatal(err)
		}
		tl.mu.Lock()
		if tl.at[name] == nil {
			tl.at[name] = make([]time.Time, len(stages))
		}
		tl.at[name][0] = start
		tl.mu.Unlock()
		<-pace.C
	}
	waitFor(b, 5*time.Minute, "every latency Job's pods ungated", func() (bool, error) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		done := 0
		for _, ts := range tl.at {
			if !ts[len(stages)-1].IsZero() {
				done++
			}
		}
		return done == n, nil
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.at
}

// between lists, over Jobs, the time from stage i to stage j.
func between(at map[string][]time.Time, i, j int) []time.Duration {
	var out []time.Duration
	for _, ts := range at {
		if !ts[i].IsZero() && !ts[j].IsZero() {
			out = append(out, ts[j].Sub(ts[i]))
		}
	}
	return out
}

// fakeJobController does what kube-controller-manager's Job controller
// would for the benchmark's Jobs on an API server alone: once the agent
// starts a Job, it creates the Job's pods from its template, with
// completion indexes, as 20 concurrent syncs (the kwok cluster's setting).
func fakeJobController(ctx context.Context, cache crcache.Cache, kube client.Client) error {
	inf, err := cache.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return err
	}
	started := make(chan *batchv1.Job, 10000)
	var mu sync.Mutex
	seen := map[string]bool{}
	onJob := func(o any) {
		j, ok := o.(*batchv1.Job)
		if !ok || ptr.Deref(j.Spec.Suspend, false) || j.Spec.Template.Labels[strata.WorkloadLabel] == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[j.Name] {
			seen[j.Name] = true
			started <- j
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) }}); err != nil {
		return err
	}
	for range 20 {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-started:
					for i := range int(ptr.Deref(j.Spec.Parallelism, 1)) {
						p := testutil.JobPod(j, i)
						if err := kube.Create(ctx, p); err != nil && ctx.Err() == nil {
							ctrl.Log.Error(err, "Creating a Job's pod", "pod", p.Name)
						}
					}
				}
			}
		}()
	}
	return nil
}

// logObjectSizes logs the stored size of one object of each list's kind
// (as JSON, and of it the managed fields): every write, watch event and
// decode of that kind costs in proportion to it. STRATA_PERF_DUMP_DIR
// keeps the objects.
func logObjectSizes(b *testing.B, ctx context.Context, c client.Client, lists ...client.ObjectList) {
	b.Helper()
	for _, list := range lists {
		if err := c.List(ctx, list, client.InNamespace("default"), client.Limit(1)); err != nil {
			b.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil || len(items) == 0 {
			continue
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
		kind := strings.ToLower(strings.TrimSuffix(fmt.Sprintf("%T", list)[1:], "List"))
		b.Logf("stored %s %s: %d bytes, %d of them managed fields", kind, obj.GetName(), len(whole), len(mf))
		if dir := os.Getenv("STRATA_PERF_DUMP_DIR"); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, "agent-"+kind+".json"), whole, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}
