package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
)

// jobSet returns a JobSet of the env's queue: one ReplicatedJob of
// replicas Jobs of parallelism pods, cpu CPUs each, the pod template
// annotated.
func (e *env) jobSet(name string, replicas, parallelism int32, cpu string, annotations map[string]string) *jobsetapi.JobSet {
	workers := testutil.MakeJob("workers", "").Parallelism(parallelism).Completions(parallelism).Indexed().Request("cpu", cpu).
		PodAnnotations(annotations).Obj()
	return testutil.MakeJobSet(name, e.ns).Queue("lq").ReplicatedJob(replicas, workers).Obj()
}

// jobSetCopyOn returns the copy of a hub JobSet on a worker and its
// Workload (nil when it has none).
func jobSetCopyOn(g Gomega, ctx SpecContext, w string, js *jobsetapi.JobSet) (*jobsetapi.JobSet, *strata.Workload) {
	c := worker(w).Client
	var cp jobsetapi.JobSet
	if err := c.Get(ctx, client.ObjectKeyFromObject(js), &cp); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // a worker without JobSets
		}
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil, nil
	}
	var wl strata.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: jobset.Kind.WorkloadName(js.Name)}, &wl); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return &cp, nil
	}
	return &cp, &wl
}

var _ = Describe("JobSets through the hub", Label("jobset"), func() {
	It("dispatches a JobSet whole to the worker whose rack holds it, mirrors its status and takes it back on deletion", func(ctx SpecContext) {
		// A JobSet of 2 Jobs of 2 pods of 4 CPUs, all in one rack, each
		// Job's pods on one host (the slice size defaults to the Jobs'
		// parallelism). w1 has 16 CPUs, but one 8-CPU host per rack; w2
		// has a rack of two 8-CPU hosts; w3 has the largest rack but does
		// not serve JobSets.
		e := newEnv(ctx, "js", map[string][][]string{
			"w1": {{"8"}, {"8"}},
			"w2": {{"8", "8"}},
			"w3": {{"16", "16", "16"}},
		})
		js := e.jobSet("train", 2, 2, "4", map[string]string{
			strata.PodSetRequiredTopologyAnnotation:      rack,
			strata.PodSetSliceRequiredTopologyAnnotation: host,
		})
		By("the hub has every worker's summary of the flavor, w3's too")
		Eventually(func(g Gomega) {
			for _, w := range []string{"w1", "w2", "w3"} {
				var wc strata.WorkerCluster
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: w}, &wc)).To(Succeed())
				var flavors []string
				for _, sm := range wc.Status.Summaries {
					flavors = append(flavors, sm.Flavor)
				}
				g.Expect(flavors).To(ContainElement(e.flavor), w)
			}
		}).Should(Succeed())
		Expect(hub.Client.Create(ctx, js)).To(Succeed())

		By("the hub takes it in: managed by the hub, one Workload of one pod set of 4 pods")
		var hubWL strata.Workload
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(got.Spec.ManagedBy).To(Equal(ptr.To(strata.ManagedByController)))
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &hubWL)).To(Succeed())
			g.Expect(hubWL.Spec.PodSets).To(HaveLen(1))
			g.Expect(hubWL.Spec.PodSets[0].Count).To(Equal(int32(4)))
		}).Should(Succeed())

		By("exactly one copy, on w2, admitted there with every Job's pods on one host")
		Eventually(func(g Gomega) {
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(&hubWL), &hubWL)).To(Succeed())
			g.Expect(hubWL.Status.Admission).NotTo(BeNil(), "%v", hubWL.Status.Conditions)
			g.Expect(hubWL.Status.Placement.Cluster).To(Equal("w2"))
			cp, cwl := jobSetCopyOn(g, ctx, "w2", js)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKey(strata.TopologyHintAnnotation))
			g.Expect(cp.Spec.ManagedBy).To(BeNil())
			g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse(), "the agent resumes the admitted copy")
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(racksOf(g, cwl.Status.Admission)).To(Equal(map[string]int32{"r0": 4}))
			for _, w := range []string{"w1", "w3"} {
				other, _ := jobSetCopyOn(g, ctx, w, js)
				g.Expect(other).To(BeNil(), "a copy on %s", w)
			}
		}).Should(Succeed())
		Expect(hubWL.Status.Placement.Attempts[0].Message).To(ContainSubstring("w3/f-js: the worker does not serve jobsets.jobset.x-k8s.io"))

		By("the copy's status is mirrored to the hub JobSet")
		Eventually(func(g Gomega) {
			cp, _ := jobSetCopyOn(g, ctx, "w2", js)
			g.Expect(cp).NotTo(BeNil())
			cp.Status.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "workers", Active: 2, Ready: 2}}
			g.Expect(worker("w2").Client.Status().Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(got.Status.ReplicatedJobsStatus).To(Equal([]jobsetapi.ReplicatedJobStatus{{Name: "workers", Active: 2, Ready: 2}}))
		}).Should(Succeed())

		By("completing the copy finishes the hub Workload and the hub JobSet")
		Eventually(func(g Gomega) {
			cp, _ := jobSetCopyOn(g, ctx, "w2", js)
			g.Expect(cp).NotTo(BeNil())
			cp.Status.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "workers", Succeeded: 2}}
			cp.Status.TerminalState = string(jobsetapi.JobSetCompleted)
			meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: string(jobsetapi.JobSetCompleted), Status: metav1.ConditionTrue,
				Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
			g.Expect(worker("w2").Client.Status().Update(ctx, cp)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var got jobsetapi.JobSet
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			g.Expect(got.Status.TerminalState).To(Equal(string(jobsetapi.JobSetCompleted)))
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(&hubWL), &hubWL)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(hubWL.Status.Conditions, strata.WorkloadFinished)).To(BeTrue())
		}).Should(Succeed())
		By("the finished copy is removed once its status is on the hub")
		Eventually(func(g Gomega) {
			cp, _ := jobSetCopyOn(g, ctx, "w2", js)
			g.Expect(cp).To(BeNil())
		}).Should(Succeed())

		By("deleting a running JobSet on the hub removes its copy")
		second := e.jobSet("second", 2, 2, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			cp, cwl := jobSetCopyOn(g, ctx, "w2", second)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			cp, _ := jobSetCopyOn(g, ctx, "w2", second)
			g.Expect(cp).To(BeNil())
			err := hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(second.Name)}, &strata.Workload{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub Workload goes with its JobSet: %v", err)
		}).Should(Succeed())
	})

	It("takes a JobSet's copy back when its hub Workload is deactivated, and dispatches it again on reactivation; a refusing worker's copy goes elsewhere", func(ctx SpecContext) {
		e := newEnv(ctx, "jssusp", map[string][][]string{
			"w1": {{"4", "4"}},
			"w2": {{"4", "4"}},
		})
		js := e.jobSet("pausable", 2, 1, "2", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		js.Spec.Suspend = ptr.To(true) // a Kueue manifest's: dispatched all the same
		Expect(hub.Client.Create(ctx, js)).To(Succeed())
		var first string
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			first = wl.Status.Placement.Cluster
		}).Should(Succeed())

		By("deactivating the hub Workload takes the copy back")
		setWorkloadActive(ctx, e.ns, jobset.Kind.WorkloadName(js.Name), false)
		Eventually(func(g Gomega) {
			cp, _ := jobSetCopyOn(g, ctx, first, js)
			g.Expect(cp).To(BeNil())
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dispatch.ReasonDeactivated))
		}).Should(Succeed())

		By("the worker it went to refuses it on reactivation (its LocalQueue is gone): it goes to the other")
		Expect(worker(first).Client.Delete(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-jssusp"))).To(Succeed())
		setWorkloadActive(ctx, e.ns, jobset.Kind.WorkloadName(js.Name), true)
		other := map[string]string{"w1": "w2", "w2": "w1"}[first]
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal(other))
			cp, _ := jobSetCopyOn(g, ctx, other, js)
			g.Expect(cp).NotTo(BeNil())
			stale, _ := jobSetCopyOn(g, ctx, first, js)
			g.Expect(stale).To(BeNil())
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("holds a JobSet that fits on no single worker, and says why per worker", func(ctx SpecContext) {
		e := newEnv(ctx, "jsbig", map[string][][]string{
			"w1": {{"4", "4"}},
			"w2": {{"4", "4"}},
		})
		js := e.jobSet("huge", 3, 2, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			var wl strata.Workload
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobset.Kind.WorkloadName(js.Name)}, &wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(And(ContainSubstring("w1/f-jsbig"), ContainSubstring("w2/f-jsbig")))
			g.Expect(wl.Status.Placement).To(BeNil())
		}).Should(Succeed())
		for _, w := range workers {
			var list jobsetapi.JobSetList
			if err := w.Client.List(ctx, &list, client.InNamespace(e.ns)); err == nil {
				Expect(list.Items).To(BeEmpty(), "no copy on %s", w.Name)
			}
		}
	})
})
