// Package ungater releases the pods of admitted topology-aware workloads:
// each gated pod gets the node selector of its domain and loses the
// strata.dev/topology scheduling gate, so that exactly the assigned number
// of pods lands in each domain, in rank order when pods carry an index.
package ungater

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reconciler ungates the pods of one workload per reconcile.
type Reconciler struct {
	client client.Client
	batch  time.Duration
	// live reads a pod before it is stopped for running without its
	// release (bypassed); recorder says so on its Workload. Both unset:
	// such pods are left alone.
	live     client.Reader
	recorder events.EventRecorder

	mu sync.Mutex
	// expected are pods ungated by this agent but not yet seen ungated in
	// the cache: workload -> pod UID -> domain index, per pod set.
	expected map[types.NamespacedName]map[types.UID]placed
	// want is the number of pods each admitted workload's topology
	// assignments expect.
	want map[types.NamespacedName]int32
}

// placed is where the agent sent a pod: its pod set and the values of its
// domain (not an index: hot swap may rewrite the assignment meanwhile).
type placed struct {
	podSet string
	domain string
	// uncertain: the patch's outcome is unknown (it timed out). The pod
	// counts in its domain all the same, and is patched again.
	uncertain bool
}

// NewReconciler returns a Reconciler batching pod events over batch.
func NewReconciler(c client.Client, batch time.Duration) *Reconciler {
	return &Reconciler{client: c, batch: batch, expected: map[types.NamespacedName]map[types.UID]placed{}, want: map[types.NamespacedName]int32{}}
}

// WithBypassCheck has the reconciler delete the pods of a topology-assigned
// pod set that lost their gate to someone else than an agent (bypassed),
// after reading them with live.
func (r *Reconciler) WithBypassCheck(live client.Reader, recorder events.EventRecorder) *Reconciler {
	r.live, r.recorder = live, recorder
	return r
}

// SetupWithManager watches admitted Workloads and the pods that carry a
// workload label; pod events are batched.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("ungater").
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		For(&strata.Workload{}).
		Watches(&corev1.Pod{}, r.podHandler()).
		Complete(r)
}

// podHandler batches pod events per workload over the batch period, so a
// burst of pod creations is one reconcile; but once every pod the
// admission expects exists and one of them is gated, there is nothing to
// wait for and the workload is reconciled at once.
func (r *Reconciler) podHandler() handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		name := o.GetLabels()[strata.WorkloadLabel]
		if name == "" {
			return
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}
		if r.allPresent(ctx, req.NamespacedName) {
			q.Add(req)
			return
		}
		q.AddAfter(req, r.batch)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A gated pod waits for its domain; a pod that stops running
			// frees a slot for its replacement; a pod that loses its gate
			// is checked for a release by someone else (bypassed). Other
			// updates change nothing the ungater decides on.
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			_, releasedByAgent := newPod.Annotations[strata.ReleasedFlavorAnnotation]
			ungated := okOld && okNew && workload.TopologyGated(oldPod) && !releasedByAgent
			if okOld && okNew && !workload.TopologyGated(newPod) && !ungated && active(newPod) == active(oldPod) {
				return
			}
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

// allPresent says whether the workload's admission is known and every pod
// it expects exists, not finished, with at least one of them gated.
func (r *Reconciler) allPresent(ctx context.Context, key types.NamespacedName) bool {
	r.mu.Lock()
	want := r.want[key]
	r.mu.Unlock()
	if want == 0 {
		return false
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, append(index.PodsOf(key.Namespace, key.Name), client.UnsafeDisableDeepCopy)...); err != nil {
		return false
	}
	var n int32
	gated := false
	for i := range pods.Items {
		if p := &pods.Items[i]; active(p) {
			n++
			gated = gated || workload.TopologyGated(p)
		}
	}
	return gated && n >= want
}

// active is false for pods that finished or are being deleted.
func active(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp.IsZero()
}

