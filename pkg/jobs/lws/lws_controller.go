package lws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reconciler is the agent's intake of LeaderWorkerSets labelled with
// strata.dev/queue-name: it keeps one Workload per group (replica), as
// this package defines them — created for every group the set asks for,
// removed for the groups a scale-down or the set's deletion drops, which
// releases their capacity — and labels each gated pod with its group's
// Workload, pod set and set UID, so that the ungater releases it into its
// domain once the group is admitted. A LeaderWorkerSet has no suspension:
// the agent chart's admission policy puts the topology scheduling gate in
// its templates when it is created, so that none of its pods runs before
// its group is admitted and placed; a group that loses its admission
// (evicted) has its running pods deleted, and the set's controller makes
// them again, gated. A rolling update replaces a group whole, leader
// first: a leader of a new template revision makes the group a new
// Workload, admitted again, while the old template's pods count as plain
// pods until they are gone (labelPods, roll).
type Reconciler struct {
	client   client.Client
	live     client.Reader
	recorder events.EventRecorder
	intake   *intake.Keeper
}

// NewReconciler returns a Reconciler; live reads past the cache (a group's
// admission is confirmed there before its pods are stopped).
func NewReconciler(c client.Client, live client.Reader, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, live: live, recorder: recorder, intake: intake.New(GroupKind(0), c, recorder).
		WithFinalizerFor(strata.PodsGoneFinalizer, workload.IsCopy)}
}

// What strata-agent may do with LeaderWorkerSets on its cluster: its
// Reconciler only reads them (a LeaderWorkerSet is never suspended: its
// pods are gated, labelled and released), but for a hub's copy being
// deleted, on which it writes the pods that keep it
// (intake.ReportGoingPods). It deletes the pods of a group
// that runs without an admission (stopUnadmitted), so that the
// LeaderWorkerSet's controller makes them again, gated.
//
// +kubebuilder:rbac:roleName=strata-agent,groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch;patch
// +kubebuilder:rbac:roleName=strata-agent,groups="",resources=pods,verbs=delete

// setupAgent registers the agent's Reconciler of LeaderWorkerSets with
// mgr (Registration's AgentController).
func setupAgent(mgr manager.Manager, recorder events.EventRecorder, opts tas.Options) error {
	r := NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), recorder)
	r.intake.WithTAS(opts)
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches queue-labelled LeaderWorkerSets, their
// Workloads, their pods, and what intake watches for their validity.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("leaderworkerset").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Watches(&lwsapi.LeaderWorkerSet{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		}))).
		// A pod the set's controller creates is labelled here: only gated
		// pods of a set matter, and only until they carry their Workload;
		// and leaders, whose revision says when a group was rolled and
		// whose coming and going says which surge groups exist.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetLabels()[NameLabel]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}), builder.WithPredicates(podEvents()))
	return r.intake.Watch(mgr, b).Complete(r)
}

// earlierWorkloadRetry is how often a set whose group Workload name an
// earlier copy's group Workload, deleted and waiting for its pods, still
// holds looks again.
const earlierWorkloadRetry = 10 * time.Second

// podEvents passes the pod events a set's reconcile acts on: a gated pod
// not yet labelled with its Workload, a leader, and a labelled gated pod
// whose pod set label someone changed (the reconcile names it again as its
// group's Workload does; without this event nothing would).
func podEvents() predicate.Funcs {
	watched := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && (workload.TopologyGated(p) && p.Labels[strata.WorkloadLabel] == "" || IsLeader(p))
	}
	f := predicate.NewPredicateFuncs(watched)
	f.UpdateFunc = func(e event.UpdateEvent) bool {
		if watched(e.ObjectNew) {
			return true
		}
		p, ok := e.ObjectNew.(*corev1.Pod)
		if !ok || !workload.TopologyGated(p) || e.ObjectOld == nil {
			return false
		}
		old := e.ObjectOld.GetLabels()
		return old[strata.WorkloadLabel] != "" && old[strata.PodSetLabel] != p.Labels[strata.PodSetLabel]
	}
	return f
}

