package kubectl

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/kubectlstrata"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

const (
	blockLevel = "cloud.provider.com/topology-block"
	rackLevel  = "cloud.provider.com/topology-rack"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
)

// create creates obj on c, then writes its status with setStatus (when
// set), and deletes it after the spec.
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

// condition is a condition as controllers set it.
func condition(conds *[]metav1.Condition, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message})
}

// hubWorkload is a Workload of a hub Job in the suite's namespace.
func hubWorkload(name string) *strata.Workload {
	return testutil.MakeWorkload(name, namespace).Queue("team-a").PodSets(testutil.MakePodSet("main", 2, "nvidia.com/gpu", "8").Obj()).Obj()
}

// job is a suspended Job of 6 pods with the queue label unless queue is
// empty.
func job(name, queue string) *batchv1.Job {
	return testutil.MakeJob(name, namespace).Queue(queue).Parallelism(6).Completions(6).Suspend(true).Obj()
}

// jobWorkload is the Workload of j, owned by it.
func jobWorkload(j *batchv1.Job) *strata.Workload {
	wl := hubWorkload(workload.JobWorkloadName(j.Name))
	wl.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	return wl
}

// gpuSummary summarizes, with the agent's summarizer, four 8-GPU nodes:
// n1 and n2 in rack r1 and n3 in rack r2 of block b1, n4 in rack r3 of
// block b2; a pod takes all of n1's GPUs.
func gpuSummary() strata.CapacitySummaryStatus {
	GinkgoHelper()
	snap := tas.NewSnapshot([]string{blockLevel, rackLevel, strata.HostnameLabel}, nil)
	for _, n := range []struct{ name, block, rack string }{{"n1", "b1", "r1"}, {"n2", "b1", "r1"}, {"n3", "b1", "r2"}, {"n4", "b2", "r3"}} {
		snap.SetNode(tas.Node{
			Name:   n.name,
			Labels: map[string]string{blockLevel: n.block, rackLevel: n.rack, strata.HostnameLabel: n.name},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("512Gi"),
				corev1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8"),
			},
			Ready: true,
		})
	}
	snap.AddUsage("n1", tas.WithPod(corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("8")}), 1)
	st, err := snap.Summarize(1 << 20)
	Expect(err).NotTo(HaveOccurred())
	st.SummaryGeneration = 3
	st.ObservedTime = &metav1.Time{Time: time.Now().Add(-20 * time.Second)}
	condition(&st.Conditions, "Ready", metav1.ConditionTrue, "Published", "")
	return st
}

