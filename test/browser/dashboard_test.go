// Package browser drives kubectl strata dashboard in a real, headless
// Chromium (Debian's package, through the DevTools protocol with
// chromedp) against a real hub API server (envtest), its
// objects written directly, no controllers running. make test-browser
// installs Chromium when it is missing.
package browser

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/kubectlstrata"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

const (
	namespace  = "ml"
	blockLevel = "cloud.provider.com/topology-block"
	rackLevel  = "cloud.provider.com/topology-rack"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
)

var hub *framework.Cluster

var batchJobKind = batchv1.SchemeGroupVersion.WithKind("Job")

func TestBrowser(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "dashboard in a browser Suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// The hub alone: the dashboard reads nothing else.
	clusters, err := framework.Start(framework.ClusterSpec{Name: "hub", Role: framework.Hub})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(clusters.Stop()).To(Succeed()) })
	hub = clusters.Get("hub")
	Expect(hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
})

// chromium is Debian's Chromium, or $STRATA_CHROMIUM.
func chromium() string {
	if p := os.Getenv("STRATA_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

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

// startDashboard runs 'kubectl strata dashboard' on the hub until the
// spec ends and returns its URL.
func startDashboard() string {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		cmd := kubectlstrata.NewCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"dashboard", "--kubeconfig", hub.KubeconfigPath, "--address", "127.0.0.1:0"})
		done <- cmd.ExecuteContext(ctx)
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).Should(Receive(BeNil()))
	})
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	Eventually(func() string { return url.FindString(out.String()) }).ShouldNot(BeEmpty(), "the command prints its URL: %s", out.String())
	return url.FindString(out.String())
}

// browser starts a headless Chromium at 1280×800 for the spec.
func browser() context.Context {
	GinkgoHelper()
	_, err := os.Stat(chromium())
	Expect(err).NotTo(HaveOccurred(), "Chromium: run make test-browser, which installs Debian's chromium package")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium()), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 800))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancel := chromedp.NewContext(allocCtx)
	// Every wait ends: a page that never shows what a spec waits for fails
	// it instead of hanging the suite.
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 2*time.Minute)
	DeferCleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return ctx
}

// screenshot saves the page as dashboard-NAME.png in $STRATA_SCREENSHOTS
// (make dashboard-screenshots: docs/images), else in a temporary folder.
func screenshot(ctx context.Context, name string) {
	GinkgoHelper()
	dir := os.Getenv("STRATA_SCREENSHOTS")
	if dir == "" {
		dir = GinkgoT().TempDir()
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), png, 0o644)).To(Succeed())
}

// gpuSummary summarizes, with the agent's summarizer, 8-GPU nodes: n1 and
// n2 in rack r1, n3 and n4 in rack r2 of block b1, n5 and n6 in rack r3
// of block b2; pods take all of n1's GPUs and half of n5's.
func gpuSummary() strata.CapacitySummaryStatus {
	GinkgoHelper()
	snap := tas.NewSnapshot([]string{blockLevel, rackLevel, strata.HostnameLabel}, nil)
	for _, n := range []struct{ name, block, rack string }{{"n1", "b1", "r1"}, {"n2", "b1", "r1"}, {"n3", "b1", "r2"}, {"n4", "b1", "r2"}, {"n5", "b2", "r3"}, {"n6", "b2", "r3"}} {
		snap.SetNode(tas.Node{
			Name:   n.name,
			Labels: map[string]string{blockLevel: n.block, rackLevel: n.rack, strata.HostnameLabel: n.name},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8"),
			},
			Ready: true,
		})
	}
	snap.AddUsage("n1", tas.WithPod(corev1.ResourceList{gpu: resource.MustParse("8")}), 1)
	snap.AddUsage("n5", tas.WithPod(corev1.ResourceList{gpu: resource.MustParse("4")}), 1)
	st, err := snap.Summarize(1 << 20)
	Expect(err).NotTo(HaveOccurred())
	st.SummaryGeneration = 7
	st.ObservedTime = &metav1.Time{Time: time.Now()}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Published"})
	return st
}

// create creates obj on c and writes its status with setStatus (when
// set); the spec deletes it when it ends.
func create[T client.Object](ctx context.Context, c *framework.Cluster, obj T, setStatus func(T)) T {
	GinkgoHelper()
	Expect(c.Client.Create(ctx, obj)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Client.Delete(ctx, obj))).To(Succeed()) })
	if setStatus != nil {
		setStatus(obj)
		Expect(c.Client.Status().Update(ctx, obj)).To(Succeed())
	}
	return obj
}

