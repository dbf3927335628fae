// Package e2e runs strata-agent against a kwok cluster: a real
// kube-apiserver, kube-controller-manager, kube-scheduler and etcd, with
// kwok simulating the nodes. The agent is installed with the real helm chart
// (CRDs, RBAC, admission policy) and runs as a process with the chart's
// ServiceAccount credentials.
package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

const clusterName = "strata-e2e"

var (
	kube       client.Client
	agentLog   string
	agentProcs *gexec.Session
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

var _ = BeforeSuite(func() {
	root := framework.RepoRoot()
	tmp := GinkgoT().TempDir()

	By("creating the kwok cluster " + clusterName)
	cluster, err := kwokcluster.Create(clusterName, tmp)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cluster.Delete()).To(Succeed()) })
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	kube, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())

	By("installing the strata-agent chart with helm (no Deployment replica: the agent runs as a process)")
	agentKC, err := cluster.InstallAgentChart(tmp)
	Expect(err).NotTo(HaveOccurred())

	By("building strata-agent and running it with the chart's ServiceAccount")
	agent := filepath.Join(tmp, "strata-agent")
	build := exec.Command("go", "build", "-o", agent, "./agent/cmd/strata-agent")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	agentLog = filepath.Join(tmp, "strata-agent.log")
	logFile, err := os.Create(agentLog)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(agent, "--kubeconfig", agentKC, "--metrics-bind-address", freeAddress(), "--health-probe-bind-address", freeAddress())
	agentProcs, err = gexec.Start(cmd, logFile, logFile)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		agentProcs.Terminate()
		Eventually(agentProcs, 30*time.Second).Should(gexec.Exit())
		_ = logFile.Close()
		if os.Getenv("STRATA_E2E_LOGS") != "" {
			data, _ := os.ReadFile(agentLog)
			GinkgoWriter.Printf("strata-agent log:\n%s\n", data)
		}
	})
})

var _ = ReportAfterSuite("agent log on failure", func(r Report) {
	if !r.SuiteSucceeded && agentLog != "" {
		data, _ := os.ReadFile(agentLog)
		fmt.Printf("strata-agent log (%s):\n%s\n", agentLog, data)
	}
})
