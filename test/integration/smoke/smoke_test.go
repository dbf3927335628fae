package smoke

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = strata.HostnameLabel
)

// rackAssignment is a valid two-domain assignment in the compact format.
func rackAssignment() *strata.TopologyAssignment {
	return &strata.TopologyAssignment{
		Levels: []string{block, rack},
		Slices: []strata.TopologyAssignmentSlice{{
			DomainCount: 2,
			ValuesPerLevel: []strata.TopologyAssignmentSliceLevelValues{
				{Universal: ptr.To("block-1")},
				{Individual: &strata.TopologyAssignmentSliceLevelIndividualValues{Prefix: ptr.To("rack-"), Roots: []string{"1", "2"}}},
			},
			PodCounts: strata.TopologyAssignmentSlicePodCounts{Individual: []int32{4, 2}},
		}},
	}
}

func admitted(ta *strata.TopologyAssignment) *strata.Admission {
	return &strata.Admission{
		ClusterQueue: "default",
		PodSetAssignments: []strata.PodSetAssignment{{
			Name: "main", Flavor: "tas", Count: 6, TopologyAssignment: ta,
		}},
	}
}

var _ = Describe("CRDs", Label("smoke"), func() {
	It("installs the hub's kinds on the hub and the agent's on the workers", func(ctx SpecContext) {
		for _, c := range clusters.Items {
			err := c.Client.List(ctx, &strata.WorkerClusterList{})
			if c.Role == framework.Hub {
				Expect(err).NotTo(HaveOccurred(), c.Name)
			} else {
				Expect(meta.IsNoMatchError(err)).To(BeTrue(), "%s: want no WorkerCluster kind, got %v", c.Name, err)
			}
			Expect(c.Client.List(ctx, &strata.CapacitySummaryList{})).To(Succeed(), c.Name)
		}
	})

	It("creates and reads back every kind on every cluster", func(ctx SpecContext) {
		for _, c := range clusters.Items {
			By("creating the admin kinds on " + c.Name)
			objs := []client.Object{
				testutil.MakeTopology("three-level", block, rack, host).Obj(),
				testutil.MakeResourceFlavor("tas").NodeLabel("pool", "tas").TopologyName("three-level").Obj(),
				testutil.MakeClusterQueue("default").Flavor("tas", "cpu", "100").Obj(),
			}
			if c.Role == framework.Hub {
				objs = append(objs, testutil.MakeWorkerCluster("worker-a").KubeConfigSecret("strata-system", "worker-a").Obj())
			}
			for _, o := range objs {
				Expect(c.Client.Create(ctx, o)).To(Succeed(), "%s %T", c.Name, o)
			}

			By("admitting a workload with a compact topology assignment on " + c.Name)
			wl := testutil.MakeWorkload("job-a", "default").PodSets(
				testutil.MakePodSet("main", 6, "cpu", "1").Required(rack).Obj()).Obj()
			Expect(c.Client.Create(ctx, wl)).To(Succeed())
			wl.Status.Admission = admitted(rackAssignment())
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
				Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted on tas",
			})
			Expect(c.Client.Status().Update(ctx, wl)).To(Succeed())
			var got strata.Workload
			Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(wl), &got)).To(Succeed())
			Expect(cmp.Diff(rackAssignment(), got.Status.Admission.PodSetAssignments[0].TopologyAssignment)).To(BeEmpty())
			Expect(got.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests.Cpu().String()).To(Equal("1"))

			By("publishing a capacity summary on " + c.Name)
			cs := testutil.MakeCapacitySummary("tas").Obj()
			Expect(c.Client.Create(ctx, cs)).To(Succeed())
			cs.Status = strata.CapacitySummaryStatus{
				SummaryGeneration: 1,
				ObservedTime:      ptr.To(metav1.Now()),
				Levels:            []string{block, rack, host},
				LeafLevels:        2,
				Resources:         []corev1.ResourceName{"cpu", "pods"},
				Vectors:           []strata.ResourceVector{{8000, 110000}},
				Domains: []strata.SummaryDomain{{
					Values:   []string{"block-1", "rack-1"},
					Free:     []int32{0, 16},
					Capacity: []int32{0, 16},
				}},
				Nodes: 16,
			}
			Expect(c.Client.Status().Update(ctx, cs)).To(Succeed())
		}
	})
})

// statusUpdate creates wl and then writes its admission with ta.
func admitWith(ta *strata.TopologyAssignment) func(SpecContext, client.Client) error {
	return func(ctx SpecContext, c client.Client) error {
		wl := testutil.MakeWorkload("bad-assignment", "default").PodSets(testutil.MakePodSet("main", 6).Obj()).Obj()
		if err := c.Create(ctx, wl); err != nil {
			return err
		}
		DeferCleanup(func(ctx SpecContext) { Expect(c.Delete(ctx, wl)).To(Succeed()) })
		wl.Status.Admission = admitted(ta)
		return c.Status().Update(ctx, wl)
	}
}

