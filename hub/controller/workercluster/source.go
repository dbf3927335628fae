package workercluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	strata "strata.dev/strata/api/v1beta1"
)

// credential is what a WorkerCluster's source resolves to.
type credential struct {
	config *rest.Config
	// identity hashes what the credential is made of: when it changes, the
	// fleet drops the old connection and connects again.
	identity string
	// via names where the credential came from, for the Connected message
	// ("Secret strata-system/w1-kubeconfig").
	via string
}

// failure is why a source gives no credential: the Connected condition's
// reason, and a message naming the object to fix.
type failure struct {
	reason  string
	message string
}

func failf(reason, format string, args ...any) *failure {
	return &failure{reason: reason, message: fmt.Sprintf(format, args...)}
}

// resolve turns the WorkerCluster's source into a credential.
func (r *Reconciler) resolve(ctx context.Context, wc *strata.WorkerCluster) (*credential, *failure) {
	switch {
	case wc.Spec.KubeConfigSecretRef != nil:
		return r.fromSecret(ctx, wc.Spec.KubeConfigSecretRef)
	case wc.Spec.ClusterProfileRef != nil:
		return r.fromClusterProfile(ctx, wc.Spec.ClusterProfileRef)
	case wc.Spec.ManagedClusterName != nil:
		return r.fromManagedCluster(ctx, *wc.Spec.ManagedClusterName)
	}
	return nil, failf(ReasonInvalidKubeconfig, "no source: set one of kubeConfigSecretRef, clusterProfileRef and managedClusterName")
}

// identityOf hashes parts, each length-prefixed so that no two different
// lists of parts hash alike.
func identityOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// APIs says which of the optional source kinds the hub cluster serves.
type APIs struct {
	ClusterProfiles bool
	ManagedClusters bool
}

// Kinds of the optional sources, whose CRDs most hubs do not have.
var (
	clusterProfileKind = inventoryv1alpha1.GroupVersion.WithKind(inventoryv1alpha1.ClusterProfileKind)
	managedClusterKind = schema.GroupVersionKind{Group: ocmclusterv1.GroupName, Version: ocmclusterv1.GroupVersion.Version, Kind: "ManagedCluster"}
)

// Missing are the optional source kinds apis says the hub does not serve:
// the hub restarts once one is (cmdutil.APIWatch).
func (a APIs) Missing() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	if !a.ClusterProfiles {
		out = append(out, clusterProfileKind)
	}
	if !a.ManagedClusters {
		out = append(out, managedClusterKind)
	}
	return out
}

// DetectAPIs asks mapper which of the optional source kinds the hub
// serves. A kind that is not installed is no error: its sources report
// APINotInstalled.
func DetectAPIs(mapper meta.RESTMapper) (APIs, error) {
	var apis APIs
	var err error
	if apis.ClusterProfiles, err = served(mapper, clusterProfileKind); err != nil {
		return apis, err
	}
	apis.ManagedClusters, err = served(mapper, managedClusterKind)
	return apis, err
}

func served(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking up %s on the hub: %w", gvk.GroupKind(), err)
}
