// Package workercluster connects the hub to its worker clusters: for every
// WorkerCluster it resolves the credential from its source (a kubeconfig
// Secret, a ClusterProfile or an OCM ManagedCluster, each in its source_
// file), keeps a connection in the fleet, checks the permissions the hub
// needs there, and reports the Connected and SummariesFresh conditions and
// the summaries last read.
package workercluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/controller/throttle"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/tas"
)

// Reasons of the Connected condition.
const (
	ReasonConnected         = "Connected"
	ReasonSecretOutside     = "SecretOutsideHubNamespace"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonAPINotInstalled: the hub cluster does not serve the source's
	// kind (no ClusterProfile or ManagedCluster CRD).
	ReasonAPINotInstalled             = "APINotInstalled"
	ReasonClusterProfileNotFound      = "ClusterProfileNotFound"
	ReasonNoAccessProvider            = "NoAccessProvider"
	ReasonAccessProviderNotConfigured = "AccessProviderNotConfigured"
	ReasonInvalidAccessProvider       = "InvalidAccessProvider"
	ReasonManagedClusterNotFound      = "ManagedClusterNotFound"
	ReasonNoClientConfig              = "NoClientConfig"
	ReasonTokenSecretNotFound         = "TokenSecretNotFound"
	ReasonInvalidTokenSecret          = "InvalidTokenSecret"
	ReasonUnreachable                 = "Unreachable"
	ReasonForbidden                   = "Forbidden"
	// ReasonClusterChanged: the credential reaches another cluster than the
	// one the hub dispatched to (status.clusterID).
	ReasonClusterChanged = "ClusterChanged"
	// ReasonDuplicateCluster: another WorkerCluster already stands for the
	// cluster the credential reaches.
	ReasonDuplicateCluster = "DuplicateCluster"
)

// Reasons of the Draining condition of a WorkerCluster being deleted.
const (
	ReasonDraining = "Draining"
)

// ConditionDraining is True while a deleted WorkerCluster waits for the
// copies of the hub Workloads dispatched there to be taken back.
const ConditionDraining = "Draining"

// Reasons of the SummariesFresh condition.
const (
	ReasonFresh       = "Fresh"
	ReasonStale       = "Stale"
	ReasonNoSummaries = "NoSummaries"
	// ReasonInvalid: a summary the hub cannot read (malformed, or beyond
	// the bounds the hub accepts); its flavor gets no new work.
	ReasonInvalid = "SummaryInvalid"
	ReasonNotRead = "NotConnected"
)

// ageInterval is how often a connected worker's summary age is measured
// again when nothing else happens.
const ageInterval = 30 * time.Second

// connectTimeout bounds the wait for a worker's summaries on connection.
const connectTimeout = 10 * time.Second

// Reconciler reconciles WorkerClusters.
type Reconciler struct {
	client client.Client
	// secrets reads Secrets from the API server, not an informer: the hub
	// needs no list or watch of Secrets, only get of the kubeconfig Secrets
	// in its own namespace and of ManagedServiceAccounts' token Secrets.
	// A Secret read less than secretRecheck ago is used again
	// (recentSecrets), unless the WorkerCluster changed since.
	secrets *recentSecrets
	fleet   *fleet.Fleet
	// namespace is the hub's own: the only one kubeconfig Secrets are read
	// from.
	namespace       string
	accessProviders []configv1beta1.AccessProvider
	managedCluster  configv1beta1.ManagedCluster
	kubeconfigs     configv1beta1.KubeconfigPolicy
	// apis are the optional source kinds the hub serves, known at setup.
	apis       APIs
	staleAfter time.Duration
	// fencing says whether the hub fences (fencing.mode Enabled).
	fencing bool
	clock   clock.Clock

	mu sync.Mutex
	// written spaces out status writes that only refresh counts.
	written *throttle.Throttle[string]
	// checked is, per worker, the credential whose permissions were last
	// found complete there, and when.
	checked map[string]permissionCheck
	// claims is, per cluster ID, the WorkerCluster this process connected
	// to it: the status of the other WorkerClusters may not show it yet.
	claims map[string]string
	// journaled counts the dispatches to a worker only the dispatch
	// journal holds yet (nil: none); false while the journal is not read.
	journaled func(cluster string) (int, bool)
}

// permissionCheck is a credential found to have every needed permission,
// and the cluster it reaches.
type permissionCheck struct {
	identity  string
	at        time.Time
	clusterID string
}

// permissionRecheck is how often the permissions of a connected worker's
// unchanged credential are asked again. A worker's summaries change
// several times a second, each a reconcile; asking every time would cost
// six reviews each.
const permissionRecheck = 5 * time.Minute

