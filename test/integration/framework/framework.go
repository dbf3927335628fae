// Package framework starts real kube-apiserver + etcd pairs (controller-runtime
// envtest on the binaries hack/k8s-binaries.sh builds) for integration suites:
// one hub and any number of workers in one process, with Strata's CRDs
// (and any others asked for) installed and a kubeconfig for each.
package framework

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"strata.dev/strata/pkg/scheme"
)

// Role says which CRDs a cluster gets: the hub chart's or the agent chart's.
type Role string

// Roles of test clusters.
const (
	Hub    Role = "hub"
	Worker Role = "worker"
)

// ClusterSpec describes one API server to start.
type ClusterSpec struct {
	Name string
	Role Role
	// CRDPaths are CRD files or directories to install besides the role's
	// (see SourceCRDPaths).
	CRDPaths []string
	// APIServerFlags are kube-apiserver flags (name without dashes → value)
	// set besides envtest's, e.g. max-requests-inflight for benchmarks.
	APIServerFlags map[string]string
	// GarbageCollector runs kube-controller-manager's garbage collector
	// (and nothing else of it) against the API server: owned objects are
	// deleted after their owners, and foreground deletions complete.
	GarbageCollector bool
}

// Cluster is one running API server.
type Cluster struct {
	Name string
	Role Role
	// Config is an admin (system:masters) REST config.
	Config *rest.Config
	// Client is a controller-runtime client with Strata's scheme.
	Client client.Client
	// Kubeconfig is an admin kubeconfig for the server.
	Kubeconfig []byte
	// KubeconfigPath is Kubeconfig written to a file (for kubectl).
	KubeconfigPath string

	env *envtest.Environment
	// gc is the garbage collector's process, when it runs.
	gc *exec.Cmd
}

// Clusters is a set of running API servers.
type Clusters struct {
	Items  []*Cluster
	tmpDir string
}

// RepoRoot is the root of the Strata repository.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BinDir is where kube-apiserver, etcd and kubectl are: $STRATA_K8S_BIN, or
// bin/k8s of the repository (filled by `make k8s-binaries`).
func BinDir() (string, error) {
	dir := os.Getenv("STRATA_K8S_BIN")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin", "k8s")
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run 'make k8s-binaries' (or set STRATA_K8S_BIN)", b, dir)
		}
	}
	return dir, nil
}

// CRDDir is the directory of the CRDs a cluster of role r gets.
func CRDDir(r Role) string {
	chart := "strata-agent"
	if r == Hub {
		chart = "strata-hub"
	}
	return filepath.Join(RepoRoot(), "charts", chart, "crds")
}

// SourceCRDPaths are the CRDs of the hub's optional worker cluster
// sources, from the module cache: cluster-inventory-api's ClusterProfile and
// Open Cluster Management's ManagedCluster, at the versions go.mod requires.
func SourceCRDPaths() ([]string, error) {
	inventory, err := moduleDir("sigs.k8s.io/cluster-inventory-api")
	if err != nil {
		return nil, err
	}
	ocm, err := moduleDir("open-cluster-management.io/api")
	if err != nil {
		return nil, err
	}
	return []string{
		filepath.Join(inventory, "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml"),
		filepath.Join(ocm, "cluster", "v1", "0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"),
	}, nil
}

// ProvisioningRequestCRDPaths is a minimal CRD of the cluster autoscaler's
// ProvisioningRequest (test/crds), for the agent's ProvisioningRequest
// admission check.
func ProvisioningRequestCRDPaths() []string {
	return []string{filepath.Join(RepoRoot(), "test", "crds", "autoscaling.x-k8s.io_provisioningrequests.yaml")}
}

// JobSetCRDPaths is the JobSet CRD, from the module cache at the version
// go.mod requires (sigs.k8s.io/jobset).
func JobSetCRDPaths() ([]string, error) {
	dir, err := moduleDir("sigs.k8s.io/jobset")
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(dir, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")}, nil
}

// MPIJobCRDPaths is the MPIJob CRD (kubeflow.org/v2beta1), from the module
// cache at the version go.mod requires (github.com/kubeflow/mpi-operator).
func MPIJobCRDPaths() ([]string, error) {
	dir, err := moduleDir("github.com/kubeflow/mpi-operator")
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(dir, "manifests", "base", "kubeflow.org_mpijobs.yaml")}, nil
}

// LeaderWorkerSetCRDPaths is the LeaderWorkerSet CRD, from the module cache
// at the version go.mod requires (sigs.k8s.io/lws).
func LeaderWorkerSetCRDPaths() ([]string, error) {
	dir, err := moduleDir("sigs.k8s.io/lws")
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(dir, "config", "crd", "bases", "leaderworkerset.x-k8s.io_leaderworkersets.yaml")}, nil
}

