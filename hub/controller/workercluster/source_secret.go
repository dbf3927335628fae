package workercluster

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get

// defaultKubeconfigKey is the key of a kubeconfig Secret when the
// reference names none.
const defaultKubeconfigKey = "kubeconfig"

// fromSecret reads a kubeconfig Secret, only from the hub's own namespace.
func (r *Reconciler) fromSecret(ctx context.Context, ref *strata.SecretKeyReference) (*credential, *failure) {
	if ref.Namespace != r.namespace {
		return nil, failf(ReasonSecretOutside, "the hub reads kubeconfig Secrets only from its own namespace %s, not %s: move Secret %s there", r.namespace, ref.Namespace, ref.Name)
	}
	var secret corev1.Secret
	if err := r.secrets.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, failf(ReasonSecretNotFound, "Secret %s/%s does not exist", ref.Namespace, ref.Name)
		}
		return nil, failf(ReasonSecretNotFound, "reading Secret %s/%s: %v", ref.Namespace, ref.Name, err)
	}
	return kubeconfigCredential(&secret, ref.Key, r.kubeconfigs)
}

// checkKubeconfig refuses what a worker kubeconfig's current context uses
// beyond an https server with embedded certificates and a token or an
// embedded client certificate, unless the policy allows it; the message
// names the field.
func checkKubeconfig(data []byte, policy configv1beta1.KubeconfigPolicy) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return err
	}
	ctxName := cfg.CurrentContext
	kctx := cfg.Contexts[ctxName]
	if kctx == nil {
		return nil // RESTConfigFromKubeConfig says what is wrong
	}
	var refused []string
	if c := cfg.Clusters[kctx.Cluster]; c != nil {
		at := fmt.Sprintf("clusters[%s].", kctx.Cluster)
		if !policy.AllowInsecure && c.InsecureSkipTLSVerify {
			refused = append(refused, at+"insecure-skip-tls-verify (allow with kubeconfigs.allowInsecure)")
		}
		if u, err := url.Parse(c.Server); !policy.AllowInsecure && err == nil && u.Scheme == "http" {
			refused = append(refused, at+"server is plain http (allow with kubeconfigs.allowInsecure)")
		}
		if !policy.AllowFiles && c.CertificateAuthority != "" {
			refused = append(refused, at+"certificate-authority names a file (embed certificate-authority-data, or allow with kubeconfigs.allowFiles)")
		}
	}
	if u := cfg.AuthInfos[kctx.AuthInfo]; u != nil {
		at := fmt.Sprintf("users[%s].", kctx.AuthInfo)
		if !policy.AllowExec && u.Exec != nil {
			refused = append(refused, at+"exec runs a command in the hub (allow with kubeconfigs.allowExec)")
		}
		if !policy.AllowExec && u.AuthProvider != nil {
			refused = append(refused, at+"auth-provider (allow with kubeconfigs.allowExec)")
		}
		for field, path := range map[string]string{"tokenFile": u.TokenFile, "client-certificate": u.ClientCertificate, "client-key": u.ClientKey} {
			if !policy.AllowFiles && path != "" {
				refused = append(refused, at+field+" names a file (embed the data, or allow with kubeconfigs.allowFiles)")
			}
		}
	}
	if len(refused) == 0 {
		return nil
	}
	slices.Sort(refused)
	return fmt.Errorf("refused: %s", strings.Join(refused, "; "))
}

// kubeconfigCredential is the credential of the kubeconfig under key
// (default "kubeconfig") of secret; its identity is the kubeconfig's bytes.
func kubeconfigCredential(secret *corev1.Secret, key string, policy configv1beta1.KubeconfigPolicy) (*credential, *failure) {
	if key == "" {
		key = defaultKubeconfigKey
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, failf(ReasonInvalidKubeconfig, "Secret %s/%s has no key %q", secret.Namespace, secret.Name, key)
	}
	if err := checkKubeconfig(data, policy); err != nil {
		return nil, failf(ReasonInvalidKubeconfig, "Secret %s/%s, key %s: %v", secret.Namespace, secret.Name, key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, failf(ReasonInvalidKubeconfig, "Secret %s/%s, key %s: %v", secret.Namespace, secret.Name, key, err)
	}
	return &credential{config: cfg, identity: identityOf(data), via: fmt.Sprintf("Secret %s/%s", secret.Namespace, secret.Name)}, nil
}
