package agent

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"strata.dev/strata/agent/controller"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/test/integration/framework"
)

var (
	clusters *framework.Clusters
	worker   *framework.Cluster
)

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Agent Suite")
}

// A failed spec's log ends with the clusters' queues and unfinished
// Workloads, before its cleanups remove them.
var _ = AfterEach(func(ctx SpecContext) {
	if CurrentSpecReport().Failed() {
		clusters.Dump(ctx, GinkgoWriter)
	}
})

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	jobSetCRDs, err := framework.JobSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	mpiJobCRDs, err := framework.MPIJobCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	lwsCRDs, err := framework.LeaderWorkerSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	clusters, err = framework.Start(framework.ClusterSpec{Name: "worker", Role: framework.Worker, CRDPaths: slices.Concat(jobSetCRDs, mpiJobCRDs, lwsCRDs, framework.ProvisioningRequestCRDPaths())})
	Expect(err).NotTo(HaveOccurred())
	// Cleanups run last-in first-out: the manager stops before its API server.
	DeferCleanup(func() { Expect(clusters.Stop()).To(Succeed()) })
	worker = clusters.Get("worker")
	// The agent runs a controller for JobSets only if their API is served
	// when it starts: wait until the CRD is.
	Eventually(func(g Gomega) {
		g.Expect(worker.Client.List(context.Background(), &jobsetapi.JobSetList{})).To(Succeed())
		g.Expect(worker.Client.List(context.Background(), &kubeflow.MPIJobList{})).To(Succeed())
		g.Expect(worker.Client.List(context.Background(), &lwsapi.LeaderWorkerSetList{})).To(Succeed())
	}, time.Minute, 100*time.Millisecond).Should(Succeed())

	By("installing the chart's admission policy with kubectl")
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", worker.KubeconfigPath, "apply", "-f",
		filepath.Join(framework.RepoRoot(), "charts", "strata-agent", "templates", "admission-policy.yaml")).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	// The API server takes a moment to apply a new admission policy (and to
	// know the JobSet and MPIJob CRDs' schemas for it): wait until the policies
	// suspend what they should, with dry-run creations.
	Eventually(func(g Gomega) {
		ctx := context.Background()
		labels := map[string]string{strata.QueueNameLabel: "probe"}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: labels},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
		g.Expect(worker.Client.Create(ctx, j, client.DryRunAll)).To(Succeed())
		g.Expect(j.Spec.Suspend).To(Equal(ptr.To(true)))
		js := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: labels}}
		g.Expect(worker.Client.Create(ctx, js, client.DryRunAll)).To(Succeed())
		g.Expect(js.Spec.Suspend).To(Equal(ptr.To(true)))
		mj := &kubeflow.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: labels},
			Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
			}}}
		g.Expect(worker.Client.Create(ctx, mj, client.DryRunAll)).To(Succeed())
		g.Expect(mj.Spec.RunPolicy.Suspend).To(Equal(ptr.To(true)))
		l := &lwsapi.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: labels},
			Spec: lwsapi.LeaderWorkerSetSpec{StartupPolicy: lwsapi.LeaderCreatedStartupPolicy, RolloutStrategy: lwsapi.RolloutStrategy{Type: lwsapi.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
					LeaderTemplate: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
				}}}
		g.Expect(worker.Client.Create(ctx, l, client.DryRunAll)).To(Succeed())
		gate := corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}
		g.Expect(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates).To(ConsistOf(gate))
		g.Expect(l.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.SchedulingGates).To(ConsistOf(gate))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	By("the test hub's fencing Lease: it does not fence (no duration)")
	// The agent admits no copy of a hub whose Lease it has not read; the
	// specs' copies say they come from hub "strata-hub".
	ctx := context.Background()
	Expect(client.IgnoreAlreadyExists(worker.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultWorkerNamespace}}))).To(Succeed())
	Expect(worker.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: config.DefaultWorkerNamespace, Name: strata.FencingLeasePrefix + "strata-hub"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("strata-hub"), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}})).To(Succeed())

	stopAgent = startAgent()
	DeferCleanup(func() { stopAgent() })
})

var (
	// stopAgent stops the running agent's manager.
	stopAgent func()
	// nodeClock measures hot swap's delays and timeouts in the running
	// agent; specs step it instead of waiting. It starts at the real time.
	nodeClock *testingclock.FakeClock
	// eventsClock paces the ClusterQueues' admission digests.
	eventsClock *testingclock.FakeClock
	// podsReadyClock measures waitForPodsReady's timeouts and backoff in
	// the running agent: no spec times out unless it moves it.
	podsReadyClock *testingclock.FakeClock
)

// startAgent starts the agent's controllers in a new manager (with a new,
// empty capacity cache and a new nodeClock), with the default
// configuration changed by configure, and returns a function that stops it.
func startAgent(configure ...func(*configv1beta1.AgentConfiguration)) func() {
	By("starting the agent's controllers")
	cfg, err := config.LoadAgent("")
	Expect(err).NotTo(HaveOccurred())
	// Off by default; on here, so that every spec's queues are counted
	// (the Admission container's metrics spec reads them).
	cfg.Metrics.LocalQueueMetrics = true
	for _, c := range configure {
		c(cfg)
	}
	nodeClock = testingclock.NewFakeClock(time.Now())
	eventsClock = testingclock.NewFakeClock(time.Now())
	podsReadyClock = testingclock.NewFakeClock(time.Now())
	mgr, err := framework.NewManager(worker.Config)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	Expect(controller.SetupControllers(ctx, mgr, cfg, controller.WithNodeFailureClock(nodeClock), controller.WithEventsClock(eventsClock),
		controller.WithPodsReadyClock(podsReadyClock))).To(Succeed())
	stop := framework.Run(ctx, mgr)
	return func() {
		cancel()
		Expect(stop()).To(Succeed())
	}
}
