package e2e

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"strata.dev/strata/test/kwokcluster"
)

// cluster is one of the suite's clusters, as its provider makes it. The
// specs see only this: they share all their code between providers.
//
//   - kwok (default): kwokctl clusters on this machine; strata-agent and
//     strata-hub run as processes with their charts' ServiceAccounts.
//   - kind (STRATA_E2E_PROVIDER=kind, `make test-e2e-kind`, needs Docker):
//     kind clusters the suite creates through kind's Go API
//     (test/kindcluster), with the images `make images` built loaded and a
//     kwok controller for the simulated nodes; the charts run the binaries
//     as Deployments (kind_test.go).
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
	// InstallMPIJob installs the MPIJob CRD and, with controller, the MPI
	// operator's controller, before the agent or the hub starts; false
	// when the provider cannot run the controller.
	InstallMPIJob(controller bool) bool
	// InstallLWS installs the LeaderWorkerSet CRD and, with controller,
	// its controller, before the agent starts; false when the provider
	// cannot run the controller.
	InstallLWS(controller bool) bool
	// RestartControlPlane stops the cluster's control plane and starts it
	// again, its etcd data kept; false when the provider cannot.
	RestartControlPlane() bool
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
		return newKindCluster(name)
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

func (c *kwokCluster) InstallMPIJob(controller bool) bool {
	GinkgoHelper()
	installMPIJobCRD(c)
	if controller {
		runMPIOperator(c)
	}
	return true
}

func (c *kwokCluster) InstallLWS(controller bool) bool {
	GinkgoHelper()
	installLWSCRD(c)
	if controller {
		runLWSController(c)
	}
	return true
}

func (c *kwokCluster) RestartControlPlane() bool {
	GinkgoHelper()
	Expect(c.Restart()).To(Succeed())
	return true
}

func (c *kwokCluster) Credential(sa string) []byte {
	GinkgoHelper()
	kc, err := c.ServiceAccountKubeconfig(sa)
	Expect(err).NotTo(HaveOccurred())
	return kc
}
