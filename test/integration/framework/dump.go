package framework

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// Dump writes, one line each, every cluster's ClusterQueues and the
// Workloads that are not finished: what a failed spec needs to tell "not
// admitted, and why" from "admitted in another order". Suites call it
// from an AfterEach when the spec failed; errors are written, not
// returned.
func (cs *Clusters) Dump(ctx context.Context, w io.Writer) {
	if cs == nil {
		return
	}
	for _, c := range cs.Items {
		if c != nil {
			c.Dump(ctx, w)
		}
	}
}

// Dump writes this cluster's part of Clusters.Dump.
func (c *Cluster) Dump(ctx context.Context, w io.Writer) {
	fmt.Fprintf(w, "--- cluster %s\n", c.Name)
	var cqs strata.ClusterQueueList
	if err := c.Client.List(ctx, &cqs); err != nil {
		fmt.Fprintf(w, "listing ClusterQueues: %v\n", err)
	}
	for i := range cqs.Items {
		cq := &cqs.Items[i]
		fmt.Fprintf(w, "ClusterQueue %s: pending %d, reserving %d, admitted %d; %s\n", cq.Name,
			cq.Status.PendingWorkloads, cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads, conditions(cq.Status.Conditions))
	}
	var wls strata.WorkloadList
	if err := c.Client.List(ctx, &wls); err != nil {
		fmt.Fprintf(w, "listing Workloads: %v\n", err)
	}
	slices.SortFunc(wls.Items, func(a, b strata.Workload) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for i := range wls.Items {
		wl := &wls.Items[i]
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			continue
		}
		admission := "no admission"
		if a := wl.Status.Admission; a != nil {
			var flavors []string
			for _, psa := range a.PodSetAssignments {
				flavors = append(flavors, fmt.Sprintf("%s=%v", psa.Name, psa.Flavor))
			}
			admission = fmt.Sprintf("admitted by %s (%s)", a.ClusterQueue, strings.Join(flavors, ","))
		}
		deleting := ""
		if wl.DeletionTimestamp != nil {
			deleting = ", deleting"
		}
		fmt.Fprintf(w, "Workload %s (queue %q, created %s%s): %s; %s\n", client.ObjectKeyFromObject(wl), wl.Spec.QueueName,
			wl.CreationTimestamp.Format("15:04:05"), deleting, admission, conditions(wl.Status.Conditions))
	}
}

func conditions(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s %s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(out) == 0 {
		return "no condition"
	}
	return strings.Join(out, "; ")
}
