package smoke

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"strata.dev/strata/test/integration/framework"
)

// clusters: one hub and two workers, shared by every spec of the suite.
var clusters *framework.Clusters

func TestSmoke(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Smoke Suite")
}

var _ = BeforeSuite(func() {
	// JobSet's CRD, for the JobSet samples.
	jobSetCRDs, err := framework.JobSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	clusters, err = framework.Start(
		framework.ClusterSpec{Name: "hub", Role: framework.Hub, CRDPaths: jobSetCRDs},
		framework.ClusterSpec{Name: "worker-1", Role: framework.Worker, CRDPaths: jobSetCRDs},
		framework.ClusterSpec{Name: "worker-2", Role: framework.Worker, CRDPaths: jobSetCRDs},
	)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	Expect(clusters.Stop()).To(Succeed())
})