// LeaderWorkerSetModuleDir is the LeaderWorkerSet module in the module
// cache, at the version go.mod requires: its manifests (config/) are there.
func LeaderWorkerSetModuleDir() (string, error) { return moduleDir("sigs.k8s.io/lws") }

// JobSetModuleDir is JobSet's module in the module cache, at the version
// go.mod requires: its manifests (config/components) are there.
func JobSetModuleDir() (string, error) { return moduleDir("sigs.k8s.io/jobset") }

// moduleDir is where the go command keeps module, at the version the
// repository requires.
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, exitErr.Stderr)
		}
		return "", fmt.Errorf("finding module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded: run 'go mod download'", module)
	}
	return dir, nil
}

// Start starts one API server per spec, in parallel, and installs the CRDs
// of each one's role. On error, whatever started is stopped again.
func Start(specs ...ClusterSpec) (*Clusters, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "strata-integration-")
	if err != nil {
		return nil, err
	}
	cs := &Clusters{Items: make([]*Cluster, len(specs)), tmpDir: tmp}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			cs.Items[i], errs[i] = startOne(spec, bin, tmp)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, cs.Stop())
	}
	return cs, nil
}

func startOne(spec ClusterSpec, bin, tmp string) (*Cluster, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        append([]string{CRDDir(spec.Role)}, spec.CRDPaths...),
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  60 * time.Second,
		// envtest waits 10 s by default for the CRDs to be served: several
		// API servers starting at once on a busy 2-core machine have
		// missed that (the fleet suite's BeforeSuite, 2026-12-05).
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 60 * time.Second},
	}
	for name, value := range spec.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		// A start that failed after the control plane came up (installing
		// the CRDs, say) leaves etcd and the API server running: stop them.
		return nil, errors.Join(fmt.Errorf("starting API server %s: %w", spec.Name, err), env.Stop())
	}
	c := &Cluster{Name: spec.Name, Role: spec.Role, Config: cfg, env: env}
	fail := func(err error) (*Cluster, error) {
		return nil, errors.Join(err, env.Stop())
	}
	user, err := env.AddUser(envtest.User{Name: "strata-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail(fmt.Errorf("adding admin user to %s: %w", spec.Name, err))
	}
	if c.Kubeconfig, err = user.KubeConfig(); err != nil {
		return fail(fmt.Errorf("kubeconfig of %s: %w", spec.Name, err))
	}
	c.KubeconfigPath = filepath.Join(tmp, spec.Name+".kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
		return fail(err)
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return fail(fmt.Errorf("client for %s: %w", spec.Name, err))
	}
	if spec.GarbageCollector {
		if err := c.startGC(bin, tmp); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// startGC starts kube-controller-manager with its garbage collector only,
// its log in tmp.
func (c *Cluster) startGC(bin, tmp string) error {
	log, err := os.Create(filepath.Join(tmp, c.Name+"-gc.log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(filepath.Join(bin, "kube-controller-manager"), "--kubeconfig="+c.KubeconfigPath,
		"--controllers=garbagecollector", "--leader-elect=false", "--secure-port=0", "--concurrent-gc-syncs=5")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the garbage collector of %s: %w", c.Name, err)
	}
	c.gc = cmd
	return nil
}

// AddUser adds a user to the cluster's API server, authenticated by a
// client certificate and with no permissions but those of its groups, and
// returns it (for its kubeconfig).
func (c *Cluster) AddUser(u envtest.User) (*envtest.AuthenticatedUser, error) {
	return c.env.AddUser(u, nil)
}

// Get returns the cluster named name, or nil.
func (cs *Clusters) Get(name string) *Cluster {
	for _, c := range cs.Items {
		if c != nil && c.Name == name {
			return c
		}
	}
	return nil
}

// Stop stops every API server and removes the temporary files.
func (cs *Clusters) Stop() error {
	if cs == nil {
		return nil
	}
	var errs []error
	for _, c := range cs.Items {
		if c != nil {
			if c.gc != nil {
				_ = c.gc.Process.Kill()
				_ = c.gc.Wait()
			}
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping %s: %w", c.Name, err))
			}
		}
	}
	errs = append(errs, os.RemoveAll(cs.tmpDir))
	return errors.Join(errs...)
}

// PauseAPIServer stops the cluster's kube-apiserver process (SIGSTOP)
// without ending it: clients' connections hang, as behind a partition, and
// etcd keeps everything. resume continues it (SIGCONT).
func (c *Cluster) PauseAPIServer() (resume func() error, err error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("pgrep", "-f", "kube-apiserver.*--secure-port="+u.Port()+"( |$)").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the kube-apiserver of %s (port %s): %w", c.Name, u.Port(), err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 1 {
		return nil, fmt.Errorf("finding the kube-apiserver of %s (port %s): %d processes", c.Name, u.Port(), len(fields))
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return func() error { return syscall.Kill(pid, syscall.SIGCONT) }, nil
}
