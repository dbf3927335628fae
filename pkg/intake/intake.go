// Package intake keeps the Workload of every queue-labelled job of a
// workload kind (see pkg/jobs), checked the same way on the hub and on the
// agents: the job's own validity, its LocalQueue and ClusterQueue, the
// namespace the queue admits, its WorkloadPriorityClass or PriorityClass. What it finds is the
// Workload's Invalid condition, with an event on the job when it cannot be
// admitted as written. What to do with a job once its Workload is current
// — start it on a worker, dispatch it from the hub — is the caller's.
// "Job" below means an object of the Keeper's kind.
package intake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reasons of the Workload's Invalid condition (and of the Job's events).
const (
	ReasonValid                 = "Valid"
	ReasonInvalidJob            = "InvalidJob"
	ReasonLocalQueueNotFound    = queue.ReasonLocalQueueNotFound
	ReasonQueueNotFound         = queue.ReasonClusterQueueNotFound
	ReasonNamespaceNotAllowed   = queue.ReasonNamespaceNotAllowed
	ReasonPriorityClassNotFound = "PriorityClassNotFound"
)

// ReasonWaitingForEarlierWorkload is the event of a job whose Workload
// waits for an earlier job's of the same name to be deleted
// (ErrEarlierWorkloadGoing).
const ReasonWaitingForEarlierWorkload = "WaitingForEarlierWorkload"

// Bounds of the API server on what intake writes.
const (
	MaxConditionMessage = 32768 // metav1.Condition.Message
	MaxEventNote        = 1024  // events.k8s.io/v1 Event.Note
)

// Check is an extra check of a Job by the caller: a reason and message
// when the Job cannot be admitted, "" when it can.
type Check func(job jobs.Job) (reason, message string)

// Keeper keeps Workloads of the Jobs of one kind.
type Keeper struct {
	kind     jobs.Kind
	client   client.Client
	recorder events.EventRecorder
	checks   []Check
	orphans  bool
	lean     bool
	// unsettledFirst: see WithUnsettledFirst.
	unsettledFirst bool
	// finalizer, finalizes: see WithFinalizer, WithFinalizerFor.
	finalizer string
	finalizes func(*strata.Workload) bool
	tas       tas.Options
	// elastic: see WithElasticJobs.
	elastic bool
}

// WithElasticJobs brings the pod counts of an admitted elastic Workload
// (workload.Elastic) to its Job's, so that the scheduler resizes its
// admission in place (workload.ResizeOf); every other change of an
// admitted Workload's spec still waits for its admission to end. For the
// agent.
func (k *Keeper) WithElasticJobs() *Keeper {
	k.elastic = true
	return k
}

// resizedOnly says whether desired differs from the admitted elastic
// Workload wl in its pod counts, its pod sets otherwise asking for the
// same per pod (a started Job's templates carry what its admission
// added; the API server lets a running Job change nothing else of them).
func (k *Keeper) resizedOnly(wl, desired *strata.Workload) bool {
	return k.elastic && countsChangedOnly(wl, desired)
}

// countsChangedOnly says whether desired differs from the admitted
// elastic Workload wl in its pod counts alone (see resizedOnly).
func countsChangedOnly(wl, desired *strata.Workload) bool {
	if wl.Status.Admission == nil || !workload.Elastic(wl) || !workload.Elastic(desired) ||
		len(wl.Spec.PodSets) != len(desired.Spec.PodSets) {
		return false
	}
	changed := false
	for i := range desired.Spec.PodSets {
		got, was := &desired.Spec.PodSets[i], &wl.Spec.PodSets[i]
		if got.Name != was.Name || !equality.Semantic.DeepEqual(workload.TemplateRequests(&got.Template.Spec), workload.TemplateRequests(&was.Template.Spec)) {
			return false
		}
		changed = changed || got.Count != was.Count
	}
	return changed
}

// followedInPlace says whether a change of the job of an admitted hub
// Workload wl is not to take its copy back: an elastic Job's new size
// (the hub's dispatcher grants it, and the copy is resized in place), or
// a LeaderWorkerSet's groups (whose copy's groups are admitted one by
// one on the worker; a scale on the hub is not carried there).
func followedInPlace(wl, desired *strata.Workload, j jobs.Job) bool {
	if wl.Status.Admission == nil {
		return false
	}
	if _, grouped := j.Kind().(jobs.GroupedWorkloads); grouped {
		return true
	}
	return countsChangedOnly(wl, desired)
}