var _ = Describe("kubectl strata clusters", Label("kubectl"), func() {
	It("shows every worker, its workloads, and the workloads not dispatched", func(ctx SpecContext) {
		create(ctx, hub, testutil.MakeWorkerCluster("w1").KubeConfigSecret("strata-system", "w1").Obj(), func(wc *strata.WorkerCluster) {
			condition(&wc.Status.Conditions, strata.WorkerClusterConnected, metav1.ConditionTrue, "Connected", "connected to w1")
			condition(&wc.Status.Conditions, strata.WorkerClusterSummariesFresh, metav1.ConditionTrue, "Fresh", "all fresh")
			wc.Status.Summaries = []strata.WorkerSummaryStatus{{Flavor: "gpu", SummaryGeneration: 3, ObservedTime: &metav1.Time{Time: time.Now().Add(-20 * time.Second)}}}
			wc.Status.Workloads = 2
		})
		w2 := testutil.MakeWorkerCluster("w2").KubeConfigSecret("strata-system", "w2").Obj()
		w2.Spec.Unschedulable = true
		create(ctx, hub, w2, func(wc *strata.WorkerCluster) {
			condition(&wc.Status.Conditions, strata.WorkerClusterConnected, metav1.ConditionFalse, "Unreachable", "dial tcp 10.0.0.2:6443: connect: connection refused")
			condition(&wc.Status.Conditions, strata.WorkerClusterSummariesFresh, metav1.ConditionUnknown, "NotConnected", "not connected")
		})
		placed := func(cluster string, admitted bool) func(*strata.Workload) {
			return func(wl *strata.Workload) {
				wl.Status.Placement = &strata.Placement{Cluster: cluster, Flavor: "gpu", DispatchGeneration: 1, Attempts: []strata.PlacementAttempt{
					{Cluster: cluster, Flavor: "gpu", DispatchGeneration: 1, Result: strata.PlacementDispatched, Time: metav1.Now()},
				}}
				if admitted {
					condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted on "+cluster)
				} else {
					condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Dispatched", "waiting for "+cluster)
				}
			}
		}
		create(ctx, hub, hubWorkload("running"), placed("w1", true))
		create(ctx, hub, hubWorkload("sent"), placed("w1", false))
		create(ctx, hub, hubWorkload("waits"), func(wl *strata.Workload) {
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "w1/gpu: rack required: the best rack holds 6 of 8 pods")
		})
		create(ctx, hub, hubWorkload("done"), func(wl *strata.Workload) {
			placed("w1", true)(wl)
			condition(&wl.Status.Conditions, strata.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "")
		})

		By("printing a table")
		out, err := run(ctx, "clusters", "--kubeconfig", hub.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^NAME\s+CONNECTED\s+FRESH\s+CORDONED\s+COPIES\s+ADMITTED\s+WAITING\s+FLAVORS \(SUMMARY AGE\)$`))
		Expect(out).To(MatchRegexp(`(?m)^w1\s+True\s+True\s+false\s+2\s+1\s+1\s+gpu \d+s$`))
		Expect(out).To(MatchRegexp(`(?m)^w2\s+False \(Unreachable\)\s+Unknown \(NotConnected\)\s+true\s+0\s+0\s+0\s+-$`))
		Expect(out).To(ContainSubstring("w2 Connected: dial tcp 10.0.0.2:6443: connect: connection refused\n"))
		Expect(out).To(HaveSuffix("Not dispatched: 1 hub Workload (Pending 1)\n"))

		By("printing JSON")
		out, err = run(ctx, "clusters", "--kubeconfig", hub.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var v kubectlstrata.ClustersView
		Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
		Expect(v.Clusters).To(HaveLen(2))
		Expect(v.Clusters[0]).To(HaveField("Name", "w1"))
		Expect(v.Clusters[0]).To(HaveField("Admitted", int32(1)))
		Expect(v.Clusters[0]).To(HaveField("Waiting", int32(1)))
		Expect(v.Clusters[0].Summaries).To(ConsistOf(HaveField("Flavor", "gpu")))
		Expect(v.Clusters[1]).To(HaveField("Cordoned", true))
		Expect(v.Clusters[1].Connected).To(HaveField("Reason", "Unreachable"))
		Expect(v.NotDispatched).To(Equal(kubectlstrata.NotDispatchedView{Total: 1, ByReason: map[string]int32{"Pending": 1}}))
	})

	It("says so on a worker, which has no WorkerCluster CRD", func(ctx SpecContext) {
		out, err := run(ctx, "clusters", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError("this cluster has no WorkerCluster CRD (strata.dev): it is not a Strata hub; "+
			"install the strata-hub chart, or on a worker use 'kubectl strata topology'"), out)
	})
})

var _ = Describe("kubectl strata topology", Label("kubectl"), func() {
	It("draws the tree of a worker's summary", func(ctx SpecContext) {
		create(ctx, worker, testutil.MakeCapacitySummary("gpu").Obj(), func(cs *strata.CapacitySummary) { cs.Status = gpuSummary() })

		out, err := run(ctx, "topology", "--kubeconfig", worker.KubeconfigPath, "--flavor", "gpu")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("Flavor gpu: summary generation 3, observed "))
		Expect(out).To(ContainSubstring("; levels block > rack > host (nodes counted per rack)\n"))
		Expect(out).To(MatchRegexp(`(?m)^gpu\s+\[#######---\]\s+24/32 nvidia.com/gpu free\s+pods 439/440\s+4 nodes$`))
		Expect(out).To(MatchRegexp(`(?m)^  b1\s+\[######----\]\s+16/24 nvidia.com/gpu free\s+pods 329/330\s+3 nodes$`))
		Expect(out).To(MatchRegexp(`(?m)^    r1\s+\[#####-----\]\s+8/16 nvidia.com/gpu free\s+pods 219/220\s+2 nodes$`))
		Expect(out).To(MatchRegexp(`(?m)^    r2\s+\[##########\]\s+8/8 nvidia.com/gpu free\s+pods 110/110\s+1 node$`))
		Expect(out).To(MatchRegexp(`(?m)^  b2\s+\[##########\]\s+8/8 nvidia.com/gpu free\s+pods 110/110\s+1 node$`))

		By("printing YAML")
		out, err = run(ctx, "topology", "--kubeconfig", worker.KubeconfigPath, "-o", "yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("flavor: gpu\n"))
		Expect(out).To(ContainSubstring("nvidia.com/gpu: \"24\"\n"))

		By("naming the flavors there are when asked for another, leaving out a hub's copy of another worker's summary (a cluster that is both)")
		hubCopy := testutil.MakeCapacitySummary("h100").Obj()
		hubCopy.Name, hubCopy.Labels = "w9.h100", map[string]string{strata.WorkerClusterLabel: "w9"}
		create(ctx, worker, hubCopy, func(cs *strata.CapacitySummary) { cs.Status = gpuSummary() })
		_, err = run(ctx, "topology", "--kubeconfig", worker.KubeconfigPath, "--flavor", "h100")
		Expect(err).To(MatchError(`no CapacitySummary of flavor "h100" on this cluster (it has gpu)`))
	})

	It("reads a worker's summaries from the hub with the WorkerCluster's kubeconfig Secret", func(ctx SpecContext) {
		create(ctx, worker, testutil.MakeCapacitySummary("gpu").Obj(), func(cs *strata.CapacitySummary) { cs.Status = gpuSummary() })
		Expect(client.IgnoreAlreadyExists(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}}))).To(Succeed())
		create(ctx, hub, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "topo-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": worker.Kubeconfig}}, nil)
		create(ctx, hub, testutil.MakeWorkerCluster("topo").KubeConfigSecret("strata-system", "topo-kubeconfig").Obj(), nil)

		out, err := run(ctx, "topology", "--kubeconfig", hub.KubeconfigPath, "--cluster", "topo", "--flavor", "gpu")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^  b1\s+\[######----\]\s+16/24 nvidia.com/gpu free\s+pods 329/330\s+3 nodes$`))

		By("saying what to do for a worker registered otherwise, or unknown")
		create(ctx, hub, testutil.MakeWorkerCluster("topo-profile").ClusterProfile("fleet", "topo-profile").Obj(), nil)
		_, err = run(ctx, "topology", "--kubeconfig", hub.KubeconfigPath, "--cluster", "topo-profile")
		Expect(err).To(MatchError(ContainSubstring("is not registered through a kubeconfig Secret: run 'kubectl strata topology' with the worker's own kubeconfig")))

		By("showing the hub's copy of that worker's summaries once the hub keeps one, and saying so")
		hubCopy := testutil.MakeCapacitySummary("gpu").Obj()
		hubCopy.Name, hubCopy.Labels = "topo-profile.gpu", map[string]string{strata.WorkerClusterLabel: "topo-profile"}
		create(ctx, hub, hubCopy, func(cs *strata.CapacitySummary) {
			cs.Status = gpuSummary()
			cs.Status.InFlight = []strata.InFlightDomain{{Values: []string{"b1", "r2"}, Workloads: 1, Pods: 1}}
		})
		out, err = run(ctx, "topology", "--kubeconfig", hub.KubeconfigPath, "--cluster", "topo-profile")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Showing the hub's copy of topo-profile's summaries"))
		Expect(out).To(MatchRegexp(`(?m)^    r2\s+\[##########\]\s+8/8 nvidia.com/gpu free\s+pods 110/110\s+1 node \(1 pod in flight\)$`))
		_, err = run(ctx, "topology", "--kubeconfig", hub.KubeconfigPath, "--cluster", "nowhere")
		Expect(err).To(MatchError(ContainSubstring("no WorkerCluster nowhere on")))
	})

	It("says where to look on a cluster without summaries", func(ctx SpecContext) {
		_, err := run(ctx, "topology", "--kubeconfig", hub.KubeconfigPath)
		Expect(err).To(MatchError("this is a hub: its workers publish the summaries; pass --cluster NAME to read one worker's (kubectl strata clusters lists them)"))
	})
})

