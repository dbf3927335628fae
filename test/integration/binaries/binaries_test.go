package binaries

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/test/integration/framework"
)

// run runs a binary to completion with a clean environment (no KUBECONFIG)
// and returns its exit code and combined output.
func run(name string, args ...string) (int, string) {
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = []string{"HOME=" + GinkgoT().TempDir(), "PATH=" + os.Getenv("PATH")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), out.String()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0, out.String()
}

func configFile(content string) string {
	p := filepath.Join(GinkgoT().TempDir(), "config.yaml")
	Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
	return p
}

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

var daemons = []struct{ name, kind string }{
	{"strata-agent", "AgentConfiguration"},
	{"strata-hub", "HubConfiguration"},
}

var _ = Describe("strata-agent and strata-hub", Label("binaries"), func() {
	for _, d := range daemons {
		It(d.name+" prints its usage with --help", func() {
			code, out := run(d.name, "--help")
			Expect(code).To(Equal(0), out)
			Expect(out).To(ContainSubstring("Usage:"))
			Expect(out).To(ContainSubstring("--config string"))
			Expect(out).To(ContainSubstring("--kubeconfig"))
			Expect(out).To(ContainSubstring("--leader-elect"))
		})

		It(d.name+" rejects an unknown flag", func() {
			code, out := run(d.name, "--no-such-flag")
			Expect(code).To(Equal(1), out)
			Expect(out).To(ContainSubstring("Error: unknown flag: --no-such-flag"))
			Expect(out).To(ContainSubstring("Run '" + d.name + " --help' for usage"))
		})

		It(d.name+" fails clearly on a missing configuration file", func() {
			code, out := run(d.name, "--config", "/nonexistent/config.yaml")
			Expect(code).To(Equal(1), out)
			Expect(out).To(ContainSubstring("Error: reading configuration: open /nonexistent/config.yaml: no such file or directory"))
		})

		It(d.name+" fails clearly on an invalid configuration file", func() {
			path := configFile("apiVersion: config.strata.dev/v1beta1\nkind: " + d.kind + "\ntopologyAwareScheduling:\n  requiredAlgorithm: Random\n")
			code, out := run(d.name, "--config", path)
			Expect(code).To(Equal(1), out)
			Expect(out).To(ContainSubstring(`topologyAwareScheduling.requiredAlgorithm: Unsupported value: "Random"`))
		})

		It(d.name+" fails clearly with no cluster to connect to", func() {
			code, out := run(d.name)
			Expect(code).To(Equal(1), out)
			Expect(out).To(ContainSubstring("no cluster to connect to"))
			Expect(out).To(ContainSubstring("pass --kubeconfig"))
		})

		It(d.name+" starts against a real API server, reports ready and stops on SIGTERM", func() {
			health := freeAddress()
			cmd := exec.Command(filepath.Join(binDir, d.name),
				"--kubeconfig", clusters.Get("hub").KubeconfigPath,
				"--config", configFile("apiVersion: config.strata.dev/v1beta1\nkind: "+d.kind+"\n"),
				"--metrics-bind-address", freeAddress(),
				"--health-probe-bind-address", health,
			)
			session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { session.Kill() })
			Eventually(func(g Gomega) {
				resp, err := http.Get(fmt.Sprintf("http://%s/readyz", health))
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = resp.Body.Close() }()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Eventually(session, 30*time.Second).Should(gexec.Exit(0))
		})
	}
})