// New returns a Keeper of the Jobs of kind; checks run after the Job's own
// validation, the first that fails decides the reason.
func New(kind jobs.Kind, c client.Client, recorder events.EventRecorder, checks ...Check) *Keeper {
	return &Keeper{kind: kind, client: c, recorder: recorder, checks: checks}
}

// WithOrphans makes DeleteWorkload remove the Workload of a deleted Job
// also when nothing controls it any more. For the hub, where a Workload
// exists only for its Job: a Job deleted with --cascade=orphan must not
// leave its copy running and its quota charged.
func (k *Keeper) WithOrphans() *Keeper {
	k.orphans = true
	return k
}

// WithFinalizer creates every Workload with finalizer f, and adds it to
// one made without it (by an earlier version). For the hub, whose
// Workload, once deleted, stays until its copy is gone or known stopped
// (strata.CopyGoneFinalizer): a job created again under the same name
// waits for it (ErrEarlierWorkloadGoing), and a Workload being so deleted
// is left as it is.
func (k *Keeper) WithFinalizer(f string) *Keeper {
	k.finalizer = f
	return k
}

// WithFinalizerFor is WithFinalizer for the Workloads that match only. For
// the agent: a hub's copy Workload (strata.PodsGoneFinalizer), which, once
// deleted with its job, stays until its pods are gone.
func (k *Keeper) WithFinalizerFor(f string, match func(*strata.Workload) bool) *Keeper {
	k.finalizer, k.finalizes = f, match
	return k
}

// finalizesWorkload says whether the Keeper's finalizer goes on wl: never
// on one being deleted (the API server refuses a new finalizer there).
func (k *Keeper) finalizesWorkload(wl *strata.Workload) bool {
	return k.finalizer != "" && wl.DeletionTimestamp.IsZero() && (k.finalizes == nil || k.finalizes(wl))
}

// ErrEarlierWorkloadGoing says that the Workload at a job's Workload name
// is an earlier job's (of the same name), deleted and waiting for its
// finalizer: the job gets its Workload once it is gone. Not an error worth
// a log line; the caller looks again in a while (an orphaned Workload's
// deletion brings no event for the job).
var ErrEarlierWorkloadGoing = errors.New("the Workload of an earlier job of the same name is still being deleted")

// WithLeanWorkloads makes the Workloads' pod templates lean
// (workload.LeanTemplate). For the hub, which never runs a Workload, only
// places and charges it, and keeps its informers' jobs and Workloads lean
// (kinds.HubTransform): the Workload it compares with the one it would
// write must be as lean as the one it reads.
func (k *Keeper) WithLeanWorkloads() *Keeper {
	k.lean = true
	return k
}

// WithTAS applies the topology rules of the cluster's configuration to
// the Jobs' pod-set annotations (tas.Options.PartialSlices).
func (k *Keeper) WithTAS(opts tas.Options) *Keeper {
	k.tas = opts
	return k
}

// sameSpec says whether the Workload wl has the spec of desired. With
// lean Workloads, one written whole (by an earlier version) whose lean
// spec is desired's is the same: rewriting every waiting Workload after
// an upgrade would change nothing that is read.
func (k *Keeper) sameSpec(wl, desired *strata.Workload) bool {
	desired = withMinCounts(desired, wl)
	if equality.Semantic.DeepEqual(wl.Spec, desired.Spec) {
		return true
	}
	if !k.lean {
		return false
	}
	lean := wl.DeepCopy()
	workload.LeanWorkload(lean)
	return equality.Semantic.DeepEqual(lean.Spec, desired.Spec)
}

// samePodSets says whether a Workload's pod sets are desired's (lean, as
// sameSpec compares them).
func (k *Keeper) samePodSets(wl, desired *strata.Workload) bool {
	desired = withMinCounts(desired, wl)
	if equality.Semantic.DeepEqual(wl.Spec.PodSets, desired.Spec.PodSets) {
		return true
	}
	if !k.lean {
		return false
	}
	lean := wl.DeepCopy()
	workload.LeanWorkload(lean)
	return equality.Semantic.DeepEqual(lean.Spec.PodSets, desired.Spec.PodSets)
}

// Kind is the kind of the Keeper's Jobs.
func (k *Keeper) Kind() jobs.Kind { return k.kind }

