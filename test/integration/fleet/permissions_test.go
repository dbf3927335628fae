package fleet

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	strata "strata.dev/strata/api/v1beta1"
	hubcopies "strata.dev/strata/hub/controller/copies"
)

var _ = Describe("Permissions", func() {
	It("names a permission the hub lacks on one worker, and the others keep working", func(ctx SpecContext) {
		By("w3's credential replaced by a user's that may read but not create Jobs (the same cluster)")
		w3 := worker("w3")
		Expect(w3.Client.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "hub-reader"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"strata.dev"}, Resources: []string{"capacitysummaries", "workloads"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{metav1.NamespaceSystem}},
				// Its fencing Lease, as the agent chart grants: a worker the
				// hub cannot fence gets no copies at all.
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			},
		})).To(Succeed())
		Expect(w3.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "hub-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hub-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "hub-reader"}},
		})).To(Succeed())
		user, err := w3.AddUser(envtest.User{Name: "hub-reader"})
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		var w3Secret corev1.Secret
		Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubCfg.Namespace, Name: "w3-kubeconfig"}, &w3Secret)).To(Succeed())
		original := w3Secret.Data["kubeconfig"]
		setW3Kubeconfig(ctx, kubeconfig)
		DeferCleanup(func(ctx SpecContext) {
			setW3Kubeconfig(ctx, original)
			setWCLabels(ctx, "w3", nil)
		})
		setWCLabels(ctx, "w3", map[string]string{"access": "read-only"})

		e := newEnv(ctx, "perm", map[string][][]string{"w3": {{"4"}}})
		Eventually(func(g Gomega) { // the hub writes its status meanwhile
			var cq strata.ClusterQueue
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-perm"}, &cq)).To(Succeed())
			cq.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"access": "read-only"}}
			g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		job := e.job("denied", 1, "1", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := wcCondition(g, ctx, "w3", strata.WorkerClusterDispatching)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hubcopies.ReasonForbidden))
			g.Expect(c.Message).To(ContainSubstring("may not create jobs.batch in namespace ns-perm on w3"))
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			g.Expect(wl.Status.Placement.Attempts[0].Result).To(Equal(strata.PlacementRejected))
			c2 := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
			g.Expect(c2).NotTo(BeNil())
			g.Expect(c2.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(strings.Contains(c2.Message, "w3")).To(BeTrue(), c2.Message)
			g.Expect(copies(g, ctx, job)).To(BeEmpty())
		}).Should(Succeed())

		By("the other workers still taking Jobs")
		other := newEnv(ctx, "perm-ok", map[string][][]string{"w1": {{"4"}}})
		ok := other.job("allowed", 1, "1", nil)
		Expect(hub.Client.Create(ctx, ok)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(hubWorkload(g, ctx, ok).Status.Admission).NotTo(BeNil())
			for _, w := range []string{"w1", "w2", "w3"} {
				g.Expect(wcCondition(g, ctx, w, strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
			}
		}).Should(Succeed())
	})
})
