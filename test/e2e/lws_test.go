package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	lwsjobs "strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

// LeaderWorkerSets on the suite's first worker: the LeaderWorkerSet CRDs
// (from the module cache, at the version go.mod requires) and the
// controller built from the module proxy by hack/k8s-binaries.sh
// (bin/k8s/lws), run as a process with its webhooks served on 127.0.0.1.

// installLWSCRD applies the LeaderWorkerSet CRDs (the controller watches
// DisaggregatedSets too) and waits until they are served.
func installLWSCRD(c cluster) {
	GinkgoHelper()
	dir, err := framework.LeaderWorkerSetModuleDir()
	Expect(err).NotTo(HaveOccurred())
	var paths []string
	for _, crd := range []string{"leaderworkerset.x-k8s.io_leaderworkersets.yaml", "disaggregatedset.x-k8s.io_disaggregatedsets.yaml"} {
		paths = append(paths, filepath.Join(dir, "config", "crd", "bases", crd))
	}
	installCRDs(c, "the LeaderWorkerSet CRDs", paths, &lwsapi.LeaderWorkerSetList{})
}

// runLWSController runs the LeaderWorkerSet controller for a kwok cluster
// and waits until its defaulting webhook answers.
func runLWSController(c cluster) {
	GinkgoHelper()
	By("running the LeaderWorkerSet controller for " + c.Name())
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	_, portText, err := net.SplitHostPort(freeAddress())
	Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(portText)
	Expect(err).NotTo(HaveOccurred())
	k := adminClient(c)
	config, err := kwokcluster.PrepareLWSController(context.Background(), k, filepath.Join(tmp, c.Name()+"-lws"), port)
	Expect(err).NotTo(HaveOccurred())
	start("lws-"+c.Name(), filepath.Join(bin, "lws"), "--kubeconfig", c.Kubeconfig(), "--config", config)
	Eventually(func(g Gomega) {
		// A Go client sends the enum startupPolicy even when empty, which
		// the schema refuses: set, as by every Go client.
		l := &lwsapi.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
			Spec: lwsapi.LeaderWorkerSetSpec{StartupPolicy: lwsapi.LeaderCreatedStartupPolicy, LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "fake"}}}}}}}
		g.Expect(k.Create(context.Background(), l, client.DryRunAll)).To(Succeed())
		g.Expect(l.Spec.RolloutStrategy.RollingUpdateConfiguration).NotTo(BeNil(), "the LeaderWorkerSet defaulting webhook fills in the rollout strategy")
	}, wait, time.Second).Should(Succeed())
}

// kepLWS is KEP-2724's "Co-locate Leader with Workers" example: replicas
// groups of a leader and two workers, each group on one host.
func kepLWS(name, namespace, queue string, replicas int32) *lwsapi.LeaderWorkerSet {
	ann := map[string]string{"kueue.x-k8s.io/podset-required-topology": host, "kueue.x-k8s.io/podset-group-name": "lws-group"}
	return testutil.MakeLeaderWorkerSet(name, namespace).Queue(queue).Replicas(replicas).Size(3).Defaulted().Request("cpu", "2").
		LeaderAnnotations(ann).WorkerAnnotations(ann).Obj()
}

// groupsOnOneHostEach checks that set l of KEP-2724's example (groups of
// 3) runs on cluster k with each group's pods on a host of its own, each
// pod with its group's Workload label.
func groupsOnOneHostEach(g Gomega, ctx context.Context, k client.Client, l *lwsapi.LeaderWorkerSet) {
	var pods corev1.PodList
	g.Expect(k.List(ctx, &pods, client.InNamespace(l.Namespace), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(3 * int(lwsjobs.Replicas(l))))
	nodes := map[string]map[string]bool{} // group -> nodes
	for _, p := range pods.Items {
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
		g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
		group := p.Labels[lwsjobs.GroupIndexLabel]
		if nodes[group] == nil {
			nodes[group] = map[string]bool{}
		}
		nodes[group][p.Spec.NodeName] = true
		index, err := strconv.Atoi(group)
		g.Expect(err).NotTo(HaveOccurred(), "pod %s: group index %q", p.Name, group)
		g.Expect(p.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, lwsjobs.GroupWorkloadName(l.Name, int32(index))))
	}
	g.Expect(nodes).To(HaveLen(2))
	g.Expect(nodes["0"]).To(HaveLen(1), "group 0 ran on %v", nodes["0"])
	g.Expect(nodes["1"]).To(HaveLen(1), "group 1 ran on %v", nodes["1"])
	g.Expect(nodes["0"]).NotTo(Equal(nodes["1"]))
}

