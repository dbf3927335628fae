package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// Kueue's LocalQueue defaulting, by the chart's admission policies on the
// real API server: a Job without a queue label, in a namespace with a
// LocalQueue named "default", is queued there; elsewhere it is left
// alone, and so is a Job a controller owns.
var _ = Describe("LocalQueue defaulting", Ordered, Label("agent", "defaultqueue"), func() {
	var withDefault, without string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("defaultq-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-defaultq").NodeLabel("pool", "defaultq").TopologyName("defaultq-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("defaultq").Flavor("tas-defaultq").Obj())).To(Succeed())
		createPoolNode(ctx, "defaultq", "defaultq-1", "b1", "r1", "4")
		withDefault = createNamespace(ctx, nil)
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("default", withDefault, "defaultq"))).To(Succeed())
		without = createNamespace(ctx, nil)
		// A LocalQueue of another name is no default.
		Expect(worker.Client.Create(ctx, testutil.MakeLocalQueue("not-default", without, "defaultq"))).To(Succeed())
	})

	get := func(g Gomega, ctx SpecContext, job *batchv1.Job) *batchv1.Job {
		var j batchv1.Job
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
		return &j
	}

	It("queues an unlabelled Job in the namespace's default LocalQueue, suspended until admitted", func(ctx SpecContext) {
		job := newJob(withDefault, "", 2, map[string]string{"kueue.x-k8s.io/podset-required-topology": rack})
		Expect(job.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(job.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"), "labelled at creation")
		Expect(ptr.Deref(job.Spec.Suspend, false)).To(BeTrue(), "suspended at creation")
		expectAdmitted(ctx, job)
		Eventually(func(g Gomega) {
			g.Expect(ptr.Deref(get(g, ctx, job).Spec.Suspend, true)).To(BeFalse(), "started once admitted")
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("queues a CronJob's Job, and a Katib Trial's, as Kueue does; not an MPIJob's launcher", func(ctx SpecContext) {
		for _, owner := range []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cronjob-uid", Controller: ptr.To(true)},
			// A kind of kubeflow.org that Strata does not queue.
			{APIVersion: "kubeflow.org/v1beta1", Kind: "Trial", Name: "sweep-1", UID: "trial-uid", Controller: ptr.To(true)},
		} {
			job := newJob(withDefault, "", 1, nil)
			job.OwnerReferences = []metav1.OwnerReference{owner}
			Expect(worker.Client.Create(ctx, job, client.DryRunAll)).To(Succeed())
			Expect(job.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"), owner.Kind)
			Expect(ptr.Deref(job.Spec.Suspend, false)).To(BeTrue(), owner.Kind)
		}
		launcher := newJob(withDefault, "", 1, nil)
		launcher.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "pi", UID: "mpijob-uid", Controller: ptr.To(true)}}
		Expect(worker.Client.Create(ctx, launcher, client.DryRunAll)).To(Succeed())
		Expect(launcher.Labels).NotTo(HaveKey(strata.QueueNameLabel), "its MPIJob is what is queued")
		Expect(ptr.Deref(launcher.Spec.Suspend, false)).To(BeFalse())
	})

	It("leaves alone a Job labelled for another queue, one in a namespace without a default LocalQueue, and one a JobSet owns", func(ctx SpecContext) {
		createLocalQueue(ctx, withDefault, "defaultq")
		labelled := newJob(withDefault, "defaultq", 1, nil)
		Expect(worker.Client.Create(ctx, labelled)).To(Succeed())
		Expect(labelled.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "defaultq"))

		elsewhere := newJob(without, "", 1, nil)
		Expect(worker.Client.Create(ctx, elsewhere)).To(Succeed())
		Expect(elsewhere.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(ptr.Deref(elsewhere.Spec.Suspend, false)).To(BeFalse())

		// A Job whose controller is a kind Strata queues (a JobSet's):
		// its owner is what is queued.
		owned := newJob(withDefault, "", 1, nil)
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "sweep", UID: "jobset-uid", Controller: ptr.To(true)}}
		Expect(worker.Client.Create(ctx, owned)).To(Succeed())
		Expect(owned.Labels).NotTo(HaveKey(strata.QueueNameLabel))
		Expect(ptr.Deref(owned.Spec.Suspend, false)).To(BeFalse())

		kueues := newJob(withDefault, "", 1, nil)
		kueues.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a"}
		Expect(worker.Client.Create(ctx, kueues)).To(Succeed())
		Expect(kueues.Labels).NotTo(HaveKey(strata.QueueNameLabel), "a Job labelled for Kueue is Kueue's")

		Consistently(func(g Gomega) {
			for _, j := range []*batchv1.Job{elsewhere, owned, kueues} {
				var wl strata.WorkloadList
				g.Expect(worker.Client.List(ctx, &wl, client.InNamespace(j.Namespace))).To(Succeed())
				for _, w := range wl.Items {
					g.Expect(w.Name).NotTo(HaveSuffix(j.Name), "no Workload for %s", j.Name)
				}
			}
		}, 2*time.Second).Should(Succeed())
		for _, j := range []*batchv1.Job{labelled, elsewhere, owned, kueues} {
			Expect(worker.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
	})
	It("queues an unlabelled JobSet, MPIJob and LeaderWorkerSet too, each held as its kind is", func(ctx SpecContext) {
		js := testutil.MakeJobSet("defaultq-js", withDefault).ReplicatedJob(1, testutil.MakeJob("workers", "").Parallelism(1).Completions(1).Obj()).Obj()
		Expect(worker.Client.Create(ctx, js, client.DryRunAll)).To(Succeed())
		Expect(js.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue(), "a JobSet is suspended")

		mpi := testutil.MakeMPIJob("defaultq-mpi", withDefault).Obj()
		Expect(worker.Client.Create(ctx, mpi, client.DryRunAll)).To(Succeed())
		Expect(mpi.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		Expect(ptr.Deref(mpi.Spec.RunPolicy.Suspend, false)).To(BeTrue(), "an MPIJob is suspended")

		lws := testutil.MakeLeaderWorkerSet("defaultq-lws", withDefault).Replicas(1).Size(2).Defaulted().Obj()
		Expect(worker.Client.Create(ctx, lws, client.DryRunAll)).To(Succeed())
		Expect(lws.Labels).To(HaveKeyWithValue(strata.QueueNameLabel, "default"))
		gates := func(t *corev1.PodTemplateSpec) []corev1.PodSchedulingGate { return t.Spec.SchedulingGates }
		Expect(gates(&lws.Spec.LeaderWorkerTemplate.WorkerTemplate)).To(ContainElement(HaveField("Name", "strata.dev/topology")), "a LeaderWorkerSet's pods are gated")
		Expect(gates(lws.Spec.LeaderWorkerTemplate.LeaderTemplate)).To(ContainElement(HaveField("Name", "strata.dev/topology")))

		elsewhere := testutil.MakeMPIJob("defaultq-mpi", without).Obj()
		Expect(worker.Client.Create(ctx, elsewhere, client.DryRunAll)).To(Succeed())
		Expect(elsewhere.Labels).NotTo(HaveKey(strata.QueueNameLabel), "no default LocalQueue in that namespace")
	})
})

// Kueue's WorkloadPriorityClass defaulting (v0.20), by the chart's
// admission policy: while a WorkloadPriorityClass named "default" exists,
// a job created without a priority-class label gets it, and its Workload
// that class's priority, even when its pods name a PriorityClass.
var _ = Describe("WorkloadPriorityClass defaulting", Ordered, Label("agent", "defaultqueue"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("defaultwpc-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-defaultwpc").NodeLabel("pool", "defaultwpc").TopologyName("defaultwpc-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("defaultwpc").Flavor("tas-defaultwpc").Obj())).To(Succeed())
		createPoolNode(ctx, "defaultwpc", "defaultwpc-1", "b1", "r1", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "defaultwpc")
	})

	It("labels a job without a class while the default class exists, and leaves one with a class alone", func(ctx SpecContext) {
		// A class of another name is no default, before the default
		// exists or beside it.
		other := testutil.MakeWorkloadPriorityClass("not-default", 10)
		Expect(worker.Client.Create(ctx, other)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, other))).To(Succeed()) })
		Consistently(func(g Gomega) {
			probe := newJob(ns, "defaultwpc", 1, nil)
			g.Expect(worker.Client.Create(ctx, probe, client.DryRunAll)).To(Succeed())
			g.Expect(probe.Labels).NotTo(HaveKey(strata.PriorityClassLabel))
		}, time.Second).Should(Succeed())
		def := testutil.MakeWorkloadPriorityClass("default", 1000)
		Expect(worker.Client.Create(ctx, def)).To(Succeed())
		// Created last: the other specs' jobs never see the class.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(worker.Client.Delete(ctx, def))).To(Succeed())
			Eventually(func(g Gomega) {
				probe := newJob(ns, "defaultwpc", 1, nil)
				probe.Spec.Suspend = ptr.To(true)
				g.Expect(worker.Client.Create(ctx, probe, client.DryRunAll)).To(Succeed())
				g.Expect(probe.Labels).NotTo(HaveKey(strata.PriorityClassLabel), "the API server's policy no longer sees the class")
			}, timeout).Should(Succeed())
		})
		var job *batchv1.Job
		Eventually(func(g Gomega) {
			// The API server's policy sees the class once its informer
			// has it: a dry run tells.
			job = newJob(ns, "defaultwpc", 1, nil)
			job.Spec.Template.Spec.PriorityClassName = "does-not-matter"
			g.Expect(worker.Client.Create(ctx, job, client.DryRunAll)).To(Succeed())
			g.Expect(job.Labels).To(HaveKeyWithValue(strata.PriorityClassLabel, "default"))
		}, timeout).Should(Succeed())
		job = newJob(ns, "defaultwpc", 1, nil)
		job.Spec.Template.Spec.PriorityClassName = "does-not-matter" // the class wins over the pods' (Kueue's)
		Expect(worker.Client.Create(ctx, job)).To(Succeed())
		Expect(job.Labels).To(HaveKeyWithValue(strata.PriorityClassLabel, "default"))
		Eventually(func(g Gomega) {
			wl := workloadOf(g, ctx, job)
			g.Expect(wl.Spec.PriorityClassName).To(Equal("default"))
			g.Expect(wl.Spec.PriorityClassSource).To(Equal(strata.WorkloadPriorityClassSource))
			g.Expect(wl.Spec.Priority).To(HaveValue(BeEquivalentTo(1000)))
		}, timeout).Should(Succeed())

		named := newJob(ns, "defaultwpc", 1, nil)
		named.Labels["kueue.x-k8s.io/priority-class"] = "default-not"
		Expect(worker.Client.Create(ctx, named, client.DryRunAll)).To(Succeed())
		Expect(named.Labels).NotTo(HaveKey(strata.PriorityClassLabel), "a job that names a class keeps it")
		copied := newJob(ns, "defaultwpc", 1, nil)
		copied.Labels[strata.HubWorkloadUIDLabel] = "0b7a6c2e-hub"
		Expect(worker.Client.Create(ctx, copied, client.DryRunAll)).To(Succeed())
		Expect(copied.Labels).NotTo(HaveKey(strata.PriorityClassLabel), "a hub's copy keeps the hub job's priority")
		for _, obj := range []client.Object{
			testutil.MakeJobSet("defaultwpc-js", ns).Queue("defaultwpc").ReplicatedJob(1, testutil.MakeJob("workers", "").Parallelism(1).Completions(1).Obj()).Obj(),
			testutil.MakeMPIJob("defaultwpc-mpi", ns).Queue("defaultwpc").Obj(),
			testutil.MakeLeaderWorkerSet("defaultwpc-lws", ns).Queue("defaultwpc").Replicas(1).Size(2).Defaulted().Obj(),
		} {
			Expect(worker.Client.Create(ctx, obj, client.DryRunAll)).To(Succeed())
			Expect(obj.GetLabels()).To(HaveKeyWithValue(strata.PriorityClassLabel, "default"), "%T", obj)
		}
		Expect(worker.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})
})
