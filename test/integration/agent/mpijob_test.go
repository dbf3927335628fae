package agent

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// piMPIJob (in queue mpi-q) is KEP-2724's "MPIJob with runLauncherAsWorker" example (one
// launcher, workers workers, 1 CPU each), every pod set in one rack, the
// launcher and the workers grouped when group is set.
func piMPIJob(ns, name string, workers int32, group string) *kubeflow.MPIJob {
	ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack}
	if group != "" {
		ann[strata.PodSetGroupNameAnnotation] = group
	}
	return testutil.MakeMPIJob(name, ns).Queue("mpi-q").SlotsPerWorker(1).RunLauncherAsWorker(true).Workers(workers).
		Request("cpu", "1").LauncherAnnotations(ann).WorkerAnnotations(ann).Obj()
}

func mpiJobWorkload(g Gomega, ctx SpecContext, j *kubeflow.MPIJob) *strata.Workload {
	var wl strata.Workload
	g.Expect(worker.Client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: mpijob.Kind.WorkloadName(j.Name)}, &wl)).To(Succeed())
	return &wl
}

// mpiWorkerPods creates the worker pods the MPI operator would, from the
// started MPIJob's worker template, indexes from 1 (runLauncherAsWorker),
// in a random order.
func mpiWorkerPods(ctx SpecContext, j *kubeflow.MPIJob) {
	GinkgoHelper()
	var got kubeflow.MPIJob
	Eventually(func(g Gomega) {
		g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
		g.Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, true)).To(BeFalse(), "the agent has not started the MPIJob yet")
	}, timeout).Should(Succeed())
	spec := got.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	var pods []*corev1.Pod
	for i := int32(1); i <= *spec.Replicas; i++ {
		tmpl := spec.Template.DeepCopy()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-worker-%d", j.Name, i), Namespace: j.Namespace,
			Labels: tmpl.Labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&got, kubeflow.SchemeGroupVersionKind)}}, Spec: tmpl.Spec}
		p.Labels[mpijob.ReplicaIndexLabel] = fmt.Sprint(i)
		pods = append(pods, p)
	}
	rand.Shuffle(len(pods), func(a, b int) { pods[a], pods[b] = pods[b], pods[a] })
	for _, p := range pods {
		Expect(worker.Client.Create(ctx, p)).To(Succeed())
	}
}

// operatorLauncher creates the launcher Job as the MPI operator does at
// startup: suspended, from template, with the operator's label.
func operatorLauncher(ctx SpecContext, j *kubeflow.MPIJob, template *corev1.PodTemplateSpec) *batchv1.Job {
	GinkgoHelper()
	tmpl := template.DeepCopy()
	tmpl.Labels = map[string]string{"training.kubeflow.org/job-role": "launcher"}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	launcher := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + mpijob.LauncherSuffix, Namespace: j.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, kubeflow.SchemeGroupVersionKind)}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: *tmpl},
	}
	Expect(worker.Client.Create(ctx, launcher)).To(Succeed())
	return launcher
}

// setPoolTaint puts a NoSchedule taint on every node of a pool, or takes
// it off.
func setPoolTaint(ctx SpecContext, pool string, on bool) {
	GinkgoHelper()
	var nodes corev1.NodeList
	Expect(worker.Client.List(ctx, &nodes, client.MatchingLabels{"pool": pool})).To(Succeed())
	for _, n := range nodes.Items {
		Eventually(func(g Gomega) {
			var node corev1.Node
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(&n), &node)).To(Succeed())
			node.Spec.Taints = nil
			if on {
				node.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
			}
			g.Expect(worker.Client.Update(ctx, &node)).To(Succeed())
		}).Should(Succeed())
	}
}

