// Package e2e runs strata-agent against a kwok cluster: a real
// kube-apiserver, kube-controller-manager, kube-scheduler and etcd, with
// kwok simulating the nodes. The agent is installed with the real helm chart
// (CRDs, RBAC, admission policy) and runs as a process with the chart's
// ServiceAccount credentials.
package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/test/integration/framework"
)

const clusterName = "strata-e2e"

var (
	k8sBin     string
	workDir    string
	adminKC    string
	kube       client.Client
	agentLog   string
	agentProcs *gexec.Session
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kwok e2e Suite")
}

// run runs a command and returns its combined output, failing the suite on
// error.
func run(name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+workDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ExpectWithOffset(1, cmd.Run()).To(Succeed(), "%s %s:\n%s", name, strings.Join(args, " "), out.String())
	return out.String()
}

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

var _ = BeforeSuite(func() {
	var err error
	k8sBin, err = framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	for _, b := range []string{"kwokctl", "kwok", "helm", "kube-controller-manager", "kube-scheduler"} {
		_, err := os.Stat(filepath.Join(k8sBin, b))
		Expect(err).NotTo(HaveOccurred(), "%s is missing: run 'make k8s-binaries'", b)
	}
	root := framework.RepoRoot()
	workDir = filepath.Join(root, ".kwok")
	tmp := GinkgoT().TempDir()
	adminKC = filepath.Join(tmp, "admin.kubeconfig")
	kwokctl := filepath.Join(k8sBin, "kwokctl")

	By("creating the kwok cluster " + clusterName)
	_ = exec.Command(kwokctl, "delete", "cluster", "--name", clusterName).Run() // left over from an interrupted run
	run(kwokctl, "create", "cluster", "--name", clusterName, "--runtime", "binary",
		"--kube-apiserver-binary", filepath.Join(k8sBin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(k8sBin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(k8sBin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(k8sBin, "kwok"),
		"--etcd-binary", filepath.Join(k8sBin, "etcd"),
		"--kubeconfig", adminKC, "--wait", "2m")
	DeferCleanup(func() {
		cmd := exec.Command(kwokctl, "delete", "cluster", "--name", clusterName)
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+workDir)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	Expect(err).NotTo(HaveOccurred())
	kube, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())

	By("installing the strata-agent chart with helm (no Deployment replica: the agent runs as a process)")
	run(filepath.Join(k8sBin, "helm"), "install", "strata-agent", filepath.Join(root, "charts", "strata-agent"),
		"--kubeconfig", adminKC, "--namespace", "strata-system", "--create-namespace", "--set", "replicas=0", "--wait")

	By("building strata-agent and running it with the chart's ServiceAccount")
	agent := filepath.Join(tmp, "strata-agent")
	build := exec.Command("go", "build", "-o", agent, "./agent/cmd/strata-agent")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	token := strings.TrimSpace(run(filepath.Join(k8sBin, "kubectl"), "--kubeconfig", adminKC,
		"create", "token", "strata-agent", "--namespace", "strata-system", "--duration", "2h"))
	agentKC := filepath.Join(tmp, "agent.kubeconfig")
	writeTokenKubeconfig(adminKC, agentKC, token)
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
		if CurrentSpecReport().Failed() || os.Getenv("STRATA_E2E_LOGS") != "" {
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

// writeTokenKubeconfig writes a kubeconfig for the admin kubeconfig's server
// that authenticates with token.
func writeTokenKubeconfig(adminPath, path, token string) {
	cfg, err := clientcmd.LoadFromFile(adminPath)
	Expect(err).NotTo(HaveOccurred())
	ctx := cfg.Contexts[cfg.CurrentContext]
	Expect(ctx).NotTo(BeNil())
	for name := range cfg.AuthInfos {
		delete(cfg.AuthInfos, name)
	}
	cfg.AuthInfos["strata-agent"] = &clientcmdapi.AuthInfo{Token: token}
	ctx.AuthInfo = "strata-agent"
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
}
