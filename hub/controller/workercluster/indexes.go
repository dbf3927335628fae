package workercluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// Field indexes of WorkerClusters, to find those a source object feeds.
const (
	// ClusterProfileRefKey indexes WorkerClusters by their ClusterProfile,
	// "namespace/name".
	ClusterProfileRefKey = "spec.clusterProfileRef"
	// ManagedClusterNameKey indexes WorkerClusters by their ManagedCluster.
	ManagedClusterNameKey = "spec.managedClusterName"
)

// SetupIndexes adds the WorkerCluster field indexes to indexer.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &strata.WorkerCluster{}, ClusterProfileRefKey, func(o client.Object) []string {
		if ref := o.(*strata.WorkerCluster).Spec.ClusterProfileRef; ref != nil {
			return []string{ref.Namespace + "/" + ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &strata.WorkerCluster{}, ManagedClusterNameKey, func(o client.Object) []string {
		if name := o.(*strata.WorkerCluster).Spec.ManagedClusterName; name != nil {
			return []string{*name}
		}
		return nil
	})
}
