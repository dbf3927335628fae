// Package kindcluster makes the e2e suite's kind clusters through kind's
// own Go API (sigs.k8s.io/kind/pkg/cluster), as test/kwokcluster makes
// kwok ones with kwokctl: typed v1alpha4 configurations built here (the
// topology levels as node labels, the node image pinned by digest), the
// images loaded into every node, the kubeconfig the hub's pods use (the
// control plane's address on kind's network) written beside the admin
// one. It needs a Docker engine that runs privileged containers; CheckDocker
// says at once when there is none. test/kindcluster's unit tests check,
// offline, that every configuration passes kind's own validation and that
// what the suite computes (image archives, chart values, credentials) is
// right.
package kindcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// NodeImage is kind v0.33.0's node image of Kubernetes 1.37.0, pinned by
// digest as kind's release notes ask (the charts need Kubernetes 1.36 or
// later).
const NodeImage = "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// Topology labels of the kind worker node: the e2e specs' Topology levels
// (their Jobs run on kwok's simulated nodes, which carry their own).
const (
	BlockLabel = "cloud.provider.com/topology-block"
	RackLabel  = "cloud.provider.com/topology-rack"
)

// SuiteClusters are the clusters the e2e suite creates.
var SuiteClusters = []string{"strata-e2e", "strata-e2e-w2", "strata-e2e-hub"}

// Role is what a cluster runs.
type Role string

const (
	// Worker clusters run strata-agent (and kwok's controller, for the
	// simulated nodes).
	Worker Role = "worker"
	// Hub clusters run strata-hub.
	Hub Role = "hub"
)

// Config is the kind configuration of a cluster of role: a control plane,
// and for a worker a worker node labelled with its topology domain.
func Config(name string, role Role) *v1alpha4.Cluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     name,
		Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole, Image: NodeImage}},
	}
	if role == Worker {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, Image: NodeImage,
			Labels: map[string]string{BlockLabel: "kind-block", RackLabel: "kind-rack"}})
	}
	v1alpha4.SetDefaultsCluster(cfg)
	return cfg
}

// ErrNoDocker says that kind cannot run here.
var ErrNoDocker = errors.New("the kind e2e needs a running Docker engine that runs privileged containers; `make test-e2e` runs the same specs on kwok without one")

// CheckDocker fails at once, with one line, when no Docker engine answers.
func CheckDocker() error {
	path, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("%w (no docker command on PATH)", ErrNoDocker)
	}
	out, err := exec.Command(path, "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return fmt.Errorf("%w (docker info: %s)", ErrNoDocker, firstLine(out, err))
	}
	return nil
}

func firstLine(out []byte, err error) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" && err != nil {
		return err.Error()
	}
	return line
}

// Cluster is a running kind cluster.
type Cluster struct {
	Name string
	// Kubeconfig is an admin kubeconfig file, reaching the cluster from
	// this machine.
	Kubeconfig string
	// InternalKubeconfig reaches it from the other clusters' pods (its
	// control plane's address on kind's network).
	InternalKubeconfig string

	provider *cluster.Provider
}

// provider is kind's Docker provider.
func provider() *cluster.Provider {
	return cluster.NewProvider(cluster.ProviderWithDocker())
}

// Create creates the kind cluster name of role, its kubeconfigs in dir,
// and waits up to wait for its nodes to be ready. A cluster of that name
// left by an earlier run is deleted first.
func Create(name string, role Role, dir string, wait time.Duration) (*Cluster, error) {
	if err := CheckDocker(); err != nil {
		return nil, err
	}
	p := provider()
	c := &Cluster{Name: name, Kubeconfig: filepath.Join(dir, name+".kubeconfig"),
		InternalKubeconfig: filepath.Join(dir, name+"-internal.kubeconfig"), provider: p}
	if existing, err := p.List(); err == nil {
		for _, e := range existing {
			if e == name {
				if err := p.Delete(name, c.Kubeconfig); err != nil {
					return nil, fmt.Errorf("deleting the kind cluster %s left by an earlier run: %w", name, err)
				}
			}
		}
	}
	if err := p.Create(name, cluster.CreateWithV1Alpha4Config(Config(name, role)), cluster.CreateWithNodeImage(NodeImage),
		cluster.CreateWithKubeconfigPath(c.Kubeconfig), cluster.CreateWithWaitForReady(wait),
		cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false)); err != nil {
		return nil, fmt.Errorf("creating the kind cluster %s: %w", name, err)
	}
	internal, err := p.KubeConfig(name, true)
	if err != nil {
		return nil, fmt.Errorf("the internal kubeconfig of %s: %w", name, err)
	}
	if err := os.WriteFile(c.InternalKubeconfig, []byte(internal), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// ImageArchives are the OCI archives `make images` writes for tag and
// arch, which every node of the suite's clusters loads.
func ImageArchives(root, tag, arch string) []string {
	var out []string
	for _, image := range []string{"strata-agent", "strata-hub"} {
		out = append(out, filepath.Join(root, "bin", "images", fmt.Sprintf("%s-%s-%s.tar", image, tag, arch)))
	}
	return out
}

// LoadImageArchives loads the archives into every node of the cluster.
func (c *Cluster) LoadImageArchives(archives []string) error {
	nodes, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return err
	}
	for _, path := range archives {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%w (make images builds it)", err)
		}
		for _, n := range nodes {
			if err := nodeutils.LoadImageArchive(n, bytes.NewReader(data)); err != nil {
				return fmt.Errorf("loading %s into %s: %w", filepath.Base(path), n.String(), err)
			}
		}
	}
	return nil
}

// CollectLogs exports the cluster's logs (kind's own, of every node) into
// dir.
func (c *Cluster) CollectLogs(dir string) error {
	return c.provider.CollectLogs(c.Name, dir)
}

// Delete deletes the cluster.
func (c *Cluster) Delete() error {
	return c.provider.Delete(c.Name, c.Kubeconfig)
}

// DeleteAll deletes the kind clusters of the given names that exist.
func DeleteAll(names ...string) error {
	if err := CheckDocker(); err != nil {
		return err
	}
	p := provider()
	existing, err := p.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range existing {
		for _, n := range names {
			if e == n {
				errs = append(errs, p.Delete(e, ""))
			}
		}
	}
	return errors.Join(errs...)
}

// ChartArgs are the helm arguments that run a chart's binary from the
// loaded image of tag on the cluster: never pulled, on kind's own nodes
// (the simulated ones have no OS label).
func ChartArgs(values, tag string) []string {
	return []string{"--values", values, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", `nodeSelector.kubernetes\.io/os=linux`}
}

// Credential is a kubeconfig that reaches the cluster the way internal
// does (from the other clusters' pods) and authenticates as sa with token.
func Credential(internal []byte, sa, token string) ([]byte, error) {
	cfg, err := clientcmd.Load(internal)
	if err != nil {
		return nil, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return nil, fmt.Errorf("the internal kubeconfig has no current context %q", cfg.CurrentContext)
	}
	if strings.TrimSpace(token) == "" {
		return nil, fmt.Errorf("no token for %s", sa)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{sa: {Token: token}}
	ctx.AuthInfo = sa
	return clientcmd.Write(*cfg)
}
