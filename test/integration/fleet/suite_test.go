// Package fleet tests the hub with its workers: one hub and three worker
// API servers, each worker running the agent's controllers in-process, the
// hub connected to them through real kubeconfig Secrets.
package fleet

import (
	"bytes"
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	agentcontroller "strata.dev/strata/agent/controller"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	hubcontroller "strata.dev/strata/hub/controller"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/test/integration/framework"
)

var (
	clusters *framework.Clusters
	hub      *framework.Cluster
	workers  []*framework.Cluster
	hubCfg   *configv1beta1.HubConfiguration
	// stopHub stops the running hub's manager; hubCache is its cache (what
	// its dispatcher reads).
	stopHub  func()
	hubCache client.Reader
	// hubIdentity is the hub chart's ServiceAccount on the hub cluster,
	// with the chart's RBAC and nothing more.
	hubIdentity *rest.Config
	// links are the hub's network paths to each worker's API server, which
	// a spec may cut (a partition: the worker's agent still reaches its
	// own API server).
	links = map[string]*framework.Link{}
	// stopAgents stop each worker's running agent.
	stopAgents = map[string]func(){}
	// hubClock is the clock of the hub startHub starts; agentClocks, by
	// worker, those of the agents startAgent starts (the real one when
	// absent): specs give them clocks that disagree.
	hubClock    clock.Clock = clock.RealClock{}
	agentClocks             = map[string]clock.Clock{}
	// podsReadyClocks measure each running agent's waitForPodsReady
	// timeouts (no pod is ever ready here): a new one at each start, which
	// only a spec that moves it lets time out.
	podsReadyClocks = map[string]*testingclock.FakeClock{}
)

// chartIdentity renders the hub chart with helm, applies its ServiceAccount
// and RBAC (the CRDs are installed already; nothing runs the Deployment),
// and returns a client config with a token of that ServiceAccount.
func chartIdentity(ctx context.Context) *rest.Config {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	rendered, err := exec.Command(filepath.Join(bin, "helm"), "template", "strata-hub", filepath.Join(framework.RepoRoot(), "charts", "strata-hub"),
		"--namespace", hubCfg.Namespace, "--kube-version", "1.37.1").Output()
	Expect(err).NotTo(HaveOccurred())
	apply := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", hub.KubeconfigPath, "apply", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	out, err := apply.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	cs, err := kubernetes.NewForConfig(hub.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(hubCfg.Namespace).CreateToken(ctx, "strata-hub",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(hub.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

func TestFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fleet Suite")
}

// A failed spec's log ends with the clusters' queues and unfinished
// Workloads, before its cleanups remove them.
var _ = AfterEach(func(ctx SpecContext) {
	if CurrentSpecReport().Failed() {
		clusters.Dump(ctx, GinkgoWriter)
	}
})

