package hub

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/controller/workercluster"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// testProvider is the hub's access provider in these tests:
// testdata/execplugin, which answers with the token in the file a
// ClusterProfile's exec extension names.
const testProvider = "strata-test"

// addAccessProvider builds the exec plugin and configures it as the hub's
// access provider testProvider.
func addAccessProvider(cfg *configv1beta1.HubConfiguration) {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "strata-execplugin-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	plugin := filepath.Join(dir, "execplugin")
	out, err := exec.Command("go", "build", "-o", plugin, "./testdata/execplugin").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the exec plugin: %s", out)
	cfg.ClusterProfile.AccessProviders = append(cfg.ClusterProfile.AccessProviders, configv1beta1.AccessProvider{
		Name: testProvider,
		ExecConfig: &clientcmdapi.ExecConfig{
			Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode, ProvideClusterInfo: true,
		},
	})
	Expect(config.ValidateHub(cfg)).To(BeEmpty())
}

// namespace makes sure namespace name exists on c (envtest never removes
// one, so it stays).
func namespace(ctx SpecContext, c client.Client, name string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
}

// create creates obj on the hub, deleted after the spec.
func create(ctx SpecContext, obj client.Object) {
	GinkgoHelper()
	Expect(hub.Client.Create(ctx, obj)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, obj))).To(Succeed()) })
}

// createProfile creates cp on the hub with its status (access providers),
// as its cluster manager would.
func createProfile(ctx SpecContext, cp *inventoryv1alpha1.ClusterProfile) {
	GinkgoHelper()
	namespace(ctx, hub.Client, cp.Namespace)
	status := cp.Status.DeepCopy()
	if status.Conditions == nil {
		status.Conditions = []metav1.Condition{}
	}
	create(ctx, cp)
	cp.Status = *status
	Expect(hub.Client.Status().Update(ctx, cp)).To(Succeed())
}

// serviceAccountToken creates ServiceAccount ns/name on w, allowed to read
// everything (what the hub reads there is checked in workercluster_test.go),
// and returns a token of it: what the managed-serviceaccount addon projects
// to the hub, or a cloud's plugin hands out.
func serviceAccountToken(ctx SpecContext, w *framework.Cluster, ns, name string) string {
	GinkgoHelper()
	namespace(ctx, w.Client, ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "strata-test-" + ns + "-" + name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		Expect(w.Client.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(w.Client.Delete(ctx, obj))).To(Succeed()) })
	}
	cs, err := kubernetes.NewForConfig(w.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// tokenFile writes token to a file and returns the exec extension that
// makes testProvider's plugin answer with it.
func tokenFile(token string) []byte {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(path, []byte(token), 0o600)).To(Succeed())
	ext, err := json.Marshal(map[string]string{"tokenFile": path})
	Expect(err).NotTo(HaveOccurred())
	return ext
}

// connected waits for WorkerCluster name to be connected, with a message
// naming its source.
func connected(ctx SpecContext, name, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := condition(g, ctx, name, strata.WorkerClusterConnected)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Message).To(Equal(message))
	}).Should(Succeed())
}

// notConnected waits for WorkerCluster name to be disconnected for reason.
func notConnected(ctx SpecContext, name, reason, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := condition(g, ctx, name, strata.WorkerClusterConnected)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		if message != "" {
			g.Expect(c.Message).To(Equal(message))
		}
	}).Should(Succeed())
}

const execExtension = "client.authentication.k8s.io/exec"

