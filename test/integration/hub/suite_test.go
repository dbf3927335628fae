package hub

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/hub/controller"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/test/integration/framework"
)

var (
	clusters *framework.Clusters
	hub      *framework.Cluster
	workers  []*framework.Cluster
	hubFleet *fleet.Fleet
	// hubClock is the hub's clock; specs shift it instead of waiting.
	hubClock = &framework.ShiftingClock{}
	hubCfg   *configv1beta1.HubConfiguration
)

func TestHub(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Hub Suite")
}

// A failed spec's log ends with the clusters' queues and unfinished
// Workloads, before its cleanups remove them.
var _ = AfterEach(func(ctx SpecContext) {
	if CurrentSpecReport().Failed() {
		clusters.Dump(ctx, GinkgoWriter)
	}
})

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	sourceCRDs, err := framework.SourceCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	lwsCRDs, err := framework.LeaderWorkerSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	clusters, err = framework.Start(
		framework.ClusterSpec{Name: "hub", Role: framework.Hub, CRDPaths: append(sourceCRDs, lwsCRDs...)},
		framework.ClusterSpec{Name: "w1", Role: framework.Worker},
		framework.ClusterSpec{Name: "w2", Role: framework.Worker},
	)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(clusters.Stop()).To(Succeed()) })
	hub = clusters.Get("hub")
	workers = []*framework.Cluster{clusters.Get("w1"), clusters.Get("w2")}

	hubCfg, err = config.LoadHub("")
	Expect(err).NotTo(HaveOccurred())
	addAccessProvider(hubCfg)
	Expect(hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Namespace}})).To(Succeed())
	// The agent chart's namespace on each worker: the hub renews its
	// fencing Lease there, and a worker it cannot fence gets no work.
	for _, w := range workers {
		Expect(w.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubCfg.Dispatch.WorkerNamespace}})).To(Succeed())
	}

	// The hub takes notice of LeaderWorkerSets only if their API is served
	// when it starts.
	Eventually(func() error {
		return hub.Client.List(context.Background(), &lwsapi.LeaderWorkerSetList{})
	}, time.Minute).Should(Succeed())

	By("starting the hub's controllers")
	mgr, err := framework.NewHubManager(hub.Config)
	Expect(err).NotTo(HaveOccurred())
	hubFleet, err = controller.SetupControllers(mgr, hubCfg, controller.WithClock(hubClock))
	Expect(err).NotTo(HaveOccurred())
	stop := framework.Run(context.Background(), mgr)
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
})
