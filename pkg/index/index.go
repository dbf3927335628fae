// Package index defines the field indexes of queues and Workloads that the
// hub's and the agent's controllers share on a manager's cache.
package index

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// LocalQueueClusterQueue indexes LocalQueues by spec.clusterQueue.
const LocalQueueClusterQueue = "spec.clusterQueue"

// WorkloadQueue indexes Workloads by spec.queueName (their LocalQueue, in
// their namespace).
const WorkloadQueue = "spec.queueName"

// SetupQueues registers the queue indexes with a manager's field indexer.
func SetupQueues(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &strata.LocalQueue{}, LocalQueueClusterQueue, func(o client.Object) []string {
		return []string{o.(*strata.LocalQueue).Spec.ClusterQueue}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &strata.Workload{}, WorkloadQueue, func(o client.Object) []string {
		return []string{o.(*strata.Workload).Spec.QueueName}
	})
}
