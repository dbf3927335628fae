package fleet

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	hubcopies "strata.dev/strata/hub/controller/copies"
	"strata.dev/strata/hub/controller/workercluster"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// clusterIDOf reads the UID of a worker's kube-system namespace.
func clusterIDOf(ctx SpecContext, w string) string {
	GinkgoHelper()
	var ns corev1.Namespace
	Expect(worker(w).Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns)).To(Succeed())
	return string(ns.UID)
}

// setW3Kubeconfig replaces the kubeconfig of WorkerCluster w3's Secret.
func setW3Kubeconfig(ctx SpecContext, kubeconfig []byte) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var s corev1.Secret
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubCfg.Namespace, Name: "w3-kubeconfig"}, &s)).To(Succeed())
		s.Data["kubeconfig"] = kubeconfig
		g.Expect(hub.Client.Update(ctx, &s)).To(Succeed())
	}).Should(Succeed())
}

// setWCLabels replaces a WorkerCluster's labels.
func setWCLabels(ctx SpecContext, name string, labels map[string]string) {
	GinkgoHelper()
	Eventually(func(g Gomega) { // the hub writes its status meanwhile
		var wc strata.WorkerCluster
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
		wc.Labels = labels
		g.Expect(hub.Client.Update(ctx, &wc)).To(Succeed())
	}).Should(Succeed())
}

// summarized waits until each of the named workers publishes a summary of
// flavor with its nodes, and the hub has read one (see waitSummaries).
func summarized(ctx SpecContext, flavor string, names ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for _, name := range names {
			var list strata.CapacitySummaryList
			g.Expect(worker(name).Client.List(ctx, &list)).To(Succeed())
			g.Expect(list.Items).To(ContainElement(And(HaveField("Spec.Flavor", flavor), HaveField("Status.Domains", Not(BeEmpty())))), name)
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
			g.Expect(wc.Status.Summaries).To(ContainElement(HaveField("Flavor", flavor)), name)
		}
	}).Should(Succeed())
}