// Reconcile ungates what it can of one workload's pods.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl strata.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil || workload.AwaitingChecks(&wl) {
		// Not admitted, or its quota reserved while its AdmissionChecks
		// are not all Ready: its pods stay gated.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	var want int32
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment != nil {
			want += psa.Count
		}
	}
	r.mu.Lock()
	r.want[req.NamespacedName] = want
	r.mu.Unlock()
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
		return ctrl.Result{}, err
	}
	// Only the pods of the Job that owns the Workload: an earlier Job of
	// the same name may have left pods with the same label.
	pods.Items = workload.OwnedPods(&wl, pods.Items)
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		// The flavor's node labels and tolerations, for pods whose
		// templates do not carry them; a flavor deleted since the
		// admission gives none (an admission wrote them into the
		// templates of every kind but LeaderWorkerSet).
		var flavor strata.ResourceFlavor
		if err := r.client.Get(ctx, types.NamespacedName{Name: psa.Flavor}, &flavor); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("pod set %s: flavor %s: %w", psa.Name, psa.Flavor, err)
		}
		flavor.Name = psa.Flavor // deleted since: the pods are released on the admission's flavor all the same
		// What its AdmissionChecks add to its pods (their podSetUpdates),
		// for pods whose templates do not carry it either.
		updates := workload.PodSetUpdateOf(wl.Status.AdmissionChecks, psa.Name)
		if psa.TopologyAssignment == nil {
			// Pods gated although their pod set has no topology
			// assignment come from templates an admission did not write
			// (a LeaderWorkerSet's): they go on the flavor's nodes.
			if err := r.releaseAll(ctx, psa.Name, &flavor, updates, pods.Items); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("pod set %s: %w", psa.Name, err))
		}
		var ps *strata.PodSet
		if i := slices.IndexFunc(wl.Spec.PodSets, func(ps strata.PodSet) bool { return ps.Name == psa.Name }); i >= 0 {
			ps = workload.RankedPodSet(wl.Spec.PodSets, i)
		}
		if err := r.ungate(ctx, req.NamespacedName, ps, a, &flavor, updates, pods.Items); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.stopBypassed(ctx, &wl, psa.Name, psa.Flavor, a, pods.Items); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// ReasonReleasedAroundAgent is the reason of the Warning event on a
// Workload whose pod was stopped for running released by someone other
// than the agent (bypassed), and of that pod's DisruptionTarget condition.
const ReasonReleasedAroundAgent = "PodReleasedAroundAgent"

// bypassed says whether a pod of a pod set whose admission has topology
// assignment a runs without the strata.dev/topology gate although no agent
// released it. An agent's release writes every level of the assignment into
// the pod's node selector in the write that removes the gate; a pod that
// lacks one lost its gate to someone else — a tenant allowed to update pods
// in the namespace — and kube-scheduler may put it anywhere in the flavor,
// outside the domains the admission assigned and counted.
//
// A pod an agent released for an earlier admission on another flavor
// (strata.dev/released-flavor, which its release writes in the same
// write, naming another flavor than flavor, on a pod made before the
// admission, at admittedAt: the API server sets a pod's creation time, so
// a tenant cannot forge that) is not judged either: a Job admitted again
// before it was stopped keeps its pods until its controller stops them. A
// pod whose node
// selector names every level is not judged here, even
// when the domain it names is not the assignment's: hot swap leaves such
// pods on a replaced node to fail (nodefailure), and a tenant could only
// have written a domain of the flavor's nodes that way.
func bypassed(a *tas.Assignment, flavor string, admittedAt time.Time, p *corev1.Pod) bool {
	if workload.TopologyGated(p) || !active(p) {
		return false
	}
	if f, ok := p.Annotations[strata.ReleasedFlavorAnnotation]; ok && f != flavor && p.CreationTimestamp.Before(&metav1.Time{Time: admittedAt}) {
		return false
	}
	for _, level := range a.Levels {
		if _, ok := p.Spec.NodeSelector[level]; !ok {
			return true
		}
	}
	return false
}

