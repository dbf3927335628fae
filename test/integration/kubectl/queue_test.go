package kubectl

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("kubectl strata queue", Label("kubectl"), func() {
	It("lists a worker's pending workloads in admission order, and explain gives a Job's position", func(ctx SpecContext) {
		create(ctx, worker, testutil.MakeClusterQueue("ordered").Flavor("gpu").Obj(), nil)
		create(ctx, worker, testutil.MakeLocalQueue("ordered", namespace, "ordered"), nil)
		for _, w := range []struct {
			name     string
			priority int32
		}{{"low", 1}, {"high", 100}, {"mid", 10}} {
			j := create(ctx, worker, job("q-"+w.name, "ordered"), nil)
			wl := jobWorkload(j)
			wl.Spec.Priority = ptr.To(w.priority)
			wl.Spec.QueueName = "ordered"
			create(ctx, worker, wl, func(wl *strata.Workload) {
				condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "waiting for capacity")
			})
		}
		out, err := run(ctx, "queue", "cq/ordered", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("ClusterQueue ordered (on the worker): 3 pending\n"))
		Expect(out).To(MatchRegexp(`(?m)^1\s+1\s+ml\s+job-q-high\s+ordered\s+100\s`))
		Expect(out).To(MatchRegexp(`(?m)^2\s+2\s+ml\s+job-q-mid\s+ordered\s+10\s`))
		Expect(out).To(MatchRegexp(`(?m)^3\s+3\s+ml\s+job-q-low\s+ordered\s+1\s`))

		out, err = run(ctx, "queue", "ordered", "-n", namespace, "--kubeconfig", worker.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"localQueue": "ml/ordered"`))

		out, err = run(ctx, "explain", "q-mid", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Position:   2 of 3 in ClusterQueue ordered\n"))

		_, err = run(ctx, "queue", "nowhere", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("LocalQueue ml/nowhere not found on")))
	})
})

var _ = Describe("kubectl strata queue under admission fair sharing", Label("kubectl"), func() {
	It("weighs the LocalQueues' usage with the agent's configuration from its chart's ConfigMap, and says when it cannot read it", func(ctx SpecContext) {
		cq := testutil.MakeClusterQueue("fair").Flavor("gpu").Obj()
		cq.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
		create(ctx, worker, cq, nil)
		// fair-cpu consumed 8 CPUs, fair-gpu 1 CPU and 1 GPU: fair-gpu
		// first while each resource weighs 1, fair-cpu first once a GPU
		// weighs 10.
		for name, used := range map[string]corev1.ResourceList{
			"fair-cpu": {corev1.ResourceCPU: resource.MustParse("8")},
			"fair-gpu": {corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("1")},
		} {
			create(ctx, worker, testutil.MakeLocalQueue(name, namespace, "fair"), func(lq *strata.LocalQueue) {
				lq.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
					ConsumedResources: used, LastUpdate: metav1.Now()}}
			})
			j := create(ctx, worker, job("afs-"+name, name), nil)
			wl := jobWorkload(j)
			wl.Spec.QueueName = name
			create(ctx, worker, wl, nil)
		}
		cpuFirst := `(?s)\n1\s+1\s+ml\s+job-afs-fair-cpu\s.*\n2\s+1\s+ml\s+job-afs-fair-gpu\s`
		gpuFirst := `(?s)\n1\s+1\s+ml\s+job-afs-fair-gpu\s.*\n2\s+1\s+ml\s+job-afs-fair-cpu\s`

		By("no agent ConfigMap: each resource weighs 1, and the header says why")
		out, err := run(ctx, "queue", "cq/fair", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("ClusterQueue fair (on the worker): 2 pending; by LocalQueue usage first (admission fair sharing; each resource weighing 1: " +
			"no ConfigMap strata-agent-config labelled app.kubernetes.io/name=strata-agent on "))
		Expect(out).To(MatchRegexp(gpuFirst))

		By("the chart's ConfigMap, with a GPU weighing 10")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}}
		if err := worker.Client.Create(ctx, ns); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(ctx, worker, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "strata-agent-config", Labels: map[string]string{"app.kubernetes.io/name": "strata-agent"}},
			Data: map[string]string{"config.yaml": "apiVersion: config.strata.dev/v1beta1\nkind: AgentConfiguration\n" +
				"admissionFairSharing:\n  usageHalfLifeTime: 10m\n  resourceWeights:\n    nvidia.com/gpu: 10\n"},
		}, nil)
		out, err = run(ctx, "queue", "cq/fair", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("ClusterQueue fair (on the worker): 2 pending; by LocalQueue usage first (admission fair sharing; " +
			"resource weights nvidia.com/gpu=10, others 1: ConfigMap strata-system/strata-agent-config)\n"))
		Expect(out).To(MatchRegexp(cpuFirst))
		out, err = run(ctx, "queue", "fair-gpu", "-n", namespace, "--kubeconfig", worker.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"resourceWeights": {
    "nvidia.com/gpu": 10
  },
  "resourceWeightsFrom": "ConfigMap strata-system/strata-agent-config"`))
		Expect(out).To(ContainSubstring(`"positionInClusterQueue": 2`))

		By("a user who may read Strata's objects but not ConfigMaps: each resource weighs 1, and the header says why")
		reader, err := worker.AddUser(envtest.User{Name: "queue-reader"})
		Expect(err).NotTo(HaveOccurred())
		create(ctx, worker, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "queue-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{strata.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}}}, nil)
		create(ctx, worker, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "queue-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "queue-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "queue-reader"}}}, nil)
		kubeconfig, err := reader.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(GinkgoT().TempDir(), "reader.kubeconfig")
		Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
		Eventually(func(g Gomega) {
			out, err := run(ctx, "queue", "cq/fair", "--kubeconfig", path)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(HavePrefix("ClusterQueue fair (on the worker): 2 pending; by LocalQueue usage first (admission fair sharing; each resource weighing 1: " +
				"the strata-agent configuration is not readable (ConfigMap strata-system/strata-agent-config: "))
			g.Expect(out).To(ContainSubstring("forbidden"))
			g.Expect(out).To(MatchRegexp(gpuFirst))
		}).Should(Succeed())

		By("the same user with the configuration file (--config)")
		cfg := filepath.Join(GinkgoT().TempDir(), "agent.yaml")
		Expect(os.WriteFile(cfg, []byte("apiVersion: config.strata.dev/v1beta1\nkind: AgentConfiguration\n"+
			"admissionFairSharing:\n  resourceWeights:\n    nvidia.com/gpu: 8\n"), 0o600)).To(Succeed())
		out, err = run(ctx, "queue", "cq/fair", "--kubeconfig", path, "--config", cfg)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("ClusterQueue fair (on the worker): 2 pending; by LocalQueue usage first (admission fair sharing; " +
			"resource weights nvidia.com/gpu=8, others 1: " + cfg + ")\n"))
		Expect(out).To(MatchRegexp(cpuFirst))
		_, err = run(ctx, "queue", "cq/fair", "--kubeconfig", path, "--config", cfg+".missing")
		Expect(err).To(MatchError(ContainSubstring("reading --config")))
	})
})
