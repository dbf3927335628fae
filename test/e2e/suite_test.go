// Package e2e runs Strata on kwok clusters: real kube-apiservers,
// kube-controller-managers, kube-schedulers and etcds, with kwok simulating
// the nodes. The charts are installed with the real helm (CRDs, RBAC,
// admission policies); strata-agent and strata-hub run as processes with
// their charts' ServiceAccount credentials.
//
// The suite starts one worker cluster with its agent; the fleet specs add
// a hub and a second worker. The same specs run on kind clusters with
// STRATA_E2E_PROVIDER=kind (make test-e2e-kind; see provider_test.go). Every component's log is written to a folder
// (STRATA_E2E_LOGS, default .e2e-logs/<time> in the repository), kept and
// named in the output when a spec fails, removed otherwise.
package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"strata.dev/strata/agent/controller/provisioning"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/test/integration/framework"
)

const clusterName = "strata-e2e"

var (
	// kube is an admin client of the first worker cluster.
	kube client.Client
	// worker1 is the first worker cluster.
	worker1 cluster
	// lwsController: worker1 runs the LeaderWorkerSet controller.
	lwsController bool
	// tmp holds the suite's kubeconfigs and binaries.
	tmp string
	// logDir holds every component's log.
	logDir string

	failedMu sync.Mutex
	failed   bool
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kwok e2e Suite")
}

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// build builds one of the repository's binaries into tmp.
func build(name, pkg string) string {
	GinkgoHelper()
	out := filepath.Join(tmp, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = framework.RepoRoot()
	b, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(b))
	return out
}

// start runs a binary with its log in logDir/<name>.log, stopped when the
// container that started it ends; processes[name] is its handle (Kill,
// Restart).
func start(name, bin string, args ...string) {
	GinkgoHelper()
	startPlain(name, bin, append(args, "--metrics-bind-address", freeAddress(), "--health-probe-bind-address", freeAddress())...)
}

// startPlain is start for a binary without metrics and health probe
// flags.
func startPlain(name, bin string, args ...string) {
	GinkgoHelper()
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	Expect(err).NotTo(HaveOccurred())
	p := &process{name: name, bin: bin, args: args, log: logFile}
	p.run()
	processesMu.Lock()
	processes[name] = p
	processesMu.Unlock()
	DeferCleanup(func() {
		p.session.Terminate()
		Eventually(p.session, 30*time.Second).Should(gexec.Exit())
		_ = logFile.Close()
	})
}

// process is a component the suite runs as a process (strata-hub,
// strata-agent and JobSet's controller on kwok), by the name its log has.
type process struct {
	name, bin string
	args      []string
	log       *os.File
	session   *gexec.Session
}

var (
	processesMu sync.Mutex
	processes   = map[string]*process{}
)

func (p *process) run() {
	GinkgoHelper()
	session, err := gexec.Start(exec.Command(p.bin, p.args...), p.log, p.log)
	Expect(err).NotTo(HaveOccurred())
	p.session = session
}

// Kill sends SIGKILL, as a node's OOM killer or a crash would: no
// shutdown, no final write.
func (p *process) Kill() {
	GinkgoHelper()
	p.session.Kill()
	Eventually(p.session, 30*time.Second).Should(gexec.Exit())
}

// Restart starts the process again with the same arguments.
func (p *process) Restart() {
	GinkgoHelper()
	p.run()
}

// createCluster makes a cluster with the suite's provider; its logs are
// collected on failure.
func createCluster(name string) cluster {
	GinkgoHelper()
	By("creating the cluster " + name)
	c := newCluster(name)
	DeferCleanup(func() {
		if suiteFailed() {
			if err := c.CollectLogs(logDir); err != nil {
				GinkgoWriter.Printf("collecting the logs of %s: %v\n", name, err)
			}
		}
		Expect(c.Delete()).To(Succeed())
	})
	return c
}

// adminClient is a client of a cluster with its admin kubeconfig.
func adminClient(c cluster) client.Client {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 50, 100
	k, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	return k
}

// suiteFailed says whether a spec failed, or the setup that runs now.
func suiteFailed() bool {
	failedMu.Lock()
	defer failedMu.Unlock()
	return failed || CurrentSpecReport().Failed()
}

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		failedMu.Lock()
		failed = true
		failedMu.Unlock()
	}
})

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	tmp = GinkgoT().TempDir()
	logDir = os.Getenv("STRATA_E2E_LOGS")
	if logDir == "" {
		logDir = filepath.Join(framework.RepoRoot(), ".e2e-logs", time.Now().UTC().Format("20060102-150405"))
	}
	Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	DeferCleanup(func() {
		if suiteFailed() {
			fmt.Printf("\nThe logs of every component (strata-hub, strata-agent, and each kwok cluster's kube-apiserver, etcd, controller-manager, scheduler and kwok) are in %s\n", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})

	worker1 = createCluster(clusterName)
	kube = adminClient(worker1)
	worker1.InstallJobSet(true)
	lwsController = worker1.InstallLWS(true)
	// The cluster autoscaler's ProvisioningRequest CRD (a minimal one:
	// the test plays the autoscaler), before the agent starts.
	provisioningRequests := &unstructured.UnstructuredList{}
	provisioningRequests.SetGroupVersionKind(provisioning.GVK.GroupVersion().WithKind("ProvisioningRequestList"))
	installCRDs(worker1, "the ProvisioningRequest CRD", framework.ProvisioningRequestCRDPaths(), provisioningRequests)
	worker1.Deploy("strata-agent", "")
})