var _ = BeforeSuite(func() {
	ctrl.SetLogger(funcr.New(func(prefix, args string) { GinkgoWriter.Println(prefix, args) }, funcr.Options{Verbosity: 2, LogTimestamp: true}))
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// JobSet's, MPIJob's and LeaderWorkerSet's CRDs on the hub, w1 and w2;
	// w3 serves none of them.
	jobSetCRDs, err := framework.JobSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	mpiJobCRDs, err := framework.MPIJobCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	lwsCRDs, err := framework.LeaderWorkerSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	jobSetCRDs = append(append(jobSetCRDs, mpiJobCRDs...), lwsCRDs...) // w3 serves none
	// The cluster autoscaler's ProvisioningRequest on w1 and w2, so that
	// their agents run the ProvisioningRequest admission check.
	workerCRDs := append(slices.Clone(jobSetCRDs), framework.ProvisioningRequestCRDPaths()...)
	clusters, err = framework.Start(
		framework.ClusterSpec{Name: "hub", Role: framework.Hub, CRDPaths: jobSetCRDs},
		framework.ClusterSpec{Name: "w1", Role: framework.Worker, CRDPaths: workerCRDs, GarbageCollector: true},
		framework.ClusterSpec{Name: "w2", Role: framework.Worker, CRDPaths: workerCRDs, GarbageCollector: true},
		framework.ClusterSpec{Name: "w3", Role: framework.Worker, GarbageCollector: true},
	)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(clusters.Stop()).To(Succeed()) })
	hub = clusters.Get("hub")
	workers = []*framework.Cluster{clusters.Get("w1"), clusters.Get("w2"), clusters.Get("w3")}

	By("installing the charts' admission policies with kubectl")
	kubectlApply(hub, filepath.Join("charts", "strata-hub", "templates", "admission-policy.yaml"))
	for _, w := range workers {
		kubectlApply(w, filepath.Join("charts", "strata-agent", "templates", "admission-policy.yaml"))
	}

	// The hub and the agents take in JobSets only if their API is served
	// when they start; the hub's admission policy must mark JobSets managed
	// by the hub before a spec creates one: wait for both (a dry run).
	Eventually(func(g Gomega) {
		ctx := context.Background()
		for _, c := range []*framework.Cluster{hub, workers[0], workers[1]} {
			g.Expect(c.Client.List(ctx, &jobsetapi.JobSetList{})).To(Succeed())
			g.Expect(c.Client.List(ctx, &kubeflow.MPIJobList{})).To(Succeed())
		}
		js := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: map[string]string{strata.QueueNameLabel: "probe"}}}
		g.Expect(hub.Client.Create(ctx, js, client.DryRunAll)).To(Succeed())
		g.Expect(js.Spec.ManagedBy).To(Equal(ptr.To(strata.ManagedByController)))
		mj := &kubeflow.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: map[string]string{strata.QueueNameLabel: "probe"}},
			Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
			}}}
		g.Expect(hub.Client.Create(ctx, mj, client.DryRunAll)).To(Succeed())
		g.Expect(mj.Spec.RunPolicy.ManagedBy).To(Equal(ptr.To(strata.ManagedByController)))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	hubCfg, err = config.LoadHub("")
	Expect(err).NotTo(HaveOccurred())
	hubCfg.Dispatch.AdmissionTimeout = &metav1.Duration{Duration: 8 * time.Second}
	hubCfg.Dispatch.PendingTimeout = &metav1.Duration{Duration: 3 * time.Second}
	hubCfg.Dispatch.RejectionBackoff = &metav1.Duration{Duration: time.Minute}
	hubCfg.Dispatch.OrphanCheckInterval = &metav1.Duration{Duration: 2 * time.Second}
	hubCfg.Dispatch.FinishedRetention = &metav1.Duration{Duration: 2 * time.Second}
	hubCfg.Dispatch.SummaryCopyInterval = &metav1.Duration{Duration: time.Second}
	// Off by default; on here, so that the dispatch spec reads the hub's
	// LocalQueue metrics.
	hubCfg.Metrics.LocalQueueMetrics = true
	ctx := context.Background()
	Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Namespace}})).To(Succeed())

	By("installing the hub chart's RBAC with the real helm; the hub runs as its ServiceAccount")
	hubIdentity = chartIdentity(ctx)

	for _, w := range workers {
		Expect(w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Dispatch.WorkerNamespace}})).To(Succeed())
		stopAgents[w.Name] = startAgent(w)
		DeferCleanup(func() { stopAgents[w.Name]() })
	}
	stopHub = startHub()
	DeferCleanup(func() { stopHub() })

	By("registering the workers through kubeconfig Secrets, each through a link the specs can cut")
	for _, w := range workers {
		registerWorker(ctx, w.Name, linked(w))
	}
})

// linked returns w's kubeconfig with its server behind a new Link, kept in
// links.
func linked(w *framework.Cluster) []byte {
	GinkgoHelper()
	cfg, err := clientcmd.Load(w.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		Expect(err).NotTo(HaveOccurred())
		l, err := framework.NewLink(u.Host)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		links[w.Name] = l
		u.Host = l.Addr()
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// kubectlApply applies a file of the repository on cluster c.
func kubectlApply(c *framework.Cluster, path string) {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", c.KubeconfigPath, "apply", "-f",
		filepath.Join(framework.RepoRoot(), path)).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
}

// startAgent starts the agent's controllers on worker w and returns a
// function that stops them.
func startAgent(w *framework.Cluster) func() {
	GinkgoHelper()
	cfg, err := config.LoadAgent("")
	Expect(err).NotTo(HaveOccurred())
	cfg.Summary.MinInterval = &metav1.Duration{Duration: 100 * time.Millisecond}
	// waitForPodsReady (on by default, its clock podsReadyClocks): a
	// second's backoff, which the hub waits out before placing a copy
	// again, and one requeue before a Job is deactivated.
	cfg.WaitForPodsReady.RequeuingStrategy.BackoffBaseSeconds = ptr.To[int32](1)
	cfg.WaitForPodsReady.RequeuingStrategy.BackoffLimitCount = ptr.To[int32](1)
	mgr, err := framework.NewManager(w.Config)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	agentClock := agentClocks[w.Name]
	if agentClock == nil {
		agentClock = clock.RealClock{}
	}
	podsReadyClocks[w.Name] = testingclock.NewFakeClock(time.Now())
	Expect(agentcontroller.SetupControllers(ctx, mgr, cfg, agentcontroller.WithFencingClock(agentClock),
		agentcontroller.WithPodsReadyClock(podsReadyClocks[w.Name]))).To(Succeed())
	stop := framework.Run(ctx, mgr)
	return func() {
		cancel()
		Expect(stop()).To(Succeed())
	}
}

// startHub starts the hub's controllers and returns a function that stops
// them.
func startHub() func() {
	GinkgoHelper()
	By("starting the hub's controllers")
	mgr, err := framework.NewHubManager(hubIdentity)
	Expect(err).NotTo(HaveOccurred())
	_, err = hubcontroller.SetupControllers(mgr, hubCfg, hubcontroller.WithClock(hubClock))
	Expect(err).NotTo(HaveOccurred())
	hubCache = mgr.GetCache()
	stop := framework.Run(context.Background(), mgr)
	return func() { Expect(stop()).To(Succeed()) }
}