func create(o client.Object) func(SpecContext, client.Client) error {
	return func(ctx SpecContext, c client.Client) error { return c.Create(ctx, o) }
}

func workloadWith(ps strata.PodSet) func(SpecContext, client.Client) error {
	return create(testutil.MakeWorkload("bad-request", "default").PodSets(ps).Obj())
}

// mutateAssignment returns a valid assignment changed by f.
func mutateAssignment(f func(*strata.TopologyAssignment)) *strata.TopologyAssignment {
	ta := rackAssignment()
	f(ta)
	return ta
}

var _ = DescribeTable("CEL and schema validation rejects",
	func(ctx SpecContext, op func(SpecContext, client.Client) error, want string) {
		c := clusters.Get("hub").Client
		err := op(ctx, c)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(want))
	},
	Entry("a Topology with 17 levels", create(testutil.MakeTopology("deep",
		"l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9", "l10", "l11", "l12", "l13", "l14", "l15", "l16", "l17").Obj()),
		"spec.levels: Too many: 17: must have at most 16 items"),
	Entry("a Topology with a repeated level", create(testutil.MakeTopology("dup", rack, rack).Obj()),
		"each nodeLabel may appear in only one level"),
	Entry("a Topology with the host level above a rack", create(testutil.MakeTopology("host-first", host, rack).Obj()),
		"kubernetes.io/hostname can only be the last (lowest) level"),
	Entry("a Topology level that is not a label key", create(testutil.MakeTopology("bad-key", "no spaces allowed").Obj()),
		"spec.levels[0].nodeLabel: Invalid value"),
	Entry("a Topology level whose name part is too long", create(testutil.MakeTopology("long-key", "example.com/"+strings.Repeat("x", 64)).Obj()),
		"the name part of a label key (after the last '/') must be at most 63 characters"),
	Entry("a change of a Topology's levels without the host as the lowest", func(ctx SpecContext, c client.Client) error {
		t := testutil.MakeTopology("immutable", block, rack).Obj()
		if err := c.Create(ctx, t); err != nil {
			return err
		}
		t.Spec.Levels = t.Spec.Levels[:1]
		return c.Update(ctx, t)
	}, "levels may change only while kubernetes.io/hostname is the lowest level, before and after; create a new Topology instead"),
	Entry("a change of a Topology's levels that drops the host level", func(ctx SpecContext, c client.Client) error {
		t := testutil.MakeTopology("drops-host", block, rack, host).Obj()
		if err := c.Create(ctx, t); err != nil {
			return err
		}
		t.Spec.Levels = t.Spec.Levels[:2]
		return c.Update(ctx, t)
	}, "levels may change only while kubernetes.io/hostname is the lowest level, before and after; create a new Topology instead"),
	Entry("a topology-aware ResourceFlavor without node labels", create(testutil.MakeResourceFlavor("no-labels").TopologyName("t").Obj()),
		"nodeLabels must have at least one entry when topologyName is set"),
	Entry("a ClusterQueue listing a flavor twice", create(testutil.MakeClusterQueue("dup-flavor").Flavor("a").Flavor("a").Obj()),
		"each flavor may appear only once in flavors"),
	Entry("a ClusterQueue with an unknown queueing strategy", create(func() *strata.ClusterQueue {
		cq := testutil.MakeClusterQueue("lifo").Flavor("a").Obj()
		cq.Spec.QueueingStrategy = "LIFO"
		return cq
	}()), `spec.queueingStrategy: Unsupported value: "LIFO"`),
	Entry("a pod set both requiring and preferring a level",
		workloadWith(testutil.MakePodSet("main", 4).Required(rack).Preferred(block).Obj()),
		"required, preferred and unconstrained are mutually exclusive"),
	Entry("a slice size without a slice level", workloadWith(func() strata.PodSet {
		ps := testutil.MakePodSet("main", 8).Required(block).Obj()
		ps.TopologyRequest.PodSetSliceSize = ptr.To[int32](4)
		return ps
	}()), "podSetSliceRequiredTopology and podSetSliceSize must be set together"),
	Entry("slice layers whose sizes do not divide",
		workloadWith(testutil.MakePodSet("main", 64).SliceLayer(block, 32).SliceLayer(rack, 12).Obj()),
		"the size of layer 0 must be a multiple of the size of layer 1"),
	Entry("slice layers combined with a two-level slice",
		workloadWith(testutil.MakePodSet("main", 64).Slice(host, 4).SliceLayer(block, 32).Obj()),
		"podSetSliceRequiredTopologyConstraints cannot be combined with podSetSliceRequiredTopology and podSetSliceSize"),
	Entry("four slice layers",
		workloadWith(testutil.MakePodSet("main", 64).SliceLayer("a", 64).SliceLayer("b", 32).SliceLayer("c", 16).SliceLayer("d", 8).Obj()),
		"Too many: 4: must have at most 3 items"),
	Entry("a TopologyAssignment slice whose roots length differs from domainCount",
		admitWith(mutateAssignment(func(ta *strata.TopologyAssignment) { ta.Slices[0].DomainCount = 3 })),
		"valuesPerLevel[].individual.roots must have exactly domainCount entries"),
	Entry("a TopologyAssignment slice whose pod counts length differs from domainCount",
		admitWith(mutateAssignment(func(ta *strata.TopologyAssignment) { ta.Slices[0].PodCounts.Individual = []int32{6} })),
		"podCounts.individual must have exactly domainCount entries"),
	Entry("a TopologyAssignment level with both universal and individual values",
		admitWith(mutateAssignment(func(ta *strata.TopologyAssignment) { ta.Slices[0].ValuesPerLevel[1].Universal = ptr.To("rack-1") })),
		"exactly one of universal and individual must be set"),
	Entry("a TopologyAssignment slice with fewer value lists than levels",
		admitWith(mutateAssignment(func(ta *strata.TopologyAssignment) { ta.Levels = append(ta.Levels, host) })),
		"every slice must have one valuesPerLevel entry per level"),
	Entry("a TopologyAssignment pod count of zero",
		admitWith(mutateAssignment(func(ta *strata.TopologyAssignment) { ta.Slices[0].PodCounts.Individual = []int32{6, 0} })),
		"should be greater than or equal to 1"),
	Entry("a WorkerCluster with two sources",
		create(testutil.MakeWorkerCluster("two").KubeConfigSecret("ns", "s").ManagedCluster("w").Obj()),
		"exactly one of kubeConfigSecretRef, clusterProfileRef and managedClusterName must be set"),
	Entry("a WorkerCluster with no source", create(testutil.MakeWorkerCluster("none").Obj()),
		"exactly one of kubeConfigSecretRef, clusterProfileRef and managedClusterName must be set"),
	Entry("a change of a CapacitySummary's flavor", func(ctx SpecContext, c client.Client) error {
		cs := testutil.MakeCapacitySummary("moving").Obj()
		if err := c.Create(ctx, cs); err != nil {
			return err
		}
		cs.Spec.Flavor = "elsewhere"
		return c.Update(ctx, cs)
	}, "flavor is immutable"),
	Label("smoke"),
)

