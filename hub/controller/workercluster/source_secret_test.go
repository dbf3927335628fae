package workercluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig is a kubeconfig for server with a token.
func kubeconfig(server string) []byte {
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "t0ken"}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "c",
	})
	if err != nil {
		panic(err)
	}
	return data
}

func TestKubeconfigCredential(t *testing.T) {
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-system", Name: "w1"}, Data: data}
	}
	cases := map[string]struct {
		secret      *corev1.Secret
		key         string
		wantHost    string
		wantFailure *failure
	}{
		"the default key": {
			secret:   secret(map[string][]byte{"kubeconfig": kubeconfig("https://w1.example:6443")}),
			wantHost: "https://w1.example:6443",
		},
		"a key of one's own": {
			secret:   secret(map[string][]byte{"value": kubeconfig("https://w1.example:6443")}),
			key:      "value",
			wantHost: "https://w1.example:6443",
		},
		"no such key": {
			secret:      secret(map[string][]byte{"value": kubeconfig("https://w1.example:6443")}),
			wantFailure: &failure{reason: ReasonInvalidKubeconfig, message: `Secret strata-system/w1 has no key "kubeconfig"`},
		},
		"not a kubeconfig": {
			secret: secret(map[string][]byte{"kubeconfig": []byte("{")}),
			wantFailure: &failure{reason: ReasonInvalidKubeconfig,
				message: "Secret strata-system/w1, key kubeconfig: yaml: line 1: did not find expected node content"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cred, f := kubeconfigCredential(tc.secret, tc.key)
			if diff := cmp.Diff(tc.wantFailure, f, cmp.AllowUnexported(failure{})); diff != "" {
				t.Fatalf("kubeconfigCredential() failure (-want,+got):\n%s", diff)
			}
			if f != nil {
				return
			}
			key := tc.key
			if key == "" {
				key = "kubeconfig"
			}
			if cred.config.Host != tc.wantHost || cred.config.BearerToken != "t0ken" {
				t.Errorf("kubeconfigCredential() config reaches %s with token %q, want %s with t0ken", cred.config.Host, cred.config.BearerToken, tc.wantHost)
			}
			if want := identityOf(tc.secret.Data[key]); cred.identity != want {
				t.Errorf("kubeconfigCredential() identity = %s, want the kubeconfig's hash %s", cred.identity, want)
			}
		})
	}
}

func TestIdentityOf(t *testing.T) {
	if identityOf([]byte("ab"), []byte("c")) == identityOf([]byte("a"), []byte("bc")) {
		t.Error("identityOf(ab, c) == identityOf(a, bc): parts must not run into each other")
	}
	a, b := []byte("a"), []byte("a")
	if identityOf(a) != identityOf(b) {
		t.Error("identityOf is not deterministic")
	}
}
