package nodefailure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Condition and reasons written by hot swap.
const (
	// ConditionNodeReplacement is False while a failed node waits for a
	// replacement (fail-fast off), True after the last replacement.
	ConditionNodeReplacement = "NodeReplacement"
	ReasonNodeFailure        = "NodeFailure"
	// PodConditionTerminatedByStrata marks pods failed by the agent so the
	// Job controller recreates them elsewhere.
	PodConditionTerminatedByStrata = "TerminatedByStrata"
	ReasonUnschedulableOnNode      = "UnschedulableOnAssignedNode"
)

// Reconciler checks the nodes under one admitted workload per reconcile.
type Reconciler struct {
	client   client.Client
	cache    *cache.Cache
	cfg      configv1beta1.NodeFailure
	clock    clock.Clock
	recorder events.EventRecorder
}

// NewReconciler returns a Reconciler.
func NewReconciler(c client.Client, cc *cache.Cache, cfg configv1beta1.NodeFailure, clk clock.Clock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, cache: cc, cfg: cfg, clock: clk, recorder: recorder}
}

// SetupWithManager watches admitted Workloads, the Nodes they use and their pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodefailure").
		For(&strata.Workload{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.workloadsOnNode)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if name := o.GetLabels()[strata.WorkloadLabel]; name != "" && o.GetLabels()[strata.TASLabel] != "" {
				return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
			}
			return nil
		})).
		Complete(r)
}

// workloadsOnNode finds the admitted workloads assigned to a node.
func (r *Reconciler) workloadsOnNode(ctx context.Context, o client.Object) []ctrl.Request {
	var list strata.WorkloadList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		wl := &list.Items[i]
		if wl.Status.Admission == nil {
			continue
		}
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if a, err := tas.Decode(psa.TopologyAssignment); err == nil && hostLevel(a) &&
				slices.ContainsFunc(a.Domains, func(d tas.DomainAssignment) bool { return d.Values[0] == o.GetName() }) {
				out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wl)})
				break
			}
		}
	}
	return out
}

func hostLevel(a *tas.Assignment) bool {
	return len(a.Levels) == 1 && a.Levels[0] == strata.HostnameLabel
}

type failure struct {
	podSet int // index in PodSetAssignments
	node   string
	reason string
	since  time.Time
}

// Reconcile detects failed nodes under a workload and replaces or evicts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl strata.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) ||
		r.cfg.ReplaceFailedNodes != nil && !*r.cfg.ReplaceFailedNodes {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(wl.Namespace), client.MatchingLabels{strata.WorkloadLabel: wl.Name}); err != nil {
		return ctrl.Result{}, err
	}
	now := r.clock.Now()
	var failed []failure
	var recheck time.Duration
	for i, psa := range wl.Status.Admission.PodSetAssignments {
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil || !hostLevel(a) {
			continue
		}
		tolerations := r.tolerations(&wl, psa)
		for _, d := range a.Domains {
			host := d.Values[0]
			var node corev1.Node
			var nodePtr *corev1.Node
			switch err := r.client.Get(ctx, types.NamespacedName{Name: host}, &node); {
			case err == nil:
				nodePtr = &node
			case !apierrors.IsNotFound(err):
				return ctrl.Result{}, err
			}
			v := Detect(nodePtr, podsOn(pods.Items, psa.Name, host), tolerations, r.cfg, now)
			if v.Failed {
				failed = append(failed, failure{podSet: i, node: host, reason: v.Reason, since: v.Since})
			} else if v.Recheck > 0 {
				recheck = minPositive(recheck, v.Recheck)
			}
		}
	}
	if len(failed) == 0 {
		if len(wl.Status.UnhealthyNodes) > 0 {
			wl.Status.UnhealthyNodes = nil
			return ctrl.Result{RequeueAfter: recheck}, r.client.Status().Update(ctx, &wl)
		}
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	return r.handle(ctx, &wl, failed, pods.Items, now)
}

