package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

// cluster is one of the suite's clusters, as its provider makes it. The
// specs see only this: they share all their code between providers.
//
//   - kwok (default): kwokctl clusters on this machine; strata-agent and
//     strata-hub run as processes with their charts' ServiceAccounts.
//   - kind (STRATA_E2E_PROVIDER=kind, hack/e2e-kind.sh, needs Docker): kind
//     clusters the script created, with the images it loaded and a kwok
//     controller for the simulated nodes; the charts run the binaries as
//     Deployments.
type cluster interface {
	// Name is the cluster's name.
	Name() string
	// Kubeconfig is an admin kubeconfig file.
	Kubeconfig() string
	// Deploy installs chart (strata-agent or strata-hub) and runs its
	// binary as the chart's ServiceAccount, with config (the body of its
	// configuration file, without apiVersion and kind; "" for defaults).
	Deploy(chart, config string)
	// Credential is a kubeconfig that authenticates as ServiceAccount sa
	// of strata-system and reaches this cluster from where the hub runs.
	Credential(sa string) []byte
	// InstallJobSet installs JobSet's CRD and, with controller, its
	// controller (the hub needs the CRD only), before the agent or the hub
	// starts: they take in the kinds served when they start.
	InstallJobSet(controller bool)
	// CollectLogs copies the cluster's logs into dir.
	CollectLogs(dir string) error
	// Delete removes what the provider created.
	Delete() error
}

// kind is true when the suite runs on kind clusters.
func kind() bool { return os.Getenv("STRATA_E2E_PROVIDER") == "kind" }

// newCluster makes the cluster of a name with the suite's provider.
func newCluster(name string) cluster {
	GinkgoHelper()
	if kind() {
		dir := os.Getenv("STRATA_E2E_KIND_DIR")
		Expect(dir).NotTo(BeEmpty(), "STRATA_E2E_KIND_DIR names the folder of the kind clusters' kubeconfigs (hack/e2e-kind.sh sets it)")
		c := &kindCluster{name: name, dir: dir, tag: os.Getenv("STRATA_E2E_IMAGE_TAG")}
		Expect(c.tag).NotTo(BeEmpty(), "STRATA_E2E_IMAGE_TAG is the tag of the loaded images (hack/e2e-kind.sh sets it)")
		c.applyStages()
		return c
	}
	c, err := kwokcluster.Create(name, tmp)
	Expect(err).NotTo(HaveOccurred())
	return &kwokCluster{Cluster: c}
}

// kwokCluster is a kwokctl cluster; its Strata binaries run as processes.
type kwokCluster struct{ *kwokcluster.Cluster }

func (c *kwokCluster) Name() string       { return c.Cluster.Name }
func (c *kwokCluster) Kubeconfig() string { return c.Cluster.Kubeconfig }

func (c *kwokCluster) Deploy(chart, config string) {
	GinkgoHelper()
	By(fmt.Sprintf("installing the %s chart on %s with helm (no Deployment replica: the binary runs as a process)", chart, c.Name()))
	kc, err := c.InstallChart(tmp, chart)
	Expect(err).NotTo(HaveOccurred())
	args := []string{"--kubeconfig", kc}
	if config != "" {
		kind := map[string]string{"strata-agent": "AgentConfiguration", "strata-hub": "HubConfiguration"}[chart]
		file := filepath.Join(tmp, c.Name()+"-"+chart+".yaml")
		Expect(os.WriteFile(file, []byte("apiVersion: config.strata.dev/v1beta1\nkind: "+kind+"\n"+config), 0o600)).To(Succeed())
		args = append(args, "--config", file)
	}
	pkg := map[string]string{"strata-agent": "./agent/cmd/strata-agent", "strata-hub": "./hub/cmd/strata-hub"}[chart]
	start(chart+"-"+c.Name(), build(chart, pkg), args...)
}

func (c *kwokCluster) InstallJobSet(controller bool) {
	GinkgoHelper()
	installJobSetCRD(c)
	if controller {
		runJobSetController(c)
	}
}

func (c *kwokCluster) Credential(sa string) []byte {
	GinkgoHelper()
	kc, err := c.ServiceAccountKubeconfig(sa)
	Expect(err).NotTo(HaveOccurred())
	return kc
}

// kindCluster is a kind cluster hack/e2e-kind.sh created: its kubeconfig
// is <dir>/<name>.kubeconfig, and <dir>/<name>-internal.kubeconfig reaches
// it from the other clusters' pods.
type kindCluster struct {
	name, dir, tag string
}

