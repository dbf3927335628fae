package agent

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/scheduler"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/testutil"
)

// A hub sends a Job's copy running, its pods held by the topology
// scheduling gate (jobs.GatedStart): the agent admits it without writing
// to the Job, and the ungater releases its pods.
var _ = Describe("A Job sent running with its pods gated", Ordered, Label("agent", "gated"), func() {
	var (
		ns            string
		first, second *batchv1.Job
	)
	rackRequired := map[string]string{"strata.dev/podset-required-topology": rack}

	// gatedJob is a queue-labelled Job of n pods made as a hub makes a
	// copy of a batch/v1 Job.
	gatedJob := func(n int32) *batchv1.Job {
		job := newJob(ns, "gated-q", n, rackRequired)
		Expect(batchjob.Adapt(job).StartGated(jobs.WorkloadName(job.Name))).To(BeTrue())
		return job
	}
	// gatedPods returns, per pod name, whether it still waits behind the
	// gate, checking that a released pod carries the flavor's node label,
	// a host and the label that counts it through its Workload.
	gatedPods := func(g Gomega, ctx SpecContext, job *batchv1.Job) map[string]bool {
		var pods corev1.PodList
		g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(job.Namespace),
			client.MatchingLabels{strata.WorkloadLabel: jobs.WorkloadName(job.Name)})).To(Succeed())
		out := map[string]bool{}
		for _, p := range pods.Items {
			gated := slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == strata.TopologySchedulingGate })
			out[p.Name] = gated
			if !gated {
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("pool", "gated"))
				g.Expect(p.Spec.NodeSelector).To(HaveKey(host))
				g.Expect(p.Labels).To(HaveKeyWithValue(strata.TASLabel, "true"))
			}
		}
		return out
	}
	// untouched checks that the agent wrote nothing to the Job: it runs
	// as created, without an admission's record.
	untouched := func(g Gomega, ctx SpecContext, job *batchv1.Job) {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		g.Expect(j.Generation).To(Equal(int64(1)))
		g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
		g.Expect(j.Annotations).NotTo(HaveKey(strata.AddedByAdmissionAnnotation))
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("gated-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-gated").NodeLabel("pool", "gated").TopologyName("gated-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("gated-q").Flavor("tas-gated", "cpu", "4").Obj())).To(Succeed())
		for _, n := range []string{"gated-1", "gated-2"} {
			createPoolNode(ctx, "gated", n, "b1", "r1", "4")
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "gated-q")
	})

	It("is admitted without a write to the Job, and its pods are released into the assignment", func(ctx SpecContext) {
		first = gatedJob(3)
		Expect(worker.Client.Create(ctx, first)).To(Succeed())
		// The Job controller makes the pods at once: the admission policy
		// left the Job running, and its template holds them.
		createPods(ctx, first, 0, 1, 2)
		expectAdmitted(ctx, first)
		Eventually(func(g Gomega) {
			g.Expect(gatedPods(g, ctx, first)).To(Equal(map[string]bool{first.Name + "-0": false, first.Name + "-1": false, first.Name + "-2": false}))
		}, timeout).Should(Succeed())
		Consistently(func(g Gomega) { untouched(g, ctx, first) }, "1s", "200ms").Should(Succeed())
	})

	It("waits at the gate while the quota is short: its pods stay held and the Job is not suspended", func(ctx SpecContext) {
		second = gatedJob(2)
		Expect(worker.Client.Create(ctx, second)).To(Succeed())
		createPods(ctx, second, 0, 1)
		expectWaiting(ctx, second, scheduler.ReasonPending, "quota: cpu needs 2, more than is left of the quota of 4")
		Consistently(func(g Gomega) {
			untouched(g, ctx, second)
			g.Expect(gatedPods(g, ctx, second)).To(Equal(map[string]bool{second.Name + "-0": true, second.Name + "-1": true}))
		}, "2s", "200ms").Should(Succeed())
	})

	It("is stopped once its released pods lose the admission, and waits suspended from then on; the next one is released", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, first)
			wl.Spec.Active = ptr.To(false)
			g.Expect(worker.Client.Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var j batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(first), &j)).To(Succeed())
			g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue(), "the agent suspends the Job")
			// The template is as an admission's start would leave it
			// once taken back: no gate, no Workload label.
			g.Expect(j.Spec.Template.Spec.SchedulingGates).To(BeEmpty())
			g.Expect(j.Spec.Template.Labels).NotTo(HaveKey(strata.WorkloadLabel))
		}, timeout).Should(Succeed())
		expectAdmitted(ctx, second)
		Eventually(func(g Gomega) {
			g.Expect(gatedPods(g, ctx, second)).To(Equal(map[string]bool{second.Name + "-0": false, second.Name + "-1": false}))
		}, timeout).Should(Succeed())
		untouched(Default, ctx, second)
	})
})
