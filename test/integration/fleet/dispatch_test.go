package fleet

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/workload"
)

var _ = Describe("Dispatch", func() {
	It("sends a rack-required Job to the only worker with a free rack, once, whole", func(ctx SpecContext) {
		e := newEnv(ctx, "rack", map[string][][]string{
			"w1": {{"8", "8"}, {"8", "8"}},           // racks of two nodes
			"w2": {{"8", "8", "8", "8"}},             // one rack of four
			"w3": {{"8", "8", "8"}, {"8", "8", "8"}}, // racks of three
		})
		job := e.job("train", 4, "8", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		// What the hub's informers drop from its jobs and Workloads (lean
		// templates): the copy still carries it.
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "train"}
		c.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "90"}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		job.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		job.Spec.Template.Labels = map[string]string{"app": "train"}
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Expect(ptr.Deref(job.Spec.ManagedBy, "")).To(Equal(strata.ManagedByController), "the hub's admission policy sets spec.managedBy")

		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.Flavor).To(Equal(e.flavor))
			g.Expect(racksOf(g, wl.Status.Admission)).To(Equal(map[string]int32{"r0": 4}))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted)).To(BeTrue())
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1))
			g.Expect(wl.Status.Placement.Attempts[0].Result).To(Equal(strata.PlacementAdmitted))

			cp, cwl := copyOn(g, ctx, worker("w2"), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.HubWorkloadUIDLabel, string(wl.UID)))
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.DispatchGenerationLabel, "1"))
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.OriginLabel, hubCfg.Origin))
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.FlavorAnnotation, e.flavor))
			g.Expect(cp.Spec.ManagedBy).To(BeNil())
			g.Expect(racksOf(g, cwl.Status.Admission)).To(Equal(map[string]int32{"r0": 4}))
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w2"}))
			// The copy is the whole Job; the hub Workload keeps of the
			// template only what placing it reads.
			g.Expect(cp.Spec.Template.Spec.Containers[0].Image).To(Equal("busybox"))
			g.Expect(cp.Spec.Template.Spec.Containers[0].Command).To(Equal(c.Command))
			g.Expect(cp.Spec.Template.Spec.Containers[0].Env).To(Equal(c.Env))
			g.Expect(cp.Spec.Template.Spec.Containers[0].VolumeMounts).To(Equal(c.VolumeMounts))
			g.Expect(cp.Spec.Template.Spec.Volumes).To(HaveLen(1))
			g.Expect(cp.Spec.Template.Labels).To(HaveKeyWithValue("app", "train"))
			tmpl := wl.Spec.PodSets[0].Template
			g.Expect(tmpl.Spec.Containers[0].Image).To(BeEmpty())
			g.Expect(tmpl.Spec.Containers[0].Resources.Requests).To(Equal(c.Resources.Requests))
			g.Expect(tmpl.Spec.Volumes).To(BeEmpty())
		}).Should(Succeed())
		By("the hub's and the worker's metrics count the reservation and the admission (Kueue's)")
		Eventually(func(g Gomega) {
			for _, m := range []metrics.Lifecycle{metrics.HubLifecycle, metrics.AgentLifecycle} {
				g.Expect(promtest.ToFloat64(m.QuotaReserved.WithLabelValues("cq-rack"))).To(BeNumerically(">=", 1))
				g.Expect(promtest.ToFloat64(m.Admitted.WithLabelValues("cq-rack"))).To(BeNumerically(">=", 1))
			}
			for _, q := range []*metrics.QueueGauges{metrics.HubQueues, metrics.AgentQueues} {
				g.Expect(promtest.ToFloat64(q.AdmittedActive.WithLabelValues("cq-rack"))).To(BeNumerically(">=", 1))
			}
			// The hub's LocalQueue metrics (metrics.localQueueMetrics, on
			// in this suite).
			g.Expect(promtest.ToFloat64(metrics.HubLocalQueueLifecycle.Admitted.WithLabelValues("lq", e.ns))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.HubLocalQueues.AdmittedActive.WithLabelValues("lq", e.ns))).To(BeNumerically(">=", 1))
			g.Expect(promtest.ToFloat64(metrics.HubLocalQueues.Status.WithLabelValues("lq", e.ns, "True"))).To(Equal(1.0))
		}).Should(Succeed())
	})

	It("admits a burst that fits the first time, one copy each", func(ctx SpecContext) {
		e := newEnv(ctx, "burst", map[string][][]string{
			"w1": {{"4", "4"}, {"4", "4"}},
			"w2": {{"4", "4", "4", "4"}},
			"w3": {{"8", "8"}},
		})
		// 16 + 16 + 16 CPUs; 60 Jobs of 0.5 CPU need 30, and Compact fills
		// w1's racks to the last slot: the hub's reservations must leave
		// exactly the room w1's agent leaves. Pods of one size, as in this
		// burst, are always admitted the first time; mixed sizes smaller
		// than a node can be packed by the agent in another order than the
		// hub reserved them, and then one may wait for admissionTimeout
		// (docs/hub.md, "Not yet").
		var jobs []*batchv1.Job
		for i := range 60 {
			job := e.job(fmt.Sprintf("b-%02d", i), 1, "500m", map[string]string{strata.PodSetPreferredTopologyAnnotation: rack})
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
		}
		Eventually(func(g Gomega) {
			for _, job := range jobs {
				wl := hubWorkload(g, ctx, job)
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job.Name, wl.Status.Conditions)
			}
		}).Should(Succeed())
		perWorker := map[string]int{}
		for _, job := range jobs {
			wl := hubWorkload(Default, ctx, job)
			// Admitted the first time: one dispatch, never refused.
			Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)), "%s: %+v", job.Name, wl.Status.Placement.Attempts)
			Expect(wl.Status.Placement.Attempts).To(HaveLen(1), job.Name)
			Expect(copies(Default, ctx, job)).To(Equal([]string{wl.Status.Placement.Cluster}), job.Name)
			perWorker[wl.Status.Placement.Cluster]++
			// The worker took the capacity in the rack the hub reserved.
			_, cwl := copyOn(Default, ctx, worker(wl.Status.Placement.Cluster), job)
			Expect(cwl).NotTo(BeNil(), job.Name)
			hints, err := workload.TopologyHints(cwl)
			Expect(err).NotTo(HaveOccurred())
			Expect(hints).To(HaveKey("main"), "%s: %v", job.Name, cwl.Annotations)
			hinted := map[string]int32{}
			for _, d := range hints["main"].Domains {
				hinted[d.Values[len(d.Values)-1]] += d.Count
			}
			Expect(racksOf(Default, cwl.Status.Admission)).To(Equal(hinted), job.Name)
		}
		GinkgoWriter.Printf("Jobs per worker: %v\n", perWorker)
	})
})

