// Package nodefailure is hot swap (KEP-2724 "Node failures", "Tainted nodes
// treatment"): it finds the failed nodes under admitted topology-aware
// workloads whose lowest level is the host, replaces a failed node with the
// engine's replacement search, and evicts the workload when it cannot.
package nodefailure

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// ReasonPodsTerminated is the failure reason of replace-on-pod-termination:
// a NotReady node whose pods of the workload are all terminated or
// terminating is replaced at once, without waiting for notReadyDelay. The
// NodeReplacement condition's message names it; benchmarks check for it.
const ReasonPodsTerminated = "NotReady, and the workload's pods on it are terminated or terminating"

// Verdict says whether a node failed for a workload, why, and when to look
// again if it may fail later.
type Verdict struct {
	Failed  bool
	Reason  string
	Recheck time.Duration
	// Since is when the failure became observable (for the latency metric).
	Since time.Time
}

// Detect decides whether node (nil when deleted) has failed for a workload
// whose pods on it are pods (bound to it, or routed to it by node selector)
// and whose pods tolerate tolerations. It follows the agent configuration's
// nodeFailure settings.
//
// The taints the node lifecycle controller puts on NotReady and unreachable
// nodes (node.kubernetes.io/not-ready, node.kubernetes.io/unreachable) are
// left to the readiness rules: they come with every NotReady node, and
// counting them as taints would skip notReadyDelay.
func Detect(node *corev1.Node, pods []*corev1.Pod, tolerations []corev1.Toleration, cfg configv1beta1.NodeFailure, now time.Time) Verdict {
	if node == nil {
		return Verdict{Failed: true, Reason: "the node was deleted", Since: now}
	}
	replaceOnTaints := cfg.ReplaceOnTaints == nil || *cfg.ReplaceOnTaints
	var recheck time.Duration
	// Pods that succeeded there need nothing: they are not counted.
	unfinished := slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	// gone: the workload's pods there are failed, terminating or
	// unscheduled (recreated, only routed there), and some did not succeed.
	gone := len(unfinished) > 0 && allPods(unfinished, func(p *corev1.Pod) bool { return failing(p) || p.Spec.NodeName == "" })
	if replaceOnTaints {
		for i := range node.Spec.Taints {
			t := &node.Spec.Taints[i]
			if t.Effect != corev1.TaintEffectNoExecute || readinessTaint(t) {
				continue
			}
			// KEP-2724: the node is unhealthy (after any tolerationSeconds);
			// the node controller terminates the pods, and once they are,
			// the node is replaced: that is when the failure becomes
			// observable. A change of the pods wakes the caller.
			var v Verdict
			tol, ok := tolerating(tolerations, t)
			switch {
			case !ok:
				v = Verdict{Failed: true, Reason: fmt.Sprintf("untolerated NoExecute taint %s", t.Key), Since: now}
			case tol.TolerationSeconds != nil:
				deadline := addedAt(t, now).Add(time.Duration(*tol.TolerationSeconds) * time.Second)
				if left := deadline.Sub(now); left > 0 {
					recheck = minPositive(recheck, left)
					continue
				}
				v = Verdict{Failed: true, Reason: fmt.Sprintf("NoExecute taint %s past its %ds toleration", t.Key, *tol.TolerationSeconds), Since: now}
			default:
				continue
			}
			if gone {
				return v
			}
		}
		noSchedule := node.Spec.Unschedulable
		for i := range node.Spec.Taints {
			t := &node.Spec.Taints[i]
			if t.Effect == corev1.TaintEffectNoSchedule && !readinessTaint(t) {
				if _, ok := tolerating(tolerations, t); !ok {
					noSchedule = true
				}
			}
		}
		if noSchedule && gone {
			return Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled", Since: now}
		}
	}
	ready := readyCondition(node)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		// KEP-2724's two heuristics for a NotReady node exclude each other
		// (the TAS user guide: with TASReplaceNodeOnPodTermination on, "the
		// 30 seconds timeout is disregarded"): the pods' termination, or
		// notReadyDelay.
		if cfg.ReplaceOnPodTermination == nil || *cfg.ReplaceOnPodTermination {
			// The pods scheduled there are terminated or terminating: pods
			// that were only routed there (recreated, waiting to be bound)
			// cannot start on a NotReady node and do not hold the
			// replacement back. A change of the pods wakes the caller.
			if len(pods) > 0 && allPods(pods, func(p *corev1.Pod) bool { return terminatedOrTerminating(p) || p.Spec.NodeName == "" }) &&
				slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.Status.Phase != corev1.PodSucceeded }) {
				return Verdict{Failed: true, Reason: ReasonPodsTerminated, Since: now}
			}
			return Verdict{Recheck: recheck}
		}
		since := node.CreationTimestamp.Time // never Ready
		if ready != nil {
			since = ready.LastTransitionTime.Time
		}
		left := since.Add(cfg.NotReadyDelay.Duration).Sub(now)
		if left <= 0 {
			return Verdict{Failed: true, Reason: fmt.Sprintf("NotReady for more than %s", cfg.NotReadyDelay.Duration), Since: since.Add(cfg.NotReadyDelay.Duration)}
		}
		recheck = minPositive(recheck, left)
	}
	return Verdict{Recheck: recheck}
}

// readinessTaint says whether t is one of the taints the node lifecycle
// controller keeps in step with the Ready condition.
func readinessTaint(t *corev1.Taint) bool {
	return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
}

// addedAt is when a taint was added, or now if it does not say (the
// Reconciler fills in when it first saw such a taint).
func addedAt(t *corev1.Taint, now time.Time) time.Time {
	if t.TimeAdded != nil {
		return t.TimeAdded.Time
	}
	return now
}

func tolerating(tolerations []corev1.Toleration, t *corev1.Taint) (*corev1.Toleration, bool) {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Logger{}, t, true) {
			return &tolerations[i], true
		}
	}
	return nil, false
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func terminatedOrTerminating(p *corev1.Pod) bool {
	return failing(p) || p.Status.Phase == corev1.PodSucceeded
}

// failing is a pod that failed or is being deleted.
func failing(p *corev1.Pod) bool {
	return !p.DeletionTimestamp.IsZero() || p.Status.Phase == corev1.PodFailed
}

func allPods(pods []*corev1.Pod, f func(*corev1.Pod) bool) bool {
	for _, p := range pods {
		if !f(p) {
			return false
		}
	}
	return true
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}
