package workercluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
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
			cred, f := kubeconfigCredential(tc.secret, tc.key, configv1beta1.KubeconfigPolicy{})
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

// TestCheckKubeconfig: what a worker kubeconfig runs or reads in the hub,
// and unverified or plain connections, are refused unless allowed, naming
// the field.
func TestCheckKubeconfig(t *testing.T) {
	write := func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) []byte {
		data, err := clientcmd.Write(clientcmdapi.Config{
			Clusters: map[string]*clientcmdapi.Cluster{"c": c}, AuthInfos: map[string]*clientcmdapi.AuthInfo{"u": u},
			Contexts: map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "u"}}, CurrentContext: "c",
		})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	safe := &clientcmdapi.Cluster{Server: "https://w1.example:6443", CertificateAuthorityData: []byte("ca")}
	cases := map[string]struct {
		data   []byte
		policy configv1beta1.KubeconfigPolicy
		want   string
	}{
		"https, embedded CA, a token":    {data: write(safe, &clientcmdapi.AuthInfo{Token: "t"})},
		"an embedded client certificate": {data: write(safe, &clientcmdapi.AuthInfo{ClientCertificateData: []byte("c"), ClientKeyData: []byte("k")})},
		"an exec plugin": {
			data: write(safe, &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh"}}),
			want: "refused: users[u].exec runs a command in the hub (allow with kubeconfigs.allowExec)",
		},
		"an exec plugin, allowed": {
			data: write(safe, &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "gke-gcloud-auth-plugin"}}), policy: configv1beta1.KubeconfigPolicy{AllowExec: true},
		},
		"files": {
			data: write(&clientcmdapi.Cluster{Server: "https://w1.example:6443", CertificateAuthority: "/etc/ca.crt"}, &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/token"}),
			want: "refused: clusters[c].certificate-authority names a file (embed certificate-authority-data, or allow with kubeconfigs.allowFiles); " +
				"users[u].tokenFile names a file (embed the data, or allow with kubeconfigs.allowFiles)",
		},
		"insecure": {
			data: write(&clientcmdapi.Cluster{Server: "http://w1.example:8080", InsecureSkipTLSVerify: true}, &clientcmdapi.AuthInfo{Token: "t"}),
			want: "refused: clusters[c].insecure-skip-tls-verify (allow with kubeconfigs.allowInsecure); clusters[c].server is plain http (allow with kubeconfigs.allowInsecure)",
		},
		"insecure, allowed": {
			data:   write(&clientcmdapi.Cluster{Server: "http://w1.example:8080"}, &clientcmdapi.AuthInfo{Token: "t"}),
			policy: configv1beta1.KubeconfigPolicy{AllowInsecure: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := checkKubeconfig(tc.data, tc.policy); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("checkKubeconfig() = %q, want %q", got, tc.want)
			}
		})
	}
}
