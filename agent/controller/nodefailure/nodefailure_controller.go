package nodefailure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
	// failures is when each failed node of a workload was first seen
	// failed, for the latency metric.
	failures map[types.NamespacedName]map[string]time.Time
	// taintSeen is when each NoExecute taint without timeAdded was first
	// seen, per node and taint key; a taint that goes away is forgotten.
	taintSeen map[string]map[string]time.Time
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
		requeue: make(chan event.GenericEvent, 1024), searches: map[types.NamespacedName]int{},
		failures: map[types.NamespacedName]map[string]time.Time{}, taintSeen: map[string]map[string]time.Time{}}
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
// searchingSince, evicts. A workload within its unhealthy-nodes eviction
// threshold (tolerant) waits for room as with fail-fast off, whatever
// fail-fast says (Kueue's TASReplaceMultipleFailedNodes).
func afterFailedSearch(cfg configv1beta1.NodeFailure, tolerant bool, searchingSince, now time.Time, attempt int) nextAfterFailure {
	if !tolerant && (cfg.FailFast == nil || *cfg.FailFast) {
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
	why := fmt.Sprintf("; retrying (fail-fast is off) until the recovery timeout of %s evicts it", timeout)
	if tolerant {
		why = fmt.Sprintf("; the workload runs on within its unhealthy-nodes eviction threshold and waits for room until the recovery timeout of %s evicts it", timeout)
	}
	return nextAfterFailure{retryIn: min(retryInitial<<min(attempt, 10), retryMax, left), why: why}
}

// searchingPrefix starts the message of a search for a replacement of
// node, which searchStart reads back.
func searchingPrefix(node string) string {
	return fmt.Sprintf("node %s failed ", node)
}

// searchStart is when the search for a replacement of node began, for its
// recovery timeout: the time of the NodeReplacement condition c when it
// says a search for that same node goes on, else now. A search for
// another node (one that recovered meanwhile, or was replaced) does not
// count towards this one's timeout.
func searchStart(c *metav1.Condition, node string, now time.Time) time.Time {
	if c == nil || c.Status != metav1.ConditionFalse || !strings.HasPrefix(c.Message, searchingPrefix(node)) {
		return now
	}
	return c.LastTransitionTime.Time
}

// clearSearch removes from an evicted workload what hot swap said of its
// last admission: its failed nodes and a search for a replacement. It
// says whether anything changed. Once admitted again, the workload's
// nodes are new; a search's time left behind would count towards a new
// search's recovery timeout.
func clearSearch(wl *strata.Workload) bool {
	changed := len(wl.Status.UnhealthyNodes) > 0
	wl.Status.UnhealthyNodes = nil
	if c := meta.FindStatusCondition(wl.Status.Conditions, ConditionNodeReplacement); c != nil && c.Status == metav1.ConditionFalse {
		meta.RemoveStatusCondition(&wl.Status.Conditions, ConditionNodeReplacement)
		changed = true
	}
	return changed
}

// replaceEnabled says whether hot swap replaces failed nodes at all.
func replaceEnabled(cfg configv1beta1.NodeFailure) bool {
	return cfg.ReplaceFailedNodes == nil || *cfg.ReplaceFailedNodes
}

// searched forgets a workload's failed searches and failure times: its
// nodes are healthy or replaced, or it is gone or evicted.
func (r *Reconciler) searched(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.searches, key)
	delete(r.failures, key)
}

// replacedOne forgets one replaced node of a workload whose other failed
// nodes still wait: the next search starts a fresh backoff.
func (r *Reconciler) replacedOne(key types.NamespacedName, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.searches, key)
	delete(r.failures[key], node)
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

// cacheSyncRetry is how soon a workload is looked at again while the
// capacity cache is not synced.
const cacheSyncRetry = 100 * time.Millisecond

