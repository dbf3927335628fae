package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"strata.dev/strata/agent/controller/provisioning"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/jobs/jobset"
	lwsjobs "strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

// The fleet: a hub and two workers. w1 (the suite's first cluster) has two
// free racks of four 8-CPU nodes; w2 two racks of four 4-CPU nodes, so
// that a rack of w2 holds half of what a rack of w1 does.
const fleetNS, fleetQueue, fleetFlavor = "fleet", "fleet", "fleet"

// hubConfig is the hub's configuration in the e2e fleet.
const hubConfig = `dispatch:
  admissionTimeout: 1m
  finishedRetention: 20s
  orphanCheckInterval: 10s
`

func fleetJob(name string, pods int32, cpu string, annotations map[string]string) *batchv1.Job {
	return testutil.MakeJob(name, fleetNS).Queue(fleetQueue).Parallelism(pods).Completions(pods).Indexed().Image("fake").
		Request("cpu", cpu).PodAnnotations(annotations).Obj()
}

// gpuModel labels the fleet's nodes: a100 on w1, h100 on w2.
const gpuModel = "gpu.example/model"

// setChartValues upgrades chart on c, keeping its values but for set.
func setChartValues(c cluster, chart string, set ...string) {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	args := []string{"upgrade", chart, filepath.Join(framework.RepoRoot(), "charts", chart), "--kubeconfig", c.Kubeconfig(),
		"--namespace", kwokcluster.Namespace, "--reuse-values", "--wait"}
	for _, v := range set {
		args = append(args, "--set", v)
	}
	out, err := exec.Command(filepath.Join(bin, "helm"), args...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm %v: %s", args, out)
}

// fleetNodes creates racks of n nodes of cpu CPUs on a worker, in pool fleet.
func fleetNodes(ctx SpecContext, k client.Client, worker string, racks, n int, cpu string) {
	GinkgoHelper()
	for r := range racks {
		for h := range n {
			name := fmt.Sprintf("%s-f%d-h%d", worker, r, h)
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					"pool": fleetFlavor, block: "fb", rack: fmt.Sprintf("%s-rack-%d", worker, r), host: name, "type": "kwok",
					gpuModel: map[string]string{"w1": "a100", "w2": "h100"}[worker],
				}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")},
					Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")},
				},
			}
			Expect(k.Create(ctx, node)).To(Succeed())
		}
	}
}

// queues creates the fleet's namespace, ClusterQueue and LocalQueue, and
// with topology set its Topology and ResourceFlavor.
func queues(ctx SpecContext, k client.Client, topology bool) {
	GinkgoHelper()
	Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}})).To(Succeed())
	if topology {
		Expect(k.Create(ctx, testutil.MakeTopology(fleetFlavor, block, rack, host).Obj())).To(Succeed())
		Expect(k.Create(ctx, testutil.MakeResourceFlavor(fleetFlavor).NodeLabel("pool", fleetFlavor).TopologyName(fleetFlavor).Obj())).To(Succeed())
	}
	Expect(k.Create(ctx, testutil.MakeClusterQueue(fleetQueue).Flavor(fleetFlavor).Obj())).To(Succeed())
	Expect(k.Create(ctx, testutil.MakeLocalQueue(fleetQueue, fleetNS, fleetQueue))).To(Succeed())
}