// handle replaces a single failed node, or evicts the workload.
func (r *Reconciler) handle(ctx context.Context, wl *strata.Workload, failed []failure, pods []corev1.Pod, now time.Time) (ctrl.Result, error) {
	names := make([]string, len(failed))
	wl.Status.UnhealthyNodes = nil
	for i, f := range failed {
		names[i] = fmt.Sprintf("%s (%s)", f.node, f.reason)
		wl.Status.UnhealthyNodes = append(wl.Status.UnhealthyNodes, strata.UnhealthyNode{Name: f.node})
	}
	if len(failed) > 1 {
		return ctrl.Result{}, r.evict(ctx, wl, fmt.Sprintf("%d nodes failed at once: %s; Strata replaces one node at a time", len(failed), strings.Join(names, ", ")))
	}
	f := failed[0]
	psa := &wl.Status.Admission.PodSetAssignments[f.podSet]
	ps := workload.PodSet(wl, psa.Name)
	current, err := tas.Decode(psa.TopologyAssignment)
	if err != nil || ps == nil {
		return ctrl.Result{}, err
	}
	req := workload.Request(ps)
	req.Tolerations = r.tolerations(wl, *psa)
	var replaced *tas.Assignment
	var searchErr error
	if !r.cache.Flavor(psa.Flavor, func(s *tas.Snapshot, _ *strata.Topology) {
		replaced, searchErr = s.FindReplacement(req, current, f.node)
	}) {
		searchErr = fmt.Errorf("flavor %s is not known", psa.Flavor)
	}
	if searchErr != nil {
		metrics.Replacements.WithLabelValues("failed").Inc()
		msg := fmt.Sprintf("node %s failed (%s): %v", f.node, f.reason, searchErr)
		if r.cfg.FailFast == nil || *r.cfg.FailFast {
			return ctrl.Result{}, r.evict(ctx, wl, msg+"; fail-fast is on, so the workload goes back to its queue")
		}
		c := meta.FindStatusCondition(wl.Status.Conditions, ConditionNodeReplacement)
		if c != nil && c.Status == metav1.ConditionFalse && now.Sub(c.LastTransitionTime.Time) > r.cfg.RecoveryTimeout.Duration {
			return ctrl.Result{}, r.evict(ctx, wl, msg+fmt.Sprintf("; no replacement within the recovery timeout of %s", r.cfg.RecoveryTimeout.Duration))
		}
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: ConditionNodeReplacement, Status: metav1.ConditionFalse, Reason: "Searching", Message: msg + "; retrying"})
		return ctrl.Result{RequeueAfter: 10 * time.Second}, r.client.Status().Update(ctx, wl)
	}
	newHost := ""
	for i, d := range replaced.Domains {
		if current.Domains[i].Values[0] != d.Values[0] {
			newHost = d.Values[0]
		}
	}
	psa.TopologyAssignment = tas.Encode(replaced)
	wl.Status.UnhealthyNodes = nil
	msg := fmt.Sprintf("node %s (%s) replaced by %s", f.node, f.reason, newHost)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: ConditionNodeReplacement, Status: metav1.ConditionTrue, Reason: "Replaced", Message: msg})
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cache.AddWorkload(client.ObjectKeyFromObject(wl), wl); err != nil {
		return ctrl.Result{}, err
	}
	metrics.Replacements.WithLabelValues("succeeded").Inc()
	metrics.ReplacementLatency.Observe(r.clock.Since(f.since).Seconds())
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "NodeReplaced", "Replace", "%s", msg)
	return ctrl.Result{}, r.failStrandedPods(ctx, pods, psa.Name, f.node)
}

// failStrandedPods marks the workload's pods that were routed to the failed
// node but never started there as Failed, so that the Job controller
// recreates them and the ungater sends them to the replacement.
func (r *Reconciler) failStrandedPods(ctx context.Context, pods []corev1.Pod, podSetName, node string) error {
	for i := range pods {
		p := &pods[i]
		if p.Labels[strata.PodSetLabel] != podSetName || p.Spec.NodeName != "" || p.Spec.NodeSelector[strata.HostnameLabel] != node || terminatedOrTerminating(p) {
			continue
		}
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: PodConditionTerminatedByStrata, Status: corev1.ConditionTrue, Reason: ReasonUnschedulableOnNode,
			Message: fmt.Sprintf("node %s failed; the pod is recreated on its replacement", node), LastTransitionTime: metav1.Now(),
		})
		if err := r.client.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, "PodTerminated", "Terminate", "Node %s failed; the pod is recreated on its replacement", node)
	}
	return nil
}

// evict sends the workload back to its queue; the Job controller stops the Job.
func (r *Reconciler) evict(ctx context.Context, wl *strata.Workload, message string) error {
	wl.Status.Admission = nil
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonNodeFailure, Message: message})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Evicted", Message: message})
	meta.RemoveStatusCondition(&wl.Status.Conditions, ConditionNodeReplacement)
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return err
	}
	r.cache.RemoveWorkload(client.ObjectKeyFromObject(wl))
	r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, ReasonNodeFailure, "Evict", "%s", message)
	return nil
}

func (r *Reconciler) tolerations(wl *strata.Workload, psa strata.PodSetAssignment) []corev1.Toleration {
	var out []corev1.Toleration
	if ps := workload.PodSet(wl, psa.Name); ps != nil {
		out = append(out, ps.Template.Spec.Tolerations...)
	}
	if f, ok := r.cache.FlavorDef(psa.Flavor); ok {
		out = append(out, f.Spec.Tolerations...)
	}
	return out
}

// podsOn returns a pod set's pods bound to host or routed to it.
func podsOn(pods []corev1.Pod, podSetName, host string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[strata.PodSetLabel] != podSetName {
			continue
		}
		if p.Spec.NodeName == host || p.Spec.NodeName == "" && p.Spec.NodeSelector[strata.HostnameLabel] == host {
			out = append(out, p)
		}
	}
	return out
}