// Reconcile detects failed nodes under a workload and replaces or evicts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl strata.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		r.searched(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) || !replaceEnabled(r.cfg) {
		r.searched(req.NamespacedName)
		if wl.Status.Admission == nil && clearSearch(&wl) {
			// Evicted by something else (preemption, waitForPodsReady,
			// fencing) while a search went on: that search is over.
			return ctrl.Result{}, client.IgnoreNotFound(r.client.Status().Update(ctx, &wl))
		}
		return ctrl.Result{}, nil
	}
	if !r.cache.Synced() {
		// Just started: the capacity cache does not hold every admitted
		// workload and pod yet, and a replacement chosen now could take a
		// node they fill.
		return ctrl.Result{RequeueAfter: cacheSyncRetry}, nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
		return ctrl.Result{}, err
	}
	// An earlier Job of the same name may have left pods with the same
	// label: they are not this workload's to count, fail or move.
	pods.Items = workload.OwnedPods(&wl, pods.Items)
	now := r.clock.Now()
	var failed []failure
	var recheck time.Duration
	hosts := assignedHosts{}
	for i, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment == nil {
			continue
		}
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Cannot read the topology assignment; its nodes are not watched", "podSet", psa.Name)
			continue
		}
		if !hostLevel(a) {
			continue
		}
		hosts.set(psa.Name, a)
		tolerations := r.tolerations(&wl, psa)
		for _, d := range a.Domains {
			host := d.Values[0]
			var node corev1.Node
			var nodePtr *corev1.Node
			switch err := r.client.Get(ctx, types.NamespacedName{Name: host}, &node); {
			case err == nil:
				nodePtr = r.taintTimes(&node, now)
			case !apierrors.IsNotFound(err):
				return ctrl.Result{}, err
			}
			v := Detect(nodePtr, podsOn(pods.Items, psa.Name, host), tolerations, r.cfg, now)
			if v.Failed {
				failed = append(failed, failure{podSet: i, node: host, reason: v.Reason, since: r.failingSince(req.NamespacedName, host, v.Since)})
			} else if v.Recheck > 0 {
				recheck = minPositive(recheck, v.Recheck)
			}
		}
	}
	if len(failed) > 0 {
		return r.handle(ctx, &wl, failed, pods.Items, hosts, now)
	}
	r.searched(req.NamespacedName)
	if recheck > 0 {
		r.after(req.NamespacedName, recheck)
	}
	changed := len(wl.Status.UnhealthyNodes) > 0
	wl.Status.UnhealthyNodes = nil
	if c := meta.FindStatusCondition(wl.Status.Conditions, ConditionNodeReplacement); c != nil && c.Status == metav1.ConditionFalse {
		// The node came back before a replacement was found; a later
		// failure starts its recovery timeout afresh.
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: ConditionNodeReplacement, Status: metav1.ConditionTrue, Reason: "Recovered",
			Message: "the failed node is healthy again", LastTransitionTime: metav1.NewTime(now)})
		changed = true
	}
	if changed {
		if err := r.client.Status().Update(ctx, &wl); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.failStrandedPods(ctx, pods.Items, hosts)
}

// taintTimes fills in, on a copy of the node, when taints without
// timeAdded were first seen, so that tolerationSeconds count from then.
func (r *Reconciler) taintTimes(node *corev1.Node, now time.Time) *corev1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out *corev1.Node
	before := r.taintSeen[node.Name]
	seenNow := map[string]time.Time{}
	for i, t := range node.Spec.Taints {
		if t.TimeAdded != nil || t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		seen, ok := before[t.Key]
		if !ok {
			seen = now
		}
		seenNow[t.Key] = seen
		if out == nil {
			out = node.DeepCopy()
		}
		out.Spec.Taints[i].TimeAdded = ptr.To(metav1.NewTime(seen))
	}
	if len(seenNow) == 0 {
		delete(r.taintSeen, node.Name)
	} else {
		r.taintSeen[node.Name] = seenNow
	}
	if out == nil {
		return node
	}
	return out
}

// failingSince is when a node's failure under a workload was first seen,
// so that the latency metric covers retries too.
func (r *Reconciler) failingSince(key types.NamespacedName, node string, since time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures[key] == nil {
		r.failures[key] = map[string]time.Time{}
	}
	if first, ok := r.failures[key][node]; ok && first.Before(since) {
		return first
	}
	r.failures[key][node] = since
	return since
}

// failurePlan is what to do about a workload's failed nodes: evict it
// (evict is the message, metric the reason), or replace the failure at
// head; unhealthy is the queue of failed nodes, head first.
type failurePlan struct {
	evict, metric string
	head          failure
	unhealthy     []string
}