// countsInterval bounds the status writes of a WorkerCluster that only
// refresh its summaries' generations and its copy count: a busy worker
// publishes several summaries a second. A change of condition is written
// at once; a copy created or finished there is counted within a second
// (the fleet's recount) plus what is left of this interval.
const countsInterval = 3 * time.Second

// WithJournaled counts, for a worker being deleted, the dispatches to it
// that only the dispatch journal holds yet: it is not let go while any
// is left, nor before the journal is read (fn's false).
func (r *Reconciler) WithJournaled(fn func(cluster string) (int, bool)) *Reconciler {
	r.journaled = fn
	return r
}

// NewReconciler returns a WorkerCluster reconciler for a hub serving apis
// of the optional source kinds (see DetectAPIs).
func NewReconciler(c client.Client, secrets client.Reader, f *fleet.Fleet, cfg *configv1beta1.HubConfiguration, apis APIs, clk clock.Clock) *Reconciler {
	return &Reconciler{
		client: c, secrets: newRecentSecrets(secrets, clk, secretRecheck), fleet: f, namespace: cfg.Namespace,
		accessProviders: cfg.ClusterProfile.AccessProviders, managedCluster: cfg.ManagedCluster, kubeconfigs: cfg.Kubeconfigs, apis: apis,
		staleAfter: cfg.Dispatch.SummaryStaleAfter.Duration, fencing: cfg.Fencing.Mode == configv1beta1.FencingEnabled, clock: clk, written: throttle.New[string](clk, countsInterval), checked: map[string]permissionCheck{},
		claims: map[string]string{},
	}
}

// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=workerclusters/finalizers,verbs=update

// SetupWithManager registers the reconciler. A worker whose summaries
// change is reconciled again, and so is a WorkerCluster whose
// ClusterProfile or ManagedCluster changes, when the hub serves those.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	events := make(chan event.TypedGenericEvent[*strata.WorkerCluster])
	go func() {
		for name := range r.fleet.Changed() {
			events <- event.TypedGenericEvent[*strata.WorkerCluster]{Object: &strata.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		}
	}()
	b := ctrl.NewControllerManagedBy(mgr).
		For(&strata.WorkerCluster{}).
		WatchesRawSource(source.Channel(events, &handler.TypedEnqueueRequestForObject[*strata.WorkerCluster]{}))
	log := mgr.GetLogger().WithName("workercluster")
	if r.apis.ClusterProfiles {
		// Access providers are in the status: every change counts.
		b = b.Watches(&inventoryv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.profileToWorkerClusters))
	} else {
		log.Info("The hub serves no ClusterProfiles; WorkerClusters with a clusterProfileRef will not connect")
	}
	if r.apis.ManagedClusters {
		// Only the spec (client configs) counts, not status heartbeats.
		b = b.Watches(&ocmclusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.managedClusterToWorkerClusters),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	} else {
		log.Info("The hub serves no ManagedClusters; WorkerClusters with a managedClusterName will not connect")
	}
	return b.Complete(r)
}

// profileToWorkerClusters maps a ClusterProfile to the WorkerClusters that
// reference it, and, in the namespace OCM publishes into, to those of the
// ManagedCluster of its name.
func (r *Reconciler) profileToWorkerClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := r.referencing(ctx, ClusterProfileRefKey, obj.GetNamespace()+"/"+obj.GetName())
	if obj.GetNamespace() == r.managedCluster.ClusterProfileNamespace {
		reqs = append(reqs, r.referencing(ctx, ManagedClusterNameKey, obj.GetName())...)
	}
	return reqs
}

// managedClusterToWorkerClusters maps a ManagedCluster to the
// WorkerClusters that reference it.
func (r *Reconciler) managedClusterToWorkerClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.referencing(ctx, ManagedClusterNameKey, obj.GetName())
}

