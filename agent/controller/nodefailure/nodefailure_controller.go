package nodefailure

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/index"
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
	recorder events.EventRecorder

	// clock measures the delays (NotReady, tolerations, backoff, recovery
	// timeout) and fires the rechecks through requeue, so that tests can
	// step time instead of waiting.
	clock   clock.WithDelayedExecution
	requeue chan event.GenericEvent

	mu sync.Mutex
	// searches counts the failed replacement searches in a row per
	// workload, for the retry backoff.
	searches map[types.NamespacedName]int
}

// Retry backoff of replacement searches with fail-fast off: doubling from
// the first, at most the second.
const (
	retryInitial = time.Second
	retryMax     = 30 * time.Second
)

// NewReconciler returns a Reconciler.
func NewReconciler(c client.Client, cc *cache.Cache, cfg configv1beta1.NodeFailure, clk clock.WithDelayedExecution, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, cache: cc, cfg: cfg, clock: clk, recorder: recorder,
		requeue: make(chan event.GenericEvent), searches: map[types.NamespacedName]int{}}
}

// after reconciles the workload again once d has passed on the clock.
func (r *Reconciler) after(key types.NamespacedName, d time.Duration) {
	r.clock.AfterFunc(d, func() {
		r.requeue <- event.GenericEvent{Object: &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	})
}

// attempt counts a failed replacement search of a workload and returns how
// many failed in a row before it.
func (r *Reconciler) attempt(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.searches[key]
	r.searches[key] = n + 1
	return n
}

// nextAfterFailure is what follows a failed replacement search.
type nextAfterFailure struct {
	evict   bool
	retryIn time.Duration
	why     string // appended to the search's failure message
}

// afterFailedSearch decides what follows a failed replacement search: with
// fail-fast, eviction; else a retry after a backoff (the attempt-th
// failure in a row, from 0), until the recovery timeout, counted from
// searchingSince, evicts.
func afterFailedSearch(cfg configv1beta1.NodeFailure, searchingSince, now time.Time, attempt int) nextAfterFailure {
	if cfg.FailFast == nil || *cfg.FailFast {
		return nextAfterFailure{evict: true, why: "; fail-fast is on, so the workload goes back to its queue"}
	}
	var timeout time.Duration // unset (configurations are defaulted): no retries
	if cfg.RecoveryTimeout != nil {
		timeout = cfg.RecoveryTimeout.Duration
	}
	left := timeout - now.Sub(searchingSince)
	if left <= 0 {
		return nextAfterFailure{evict: true, why: fmt.Sprintf("; no replacement within the recovery timeout of %s", timeout)}
	}
	return nextAfterFailure{
		retryIn: min(retryInitial<<min(attempt, 10), retryMax, left),
		why:     fmt.Sprintf("; retrying (fail-fast is off) until the recovery timeout of %s evicts it", timeout),
	}
}

// replaceEnabled says whether hot swap replaces failed nodes at all.
func replaceEnabled(cfg configv1beta1.NodeFailure) bool {
	return cfg.ReplaceFailedNodes == nil || *cfg.ReplaceFailedNodes
}

func (r *Reconciler) searched(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.searches, key)
}

// SetupWithManager watches admitted Workloads, the Nodes they use and their pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodefailure").
		For(&strata.Workload{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.workloadsOnNode), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				oldNode, okOld := e.ObjectOld.(*corev1.Node)
				newNode, okNew := e.ObjectNew.(*corev1.Node)
				return !okOld || !okNew || cache.SchedulingChanged(oldNode, newNode)
			},
		})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if name := o.GetLabels()[strata.WorkloadLabel]; name != "" && o.GetLabels()[strata.TASLabel] != "" {
				return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
			}
			return nil
		})).
		WatchesRawSource(source.Channel(r.requeue, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// workloadsOnNode finds the admitted workloads assigned to a node.
func (r *Reconciler) workloadsOnNode(_ context.Context, o client.Object) []ctrl.Request {
	keys := r.cache.WorkloadsOnNode(o.GetName())
	out := make([]ctrl.Request, len(keys))
	for i, key := range keys {
		out[i] = ctrl.Request{NamespacedName: key}
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
		r.searched(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) || !replaceEnabled(r.cfg) {
		r.searched(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
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
		r.searched(req.NamespacedName)
		if recheck > 0 {
			r.after(req.NamespacedName, recheck)
		}
		if len(wl.Status.UnhealthyNodes) > 0 {
			wl.Status.UnhealthyNodes = nil
			return ctrl.Result{}, r.client.Status().Update(ctx, &wl)
		}
		return ctrl.Result{}, nil
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
	gone := r.cache.DeletedNodeLabels(f.node)
	if !r.cache.Flavor(psa.Flavor, func(s *tas.Snapshot, topo *strata.Topology) {
		var values []string // where a deleted node was
		for _, l := range topo.Spec.Levels {
			if v, ok := gone[l.NodeLabel]; ok {
				values = append(values, v)
			}
		}
		if len(values) != len(topo.Spec.Levels) {
			values = nil
		}
		replaced, searchErr = s.FindReplacementNear(req, current, f.node, values)
	}) {
		searchErr = fmt.Errorf("flavor %s is not known", psa.Flavor)
	}
	if searchErr != nil {
		metrics.Replacements.WithLabelValues("failed").Inc()
		msg := fmt.Sprintf("node %s failed (%s): %v", f.node, f.reason, searchErr)
		key := client.ObjectKeyFromObject(wl)
		searchingSince := now
		if c := meta.FindStatusCondition(wl.Status.Conditions, ConditionNodeReplacement); c != nil && c.Status == metav1.ConditionFalse {
			searchingSince = c.LastTransitionTime.Time
		}
		next := afterFailedSearch(r.cfg, searchingSince, now, r.attempt(key))
		if next.evict {
			return ctrl.Result{}, r.evict(ctx, wl, msg+next.why)
		}
		wait := next.retryIn
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: ConditionNodeReplacement, Status: metav1.ConditionFalse, Reason: "Searching", LastTransitionTime: metav1.NewTime(searchingSince),
			Message: msg + next.why,
		})
		if err := r.client.Status().Update(ctx, wl); err != nil {
			return ctrl.Result{}, err
		}
		r.after(key, wait)
		return ctrl.Result{}, nil
	}
	r.searched(client.ObjectKeyFromObject(wl))
	newHost := ""
	for i, d := range replaced.Domains {
		if current.Domains[i].Values[0] != d.Values[0] {
			newHost = d.Values[0]
		}
	}
	psa.TopologyAssignment = tas.Encode(replaced)
	wl.Status.UnhealthyNodes = nil
	msg := fmt.Sprintf("node %s (%s) replaced by %s", f.node, f.reason, newHost)
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: ConditionNodeReplacement, Status: metav1.ConditionTrue, Reason: "Replaced", Message: msg, LastTransitionTime: metav1.NewTime(now)})
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
	r.searched(client.ObjectKeyFromObject(wl))
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