var _ = Describe("LeaderWorkerSets on a kwok worker", Ordered, Label("e2e", "lws"), func() {
	BeforeAll(func(ctx SpecContext) {
		if !lwsController {
			Skip("the provider does not run the LeaderWorkerSet controller")
		}
		By("two racks of two fake nodes of 6 CPUs: a group of three 2-CPU pods fills a host")
		for r := range 2 {
			for h := range 2 {
				name := fmt.Sprintf("lws-r%d-h%d", r, h)
				Expect(kube.Create(ctx, &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
						"pool": "lws", block: "b1", rack: fmt.Sprintf("lws-rack-%d", r), host: name, "type": "kwok",
					}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
					Status: corev1.NodeStatus{
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourcePods: resource.MustParse("110")},
						Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourcePods: resource.MustParse("110")},
					},
				})).To(Succeed())
			}
		}
		Expect(kube.Create(ctx, testutil.MakeTopology("lws", block, rack, host).Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeResourceFlavor("lws").NodeLabel("pool", "lws").TopologyName("lws").Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeClusterQueue("lws").Flavor("lws").Obj())).To(Succeed())
		Expect(kube.Create(ctx, testutil.MakeLocalQueue("lws", "default", "lws"))).To(Succeed())
	})

	It("runs KEP-2724's LeaderWorkerSet with every group's leader and workers on one host", func(ctx SpecContext) {
		l := kepLWS("tas-example-lws", "default", "lws", 2)
		Expect(kube.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			groupsOnOneHostEach(g, ctx, kube, l)
			var got lwsapi.LeaderWorkerSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)), "status: %+v", got.Status)
		}, wait, time.Second).Should(Succeed())
		Expect(kube.Delete(ctx, l)).To(Succeed())
	})

	It("rolls a set to a new template group by group, each group a new Workload placed on one host", func(ctx SpecContext) {
		l := kepLWS("rolled", "default", "lws", 2)
		Expect(kube.Create(ctx, l)).To(Succeed())
		var before string
		Eventually(func(g Gomega) {
			groupsOnOneHostEach(g, ctx, kube, l)
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace(l.Namespace), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			before = pods.Items[0].Labels[lwsjobs.RevisionLabel]
			g.Expect(before).NotTo(BeEmpty())
		}, wait, time.Second).Should(Succeed())
		uids := map[int32]string{}
		for group := range int32(2) {
			var wl strata.Workload
			Expect(kube.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: lwsjobs.GroupWorkloadName(l.Name, group)}, &wl)).To(Succeed())
			Expect(wl.Annotations).To(HaveKeyWithValue(lwsjobs.RevisionAnnotation, before))
			uids[group] = string(wl.UID)
		}

		By("a new image in both templates: the controller rolls the groups; each comes back as a new Workload of the new revision")
		Eventually(func(g Gomega) {
			var got lwsapi.LeaderWorkerSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			got.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.Containers[0].Image = "registry.k8s.io/e2e-test-images/agnhost:2.54"
			got.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Image = "registry.k8s.io/e2e-test-images/agnhost:2.54"
			g.Expect(kube.Update(ctx, &got)).To(Succeed())
		}, wait, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var got lwsapi.LeaderWorkerSet
			g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			g.Expect(got.Status.UpdatedReplicas).To(Equal(int32(2)), "status: %+v", got.Status)
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)), "status: %+v", got.Status)
			groupsOnOneHostEach(g, ctx, kube, l)
			var pods corev1.PodList
			g.Expect(kube.List(ctx, &pods, client.InNamespace(l.Namespace), client.MatchingLabels{lwsjobs.NameLabel: l.Name})).To(Succeed())
			after := pods.Items[0].Labels[lwsjobs.RevisionLabel]
			g.Expect(after).NotTo(Equal(before))
			for _, p := range pods.Items {
				g.Expect(p.Labels).To(HaveKeyWithValue(lwsjobs.RevisionLabel, after), "pod %s", p.Name)
				g.Expect(p.Spec.Containers[0].Image).To(HaveSuffix(":2.54"))
			}
			for group := range int32(2) {
				var wl strata.Workload
				g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: lwsjobs.GroupWorkloadName(l.Name, group)}, &wl)).To(Succeed())
				g.Expect(string(wl.UID)).NotTo(Equal(uids[group]), "group %d rolled: a new Workload", group)
				g.Expect(wl.Annotations).To(HaveKeyWithValue(lwsjobs.RevisionAnnotation, after))
				g.Expect(wl.Status.Admission).NotTo(BeNil())
			}
		}, wait, time.Second).Should(Succeed())
		Expect(kube.Delete(ctx, l)).To(Succeed())
	})
})