func condition(conds *[]metav1.Condition, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message})
}

// attr reads attribute name of the first element sel matches, waiting
// for it.
func attr(ctx context.Context, sel, name string) (string, error) {
	r, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	return r.Value, err
}

// text is the text of the first element sel matches, waiting for it.
func text(ctx context.Context, sel string) string {
	GinkgoHelper()
	t, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	Expect(err).NotTo(HaveOccurred())
	return t
}

// visible waits until an element sel matches is visible.
func visible(ctx context.Context, sel string) {
	GinkgoHelper()
	Expect(chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)))).To(Succeed())
}

var _ = Describe("kubectl strata dashboard in Chromium", Label("browser"), func() {
	It("lists the workers, draws the summary's free capacity, and follows a job from waiting, with its reason, to placed on the rack it is highlighted on", func(ctx SpecContext) {
		// The hub's copy of w1's summary, as the hub's summarycopies
		// controller writes it: the dashboard reads the hub alone.
		hubCopy := testutil.MakeCapacitySummary("gpu").Obj()
		hubCopy.Name, hubCopy.Labels = summarycopy.Name("w1", "gpu"), map[string]string{strata.WorkerClusterLabel: "w1"}
		summary := create(ctx, hub, hubCopy, func(cs *strata.CapacitySummary) { cs.Status = gpuSummary() })
		create(ctx, hub, testutil.MakeWorkerCluster("w1").KubeConfigSecret("strata-system", "w1-kubeconfig").Obj(), func(wc *strata.WorkerCluster) {
			condition(&wc.Status.Conditions, strata.WorkerClusterConnected, metav1.ConditionTrue, "Connected", "connected")
			condition(&wc.Status.Conditions, strata.WorkerClusterSummariesFresh, metav1.ConditionTrue, "Fresh", "fresh")
			condition(&wc.Status.Conditions, strata.WorkerClusterFenced, metav1.ConditionTrue, "LeaseRenewed", "renewed")
			wc.Status.Summaries = []strata.WorkerSummaryStatus{{Flavor: "gpu", SummaryGeneration: 7, ObservedTime: &metav1.Time{Time: time.Now()},
				Free: corev1.ResourceList{gpu: resource.MustParse("36")}, Capacity: corev1.ResourceList{gpu: resource.MustParse("48")}}}
		})
		create(ctx, hub, testutil.MakeClusterQueue("training").Flavor("gpu", "nvidia.com/gpu", "32").Obj(), nil)
		create(ctx, hub, testutil.MakeLocalQueue("team-a", namespace, "training"), nil)
		job := create(ctx, hub, testutil.MakeJob("train", namespace).Queue("team-a").Parallelism(2).Completions(2).Suspend(true).Obj(), nil)
		wl := testutil.MakeWorkload(workload.JobWorkloadName(job.Name), namespace).Queue("team-a").PodSets(testutil.MakePodSet("main", 2, "nvidia.com/gpu", "8").Obj()).Obj()
		wl.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchJobKind)}
		const why = "w1/gpu: rack required: the best rack holds 1 of 2 pods; limited by nvidia.com/gpu"
		wl = create(ctx, hub, wl, func(wl *strata.Workload) {
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", why)
		})

		url := startDashboard()
		b := browser()
		Expect(chromedp.Do(b, chromedp.Navigate(url))).To(Succeed())

		By("the workers listed, with free GPUs against the total")
		visible(b, `#fleet tr[data-worker="w1"]`)
		Expect(text(b, `#fleet tr[data-worker="w1"]`)).To(SatisfyAll(ContainSubstring("True"), ContainSubstring("nvidia.com/gpu 36 of 48")))

		By("a heatmap cell's free count is the summary's: rack r1 has n2's 8 GPUs free, r3 has 4 + 8")
		free, err := attr(b, `#heatmaps button.cell[data-domain="b1/r1"]`, "data-free")
		Expect(err).NotTo(HaveOccurred())
		Expect(free).To(Equal("8"))
		free, err = attr(b, `#heatmaps button.cell[data-domain="b2/r3"]`, "data-free")
		Expect(err).NotTo(HaveOccurred())
		Expect(free).To(Equal("12"))
		Expect(summary.Status.Domains).NotTo(BeEmpty())
		By("rack r1's hosts: one full, one free")
		hosts, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('#heatmaps button.cell[data-domain="b1/r1"] .host').length`))
		Expect(err).NotTo(HaveOccurred())
		Expect(hosts).To(Equal(2))

		By("the waiting job's reason, in its queue and in the workloads")
		visible(b, `table[data-queue="training"] td.reason`)
		Expect(text(b, `table[data-queue="training"]`)).To(ContainSubstring(why))
		Expect(text(b, `table[data-quota="training"] tr[data-flavor="gpu"][data-resource="nvidia.com/gpu"]`)).To(ContainSubstring("gpu"))
		visible(b, `table[data-localqueues="training"] tr[data-localqueue="`+namespace+`/team-a"]`)
		row := `#workloads tr[data-workload="` + namespace + `/` + wl.Name + `"]`
		state, err := attr(b, row, "data-state")
		Expect(err).NotTo(HaveOccurred())
		Expect(state).To(Equal("Pending"))
		screenshot(b, "pending")

		By("dispatched to w1's rack r2 and not admitted there yet: the hub's copy shows it in flight, and the page follows")
		Eventually(func(g Gomega) {
			var cur strata.CapacitySummary
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(summary), &cur)).To(Succeed())
			cur.Status.InFlight = []strata.InFlightDomain{{Values: []string{"b1", "r2"}, Workloads: 1, Pods: 2, Requests: corev1.ResourceList{gpu: resource.MustParse("16")}}}
			g.Expect(hub.Client.Status().Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())
		visible(b, `#heatmaps button.cell.inflight[data-domain="b1/r2"][data-in-flight="2"]`)
		label, err := attr(b, `#heatmaps button.cell[data-domain="b1/r2"]`, "aria-label")
		Expect(err).NotTo(HaveOccurred())
		Expect(label).To(ContainSubstring("in flight: 1 workload(s), 2 pod(s)"))
		screenshot(b, "in-flight")

		By("placed on w1 in rack r2: the page follows without a reload, and selecting the job outlines r2")
		Eventually(func(g Gomega) {
			var cur strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(wl), &cur)).To(Succeed())
			cur.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Attempts: []strata.PlacementAttempt{
				{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Result: strata.PlacementAdmitted, Time: metav1.Now(), Message: "w1/gpu: fits in rack r2, room for 0 more"}},
				// As the hub writes it: every level down to the rack.
				TopologyHint: `{"main":{"levels":["` + blockLevel + `","` + rackLevel + `"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"b1"},{"universal":"r2"}],"podCounts":{"universal":2}}]}}`}
			cur.Status.Admission = &strata.Admission{ClusterQueue: "training", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "gpu", Count: 2,
				TopologyAssignment: &strata.TopologyAssignment{Levels: []string{strata.HostnameLabel}, Slices: []strata.TopologyAssignmentSlice{{DomainCount: 2,
					ValuesPerLevel: []strata.TopologyAssignmentSliceLevelValues{{Individual: &strata.TopologyAssignmentSliceLevelIndividualValues{Roots: []string{"n3", "n4"}}}},
					PodCounts:      strata.TopologyAssignmentSlicePodCounts{Universal: ptr.To[int32](1)}}}}}}}
			condition(&cur.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted on w1, flavor gpu")
			g.Expect(hub.Client.Status().Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			// Admitted: w1's summary counts it, no longer in flight.
			var cur strata.CapacitySummary
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(summary), &cur)).To(Succeed())
			cur.Status.InFlight = nil
			g.Expect(hub.Client.Status().Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())
		create(ctx, hub, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "train.admitted"},
			EventTime: metav1.NowMicro(), ReportingController: "strata-hub", ReportingInstance: "strata-hub-0", Action: "Dispatch",
			Type: corev1.EventTypeNormal, Reason: "Admitted", Note: "Admitted on w1 (flavor gpu)",
			Regarding: corev1.ObjectReference{Kind: "Job", Namespace: namespace, Name: job.Name}}, nil)
		visible(b, row+`[data-state="Admitted"]`)
		Expect(chromedp.Do(b, chromedp.Click(chromedp.CSS(row)))).To(Succeed())
		visible(b, `#heatmaps button.cell.highlight[data-domain="b1/r2"]`)
		highlighted, err := chromedp.Run(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#heatmaps button.cell.highlight")).map(e => e.dataset.domain)`))
		Expect(err).NotTo(HaveOccurred())
		Expect(highlighted).To(Equal([]string{"b1/r2"}))
		visible(b, `#explain table.events`)
		Expect(text(b, `#explain table.events`)).To(ContainSubstring("Admitted on w1 (flavor gpu)"))
		Expect(text(b, `#explain pre`)).To(SatisfyAll(ContainSubstring("Worker: w1, flavor gpu"), ContainSubstring("n3: 1"), ContainSubstring("n4: 1")))
		screenshot(b, "placed")
	})
})
