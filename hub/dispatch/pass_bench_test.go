package dispatch

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/replay"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

const (
	benchBlock = "cloud.provider.com/topology-block"
	benchRack  = "cloud.provider.com/topology-rack"
	benchGPU   = replay.GPU
)

// BenchmarkPass: one op is one dispatch pass over STRATA_PASS_PENDING
// (50,000) pending Workloads — Jobs of the trace generator's mixed shapes
// (1–64 pods of 1, 2, 4 or 8 GPUs; rack and block required and preferred,
// unconstrained) in one LocalQueue — and STRATA_PASS_WORKERS (16)
// workers of 2 blocks × 4 racks × 16 hosts × 8 GPUs each, every GPU
// taken: the steady state of a backlog, where a pass finds that nothing
// more fits. The hub's queues live on a real API server (envtest) and are
// read through the manager's cache, as in the hub; the Workloads and Jobs
// are fed to the dispatcher's index as its informers would feed it, and
// the workers' targets are built from their summaries in process (the
// fleet's connections are not what is measured). The first pass, which
// decides every shape and queues every Workload's first waiting reason,
// runs before the clock. heap-MiB is the heap in use then: the Workloads,
// Jobs and index (as the hub's informers would hold them), the queued
// reasons, the API server's client and cache.
//
//	STRATA_K8S_BIN=$PWD/bin/k8s go test ./hub/dispatch/ -run '^$' -bench BenchmarkPass -benchtime 20x
func BenchmarkPass(b *testing.B) {
	if os.Getenv("STRATA_K8S_BIN") == "" && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("STRATA_K8S_BIN (the API server's binaries) is not set")
	}
	pending := benchEnv("STRATA_PASS_PENDING", 50000)
	workers := benchEnv("STRATA_PASS_WORKERS", 16)
	ctx := b.Context()

	clusters, err := framework.Start(framework.ClusterSpec{Name: "hub", Role: framework.Hub})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := clusters.Stop(); err != nil {
			b.Error(err)
		}
	}()
	hub := clusters.Items[0]
	const ns = "team"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		testutil.MakeClusterQueue("cq").Flavor("gpu", string(benchGPU), "1000000").Obj(),
		testutil.MakeLocalQueue("lq", ns, "cq"),
	} {
		if err := hub.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	for i := range workers {
		if err := hub.Client.Create(ctx, testutil.MakeWorkerCluster(fmt.Sprintf("w%02d", i)).KubeConfigSecret("strata-system", "unused").Obj()); err != nil {
			b.Fatal(err)
		}
	}
	mgr, err := framework.NewHubManager(hub.Config)
	if err != nil {
		b.Fatal(err)
	}
	stop := framework.Run(ctx, mgr)
	defer func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the hub's cache did not sync")
	}

	cfg, err := config.LoadHub("")
	if err != nil {
		b.Fatal(err)
	}
	d := New(mgr.GetClient(), nil, cfg, events.NewFakeRecorder(0), clock.RealClock{})
	src := &benchTargets{}
	for i := range workers {
		src.targets = append(src.targets, fullWorker(b, fmt.Sprintf("w%02d", i)))
	}
	d.fleet = src
	wlEvents, jobEvents := d.WorkloadEvents(), d.JobEvents(batchjob.Kind)
	trace := replay.Generate(replay.GenerateOptions{Jobs: pending, Seed: 1})
	created := time.Now().Add(-time.Hour)
	for i := range trace {
		job := trace[i].BatchJob(fmt.Sprintf("job-%05d", i), ns, "lq", map[string]string{"rack": benchRack, "block": benchBlock})
		job.Spec.Suspend = ptr.To(false)
		job.UID = types.UID(fmt.Sprintf("job-uid-%05d", i))
		wl, errs := intake.DesiredWorkload(batchjob.Adapt(job), tas.Options{})
		if len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
		wl.UID = types.UID(fmt.Sprintf("wl-uid-%05d", i))
		wl.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
		wl.Generation = 1
		wl.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(i) * time.Millisecond))
		jobEvents.OnAdd(job, true)
		wlEvents.OnAdd(wl, true)
	}
	if _, err := d.Pass(ctx); err != nil {
		b.Fatal(err)
	}
	if got := promtestutil.ToFloat64(metrics.HubPendingWorkloads); got != float64(pending) {
		b.Fatalf("%v Workloads pending after the first pass, want %d", got, pending)
	}
	if n := d.reasons.len(); n != pending {
		b.Fatalf("%d waiting reasons queued after the first pass, want %d", n, pending)
	}
	// What the Workloads, Jobs and the index hold (the hub's informers
	// hold the same objects, decoded).
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapInuse) / (1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pending), "pending")
	b.ReportMetric(float64(workers), "workers")
	b.ReportMetric(heap, "heap-MiB")
}

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fullWorker is the target of a worker of 2 blocks × 4 racks × 16 hosts ×
// 8 GPUs (64 CPUs) whose every GPU is taken.
func fullWorker(b *testing.B, name string) *placement.Target {
	b.Helper()
	s := tas.NewSnapshot([]string{benchBlock, benchRack, strata.HostnameLabel}, nil)
	for i := range 128 {
		host := fmt.Sprintf("%s-n%03d", name, i)
		r := i / 16
		s.SetNode(tas.Node{Name: host, Ready: true, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("110"), benchGPU: resource.MustParse("8"),
		}, Labels: map[string]string{benchBlock: fmt.Sprintf("b%d", r/4), benchRack: fmt.Sprintf("b%d-r%d", r/4, r), strata.HostnameLabel: host}})
		s.AddUsage(host, tas.WithPod(corev1.ResourceList{benchGPU: resource.MustParse("8")}), 1)
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		b.Fatal(err)
	}
	t, err := placement.NewTarget(name, "gpu", &st)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// benchTargets are the workers' targets of BenchmarkPass, every worker
// connected, serving every kind, its queues taking every Workload.
type benchTargets struct {
	targets []*placement.Target
}

func (s *benchTargets) WithTargets(_ context.Context, _ []fleet.Worker, _ time.Time, _ time.Duration, fn func([]*placement.Target) error) error {
	return fn(s.targets)
}

func (s *benchTargets) Release(worker, flavor, key string) {
	for _, t := range s.targets {
		if t.Cluster == worker && t.Flavor == flavor {
			t.Release(key)
		}
	}
}

func (s *benchTargets) SetHint(string, []*tas.Assignment) {}

func (s *benchTargets) PruneHints(func(key string) bool) {}

func (s *benchTargets) NoteDispatched(string) {}

func (s *benchTargets) Serves(string, jobs.Kind) (served, known bool) { return true, true }

func (s *benchTargets) QueueRefusal(string, fleet.QueueTarget) (reason, message string, known bool) {
	return "", "", true
}

func (s *benchTargets) LandingQueue(string, fleet.QueueTarget) (*strata.ClusterQueue, bool) {
	return nil, false
}

func (s *benchTargets) WorkerBooks(string) (*queue.Books, bool) { return nil, false }
