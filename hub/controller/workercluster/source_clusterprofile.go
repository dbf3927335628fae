package workercluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch

// fromClusterProfile builds the credential of a ClusterProfile through the
// access providers of the hub's configuration.
func (r *Reconciler) fromClusterProfile(ctx context.Context, ref *strata.ObjectReference) (*credential, *failure) {
	if !r.apis.ClusterProfiles {
		return nil, failf(ReasonAPINotInstalled, "the hub cluster serves no ClusterProfiles (%s): install the CRD clusterprofiles.multicluster.x-k8s.io of sigs.k8s.io/cluster-inventory-api (strata-hub restarts itself within 30s once it is served)",
			inventoryv1alpha1.GroupVersion)
	}
	var cp inventoryv1alpha1.ClusterProfile
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &cp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, failf(ReasonClusterProfileNotFound, "ClusterProfile %s/%s does not exist", ref.Namespace, ref.Name)
		}
		return nil, failf(ReasonClusterProfileNotFound, "reading ClusterProfile %s/%s: %v", ref.Namespace, ref.Name, err)
	}
	return profileCredential(&cp, r.accessProviders)
}

// profileCredential builds cp's credential with the first of providers
// (the hub's configuration, in order) that cp offers. Its identity is the
// provider's configuration and cp's entry for it: the plugin, not the
// identity, deals with tokens that expire.
func profileCredential(cp *inventoryv1alpha1.ClusterProfile, providers []configv1beta1.AccessProvider) (*credential, *failure) {
	offered := offeredProviders(cp)
	if len(offered) == 0 {
		return nil, failf(ReasonNoAccessProvider, "ClusterProfile %s/%s offers no access provider (status.accessProviders is empty): its cluster manager (%s) has not published how to reach the cluster",
			cp.Namespace, cp.Name, cp.Spec.ClusterManager.Name)
	}
	i := slices.IndexFunc(providers, func(p configv1beta1.AccessProvider) bool { _, ok := offered[p.Name]; return ok })
	if i < 0 {
		return nil, failf(ReasonAccessProviderNotConfigured, "ClusterProfile %s/%s offers the access providers %s, none of which the hub has a plugin for: add one to clusterProfile.accessProviders of the hub's configuration (it has %s)",
			cp.Namespace, cp.Name, quotedNames(offered), configuredNames(providers))
	}
	chosen, entry := providers[i], offered[providers[i].Name]
	if entry.Cluster.Server == "" {
		return nil, failf(ReasonInvalidAccessProvider, "ClusterProfile %s/%s: access provider %q has no cluster.server", cp.Namespace, cp.Name, chosen.Name)
	}
	// BuildConfigFromCP appends a profile's arguments and variables to the
	// provider's ExecConfig in place: give it a copy.
	cfg, err := access.New([]access.Provider{{
		Name:                        chosen.Name,
		ExecConfig:                  chosen.ExecConfig.DeepCopy(),
		ProfileSourcedCLIArgsPolicy: chosen.ProfileSourcedCLIArgsPolicy,
		ProfileSourcedEnvVarsPolicy: chosen.ProfileSourcedEnvVarsPolicy,
	}}).BuildConfigFromCP(cp)
	if err != nil {
		return nil, failf(ReasonInvalidAccessProvider, "ClusterProfile %s/%s, access provider %q: %v", cp.Namespace, cp.Name, chosen.Name, err)
	}
	provider, err := json.Marshal(chosen)
	if err != nil {
		return nil, failf(ReasonInvalidAccessProvider, "access provider %q of the hub's configuration: %v", chosen.Name, err)
	}
	cluster, err := json.Marshal(entry)
	if err != nil {
		return nil, failf(ReasonInvalidAccessProvider, "ClusterProfile %s/%s, access provider %q: %v", cp.Namespace, cp.Name, chosen.Name, err)
	}
	return &credential{
		config:   cfg,
		identity: identityOf(provider, cluster),
		via:      fmt.Sprintf("ClusterProfile %s/%s (access provider %s)", cp.Namespace, cp.Name, chosen.Name),
	}, nil
}

// offeredProviders are cp's access providers by name; an entry of the
// deprecated credentialProviders counts unless accessProviders has one of
// the same name, as in cluster-inventory-api's access package.
func offeredProviders(cp *inventoryv1alpha1.ClusterProfile) map[string]inventoryv1alpha1.AccessProvider {
	offered := make(map[string]inventoryv1alpha1.AccessProvider, len(cp.Status.AccessProviders)+len(cp.Status.CredentialProviders))
	for _, p := range cp.Status.CredentialProviders {
		offered[p.Name] = p
	}
	for _, p := range cp.Status.AccessProviders {
		offered[p.Name] = p
	}
	return offered
}

func quotedNames(offered map[string]inventoryv1alpha1.AccessProvider) string {
	names := make([]string, 0, len(offered))
	for n := range offered {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func configuredNames(providers []configv1beta1.AccessProvider) string {
	if len(providers) == 0 {
		return "none"
	}
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = fmt.Sprintf("%q", p.Name)
	}
	return strings.Join(names, ", ")
}