// referencing lists the WorkerClusters whose index key has value.
func (r *Reconciler) referencing(ctx context.Context, key, value string) []reconcile.Request {
	var list strata.WorkerClusterList
	if err := r.client.List(ctx, &list, client.MatchingFields{key: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing WorkerClusters", "index", key, "value", value)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

// Reconcile connects to one worker and reports what it found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wc strata.WorkerCluster
	if err := r.client.Get(ctx, req.NamespacedName, &wc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := wc.DeletionTimestamp != nil
	if deleting && !controllerutil.ContainsFinalizer(&wc, strata.DrainFinalizer) {
		r.forget(wc.Name)
		return ctrl.Result{}, nil
	}
	r.secrets.sawOwner(wc.Name, fmt.Sprint(wc.Generation, wc.Labels, wc.Annotations))
	if !deleting && !controllerutil.ContainsFinalizer(&wc, strata.DrainFinalizer) {
		// Deleting the WorkerCluster must not re-place what still runs
		// there: it stays until drained.
		patch := client.MergeFromWithOptions(wc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(&wc, strata.DrainFinalizer)
		if err := r.client.Patch(ctx, &wc, patch); err != nil {
			return ctrl.Result{}, ignoreStale(err)
		}
	}
	now := r.clock.Now()
	status := wc.Status.DeepCopy()
	// What an earlier hub process last wrote on the worker's fencing
	// Lease, until this one renews it; and what this one wrote since.
	if d := wc.Status.FenceAfterSeconds; d != nil {
		r.fleet.SeedPublished(wc.Name, time.Duration(*d)*time.Second)
	}
	if d, ok := r.fleet.Published(wc.Name); ok {
		status.FenceAfterSeconds = ptr.To(int64(d / time.Second))
	}
	connected := r.connect(ctx, &wc, status)
	connected.ObservedGeneration = wc.Generation
	setCondition(status, connected, now)
	fresh := metav1.Condition{Type: strata.WorkerClusterSummariesFresh, Status: metav1.ConditionUnknown, Reason: ReasonNotRead,
		Message: "the worker is not connected"}
	requeue := time.Duration(0)
	going := ""
	if connected.Status == metav1.ConditionTrue {
		summaries, _, err := r.fleet.Summaries(ctx, wc.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		status.Summaries = nil
		for i := range summaries {
			status.Summaries = append(status.Summaries, summaryStatus(&summaries[i]))
		}
		// Beyond the list's bound the status could not be written at all
		// (its conditions with it): the first flavors by name are listed.
		slices.SortFunc(status.Summaries, func(a, b strata.WorkerSummaryStatus) int { return strings.Compare(a.Flavor, b.Flavor) })
		if len(status.Summaries) > strata.MaxWorkerSummaries {
			status.Summaries = status.Summaries[:strata.MaxWorkerSummaries]
		}
		var next time.Duration
		age := r.fleet.SummaryAge(wc.Name, now)
		fresh, next = freshness(summaries, age, r.staleAfter)
		// Look again at least every ageInterval: the summary age metric
		// must go on growing while a worker publishes nothing.
		requeue = min(next, ageInterval)
		metrics.HubSummaryAge.WithLabelValues(wc.Name).Set(oldest(summaries, age).Seconds())
		if copies, err := r.fleet.Copies(ctx, wc.Name, client.UnsafeDisableDeepCopy); err == nil {
			status.Workloads = live(copies)
			going = goingCopies(copies)
		}
	} else {
		// Retry the connection; the informer retries on its own too.
		requeue = 30 * time.Second
	}
	fresh.ObservedGeneration = wc.Generation
	setCondition(status, fresh, now)
	if r.fencing {
		fenced := r.fenced(wc.Name, connected.Status == metav1.ConditionTrue)
		fenced.ObservedGeneration = wc.Generation
		setCondition(status, fenced, now)
	}
	if deleting {
		left, err := r.dispatchedTo(ctx, wc.Name)
		switch {
		case errors.Is(err, errJournalNotRead):
			setCondition(status, metav1.Condition{Type: ConditionDraining, Status: metav1.ConditionTrue, Reason: ReasonDraining, ObservedGeneration: wc.Generation,
				Message: "being deleted: " + err.Error()}, now)
		case err != nil:
			return ctrl.Result{}, err
		case left == 0:
			return ctrl.Result{}, r.release(ctx, &wc)
		default:
			setCondition(status, metav1.Condition{Type: ConditionDraining, Status: metav1.ConditionTrue, Reason: ReasonDraining, ObservedGeneration: wc.Generation,
				Message: fmt.Sprintf("being deleted: %d workloads are still dispatched here; their copies are taken back (and their pods gone) before they are placed elsewhere. "+
					"If the worker is lost for good, annotate the WorkerCluster %s=true to give them up%s", left, strata.AbandonCopiesAnnotation, going)}, now)
		}
		requeue = min(requeue, 5*time.Second)
		if requeue == 0 {
			requeue = 5 * time.Second
		}
	}
	up := 0.0
	if connected.Status == metav1.ConditionTrue {
		up = 1
	}
	metrics.HubConnected.WithLabelValues(wc.Name).Set(up)
	if !equality.Semantic.DeepEqual(status, &wc.Status) {
		if wait := r.countsWait(&wc.Status, status, wc.Name); wait > 0 {
			// Only counts changed, and they were written a moment ago.
			if requeue == 0 || wait < requeue {
				requeue = wait
			}
			return ctrl.Result{RequeueAfter: requeue}, nil
		}
		wc.Status = *status
		if err := r.client.Status().Update(ctx, &wc); err != nil {
			return ctrl.Result{}, ignoreStale(err)
		}
		r.written.Wrote(wc.Name)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// ignoreStale is nil for a write that failed because the WorkerCluster
// changed or went since it was read: the change's watch event brings
// another reconcile, of the object as it is now, so the conflict is no
// error to log or back off from (it happens at every start, when the
// workers' first summaries and this controller's first writes cross).
func ignoreStale(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Reasons of the Fenced condition besides a renewal's failure.
const (
	// ReasonRenewed: the hub's last renewal of its fencing Lease there
	// wrote it, or may have.
	ReasonRenewed = "Renewed"
	// ReasonNotRenewedYet: the hub has not tried to renew its Lease there.
	ReasonNotRenewedYet = "NotRenewedYet"
)

// fenced is the Fenced condition of a worker: whether the hub's renewals
// of its fencing Lease there go through.
func (r *Reconciler) fenced(name string, connected bool) metav1.Condition {
	if reason, failed := r.fleet.FenceFailure(name); failed != "" {
		return metav1.Condition{Type: strata.WorkerClusterFenced, Status: metav1.ConditionFalse, Reason: reason, Message: intake.Truncate(
			"the hub cannot renew its fencing Lease on the worker, so the worker gets no new copies (its agent stops this hub's copies fenceAfter after the last renewal): "+failed,
			intake.MaxConditionMessage)}
	}
	if !connected {
		return metav1.Condition{Type: strata.WorkerClusterFenced, Status: metav1.ConditionUnknown, Reason: ReasonNotRenewedYet,
			Message: "the worker is not connected: the hub renews its fencing Lease there once it is"}
	}
	return metav1.Condition{Type: strata.WorkerClusterFenced, Status: metav1.ConditionTrue, Reason: ReasonRenewed,
		Message: "the hub renews its fencing Lease on the worker"}
}

// countsWait says how long to wait before writing a status that differs
// from the one written only in its summaries' generations and times and
// its copy count; 0 when it is to be written now.
func (r *Reconciler) countsWait(old, cur *strata.WorkerClusterStatus, name string) time.Duration {
	if !equality.Semantic.DeepEqual(old.Conditions, cur.Conditions) || len(old.Summaries) != len(cur.Summaries) ||
		!equality.Semantic.DeepEqual(old.FenceAfterSeconds, cur.FenceAfterSeconds) {
		return 0
	}
	for i := range old.Summaries {
		if old.Summaries[i].Flavor != cur.Summaries[i].Flavor {
			return 0
		}
	}
	return r.written.Wait(name)
}

// live counts the copies that have not finished.
func live(copies []jobs.Job) int32 {
	var n int32
	for _, c := range copies {
		if done, _ := c.Finished(); !done {
			n++
		}
	}
	return n
}

// oldest is the age of the oldest summary, on the hub's clock.
func oldest(summaries []strata.CapacitySummary, age fleet.SummaryAgeFunc) time.Duration {
	var oldest time.Duration
	for i := range summaries {
		if a, ok := age(&summaries[i]); ok {
			oldest = max(oldest, a)
		}
	}
	return oldest
}

// setCondition sets c, keeping the transition time when its status stays.
func setCondition(status *strata.WorkerClusterStatus, c metav1.Condition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&status.Conditions, c)
}

// errJournalNotRead: the dispatch journal is not read yet.
var errJournalNotRead = errors.New("the dispatch journal is not read yet: the dispatches it holds to this worker are unknown; waiting for it")

// dispatchedTo counts the hub Workloads dispatched to a worker that have
// not finished.
func (r *Reconciler) dispatchedTo(ctx context.Context, name string) (int, error) {
	var wls strata.WorkloadList
	if err := r.client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	if r.journaled != nil {
		j, read := r.journaled(name)
		if !read {
			// A hub restarted: a dispatch decided just before may be in
			// the journal alone, its copy sent. Letting the worker go now
			// would place that workload again beside it.
			return 0, errJournalNotRead
		}
		n = j
	}
	for i := range wls.Items {
		wl := &wls.Items[i]
		if p := wl.Status.Placement; p != nil && p.Cluster == name && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			n++
		}
	}
	return n, nil
}

// release lets a drained WorkerCluster go.
func (r *Reconciler) release(ctx context.Context, wc *strata.WorkerCluster) error {
	patch := client.MergeFromWithOptions(wc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(wc, strata.DrainFinalizer)
	if err := r.client.Patch(ctx, wc, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("WorkerCluster drained: no workload is dispatched there any more", "workercluster", wc.Name)
	r.forget(wc.Name)
	return nil
}

// freshness is the SummariesFresh condition of a worker's summaries, and
// when it next changes by itself (a summary becoming stale).
//
// age says how old a summary is, on the hub's clock (fleet.SummaryAge).
func freshness(summaries []strata.CapacitySummary, age fleet.SummaryAgeFunc, staleAfter time.Duration) (metav1.Condition, time.Duration) {
	c := metav1.Condition{Type: strata.WorkerClusterSummariesFresh}
	if len(summaries) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNoSummaries, "the worker publishes no capacity summaries yet: is strata-agent running there?"
		return c, staleAfter
	}
	var stale, invalid []string
	next := staleAfter
	for _, s := range summaries {
		if len(s.Status.Levels) > 0 {
			if err := tas.ValidateSummary(&s.Status); err != nil {
				invalid = append(invalid, fmt.Sprintf("%s (generation %d: %v)", s.Spec.Flavor, s.Status.SummaryGeneration, err))
				continue
			}
		}
		a, published := age(&s)
		if !published {
			stale = append(stale, fmt.Sprintf("%s (never observed)", s.Spec.Flavor))
			continue
		}
		if a >= staleAfter {
			stale = append(stale, fmt.Sprintf("%s (observed %s)", s.Spec.Flavor, s.Status.ObservedTime.UTC().Format(time.RFC3339)))
			continue
		}
		next = min(next, staleAfter-a)
	}
	if len(invalid) > 0 {
		sort.Strings(invalid)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalid
		c.Message = fmt.Sprintf("summaries the hub cannot read: %s; the worker gets no new work on those flavors", strings.Join(invalid, ", "))
		if len(stale) > 0 {
			sort.Strings(stale)
			c.Message += fmt.Sprintf("; older than %s: %s", staleAfter, strings.Join(stale, ", "))
		}
		return c, next
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonStale
		c.Message = fmt.Sprintf("summaries older than %s: %s; the worker gets no new work on those flavors", staleAfter, strings.Join(stale, ", "))
		return c, next
	}
	c.Status, c.Reason = metav1.ConditionTrue, ReasonFresh
	c.Message = fmt.Sprintf("%d summaries observed within %s", len(summaries), staleAfter)
	return c, next + time.Second
}

// forget drops a removed worker from the fleet and from the metrics.
func (r *Reconciler) forget(name string) {
	r.fleet.Forget(name)
	r.secrets.forgetOwner(name)
	r.mu.Lock()
	delete(r.checked, name)
	for id, holder := range r.claims {
		if holder == name {
			delete(r.claims, id)
		}
	}
	r.mu.Unlock()
	r.written.Forget(name)
	metrics.HubConnected.DeleteLabelValues(name)
	metrics.HubSummaryAge.DeleteLabelValues(name)
}

// summaryStatus is what a WorkerCluster's status shows of one of the
// worker's summaries: which one, and its free capacity, in all and in the
// freest domain of each level.
func summaryStatus(s *strata.CapacitySummary) strata.WorkerSummaryStatus {
	out := strata.WorkerSummaryStatus{Flavor: s.Spec.Flavor, SummaryGeneration: s.Status.SummaryGeneration, ObservedTime: s.Status.ObservedTime}
	main := tas.MainResource(s.Status.Resources)
	total, largest := tas.SummaryFree(&s.Status, main)
	for i, name := range s.Status.Resources {
		if i < len(total) && total[i] > 0 {
			if out.Free == nil {
				out.Free = corev1.ResourceList{}
			}
			out.Free[name] = summaryQuantity(name, total[i])
		}
	}
	for i, amount := range tas.SummaryCapacity(&s.Status) {
		if amount > 0 {
			if out.Capacity == nil {
				out.Capacity = corev1.ResourceList{}
			}
			out.Capacity[s.Status.Resources[i]] = summaryQuantity(s.Status.Resources[i], amount)
		}
	}
	for _, l := range largest {
		out.LargestFree = append(out.LargestFree, strata.DomainFree{Level: l.Level, Domain: l.Domain, Resource: main, Free: summaryQuantity(main, l.Free)})
	}
	return out
}

// summaryQuantity is a summary amount (milli-units): bytes in binary
// units, the rest in decimal ones.
func summaryQuantity(name corev1.ResourceName, milli int64) resource.Quantity {
	if milli%1000 == 0 && (name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage) {
		return *resource.NewQuantity(milli/1000, resource.BinarySI)
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI)
}