// Watch adds to b what changes a Job's Workload: the Workload itself,
// every Job of a LocalQueue when the LocalQueue or its ClusterQueue is
// created, deleted or changes its spec, and the Jobs whose Workloads wait
// for a namespace's labels, a PriorityClass or a WorkloadPriorityClass.
func (k *Keeper) Watch(mgr ctrl.Manager, b *builder.Builder) *builder.Builder {
	return b.
		Watches(&strata.Workload{}, k.workloadHandler(mgr)).
		// Only a queue's creation, deletion or spec matters to its Jobs'
		// validity; its status changes with every admission, and
		// reconciling every Job of the queue each time would bury the
		// events that matter under thousands that do not.
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(k.jobsOfClusterQueue), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&strata.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(k.jobsOfLocalQueue), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A namespace's labels decide whether its Jobs' queues admit them:
		// every queue-labelled Job of the namespace is checked again when
		// they change (one that lost its label must stop being admissible,
		// one that gained it may become so).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(k.jobsOfNamespace), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// A new PriorityClass or WorkloadPriorityClass can clear the
		// Invalid condition of Jobs that wait for it.
		Watches(&schedulingv1.PriorityClass{}, handler.EnqueueRequestsFromMapFunc(k.jobsWaitingFor(strata.PodPriorityClassSource))).
		// The controller does not wait for the WorkloadPriorityClasses'
		// initial list to start: a cluster that has none, the common case,
		// answers a list of them only at the API server's next progress
		// notification (streaming lists), and that held every Job back for
		// a second at each start. A Job that names one still reads it
		// through the cache, which waits for that list.
		WatchesRawSource(withoutSyncWait{source.Kind[client.Object](mgr.GetCache(), &strata.WorkloadPriorityClass{},
			handler.EnqueueRequestsFromMapFunc(k.jobsWaitingFor(strata.WorkloadPriorityClassSource)))})
}

// workloadHandler enqueues the Job of a Workload (its controller).
func (k *Keeper) workloadHandler(mgr ctrl.Manager) handler.EventHandler {
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), k.kind.NewObject(), handler.OnlyControllerOwner())
	if !k.unsettledFirst {
		return owner
	}
	return unsettledFirst{owner}
}

// WithUnsettledFirst gives the Jobs of the Workloads listed at start that
// may need their Job stopped or restarted (unsettledWorkload) normal
// priority. The controller's priority queue puts the objects listed when
// it starts behind every later event; an agent's Job that may still run on
// an admission its Workload lost while the agent was away must be stopped
// first, not after the whole backlog.
func (k *Keeper) WithUnsettledFirst() *Keeper {
	k.unsettledFirst = true
	return k
}

// unsettledFirst enqueues a listed Workload's Job with normal priority
// when the Workload is unsettled.
type unsettledFirst struct{ handler.EventHandler }

func (h unsettledFirst) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.IsInInitialList && unsettledWorkload(e.Object) {
		e.IsInInitialList = false
	}
	h.EventHandler.Create(ctx, e, q)
}

// unsettledWorkload says whether a Workload listed at start may need its
// Job stopped or restarted: not finished, and without an admission or
// with an eviction in its history.
func unsettledWorkload(o client.Object) bool {
	wl, ok := o.(*strata.Workload)
	if !ok || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return false
	}
	return wl.Status.Admission == nil || meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted) != nil
}

// priorityClassListWait bounds how long a Job naming a
// WorkloadPriorityClass waits for the classes' initial list.
const priorityClassListWait = 30 * time.Second

// withoutSyncWait is a source whose controller starts without waiting for
// it to sync: the wrapper hides the source's WaitForSync.
type withoutSyncWait struct{ source.Source }

// jobsWaitingFor returns the Jobs whose Workloads are invalid for want of
// the class of source (a Workload's priorityClassSource) with the object's
// name. A Workload written before it had a source names a PriorityClass.
func (k *Keeper) jobsWaitingFor(source string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		return k.invalidJobs(ctx, ReasonPriorityClassNotFound, func(wl *strata.Workload) bool {
			s := wl.Spec.PriorityClassSource
			if s == "" {
				s = strata.PodPriorityClassSource
			}
			return wl.Spec.PriorityClassName == o.GetName() && s == source
		})
	}
}

// invalidJobs returns the Jobs whose Workloads are marked invalid for
// reason and match.
func (k *Keeper) invalidJobs(ctx context.Context, reason string, match func(*strata.Workload) bool, opts ...client.ListOption) []ctrl.Request {
	var wls strata.WorkloadList
	if err := k.client.List(ctx, &wls, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Workloads marked invalid", "reason", reason)
		return nil
	}
	var out []ctrl.Request
	for i := range wls.Items {
		wl := &wls.Items[i]
		owner := metav1.GetControllerOf(wl)
		if wl.Annotations[strata.InvalidAnnotation] != reason || !jobs.IsKind(k.kind, owner) || !match(wl) {
			continue
		}
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}})
	}
	return out
}

