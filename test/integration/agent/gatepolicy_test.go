package agent

import (
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/test/integration/framework"
)

// The agent's chart renders a policy (templates/gate-policy.yaml, with
// the release's ServiceAccount) that the suite's kubectl apply of the raw
// admission policies does not install: this spec renders it with helm.
var _ = Describe("The chart's topology gate policy", func() {
	It("lets only strata-agent's ServiceAccount and cluster administrators remove the strata.dev/topology gate", func(ctx SpecContext) {
		ns := "gate-policy"
		Expect(worker.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

		By("rendering the chart's gate policy with helm for release strata-agent in strata-system, and applying it")
		bin, err := framework.BinDir()
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(filepath.Join(bin, "helm"), "template", "strata-agent", filepath.Join(framework.RepoRoot(), "charts", "strata-agent"),
			"--namespace", "strata-system", "--kube-version", "1.37.1", "--show-only", "templates/gate-policy.yaml").Output()
		Expect(err).NotTo(HaveOccurred(), string(out))
		file := filepath.Join(GinkgoT().TempDir(), "gate-policy.yaml")
		Expect(os.WriteFile(file, out, 0o600)).To(Succeed())
		applied, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", worker.KubeconfigPath, "apply", "-f", file).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(applied))
		DeferCleanup(func() {
			out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", worker.KubeconfigPath, "delete", "--ignore-not-found", "-f", file).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		})

		By("a tenant and strata-agent's ServiceAccount, both allowed to update pods in the namespace")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "update", "patch"}}}}
		Expect(worker.Client.Create(ctx, role)).To(Succeed())
		Expect(worker.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"},
				{Kind: rbacv1.ServiceAccountKind, Name: "strata-agent", Namespace: "strata-system"}},
		})).To(Succeed())
		as := func(user string) client.Client {
			cfg := rest.CopyConfig(worker.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			c, err := client.New(cfg, client.Options{Scheme: worker.Client.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			return c
		}
		tenant, agent := as("tenant"), as("system:serviceaccount:strata-system:strata-agent")

		gated := func(name string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "strata.dev/topology"}},
					Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			Expect(worker.Client.Create(ctx, p)).To(Succeed())
			return p
		}
		ungate := func(c client.Client, p *corev1.Pod, opts ...client.UpdateOption) error {
			var cur corev1.Pod
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
				return err
			}
			cur.Spec.SchedulingGates = nil
			cur.Spec.NodeSelector = map[string]string{"anywhere": "true"}
			return c.Update(ctx, &cur, opts...)
		}

		By("the tenant may not remove the gate (once the policy is in force)")
		p := gated("tenants")
		Eventually(func(g Gomega) {
			err := ungate(tenant, p, client.DryRunAll)
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "the policy is not in force yet: %v", err)
			g.Expect(err.Error()).To(ContainSubstring("strata.dev/topology scheduling gate is strata-agent's to remove"))
		}).Should(Succeed())
		Expect(ungate(tenant, p)).NotTo(Succeed())

		By("the tenant may still label the gated pod")
		Eventually(func(g Gomega) {
			var cur corev1.Pod
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
			cur.Labels = map[string]string{"team": "a"}
			g.Expect(tenant.Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())

		By("strata-agent's ServiceAccount and a cluster administrator may")
		Expect(ungate(agent, p)).To(Succeed())
		Expect(ungate(worker.Client, gated("admins"))).To(Succeed())
	})
})