// stopBypassed deletes the pods of pod set podSet that run bypassed, after
// reading each live (a pod the cache shows ungated without its domain can
// only be so, as the agent's release writes both at once; the read guards
// against a pod replaced under the same name). The Job controller (or the
// kind's) makes them again from the admitted template, gated, and the
// ungater sends them to their domains.
func (r *Reconciler) stopBypassed(ctx context.Context, wl *strata.Workload, podSet, flavor string, a *tas.Assignment, all []corev1.Pod) error {
	if r.live == nil {
		return nil
	}
	var admittedAt time.Time
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		admittedAt = c.LastTransitionTime.Time
	}
	var errs []error
	for i := range all {
		p := &all[i]
		if p.Labels[strata.PodSetLabel] != podSet || !bypassed(a, flavor, admittedAt, p) {
			continue
		}
		var live corev1.Pod
		if err := r.live.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("pod %s: %w", p.Name, err))
			}
			continue
		}
		if live.UID != p.UID || !bypassed(a, flavor, admittedAt, &live) {
			continue
		}
		// Stopped as a disruption, not a failure of its own: a Job whose
		// podFailurePolicy ignores DisruptionTarget does not count it.
		patch := client.MergeFrom(live.DeepCopy())
		if !slices.ContainsFunc(live.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget }) {
			live.Status.Conditions = append(live.Status.Conditions, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonReleasedAroundAgent,
				Message: "released outside its topology assignment by someone other than strata-agent", LastTransitionTime: metav1.Now(),
			})
			if err := r.client.Status().Patch(ctx, &live, patch); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("pod %s, released around the agent: %w", p.Name, err))
				continue
			}
		}
		// A bypass cannot be undone (a gate cannot be added back, nor an
		// ungated pod's node selector changed): whatever changed in the
		// pod since it was read, it goes.
		if err := r.client.Delete(ctx, &live, client.Preconditions{UID: &live.UID}); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting pod %s, released around the agent: %w", p.Name, err))
			}
			continue
		}
		r.recorder.Eventf(wl, &live, corev1.EventTypeWarning, ReasonReleasedAroundAgent, "Delete",
			"Pod %s lost the %s gate to someone other than strata-agent and could run outside the domains of pod set %s's admission; it is deleted, to be made again gated and released into its domain",
			p.Name, strata.TopologySchedulingGate, podSet)
	}
	return errors.Join(errs...)
}