// jobsOfNamespace returns the queue-labelled Jobs of a namespace.
func (k *Keeper) jobsOfNamespace(ctx context.Context, o client.Object) []ctrl.Request {
	list, err := k.kind.List(ctx, k.client, client.InNamespace(o.GetName()), client.HasLabels{strata.QueueNameLabel}, client.UnsafeDisableDeepCopy)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Jobs of a namespace", "namespace", o.GetName(), "kind", k.kind.GroupVersionKind().Kind)
		return nil
	}
	out := make([]ctrl.Request, 0, len(list))
	for _, j := range list {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(j.Object())})
	}
	return out
}

// jobsOfClusterQueue returns the Jobs of every LocalQueue that points at
// a ClusterQueue.
func (k *Keeper) jobsOfClusterQueue(ctx context.Context, o client.Object) []ctrl.Request {
	var lqs strata.LocalQueueList
	if err := k.client.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the LocalQueues of a ClusterQueue", "clusterQueue", o.GetName())
		return nil
	}
	var out []ctrl.Request
	for i := range lqs.Items {
		out = append(out, k.jobsOfLocalQueue(ctx, &lqs.Items[i])...)
	}
	return out
}

// jobsOfLocalQueue returns the Jobs labelled with a LocalQueue's name in
// its namespace.
func (k *Keeper) jobsOfLocalQueue(ctx context.Context, o client.Object) []ctrl.Request {
	list, err := k.kind.List(ctx, k.client, client.InNamespace(o.GetNamespace()), client.MatchingLabels{strata.QueueNameLabel: o.GetName()}, client.UnsafeDisableDeepCopy)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Jobs of a LocalQueue", "localQueue", klog.KObj(o), "kind", k.kind.GroupVersionKind().Kind)
		return nil
	}
	out := make([]ctrl.Request, 0, len(list))
	for _, j := range list {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(j.Object())})
	}
	return out
}

