package workercluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

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
	return kubeconfigCredential(&secret, ref.Key)
}

// kubeconfigCredential is the credential of the kubeconfig under key
// (default "kubeconfig") of secret; its identity is the kubeconfig's bytes.
func kubeconfigCredential(secret *corev1.Secret, key string) (*credential, *failure) {
	if key == "" {
		key = defaultKubeconfigKey
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, failf(ReasonInvalidKubeconfig, "Secret %s/%s has no key %q", secret.Namespace, secret.Name, key)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, failf(ReasonInvalidKubeconfig, "Secret %s/%s, key %s: %v", secret.Namespace, secret.Name, key, err)
	}
	return &credential{config: cfg, identity: identityOf(data), via: fmt.Sprintf("Secret %s/%s", secret.Namespace, secret.Name)}, nil
}