// Reconcile keeps a LeaderWorkerSet's Workloads and labels its pods.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var again time.Duration
	res, err := intake.Result(ctx, r.reconcile(ctx, req, &again))
	if err == nil && again > 0 {
		res.RequeueAfter = again
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request, again *time.Duration) error {
	var l lwsapi.LeaderWorkerSet
	if err := r.client.Get(ctx, req.NamespacedName, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return r.dropWorkloads(ctx, req.NamespacedName, nil, 0)
		}
		return err
	}
	if l.Labels[strata.QueueNameLabel] == "" {
		return nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(l.Namespace), client.MatchingLabels{NameLabel: l.Name}); err != nil {
		return err
	}
	if !l.DeletionTimestamp.IsZero() {
		if l.Labels[strata.OriginLabel] == "" {
			return nil
		}
		// A hub's copy being deleted: say which pods keep it.
		remain, err := intake.ReportGoingPods(ctx, r.client, &l, pods.Items)
		if remain {
			*again = intake.GoingPodsInterval
		}
		return err
	}
	replicas := workloadGroups(&l, pods.Items)
	for g := range replicas {
		if _, err := r.intake.Sync(ctx, Group{LeaderWorkerSet: &l, Index: g}); err != nil {
			if errors.Is(err, intake.ErrEarlierWorkloadGoing) {
				// An earlier copy's group Workload of that name, deleted,
				// waits for its pods (strata.PodsGoneFinalizer).
				*again = earlierWorkloadRetry
				continue
			}
			if apierrors.IsInvalid(err) {
				r.recorder.Eventf(&l, nil, corev1.EventTypeWarning, intake.ReasonInvalidJob, "Validate", "%s",
					intake.Truncate("The API server rejected the Workload of group "+strconv.Itoa(int(g))+"; change the LeaderWorkerSet: "+err.Error(), intake.MaxEventNote))
				return reconcile.TerminalError(err)
			}
			return err
		}
	}
	if workerGroups(&l) < Replicas(&l) {
		// More groups than MaxGroups: group 0's Workload says the set is
		// Invalid. The other groups' Workloads stay as they are (their
		// pods may run, and hold their capacity), and no pod is labelled,
		// until the set is fixed.
		return r.stopUnadmitted(ctx, &l, pods.Items)
	}
	// A scale-down: the groups past replicas go, and their capacity with
	// them (the set's controller deletes their pods).
	if err := r.dropWorkloads(ctx, req.NamespacedName, &l, replicas); err != nil {
		return err
	}
	if err := r.labelPods(ctx, &l, replicas, pods.Items); err != nil {
		return err
	}
	return r.stopUnadmitted(ctx, &l, pods.Items)
}

// workloadGroups is the number of groups the set has Workloads for: its replicas,
// and while a rolling update surges (maxSurge), the surge groups past them
// whose leader the set's controller made and has not deleted yet; group
// 0 alone when the replicas are more than MaxGroups (workerGroups).
func workloadGroups(l *lwsapi.LeaderWorkerSet, pods []corev1.Pod) int32 {
	n, surge := workerGroups(l), MaxSurge(l)
	if n < Replicas(l) {
		return n
	}
	limit := n + surge
	for i := range pods {
		p := &pods[i]
		if !IsLeader(p) || !p.DeletionTimestamp.IsZero() || !controlledBySetsChild(p) {
			continue
		}
		if g, _, ok := PodOf(l, p); ok && g < limit {
			n = max(n, g+1)
		}
	}
	return n
}