// Superseded says whether a write failed only because the informer's copy
// was outdated: a conflict, or creating a Workload that exists already.
// The newer object comes as an event; retrying at once would fail again.
func Superseded(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// Result is what a reconcile of a job's intake that ended with err
// returns: err, but nothing to retry when the write was superseded. The
// informer is then behind the API server: the newer object that made the
// write fail comes as an event and brings the job back. Retrying now
// would only fail again, and logging it would be noise.
func Result(ctx context.Context, err error) (ctrl.Result, error) {
	if Superseded(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("Acted on an outdated object; waiting for the newer one", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// Sync creates the Workload of a Job that has not finished, or brings an
// unadmitted one up to date, with its Invalid condition. An error the API
// server returns as Invalid means the Workload breaks a rule the checks
// missed: only a change to the Job can help.
func (k *Keeper) Sync(ctx context.Context, job jobs.Job) (*strata.Workload, error) {
	desired, errs := DesiredWorkload(job, k.tas)
	if len(errs) > 0 && workload.RequestUsable(errs) && k.admitted(ctx, desired) {
		// A partial slice is a rule of admission: a Workload admitted
		// with one (on a cluster that allowed it, or before the setting
		// was turned off) keeps running, and is not marked Invalid.
		opts := k.tas
		opts.PartialSlices = true
		desired, errs = DesiredWorkload(job, opts)
	}
	if k.lean {
		workload.LeanWorkload(desired)
	}
	var reason, message string
	if len(errs) > 0 {
		reason, message = ReasonInvalidJob, errs.ToAggregate().Error()
	} else {
		var err error
		if reason, message, err = k.check(ctx, job, desired); err != nil {
			return nil, err
		}
	}
	return k.apply(ctx, job, desired, reason, message)
}

// admitted says whether the Workload desired stands for exists and is
// admitted (as the cache has it).
func (k *Keeper) admitted(ctx context.Context, desired *strata.Workload) bool {
	var wl strata.Workload
	return k.client.Get(ctx, client.ObjectKeyFromObject(desired), &wl) == nil && wl.Status.Admission != nil
}

// check runs the checks beyond the Job itself; it sets the Workload's
// priority from its WorkloadPriorityClass or PriorityClass (as its
// priorityClassSource says). The pods' priority is not intake's.
func (k *Keeper) check(ctx context.Context, job jobs.Job, desired *strata.Workload) (string, string, error) {
	for _, c := range k.checks {
		if reason, message := c(job); reason != "" {
			return reason, message, nil
		}
	}
	if reason, message, err := k.checkQueue(ctx, job); err != nil || reason != "" {
		return reason, message, err
	}
	return k.checkPriority(ctx, desired)
}

// checkPriority sets the Workload's priority from the class its spec
// names: a WorkloadPriorityClass or a PriorityClass, as its
// priorityClassSource says. A class that does not exist makes the Workload
// invalid until it is created.
func (k *Keeper) checkPriority(ctx context.Context, desired *strata.Workload) (string, string, error) {
	name := desired.Spec.PriorityClassName
	if name == "" {
		// No class named: the cluster's default PriorityClass, as the
		// API server gives the pods and as Kueue does; 0 without one.
		def, err := k.defaultPriorityClass(ctx)
		if err != nil || def == nil {
			return ReasonValid, "", err
		}
		desired.Spec.PriorityClassName, desired.Spec.PriorityClassSource = def.Name, strata.PodPriorityClassSource
		desired.Spec.Priority = ptr.To(def.Value)
		return ReasonValid, "", nil
	}
	kind, value, err := k.priorityClassValue(ctx, desired.Spec.PriorityClassSource, name)
	switch {
	case apierrors.IsNotFound(err):
		return ReasonPriorityClassNotFound, fmt.Sprintf("%s %q does not exist", kind, name), nil
	case err != nil:
		return "", "", err
	}
	desired.Spec.Priority = ptr.To(value)
	return ReasonValid, "", nil
}

// defaultPriorityClass is the PriorityClass marked globalDefault
// (workload.DefaultPriorityClass), nil when there is none.
func (k *Keeper) defaultPriorityClass(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	var pcs schedulingv1.PriorityClassList
	if err := k.client.List(ctx, &pcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing PriorityClasses for the default one: %w", err)
	}
	items := make([]*schedulingv1.PriorityClass, len(pcs.Items))
	for i := range pcs.Items {
		items[i] = &pcs.Items[i]
	}
	def := workload.DefaultPriorityClass(items)
	if def == nil {
		return nil, nil
	}
	return def.DeepCopy(), nil
}

// priorityClassValue reads the value of the class name of source: a
// WorkloadPriorityClass, or else a PriorityClass; kind is the class's
// kind.
func (k *Keeper) priorityClassValue(ctx context.Context, source, name string) (kind string, value int32, err error) {
	if source == strata.WorkloadPriorityClassSource {
		// The cache waits for the classes' initial list (the controller
		// started without it), for a while: a list that never comes, such
		// as one the role does not allow, is an error that says so.
		ctx, cancel := context.WithTimeout(ctx, priorityClassListWait)
		defer cancel()
		var wpc strata.WorkloadPriorityClass
		if err = k.client.Get(ctx, types.NamespacedName{Name: name}, &wpc); err != nil && !apierrors.IsNotFound(err) {
			err = fmt.Errorf("reading WorkloadPriorityClass %q (is list and watch of workloadpriorityclasses.strata.dev allowed?): %w", name, err)
		}
		return "WorkloadPriorityClass", wpc.Value, err
	}
	var pc schedulingv1.PriorityClass
	err = k.client.Get(ctx, types.NamespacedName{Name: name}, &pc)
	return "PriorityClass", pc.Value, err
}

// DesiredWorkload builds the Workload of a Job and checks the Job. The
// Workload of an invalid Job has no topology requests: invalid ones could
// break the Workload schema, and the API server would then reject the
// Workload and with it the Invalid condition that tells the user what to
// fix. An invalid Workload is not admitted, so nothing is lost. opts
// says whether a slice size may leave a partial slice.
func DesiredWorkload(job jobs.Job, opts tas.Options) (*strata.Workload, field.ErrorList) {
	desired, errs := jobs.WorkloadFor(job)
	errs = workload.AllowPartialSlices(errs, opts.PartialSlices)
	errs = append(errs, workload.ValidatePodSets(desired.Spec.PodSets, field.NewPath("spec", "template"))...)
	if len(errs) == 0 {
		// What the checks above let through must fit the schema too; this
		// catches a rule they missed.
		errs = workload.ValidateSpec(&desired.Spec, field.NewPath("workload", "spec"))
	}
	if len(errs) > 0 {
		workload.DropTopologyRequests(&desired.Spec)
	}
	if jobs.Gated(job) {
		// A copy sent running with its pods gated has no start that could
		// set its parallelism (a hub that knew of partial admission sends
		// such copies suspended): it is admitted whole or not at all.
		for i := range desired.Spec.PodSets {
			desired.Spec.PodSets[i].MinCount = nil
		}
	}
	return desired, errs
}

// withMinCounts is desired with wl's pod sets' minCounts: a change of a
// minCount alone (a Job's job-min-parallelism edited after its Workload
// was made, an upgrade that added the field, or a Workload CRD that does
// not have it yet and drops it on every write) is not written.
func withMinCounts(desired, wl *strata.Workload) *strata.Workload {
	if len(desired.Spec.PodSets) != len(wl.Spec.PodSets) {
		return desired
	}
	same := desired
	for i := range desired.Spec.PodSets {
		if equality.Semantic.DeepEqual(desired.Spec.PodSets[i].MinCount, wl.Spec.PodSets[i].MinCount) {
			continue
		}
		if same == desired {
			same = desired.DeepCopy()
		}
		same.Spec.PodSets[i].MinCount = wl.Spec.PodSets[i].MinCount
	}
	return same
}

// Truncate cuts s to at most n bytes, on a character boundary, marking the
// cut.
func Truncate(s string, n int) string {
	const mark = " ..."
	if len(s) <= n {
		return s
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Finish marks the Workload of a finished Job Finished, which releases
// what it holds.
func (k *Keeper) Finish(ctx context.Context, j jobs.Job, reason string) error {
	job := j.Object()
	var wl strata.Workload
	if err := k.client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: k.kind.WorkloadName(job.GetName())}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, job) {
		return nil // an earlier Job's: this one's end says nothing about it
	}
	if !meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: "the " + k.kind.GroupVersionKind().Kind + " " + strings.ToLower(reason),
	}) {
		return nil
	}
	return k.client.Status().Update(ctx, &wl)
}

// DeleteWorkload removes the Workload of a deleted Job at once (garbage
// collection would, later), which releases what it holds. With
// orphans, a Workload that no object controls any more goes too: the
// Job was deleted with --cascade=orphan, which leaves its dependents
// without an owner (see WithOrphans).
func (k *Keeper) DeleteWorkload(ctx context.Context, job types.NamespacedName) error {
	var wl strata.Workload
	if err := k.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: k.kind.WorkloadName(job.Name)}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(&wl)
	orphaned := owner == nil && k.orphans
	if !orphaned && (!jobs.IsKind(k.kind, owner) || owner.Name != job.Name) {
		return nil
	}
	if !wl.DeletionTimestamp.IsZero() {
		return nil // deleted already, held by a finalizer
	}
	return client.IgnoreNotFound(k.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}))
}