// planFailures decides what to do about the failures found under a
// workload. queued is its status.unhealthyNodes, the queue so far: nodes
// still failed keep their place, new ones join at the end in the order
// found. threshold, when set (> 0), is the workload's unhealthy-nodes
// eviction threshold: up to that many failed nodes are replaced one at a
// time, head first (Kueue's TASReplaceMultipleFailedNodes); one more
// evicts. Without it, a second failed node evicts, and so does a node
// under more than one pod set.
func planFailures(queued []strata.UnhealthyNode, failed []failure, threshold int) failurePlan {
	isFailed := map[string]bool{}
	for _, f := range failed {
		isFailed[f.node] = true
	}
	var order []string
	inOrder := map[string]bool{}
	add := func(node string) {
		if isFailed[node] && !inOrder[node] {
			order = append(order, node)
			inOrder[node] = true
		}
	}
	for _, n := range queued {
		add(n.Name)
	}
	for _, f := range failed {
		add(f.node)
	}
	names := make([]string, len(failed))
	for i, f := range failed {
		names[i] = fmt.Sprintf("%s (%s)", f.node, f.reason)
	}
	plan := failurePlan{unhealthy: order}
	switch {
	case threshold > 0 && len(order) > threshold:
		plan.evict, plan.metric = fmt.Sprintf("%d nodes failed: %s; the workload's %s allows %d, so it goes back to its queue",
			len(order), strings.Join(names, ", "), strata.UnhealthyNodesEvictionThresholdAnnotation, threshold), "ThresholdExceeded"
	case threshold == 0 && len(order) > 1:
		plan.evict, plan.metric = fmt.Sprintf("%d nodes failed at once: %s; Strata replaces one node at a time unless the Job sets %s, so the workload goes back to its queue",
			len(order), strings.Join(names, ", "), strata.UnhealthyNodesEvictionThresholdAnnotation), "MultipleNodes"
	case threshold == 0 && len(failed) > 1:
		plan.evict, plan.metric = fmt.Sprintf("node %s failed under %d pod sets; Strata replaces a node under one pod set at a time unless the Job sets %s, so the workload goes back to its queue",
			failed[0].node, len(failed), strata.UnhealthyNodesEvictionThresholdAnnotation), "MultiplePodSets"
	default:
		for _, f := range failed {
			if f.node == order[0] {
				plan.head = f
				break
			}
		}
	}
	return plan
}