// ungate gives the gated pods of one pod set their domains.
func (r *Reconciler) ungate(ctx context.Context, key types.NamespacedName, ps *strata.PodSet, a *tas.Assignment, flavor *strata.ResourceFlavor, updates *strata.PodSetUpdate, all []corev1.Pod) error {
	if ps == nil {
		return nil
	}
	r.mu.Lock()
	releases := plan(ps, a, all, r.expected[key])
	r.mu.Unlock()
	// The pods are patched concurrently: a Job's pods are released
	// together. Each successful patch is recorded at once, whatever happens
	// to the others.
	var (
		g    errgroup.Group
		errs = make([]error, len(releases))
	)
	g.SetLimit(releaseWriters)
	for i, rel := range releases {
		g.Go(func() error {
			err := r.release(ctx, rel.pod, a, rel.domain, flavor, updates)
			if err != nil {
				errs[i] = fmt.Errorf("pod %s: %w", rel.pod.Name, err)
				if cache.OutcomeKnown(err) {
					return nil
				}
				// It may have landed: the pod counts in its domain, so
				// that no other pod is sent there in its place.
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.expected[key] == nil {
				r.expected[key] = map[types.UID]placed{}
			}
			r.expected[key][rel.pod.UID] = placed{podSet: ps.Name, domain: tas.DomainKey(a.Domains[rel.domain].Values), uncertain: err != nil}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// releaseWriters bounds the concurrent pod patches of one reconcile.
const releaseWriters = 16

// release is a gated pod and the domain it goes to.
type release struct {
	pod    *corev1.Pod
	domain int
}

// plan chooses domains for the gated pods of one pod set. Pods already
// ungated count in their domains, and so do the pods in exp — ungated by
// this agent, not yet seen so in the cache (exp loses the pods that are
// gone, finished or seen ungated). Pods whose rank the assignment covers go
// to the domain of their rank; the others (no index, or an index past the
// assignment, as when an Indexed Job has more completions than
// parallelism) then fill what is left in rank order. No domain gets more
// than its count, so a pod that has no slot waits.
func plan(ps *strata.PodSet, a *tas.Assignment, all []corev1.Pod, exp map[types.UID]placed) []release {
	used := make([]int32, len(a.Domains))
	byKey := make(map[string]int, len(a.Domains))
	for i, d := range a.Domains {
		byKey[tas.DomainKey(d.Values)] = i
	}
	var gated []*corev1.Pod
	// retry are pods whose patch had an unknown outcome: to the same
	// domain again.
	var retry []release
	for i := range all {
		p := &all[i]
		if p.Labels[strata.PodSetLabel] != ps.Name || !active(p) {
			if e, ok := exp[p.UID]; ok && e.podSet == ps.Name {
				delete(exp, p.UID)
			}
			continue
		}
		if workload.TopologyGated(p) {
			if e, ok := exp[p.UID]; ok && e.podSet == ps.Name {
				d, ok := byKey[e.domain]
				switch {
				case ok:
					used[d]++ // ungated by us; the cache has not caught up
					if e.uncertain {
						retry = append(retry, release{pod: p, domain: d})
					}
					continue
				case !e.uncertain:
					continue // released to a domain hot swap replaced since: hot swap handles it
				}
				// Its release had an unknown outcome and its domain was
				// replaced since: it is gated as far as anyone knows, and
				// placed again below (were the release written after all,
				// the pod is bound for the replaced node and hot swap
				// makes it again).
				delete(exp, p.UID)
			}
			gated = append(gated, p)
			continue
		}
		delete(exp, p.UID)
		if d := domainOf(a, p); d >= 0 {
			used[d]++
		}
	}

	rankOf := rankFunc(ps, all)
	slices.SortStableFunc(gated, func(x, y *corev1.Pod) int {
		rx, okx := rankOf(x)
		ry, oky := rankOf(y)
		switch {
		case okx && oky:
			return cmp.Compare(rx, ry)
		case okx:
			return -1
		case oky:
			return 1
		}
		return cmp.Compare(x.Name, y.Name)
	})
	out := retry
	var rest []*corev1.Pod
	for _, p := range gated {
		rank, ok := rankOf(p)
		if !ok {
			rest = append(rest, p)
			continue
		}
		d := a.DomainOfRank(rank)
		if d < 0 {
			rest = append(rest, p)
			continue
		}
		if used[d] >= a.Domains[d].Count {
			continue // its domain is full: a replacement pod waits until a slot frees
		}
		used[d]++
		out = append(out, release{pod: p, domain: d})
	}
	for _, p := range rest {
		for i, dom := range a.Domains {
			if used[i] < dom.Count {
				used[i]++
				out = append(out, release{pod: p, domain: i})
				break
			}
		}
	}
	return out
}

// release sets the domain's node selector on the pod (none when a is nil),
// notes the flavor it is released on (strata.ReleasedFlavorAnnotation) and
// removes the gate. A pod whose template an admission did not write (a
// LeaderWorkerSet's, a gated copy's) gets the flavor's node labels and
// tolerations too, and, with a topology assignment, the label that counts
// it through its Workload.
func (r *Reconciler) release(ctx context.Context, p *corev1.Pod, a *tas.Assignment, d int, flavor *strata.ResourceFlavor, updates *strata.PodSetUpdate) error {
	patch := client.MergeFrom(p.DeepCopy())
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	if updates != nil {
		addMissing(&p.Labels, updates.Labels)
		addMissing(&p.Annotations, updates.Annotations)
		addMissing(&p.Spec.NodeSelector, updates.NodeSelector)
		for _, t := range updates.Tolerations {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
				p.Spec.Tolerations = append(p.Spec.Tolerations, t)
			}
		}
	}
	for k, v := range flavor.Spec.NodeLabels {
		if _, ok := p.Spec.NodeSelector[k]; !ok {
			p.Spec.NodeSelector[k] = v
		}
	}
	for _, t := range flavor.Spec.Tolerations {
		if !slices.ContainsFunc(p.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, t)
		}
	}
	if a != nil {
		for i, level := range a.Levels {
			p.Spec.NodeSelector[level] = a.Domains[d].Values[i]
		}
		// A pod of a template no admission wrote (a gated copy's, see
		// jobs.GatedStart) counts through its Workload in the agent's
		// cache from now on, as the admission's pods do.
		if p.Labels[strata.TASLabel] == "" {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[strata.TASLabel] = "true"
		}
	}
	if len(p.Spec.NodeSelector) == 0 {
		p.Spec.NodeSelector = nil
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[strata.ReleasedFlavorAnnotation] = flavor.Name
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, workload.IsTopologyGate)
	if err := r.client.Patch(ctx, p, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// releaseAll releases the gated pods of a pod set admitted without a
// topology assignment onto the flavor's nodes.
func (r *Reconciler) releaseAll(ctx context.Context, podSet string, flavor *strata.ResourceFlavor, updates *strata.PodSetUpdate, all []corev1.Pod) error {
	var errs []error
	for i := range all {
		p := &all[i]
		if p.Labels[strata.PodSetLabel] != podSet || !active(p) || !workload.TopologyGated(p) {
			continue
		}
		if err := r.release(ctx, p, nil, 0, flavor, updates); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// addMissing adds to *m the entries of from whose keys it lacks: a pod's
// own value (its template's, where an admission wrote the update) stays.
func addMissing(m *map[string]string, from map[string]string) {
	for k, v := range from {
		if _, ok := (*m)[k]; ok {
			continue
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = v
	}
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.expected, key)
	delete(r.want, key)
}

// domainOf finds the domain an ungated pod was sent to from its node
// selector, or -1.
func domainOf(a *tas.Assignment, p *corev1.Pod) int {
	return slices.IndexFunc(a.Domains, func(d tas.DomainAssignment) bool {
		for i, level := range a.Levels {
			if p.Spec.NodeSelector[level] != d.Values[i] {
				return false
			}
		}
		return true
	})
}

// rankFunc returns a pod's rank: its index label minus the pod set's
// offset; with a sub-group index label (a JobSet's job index), the
// sub-group's index times the pods per sub-group plus that. pods are the
// workload's: when one of the pod set's is labelled 0 although the pod set
// has an offset, its controller numbers the pods from 0, not from the
// offset (the MPI operator v0.6 numbers an MPIJob's workers
// from 0 with runLauncherAsWorker; KEP-2724, and v0.8, from 1),
// and ranks start at 0.
func rankFunc(ps *strata.PodSet, pods []corev1.Pod) func(*corev1.Pod) (int32, bool) {
	r := ps.TopologyRequest
	if r == nil || r.PodIndexLabel == nil {
		return func(*corev1.Pod) (int32, bool) { return 0, false }
	}
	index := func(p *corev1.Pod, label string) (int32, bool) {
		v, ok := p.Labels[label]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 32)
		return int32(n), err == nil
	}
	label, offset := *r.PodIndexLabel, int32(0)
	if r.PodIndexOffset != nil {
		offset = *r.PodIndexOffset
		for i := range pods {
			if pods[i].Labels[strata.PodSetLabel] != ps.Name {
				continue
			}
			if n, ok := index(&pods[i], label); ok && n == 0 {
				offset = 0
				break
			}
		}
	}
	var groupLabel string
	var perGroup int32
	if r.SubGroupIndexLabel != nil && r.SubGroupCount != nil && *r.SubGroupCount > 0 {
		groupLabel, perGroup = *r.SubGroupIndexLabel, ps.Count / *r.SubGroupCount
	}
	return func(p *corev1.Pod) (int32, bool) {
		n, ok := index(p, label)
		if !ok {
			return 0, false
		}
		if groupLabel != "" {
			g, ok := index(p, groupLabel)
			if !ok || n >= perGroup+offset {
				return 0, false
			}
			n += g * perGroup
		}
		return n - offset, true
	}
}