var _ = Describe("MPIJob", Ordered, Label("agent", "mpijob"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("mpi-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-mpi").NodeLabel("pool", "mpi").TopologyName("mpi-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("mpi-q").Flavor("tas-mpi", "cpu", "64").Obj())).To(Succeed())
		// Rack r1: three hosts of 1 CPU, exactly the example's three pods;
		// r2: five.
		for i := range 3 {
			createPoolNode(ctx, "mpi", fmt.Sprintf("mpi-r1-h%d", i), "b1", "r1", "1")
		}
		for i := range 5 {
			createPoolNode(ctx, "mpi", fmt.Sprintf("mpi-r2-h%d", i), "b1", "r2", "1")
		}
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "mpi-q")
	})

	It("admits KEP-2724's MPIJob with runLauncherAsWorker in one rack, ranks workers from index 1, and restores its templates exactly when evicted", func(ctx SpecContext) {
		j := piMPIJob(ns, "pi", 2, "pi")
		originals := map[kubeflow.MPIReplicaType]*corev1.PodTemplateSpec{}
		for t, s := range j.Spec.MPIReplicaSpecs {
			originals[t] = s.Template.DeepCopy()
		}
		Expect(worker.Client.Create(ctx, j)).To(Succeed())
		Expect(j.Spec.RunPolicy.Suspend).To(Equal(ptr.To(true)), "the chart's admission policy creates it suspended")

		By("one Workload of two pod sets, launcher and worker, grouped, in the tightest rack")
		var workerHosts []string
		Eventually(func(g Gomega) {
			wl := mpiJobWorkload(g, ctx, j)
			g.Expect(wl.Spec.PodSets).To(HaveLen(2))
			g.Expect(wl.Spec.PodSets[0].Name).To(Equal(mpijob.Launcher))
			g.Expect(wl.Spec.PodSets[1].Name).To(Equal(mpijob.Worker))
			g.Expect(wl.Spec.PodSets[1].Count).To(Equal(int32(2)))
			g.Expect(wl.Spec.PodSets[1].TopologyRequest.PodIndexLabel).To(Equal(ptr.To(mpijob.ReplicaIndexLabel)))
			g.Expect(wl.Spec.PodSets[1].TopologyRequest.PodIndexOffset).To(BeNil(), "a group leaves offsets to the group")
			g.Expect(metav1.IsControlledBy(wl, j)).To(BeTrue())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Admission.PodSetAssignments).To(HaveLen(2))
			racks := map[string]bool{}
			workerHosts = nil
			for i, psa := range wl.Status.Admission.PodSetAssignments {
				a, err := tas.Decode(psa.TopologyAssignment)
				g.Expect(err).NotTo(HaveOccurred())
				for _, d := range a.Domains {
					var node corev1.Node
					g.Expect(worker.Client.Get(ctx, client.ObjectKey{Name: d.Values[len(d.Values)-1]}, &node)).To(Succeed())
					racks[node.Labels[rack]] = true
					if i == 1 {
						for range d.Count {
							workerHosts = append(workerHosts, d.Values[len(d.Values)-1])
						}
					}
				}
			}
			g.Expect(racks).To(Equal(map[string]bool{"r1": true}), "launcher and workers in the one rack that holds exactly three pods")
		}, timeout).Should(Succeed())

		By("admitted, but untouched and suspended while the operator has not made the launcher Job: an operator whose cache is behind would make it from the template before the admission")
		resourceVersion := func() string {
			var got kubeflow.MPIJob
			Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, false)).To(BeTrue())
			return got.ResourceVersion
		}
		Consistently(resourceVersion, time.Second, 100*time.Millisecond).Should(Equal(resourceVersion()))
		Expect(mpiJobWorkload(Default, ctx, j).Status.Admission).NotTo(BeNil(), "still admitted: not taken for a Job its user suspended")

		By("the launcher Job comes late, from the template before the admission: brought to the admission, then resumed")
		launcher := operatorLauncher(ctx, j, originals[kubeflow.MPIReplicaTypeLauncher])
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, true)).To(BeFalse())
			for _, s := range got.Spec.MPIReplicaSpecs {
				g.Expect(s.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "mpi"))
				g.Expect(s.Template.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, mpijob.Kind.WorkloadName(j.Name)))
				g.Expect(s.Template.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}))
			}
			var l batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(launcher), &l)).To(Succeed())
			g.Expect(l.Spec.Template.Labels).To(HaveKeyWithValue(strata.PodSetLabel, mpijob.Launcher))
			g.Expect(l.Spec.Template.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}))
		}, timeout).Should(Succeed())

		By("the workers, indexes 1 and 2, ungated in rank order on the hosts assigned to the worker pod set")
		mpiWorkerPods(ctx, j)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(worker.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{strata.WorkloadLabel: mpijob.Kind.WorkloadName(j.Name)})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			slices.SortFunc(pods.Items, func(a, b corev1.Pod) int {
				return int(a.Labels[mpijob.ReplicaIndexLabel][0]) - int(b.Labels[mpijob.ReplicaIndexLabel][0])
			})
			var got []string
			for _, p := range pods.Items {
				g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s", p.Name)
				got = append(got, p.Spec.NodeSelector[host])
			}
			g.Expect(got).To(Equal(workerHosts))
		}, timeout).Should(Succeed())

		By("evicted while nothing else can take it: suspended, both templates exactly as written")
		setPoolTaint(ctx, "mpi", true)
		DeferCleanup(func(ctx SpecContext) { setPoolTaint(ctx, "mpi", false) })
		Eventually(func(g Gomega) {
			wl := mpiJobWorkload(g, ctx, j)
			wl.Status.Admission = nil
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Evicted", Message: "evicted by the test"})
			g.Expect(worker.Client.Status().Update(ctx, wl)).To(Succeed())
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, false)).To(BeTrue())
			for t, s := range got.Spec.MPIReplicaSpecs {
				g.Expect(equality.Semantic.DeepEqual(&s.Template, originals[t])).To(BeTrue(), "%s template %+v, want %+v", t, s.Template, originals[t])
			}
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, j)).To(Succeed())
		Expect(worker.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns),
			client.MatchingLabels{strata.WorkloadLabel: mpijob.Kind.WorkloadName(j.Name)}, client.GracePeriodSeconds(0))).To(Succeed())
	})

	It("brings the launcher Job the MPI operator made while the MPIJob was suspended to the admission before resuming it", func(ctx SpecContext) {
		ns2 := createNamespace(ctx, nil) // its LocalQueue comes later: the MPIJob waits
		j := piMPIJob(ns2, "early", 2, "")
		Expect(worker.Client.Create(ctx, j)).To(Succeed())
		By("the launcher Job, as the operator creates it at startup: suspended, from the template of that moment")
		launcher := operatorLauncher(ctx, j, &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template)
		createLocalQueue(ctx, ns2, "mpi-q")

		By("admitted and resumed: the launcher Job's template carries the admission, the operator's label kept")
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, true)).To(BeFalse())
			var l batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(launcher), &l)).To(Succeed())
			lt := l.Spec.Template
			g.Expect(lt.Spec.NodeSelector).To(HaveKeyWithValue("pool", "mpi"))
			g.Expect(lt.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}))
			g.Expect(lt.Labels).To(HaveKeyWithValue(strata.WorkloadLabel, mpijob.Kind.WorkloadName(j.Name)))
			g.Expect(lt.Labels).To(HaveKeyWithValue(strata.PodSetLabel, mpijob.Launcher))
			g.Expect(lt.Labels).To(HaveKeyWithValue("training.kubeflow.org/job-role", "launcher"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, j)).To(Succeed())
	})

	It("finishes a start that failed half-way instead of taking it for a suspension", func(ctx SpecContext) {
		ns2 := createNamespace(ctx, nil)
		j := piMPIJob(ns2, "halfway", 2, "")
		Expect(worker.Client.Create(ctx, j)).To(Succeed())
		By("a launcher Job that runs already: its template cannot take the admission, and every start stops half-way")
		launcher := operatorLauncher(ctx, j, &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template)
		setSuspend := func(suspend bool) {
			Eventually(func(g Gomega) {
				var l batchv1.Job
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(launcher), &l)).To(Succeed())
				l.Spec.Suspend = ptr.To(suspend)
				g.Expect(worker.Client.Update(ctx, &l)).To(Succeed())
			}, timeout).Should(Succeed())
		}
		setSuspend(false)
		createLocalQueue(ctx, ns2, "mpi-q")
		key := client.ObjectKey{Namespace: ns2, Name: mpijob.Kind.WorkloadName(j.Name)}
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(got.Annotations[strata.AddedByAdmissionAnnotation]).To(ContainSubstring(`"starting":true`))
		}, timeout).Should(Succeed())
		By("the Workload keeps its admission while the start is retried")
		Consistently(func(g Gomega) {
			var wl strata.Workload
			g.Expect(worker.Client.Get(ctx, key, &wl)).To(Succeed())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil())
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		By("once the launcher can take the admission, the MPIJob resumes")
		setSuspend(true)
		Eventually(func(g Gomega) {
			var got kubeflow.MPIJob
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
			g.Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, true)).To(BeFalse())
			g.Expect(got.Annotations[strata.AddedByAdmissionAnnotation]).NotTo(ContainSubstring("starting"))
			var l batchv1.Job
			g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(launcher), &l)).To(Succeed())
			g.Expect(l.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "mpi"))
		}, timeout).Should(Succeed())
		Expect(worker.Client.Delete(ctx, j)).To(Succeed())
	})

	It("keeps an MPIJob whose group no rack holds waiting, saying why on the Workload and in an event on the MPIJob", func(ctx SpecContext) {
		j := piMPIJob(ns, "too-wide", 6, "wide") // 7 pods in one rack: r2 has 5
		Expect(worker.Client.Create(ctx, j)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := mpiJobWorkload(g, ctx, j)
			g.Expect(wl.Status.Admission).To(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("rack"))
		}, timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(
				HaveField("Regarding.Kind", "MPIJob"), HaveField("Regarding.Name", j.Name), HaveField("Reason", "Pending"),
				HaveField("Note", ContainSubstring("rack")))))
		}, timeout).Should(Succeed())
		var got kubeflow.MPIJob
		Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
		Expect(ptr.Deref(got.Spec.RunPolicy.Suspend, false)).To(BeTrue())
	})
})