// handle replaces the failed node at the head of the workload's queue, or
// evicts the workload.
func (r *Reconciler) handle(ctx context.Context, wl *strata.Workload, failed []failure, pods []corev1.Pod, hosts assignedHosts, now time.Time) (ctrl.Result, error) {
	threshold, _, _ := workload.UnhealthyNodesThreshold(wl.Annotations, field.NewPath("metadata", "annotations"))
	plan := planFailures(wl.Status.UnhealthyNodes, failed, threshold)
	wl.Status.UnhealthyNodes = nil
	for _, n := range plan.unhealthy {
		wl.Status.UnhealthyNodes = append(wl.Status.UnhealthyNodes, strata.UnhealthyNode{Name: n})
	}
	if plan.evict != "" {
		metrics.NodeFailureEvictions.WithLabelValues(plan.metric).Inc()
		return ctrl.Result{}, r.evict(ctx, wl, plan.evict)
	}
	tolerant := threshold > 0
	f := plan.head
	key := client.ObjectKeyFromObject(wl)
	if held, ok := r.cache.AdmittedVersion(key); ok && held > cache.Version(wl) {
		// The informer has not shown this controller's last write yet
		// (a replacement): searching from this older view would give
		// that replacement's capacity back and book another.
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	psa := &wl.Status.Admission.PodSetAssignments[f.podSet]
	ps := workload.PodSet(wl, psa.Name)
	if ps == nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("the admission names pod set %q, which the workload does not have", psa.Name))
	}
	current, err := tas.Decode(psa.TopologyAssignment)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	// As admitted: a partial admission runs fewer pods than the pod set
	// asks for.
	admitted := *ps
	admitted.Count = psa.Count
	req := workload.Request(&admitted)
	req.Tolerations = r.tolerations(wl, *psa)
	var replaced *tas.Assignment
	var searchErr error
	gone := r.cache.DeletedNodeLabels(f.node)
	before := wl.DeepCopy()
	// Search and take the replacement's capacity in one step, as the
	// scheduler does with admissions, so that no other workload is given
	// the same node; the status write follows.
	found, reserveErr := r.cache.Reserve(psa.Flavor, key, func(s *tas.Snapshot, topo *strata.Topology) (*strata.Workload, error) {
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
		if searchErr != nil {
			return nil, nil
		}
		next := wl.DeepCopy()
		next.Status.Admission.PodSetAssignments[f.podSet].TopologyAssignment = tas.Encode(replaced)
		next.Status.UnhealthyNodes = remaining(plan, failed, f)
		return next, nil
	})
	if !found {
		searchErr = fmt.Errorf("flavor %s is not known", psa.Flavor)
	}
	if searchErr == nil && reserveErr != nil {
		// The replacement has room, but the admission with it does not
		// fit: a node the workload keeps has less room now than its pods
		// take (its allocatable shrank, or a pod the agent does not place
		// took room) while its pods run there. A failed search that waits
		// (fail-fast or not: the workload runs, and the room may come
		// back), retried with backoff until recoveryTimeout evicts; not
		// an error retried for ever without a word.
		searchErr = fmt.Errorf("the replacement has room, but the nodes the workload keeps no longer hold its pods: %w", reserveErr)
	}
	keptShrank := searchErr != nil && reserveErr != nil
	if searchErr != nil {
		metrics.Replacements.WithLabelValues("failed").Inc()
		msg := searchingPrefix(f.node) + fmt.Sprintf("(%s): %v", f.reason, searchErr)
		searchingSince := searchStart(meta.FindStatusCondition(wl.Status.Conditions, ConditionNodeReplacement), f.node, now)
		next := afterFailedSearch(r.cfg, tolerant || keptShrank, searchingSince, now, r.attempt(key))
		if keptShrank && !next.evict {
			next.why = "; the workload runs on, and the search is retried until the recovery timeout evicts it"
		}
		if next.evict {
			metrics.NodeFailureEvictions.WithLabelValues("NoReplacement").Inc()
			return ctrl.Result{}, r.evict(ctx, wl, msg+next.why)
		}
		// Set anew: a search for another node keeps the status False, and
		// SetStatusCondition keeps the time of a status that stays.
		meta.RemoveStatusCondition(&wl.Status.Conditions, ConditionNodeReplacement)
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: ConditionNodeReplacement, Status: metav1.ConditionFalse, Reason: "Searching", LastTransitionTime: metav1.NewTime(searchingSince),
			Message: msg + next.why,
		})
		if err := r.client.Status().Update(ctx, wl); err != nil {
			return ctrl.Result{}, err
		}
		r.after(key, next.retryIn)
		return ctrl.Result{}, nil
	}
	psa.TopologyAssignment = tas.Encode(replaced)
	wl.Status.UnhealthyNodes = remaining(plan, failed, f)
	msg := fmt.Sprintf("node %s (%s) replaced by %s", f.node, f.reason, strings.Join(newHosts(current, replaced), ", "))
	if n := len(wl.Status.UnhealthyNodes); n > 0 {
		left := make([]string, n)
		for i, u := range wl.Status.UnhealthyNodes {
			left[i] = u.Name
		}
		msg += fmt.Sprintf("; %d failed node(s) wait their turn: %s", n, strings.Join(left, ", "))
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: ConditionNodeReplacement, Status: metav1.ConditionTrue, Reason: "Replaced", Message: msg, LastTransitionTime: metav1.NewTime(now)})
	if err := r.client.Status().Update(ctx, wl); err != nil {
		// Give the capacity back only when the write certainly failed. With
		// an unknown outcome (a timeout) the replacement may stand: the
		// cache keeps it, and the retry either finds it written (the
		// informer shows it) or searches again from the failed node.
		if cache.OutcomeKnown(err) {
			r.restore(ctx, key, before)
		}
		return ctrl.Result{}, err
	}
	// The cache holds the replacement as of the version just written, so
	// that a read from before it is known to be behind (above).
	if err := r.cache.SyncAdmitted(key, wl); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Recording the replacement's version", "workload", key)
	}
	if len(wl.Status.UnhealthyNodes) == 0 {
		r.searched(key)
	} else {
		r.replacedOne(key, f.node)
	}
	metrics.Replacements.WithLabelValues("succeeded").Inc()
	metrics.ReplacementLatency.Observe(r.clock.Since(f.since).Seconds())
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "NodeReplaced", "Replace", "%s", msg)
	hosts.set(psa.Name, replaced)
	return ctrl.Result{}, r.failStrandedPods(ctx, pods, hosts)
}

// newHosts lists the hosts of replaced that current does not have: the
// replacement, one node or several sharing the failed node's pods.
func newHosts(current, replaced *tas.Assignment) []string {
	had := map[string]bool{}
	for _, d := range current.Domains {
		had[d.Values[0]] = true
	}
	var out []string
	for _, d := range replaced.Domains {
		if !had[d.Values[0]] {
			out = append(out, d.Values[0])
		}
	}
	return out
}

// remaining is the queue of failed nodes once done's failure is replaced:
// its node leaves the queue unless it fails under another pod set too.
func remaining(plan failurePlan, failed []failure, done failure) []strata.UnhealthyNode {
	var out []strata.UnhealthyNode
	for _, n := range plan.unhealthy {
		keep := n != done.node
		for _, f := range failed {
			if f.node == n && f.podSet != done.podSet {
				keep = true
			}
		}
		if keep {
			out = append(out, strata.UnhealthyNode{Name: n})
		}
	}
	return out
}

