package testutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
)

// ClusterProfileWrapper builds a cluster-inventory-api ClusterProfile.
type ClusterProfileWrapper struct {
	inventoryv1alpha1.ClusterProfile
}

// MakeClusterProfile starts a ClusterProfile of cluster manager "test".
func MakeClusterProfile(ns, name string) *ClusterProfileWrapper {
	w := &ClusterProfileWrapper{inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	return w.Manager("test")
}

// Manager sets the cluster manager, in the spec and the label.
func (w *ClusterProfileWrapper) Manager(name string) *ClusterProfileWrapper {
	w.Spec.ClusterManager.Name = name
	return w.Label(inventoryv1alpha1.LabelClusterManagerKey, name)
}

// Label sets a label.
func (w *ClusterProfileWrapper) Label(k, v string) *ClusterProfileWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// AccessProvider adds an access provider reaching server, verified with
// ca.
func (w *ClusterProfileWrapper) AccessProvider(name, server string, ca []byte) *ClusterProfileWrapper {
	w.Status.AccessProviders = append(w.Status.AccessProviders, inventoryv1alpha1.AccessProvider{
		Name: name, Cluster: clientcmdv1.Cluster{Server: server, CertificateAuthorityData: ca},
	})
	return w
}

// Extension adds an extension (raw JSON) to the last access provider's
// cluster: client.authentication.k8s.io/exec is passed to its plugin.
func (w *ClusterProfileWrapper) Extension(name string, raw []byte) *ClusterProfileWrapper {
	p := &w.Status.AccessProviders[len(w.Status.AccessProviders)-1]
	p.Cluster.Extensions = append(p.Cluster.Extensions, clientcmdv1.NamedExtension{Name: name, Extension: runtime.RawExtension{Raw: raw}})
	return w
}

// Obj returns the ClusterProfile.
func (w *ClusterProfileWrapper) Obj() *inventoryv1alpha1.ClusterProfile { return &w.ClusterProfile }

// ManagedClusterWrapper builds an Open Cluster Management ManagedCluster.
type ManagedClusterWrapper struct{ ocmclusterv1.ManagedCluster }

// MakeManagedCluster starts an accepted ManagedCluster.
func MakeManagedCluster(name string) *ManagedClusterWrapper {
	return &ManagedClusterWrapper{ocmclusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ocmclusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	}}
}

// ClientConfig adds an API server address of the cluster.
func (w *ManagedClusterWrapper) ClientConfig(url string, ca []byte) *ManagedClusterWrapper {
	w.Spec.ManagedClusterClientConfigs = append(w.Spec.ManagedClusterClientConfigs, ocmclusterv1.ClientConfig{URL: url, CABundle: ca})
	return w
}

// Obj returns the ManagedCluster.
func (w *ManagedClusterWrapper) Obj() *ocmclusterv1.ManagedCluster { return &w.ManagedCluster }

// MakeTokenSecret is the Secret the managed-serviceaccount addon writes for
// ManagedServiceAccount name in cluster's namespace on the hub.
func MakeTokenSecret(cluster, name, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: name},
		Data:       map[string][]byte{corev1.ServiceAccountTokenKey: []byte(token)},
	}
}
