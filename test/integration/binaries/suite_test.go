package binaries

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"strata.dev/strata/test/integration/framework"
)

var (
	clusters *framework.Clusters
	binDir   string
)

func TestBinaries(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Binaries Suite")
}

var _ = BeforeSuite(func() {
	binDir = GinkgoT().TempDir()
	for _, pkg := range []string{"./agent/cmd/strata-agent", "./hub/cmd/strata-hub", "./pkg/cmd/kubectl-strata"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, filepath.Base(pkg)), pkg)
		cmd.Dir = framework.RepoRoot()
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	}
	var err error
	clusters, err = framework.Start(framework.ClusterSpec{Name: "hub", Role: framework.Hub})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	Expect(clusters.Stop()).To(Succeed())
})
