// Package kwokcluster starts kwok clusters for the e2e suite and the
// performance harness: a real kube-apiserver, kube-controller-manager,
// kube-scheduler and etcd from `make k8s-binaries`, with kwok simulating
// the nodes, and the strata-agent chart installed with helm.
package kwokcluster

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"strata.dev/strata/test/integration/framework"
)

// Cluster is a running kwok cluster.
type Cluster struct {
	Name string
	// Kubeconfig is an admin kubeconfig file.
	Kubeconfig string
	bin        string
	workDir    string
}

// Option changes how Create starts a cluster.
type Option func(*[]string)

// ExtraArgs passes flags to the cluster's components: kwokctl --extra-args
// values (component=flag=value).
func ExtraArgs(args ...string) Option {
	return func(kwokctl *[]string) {
		for _, a := range args {
			*kwokctl = append(*kwokctl, "--extra-args", a)
		}
	}
}

// HeartbeatFactor scales everything about node heartbeats — the node lease
// duration, the controller-manager's node monitor period and grace period
// — from kwokctl's defaults (factor 5: a 200 s lease renewed every 50 s).
// Thousands of fake nodes renewing leases are a load of their own on the
// API server; a larger factor leaves the machine to what is measured.
func HeartbeatFactor(f float64) Option {
	return func(kwokctl *[]string) {
		*kwokctl = append(*kwokctl, "--heartbeat-factor", strconv.FormatFloat(f, 'f', -1, 64))
	}
}

// Create starts a cluster named name (deleting a leftover one first);
// kubeconfig files go to dir.
func Create(name, dir string, opts ...Option) (*Cluster, error) {
	bin, err := framework.BinDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"kwokctl", "kwok", "helm", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run 'make k8s-binaries'", b, bin)
		}
	}
	c := &Cluster{Name: name, Kubeconfig: filepath.Join(dir, name+".kubeconfig"), bin: bin,
		workDir: filepath.Join(framework.RepoRoot(), ".kwok")}
	_, _ = c.run("kwokctl", "delete", "cluster", "--name", name) // left over from an interrupted run
	stages := filepath.Join(dir, name+"-stages.yaml")
	if err := writeStages(stages); err != nil {
		return nil, err
	}
	args := []string{"create", "cluster", "--name", name, "--runtime", "binary",
		"--kube-apiserver-binary", filepath.Join(bin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(bin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(bin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(bin, "kwok"),
		"--etcd-binary", filepath.Join(bin, "etcd"),
		"--kubeconfig", c.Kubeconfig, "--wait", "2m", "--config", stages}
	for _, o := range opts {
		o(&args)
	}
	_, err = c.run("kwokctl", args...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Delete stops and removes the cluster.
func (c *Cluster) Delete() error {
	_, err := c.run("kwokctl", "delete", "cluster", "--name", c.Name)
	return err
}

// Restart stops every component of the cluster (kube-apiserver, etcd,
// controller-manager, scheduler, kwok) and starts them again; etcd's data
// stays.
func (c *Cluster) Restart() error {
	if _, err := c.run("kwokctl", "stop", "cluster", "--name", c.Name); err != nil {
		return err
	}
	// kwokctl stop does not wait for the old kube-apiserver to let go of
	// its port: one that still holds it makes the new one fail to bind
	// ("address already in use") while kwokctl start reports success.
	if addr, err := c.apiServerAddr(); err == nil {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				break // nothing listens any more
			}
			_ = conn.Close()
		}
	}
	_, err := c.run("kwokctl", "start", "cluster", "--name", c.Name)
	return err
}

// apiServerAddr is the host:port of the cluster's kube-apiserver.
func (c *Cluster) apiServerAddr() (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return "", err
		}
		return u.Host, nil
	}
	return "", fmt.Errorf("no cluster in %s", c.Kubeconfig)
}

// Run runs one of the built binaries (kubectl, helm, ...) with KWOK_WORKDIR set.
func (c *Cluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// InstallAgentChart installs the strata-agent chart (CRDs, RBAC, admission
// policy, the hub's identity) without a Deployment replica, and returns a
// kubeconfig file that authenticates as the chart's ServiceAccount.
func (c *Cluster) InstallAgentChart(dir string) (string, error) {
	return c.InstallChart(dir, "strata-agent")
}

// InstallChart installs one of the repository's charts (strata-agent or
// strata-hub) into strata-system without a Deployment replica — the binary
// runs as a process — and returns a kubeconfig file that authenticates as
// the chart's ServiceAccount, named after the chart.
func (c *Cluster) InstallChart(dir, chart string, set ...string) (string, error) {
	args := []string{"install", chart, filepath.Join(framework.RepoRoot(), "charts", chart),
		"--kubeconfig", c.Kubeconfig, "--namespace", Namespace, "--create-namespace", "--set", "replicas=0", "--wait"}
	for _, v := range set {
		args = append(args, "--set", v)
	}
	if _, err := c.run("helm", args...); err != nil {
		return "", err
	}
	kc, err := c.ServiceAccountKubeconfig(chart)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Name+"-"+chart+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// Namespace is where the charts are installed.
const Namespace = "strata-system"

// ServiceAccountKubeconfig returns a self-contained kubeconfig (certificates
// inline) that authenticates as ServiceAccount name of Namespace with a
// token valid for two hours.
func (c *Cluster) ServiceAccountKubeconfig(name string) ([]byte, error) {
	out, err := c.run("kubectl", "--kubeconfig", c.Kubeconfig, "create", "token", name,
		"--namespace", Namespace, "--duration", "2h")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return nil, fmt.Errorf("%s has no current context", c.Kubeconfig)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{name: {Token: strings.TrimSpace(out)}}
	ctx.AuthInfo = name
	return clientcmd.Write(*cfg)
}

// CollectLogs copies the cluster's component logs (kube-apiserver, etcd,
// controller-manager, scheduler, kwok) into dir/<cluster name>.
func (c *Cluster) CollectLogs(dir string) error {
	src := filepath.Join(c.workDir, "clusters", c.Name, "logs")
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, c.Name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
