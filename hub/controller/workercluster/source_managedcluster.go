package workercluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
)

// The Secrets of ManagedServiceAccounts are in their clusters' namespaces,
// so the hub needs get on Secrets outside its own namespace: only on those
// named after the default ManagedServiceAccount (extend the ClusterRole
// when managedCluster.serviceAccountName is another name).
//
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,resourceNames=strata-hub

// ocmClusterManager is the name Open Cluster Management publishes its
// ClusterProfiles under (spec.clusterManager.name and the
// x-k8s.io/cluster-manager label).
const ocmClusterManager = "open-cluster-management"

// tokenKey is the key of a ManagedServiceAccount's token in its Secret.
const tokenKey = corev1.ServiceAccountTokenKey

// fromManagedCluster builds the credential of an OCM ManagedCluster:
// through the ClusterProfile OCM publishes for it in
// managedCluster.clusterProfileNamespace when the hub has a plugin for one
// of its access providers, otherwise at the cluster's first
// spec.managedClusterClientConfigs entry with the token of the
// ManagedServiceAccount managedCluster.serviceAccountName.
func (r *Reconciler) fromManagedCluster(ctx context.Context, name string) (*credential, *failure) {
	if !r.apis.ManagedClusters {
		return nil, failf(ReasonAPINotInstalled, "the hub cluster serves no ManagedClusters (%s): install Open Cluster Management's hub (strata-hub restarts itself within 30s once it is served)",
			ocmclusterv1.GroupVersion)
	}
	var mc ocmclusterv1.ManagedCluster
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, failf(ReasonManagedClusterNotFound, "ManagedCluster %s does not exist", name)
		}
		return nil, failf(ReasonManagedClusterNotFound, "reading ManagedCluster %s: %v", name, err)
	}
	// Why OCM's ClusterProfile is not used, for the message when the
	// fallback fails too.
	noProfile := fmt.Sprintf("OCM publishes no ClusterProfile %s/%s for it", r.managedCluster.ClusterProfileNamespace, name)
	if r.apis.ClusterProfiles {
		var cp inventoryv1alpha1.ClusterProfile
		err := r.client.Get(ctx, types.NamespacedName{Namespace: r.managedCluster.ClusterProfileNamespace, Name: name}, &cp)
		switch {
		case err == nil && publishedFor(&cp, name):
			cred, f := profileCredential(&cp, r.accessProviders)
			if f == nil {
				cred.via = "OCM's " + cred.via
				return cred, nil
			}
			if f.reason != ReasonNoAccessProvider && f.reason != ReasonAccessProviderNotConfigured {
				return nil, f
			}
			noProfile = f.message
		case err != nil && !apierrors.IsNotFound(err):
			return nil, failf(ReasonClusterProfileNotFound, "reading ClusterProfile %s/%s: %v", r.managedCluster.ClusterProfileNamespace, name, err)
		}
	}
	if len(mc.Spec.ManagedClusterClientConfigs) == 0 || mc.Spec.ManagedClusterClientConfigs[0].URL == "" {
		return nil, failf(ReasonNoClientConfig, "ManagedCluster %s has no spec.managedClusterClientConfigs URL, and %s", name, noProfile)
	}
	sa := r.managedCluster.ServiceAccountName
	var secret corev1.Secret
	if err := r.secrets.Get(ctx, types.NamespacedName{Namespace: name, Name: sa}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, failf(ReasonTokenSecretNotFound, "Secret %s/%s does not exist: create ManagedServiceAccount %s in namespace %s, whose token the managed-serviceaccount addon writes there",
				name, sa, sa, name)
		}
		return nil, failf(ReasonTokenSecretNotFound, "reading Secret %s/%s: %v", name, sa, err)
	}
	return tokenCredential(mc.Spec.ManagedClusterClientConfigs[0], &secret)
}

// publishedFor says whether cp is the ClusterProfile OCM publishes for the
// ManagedCluster cluster: OCM manages it, and it names the cluster.
func publishedFor(cp *inventoryv1alpha1.ClusterProfile, cluster string) bool {
	if cp.Spec.ClusterManager.Name != ocmClusterManager || cp.Name != cluster {
		return false
	}
	name, ok := cp.Labels[ocmclusterv1.ClusterNameLabelKey]
	return !ok || name == cluster
}

// tokenCredential is the credential of a ManagedServiceAccount's token
// Secret at a ManagedCluster's client configuration; without a CA bundle,
// the system's roots verify the cluster, as OCM documents. Its identity
// is the URL, CA bundle and token.
func tokenCredential(cc ocmclusterv1.ClientConfig, secret *corev1.Secret) (*credential, *failure) {
	token := secret.Data[tokenKey]
	if len(token) == 0 {
		return nil, failf(ReasonInvalidTokenSecret, "Secret %s/%s has no %s: is the ManagedServiceAccount's token reported yet?", secret.Namespace, secret.Name, tokenKey)
	}
	cfg := &rest.Config{
		Host:            cc.URL,
		BearerToken:     string(token),
		TLSClientConfig: rest.TLSClientConfig{CAData: cc.CABundle},
	}
	return &credential{
		config:   cfg,
		identity: identityOf([]byte(cc.URL), cc.CABundle, token),
		via:      fmt.Sprintf("ManagedServiceAccount token Secret %s/%s", secret.Namespace, secret.Name),
	}, nil
}
