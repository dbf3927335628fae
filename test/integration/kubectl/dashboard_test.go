package kubectl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/kubectlstrata"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/testutil"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDashboard runs 'kubectl strata dashboard' on the hub on a free
// loopback port until the spec ends, and returns its URL.
func startDashboard() string {
	GinkgoHelper()
	runCtx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		cmd := kubectlstrata.NewCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"dashboard", "--kubeconfig", hub.KubeconfigPath, "--address", "127.0.0.1:0"})
		done <- cmd.ExecuteContext(runCtx)
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).Should(Receive(BeNil()))
	})
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	Eventually(func() string { return url.FindString(out.String()) }).ShouldNot(BeEmpty(), "the command prints its URL: %s", out.String())
	return url.FindString(out.String())
}

// getJSON reads a dashboard endpoint into v.
func getJSON(g Gomega, url string, v any) {
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(json.Unmarshal(body, v)).To(Succeed(), string(body))
}

var _ = Describe("kubectl strata dashboard", Label("kubectl", "dashboard"), func() {
	It("serves the page and the views of the fleet, a worker's topology, the queues and a workload, and says when something changes", func(ctx SpecContext) {
		// The hub's copy of the worker's summary, as its summarycopies
		// controller writes it, with one workload in flight on rack r2.
		// No credential for the worker is needed.
		hubCopy := testutil.MakeCapacitySummary("gpu").Obj()
		hubCopy.Name, hubCopy.Labels = summarycopy.Name("dash", "gpu"), map[string]string{strata.WorkerClusterLabel: "dash"}
		create(ctx, hub, hubCopy, func(cs *strata.CapacitySummary) {
			cs.Status = gpuSummary()
			cs.Status.InFlight = []strata.InFlightDomain{{Values: []string{"b1", "r2"}, Workloads: 1, Pods: 2,
				Requests: corev1.ResourceList{gpu: resource.MustParse("8")}}}
		})
		create(ctx, hub, testutil.MakeWorkerCluster("dash").KubeConfigSecret("strata-system", "dash-kubeconfig").Obj(), func(wc *strata.WorkerCluster) {
			condition(&wc.Status.Conditions, strata.WorkerClusterConnected, metav1.ConditionTrue, "Connected", "connected")
			condition(&wc.Status.Conditions, strata.WorkerClusterFenced, metav1.ConditionTrue, "LeaseRenewed", "renewed")
			wc.Status.Workloads = 1
		})
		create(ctx, hub, testutil.MakeClusterQueue("dash-q").Flavor("gpu", "nvidia.com/gpu", "32").Obj(), nil)
		create(ctx, hub, testutil.MakeLocalQueue("team-a", namespace, "dash-q"), nil)
		placedJob := create(ctx, hub, job("dash-placed", "team-a"), nil)
		create(ctx, hub, jobWorkload(placedJob), func(wl *strata.Workload) {
			wl.Status.Placement = &strata.Placement{Cluster: "dash", Flavor: "gpu", DispatchGeneration: 1,
				TopologyHint: `{"main":{"levels":["` + rackLevel + `"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"r2"}],"podCounts":{"universal":2}}]}}`}
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Dispatched", "waiting for dash")
		})
		waitingJob := create(ctx, hub, job("dash-waits", "team-a"), nil)
		create(ctx, hub, jobWorkload(waitingJob), func(wl *strata.Workload) {
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "dash/gpu: rack required: the best rack holds 6 of 8 pods")
		})

		url := startDashboard()

		By("the page, embedded in the binary")
		resp, err := http.Get(url)
		Expect(err).NotTo(HaveOccurred())
		page, _ := io.ReadAll(resp.Body)
		Expect(resp.Body.Close()).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(string(page)).To(ContainSubstring("<title>Strata dashboard</title>"))

		By("the workers, with connection and fencing")
		var clusters kubectlstrata.ClustersView
		getJSON(Default, url+"api/clusters", &clusters)
		Expect(clusters.Clusters).To(ContainElement(SatisfyAll(HaveField("Name", "dash"), HaveField("Copies", int32(1)),
			HaveField("Fencing", HaveField("Reason", "LeaseRenewed")))))

		By("the worker's topology, from the hub's copy of its summary: rack r1's free GPUs are the summary's, its hosts listed, r2's reservation in flight")
		var topo kubectlstrata.TopologyView
		getJSON(Default, url+"api/topology?cluster=dash", &topo)
		Expect(topo.Flavors).To(HaveLen(1))
		b1 := topo.Flavors[0].Root.Children[0]
		Expect(b1.Name).To(Equal("b1"))
		r1 := b1.Children[0]
		Expect(r1.Name).To(Equal("r1"))
		free := r1.Free[gpu]
		Expect(free.Value()).To(Equal(int64(8)), "n1's 8 GPUs are taken, n2's free")
		Expect(r1.Hosts).To(HaveLen(2), "a full host and a free one")
		Expect(topo.Flavors[0].InFlight).To(BeEquivalentTo(2))
		Expect(b1.Children[1].InFlight).To(PointTo(HaveField("Workloads", int32(1))))

		By("a worker the hub keeps no copy for says so")
		var none kubectlstrata.TopologyView
		getJSON(Default, url+"api/topology?cluster=elsewhere", &none)
		Expect(none.Flavors).To(BeEmpty())
		Expect(none.Problem).To(ContainSubstring("no copy of elsewhere's capacity summaries"))

		By("the queue, the waiting workload first with its reason")
		var queues []kubectlstrata.DashboardQueueView
		getJSON(Default, url+"api/queues", &queues)
		Expect(queues).To(ContainElement(SatisfyAll(HaveField("ClusterQueue", "dash-q"),
			HaveField("Pending", ContainElement(HaveField("Message", "dash/gpu: rack required: the best rack holds 6 of 8 pods"))),
			HaveField("Quota.Resources", ContainElement(SatisfyAll(HaveField("Flavor", "gpu"), HaveField("Resource", gpu)))),
			HaveField("LocalQueues", ContainElement(SatisfyAll(HaveField("Namespace", namespace), HaveField("Name", "team-a")))))))
		var rows []kubectlstrata.WorkloadRowView
		getJSON(Default, url+"api/workloads", &rows)
		Expect(rows).To(ContainElement(SatisfyAll(HaveField("Job", "job/dash-waits"), HaveField("State", "Pending"), HaveField("Reason", "Pending"))))
		Expect(rows).To(ContainElement(SatisfyAll(HaveField("Job", "job/dash-placed"), HaveField("State", "Dispatched"), HaveField("Cluster", "dash"))))

		By("a workload: explain's view, and the rack the hub placed it in for the heatmap")
		create(ctx, hub, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "dash-placed.admitted"},
			EventTime: metav1.NowMicro(), ReportingController: "strata-hub", ReportingInstance: "strata-hub-0", Action: "Dispatch",
			Type: corev1.EventTypeNormal, Reason: "Admitted", Note: "Admitted on dash (flavor gpu)",
			Regarding: corev1.ObjectReference{Kind: "Job", Namespace: namespace, Name: "dash-placed"}}, nil)
		var ex kubectlstrata.DashboardExplainView
		getJSON(Default, url+"api/explain?namespace="+namespace+"&job=job/dash-placed", &ex)
		Expect(ex.Explain.Placement).To(HaveField("Cluster", "dash"))
		Expect(ex.Domains).To(Equal([]string{rackLevel + "=r2"}))
		Expect(ex.Events).To(ConsistOf(SatisfyAll(HaveField("Reason", "Admitted"), HaveField("Object", "Job/dash-placed"), HaveField("Note", "Admitted on dash (flavor gpu)"))))

		By("refusing a request that does not name a loopback host")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"api/clusters", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Host = "dashboard.example.com"
		resp, err = http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Body.Close()).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))

		By("a change event when a hub Workload changes")
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, url+"api/changes", nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err = http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(resp.Body.Close)
		events := make(chan string, 16)
		go func() {
			defer GinkgoRecover()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					events <- strings.TrimPrefix(sc.Text(), "event: ")
				}
			}
		}()
		another := create(ctx, hub, job("dash-new", "team-a"), nil)
		Eventually(func(g Gomega) {
			wl := jobWorkload(another)
			g.Expect(client.IgnoreAlreadyExists(hub.Client.Create(ctx, wl))).To(Succeed())
		}).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, jobWorkload(another)))).To(Succeed())
		})
		Eventually(events).Should(Receive(Equal("change")))
	})
})