// stopUnadmitted deletes the released pods of a group that run without
// its admission: its Workload lost the admission (evicted: its node failed
// beyond repair, its hub fenced this worker), or was admitted again
// elsewhere than where the pod runs. A LeaderWorkerSet cannot be
// suspended, and its pods must not run without the capacity an admission
// holds for them. The set's controller makes them again from the
// templates, gated: they wait for their group's admission and go where it
// says. What the cache shows is confirmed on the API server first; a group
// whose Workload is gone (a scale-down) is left to the set's controller.
func (r *Reconciler) stopUnadmitted(ctx context.Context, l *lwsapi.LeaderWorkerSet, pods []corev1.Pod) error {
	var errs []error
	stopped := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		name := p.Labels[strata.WorkloadLabel]
		if name == "" || workload.TopologyGated(p) || !p.DeletionTimestamp.IsZero() ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Labels[strata.OwnerUIDLabel] != string(l.UID) {
			continue
		}
		var wl strata.Workload
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: name}, &wl); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if rev, ok := wl.Annotations[RevisionAnnotation]; ok && p.Labels[RevisionLabel] != rev {
			continue // a rolled group's old pod, its label not yet gone from the cache
		}
		if runsAsAdmitted(&wl, p) {
			continue
		}
		if err := r.live.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: name}, &wl); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if runsAsAdmitted(&wl, p) {
			continue
		}
		if !stopped[name] {
			stopped[name] = true
			r.recorder.Eventf(l, &wl, corev1.EventTypeWarning, "Stopped", "Evict",
				"Pods of group Workload %s ran without its admission (evicted, or admitted again elsewhere); they are deleted and come back gated, to go where the group is admitted", name)
		}
		if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("stopping pod %s: %w", p.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// runsAsAdmitted says whether a released pod runs as its Workload's
// admission says: the Workload is admitted, on the flavor the pod was
// released on (a pod released before the agent noted it, or noted empty,
// is taken to be),
// and, when its pod set has a topology assignment, the pod's node selector
// names one of its domains.
func runsAsAdmitted(wl *strata.Workload, p *corev1.Pod) bool {
	if wl.Status.Admission == nil {
		return false
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name != p.Labels[strata.PodSetLabel] {
			continue
		}
		if f := p.Annotations[strata.ReleasedFlavorAnnotation]; f != "" && f != psa.Flavor {
			return false
		}
		if psa.TopologyAssignment == nil {
			return true
		}
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			return true // not this controller's to judge: the ungater says so
		}
		for _, d := range a.Domains {
			match := true
			for k, level := range a.Levels {
				if p.Spec.NodeSelector[level] != d.Values[k] {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
		return false
	}
	return false
}

// dropWorkloads deletes the Workloads of the set's groups from index
// keep on (all of them when the set is gone: l nil): those controlled by
// a LeaderWorkerSet of that name, and, when l is given, by that one.
func (r *Reconciler) dropWorkloads(ctx context.Context, set types.NamespacedName, l *lwsapi.LeaderWorkerSet, keep int32) error {
	var wls strata.WorkloadList
	if err := r.client.List(ctx, &wls, client.InNamespace(set.Namespace)); err != nil {
		return err
	}
	keepNames := make([]string, 0, keep)
	for g := range keep {
		keepNames = append(keepNames, GroupWorkloadName(set.Name, g))
	}
	for i := range wls.Items {
		wl := &wls.Items[i]
		owner := metav1.GetControllerOfNoCopy(wl)
		if !jobs.IsKind(GroupKind(0), owner) || owner.Name != set.Name || slices.Contains(keepNames, wl.Name) {
			continue
		}
		if l != nil && owner.UID != l.UID {
			continue // an earlier set's: garbage collection takes it
		}
		if !wl.DeletionTimestamp.IsZero() {
			continue // deleted already, held by a finalizer
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleting the Workload of a group the LeaderWorkerSet no longer has", "workload", wl.Name)
		if err := r.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// labelPods labels each gated pod of the set with its group's Workload,
// its pod set and the set's UID (which tells its pods from those of an
// earlier set of the same name): the ungater finds a Workload's pods by
// them. Pods the set's controller has not labelled with their group and
// index yet, and pods of groups past replicas, are left alone.
//
// A group's template revision is its leader's: the set's controller makes
// a group's workers from its leader's revision, and a leader of a new
// revision only once the old leader is gone (a rolling update replaces a
// group whole). A group's Workload records the revision of its pods when
// it labels the first of them; a leader of another revision means the
// group was rolled, and roll makes its Workload again. Pods of a revision
// other than their leader's wait.
func (r *Reconciler) labelPods(ctx context.Context, l *lwsapi.LeaderWorkerSet, replicas int32, pods []corev1.Pod) error {
	leaders := map[int32]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() || !controlledBySetsChild(p) || !IsLeader(p) {
			continue
		}
		if group, _, ok := PodOf(l, p); ok && group < replicas {
			leaders[group] = p
		}
	}
	var errs []error
	revisions := map[int32]string{}
	for group, leader := range leaders {
		rev, ok, err := r.groupRevision(ctx, l, group, leader.Labels[RevisionLabel], pods)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			revisions[group] = rev
		}
	}
	// Without a leader template a group's one pod set is Main; a Workload
	// made before 2026-12-02 named it Worker, and keeps that name.
	sole := map[int32]string{}
	soleName := func(group int32) string {
		if name, ok := sole[group]; ok {
			return name
		}
		name := Main
		var wl strata.Workload
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: GroupWorkloadName(l.Name, group)}, &wl); err == nil && len(wl.Spec.PodSets) == 1 {
			name = wl.Spec.PodSets[0].Name
		}
		sole[group] = name
		return name
	}
	for i := range pods {
		p := &pods[i]
		if !workload.TopologyGated(p) || !controlledBySetsChild(p) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Labels[strata.WorkloadLabel] != "" {
			// Labelled: its pod set name stays, but for a group without a
			// leader template whose Workload now names its pod set
			// otherwise (one made before 2026-12-02 named it worker, and
			// is main once made again): the ungater releases a pod by it.
			group, podSet, ok := PodOf(l, p)
			if !ok || podSet != Main || group >= replicas || p.Labels[strata.WorkloadLabel] != GroupWorkloadName(l.Name, group) {
				continue
			}
			if name := soleName(group); p.Labels[strata.PodSetLabel] != name {
				patch := client.MergeFrom(p.DeepCopy())
				p.Labels[strata.PodSetLabel] = name
				if err := r.client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
					errs = append(errs, fmt.Errorf("relabelling pod %s: %w", p.Name, err))
				}
			}
			continue
		}
		group, podSet, ok := PodOf(l, p)
		if !ok || group >= replicas {
			continue
		}
		if podSet == Main {
			podSet = soleName(group)
		}
		if rev, ok := revisions[group]; !ok || p.Labels[RevisionLabel] != rev {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Labels[strata.WorkloadLabel] = GroupWorkloadName(l.Name, group)
		p.Labels[strata.PodSetLabel] = podSet
		p.Labels[strata.OwnerUIDLabel] = string(l.UID)
		if err := r.client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("labelling pod %s: %w", p.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// groupRevision returns the template revision whose pods the group's
// Workload holds, given its leader's revision, and whether the group's
// pods may be labelled now: a Workload that recorded no revision yet
// takes the leader's; one of another revision is rolled, and its pods wait
// for the new Workload.
func (r *Reconciler) groupRevision(ctx context.Context, l *lwsapi.LeaderWorkerSet, group int32, leader string, pods []corev1.Pod) (string, bool, error) {
	var wl strata.Workload
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: GroupWorkloadName(l.Name, group)}, &wl); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, l) {
		return "", false, nil // an earlier set's: intake replaces it
	}
	have, recorded := wl.Annotations[RevisionAnnotation]
	switch {
	case !recorded:
		patch := client.MergeFrom(wl.DeepCopy())
		metav1.SetMetaDataAnnotation(&wl.ObjectMeta, RevisionAnnotation, leader)
		if err := r.client.Patch(ctx, &wl, patch); err != nil {
			return "", false, client.IgnoreNotFound(err)
		}
		return leader, true, nil
	case have == leader:
		return leader, true, nil
	default:
		return "", false, r.roll(ctx, l, group, &wl, leader, pods)
	}
}

// roll replaces the Workload of a group the set's controller moved to the
// template revision rev: the new template is a new workload, admitted
// (and placed) again, since its requests may differ. The old revision's
// pods lose their Workload label first, so that they count as the pods
// they are — the capacity they hold stays taken until they are gone —
// and not through the new Workload's admission; then the old Workload
// goes, and the next reconcile makes the new one from the set.
func (r *Reconciler) roll(ctx context.Context, l *lwsapi.LeaderWorkerSet, group int32, wl *strata.Workload, rev string, pods []corev1.Pod) error {
	for i := range pods {
		p := &pods[i]
		if p.Labels[strata.WorkloadLabel] != wl.Name || p.Labels[strata.OwnerUIDLabel] != string(l.UID) || p.Labels[RevisionLabel] == rev {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		delete(p.Labels, strata.WorkloadLabel)
		delete(p.Labels, strata.PodSetLabel)
		if err := r.client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("unlabelling pod %s of the group's old template: %w", p.Name, err)
		}
	}
	r.recorder.Eventf(l, wl, corev1.EventTypeNormal, "GroupRolled", "Update",
		"Group %d moved to template revision %s: Workload %s is made again for the new template and waits for admission; the old pods keep their capacity until they are gone", group, rev, wl.Name)
	ctrl.LoggerFrom(ctx).V(2).Info("Replacing the Workload of a group rolled to a new template", "workload", wl.Name, "revision", rev)
	return client.IgnoreNotFound(r.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}))
}

// controlledBySetsChild says whether a pod is a StatefulSet's, as the
// LeaderWorkerSet controller's pods are; a pod made by hand with the
// set's labels is not the set's.
func controlledBySetsChild(p *corev1.Pod) bool {
	c := metav1.GetControllerOfNoCopy(p)
	return c != nil && c.Kind == "StatefulSet"
}