// held says whether wl is being deleted and waits for the Keeper's
// finalizer (WithFinalizer).
func (k *Keeper) held(wl *strata.Workload) bool {
	return k.finalizer != "" && !wl.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(wl, k.finalizer)
}

// deleteStaleWorkload removes the Workload at the Job's Workload name that
// another Job of that name controls (or did, until it was orphaned), with
// a precondition on its UID: only that object goes, never a Workload
// created meanwhile. A Workload controlled by anything but a Job is not
// intake's to remove: the Job cannot get a Workload, and says so.
func (k *Keeper) deleteStaleWorkload(ctx context.Context, j jobs.Job, wl *strata.Workload) error {
	job := j.Object()
	if owner := metav1.GetControllerOfNoCopy(wl); owner != nil && !jobs.IsKind(k.kind, owner) {
		err := fmt.Errorf("the Workload %s is controlled by %s %s, not by this Job; rename the Job or remove the Workload", wl.Name, owner.Kind, owner.Name)
		k.recorder.Eventf(job, nil, corev1.EventTypeWarning, "WorkloadTaken", "Create", "%s", Truncate(err.Error(), MaxEventNote))
		return reconcile.TerminalError(err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting the Workload of an earlier Job of the same name", "workload", klog.KObj(wl), "uid", wl.UID)
	return client.IgnoreNotFound(k.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}))
}

