package intake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// maxGoingPods bounds the pods GoingPodsAnnotation names.
const maxGoingPods = 10

// GoingPodsInterval is how often the agent reports again the pods of a
// hub's copy being deleted while some remain.
const GoingPodsInterval = 10 * time.Second

// ReportGoingPods writes on obj, a hub's copy being deleted, the pods that
// keep it (strata.GoingPodsAnnotation): the hub may not read pods, and a
// take-back held by a pod stuck Terminating must say which. remain says
// whether any pod is left.
func ReportGoingPods(ctx context.Context, c client.Client, obj client.Object, pods []corev1.Pod) (remain bool, err error) {
	text := GoingPods(pods)
	if obj.GetAnnotations()[strata.GoingPodsAnnotation] == text {
		return text != "", nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	if text == "" {
		delete(annotations, strata.GoingPodsAnnotation)
	} else {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[strata.GoingPodsAnnotation] = text
	}
	obj.SetAnnotations(annotations)
	return text != "", client.IgnoreNotFound(c.Patch(ctx, obj, patch))
}

// GoingPods describes pods for GoingPodsAnnotation, sorted by name: each
// "NAME (Terminating since TIME, node NODE)" or "NAME (PHASE, node NODE)",
// at most maxGoingPods of them and how many more; "" for none.
func GoingPods(pods []corev1.Pod) string {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var parts []string
	for i, p := range pods {
		if i == maxGoingPods {
			parts = append(parts, fmt.Sprintf("and %d more", len(pods)-maxGoingPods))
			break
		}
		state := string(p.Status.Phase)
		if state == "" {
			state = string(corev1.PodPending)
		}
		if p.DeletionTimestamp != nil {
			state = "Terminating since " + p.DeletionTimestamp.UTC().Format(time.RFC3339)
		}
		node := "not scheduled"
		if p.Spec.NodeName != "" {
			node = "node " + p.Spec.NodeName
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", p.Name, state, node))
	}
	return strings.Join(parts, ", ")
}