var _ = Describe("kubectl strata explain", Label("kubectl"), func() {
	It("explains an admitted Job on a worker", func(ctx SpecContext) {
		j := create(ctx, worker, job("train", "team-a"), nil)
		wl := jobWorkload(j)
		wl.Labels = map[string]string{strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "hub-uid", strata.DispatchGenerationLabel: "1"}
		wl.Annotations = map[string]string{strata.FlavorAnnotation: "gpu"}
		create(ctx, worker, wl, func(wl *strata.Workload) {
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted by ClusterQueue cq")
			wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{
				Name: "main", Flavor: "gpu", Count: 6,
				TopologyAssignment: tas.Encode(&tas.Assignment{Levels: []string{blockLevel, rackLevel}, Domains: []tas.DomainAssignment{
					{Values: []string{"b1", "r1"}, Count: 4}, {Values: []string{"b1", "r2"}, Count: 2},
				}}),
			}}}
		})

		out, err := run(ctx, "explain", "train", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Workload:   job-train (on the worker)\n"))
		Expect(out).To(ContainSubstring("Queue:      team-a\n"))
		Expect(out).To(MatchRegexp(`(?m)^Admitted:   True  Admitted \(for \d+s\)$`))
		Expect(out).To(ContainSubstring("Dispatch:   copy of hub Workload hub-uid (dispatch 1) from hub strata-hub; flavor pinned: gpu\n"))
		Expect(out).To(ContainSubstring("  main: 6 pods on flavor gpu, in 2 rack domains (block > rack)\n"))
		Expect(out).To(MatchRegexp(`(?m)^    b1/r1\s+4 pods$`))
		Expect(out).To(MatchRegexp(`(?m)^    b1/r2\s+2 pods$`))
	})

	It("shows the hub's placement record", func(ctx SpecContext) {
		j := create(ctx, hub, job("train", "team-a"), nil)
		create(ctx, hub, jobWorkload(j), func(wl *strata.Workload) {
			condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Dispatched", "waiting for w1")
			wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 2, Attempts: []strata.PlacementAttempt{
				{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 1, Result: strata.PlacementRejected, Time: metav1.Now(), Message: "LocalQueue team-a not found"},
				{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 2, Result: strata.PlacementDispatched, Time: metav1.Now(), Message: "w1/gpu fits in rack r1"},
			}}
		})

		out, err := run(ctx, "explain", "train", "-n", namespace, "--kubeconfig", hub.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Workload:   job-train (on the hub)\n"))
		Expect(out).To(ContainSubstring("            waiting for w1\n"))
		Expect(out).To(ContainSubstring("Placement:  w1, flavor gpu (dispatch generation 2)\n"))
		Expect(out).To(MatchRegexp(`(?m)^  #1 w2/gpu Rejected \d+s ago: LocalQueue team-a not found$`))
		Expect(out).To(MatchRegexp(`(?m)^  #2 w1/gpu Dispatched \d+s ago: w1/gpu fits in rack r1$`))

		By("printing JSON")
		out, err = run(ctx, "explain", "train", "-n", namespace, "--kubeconfig", hub.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var v kubectlstrata.ExplainView
		Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
		Expect(v.Role).To(Equal("hub"))
		Expect(v.Placement).To(HaveField("Cluster", "w1"))
		Expect(v.Placement.Attempts).To(HaveLen(2))
	})

	It("says why it cannot explain a Job", func(ctx SpecContext) {
		create(ctx, worker, job("plain", ""), nil)
		create(ctx, worker, job("new", "team-a"), nil)

		_, err := run(ctx, "explain", "missing", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("job ml/missing not found on ")))
		_, err = run(ctx, "explain", "plain", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError("job ml/plain is not managed by Strata: it has no strata.dev/queue-name label"))
		_, err = run(ctx, "explain", "new", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("job ml/new has no Workload yet (job-new)")))
	})
})