// checkQueue says whether the Job's LocalQueue exists, and its
// ClusterQueue, and whether that admits the Job's namespace; it returns an
// empty reason when it does.
func (k *Keeper) checkQueue(ctx context.Context, j jobs.Job) (string, string, error) {
	job := j.Object()
	name := job.GetLabels()[strata.QueueNameLabel]
	lq := &strata.LocalQueue{}
	if err := k.client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: name}, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", "", err
		}
		lq = nil
	}
	var cq *strata.ClusterQueue
	if lq != nil {
		cq = &strata.ClusterQueue{}
		if err := k.client.Get(ctx, types.NamespacedName{Name: lq.Spec.ClusterQueue}, cq); err != nil {
			if !apierrors.IsNotFound(err) {
				return "", "", err
			}
			cq = nil
		}
	}
	var ns corev1.Namespace
	if err := k.client.Get(ctx, types.NamespacedName{Name: job.GetNamespace()}, &ns); err != nil {
		return "", "", err
	}
	res := queue.Resolve(job.GetNamespace(), name, ns.Labels, lq, cq)
	return res.Reason, res.Message, nil
}

// dispatchEvicted says whether a dispatched Workload is being evicted at
// the hub for another reason (preempted, drained): its copy is taken back
// already; the spec is brought up to date once it is.
func dispatchEvicted(wl *strata.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadEvicted)
}