func (c *kindCluster) Name() string       { return c.name }
func (c *kindCluster) Kubeconfig() string { return filepath.Join(c.dir, c.name+".kubeconfig") }

// run runs one of the built tools (kubectl, helm) against the cluster.
func (c *kindCluster) run(stdin []byte, tool string, args ...string) string {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(bin, tool), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s %s: %s", tool, strings.Join(args, " "), out)
	return string(out)
}

// applyStages gives the cluster's kwok controller the suite's stages.
func (c *kindCluster) applyStages() {
	GinkgoHelper()
	stages, err := kwokcluster.Stages()
	Expect(err).NotTo(HaveOccurred())
	c.run(stages, "kubectl", "apply", "-f", "-")
}

func (c *kindCluster) Deploy(chart, config string) {
	GinkgoHelper()
	By(fmt.Sprintf("installing the %s chart on %s with helm, running image tag %s", chart, c.name, c.tag))
	values := filepath.Join(tmp, c.name+"-"+chart+"-values.yaml")
	body := "config: {}\n"
	if config != "" {
		body = "config:\n  " + strings.ReplaceAll(strings.TrimRight(config, "\n"), "\n", "\n  ") + "\n"
	}
	Expect(os.WriteFile(values, []byte(body), 0o600)).To(Succeed())
	c.run(nil, "helm", "install", chart, filepath.Join(framework.RepoRoot(), "charts", chart),
		"--namespace", kwokcluster.Namespace, "--create-namespace", "--values", values,
		"--set", "image.tag="+c.tag, "--set", "image.pullPolicy=Never",
		// On kind's own nodes, not on the simulated ones (they have no OS label).
		"--set", `nodeSelector.kubernetes\.io/os=linux`, "--wait", "--timeout", "3m")
	c.run(nil, "kubectl", "rollout", "status", "deployment/"+chart, "--namespace", kwokcluster.Namespace, "--timeout", "3m")
}

// InstallJobSet applies JobSet's release manifests (CRD, controller and
// webhooks, at the version go.mod requires; the nodes pull its image), or
// its CRD only.
func (c *kindCluster) InstallJobSet(controller bool) {
	GinkgoHelper()
	if !controller {
		installJobSetCRD(c)
		return
	}
	By("installing JobSet's release manifests on " + c.name)
	version := jobSetVersion()
	c.run(nil, "kubectl", "apply", "--server-side", "-f",
		"https://github.com/kubernetes-sigs/jobset/releases/download/"+version+"/manifests.yaml")
	c.run(nil, "kubectl", "rollout", "status", "deployment/jobset-controller-manager", "--namespace", "jobset-system", "--timeout", "5m")
}

func (c *kindCluster) Credential(sa string) []byte {
	GinkgoHelper()
	token := strings.TrimSpace(c.run(nil, "kubectl", "create", "token", sa, "--namespace", kwokcluster.Namespace, "--duration", "2h"))
	cfg, err := clientcmd.LoadFromFile(filepath.Join(c.dir, c.name+"-internal.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	ctx := cfg.Contexts[cfg.CurrentContext]
	Expect(ctx).NotTo(BeNil())
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{sa: {Token: token}}
	ctx.AuthInfo = sa
	out, err := clientcmd.Write(*cfg)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func (c *kindCluster) CollectLogs(dir string) error {
	dst := filepath.Join(dir, c.name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	bin, err := framework.BinDir()
	if err != nil {
		return err
	}
	for _, d := range []string{"strata-agent", "strata-hub"} {
		out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", c.Kubeconfig(), "logs", "deployment/"+d,
			"--namespace", kwokcluster.Namespace, "--tail", "-1").CombinedOutput()
		if err == nil {
			if err := os.WriteFile(filepath.Join(dst, d+".log"), out, 0o644); err != nil {
				return err
			}
		}
	}
	// The clusters' own logs: kind export logs, where kind is on the PATH.
	if kindBin, err := exec.LookPath("kind"); err == nil {
		cmd := exec.Command(kindBin, "export", "logs", filepath.Join(dst, "kind"), "--name", c.name)
		cmd.WaitDelay = time.Minute
		_ = cmd.Run()
	}
	return nil
}

// Delete leaves the cluster to hack/e2e-kind.sh, which made it.
func (c *kindCluster) Delete() error { return nil }
