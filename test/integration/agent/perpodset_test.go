package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's flavor assignment unit is the pod set, or its PodSet group
// (KEP-2724): a JobSet whose ReplicatedJobs fit on different flavors, and
// not both on one, runs each on its own.
var _ = Describe("Per-pod-set flavors", Ordered, Label("agent", "flavors"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("pps-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("pps-small").NodeLabel("pool", "pps-small").TopologyName("pps-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("pps-large").NodeLabel("pool", "pps-large").TopologyName("pps-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("pps-q").Flavor("pps-small", "cpu", "64").Flavor("pps-large", "cpu", "64").Obj())).To(Succeed())
		createPoolNode(ctx, "pps-small", "pps-s1", "b1", "r1", "4")
		createPoolNode(ctx, "pps-large", "pps-l1", "b2", "r2", "8")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "pps-q")
	})

	It("admits each ReplicatedJob of a JobSet on its own flavor and starts its pods on that flavor's nodes", func(ctx SpecContext) {
		rackOf := map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}
		driver := testutil.MakeJob("driver", "").Parallelism(3).Completions(3).Indexed().Image("fake").Request("cpu", "1").PodAnnotations(rackOf).Obj()
		workers := testutil.MakeJob("workers", "").Parallelism(3).Completions(3).Indexed().Image("fake").Request("cpu", "1").PodAnnotations(rackOf).Obj()
		js := testutil.MakeJobSet("two-flavors", ns).Queue("pps-q").ReplicatedJob(1, driver).ReplicatedJob(1, workers).Obj()
		Expect(worker.Client.Create(ctx, js)).To(Succeed())

		By("the driver on the first flavor, the workers on the second: all six do not fit on either alone in one rack with the driver")
		Eventually(func(g Gomega) {
			wl := jobSetWorkload(g, ctx, js)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			flavors := map[string]string{}
			hosts := map[string][]string{}
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				flavors[psa.Name] = psa.Flavor
				a, err := tas.Decode(psa.TopologyAssignment)
				g.Expect(err).NotTo(HaveOccurred())
				for _, d := range a.Domains {
					hosts[psa.Name] = append(hosts[psa.Name], d.Values[len(d.Values)-1])
				}
			}
			g.Expect(flavors).To(Equal(map[string]string{"driver": "pps-small", "workers": "pps-large"}))
			g.Expect(hosts).To(Equal(map[string][]string{"driver": {"pps-s1"}, "workers": {"pps-l1"}}))
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c.Message).To(Equal("admitted by ClusterQueue pps-q on flavors pps-small (pod set driver), pps-large (pod set workers)"))
		}, timeout).Should(Succeed())

		By("each ReplicatedJob's pod template selects its own flavor's nodes")
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(BeFalse(), "started")
			pools := map[string]string{}
			for _, rj := range got.Spec.ReplicatedJobs {
				pools[rj.Name] = rj.Template.Spec.Template.Spec.NodeSelector["pool"]
			}
			g.Expect(pools).To(Equal(map[string]string{"driver": "pps-small", "workers": "pps-large"}))
		}, timeout).Should(Succeed())

		By("the capacity each pod set holds is taken on its own flavor: 6 pods in one rack fit on neither, 5 on the second")
		six := newJob(ns, "pps-q", 6, rackOf)
		Expect(worker.Client.Create(ctx, six)).To(Succeed())
		expectWaiting(ctx, six, "Pending", "flavor pps-large: rack required: the best rack fits 5 of 6 pods")
		Expect(worker.Client.Delete(ctx, six, client.PropagationPolicy("Background"))).To(Succeed())
		five := newJob(ns, "pps-q", 5, rackOf)
		Expect(worker.Client.Create(ctx, five)).To(Succeed())
		Eventually(func(g Gomega) {
			_, admitted := admittedCondition(g, ctx, five)
			g.Expect(admitted).To(BeTrue())
		}, timeout).Should(Succeed())
	})
})