var _ = Describe("strata-agent and strata-hub on CRDs older than Cohort and ProvisioningRequestConfig", Label("binaries"), Ordered, func() {
	// helm upgrade does not update a chart's crds/: an upgraded agent or
	// hub may find no Cohort CRD, nor the ProvisioningRequestConfig one.
	// It starts, with flat cohorts and no ProvisioningRequest check, and
	// says what to apply.
	var crds client.Client
	BeforeAll(func(ctx SpecContext) {
		s := runtime.NewScheme()
		Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
		var err error
		crds, err = client.New(clusters.Get("hub").Config, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
		for _, gone := range []struct {
			crd  string
			list client.ObjectList
		}{
			{"cohorts.strata.dev", &strata.CohortList{}},
			{"provisioningrequestconfigs.strata.dev", &strata.ProvisioningRequestConfigList{}},
		} {
			var crd apiextensionsv1.CustomResourceDefinition
			Expect(crds.Get(ctx, types.NamespacedName{Name: gone.crd}, &crd)).To(Succeed())
			Expect(crds.Delete(ctx, &crd)).To(Succeed())
			Eventually(func(g Gomega) {
				err := crds.Get(ctx, types.NamespacedName{Name: gone.crd}, &apiextensionsv1.CustomResourceDefinition{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the CRD is gone")
				// Served no more: a fresh client (no cached mapping)
				// cannot list them.
				fresh, err := client.New(clusters.Get("hub").Config, client.Options{Scheme: clusters.Get("hub").Client.Scheme()})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(fresh.List(ctx, gone.list)).NotTo(Succeed())
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				crd.ResourceVersion, crd.UID, crd.CreationTimestamp, crd.DeletionTimestamp, crd.Status = "", "", metav1.Time{}, nil, apiextensionsv1.CustomResourceDefinitionStatus{}
				crd.Finalizers = nil
				Eventually(func() error { return crds.Create(ctx, &crd) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			})
		}
	})
	for _, d := range daemons {
		It(d.name+" starts, reports ready and says cohorts are flat", func() {
			health := freeAddress()
			cmd := exec.Command(filepath.Join(binDir, d.name),
				"--kubeconfig", clusters.Get("hub").KubeconfigPath,
				"--config", configFile("apiVersion: config.strata.dev/v1beta1\nkind: "+d.kind+"\n"),
				"--metrics-bind-address", freeAddress(),
				"--health-probe-bind-address", health,
			)
			session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { session.Kill() })
			Eventually(func(g Gomega) {
				resp, err := http.Get(fmt.Sprintf("http://%s/readyz", health))
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = resp.Body.Close() }()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			if d.name == "strata-agent" {
				Eventually(session.Err, 30*time.Second).Should(gbytes.Say("Not running the ProvisioningRequest admission check: a CRD is not installed"))
			}
			Eventually(session.Err, 30*time.Second).Should(gbytes.Say("The Cohort CRD is not installed: cohorts are flat"))
			Consistently(session, 2*time.Second).ShouldNot(gexec.Exit(), "it keeps running")
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Eventually(session, 30*time.Second).Should(gexec.Exit(0))
		})
	}
})

var _ = Describe("strata-agent when a CRD is installed after its start", Label("binaries"), func() {
	It("exits 0 once the cluster serves the cluster autoscaler's ProvisioningRequest, so that its Deployment starts it again with the check", func(ctx SpecContext) {
		cfg := clusters.Get("hub").Config
		fresh, err := client.New(cfg, client.Options{Scheme: clusters.Get("hub").Client.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		pr := &unstructured.UnstructuredList{}
		pr.SetAPIVersion("autoscaling.x-k8s.io/v1")
		pr.SetKind("ProvisioningRequestList")
		Expect(fresh.List(ctx, pr)).NotTo(Succeed(), "the cluster serves ProvisioningRequests already")
		health := freeAddress()
		cmd := exec.Command(filepath.Join(binDir, "strata-agent"),
			"--kubeconfig", clusters.Get("hub").KubeconfigPath,
			"--config", configFile("apiVersion: config.strata.dev/v1beta1\nkind: AgentConfiguration\n"),
			"--metrics-bind-address", freeAddress(),
			"--health-probe-bind-address", health,
		)
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill() })
		Eventually(func(g Gomega) {
			resp, err := http.Get(fmt.Sprintf("http://%s/readyz", health))
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("installing the ProvisioningRequest CRD while it runs")
		opts := envtest.CRDInstallOptions{Paths: framework.ProvisioningRequestCRDPaths()}
		_, err = envtest.InstallCRDs(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(envtest.UninstallCRDs(cfg, opts)).To(Succeed()) })
		// It asks every 30 s.
		Eventually(session.Err, 75*time.Second).Should(gbytes.Say("The cluster serves an API it did not serve at start: restarting to run its controllers"))
		Eventually(session, 30*time.Second).Should(gexec.Exit(0))
	})
})

var _ = Describe("kubectl-strata", Label("binaries"), func() {
	It("prints its usage with --help", func() {
		code, out := run("kubectl-strata", "--help")
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring("Usage:"))
		Expect(out).To(ContainSubstring("kubectl strata [command]"))
	})

	It("prints its version", func() {
		code, out := run("kubectl-strata", "version")
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`^kubectl-strata \S+ \(go`))
	})

	It("rejects an unknown flag and an unknown command", func() {
		code, out := run("kubectl-strata", "--no-such-flag")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("unknown flag: --no-such-flag"))
		code, out = run("kubectl-strata", "no-such-command")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(`unknown command "no-such-command"`))
	})
})

var _ = Describe("kubectl-strata simulate", Label("binaries", "simulate"), func() {
	examples := filepath.Join(framework.RepoRoot(), "docs", "examples", "simulate")

	It("places the example jobs and prints a JSON array", func() {
		code, out := run("kubectl-strata", "simulate", "-f", examples, "-o", "json")
		Expect(code).To(Equal(0), out)
		var results []map[string]any
		Expect(json.Unmarshal([]byte(out), &results)).To(Succeed(), out)
		Expect(results).To(HaveLen(9), "jobs.yaml's 4 Jobs, jobsets.yaml's 2 JobSets, lws.yaml's 2 groups and mpijobs.yaml's MPIJob")
		Expect(results[6]).To(HaveKeyWithValue("name", "tas-example-lws-0"))
		Expect(results[7]).To(HaveKeyWithValue("name", "tas-example-lws-1"))
		Expect(results[7]).To(HaveKeyWithValue("admitted", true))
		Expect(results[8]).To(HaveKeyWithValue("name", "pi"))
		Expect(results[8]).To(HaveKeyWithValue("admitted", true))
		Expect(results[0]).To(HaveKeyWithValue("admitted", true))
		Expect(results[3]).To(HaveKeyWithValue("admitted", false))
		Expect(results[3]["reason"]).To(ContainSubstring("rack required: the best rack fits 8 of 10 pods"))
		Expect(results[4]).To(HaveKeyWithValue("name", "two-level"))
		Expect(results[4]).To(HaveKeyWithValue("admitted", true))
		Expect(results[5]["podSets"]).To(HaveLen(2), "a JobSet's pod sets: leader and workers")
	})

	It("prints a table for people", func() {
		code, out := run("kubectl-strata", "simulate", "-f", filepath.Join(examples, "cluster.yaml"), "-f", filepath.Join(examples, "jobs.yaml"))
		Expect(code).To(Equal(0), out)
		Expect(out).To(HavePrefix("NAMESPACE  NAME"))
		Expect(out).To(ContainSubstring("b1-r1-h1=2"))
	})

	It("fails with the file and document on bad input", func() {
		bad := configFile("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n")
		code, out := run("kubectl-strata", "simulate", "-f", examples, "-f", bad)
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(bad + ": document 1: Service is not read by simulate"))
	})

	It("replays a generated trace over generated clusters under every policy, with a plot", func() {
		dir := GinkgoT().TempDir()
		var clusterArgs []string
		for _, name := range []string{"c1", "c2"} {
			code, out := run("kubectl-strata", "simulate", "--generate-cluster", "48", "--busy", "0.1", "--name", name)
			Expect(code).To(Equal(0), out)
			path := filepath.Join(dir, name+".yaml")
			Expect(os.WriteFile(path, []byte(out), 0o600)).To(Succeed())
			clusterArgs = append(clusterArgs, "--cluster", name+"="+path)
		}
		code, out := run("kubectl-strata", "simulate", "--generate-trace", "200", "--arrivals-per-hour", "60")
		Expect(code).To(Equal(0), out)
		Expect(out).To(HavePrefix("name,arrival_seconds,duration_seconds,pods,gpus_per_pod,topology\n"))
		trace := filepath.Join(dir, "trace.csv")
		Expect(os.WriteFile(trace, []byte(out), 0o600)).To(Succeed())
		plot := filepath.Join(dir, "replay.png")
		code, out = run("kubectl-strata", append(append([]string{"simulate"}, clusterArgs...), "--trace", trace, "--plot", plot, "-o", "json")...)
		Expect(code).To(Equal(0), out)
		var results []map[string]any
		Expect(json.Unmarshal([]byte(out), &results)).To(Succeed(), out)
		Expect(results).To(HaveLen(5))
		for i, policy := range []string{"compact", "spread", "first-fit", "any-fit", "no-topology"} {
			Expect(results[i]).To(HaveKeyWithValue("policy", policy))
			Expect(results[i]["started"].(float64) + results[i]["never"].(float64)).To(BeEquivalentTo(200))
		}
		png, err := os.ReadFile(plot)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(png[:8])).To(Equal("\x89PNG\r\n\x1a\n"))
		code, out = run("kubectl-strata", append(append([]string{"simulate"}, clusterArgs...), "--trace", trace, "--policies", "compact,first-fit")...)
		Expect(code).To(Equal(0), out)
		Expect(out).To(HavePrefix("POLICY"))
		Expect(strings.Count(out, "\n")).To(Equal(3), out)
	})

	It("says what is wrong with a replay's input", func() {
		code, out := run("kubectl-strata", "simulate", "--trace", "t.csv")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("--trace replays over a fleet: pass its clusters with --cluster NAME=FILE_OR_DIR"))
		code, out = run("kubectl-strata", "simulate", "--trace", "t.csv", "--cluster", "a=x", "-f", "y")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("--trace gives the Jobs"))
		bad := configFile("name,arrival_seconds,duration_seconds,pods,gpus_per_pod,topology\nj,0,1,1,1,rack\n")
		code, out = run("kubectl-strata", "simulate", "--trace", bad, "--cluster", "west="+filepath.Join(framework.RepoRoot(), "docs", "examples", "fleet", "west"))
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(bad + `: trace line 2: topology "rack": want none, required:LEVEL or preferred:LEVEL`))
		code, out = run("kubectl-strata", "simulate", "--trace", bad, "--cluster", "west=x", "--policies", "best")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(`unknown policy "best"`))
		code, out = run("kubectl-strata", "simulate", "--generate-trace", "5", "--generate-cluster", "5")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("one at a time"))
	})

	It("fails without input or with an unknown format", func() {
		code, out := run("kubectl-strata", "simulate")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("no input: pass the cluster and the workloads with -f FILE_OR_DIR"))
		code, out = run("kubectl-strata", "simulate", "-f", examples, "-o", "xml")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring(`unknown output format "xml"`))
	})
})