var _ = Describe("WorkerCluster sources", func() {
	It("connects through a ClusterProfile's access provider, running its exec plugin", func(ctx SpecContext) {
		w := workers[0]
		token := serviceAccountToken(ctx, w, "strata-access", "cp-reader")
		cp := testutil.MakeClusterProfile("fleet", "w1").
			AccessProvider(testProvider, w.Config.Host, w.Config.CAData).Extension(execExtension, tokenFile(token)).Obj()
		createProfile(ctx, cp)
		register(ctx, testutil.MakeWorkerCluster("w1-profile").ClusterProfile("fleet", "w1").Obj())
		connected(ctx, "w1-profile", "connected to "+w.Config.Host+" through ClusterProfile fleet/w1 (access provider strata-test)")

		By("reading the worker's summaries")
		publish(ctx, w, "tas-a100", time.Now())
		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "w1-profile", strata.WorkerClusterSummariesFresh).Status).To(Equal(metav1.ConditionTrue))
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "w1-profile"}, &wc)).To(Succeed())
			g.Expect(wc.Status.Summaries).To(ConsistOf(HaveField("Flavor", "tas-a100")))
		}).Should(Succeed())

		By("following the ClusterProfile when its access providers change")
		cp.Status.AccessProviders[0].Name = "kubelogin"
		Expect(hub.Client.Status().Update(ctx, cp)).To(Succeed())
		notConnected(ctx, "w1-profile", workercluster.ReasonAccessProviderNotConfigured,
			`ClusterProfile fleet/w1 offers the access providers "kubelogin", none of which the hub has a plugin for: add one to clusterProfile.accessProviders of the hub's configuration (it has "strata-test")`)
	})

	It("connects to an OCM ManagedCluster at its client config with a ManagedServiceAccount's token", func(ctx SpecContext) {
		w := workers[1]
		token := serviceAccountToken(ctx, w, "open-cluster-management-agent-addon", hubCfg.ManagedCluster.ServiceAccountName)
		namespace(ctx, hub.Client, "mc1")
		mc := testutil.MakeManagedCluster("mc1").ClientConfig(w.Config.Host, w.Config.CAData).Obj()
		create(ctx, mc)
		create(ctx, testutil.MakeTokenSecret("mc1", hubCfg.ManagedCluster.ServiceAccountName, token))
		register(ctx, testutil.MakeWorkerCluster("mc1").ManagedCluster("mc1").Obj())
		connected(ctx, "mc1", "connected to "+w.Config.Host+" through ManagedServiceAccount token Secret mc1/strata-hub")
		Eventually(func(g Gomega) {
			g.Expect(condition(g, ctx, "mc1", strata.WorkerClusterSummariesFresh).Reason).To(Equal(workercluster.ReasonNoSummaries))
		}).Should(Succeed())

		By("following the ManagedCluster when its address changes")
		mc.Spec.ManagedClusterClientConfigs[0].URL = "https://127.0.0.1:1" // nothing listens there
		Expect(hub.Client.Update(ctx, mc)).To(Succeed())
		notConnected(ctx, "mc1", workercluster.ReasonUnreachable, "")
	})

	It("prefers the ClusterProfile OCM publishes for a ManagedCluster", func(ctx SpecContext) {
		w := workers[0]
		token := serviceAccountToken(ctx, w, "strata-access", "ocm-reader")
		namespace(ctx, hub.Client, "mc2")
		create(ctx, testutil.MakeManagedCluster("mc2").ClientConfig("https://127.0.0.1:1", nil).Obj())
		ns := hubCfg.ManagedCluster.ClusterProfileNamespace
		createProfile(ctx, testutil.MakeClusterProfile(ns, "mc2").Manager("open-cluster-management").Label(ocmclusterv1.ClusterNameLabelKey, "mc2").
			AccessProvider(testProvider, w.Config.Host, w.Config.CAData).Extension(execExtension, tokenFile(token)).Obj())
		register(ctx, testutil.MakeWorkerCluster("mc2").ManagedCluster("mc2").Obj())
		connected(ctx, "mc2", "connected to "+w.Config.Host+" through OCM's ClusterProfile "+ns+"/mc2 (access provider strata-test)")

		By("falling back to the client config and ManagedServiceAccount without it")
		Expect(hub.Client.Delete(ctx, &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mc2"}})).To(Succeed())
		notConnected(ctx, "mc2", workercluster.ReasonTokenSecretNotFound,
			"Secret mc2/strata-hub does not exist: create ManagedServiceAccount strata-hub in namespace mc2, whose token the managed-serviceaccount addon writes there")
	})

	It("says what to fix when a source gives no credential", func(ctx SpecContext) {
		createProfile(ctx, testutil.MakeClusterProfile("fleet", "unconfigured").AccessProvider("kubelogin", "https://w.example", nil).Obj())
		create(ctx, testutil.MakeManagedCluster("mc-bare").Obj())
		create(ctx, testutil.MakeManagedCluster("mc-notoken").ClientConfig("https://mc-notoken.example", nil).Obj())
		register(ctx, testutil.MakeWorkerCluster("cp-absent").ClusterProfile("fleet", "absent").Obj())
		register(ctx, testutil.MakeWorkerCluster("cp-unconfigured").ClusterProfile("fleet", "unconfigured").Obj())
		register(ctx, testutil.MakeWorkerCluster("mc-absent").ManagedCluster("absent").Obj())
		register(ctx, testutil.MakeWorkerCluster("mc-bare").ManagedCluster("mc-bare").Obj())
		register(ctx, testutil.MakeWorkerCluster("mc-notoken").ManagedCluster("mc-notoken").Obj())

		notConnected(ctx, "cp-absent", workercluster.ReasonClusterProfileNotFound, "ClusterProfile fleet/absent does not exist")
		notConnected(ctx, "cp-unconfigured", workercluster.ReasonAccessProviderNotConfigured,
			`ClusterProfile fleet/unconfigured offers the access providers "kubelogin", none of which the hub has a plugin for: add one to clusterProfile.accessProviders of the hub's configuration (it has "strata-test")`)
		notConnected(ctx, "mc-absent", workercluster.ReasonManagedClusterNotFound, "ManagedCluster absent does not exist")
		notConnected(ctx, "mc-bare", workercluster.ReasonNoClientConfig,
			"ManagedCluster mc-bare has no spec.managedClusterClientConfigs URL, and OCM publishes no ClusterProfile "+hubCfg.ManagedCluster.ClusterProfileNamespace+"/mc-bare for it")
		notConnected(ctx, "mc-notoken", workercluster.ReasonTokenSecretNotFound,
			"Secret mc-notoken/strata-hub does not exist: create ManagedServiceAccount strata-hub in namespace mc-notoken, whose token the managed-serviceaccount addon writes there")
	})
})