// apply creates the Workload or brings an unadmitted one up to date —
// spec and InvalidAnnotation in one write, with the dispatch labels and
// pinned flavor of a hub's copy, which an admitted one gets too — then
// writes its Invalid
// condition and, when it changed to invalid, an event. A valid Workload
// that was never invalid has no Invalid condition: that saves a write per
// Job.
func (k *Keeper) apply(ctx context.Context, j jobs.Job, desired *strata.Workload, reason, message string) (*strata.Workload, error) {
	job := j.Object()
	invalid := reason != ReasonValid
	message = Truncate(message, MaxConditionMessage)
	if invalid {
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, strata.InvalidAnnotation, reason)
	}
	var wl strata.Workload
	err := k.client.Get(ctx, client.ObjectKeyFromObject(desired), &wl)
	replacing := false
	if err == nil && k.held(&wl) {
		if !metav1.IsControlledBy(&wl, job) {
			kind := j.Kind().GroupVersionKind().Kind
			if k.finalizer == strata.PodsGoneFinalizer {
				k.recorder.Eventf(job, &wl, corev1.EventTypeNormal, ReasonWaitingForEarlierWorkload, "Create",
					"waits for the Workload %s of an earlier %s of the same name, which is being deleted: its pods end first, so that the two never run at once (the Workload's %s annotation names them)",
					wl.Name, kind, strata.GoingPodsAnnotation)
			} else {
				k.recorder.Eventf(job, &wl, corev1.EventTypeNormal, ReasonWaitingForEarlierWorkload, "Create",
					"waits for the Workload %s of an earlier %s of the same name, which is being deleted: its copy on a worker is taken back first, so that the two never run at once ('kubectl strata explain' on this %s says what it waits for)",
					wl.Name, kind, kind)
			}
			return nil, ErrEarlierWorkloadGoing
		}
		// Deleted while its job exists: its copy is being taken back;
		// once the Workload is gone, the job gets a new one.
		return nil, nil
	}
	if err == nil && !metav1.IsControlledBy(&wl, job) {
		// An earlier Job of the same name left it (deleted, garbage
		// collection not done yet, or orphaned): nothing of it is this
		// Job's, least of all its admission.
		if err := k.deleteStaleWorkload(ctx, j, &wl); err != nil {
			return nil, err
		}
		replacing = true
		err = apierrors.NewNotFound(strata.GroupVersion.WithResource("workloads").GroupResource(), wl.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		wl = *desired
		if err := controllerutil.SetControllerReference(job, &wl, k.client.Scheme()); err != nil {
			return nil, err
		}
		if k.finalizesWorkload(&wl) {
			controllerutil.AddFinalizer(&wl, k.finalizer)
		}
		if err := k.client.Create(ctx, &wl); err != nil {
			if replacing && apierrors.IsAlreadyExists(err) {
				// The stale Workload is still being deleted; an orphaned
				// one's deletion brings no event for this Job: retry.
				return nil, fmt.Errorf("replacing the Workload of an earlier Job of the same name: %s", err.Error())
			}
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		update := false
		// spec.active is the user's (or Kueue's deactivation), not the
		// job's: kept as it is.
		desired.Spec.Active = wl.Spec.Active
		if wl.Status.Placement != nil && wl.Status.Placement.Cluster != "" && !k.samePodSets(&wl, desired) && !followedInPlace(&wl, desired, j) {
			// A hub Workload dispatched, admitted or not, whose job's pod
			// sets changed (a LeaderWorkerSet scaled before its admission, a
			// Job's parallelism): its copy was made of the job as it was.
			// As Kueue stops what its job no longer matches, it is evicted at the hub (Evicted
			// True, reason JobChanged): the copies controller takes its
			// copy back as any eviction's — waiting for its pods, or
			// replaceAfter for a worker that does not answer — and the
			// spec stays as it was until then, so that the hub's quota
			// counts what may still run. Then (no cluster) the spec is
			// brought up to date below, and the dispatcher, which skips a
			// Workload evicted so at its current generation
			// (workload.OutdatedByJob), dispatches it as the job is now.
			// Deleting it instead, as before, let the next pass place its
			// successor while the copy still ran.
			if dispatchEvicted(&wl) {
				return &wl, nil // its copy is being taken back
			}
			message := fmt.Sprintf("the pod sets of the %s changed after the Workload was dispatched to %s: its copy there is taken back, and it is dispatched again as the %s is now",
				j.Kind().GroupVersionKind().Kind, wl.Status.Placement.Cluster, j.Kind().GroupVersionKind().Kind)
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
				Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByJobChange,
				Message: Truncate(message, MaxConditionMessage), ObservedGeneration: wl.Generation,
			})
			if err := k.client.Status().Update(ctx, &wl); err != nil {
				return nil, err
			}
			k.recorder.Eventf(job, &wl, corev1.EventTypeNormal, strata.EvictedByJobChange, "Evict", "%s", Truncate(message, MaxEventNote))
			return &wl, nil
		}
		if k.resizedOnly(&wl, desired) {
			// An elastic Job resized while it runs: its admission
			// follows (the scheduler's resize), the Job is not stopped.
			for i := range wl.Spec.PodSets {
				wl.Spec.PodSets[i].Count = desired.Spec.PodSets[i].Count
			}
			update = true
		}
		if wl.Status.Admission == nil && (!k.sameSpec(&wl, desired) || wl.Annotations[strata.InvalidAnnotation] != desired.Annotations[strata.InvalidAnnotation]) {
			wl.Spec = desired.Spec
			if invalid {
				metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.InvalidAnnotation, reason)
			} else {
				delete(wl.Annotations, strata.InvalidAnnotation)
			}
			update = true
		}
		// A hub's copy is created with its labels and pinned flavor,
		// which never change; a Workload created before the Job had them
		// (or by an agent that did not carry them) gets them, admitted or
		// not.
		if workload.CarryDispatch(&wl.ObjectMeta, &desired.ObjectMeta) {
			update = true
		}
		// A Workload an earlier version made without the finalizer gets
		// it: from then on its deletion waits for its copy too. Alone, it
		// is a patch of the finalizers: an admitted Workload's spec is not
		// to be written.
		before := wl.DeepCopy()
		finalize := k.finalizesWorkload(&wl) && controllerutil.AddFinalizer(&wl, k.finalizer)
		switch {
		case update:
			if err := k.client.Update(ctx, &wl); err != nil {
				return nil, err
			}
		case finalize:
			if err := k.client.Patch(ctx, &wl, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return nil, err
			}
		}
	}
	if workload.OutdatedByJob(&wl) && (wl.Status.Placement == nil || wl.Status.Placement.Cluster == "") {
		// Its copy taken back, and its spec not brought up to date above:
		// the job was changed back meanwhile. It is dispatched as it is.
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: strata.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: strata.EvictedByJobChange,
			Message: "its copy was taken back; the job's pod sets are the Workload's again", ObservedGeneration: wl.Generation,
		})
		if err := k.client.Status().Update(ctx, &wl); err != nil {
			return nil, err
		}
	}
	was := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid)
	if !invalid && was == nil {
		return &wl, nil
	}
	status := metav1.ConditionFalse
	if invalid {
		status = metav1.ConditionTrue
	}
	if !meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadInvalid, Status: status, Reason: reason, Message: message, ObservedGeneration: wl.Generation,
	}) {
		return &wl, nil
	}
	if err := k.client.Status().Update(ctx, &wl); err != nil {
		return nil, err
	}
	if invalid && (was == nil || was.Message != message) {
		k.recorder.Eventf(job, &wl, corev1.EventTypeWarning, reason, "Validate", "%s", Truncate(message, MaxEventNote))
	}
	return &wl, nil
}