// restore records in the cache the workload as the informer shows it now,
// after a replacement that could not be written. Not simply before: the
// write may have failed because a newer version exists (a replacement
// written earlier, which the informer may already have delivered); an
// older version is corrected by the informer's next event.
func (r *Reconciler) restore(ctx context.Context, key types.NamespacedName, before *strata.Workload) {
	var latest strata.Workload
	switch err := r.client.Get(ctx, key, &latest); {
	case err == nil:
		before = &latest
	case apierrors.IsNotFound(err):
		r.cache.RemoveWorkload(key)
		return
	}
	if err := r.cache.AddWorkload(key, before); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Recording the workload's admission again", "workload", key)
	}
}

// failStrandedPods marks as Failed the workload's pods that were sent to a
// node its assignment no longer has (a replaced node) and never started
// there, so that the Job controller recreates them and the ungater sends
// them to the replacement. It runs on every reconcile, so a pod whose
// update failed once is failed the next time.
func (r *Reconciler) failStrandedPods(ctx context.Context, pods []corev1.Pod, hosts assignedHosts) error {
	var errs []error
	for i := range pods {
		p := &pods[i]
		assigned, ok := hosts[p.Labels[strata.PodSetLabel]]
		host := p.Spec.NodeSelector[strata.HostnameLabel]
		if !ok || p.Spec.NodeName != "" || host == "" || assigned[host] || terminatedOrTerminating(p) || workload.TopologyGated(p) {
			continue
		}
		if recreatesOnlyMissing(p) {
			// The MPI operator makes a worker pod that is missing, never
			// one that failed: a failed worker would leave its rank
			// unstarted. Deleted (it never started), it is made again
			// from the admitted template, gated, and sent to the
			// replacement.
			// Not if it was bound meanwhile (the resource version).
			if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}); err != nil {
				if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs = append(errs, fmt.Errorf("deleting pod %s stranded on node %s: %w", p.Name, host, err))
				}
				continue
			}
			r.recorder.Eventf(p, nil, corev1.EventTypeNormal, "PodTerminated", "Terminate", "Node %s failed; the pod is deleted, to be made again on its replacement", host)
			continue
		}
		patch := client.StrategicMergeFrom(p.DeepCopy())
		p.Status.Phase = corev1.PodFailed
		message := fmt.Sprintf("node %s failed; the pod is recreated on its replacement", host)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: PodConditionTerminatedByStrata, Status: corev1.ConditionTrue, Reason: ReasonUnschedulableOnNode,
			Message: message, LastTransitionTime: metav1.NewTime(r.clock.Now()),
		})
		// Kubernetes' condition for a pod ended by a disruption, not by its
		// own failure: a Job whose podFailurePolicy ignores DisruptionTarget
		// (as it does for the drain or node failure that stranded this pod)
		// does not count it against its backoffLimit.
		if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget }) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonUnschedulableOnNode,
				Message: message, LastTransitionTime: metav1.NewTime(r.clock.Now()),
			})
		}
		if err := r.client.Status().Patch(ctx, p, patch); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("failing pod %s stranded on node %s: %w", p.Name, host, err))
			}
			continue
		}
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, "PodTerminated", "Terminate", "Node %s failed; the pod is recreated on its replacement", host)
	}
	return errors.Join(errs...)
}

// recreatesOnlyMissing says whether a pod's controller makes a new pod
// only for one that is missing, not for one that failed: an MPIJob's
// worker pods (its launcher is a Job's).
func recreatesOnlyMissing(p *corev1.Pod) bool {
	owner := metav1.GetControllerOfNoCopy(p)
	return owner != nil && owner.Kind == "MPIJob" && strings.HasPrefix(owner.APIVersion, "kubeflow.org/")
}

// assignedHosts are the hosts of each host-level pod set's assignment.
type assignedHosts map[string]map[string]bool

func (h assignedHosts) set(podSet string, a *tas.Assignment) {
	h[podSet] = make(map[string]bool, len(a.Domains))
	for _, d := range a.Domains {
		h[podSet][d.Values[0]] = true
	}
}

// evict sends the workload back to its queue; the Job controller stops the Job.
func (r *Reconciler) evict(ctx context.Context, wl *strata.Workload, message string) error {
	// The failed nodes are named in the message; a requeued workload has
	// none to replace. Its admitted time counts against its maximum
	// execution time, as every eviction's.
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, r.clock.Now())
	wl.Status.Admission, wl.Status.UnhealthyNodes = nil, nil
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonNodeFailure, Message: message})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Evicted", Message: message})
	// Back in its queue at once (Kueue's, for NodeFailures).
	workload.SetRequeued(wl, metav1.ConditionTrue, ReasonNodeFailure, message, r.clock.Now())
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
