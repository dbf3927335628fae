package kindcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
)

// fakeDocker puts on PATH a docker command that answers kind's questions
// before it provisions (docker info, docker ps) like an engine with no
// clusters and the node image, and refuses everything else: kind's Create
// then validates the configuration with its own code and stops at the
// first provisioning command.
func fakeDocker(t *testing.T, info string) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncase \"$1\" in\n" +
		"  info) echo '" + info + "' ;;\n" +
		"  ps) exit 0 ;;\n" +
		"  inspect) exit 0 ;;\n" + // the node image is there: no pull

		"  *) echo \"offline: docker $*\" >&2; exit 3 ;;\n" +
		"esac\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

const engineInfo = `{"ServerVersion":"28.0.0","CgroupVersion":"2","CgroupDriver":"systemd","MemoryLimit":true,"PidsLimit":true,"CPUShares":true,"SecurityOptions":[]}`

// TestConfigsPassKindValidation runs every configuration the provider
// creates through kind's own Create up to provisioning: kind validates it
// first. A broken configuration shows the check can fail.
func TestConfigsPassKindValidation(t *testing.T) {
	broken := Config("broken", Worker)
	broken.Nodes[1].Role = "boss"
	cases := map[string]struct {
		cfg       *v1alpha4.Cluster
		wantValid bool
	}{
		"worker":                         {cfg: Config("strata-e2e", Worker), wantValid: true},
		"second worker":                  {cfg: Config("strata-e2e-w2", Worker), wantValid: true},
		"hub":                            {cfg: Config("strata-e2e-hub", Hub), wantValid: true},
		"a node role kind does not know": {cfg: broken},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fakeDocker(t, engineInfo)
			err := cluster.NewProvider(cluster.ProviderWithDocker()).Create(tc.cfg.Name, cluster.CreateWithV1Alpha4Config(tc.cfg),
				cluster.CreateWithNodeImage(NodeImage), cluster.CreateWithKubeconfigPath(filepath.Join(t.TempDir(), "kubeconfig")),
				cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false))
			if err == nil {
				t.Fatal("Create() succeeded without a Docker engine")
			}
			// Kind's validation errors name no docker command; provisioning's do.
			reachedProvisioning := strings.Contains(errorChain(err), `command "docker `)
			t.Logf("Create(): %v", err)
			if reachedProvisioning != tc.wantValid {
				t.Errorf("kind's validation passed: %t, want %t; Create() error: %v", reachedProvisioning, tc.wantValid, errorChain(err))
			}
		})
	}
}

// errorChain is the error's text with the output kind keeps of the failed
// command.
func errorChain(err error) string {
	var out strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		out.WriteString(e.Error() + "\n")
		if o, ok := e.(interface{ Output() []byte }); ok {
			out.Write(o.Output())
		}
	}
	return out.String()
}

func TestConfig(t *testing.T) {
	worker := Config("w", Worker)
	if got := len(worker.Nodes); got != 2 {
		t.Fatalf("worker nodes: %d, want 2", got)
	}
	if diff := cmp.Diff(map[string]string{BlockLabel: "kind-block", RackLabel: "kind-rack"}, worker.Nodes[1].Labels); diff != "" {
		t.Errorf("worker node labels (-want,+got):\n%s", diff)
	}
	for _, n := range append(worker.Nodes, Config("h", Hub).Nodes...) {
		if n.Image != NodeImage || !strings.Contains(n.Image, "@sha256:") {
			t.Errorf("node image %q, want %q pinned by digest", n.Image, NodeImage)
		}
	}
	if got := len(Config("h", Hub).Nodes); got != 1 {
		t.Errorf("hub nodes: %d, want 1", got)
	}
}

func TestCheckDocker(t *testing.T) {
	cases := map[string]struct {
		docker  string // "": none on PATH
		wantErr string
	}{
		"no docker command": {wantErr: "(no docker command on PATH)"},
		"an engine that does not answer": {
			docker:  "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n",
			wantErr: "(docker info: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?)",
		},
		"an engine": {docker: "#!/bin/sh\necho 28.0.0\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.docker != "" {
				if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(tc.docker), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", dir)
			err := CheckDocker()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckDocker() = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNoDocker) || !strings.HasSuffix(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("CheckDocker() = %q, want one line ending %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "`make test-e2e` runs the same specs on kwok") {
				t.Errorf("CheckDocker() = %q does not point at make test-e2e", err)
			}
		})
	}
}

func TestImageArchives(t *testing.T) {
	got := ImageArchives("/repo", "e2e", "amd64")
	want := []string{"/repo/bin/images/strata-agent-e2e-amd64.tar", "/repo/bin/images/strata-hub-e2e-amd64.tar"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ImageArchives() (-want,+got):\n%s", diff)
	}
}

func TestChartArgs(t *testing.T) {
	want := []string{"--values", "v.yaml", "--set", "image.tag=e2e", "--set", "image.pullPolicy=Never", "--set", `nodeSelector.kubernetes\.io/os=linux`}
	if diff := cmp.Diff(want, ChartArgs("v.yaml", "e2e")); diff != "" {
		t.Errorf("ChartArgs() (-want,+got):\n%s", diff)
	}
}

func TestCredential(t *testing.T) {
	internal := []byte(`apiVersion: v1
kind: Config
clusters:
- name: kind-w
  cluster: {server: "https://w-control-plane:6443", certificate-authority-data: Y2E=}
users:
- name: kind-w
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
contexts:
- name: kind-w
  context: {cluster: kind-w, user: kind-w}
current-context: kind-w
`)
	cases := map[string]struct {
		internal []byte
		token    string
		wantErr  string
	}{
		"the hub's identity, at the internal address": {internal: internal, token: "t0k3n"},
		"no token":           {internal: internal, token: " ", wantErr: "no token for strata-hub-access"},
		"no current context": {internal: []byte("apiVersion: v1\nkind: Config\ncurrent-context: gone\n"), token: "t", wantErr: `no current context "gone"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Credential(tc.internal, "strata-hub-access", tc.token)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Credential() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			ctx := cfg.Contexts[cfg.CurrentContext]
			got := []string{cfg.Clusters[ctx.Cluster].Server, ctx.AuthInfo, cfg.AuthInfos[ctx.AuthInfo].Token, string(cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData)}
			want := []string{"https://w-control-plane:6443", "strata-hub-access", "t0k3n", ""}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("server, user, token, client certificate (-want,+got):\n%s", diff)
			}
		})
	}
}
