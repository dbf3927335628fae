// Package index defines the field indexes of queues and Workloads that the
// hub's and the agent's controllers share on a manager's cache.
package index

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
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

// queueIndex indexes the informer's Workloads by namespace/queueName.
const queueIndex = "strata.dev/localqueue"

// QueueWorkloads lists a LocalQueue's Workloads as the cache holds them,
// without copying them: queue status is counted over every Workload of a
// queue, tens of thousands in a backlog, once a second; a List would copy
// each one out of the informer every time.
type QueueWorkloads struct {
	cache crcache.Cache
}

// SetupQueueWorkloads registers the index QueueWorkloads reads on the
// cache's Workload informer. Call it before the cache starts.
func SetupQueueWorkloads(ctx context.Context, c crcache.Cache) (*QueueWorkloads, error) {
	inf, err := c.GetInformer(ctx, &strata.Workload{}, crcache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	if err := inf.AddIndexers(toolscache.Indexers{queueIndex: func(obj any) ([]string, error) {
		wl, ok := obj.(*strata.Workload)
		if !ok {
			return nil, nil
		}
		return []string{wl.Namespace + "/" + wl.Spec.QueueName}, nil
	}}); err != nil {
		return nil, err
	}
	return &QueueWorkloads{cache: c}, nil
}

// List returns the Workloads of LocalQueue key: the informer's objects,
// to read only.
func (q *QueueWorkloads) List(ctx context.Context, key types.NamespacedName) ([]*strata.Workload, error) {
	inf, err := q.cache.GetInformer(ctx, &strata.Workload{})
	if err != nil {
		return nil, err
	}
	si, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the cache's Workload informer (%T) has no indexer", inf)
	}
	objs, err := si.GetIndexer().ByIndex(queueIndex, key.Namespace+"/"+key.Name)
	if err != nil {
		return nil, err
	}
	out := make([]*strata.Workload, 0, len(objs))
	for _, o := range objs {
		if wl, ok := o.(*strata.Workload); ok {
			out = append(out, wl)
		}
	}
	return out, nil
}
