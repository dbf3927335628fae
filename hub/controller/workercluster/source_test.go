package workercluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
)

// resolved is what a test expects of resolve: a failure, or where the
// credential came from and the server it reaches.
type resolved struct {
	Reason, Message string
	Via, Host       string
}

func TestResolve(t *testing.T) {
	const ns = "strata-system"
	plugin := configv1beta1.AccessProvider{Name: "cp-creds", ExecConfig: &clientcmdapi.ExecConfig{
		Command: "/plugins/cp-creds", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	all := APIs{ClusterProfiles: true, ManagedClusters: true}
	ocmProfile := func(name string) *testutil.ClusterProfileWrapper {
		return testutil.MakeClusterProfile(ns, name).Manager(ocmClusterManager).Label(ocmclusterv1.ClusterNameLabelKey, name)
	}
	cases := map[string]struct {
		wc      *strata.WorkerCluster
		objects []client.Object
		apis    APIs
		want    resolved
	}{
		"a kubeconfig Secret": {
			wc:      testutil.MakeWorkerCluster("w").KubeConfigSecret(ns, "w").Obj(),
			objects: []client.Object{kubeconfigSecret(ns, "w", "kubeconfig", "https://w.example:6443")},
			want:    resolved{Via: "Secret strata-system/w", Host: "https://w.example:6443"},
		},
		"a kubeconfig Secret elsewhere": {
			wc:      testutil.MakeWorkerCluster("w").KubeConfigSecret("tenant", "w").Obj(),
			objects: []client.Object{kubeconfigSecret("tenant", "w", "kubeconfig", "https://w.example:6443")},
			want: resolved{Reason: ReasonSecretOutside,
				Message: "the hub reads kubeconfig Secrets only from its own namespace strata-system, not tenant: move Secret w there"},
		},
		"a missing kubeconfig Secret": {
			wc:   testutil.MakeWorkerCluster("w").KubeConfigSecret(ns, "w").Obj(),
			want: resolved{Reason: ReasonSecretNotFound, Message: "Secret strata-system/w does not exist"},
		},
		"a ClusterProfile": {
			wc:      testutil.MakeWorkerCluster("w").ClusterProfile("fleet", "w").Obj(),
			objects: []client.Object{testutil.MakeClusterProfile("fleet", "w").AccessProvider("cp-creds", "https://w.example:6443", nil).Obj()},
			apis:    all,
			want:    resolved{Via: "ClusterProfile fleet/w (access provider cp-creds)", Host: "https://w.example:6443"},
		},
		"a ClusterProfile on a hub without the CRD": {
			wc: testutil.MakeWorkerCluster("w").ClusterProfile("fleet", "w").Obj(),
			want: resolved{Reason: ReasonAPINotInstalled,
				Message: "the hub cluster serves no ClusterProfiles (multicluster.x-k8s.io/v1alpha1): install the CRD clusterprofiles.multicluster.x-k8s.io of sigs.k8s.io/cluster-inventory-api (strata-hub restarts itself within 30s once it is served)"},
		},
		"a missing ClusterProfile": {
			wc:   testutil.MakeWorkerCluster("w").ClusterProfile("fleet", "w").Obj(),
			apis: all,
			want: resolved{Reason: ReasonClusterProfileNotFound, Message: "ClusterProfile fleet/w does not exist"},
		},
		"a ClusterProfile offering a provider the hub has no plugin for": {
			wc:      testutil.MakeWorkerCluster("w").ClusterProfile("fleet", "w").Obj(),
			objects: []client.Object{testutil.MakeClusterProfile("fleet", "w").AccessProvider("token", "https://w.example:6443", nil).Obj()},
			apis:    all,
			want: resolved{Reason: ReasonAccessProviderNotConfigured,
				Message: `ClusterProfile fleet/w offers the access providers "token", none of which the hub has a plugin for: add one to clusterProfile.accessProviders of the hub's configuration (it has "cp-creds")`},
		},
		"a ManagedCluster on a hub without OCM": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			want: resolved{Reason: ReasonAPINotInstalled,
				Message: "the hub cluster serves no ManagedClusters (cluster.open-cluster-management.io/v1): install Open Cluster Management's hub (strata-hub restarts itself within 30s once it is served)"},
		},
		"a missing ManagedCluster": {
			wc:   testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			apis: all,
			want: resolved{Reason: ReasonManagedClusterNotFound, Message: "ManagedCluster mc does not exist"},
		},
		"a ManagedCluster through its ManagedServiceAccount": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).ClientConfig("https://mc-2.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"),
			},
			apis: all,
			want: resolved{Via: "ManagedServiceAccount token Secret mc/strata-hub", Host: "https://mc.example:6443"},
		},
		"a ManagedCluster on a hub without ClusterProfiles": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"),
			},
			apis: APIs{ManagedClusters: true},
			want: resolved{Via: "ManagedServiceAccount token Secret mc/strata-hub", Host: "https://mc.example:6443"},
		},
		"a ManagedCluster through OCM's ClusterProfile, preferred": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"),
				ocmProfile("mc").AccessProvider("cp-creds", "https://proxy.example/mc", nil).Obj(),
			},
			apis: all,
			want: resolved{Via: "OCM's ClusterProfile strata-system/mc (access provider cp-creds)", Host: "https://proxy.example/mc"},
		},
		"OCM's ClusterProfile without a provider the hub has a plugin for": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"),
				ocmProfile("mc").AccessProvider("other", "https://proxy.example/mc", nil).Obj(),
			},
			apis: all,
			want: resolved{Via: "ManagedServiceAccount token Secret mc/strata-hub", Host: "https://mc.example:6443"},
		},
		"OCM's ClusterProfile without a server": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"),
				ocmProfile("mc").AccessProvider("cp-creds", "", nil).Obj(),
			},
			apis: all,
			want: resolved{Reason: ReasonInvalidAccessProvider, Message: `ClusterProfile strata-system/mc: access provider "cp-creds" has no cluster.server`},
		},
		"a ClusterProfile of another manager is not OCM's": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").Obj(),
				testutil.MakeClusterProfile(ns, "mc").AccessProvider("cp-creds", "https://proxy.example/mc", nil).Obj(),
			},
			apis: all,
			want: resolved{Reason: ReasonNoClientConfig,
				Message: "ManagedCluster mc has no spec.managedClusterClientConfigs URL, and OCM publishes no ClusterProfile strata-system/mc for it"},
		},
		"neither a client config nor a usable ClusterProfile": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").Obj(),
				ocmProfile("mc").Obj(),
			},
			apis: all,
			want: resolved{Reason: ReasonNoClientConfig,
				Message: "ManagedCluster mc has no spec.managedClusterClientConfigs URL, and ClusterProfile strata-system/mc offers no access provider (status.accessProviders is empty): its cluster manager (open-cluster-management) has not published how to reach the cluster"},
		},
		"no ManagedServiceAccount": {
			wc:      testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj()},
			apis:    all,
			want: resolved{Reason: ReasonTokenSecretNotFound,
				Message: "Secret mc/strata-hub does not exist: create ManagedServiceAccount strata-hub in namespace mc, whose token the managed-serviceaccount addon writes there"},
		},
		"a ManagedServiceAccount without its token yet": {
			wc: testutil.MakeWorkerCluster("w").ManagedCluster("mc").Obj(),
			objects: []client.Object{
				testutil.MakeManagedCluster("mc").ClientConfig("https://mc.example:6443", nil).Obj(),
				testutil.MakeTokenSecret("mc", "strata-hub", ""),
			},
			apis: all,
			want: resolved{Reason: ReasonInvalidTokenSecret, Message: "Secret mc/strata-hub has no token: is the ManagedServiceAccount's token reported yet?"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...).Build()
			r := &Reconciler{
				client: c, secrets: newRecentSecrets(c, clock.RealClock{}, 0), namespace: ns, apis: tc.apis,
				accessProviders: []configv1beta1.AccessProvider{plugin},
				managedCluster:  configv1beta1.ManagedCluster{ServiceAccountName: "strata-hub", ClusterProfileNamespace: ns},
			}
			cred, f := r.resolve(t.Context(), tc.wc)
			var got resolved
			if f != nil {
				got = resolved{Reason: f.reason, Message: f.message}
			} else {
				got = resolved{Via: cred.via, Host: cred.config.Host}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resolve() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDetectAPIs(t *testing.T) {
	cases := map[string]struct {
		kinds []schema.GroupVersionKind
		want  APIs
	}{
		"neither":        {},
		"ClusterProfile": {kinds: []schema.GroupVersionKind{clusterProfileKind}, want: APIs{ClusterProfiles: true}},
		"both":           {kinds: []schema.GroupVersionKind{clusterProfileKind, managedClusterKind}, want: APIs{ClusterProfiles: true, ManagedClusters: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mapper := meta.NewDefaultRESTMapper(nil)
			for _, k := range tc.kinds {
				mapper.Add(k, meta.RESTScopeNamespace)
			}
			got, err := DetectAPIs(mapper)
			if err != nil {
				t.Fatalf("DetectAPIs() error: %v", err)
			}
			if got != tc.want {
				t.Errorf("DetectAPIs() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// kubeconfigSecret is Secret ns/name holding, under key, a kubeconfig for
// server.
func kubeconfigSecret(ns, name, key, server string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{key: kubeconfig(server)}}
}
