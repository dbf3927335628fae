package fleet

import (
	"bytes"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// applyAgentChart renders the agent chart with helm (values set) and
// applies it to worker w with kubectl: its RBAC and admission policies are
// real; nothing runs its Deployment.
func applyAgentChart(w *framework.Cluster, set ...string) {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	args := []string{"template", "strata-agent", filepath.Join(framework.RepoRoot(), "charts", "strata-agent"),
		"--namespace", hubCfg.Dispatch.WorkerNamespace, "--kube-version", "1.37.1"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	rendered, err := exec.Command(filepath.Join(bin, "helm"), args...).Output()
	Expect(err).NotTo(HaveOccurred())
	apply := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", w.KubeconfigPath, "apply", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	out, err := apply.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
}

var _ = Describe("Least privilege", Serial, Label("rbac"), func() {
	It("gives the agent chart's hub identity what the hub needs on a worker and nothing else: no Pods, no Secrets, nothing in kube-system", func(ctx SpecContext) {
		w := worker("w3")
		applyAgentChart(w)
		ns := hubCfg.Dispatch.WorkerNamespace
		tenant, other := "lp-tenant", "lp-other"
		for _, n := range []string{tenant, other} {
			Expect(w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
		cfg := rest.CopyConfig(w.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":strata-hub-access",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
		as, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		Expect(err).NotTo(HaveOccurred())

		job := func(namespace string) *batchv1.Job { return testutil.MakeJob("lp", namespace).Image("x").Obj() }
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lp", Namespace: tenant}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		By("a Job in kube-system and one in a tenant namespace, made by an administrator, for the hub to try to delete or resize")
		Expect(w.Client.Create(ctx, job(metav1.NamespaceSystem))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(w.Client.Delete(ctx, job(metav1.NamespaceSystem))).To(Succeed()) })
		running := job(tenant)
		running.Name = "lp-running"
		Expect(w.Client.Create(ctx, running)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(w.Client.Delete(ctx, running)).To(Succeed()) })
		resize := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"parallelism":2}}`))

		type attempt struct {
			what string
			do   func() error
		}
		allowed := []attempt{
			{"create a Job in a tenant namespace", func() error { return as.Create(ctx, job(tenant), client.DryRunAll) }},
			// An elastic Job's copy is brought to the size its hub queue
			// granted.
			{"resize a Job in a tenant namespace", func() error { return as.Patch(ctx, running.DeepCopy(), resize, client.DryRunAll) }},
			{"read the worker's identity (namespace kube-system)", func() error { return as.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{}) }},
			{"list Jobs", func() error { return as.List(ctx, &batchv1.JobList{}) }},
			// Which namespaces and queues exist: the hub sends no copy a
			// worker would refuse for its queue.
			{"list namespaces", func() error { return as.List(ctx, &corev1.NamespaceList{}) }},
			{"list LocalQueues", func() error { return as.List(ctx, &strata.LocalQueueList{}) }},
			{"list ClusterQueues", func() error { return as.List(ctx, &strata.ClusterQueueList{}) }},
			// create cannot be limited to a name (the hub's own Lease may
			// exist already: another name proves the permission).
			{"create a Lease in its namespace", func() error {
				return as.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lp-probe", Namespace: ns}}, client.DryRunAll)
			}},
		}
		denied := []attempt{
			{"create a Pod", func() error { return as.Create(ctx, pod, client.DryRunAll) }},
			{"read a Secret", func() error {
				return as.Get(ctx, client.ObjectKey{Namespace: ns, Name: "strata-hub-access-token"}, &corev1.Secret{})
			}},
			{"list Secrets", func() error { return as.List(ctx, &corev1.SecretList{}) }},
			{"list Nodes", func() error { return as.List(ctx, &corev1.NodeList{}) }},
			{"create a namespace", func() error {
				return as.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lp-new"}}, client.DryRunAll)
			}},
			{"change a namespace", func() error {
				return as.Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, client.DryRunAll)
			}},
			{"create a LocalQueue", func() error {
				return as.Create(ctx, &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lp", Namespace: tenant},
					Spec: strata.LocalQueueSpec{ClusterQueue: "x"}}, client.DryRunAll)
			}},
			{"create a Job in kube-system", func() error {
				j := job(metav1.NamespaceSystem)
				j.Name = "lp-new"
				return as.Create(ctx, j, client.DryRunAll)
			}},
			{"delete a Job in kube-system", func() error { return as.Delete(ctx, job(metav1.NamespaceSystem), client.DryRunAll) }},
			{"resize a Job in kube-system", func() error { return as.Patch(ctx, job(metav1.NamespaceSystem), resize, client.DryRunAll) }},
			{"update another hub's fencing Lease", func() error {
				return as.Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "strata-fence-other", Namespace: ns}}, client.DryRunAll)
			}},
		}
		// The API server takes a moment to load a new admission policy.
		Eventually(func(g Gomega) {
			for _, a := range allowed {
				g.Expect(a.do()).To(Succeed(), a.what)
			}
			for _, a := range denied {
				err := a.do()
				g.Expect(err).To(HaveOccurred(), "the hub's identity may %s", a.what)
				g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", a.what, err)
			}
			g.Expect(as.Delete(ctx, job(metav1.NamespaceSystem), client.DryRunAll)).To(MatchError(ContainSubstring("hubAccess.protectedNamespaces")))
		}).Should(Succeed())

		By("with hubAccess.namespaces, copies only in the listed namespaces")
		Expect(w.Client.Delete(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "strata-hub-access-copies"}})).To(Succeed())
		applyAgentChart(w, "hubAccess.namespaces={"+tenant+"}")
		Eventually(func(g Gomega) {
			g.Expect(as.Create(ctx, job(tenant), client.DryRunAll)).To(Succeed())
			err := as.Create(ctx, job(other), client.DryRunAll)
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a Job in %s: %v", other, err)
		}).Should(Succeed())
	})
})
