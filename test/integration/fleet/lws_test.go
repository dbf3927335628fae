package fleet

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// leaderWorkerSet is a LeaderWorkerSet of the env's queue: replicas groups
// of a leader and size-1 workers, cpu CPUs each, the given annotations on
// both templates, which are gated as the hub chart's policy gates them.
func (e *env) leaderWorkerSet(name string, replicas, size int32, cpu string, annotations map[string]string) *lwsapi.LeaderWorkerSet {
	return testutil.MakeLeaderWorkerSet(name, e.ns).Queue("lq").Replicas(replicas).Size(size).Defaulted().Gated().
		Request("cpu", cpu).LeaderAnnotations(annotations).WorkerAnnotations(annotations).Obj()
}

// groupHosts is the hosts a group Workload's admission puts its pods on.
func groupHosts(g Gomega, wl *strata.Workload) []string {
	g.Expect(wl.Status.Admission).NotTo(BeNil(), wl.Name)
	var out []string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		a, err := tas.Decode(psa.TopologyAssignment)
		g.Expect(err).NotTo(HaveOccurred())
		for _, d := range a.Domains {
			out = append(out, d.Values[len(d.Values)-1])
		}
	}
	return out
}

var _ = Describe("LeaderWorkerSets through the hub", Label("lws"), func() {
	It("dispatches a LeaderWorkerSet whole to the worker where each group fits on one host, mirrors its status, and takes it back on deletion", func(ctx SpecContext) {
		// KEP-2724's example: 2 groups of a leader and 2 workers, each
		// group on one host. w1's hosts hold 2 pods of 1 CPU, w2's 3; w3
		// does not serve LeaderWorkerSets.
		e := newEnv(ctx, "lwsh", map[string][][]string{
			"w1": {{"2", "2"}, {"2", "2"}},
			"w2": {{"3", "3"}},
			"w3": {{"16"}},
		})
		l := e.leaderWorkerSet("infer", 2, 3, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"})
		summarized(ctx, e.flavor, "w1", "w2", "w3")
		Expect(hub.Client.Create(ctx, l)).To(Succeed())

		By("one hub Workload of both groups, admitted on w2 the first time")
		var hubWL strata.Workload
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.SetKind.WorkloadName(l.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(hubWL.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
			var names []string
			for _, psa := range hubWL.Status.Admission.PodSetAssignments {
				names = append(names, psa.Name)
			}
			g.Expect(names).To(Equal([]string{"leader-0", "worker-0", "leader-1", "worker-1"}))
		}).Should(Succeed())
		Expect(hubWL.Status.Placement.Attempts[0].Message).To(ContainSubstring("w3/f-lwsh: the worker does not serve leaderworkersets.leaderworkerset.x-k8s.io"))

		By("exactly one copy, on w2, each group admitted there on a host of its own, as the hub hinted")
		w2 := worker("w2")
		Eventually(func(g Gomega) {
			var cp lwsapi.LeaderWorkerSet
			g.Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(l), &cp)).To(Succeed())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.DispatchWorkloadsAnnotation, "2"))
			seen := map[string]bool{}
			for i := range int32(2) {
				var wl strata.Workload
				g.Expect(w2.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.GroupWorkloadName(l.Name, i)}, &wl)).To(Succeed())
				hosts := groupHosts(g, &wl)
				g.Expect(hosts).To(HaveLen(2), "leader and workers, one domain each")
				g.Expect(hosts[0]).To(Equal(hosts[1]), "group %d on one host", i)
				g.Expect(seen[hosts[0]]).To(BeFalse(), "groups share host %s", hosts[0])
				seen[hosts[0]] = true
				g.Expect(wl.Annotations[strata.TopologyHintAnnotation]).To(And(ContainSubstring(`"leader"`), ContainSubstring(`"worker"`)),
					"the group's part of the hint")
			}
			for _, w := range []string{"w1", "w3"} {
				var other lwsapi.LeaderWorkerSet
				err := worker(w).Client.Get(ctx, client.ObjectKeyFromObject(l), &other)
				g.Expect(client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err)).To(BeTrue(), "%v", err)
				g.Expect(err).To(HaveOccurred(), "a copy on %s", w)
			}
		}).Should(Succeed())

		By("w2's summary counts the dispatch once both groups are admitted")
		Eventually(func(g Gomega) {
			var list strata.CapacitySummaryList
			g.Expect(w2.Client.List(ctx, &list)).To(Succeed())
			key := fmt.Sprintf("%s/%d", hubWL.UID, 1)
			g.Expect(list.Items).To(ContainElement(And(HaveField("Spec.Flavor", e.flavor), HaveField("Status.Dispatches", ContainElement(key)))))
		}).Should(Succeed())

		By("the copy's status mirrored to the hub's set")
		Eventually(func(g Gomega) {
			var cp lwsapi.LeaderWorkerSet
			g.Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(l), &cp)).To(Succeed())
			cp.Status.Replicas, cp.Status.ReadyReplicas = 2, 2
			g.Expect(w2.Client.Status().Update(ctx, &cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var got lwsapi.LeaderWorkerSet
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(l), &got)).To(Succeed())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
		}).Should(Succeed())

		By("deleting the hub's set removes the copy and its groups' Workloads")
		Expect(hub.Client.Delete(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			var cp lwsapi.LeaderWorkerSet
			g.Expect(client.IgnoreNotFound(w2.Client.Get(ctx, client.ObjectKeyFromObject(l), &cp))).To(Succeed())
			g.Expect(cp.Name).To(BeEmpty(), "the copy is still on w2")
			var wls strata.WorkloadList
			g.Expect(w2.Client.List(ctx, &wls, client.InNamespace(e.ns))).To(Succeed())
			g.Expect(wls.Items).To(BeEmpty())
		}).Should(Succeed())
	})

	It("dispatches a set of more groups than a Kueue Workload holds pod sets to the one worker with a host for each group", func(ctx SpecContext) {
		// 6 groups of a leader and a worker (12 pod sets on the hub),
		// each group on a host of 2 CPUs: w1 has 5 such hosts, w2 6.
		e := newEnv(ctx, "lwsw", map[string][][]string{
			"w1": {{"2", "2", "2"}, {"2", "2"}},
			"w2": {{"2", "2", "2"}, {"2", "2", "2"}},
		})
		l := e.leaderWorkerSet("wide", 6, 2, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"})
		summarized(ctx, e.flavor, "w1", "w2")
		Expect(hub.Client.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			var hubWL strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.SetKind.WorkloadName(l.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Spec.PodSets).To(HaveLen(12))
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(hubWL.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
			g.Expect(hubWL.Status.Admission.PodSetAssignments).To(HaveLen(12))
		}).Should(Succeed())
		w2 := worker("w2")
		Eventually(func(g Gomega) {
			seen := map[string]bool{}
			for i := range int32(6) {
				var wl strata.Workload
				g.Expect(w2.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.GroupWorkloadName(l.Name, i)}, &wl)).To(Succeed())
				hosts := groupHosts(g, &wl)
				g.Expect(hosts).To(HaveLen(2))
				g.Expect(hosts[0]).To(Equal(hosts[1]), "group %d on one host", i)
				g.Expect(seen[hosts[0]]).To(BeFalse(), "groups share host %s", hosts[0])
				seen[hosts[0]] = true
			}
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, l)).To(Succeed())
	})

	It("places a set whose leader fits only on one flavor and whose workers only on another with each on its own, every group's Workload pinned so", func(ctx SpecContext) {
		e, big := splitEnv(ctx, "lwssplit")
		// A leader of 2 CPUs (fits only the env's flavor's node), workers
		// of 4 (fit only big's rack): the group on no one flavor.
		required := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack}
		l := e.leaderWorkerSet("serve", 1, 3, "4", required)
		l.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		Expect(hub.Client.Create(ctx, l)).To(Succeed())

		Eventually(func(g Gomega) {
			var hubWL strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.SetKind.WorkloadName(l.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Placement).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w1"), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.PodSetFlavors).To(Equal([]strata.PodSetFlavor{{Name: "leader-0", Flavor: e.flavor}, {Name: "worker-0", Flavor: big}}))
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)

			w1 := worker("w1")
			var cp lwsapi.LeaderWorkerSet
			g.Expect(w1.Client.Get(ctx, client.ObjectKeyFromObject(l), &cp)).To(Succeed())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PodSetFlavorsAnnotation, "leader-0="+e.flavor+",worker-0="+big))
			var wl strata.Workload
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: lws.GroupWorkloadName(l.Name, 0)}, &wl)).To(Succeed())
			g.Expect(wl.Annotations).To(HaveKeyWithValue(strata.PodSetFlavorsAnnotation, "leader="+e.flavor+",worker="+big))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			got := map[string]string{}
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				got[psa.Name] = psa.Flavor
			}
			g.Expect(got).To(Equal(map[string]string{"leader": e.flavor, "worker": big}))
		}).Should(Succeed())
	})
})