// annotateWC sets (value != "") or removes an annotation of a WorkerCluster.
func annotateWC(ctx SpecContext, name, key, value string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var wc strata.WorkerCluster
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
		if value == "" {
			delete(wc.Annotations, key)
		} else {
			if wc.Annotations == nil {
				wc.Annotations = map[string]string{}
			}
			wc.Annotations[key] = value
		}
		g.Expect(hub.Client.Update(ctx, &wc)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("Worker identity", Serial, func() {
	It("records each worker's cluster ID, refuses a credential that reaches another cluster, and never lets two WorkerClusters stand for one cluster", func(ctx SpecContext) {
		e := newEnv(ctx, "ident", map[string][][]string{"w1": {{"2"}}})
		By("each WorkerCluster records the UID of its cluster's kube-system namespace")
		for _, w := range workers {
			id := clusterIDOf(ctx, w.Name)
			Eventually(func(g Gomega) {
				var wc strata.WorkerCluster
				g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: w.Name}, &wc)).To(Succeed())
				g.Expect(wc.Status.ClusterID).To(Equal(id))
				g.Expect(wc.Finalizers).To(ContainElement(strata.DrainFinalizer))
			}).Should(Succeed())
		}

		By("a Job runs on w1")
		job := e.job("ident", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
		}).Should(Succeed())

		By("a second WorkerCluster for w1 is refused, and takes nothing of w1's for an orphan")
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubCfg.Namespace, Name: "w1-again-kubeconfig"}, Data: map[string][]byte{"kubeconfig": worker("w1").Kubeconfig}}
		Expect(hub.Client.Create(ctx, s)).To(Succeed())
		Expect(hub.Client.Create(ctx, testutil.MakeWorkerCluster("w1-again").KubeConfigSecret(hubCfg.Namespace, s.Name).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w1-again", strata.WorkerClusterConnected)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(workercluster.ReasonDuplicateCluster))
			g.Expect(c.Message).To(ContainSubstring("WorkerCluster w1 already stands for"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
			g.Expect(wcCondition(g, ctx, "w1", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
		}, 3*hubCfg.Dispatch.OrphanCheckInterval.Duration, 200*time.Millisecond).Should(Succeed())
		By("deleting the refused WorkerCluster: nothing was dispatched there, it goes at once")
		Expect(hub.Client.Delete(ctx, &strata.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1-again"}})).To(Succeed())
		Eventually(func(g Gomega) {
			err := hub.Client.Get(ctx, client.ObjectKey{Name: "w1-again"}, &strata.WorkerCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}).Should(Succeed())
		Expect(hub.Client.Delete(ctx, s)).To(Succeed())

		By("w3's credential now reaches w2: refused as another cluster than the one dispatched to")
		w3ID, w2ID := clusterIDOf(ctx, "w3"), clusterIDOf(ctx, "w2")
		var w3Secret corev1.Secret
		Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubCfg.Namespace, Name: "w3-kubeconfig"}, &w3Secret)).To(Succeed())
		original := w3Secret.Data["kubeconfig"]
		setW3Kubeconfig(ctx, worker("w2").Kubeconfig)
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w3", strata.WorkerClusterConnected)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonClusterChanged))
			g.Expect(c.Message).To(ContainSubstring(w2ID))
			g.Expect(c.Message).To(ContainSubstring(w3ID))
			g.Expect(c.Message).To(ContainSubstring(strata.AcceptClusterIDAnnotation))
		}).Should(Succeed())
		By("accepting the new cluster: it is w2's, which WorkerCluster w2 stands for, so still refused")
		annotateWC(ctx, "w3", strata.AcceptClusterIDAnnotation, w2ID)
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w3", strata.WorkerClusterConnected)
			g.Expect(c.Reason).To(Equal(workercluster.ReasonDuplicateCluster))
		}).Should(Succeed())
		By("the credential reaches w3 again: connected, the recorded ID unchanged")
		annotateWC(ctx, "w3", strata.AcceptClusterIDAnnotation, "")
		setW3Kubeconfig(ctx, original)
		Eventually(func(g Gomega) {
			g.Expect(wcCondition(g, ctx, "w3", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w3"}, &wc)).To(Succeed())
			g.Expect(wc.Status.ClusterID).To(Equal(w3ID))
		}).Should(Succeed())
		Expect(copies(Default, ctx, job)).To(Equal([]string{"w1"}))
	})

	It("drains a deleted WorkerCluster: its copies' pods are gone before their workloads are placed elsewhere", func(ctx SpecContext) {
		e := newEnv(ctx, "drain", map[string][][]string{
			"w1": {{"4", "4"}},
			"w2": {{"2", "2"}}, // the tightest fit
		})
		summarized(ctx, e.flavor, "w1", "w2")
		job := e.job("drained", 4, "1", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
		}).Should(Succeed())

		By("a pod of the copy on w2 that takes its time to go (a finalizer holds it)")
		w2 := worker("w2")
		var cp batchv1.Job
		Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(job), &cp)).To(Succeed())
		const hold = "test.strata.dev/hold"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "drained-0", Namespace: e.ns, Finalizers: []string{hold},
				Labels: map[string]string{strata.WorkloadLabel: workload.JobWorkloadName(cp.Name)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: cp.Name, UID: cp.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		Expect(w2.Client.Create(ctx, pod)).To(Succeed())

		By("deleting WorkerCluster w2")
		deleted := time.Now()
		Expect(hub.Client.Delete(ctx, &strata.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w2"}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				err := hub.Client.Get(ctx, client.ObjectKey{Name: "w2"}, &strata.WorkerCluster{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			}).Should(Succeed())
			By("registering w2 again")
			Expect(hub.Client.Create(ctx, testutil.MakeWorkerCluster("w2").KubeConfigSecret(hubCfg.Namespace, "w2-kubeconfig").Obj())).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(wcCondition(g, ctx, "w2", strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
			}).Should(Succeed())
		})
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w2", workercluster.ConditionDraining)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())

		By("while the pod remains, the copy stays (foreground deletion) and the workload is not placed elsewhere")
		Consistently(func(g Gomega) {
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w2"}))
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w2"}, &wc)).To(Succeed())
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "the garbage collector deletes the pod first")
		}).Should(Succeed())
		By("the hub Workload and the Draining condition name the pod the take-back waits for, as w2's agent reports it")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			c := meta.FindStatusCondition(wl.Status.Conditions, hubcopies.ConditionCopyGoing)
			g.Expect(c).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(c.Reason).To(Equal(hubcopies.ReasonWaitingForPods))
			g.Expect(c.Message).To(ContainSubstring("drained-0 (Terminating since "))
			g.Expect(wcCondition(g, ctx, "w2", workercluster.ConditionDraining).Message).To(ContainSubstring(e.ns + "/drained: drained-0 (Terminating since "))
		}).Should(Succeed())

		By("the pod goes: the copy goes, then the workload runs on w1, never on two workers at once")
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(w2.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			p.Finalizers = nil
			g.Expect(w2.Client.Update(ctx, &p)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			where := copies(g, ctx, job)
			Expect(len(where)).To(BeNumerically("<=", 1), "copies on %v at once", where)
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(where).To(Equal([]string{"w1"}))
		}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("re-placed on w1 %s after WorkerCluster w2 was deleted (3 s of it waiting for the held pod)\n", time.Since(deleted).Round(100*time.Millisecond))
		wl := hubWorkload(Default, ctx, job)
		last := wl.Status.Placement.Attempts[len(wl.Status.Placement.Attempts)-2]
		Expect(last.Cluster).To(Equal("w2"))
		Expect(last.Message).To(ContainSubstring("being deleted"))
		Expect(meta.FindStatusCondition(wl.Status.Conditions, hubcopies.ConditionCopyGoing)).To(BeNil(), "the take-back is over")
	})
})
