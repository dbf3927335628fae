// Package kubectl tests the live views of kubectl-strata (clusters,
// topology, explain) against real API servers: a hub and a worker with
// Strata's CRDs, their objects written directly, no controllers running.
package kubectl

import (
	"bytes"
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"strata.dev/strata/pkg/kubectlstrata"
	"strata.dev/strata/test/integration/framework"
)

// namespace of the suite's Jobs and Workloads, on both clusters.
const namespace = "ml"

var (
	clusters *framework.Clusters
	hub      *framework.Cluster
	worker   *framework.Cluster
)

func TestKubectl(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl-strata Suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	clusters, err = framework.Start(
		framework.ClusterSpec{Name: "hub", Role: framework.Hub},
		framework.ClusterSpec{Name: "w1", Role: framework.Worker},
	)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(clusters.Stop()).To(Succeed()) })
	hub, worker = clusters.Get("hub"), clusters.Get("w1")
	for _, c := range []*framework.Cluster{hub, worker} {
		Expect(c.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	}
})

// run runs kubectl-strata with args and returns what it printed and its
// error.
func run(ctx context.Context, args ...string) (string, error) {
	cmd := kubectlstrata.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}
