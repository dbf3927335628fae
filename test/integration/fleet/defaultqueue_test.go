package fleet

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's LocalQueue defaulting on the hub, by the hub chart's admission
// policy: a Job created without a queue label in a namespace with a hub
// LocalQueue named "default" is dispatched through it, never run on the
// hub itself.
var _ = Describe("LocalQueue defaulting on the hub", func() {
	It("dispatches an unlabelled Job through the namespace's default LocalQueue", func(ctx SpecContext) {
		e := newEnv(ctx, "defaultq", map[string][][]string{"w1": {{"4"}}})
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("default", e.ns, "cq-defaultq"))).To(Succeed())
		for _, w := range workers {
			Expect(w.Client.Create(ctx, testutil.MakeLocalQueue("default", e.ns, "cq-defaultq"))).To(Succeed())
		}
		job := e.job("unlabelled", 1, "1", nil)
		delete(job.Labels, strata.QueueNameLabel)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Expect(job.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		Expect(job.Spec.ManagedBy).To(HaveValue(Equal("strata.dev/hub")), "the hub's Job controller never runs it")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Spec.QueueName).To(Equal("default"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
		}).Should(Succeed())
	})
	It("queues an unlabelled JobSet, MPIJob and LeaderWorkerSet for the hub too, none of them run by the hub cluster's own controllers", func(ctx SpecContext) {
		e := newEnv(ctx, "defaultqk", map[string][][]string{"w1": {{"4"}}})
		Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("default", e.ns, "cq-defaultqk"))).To(Succeed())
		Eventually(func(g Gomega) {
			// The API server's policy sees the LocalQueue once its
			// informer has it: a dry run tells.
			js := testutil.MakeJobSet("unlabelled", e.ns).ReplicatedJob(1, testutil.MakeJob("workers", "").Parallelism(1).Completions(1).Obj()).Obj()
			g.Expect(hub.Client.Create(ctx, js, client.DryRunAll)).To(Succeed())
			g.Expect(js.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
			g.Expect(js.Spec.ManagedBy).To(HaveValue(Equal(strata.ManagedByController)))
		}).Should(Succeed())

		mpi := testutil.MakeMPIJob("unlabelled", e.ns).Obj()
		Expect(hub.Client.Create(ctx, mpi, client.DryRunAll)).To(Succeed())
		Expect(mpi.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		Expect(mpi.Spec.RunPolicy.ManagedBy).To(HaveValue(Equal(strata.ManagedByController)))

		lws := testutil.MakeLeaderWorkerSet("unlabelled", e.ns).Replicas(1).Size(2).Defaulted().Obj()
		Expect(hub.Client.Create(ctx, lws, client.DryRunAll)).To(Succeed())
		Expect(lws.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		Expect(lws.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates).To(ContainElement(HaveField("Name", "strata.dev/topology")))
		Expect(lws.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.SchedulingGates).To(ContainElement(HaveField("Name", "strata.dev/topology")))
	})
})
