// Package index defines the field indexes the agent's controllers share on
// the manager's cache: the queue indexes of pkg/index, and pods by
// workload.
package index

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/index"
)

// PodWorkload indexes pods by the value of their strata.dev/workload label
// (a workload's pods live in its namespace).
const PodWorkload = "strata.dev/workload"

// Setup registers the indexes with the manager's field indexer.
func Setup(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, PodWorkload, func(o client.Object) []string {
		if name := o.GetLabels()[strata.WorkloadLabel]; name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	return index.SetupQueues(ctx, indexer)
}

// PodsOf lists the pods of a workload from the cache through the index.
func PodsOf(namespace, workload string) []client.ListOption {
	return []client.ListOption{client.InNamespace(namespace), client.MatchingFields{PodWorkload: workload}}
}