var _ = Describe("Cordon", func() {
	It("sends no new work to a cordoned worker, says why, and keeps what runs there", func(ctx SpecContext) {
		e := newEnv(ctx, "cordon", map[string][][]string{
			"w1": {{"4", "4"}}, // the tightest fit, first choice while it may take work
			"w2": {{"8", "8"}},
		})
		first := e.job("before", 1, "1", nil)
		Expect(hub.Client.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, first)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}).Should(Succeed())

		By("cordoning w1")
		setUnschedulable := func(ctx context.Context, v bool) {
			Eventually(func(g Gomega) {
				var wc strata.WorkerCluster
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
				wc.Spec.Unschedulable = v
				g.Expect(hub.Client.Update(ctx, &wc)).To(Succeed())
			}).Should(Succeed())
		}
		setUnschedulable(ctx, true)
		DeferCleanup(func(ctx SpecContext) { setUnschedulable(ctx, false) })
		// The cordon holds from when the hub sees it: a Job created in the
		// same instant may still go to w1 (watches of different kinds are
		// not ordered), as a pod may land on a node cordoned in its instant.
		Eventually(func(g Gomega) {
			var wc strata.WorkerCluster
			g.Expect(hubCache.Get(ctx, client.ObjectKey{Name: "w1"}, &wc)).To(Succeed())
			g.Expect(wc.Spec.Unschedulable).To(BeTrue())
		}).Should(Succeed())
		second := e.job("after", 1, "1", nil)
		Expect(hub.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, second)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
			g.Expect(wl.Status.Placement.Attempts[0].Message).To(ContainSubstring("cordoned"))
		}).Should(Succeed())
		Expect(copies(Default, ctx, first)).To(Equal([]string{"w1"}), "what runs on a cordoned worker stays")
	})
})