// kubectl runs the kubectl built by hack/k8s-binaries.sh against cluster c.
func kubectl(c *framework.Cluster, args ...string) (string, error) {
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// expectation reads the "# expect: <message>" line of an invalid sample.
func expectation(path string) string {
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "# expect: "); ok {
			return m
		}
	}
	Fail(path + " has no '# expect: <message>' line")
	return ""
}

var _ = Describe("The samples in docs/samples", Label("smoke", "samples"), func() {
	samples := filepath.Join(framework.RepoRoot(), "docs", "samples")

	It("apply cleanly with kubectl, the hub's kinds on the hub and the agent's on the workers, and the reference objects are valid", func() {
		files, err := filepath.Glob(filepath.Join(samples, "valid", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		// The reference objects (what Strata writes) are valid too; they are
		// applied here to check them, not meant for a real cluster.
		reference, err := filepath.Glob(filepath.Join(samples, "reference", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		files = append(files, reference...)
		for _, c := range clusters.Items {
			var args []string
			for _, f := range files {
				if c.Role == framework.Worker && strings.HasSuffix(f, "workercluster.yaml") {
					continue
				}
				args = append(args, "-f", f)
			}
			out, err := kubectl(c, append([]string{"apply"}, args...)...)
			Expect(err).NotTo(HaveOccurred(), "%s: %s", c.Name, out)
			Expect(out).To(ContainSubstring("workload.strata.dev/job-llm-pretrain created"), c.Name)
			Expect(out).To(ContainSubstring("jobset.jobset.x-k8s.io/two-level created"), c.Name)
			if c.Role == framework.Hub {
				Expect(out).To(ContainSubstring("workercluster.strata.dev/worker-1 created"))
			}
		}
	})

	It("are rejected with a clear message when invalid", func() {
		files, err := filepath.Glob(filepath.Join(samples, "invalid", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			out, err := kubectl(clusters.Get("hub"), "apply", "-f", f)
			Expect(err).To(HaveOccurred(), "%s was accepted:\n%s", f, out)
			Expect(out).To(ContainSubstring(expectation(f)), f)
		}
	})
})
