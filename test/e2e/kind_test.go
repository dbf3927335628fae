package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kindcluster"
	"strata.dev/strata/test/kwokcluster"
)

// kwokVersion is the kwok whose controller simulates the specs' nodes on
// kind (its manifests from the module proxy, its image from
// registry.k8s.io).
const kwokVersion = "v0.8.0"

// kindCluster is a kind cluster the suite created (test/kindcluster),
// with the images of tag loaded; the charts run the binaries as
// Deployments.
type kindCluster struct {
	*kindcluster.Cluster
	tag string
}

// newKindCluster creates the kind cluster of a name: a hub cluster for a
// name ending in -hub, a worker otherwise (with kwok's controller and the
// suite's stages for the simulated nodes, and a fake GPU capacity on the
// kind worker node).
func newKindCluster(name string) *kindCluster {
	GinkgoHelper()
	if err := kindcluster.CheckDocker(); err != nil {
		Fail(err.Error())
	}
	tag := os.Getenv("STRATA_E2E_IMAGE_TAG")
	Expect(tag).NotTo(BeEmpty(), "STRATA_E2E_IMAGE_TAG is the tag of the images `make images` built (make test-e2e-kind sets it)")
	role := kindcluster.Worker
	if strings.HasSuffix(name, "-hub") {
		role = kindcluster.Hub
	}
	By(fmt.Sprintf("creating the kind cluster %s (%s) through kind's Go API", name, role))
	kc, err := kindcluster.Create(name, role, tmp, 5*time.Minute)
	Expect(err).NotTo(HaveOccurred())
	c := &kindCluster{Cluster: kc, tag: tag}
	Expect(kc.LoadImageArchives(kindcluster.ImageArchives(framework.RepoRoot(), tag, runtime.GOARCH))).To(Succeed())
	if role == kindcluster.Worker {
		node := strings.TrimSpace(c.run(nil, "kubectl", "get", "nodes", "-l", "!node-role.kubernetes.io/control-plane", "-o", "jsonpath={.items[0].metadata.name}"))
		c.run(nil, "kubectl", "patch", "node", node, "--subresource", "status", "--type", "merge", "-p", `{"status":{"capacity":{"nvidia.com/gpu":"8"}}}`)
		By("kwok's controller on " + name + " (it simulates the specs' nodes)")
		c.run(nil, "kubectl", "apply", "-k", kwokKustomize())
		c.run(nil, "kubectl", "-n", "kube-system", "set", "image", "deployment/kwok-controller", "kwok-controller=registry.k8s.io/kwok/kwok:"+kwokVersion)
		c.run(nil, "kubectl", "-n", "kube-system", "rollout", "status", "deployment/kwok-controller", "--timeout", "3m")
		stages, err := kwokcluster.Stages()
		Expect(err).NotTo(HaveOccurred())
		c.run(stages, "kubectl", "apply", "-f", "-")
	}
	return c
}

// kwokKustomize is kwok's kustomization of its controller, from the
// module proxy.
func kwokKustomize() string {
	GinkgoHelper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+kwokVersion).Output()
	Expect(err).NotTo(HaveOccurred())
	var mod struct{ Dir string }
	Expect(json.Unmarshal(out, &mod)).To(Succeed())
	return filepath.Join(mod.Dir, "kustomize", "kwok")
}

func (c *kindCluster) Name() string       { return c.Cluster.Name }
func (c *kindCluster) Kubeconfig() string { return c.Cluster.Kubeconfig }

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

func (c *kindCluster) Deploy(chart, config string) {
	GinkgoHelper()
	By(fmt.Sprintf("installing the %s chart on %s with helm, running image tag %s", chart, c.Name(), c.tag))
	values := filepath.Join(tmp, c.Name()+"-"+chart+"-values.yaml")
	body := "config: {}\n"
	if config != "" {
		body = "config:\n  " + strings.ReplaceAll(strings.TrimRight(config, "\n"), "\n", "\n  ") + "\n"
	}
	Expect(os.WriteFile(values, []byte(body), 0o600)).To(Succeed())
	args := append([]string{"install", chart, filepath.Join(framework.RepoRoot(), "charts", chart),
		"--namespace", kwokcluster.Namespace, "--create-namespace", "--wait", "--timeout", "3m"}, kindcluster.ChartArgs(values, c.tag)...)
	c.run(nil, "helm", args...)
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
	By("installing JobSet's release manifests on " + c.Name())
	c.run(nil, "kubectl", "apply", "--server-side", "-f",
		"https://github.com/kubernetes-sigs/jobset/releases/download/"+jobSetVersion()+"/manifests.yaml")
	c.run(nil, "kubectl", "rollout", "status", "deployment/jobset-controller-manager", "--namespace", "jobset-system", "--timeout", "5m")
}

func (c *kindCluster) Credential(sa string) []byte {
	GinkgoHelper()
	token := strings.TrimSpace(c.run(nil, "kubectl", "create", "token", sa, "--namespace", kwokcluster.Namespace, "--duration", "2h"))
	internal, err := os.ReadFile(c.InternalKubeconfig)
	Expect(err).NotTo(HaveOccurred())
	kc, err := kindcluster.Credential(internal, sa, token)
	Expect(err).NotTo(HaveOccurred())
	return kc
}

// InstallMPIJob installs the MPIJob CRD; the MPI operator is not run on
// kind (no image of it is built here).
func (c *kindCluster) InstallMPIJob(controller bool) bool {
	GinkgoHelper()
	installMPIJobCRD(c)
	return !controller
}

// InstallLWS installs the LeaderWorkerSet CRD; its controller is not run
// on kind (no image of it is built here).
func (c *kindCluster) InstallLWS(controller bool) bool {
	GinkgoHelper()
	installLWSCRD(c)
	return !controller
}

// RestartControlPlane: a kind node container restarts as a whole (its
// kubelet and the workload too), which is not the fault the specs inject.
func (c *kindCluster) RestartControlPlane() bool { return false }

func (c *kindCluster) CollectLogs(dir string) error {
	dst := filepath.Join(dir, c.Name())
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
	return c.Cluster.CollectLogs(filepath.Join(dst, "kind"))
}

// Delete deletes the cluster, unless KEEP=1 keeps it for a look
// (make test-e2e-kind-down removes it then).
func (c *kindCluster) Delete() error {
	if os.Getenv("KEEP") == "1" {
		GinkgoWriter.Printf("keeping the kind cluster %s (kubeconfig %s)\n", c.Name(), c.Kubeconfig())
		return nil
	}
	return c.Cluster.Delete()
}