var _ = Describe("a hub and two workers on kwok", Ordered, Label("e2e", "fleet"), func() {
	var hubKube, w2Kube client.Client
	var hubCluster, w2Cluster cluster
	var mpiOperator bool // w2 runs the MPI operator
	workers := map[string]client.Client{}

	BeforeAll(func(ctx SpecContext) {
		hubCluster = createCluster("strata-e2e-hub")
		hubKube = adminClient(hubCluster)
		hubCluster.InstallJobSet(false)
		hubCluster.InstallMPIJob(false)
		hubCluster.InstallLWS(false)
		hubCluster.Deploy("strata-hub", hubConfig)

		w2 := createCluster("strata-e2e-w2")
		w2Cluster = w2
		w2Kube = adminClient(w2)
		w2.InstallJobSet(true)
		mpiOperator = w2.InstallMPIJob(true)
		w2.Deploy("strata-agent", "")
		workers["w1"], workers["w2"] = kube, w2Kube

		By("the fleet's nodes, topology and queues on each worker, and its queues on the hub")
		fleetNodes(ctx, kube, "w1", 2, 4, "8")
		fleetNodes(ctx, w2Kube, "w2", 2, 4, "4")
		for _, k := range workers {
			queues(ctx, k, true)
		}
		queues(ctx, hubKube, false)

		By("registering each worker with the agent chart's hub identity, through a kubeconfig Secret")
		for name, c := range map[string]cluster{"w1": worker1, "w2": w2} {
			kc := c.Credential("strata-hub-access")
			Expect(hubKube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kwokcluster.Namespace, Name: name + "-kubeconfig"},
				Data: map[string][]byte{"kubeconfig": kc}})).To(Succeed())
			Expect(hubKube.Create(ctx, testutil.MakeWorkerCluster(name).KubeConfigSecret(kwokcluster.Namespace, name+"-kubeconfig").Obj())).To(Succeed())
		}

		Eventually(func(g Gomega) {
			for name := range workers {
				var wc strata.WorkerCluster
				g.Expect(hubKube.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(wc.Status.Conditions, strata.WorkerClusterConnected)).To(BeTrue(), "%s: %+v", name, wc.Status.Conditions)
				g.Expect(meta.IsStatusConditionTrue(wc.Status.Conditions, strata.WorkerClusterSummariesFresh)).To(BeTrue(), "%s: %+v", name, wc.Status.Conditions)
				// The hub's copies of the worker's summaries, which the
				// dashboard draws, written with the chart's RBAC.
				var hubCopies strata.CapacitySummaryList
				g.Expect(hubKube.List(ctx, &hubCopies, client.MatchingLabels{strata.WorkerClusterLabel: name})).To(Succeed())
				g.Expect(hubCopies.Items).NotTo(BeEmpty(), "no copy of %s's summaries on the hub", name)
				g.Expect(hubCopies.Items[0].Status.Domains).NotTo(BeEmpty(), "%s's copy has no domains", name)
			}
		}, wait, time.Second).Should(Succeed())
	})

	hubWorkload := func(g Gomega, ctx SpecContext, j *batchv1.Job) *strata.Workload {
		var wl strata.Workload
		g.Expect(hubKube.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: workload.JobWorkloadName(j.Name)}, &wl)).To(Succeed())
		return &wl
	}
	// copies are the workers holding a copy of a hub Job.
	copies := func(g Gomega, ctx SpecContext, j *batchv1.Job) []string {
		var out []string
		for _, name := range []string{"w1", "w2"} {
			var c batchv1.Job
			err := workers[name].Get(ctx, client.ObjectKeyFromObject(j), &c)
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			if err == nil {
				out = append(out, name)
			}
		}
		return out
	}
	// podsPerRack is how many pods an admission puts in each rack of the
	// worker that holds it.
	podsPerRack := func(g Gomega, ctx SpecContext, worker client.Client, a *strata.Admission) map[string]int32 {
		ta, err := tas.Decode(a.PodSetAssignments[0].TopologyAssignment)
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]int32{}
		for _, d := range ta.Domains {
			var n corev1.Node
			g.Expect(worker.Get(ctx, client.ObjectKey{Name: d.Values[len(d.Values)-1]}, &n)).To(Succeed())
			out[n.Labels[rack]] += d.Count
		}
		return out
	}
	// admittedOn waits for a hub Job's admission and returns its worker
	// and the admission.
	admittedOn := func(ctx SpecContext, j *batchv1.Job) (string, *strata.Admission) {
		GinkgoHelper()
		var wl *strata.Workload
		Eventually(func(g Gomega) {
			wl = hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %+v", wl.Status.Conditions)
		}, wait, time.Second).Should(Succeed())
		return wl.Status.Placement.Cluster, wl.Status.Admission
	}
	// whereStuck describes a hub Job that does not complete, for a failure
	// message: its hub Workload's placement and conditions, and on each
	// worker its copy, the copy's Workload and pods.
	whereStuck := func(ctx context.Context, j *batchv1.Job) string {
		var b strings.Builder
		var wl strata.Workload
		if err := hubKube.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: workload.JobWorkloadName(j.Name)}, &wl); err != nil {
			fmt.Fprintf(&b, "hub Workload: %v", err)
		} else {
			fmt.Fprintf(&b, "hub Workload: placement=%+v admitted=%v conditions=%+v", wl.Status.Placement, wl.Status.Admission != nil, wl.Status.Conditions)
		}
		for _, name := range []string{"w1", "w2"} {
			k := workers[name]
			var cp batchv1.Job
			if err := k.Get(ctx, client.ObjectKeyFromObject(j), &cp); err != nil {
				fmt.Fprintf(&b, "; %s copy: %v", name, err)
				continue
			}
			fmt.Fprintf(&b, "; %s copy: suspend=%v labels=%v active=%d succeeded=%d conditions=%+v", name, ptr.Deref(cp.Spec.Suspend, false),
				cp.Labels, cp.Status.Active, cp.Status.Succeeded, cp.Status.Conditions)
			var cwl strata.Workload
			if err := k.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: workload.JobWorkloadName(j.Name)}, &cwl); err != nil {
				fmt.Fprintf(&b, "; %s Workload: %v", name, err)
			} else {
				fmt.Fprintf(&b, "; %s Workload: admitted=%v conditions=%+v", name, cwl.Status.Admission != nil, cwl.Status.Conditions)
			}
			var pods corev1.PodList
			if err := k.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
				fmt.Fprintf(&b, "; %s pods: %v", name, err)
			}
			for _, p := range pods.Items {
				fmt.Fprintf(&b, "; %s pod %s: phase=%s node=%q gates=%v", name, p.Name, p.Status.Phase, p.Spec.NodeName, p.Spec.SchedulingGates)
			}
		}
		return b.String()
	}
	// nudgeUnstarted touches, once, each pod of Job j's copy on a worker
	// that a node has held for more than a minute without starting it,
	// and returns how many it touched. After its cluster's control plane
	// restarts, kwok's controller drops the event of a pod bound to a
	// node it does not manage again yet and, unlike a kubelet, which lists
	// its node's pods again, never looks at that pod again: the pod would
	// stay Pending though nothing in Strata lost it. The touch is the
	// event kwok missed.
	nudged := map[types.UID]bool{}
	nudgeUnstarted := func(ctx context.Context, k client.Client, j *batchv1.Job) int {
		var pods corev1.PodList
		if err := k.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
			return 0
		}
		n := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			var bound *corev1.PodCondition
			for c := range p.Status.Conditions {
				if p.Status.Conditions[c].Type == corev1.PodScheduled {
					bound = &p.Status.Conditions[c]
				}
			}
			if nudged[p.UID] || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) > 0 ||
				bound == nil || bound.Status != corev1.ConditionTrue || time.Since(bound.LastTransitionTime.Time) < time.Minute {
				continue
			}
			patch := client.MergeFrom(p.DeepCopy())
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, "e2e.strata.dev/nudged", time.Now().UTC().Format(time.RFC3339))
			if k.Patch(ctx, p, patch) == nil {
				nudged[p.UID] = true
				n++
				GinkgoWriter.Printf("pod %s/%s bound to %s at %s never started: touched, as kwok's controller missed it\n",
					p.Namespace, p.Name, p.Spec.NodeName, bound.LastTransitionTime.UTC().Format(time.RFC3339))
			}
		}
		return n
	}
	complete := func(j *batchv1.Job) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}

	It("sends a rack-required Job to the worker with a free rack; the hub's kubectl shows it complete", func(ctx SpecContext) {
		j := fleetJob("one-rack", 8, "4", map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %+v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "only w1 has a rack of 32 free CPUs")
			a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			racks := map[string]bool{}
			for _, d := range a.Domains {
				var n corev1.Node
				g.Expect(kube.Get(ctx, client.ObjectKey{Name: d.Values[len(d.Values)-1]}, &n)).To(Succeed())
				racks[n.Labels[rack]] = true
			}
			g.Expect(racks).To(HaveLen(1))
		}, wait, time.Second).Should(Succeed())
		Expect(copies(Default, ctx, j)).To(Equal([]string{"w1"}))

		By("the worker runs it; the hub Job mirrors its progress to completion")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
			g.Expect(got.Status.Succeeded).To(Equal(int32(8)))
		}, wait, time.Second).Should(Succeed())
		bin, err := framework.BinDir()
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", hubCluster.Kubeconfig(), "get", "jobs", "-n", fleetNS, j.Name).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(MatchRegexp(`one-rack\s+Complete\s+8/8`))

		By("the hub's own Job controller never ran it: the hub has no pods")
		var pods corev1.PodList
		Expect(hubKube.List(ctx, &pods, client.InNamespace(fleetNS))).To(Succeed())
		Expect(pods.Items).To(BeEmpty())
	})

	It("sends a Job only to the worker whose nodes its selector matches, and one no node matches nowhere", func(ctx SpecContext) {
		h100 := fleetJob("select-h100", 2, "1", map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		h100.Spec.Template.Spec.NodeSelector = map[string]string{gpuModel: "h100"}
		Expect(hubKube.Create(ctx, h100)).To(Succeed())
		at, _ := admittedOn(ctx, h100)
		Expect(at).To(Equal("w2"))
		Expect(hubWorkload(Default, ctx, h100).Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(h100), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())

		b200 := fleetJob("select-b200", 1, "1", nil)
		b200.Spec.Template.Spec.NodeSelector = map[string]string{gpuModel: "b200"}
		Expect(hubKube.Create(ctx, b200)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, b200).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonNeverFits), c.Message)
			g.Expect(c.Message).To(ContainSubstring("node selector/affinity"))
		}, wait, time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, b200)).To(BeEmpty())
		}, 3*time.Second).Should(Succeed())
		Expect(hubKube.Delete(ctx, b200, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("runs a team onboarded on the hub alone on workers that opt in, through the agent chart's onboarding permission", func(ctx SpecContext) {
		for name, c := range map[string]cluster{"w1": worker1, "w2": w2Cluster} {
			By("letting the hub onboard teams on " + name + " (agent chart hubAccess.onboarding=true), and " + name + " opting in")
			setChartValues(c, "strata-agent", "hubAccess.onboarding=true")
			Eventually(func(g Gomega) {
				var wc strata.WorkerCluster
				g.Expect(hubKube.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
				wc.Spec.Onboarding = &strata.WorkerOnboarding{ClusterQueue: fleetQueue}
				g.Expect(hubKube.Update(ctx, &wc)).To(Succeed())
			}).Should(Succeed())
			DeferCleanup(func(ctx SpecContext) { // the later specs make their workers' queues themselves
				Eventually(func(g Gomega) {
					var wc strata.WorkerCluster
					g.Expect(hubKube.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
					wc.Spec.Onboarding = nil
					g.Expect(hubKube.Update(ctx, &wc)).To(Succeed())
				}).Should(Succeed())
			})
		}
		By("a namespace and a LocalQueue created on the hub only")
		const team = "onboarded-team"
		Expect(hubKube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})).To(Succeed())
		Expect(hubKube.Create(ctx, testutil.MakeLocalQueue("team-q", team, fleetQueue))).To(Succeed())
		var jobs []*batchv1.Job
		for i := range 4 {
			j := fleetJob(fmt.Sprintf("onboarded-%d", i), 2, "2", nil)
			j.Namespace = team
			j.Labels[strata.QueueNameLabel] = "team-q"
			Expect(hubKube.Create(ctx, j)).To(Succeed())
			jobs = append(jobs, j)
		}
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				var got batchv1.Job
				g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				g.Expect(complete(&got)).To(BeTrue(), "%s: %+v", j.Name, got.Status)
			}
		}, wait, time.Second).Should(Succeed())
		for _, j := range jobs {
			Expect(hubWorkload(Default, ctx, j).Status.Placement.Attempts).To(HaveLen(1), "%s: admitted the first time", j.Name)
		}
		By("the namespace and LocalQueue the copies used exist on the workers they ran on, marked as the hub's")
		for _, j := range jobs {
			at := hubWorkload(Default, ctx, j).Status.Placement.Cluster
			var ns corev1.Namespace
			Expect(workers[at].Get(ctx, client.ObjectKey{Name: team}, &ns)).To(Succeed())
			Expect(ns.Labels).To(HaveKey(strata.OnboardedByLabel))
			var lq strata.LocalQueue
			Expect(workers[at].Get(ctx, client.ObjectKey{Namespace: team, Name: "team-q"}, &lq)).To(Succeed())
			Expect(lq.Spec.ClusterQueue).To(Equal(fleetQueue))
		}
	})

	It("keeps a Job larger than every worker waiting on the hub, with the reason", func(ctx SpecContext) {
		j := fleetJob("too-big", 20, "8", nil)
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(hubWorkload(g, ctx, j).Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(dispatch.ReasonNeverFits), c.Message)
		}, wait, time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, j)).To(BeEmpty())
		}, 3*time.Second).Should(Succeed())
		Expect(hubKube.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("sends a Job no worker's nodes hold now to the worker whose queue provisions nodes (ProvisioningRequest); it runs there on the nodes provisioned", func(ctx SpecContext) {
		const flavor, check = "fleet-prov", "fleet-prov"
		By("on w1, a flavor of one 2-CPU node behind a ClusterQueue with a ProvisioningRequest check; the same queue on the hub")
		Expect(kube.Create(ctx, testutil.MakeResourceFlavor(flavor).NodeLabel("pool", flavor).TopologyName(fleetFlavor).Obj())).To(Succeed())
		Expect(kube.Create(ctx, &strata.ProvisioningRequestConfig{ObjectMeta: metav1.ObjectMeta{Name: check},
			Spec: strata.ProvisioningRequestConfigSpec{ProvisioningClassName: "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}})).To(Succeed())
		Expect(kube.Create(ctx, &strata.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check},
			Spec: strata.AdmissionCheckSpec{ControllerName: strata.ProvisioningRequestControllerName,
				Parameters: &strata.AdmissionCheckParametersReference{APIGroup: "strata.dev", Kind: "ProvisioningRequestConfig", Name: check}}})).To(Succeed())
		cq := testutil.MakeClusterQueue(flavor).Flavor(flavor).Obj()
		cq.Spec.AdmissionChecks = []string{check}
		Expect(kube.Create(ctx, cq)).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeLocalQueue(flavor, fleetNS, flavor))).To(Succeed())
		Expect(hubKube.Create(ctx, testutil.MakeClusterQueue(flavor).Flavor(flavor).Obj())).To(Succeed())
		Expect(hubKube.Create(ctx, testutil.MakeLocalQueue(flavor, fleetNS, flavor))).To(Succeed())
		provNode := func(name string) *corev1.Node {
			return &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": flavor, block: "fb", rack: "w1-rack-prov", host: name, "type": "kwok"},
					Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")},
					Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")},
				},
			}
		}
		Expect(kube.Create(ctx, provNode("w1-prov-h0"))).To(Succeed())
		Eventually(func(g Gomega) {
			var cs strata.CapacitySummary
			g.Expect(kube.Get(ctx, client.ObjectKey{Name: flavor}, &cs)).To(Succeed())
			g.Expect(cs.Status.Nodes).To(BeEquivalentTo(1))
			g.Expect(cs.Status.Queues).To(ContainElement(strata.QueueUsage{Name: flavor, Provisions: true}))
		}, wait, time.Second).Should(Succeed())

		By("a Job of three 2-CPU pods in one rack: dispatched to w1, quota reserved there, a ProvisioningRequest made")
		j := testutil.MakeJob("provisioned", fleetNS).Queue(flavor).Parallelism(3).Completions(3).Indexed().Image("fake").
			Request("cpu", "2").PodAnnotations(map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}).Obj()
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		pr := &unstructured.Unstructured{}
		pr.SetGroupVersionKind(provisioning.GVK)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "conditions: %+v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "the worker's reservation: %+v", wl.Status.Conditions)
			g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: provisioning.RequestName(workload.JobWorkloadName(j.Name), check, 1)}, pr)).To(Succeed())
		}, wait, time.Second).Should(Succeed())

		By("the autoscaler (the test) adds two nodes to the rack and says Provisioned: the Job runs there to completion")
		Expect(kube.Create(ctx, provNode("w1-prov-h1"))).To(Succeed())
		Expect(kube.Create(ctx, provNode("w1-prov-h2"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(pr), pr)).To(Succeed())
			conds := []any{map[string]any{"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "two nodes",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
			g.Expect(unstructured.SetNestedSlice(pr.Object, conds, "status", "conditions")).To(Succeed())
			g.Expect(kube.Status().Update(ctx, pr)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "%s", whereStuck(ctx, j))
		}, wait, time.Second).Should(Succeed())
		var pods corev1.PodList
		Expect(kube.List(ctx, &pods, client.InNamespace(fleetNS), client.MatchingLabels{"job-name": j.Name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(3))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(HavePrefix("w1-prov-h"))
		}
		Expect(copies(Default, ctx, j)).To(Equal([]string{"w1"}))
	})

	It("admits every Job of a burst the first time, one copy each, and runs them", func(ctx SpecContext) {
		var burst []*batchv1.Job
		for i := range 16 {
			j := fleetJob(fmt.Sprintf("burst-%02d", i), 1, "2", nil)
			Expect(hubKube.Create(ctx, j)).To(Succeed())
			burst = append(burst, j)
		}
		Eventually(func(g Gomega) {
			for _, j := range burst {
				var got batchv1.Job
				g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				g.Expect(complete(&got)).To(BeTrue(), "%s: %+v", j.Name, got.Status)
			}
		}, wait, time.Second).Should(Succeed())
		for _, j := range burst {
			wl := hubWorkload(Default, ctx, j)
			Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "%s: %+v", j.Name, wl.Status.Placement.Attempts)
			Expect(wl.Status.Placement.Attempts).To(HaveLen(1), j.Name)
		}
	})

	It("runs a Job created suspended (a Kueue manifest), takes the copy back when its Workload is deactivated or it is deleted, and dispatches it again on reactivation", func(ctx SpecContext) {
		j := fleetJob("suspend", 2, "1", map[string]string{kwokcluster.RunForAnnotation: "10m"})
		j.Spec.Suspend = ptr.To(true) // Strata's on the hub, as Kueue's
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		var at string
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(got.Status.Active).To(Equal(int32(2)), "the copy's pods run: %+v", got.Status)
			at = hubWorkload(g, ctx, j).Status.Placement.Cluster
		}, wait, time.Second).Should(Succeed())

		setActive := func(active bool) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				wl := hubWorkload(g, ctx, j)
				wl.Spec.Active = ptr.To(active)
				g.Expect(hubKube.Update(ctx, wl)).To(Succeed())
			}, wait, time.Second).Should(Succeed())
		}
		By("deactivating its hub Workload (spec.active: false), the user's hold")
		setActive(false)
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, j)).To(BeEmpty())
			var pods corev1.PodList
			g.Expect(workers[at].List(ctx, &pods, client.InNamespace(fleetNS), client.MatchingLabels{batchv1.JobNameLabel: j.Name})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "the copy's pods are gone from %s", at)
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(got.Status.Active).To(BeZero())
		}, wait, time.Second).Should(Succeed())

		By("reactivating it")
		setActive(true)
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(2)))
			g.Expect(copies(g, ctx, j)).To(HaveLen(1))
		}, wait, time.Second).Should(Succeed())

		By("deleting it on the hub")
		Expect(hubKube.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(copies(g, ctx, j)).To(BeEmpty())
		}, wait, time.Second).Should(Succeed())
	})
	It("lets a rack-preferred Job that no rack holds spill into the fewest racks of one block", func(ctx SpecContext) {
		j := fleetJob("spill", 12, "4", map[string]string{"kueue.x-k8s.io/podset-preferred-topology": rack})
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, a := admittedOn(ctx, j)
		Expect(at).To(Equal("w1"), "48 CPUs: only w1's block has them")
		Eventually(func(g Gomega) {
			g.Expect(podsPerRack(g, ctx, workers[at], a)).To(ConsistOf(int32(8), int32(4)), "a whole rack and the rest in the other")
		}).Should(Succeed())
	})

	It("places an unconstrained Job wherever capacity is, and runs it", func(ctx SpecContext) {
		j := fleetJob("anywhere", 10, "4", map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "true"})
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, a := admittedOn(ctx, j)
		Expect(at).To(Equal("w1"))
		Eventually(func(g Gomega) {
			var total int32
			for _, n := range podsPerRack(g, ctx, workers[at], a) {
				total += n
			}
			g.Expect(total).To(Equal(int32(10)))
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
	})

	It("resizes an elastic Job on the hub while it runs: the worker runs the pods added beside the first ones, none restarted, and the hub Job completes", func(ctx SpecContext) {
		j := fleetJob("elastic", 2, "1", map[string]string{kwokcluster.RunForAnnotation: "30s"})
		j.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, _ := admittedOn(ctx, j)
		w := workers[at]
		runningPods := func(g Gomega) map[types.UID]bool {
			var pods corev1.PodList
			g.Expect(w.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name})).To(Succeed())
			out := map[types.UID]bool{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
					out[p.UID] = true
				}
			}
			return out
		}
		var first map[types.UID]bool
		Eventually(func(g Gomega) {
			first = runningPods(g)
			g.Expect(first).To(HaveLen(2))
		}, wait, 200*time.Millisecond).Should(Succeed())

		By("grown to 4 pods on the hub: the copy on " + at + " runs two more, the first two untouched")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			got.Spec.Parallelism, got.Spec.Completions = ptr.To[int32](4), ptr.To[int32](4)
			g.Expect(hubKube.Update(ctx, &got)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			running := runningPods(g)
			g.Expect(running).To(HaveLen(4))
			for uid := range first {
				g.Expect(running).To(HaveKey(uid), "a first pod was restarted")
			}
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(4)))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadResized)).To(BeTrue(), "%+v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "dispatched again")
			g.Expect(copies(g, ctx, j)).To(Equal([]string{at}))
		}, wait, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
			g.Expect(got.Status.Succeeded).To(Equal(int32(4)))
		}, wait, time.Second).Should(Succeed())
	})

	It("fills fragmented capacity with an unconstrained Job: one pod in each node's last free CPU", func(ctx SpecContext) {
		By("taking 3 of the 4 CPUs of every w2 node with pods of another team")
		Expect(client.IgnoreAlreadyExists(w2Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other-team"}}))).To(Succeed())
		var nodes corev1.NodeList
		Expect(w2Kube.List(ctx, &nodes, client.MatchingLabels{"pool": fleetFlavor})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(8))
		for _, n := range nodes.Items {
			busy := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "busy-" + n.Name, Namespace: "other-team"},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "fake",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
			}
			Expect(w2Kube.Create(ctx, busy)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(w2Kube.Delete(ctx, busy, client.GracePeriodSeconds(0)))).To(Succeed())
			})
		}

		By("a hub queue that may use w2 only (clusterSelector)")
		Eventually(func(g Gomega) { // the hub writes its status meanwhile
			var wc strata.WorkerCluster
			g.Expect(hubKube.Get(ctx, client.ObjectKey{Name: "w2"}, &wc)).To(Succeed())
			wc.Labels = map[string]string{"shape": "fragmented"}
			g.Expect(hubKube.Update(ctx, &wc)).To(Succeed())
		}).Should(Succeed())
		cq := testutil.MakeClusterQueue("fragments").Flavor(fleetFlavor).Obj()
		cq.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"shape": "fragmented"}}
		Expect(hubKube.Create(ctx, cq)).To(Succeed())
		Expect(hubKube.Create(ctx, testutil.MakeLocalQueue("fragments", fleetNS, "fragments"))).To(Succeed())
		Expect(w2Kube.Create(ctx, testutil.MakeLocalQueue("fragments", fleetNS, fleetQueue))).To(Succeed())

		j := fleetJob("fragments", 8, "1", map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "true"})
		j.Labels[strata.QueueNameLabel] = "fragments"
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, a := admittedOn(ctx, j)
		Expect(at).To(Equal("w2"))
		ta, err := tas.Decode(a.PodSetAssignments[0].TopologyAssignment)
		Expect(err).NotTo(HaveOccurred())
		Expect(ta.Domains).To(HaveLen(8), "one pod on each node: no node has room for two")
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
	})

	It("keeps two-level slices whole: slices of 4 pods, each in one rack, all in one block", func(ctx SpecContext) {
		j := fleetJob("sliced", 8, "4", map[string]string{
			"kueue.x-k8s.io/podset-required-topology":       block,
			"kueue.x-k8s.io/podset-slice-required-topology": rack,
			"kueue.x-k8s.io/podset-slice-size":              "4",
		})
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, a := admittedOn(ctx, j)
		Eventually(func(g Gomega) {
			for r, n := range podsPerRack(g, ctx, workers[at], a) {
				g.Expect(n%4).To(BeZero(), "rack %s holds %d pods: a slice was split", r, n)
			}
		}).Should(Succeed())
	})

	It("replaces a node lost under a hub-dispatched Job on its worker; the hub sees the new assignment and the Job complete", func(ctx SpecContext) {
		// 2 pods a node: spare nodes stay in the rack on either worker.
		j := fleetJob("swap", 4, "2", map[string]string{"kueue.x-k8s.io/podset-required-topology": rack, kwokcluster.RunForAnnotation: "20s"})
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		at, _ := admittedOn(ctx, j)
		w := workers[at]
		var running []corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(w.List(ctx, &pods, client.InNamespace(fleetNS), client.MatchingLabels{batchv1.JobNameLabel: j.Name})).To(Succeed())
			running = nil
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running = append(running, p)
				}
			}
			g.Expect(running).To(HaveLen(4))
		}, wait, 200*time.Millisecond).Should(Succeed())
		failed := running[0].Spec.NodeName
		By(fmt.Sprintf("deleting node %s of %s under the running copy", failed, at))
		Expect(w.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: failed}})).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			ta, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
			g.Expect(err).NotTo(HaveOccurred())
			for _, d := range ta.Domains {
				g.Expect(d.Values[len(d.Values)-1]).NotTo(Equal(failed), "the hub mirrors the worker's new assignment")
			}
		}, wait, time.Second).Should(Succeed())
		By("deleting the lost node's pods, as the pod garbage collector does")
		for _, p := range running {
			if p.Spec.NodeName == failed {
				Expect(client.IgnoreNotFound(w.Delete(ctx, &p, client.GracePeriodSeconds(0)))).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "replaced on the worker, not dispatched again")
		}, 4*time.Minute, time.Second).Should(Succeed())
	})

	It("sends a Job only where its pods tolerate the nodes' taints; one that does not waits, and runs once the taint is gone", func(ctx SpecContext) {
		w1 := workers["w1"]
		taint := corev1.Taint{Key: "e2e.strata.dev/reserved", Value: "training", Effect: corev1.TaintEffectNoSchedule}
		setTaint := func(ctx SpecContext, on bool) {
			GinkgoHelper()
			var nodes corev1.NodeList
			Expect(w1.List(ctx, &nodes, client.MatchingLabels{"pool": fleetFlavor})).To(Succeed())
			for _, n := range nodes.Items {
				Eventually(func(g Gomega) {
					var node corev1.Node
					g.Expect(w1.Get(ctx, client.ObjectKeyFromObject(&n), &node)).To(Succeed())
					var taints []corev1.Taint
					for _, t := range node.Spec.Taints {
						if t.Key != taint.Key {
							taints = append(taints, t)
						}
					}
					if on {
						taints = append(taints, taint)
					}
					node.Spec.Taints = taints
					g.Expect(w1.Update(ctx, &node)).To(Succeed())
				}).Should(Succeed())
			}
		}
		By("tainting every node of w1, the only worker whose nodes hold a 6-CPU pod")
		setTaint(ctx, true)
		DeferCleanup(func(ctx SpecContext) { setTaint(ctx, false) })
		var generation int64
		Eventually(func(g Gomega) {
			var cs strata.CapacitySummary
			g.Expect(w1.Get(ctx, client.ObjectKey{Name: fleetFlavor}, &cs)).To(Succeed())
			g.Expect(cs.Status.TaintSets).To(Equal([]strata.TaintSet{{Taints: []corev1.Taint{taint}}}))
			// Every node's: a summary published while the nodes were being
			// tainted one by one has some untainted still.
			g.Expect(cs.Status.Domains).NotTo(BeEmpty())
			for _, d := range cs.Status.Domains {
				g.Expect(d.FreeTaints).To(HaveLen(len(d.Free)/2), "domain %v", d.Values)
				g.Expect(d.FreeTaints).To(HaveEach(int32(1)), "domain %v", d.Values)
			}
			generation = cs.Status.SummaryGeneration
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var wc strata.WorkerCluster
			g.Expect(hubKube.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			g.Expect(wc.Status.Summaries).To(ContainElement(HaveField("SummaryGeneration", BeNumerically(">=", generation))))
		}, wait, time.Second).Should(Succeed())

		plain := fleetJob("untolerated", 1, "6", nil)
		tolerating := fleetJob("tolerating", 2, "6", nil)
		tolerating.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists}}
		Expect(hubKube.Create(ctx, plain)).To(Succeed())
		Expect(hubKube.Create(ctx, tolerating)).To(Succeed())
		at, _ := admittedOn(ctx, tolerating)
		Expect(at).To(Equal("w1"))
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(tolerating), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
			wl := hubWorkload(g, ctx, plain)
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("untolerated taints"))
			g.Expect(copies(g, ctx, plain)).To(BeEmpty(), "never sent where its pods cannot go")
		}, wait, time.Second).Should(Succeed())

		By("removing the taint: the waiting Job goes to w1 and runs")
		setTaint(ctx, false)
		at, _ = admittedOn(ctx, plain)
		Expect(at).To(Equal("w1"))
		Eventually(func(g Gomega) {
			var got batchv1.Job
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(plain), &got)).To(Succeed())
			g.Expect(complete(&got)).To(BeTrue(), "hub job status: %+v", got.Status)
			g.Expect(hubWorkload(g, ctx, plain).Status.Placement.DispatchGeneration).To(Equal(int64(1)))
		}, wait, time.Second).Should(Succeed())
	})

	It("dispatches KEP-2724's two-level JobSet to the worker whose hosts hold its Jobs; JobSet's controller runs it there; the hub JobSet shows it complete", Label("jobset"), func(ctx SpecContext) {
		js := twoLevelJobSet("two-level", fleetNS, fleetQueue)
		Expect(hubKube.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(jobSetCompleted(&got)).To(BeTrue(), "hub jobset status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
		var wl strata.Workload
		Expect(hubKube.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
		Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "only w1's hosts hold 4 pods of 2 CPUs")
		Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "admitted the first time")
		expectJobsOnOneHostEach(ctx, kube, js)

		By("the hub ran nothing itself: no Jobs and no pods of the JobSet there")
		var hubJobs batchv1.JobList
		Expect(hubKube.List(ctx, &hubJobs, client.InNamespace(fleetNS), client.MatchingLabels{jobsetapi.JobSetNameKey: js.Name})).To(Succeed())
		Expect(hubJobs.Items).To(BeEmpty())
	})

	It("dispatches KEP-2724's MPIJob with runLauncherAsWorker to the worker that serves MPIJobs; the MPI operator runs it there, launcher and workers in one rack; the hub MPIJob shows it succeeded", Label("mpijob"), func(ctx SpecContext) {
		if !mpiOperator {
			Skip("the provider does not run the MPI operator")
		}
		j := piMPIJob("pi", fleetNS, fleetQueue, "5s")
		Expect(hubKube.Create(ctx, j)).To(Succeed())
		var wl strata.Workload
		Eventually(func(g Gomega) {
			g.Expect(hubKube.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: mpijob.Kind.WorkloadName(j.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}, wait, time.Second).Should(Succeed())
		Expect(wl.Status.Placement.Cluster).To(Equal("w2"), "w1 does not serve MPIJobs")
		Expect(wl.Status.Placement.Attempts[0].Message).To(ContainSubstring("w1/fleet: the worker does not serve mpijobs.kubeflow.org"))
		By("launcher and workers in one rack of w2")
		racks := map[string]bool{}
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			for r := range podsPerRack(Default, ctx, w2Kube, &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{psa}}) {
				racks[r] = true
			}
		}
		Expect(racks).To(HaveLen(1))
		By("the MPI operator runs it on w2: the launcher's pod completes, the MPIJob succeeds, and so does the hub's")
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			done, how := mpijob.Adapt(&got).Finished()
			g.Expect(done).To(BeTrue(), "conditions %+v; on w2: %s", got.Status.Conditions, mpiJobOnWorker(ctx, w2Kube, j))
			g.Expect(how).To(Equal("Succeeded"))
		}, 3*time.Minute, 2*time.Second).Should(Succeed())
	})

	It("dispatches KEP-2724's LeaderWorkerSet whole to the worker that runs LeaderWorkerSets; each group's leader and workers run on one host there; the hub's set shows them ready", Label("lws"), func(ctx SpecContext) {
		if !lwsController {
			Skip("the provider does not run the LeaderWorkerSet controller")
		}
		l := kepLWS("infer", fleetNS, fleetQueue, 2)
		Expect(hubKube.Create(ctx, l)).To(Succeed())
		By("the hub's admission policy gates the set's templates: nothing could run it on the hub")
		var onHub lwsapi.LeaderWorkerSet
		Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(l), &onHub)).To(Succeed())
		Expect(onHub.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates).To(ContainElement(HaveField("Name", strata.TopologySchedulingGate)))
		var wl strata.Workload
		Eventually(func(g Gomega) {
			g.Expect(hubKube.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: lwsjobs.SetKind.WorkloadName(l.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}, wait, time.Second).Should(Succeed())
		Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "w2 does not serve LeaderWorkerSets")
		Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "admitted the first time")
		By("the LeaderWorkerSet controller runs it on w1, each group on one host, and the hub's set shows both groups ready")
		Eventually(func(g Gomega) {
			groupsOnOneHostEach(g, ctx, kube, l)
			var got lwsapi.LeaderWorkerSet
			g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)), "hub status: %+v", got.Status)
		}, 3*time.Minute, 2*time.Second).Should(Succeed())
		By("no pods of it on the hub; deleting the hub's set removes the copy on w1")
		var hubPods corev1.PodList
		Expect(hubKube.List(ctx, &hubPods, client.InNamespace(fleetNS), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
		Expect(hubPods.Items).To(BeEmpty())
		Expect(hubKube.Delete(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			err := kube.Get(ctx, client.ObjectKeyFromObject(l), &lwsapi.LeaderWorkerSet{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the copy on w1: %v", err)
		}, wait, time.Second).Should(Succeed())
	})

	It("loses nothing and dispatches nothing twice when the hub is killed (SIGKILL) in the middle of a burst of 500 Jobs", Label("faults"), func(ctx SpecContext) {
		hubProc := proc("strata-hub-strata-e2e-hub")
		if hubProc == nil {
			Skip("kills the hub's process: the kwok provider's")
		}
		const n, killAt = 500, 150
		jobs := make([]*batchv1.Job, n)
		var killed time.Time
		burst := time.Now()
		for i := range jobs {
			jobs[i] = fleetJob(fmt.Sprintf("burst-%03d", i), 1, "100m", nil)
			Expect(hubKube.Create(ctx, jobs[i])).To(Succeed())
			if i == killAt {
				By(fmt.Sprintf("kill -9 of strata-hub after %d of %d Jobs", killAt+1, n))
				hubProc.Kill()
				killed = time.Now()
			}
		}
		By("restarting strata-hub once all are submitted")
		hubProc.Restart()
		restarted := time.Now()
		var completeAfter time.Duration
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				var got batchv1.Job
				g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				g.Expect(complete(&got)).To(BeTrue(), func() string { return j.Name + ": " + whereStuck(ctx, j) })
				g.Expect(got.Status.Succeeded).To(Equal(int32(1)), j.Name)
			}
			completeAfter = time.Since(restarted)
		}, 5*time.Minute, 2*time.Second).Should(Succeed())
		By("no hub Workload says it still waits for its worker")
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				c := meta.FindStatusCondition(hubWorkload(g, ctx, j).Status.Conditions, strata.WorkloadAdmitted)
				g.Expect(c).NotTo(BeNil(), j.Name)
				g.Expect(c.Reason).NotTo(Equal(dispatch.ReasonDispatched), "%s: %s", j.Name, c.Message)
			}
		}, time.Minute, 2*time.Second).Should(Succeed())
		twice := 0
		for _, j := range jobs {
			if g := hubWorkload(Default, ctx, j).Status.Placement.DispatchGeneration; g != 1 {
				twice++
			}
		}
		GinkgoWriter.Printf("hub killed (SIGKILL) %s into a burst of %d Jobs, down while %d more were submitted, restarted after %s: all %d complete %s after the restart, %d dispatched more than once\n",
			killed.Sub(burst).Round(100*time.Millisecond), n, n-killAt-1, restarted.Sub(killed).Round(100*time.Millisecond),
			n, completeAfter.Round(100*time.Millisecond), twice)
		Expect(twice).To(BeZero(), "a Job dispatched twice")
	})

	It("admits nothing twice and over-fills no node when a worker's agent is killed (SIGKILL) in the middle of a burst", Label("faults"), func(ctx SpecContext) {
		agent := proc("strata-agent-" + clusterName)
		if agent == nil {
			Skip("kills w1's agent process: the kwok provider's")
		}
		const n, killAt = 150, 40
		s := watchAdmissions(ctx, workers)
		jobs := make([]*batchv1.Job, n)
		var killed time.Time
		for i := range jobs {
			jobs[i] = fleetJob(fmt.Sprintf("agentkill-%03d", i), 2, "2", map[string]string{kwokcluster.RunForAnnotation: "4s"})
			Expect(hubKube.Create(ctx, jobs[i])).To(Succeed())
			if i == killAt {
				By(fmt.Sprintf("kill -9 of w1's strata-agent after %d of %d Jobs", killAt+1, n))
				agent.Kill()
				killed = time.Now()
			}
		}
		By("restarting w1's strata-agent once all are submitted")
		agent.Restart()
		restarted := time.Now()
		var completeAfter time.Duration
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				var got batchv1.Job
				g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				g.Expect(complete(&got)).To(BeTrue(), j.Name)
				g.Expect(got.Status.Succeeded).To(Equal(int32(2)), j.Name)
			}
			completeAfter = time.Since(restarted)
		}, 5*time.Minute, 2*time.Second).Should(Succeed())
		r := s.stop()
		twice := 0
		for _, j := range jobs {
			if hubWorkload(Default, ctx, j).Status.Placement.DispatchGeneration != 1 {
				twice++
			}
		}
		GinkgoWriter.Printf("w1's agent killed (SIGKILL) after %d of %d Jobs (2 pods of 2 CPUs, 4 s each), down %s: all complete %s after its restart; %d samples of both workers' admissions, %d admissions changed while admitted, %d samples with a node assigned more CPU than it has (worst: %s); %d dispatched more than once\n",
			killAt+1, n, restarted.Sub(killed).Round(100*time.Millisecond), completeAfter.Round(100*time.Millisecond), r.samples, r.readmitted, r.overfilled, r.worst, twice)
		Expect(r.samples).To(BeNumerically(">", 10))
		Expect(r.readmitted).To(BeZero(), "admitted twice")
		Expect(r.overfilled).To(BeZero(), "over-filled: %s", r.worst)
	})

	It("loses nothing when a worker's control plane restarts (etcd data kept) while the hub dispatches to it", Label("faults"), func(ctx SpecContext) {
		const n, restartAt = 150, 30
		jobs := make([]*batchv1.Job, n)
		done := make(chan time.Duration, 1)
		for i := range jobs {
			jobs[i] = fleetJob(fmt.Sprintf("cprestart-%03d", i), 1, "1", map[string]string{kwokcluster.RunForAnnotation: "2s"})
			Expect(hubKube.Create(ctx, jobs[i])).To(Succeed())
			if i == restartAt {
				By(fmt.Sprintf("restarting w2's control plane after %d of %d Jobs, while the rest are submitted", restartAt+1, n))
				go func() {
					defer GinkgoRecover()
					start := time.Now()
					sent := false
					defer func() {
						if !sent {
							done <- -2 // the restart failed (recorded by GinkgoRecover)
						}
					}()
					if !w2Cluster.RestartControlPlane() {
						sent = true
						done <- -1
						return
					}
					sent = true
					done <- time.Since(start)
				}()
			}
		}
		took := <-done
		switch {
		case took == -2:
			return // the restart failed; GinkgoRecover recorded why
		case took < 0:
			Skip("the provider cannot restart a control plane alone")
		}
		restarted := time.Now()
		var completeAfter time.Duration
		touched := 0
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				var got batchv1.Job
				g.Expect(hubKube.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				if !complete(&got) {
					touched += nudgeUnstarted(ctx, w2Kube, j)
				}
				g.Expect(complete(&got)).To(BeTrue(), func() string { return j.Name + ": " + whereStuck(ctx, j) })
				g.Expect(got.Status.Succeeded).To(Equal(int32(1)), j.Name)
			}
			completeAfter = time.Since(restarted)
		}, 5*time.Minute, 2*time.Second).Should(Succeed())
		twice, onW2 := 0, 0
		for _, j := range jobs {
			p := hubWorkload(Default, ctx, j).Status.Placement
			Expect(p).NotTo(BeNil(), "%s finished: its hub Workload says where it ran", j.Name)
			if p.DispatchGeneration != 1 {
				twice++
			}
			for _, a := range p.Attempts {
				if a.Cluster == "w2" && a.Result == strata.PlacementAdmitted {
					onW2++
					break
				}
			}
			Expect(len(copies(Default, ctx, j))).To(BeNumerically("<=", 1), j.Name)
		}
		GinkgoWriter.Printf("w2's control plane stopped and started again (%s) after %d of %d one-pod Jobs: all complete %s after it was back, %d admitted on w2, %d dispatched more than once; %d pods kwok missed touched\n",
			took.Round(100*time.Millisecond), restartAt+1, n, completeAfter.Round(100*time.Millisecond), onW2, twice, touched)
	})
})
