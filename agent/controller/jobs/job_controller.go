// Package jobs is the agent's intake and starter: for every job of a
// registered workload kind (pkg/jobs: batch/v1 Job, ...) labelled with
// strata.dev/queue-name it keeps a Workload, says on it (and with an event
// on the job) when the job cannot be admitted as written, starts the job
// once its Workload is admitted and stops it when the admission goes.
// "Job" below means a job of the Reconciler's kind.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/admitevents"
	"strata.dev/strata/pkg/intake"
	pkgjobs "strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Reasons of the Workload's Invalid condition (and of the Job's events).
const (
	ReasonValid                 = intake.ReasonValid
	ReasonInvalidJob            = intake.ReasonInvalidJob
	ReasonLocalQueueNotFound    = intake.ReasonLocalQueueNotFound
	ReasonQueueNotFound         = intake.ReasonQueueNotFound
	ReasonNamespaceNotAllowed   = intake.ReasonNamespaceNotAllowed
	ReasonPriorityClassNotFound = intake.ReasonPriorityClassNotFound
	// ReasonJobChanged: the Job's pod sets changed between its admission
	// and its start; it is admitted again as it is now.
	ReasonJobChanged = "JobChanged"
	// ReasonLeftQueue: the Job's queue label was removed before it
	// started; its Workload is deleted.
	ReasonLeftQueue = "LeftQueue"
)

// Reconciler keeps the Workload of each queue-labelled Job of one kind.
type Reconciler struct {
	kind       pkgjobs.Kind
	client     client.Client
	recorder   events.EventRecorder
	admissions *admitevents.Recorder
	intake     *intake.Keeper
	// clock stamps the Requeued conditions this controller writes; the
	// scheduler orders requeued Workloads by them (WithClock).
	clock clock.PassiveClock
	// announced holds, per gated Job (pkgjobs.Gated), the admission its
	// Started event was recorded for (admissionID), so that it is
	// recorded once: no write to the Job marks that it started.
	announced sync.Map
}

// NewReconciler returns a Reconciler of batch/v1 Jobs.
func NewReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return NewKindReconciler(batchjob.Kind, c, recorder)
}

// NewKindReconciler returns a Reconciler of the Jobs of kind.
func NewKindReconciler(kind pkgjobs.Kind, c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{kind: kind, client: c, recorder: recorder, intake: intake.New(kind, c, recorder).WithLeanWorkloads().WithUnsettledFirst().WithElasticJobs().
		WithFinalizerFor(strata.PodsGoneFinalizer, workload.IsCopy), clock: clock.RealClock{}}
}

// WithClock stamps the Requeued conditions written when a Job is suspended
// or its Workload deactivated with clk: the clock of the agent's
// scheduler, which orders requeued Workloads by those times and counts
// their backoff on it.
func (r *Reconciler) WithClock(clk clock.PassiveClock) *Reconciler {
	r.clock = clk
	return r
}

// WithAdmissionEvents records the Jobs it starts through a: one Started
// event each, or a digest per ClusterQueue. Without it each gets its
// Started event.
func (r *Reconciler) WithAdmissionEvents(a *admitevents.Recorder) *Reconciler {
	r.admissions = a
	return r
}

// WithTAS applies the topology rules of the agent's configuration to the
// Jobs' pod-set annotations (tas.Options.PartialSlices).
func (r *Reconciler) WithTAS(opts tas.Options) *Reconciler {
	r.intake.WithTAS(opts)
	return r
}

// WorkloadName is the name of a Job's Workload, which is also the value
// of its pods' strata.dev/workload label: see workload.JobWorkloadName.
func WorkloadName(job string) string { return workload.JobWorkloadName(job) }

// SetupWithManager registers the reconciler: Jobs with the queue label,
// their Workloads, and every Job of a LocalQueue when the LocalQueue or
// its ClusterQueue changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	name := "job"
	if gvk := r.kind.GroupVersionKind(); gvk.Group != batchv1.GroupName {
		name = strings.ToLower(gvk.Kind)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Watches(r.kind.NewObject(), jobHandler(r.kind), builder.WithPredicates(queueLabelled()))
	return r.intake.Watch(mgr, b).Complete(r)
}

// queueLabelled passes the events of Jobs with the queue label, and the
// update that removes it (leftQueue).
func queueLabelled() predicate.Predicate {
	labelled := func(o client.Object) bool { return o.GetLabels()[strata.QueueNameLabel] != "" }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return labelled(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return labelled(e.ObjectNew) || labelled(e.ObjectOld) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return labelled(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return labelled(e.Object) },
	}
}

// jobHandler enqueues a Job on its events. The controller's priority queue
// puts the Jobs listed when the agent starts behind every later event, which
// would starve the Jobs submitted while the agent was away behind the
// activity of the ones it admits meanwhile. Only the listed Jobs with
// nothing to do for a while — finished, or running as started — wait
// behind; the ones waiting for their Workload, admission or start do not.
func jobHandler(kind pkgjobs.Kind) handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], initial bool) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
		job, isJob := kind.Adapt(o)
		pq, isPQ := q.(priorityqueue.PriorityQueue[reconcile.Request])
		if !initial || !isJob || !isPQ {
			q.Add(req)
			return
		}
		priority := 0
		if settled(job) {
			priority = handler.LowPriority
		}
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q, e.IsInInitialList)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A resync (same resourceVersion) keeps the queue's low
			// priority; a change is enqueued as usual.
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)})
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
	}
}

// settled says whether a Job needs nothing from the agent until it
// changes: it finished, or it runs as the agent started it.
func settled(job pkgjobs.Job) bool {
	if done, _ := job.Finished(); done {
		return true
	}
	return !job.Suspended() && startedAs(job) != "" && !pkgjobs.Gated(job)
}

// startedAs is the Workload an admission started the Job with, from its
// first pod template's label ("" when it was not, or it has no template,
// as a JobSet without ReplicatedJobs).
func startedAs(job pkgjobs.Job) string {
	if t := job.Templates(); len(t) > 0 {
		return t[0].Labels[strata.WorkloadLabel]
	}
	return ""
}

// Reconcile creates or updates the Workload of a Job and its Invalid
// condition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var again time.Duration
	res, err := intake.Result(ctx, r.reconcile(ctx, req, &again))
	if err == nil && again > 0 {
		res.RequeueAfter = again
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request, again *time.Duration) error {
	obj := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.announced.Delete(req.NamespacedName)
			return r.intake.DeleteWorkload(ctx, req.NamespacedName)
		}
		return err
	}
	job, _ := r.kind.Adapt(obj)
	if !obj.GetDeletionTimestamp().IsZero() && obj.GetLabels()[strata.OriginLabel] != "" {
		// A hub's copy being deleted: say which pods keep it.
		var pods corev1.PodList
		if err := r.client.List(ctx, &pods, index.PodsOf(obj.GetNamespace(), r.kind.WorkloadName(obj.GetName()))...); err != nil {
			return err
		}
		remain, err := intake.ReportGoingPods(ctx, r.client, obj, pods.Items)
		if remain {
			*again = intake.GoingPodsInterval
		}
		return err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if obj.GetLabels()[strata.QueueNameLabel] == "" {
		if startedAs(job) == "" {
			return r.leftQueue(ctx, job)
		}
		if !job.Suspended() {
			return nil
		}
		// Suspended, then taken out of its queue before its template was
		// restored (the Job controller had not cleared its start time, or
		// it was being stopped): its Workload goes, so that it is not
		// admitted again, and what the admission put in the template
		// goes once the template may change. The Job's own events no
		// longer come (queueLabelled): it is looked at again meanwhile.
		if err := r.leftQueue(ctx, job); err != nil {
			return err
		}
		// Looked at again whatever comes of it: an update that meets a
		// newer Job (a conflict) waits for an event that never comes.
		*again = childrenStopWait
		if !job.TemplatesMutable() {
			return nil
		}
		return r.takeBackAndUpdate(ctx, job, again)
	}
	if err := r.deleteLegacyWorkload(ctx, job); err != nil {
		return err
	}
	if done, reason := job.Finished(); done {
		r.announced.Delete(req.NamespacedName)
		return r.intake.Finish(ctx, job, reason)
	}
	wl, err := r.intake.Sync(ctx, job)
	if apierrors.IsInvalid(err) {
		return r.rejected(ctx, job, err)
	}
	if errors.Is(err, intake.ErrEarlierWorkloadGoing) {
		// A hub's copy of the same name, deleted, waits for its pods
		// (strata.PodsGoneFinalizer); its deletion brings the job back.
		*again = earlierWorkloadRetry
		return nil
	}
	if err != nil || wl == nil {
		return err
	}
	if err := r.syncReclaimable(ctx, job, wl); err != nil {
		return err
	}
	released := false
	if wl.Status.Admission == nil && pkgjobs.Gated(job) && meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted) == nil {
		if released, err = r.podsReleased(ctx, job, wl); err != nil {
			return err
		}
	}
	switch nextStep(job, wl, released) {
	case stepAnnounce:
		r.announce(job, wl)
		return nil
	case stepStop:
		return r.stop(ctx, job, wl, again)
	case stepHold:
		return r.hold(ctx, job, holdNote(wl))
	case stepRequeue:
		return r.requeue(ctx, job, wl, again)
	case stepRequeueResized:
		return r.requeueChanged(ctx, job, wl, resized(job, wl))
	case stepDeactivate:
		return r.deactivate(ctx, job, wl)
	case stepStart:
		return r.start(ctx, job, wl, again)
	}
	return nil
}

// step is what Reconcile does to a Job once its Workload is up to date.
type step int

const (
	stepNone           step = iota
	stepStop                // the Workload lost the admission the Job was started with
	stepHold                // the Job runs but was not started by Strata: suspend it
	stepRequeue             // the user suspended a started Job: take its admission back
	stepStart               // the suspended Job is admitted: start it
	stepDeactivate          // the Workload's spec.active is false: take its admission back, say so
	stepAnnounce            // a gated copy is admitted: the ungater releases its pods; say it started
	stepRequeueResized      // a started Job was resized while it ran: take its admission back
)

// nextStep decides what to do with a Job that has not finished, given its
// Workload. A Job runs only once start has applied an admission to it —
// its template then carries the Workload's label — and only while the
// Workload keeps that admission. A copy a hub sent running with its pods
// held by the topology scheduling gate (pkgjobs.Gated) is the exception:
// it waits as it is, and its admission needs no start, since the ungater
// releases its pods; but once its Workload was evicted (an admission was
// taken back: the pods it released may run, and a new admission must not
// find them) or, with no admission, one of its pods runs released
// (released), it is stopped like a started Job and waits suspended from
// then on.
func nextStep(job pkgjobs.Job, wl *strata.Workload, released bool) step {
	suspended := job.Suspended()
	started := startedAs(job) == wl.Name
	admitted := wl.Status.Admission != nil
	// Its quota reserved, its queue's AdmissionChecks not all Ready: it
	// may not run (Kueue stops a job whose Workload is not admitted).
	waiting := workload.AwaitingChecks(wl)
	if started && pkgjobs.Gated(job) && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		switch {
		case meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted) != nil:
			return stepStop
		case released && !admitted:
			// Its pods run without an admission (its Workload was
			// deleted and made again), deactivated or not.
			return stepStop
		case !workload.IsActive(wl):
			if admitted || !deactivatedSaid(wl) {
				return stepDeactivate
			}
			return stepNone
		case admitted && !waiting:
			return stepAnnounce
		}
		return stepNone
	}
	switch {
	case started && (!admitted || waiting):
		return stepStop
	case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
		return stepNone
	case !suspended && !started:
		return stepHold
	case !workload.IsActive(wl):
		if admitted || !deactivatedSaid(wl) {
			return stepDeactivate
		}
		return stepNone
	case !admitted || waiting:
		return stepNone
	case started && !suspended && resized(job, wl) != "":
		// Its parallelism (an MPIJob's workers) changed while it ran: the
		// admission no longer counts what runs, and the ungater has no
		// place for pods beyond it. As Kueue stops a job that no longer
		// matches its Workload: the admission is taken back, the Job
		// stopped, and admitted again as it is now.
		return stepRequeueResized
	case started && !startedWith(job, wl):
		// Evicted and admitted again before the Job was stopped (still
		// running), or while it was being stopped (the template not
		// restored yet): its pods stand where the old admission put
		// them. Stop it, then start it anew with this admission.
		return stepStop
	case suspended && started && startingWith(job, wl):
		// A start with this admission that did not finish (its children
		// synced, or not, and the Job not resumed): finish it.
		return stepStart
	case suspended && started:
		return stepRequeue
	case suspended:
		return stepStart
	}
	return stepNone
}

// startedWith says whether the Job was started with the admission wl
// holds. When either is unknown (started by an agent that did not record
// it) it counts as the same; but a hub's gated copy (GatedStartAnnotation)
// without a record was released for an earlier admission, if any: a new
// one finds it being stopped.
func startedWith(job pkgjobs.Job, wl *strata.Workload) bool {
	added, ok, _ := recordedAdded(job)
	if !ok {
		_, gated := job.Object().GetAnnotations()[strata.GatedStartAnnotation]
		return !gated
	}
	id := admissionID(wl)
	return added.Admission == "" || id == "" || added.Admission == id
}

// startingWith says whether the Job's start with the admission wl holds
// is under way: the admitted templates written, the Job not resumed yet
// (addedByAdmission.Starting).
func startingWith(job pkgjobs.Job, wl *strata.Workload) bool {
	added, ok, _ := recordedAdded(job)
	return ok && added.Starting && added.Admission != "" && added.Admission == admissionID(wl)
}

// leftQueue deletes the Workload of a Job whose queue label was removed
// before the agent started it: the Job is no longer Strata's, and its
// Workload would otherwise wait in the queue, or hold the quota of an
// admission nothing would ever start. (A running Job's label cannot be
// removed: the chart's strata-queue-name-immutable policy.)
func (r *Reconciler) leftQueue(ctx context.Context, job pkgjobs.Job) error {
	var wl strata.Workload
	key := types.NamespacedName{Namespace: job.Object().GetNamespace(), Name: r.kind.WorkloadName(job.Object().GetName())}
	if err := r.client.Get(ctx, key, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, job.Object()) || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
		return nil
	}
	if err := r.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.recorder.Eventf(job.Object(), nil, corev1.EventTypeNormal, ReasonLeftQueue, "Delete",
		"The label %s was removed: the Job's Workload %s is deleted, and Strata no longer admits the Job", strata.QueueNameLabel, wl.Name)
	return nil
}

// rejected reports on the Job that the API server rejected its Workload —
// a Workload rule the agent's checks missed — and stops retrying: only a
// change to the Job can help. A Job that runs is suspended, since it
// cannot be admitted.
func (r *Reconciler) rejected(ctx context.Context, job pkgjobs.Job, err error) error {
	r.recorder.Eventf(job.Object(), nil, corev1.EventTypeWarning, ReasonInvalidJob, "Validate", "%s",
		intake.Truncate("The API server rejected the Job's Workload; change the Job: "+err.Error(), intake.MaxEventNote))
	if !job.Suspended() {
		if herr := r.hold(ctx, job, "The Job cannot be admitted: the API server rejected its Workload; it stays suspended until the Job is changed"); herr != nil {
			return herr
		}
	}
	return reconcile.TerminalError(err)
}

// takeBackAdmission removes from the Job what start added: exactly what
// its AddedByAdmissionAnnotation records. A Job started by an older agent
// has no record; then the node selector entries equal to some flavor's node
// labels go, as the admission may be gone. A kind whose controller merges
// its templates into existing children on resume (pkgjobs.ChildRestore)
// has the children restored first, with the same record; while they still
// run, it returns pkgjobs.ErrChildrenRunning and changes nothing.
func (r *Reconciler) takeBackAdmission(ctx context.Context, job pkgjobs.Job) error {
	added, ok, err := recordedAdded(job)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Restoring the Job's pod templates without a record of what its admission added", "job", klog.KObj(job.Object()))
	}
	_, gated := job.Object().GetAnnotations()[strata.GatedStartAnnotation]
	restore := func(i int, tmpl *corev1.PodTemplateSpec) {
		a := added.forTemplate(i)
		if !ok && !gated {
			// A hub's gated copy had nothing added: its node selector is
			// the user's.
			a = r.flavorNodeLabels(ctx, tmpl)
		}
		restoreTemplate(tmpl, a)
	}
	if cr, isCR := job.(pkgjobs.ChildRestore); isCR {
		if err := cr.RestoreChildren(ctx, r.client, restore); err != nil {
			return err
		}
	}
	for i, tmpl := range job.Templates() {
		restore(i, tmpl)
	}
	if rs, ok := job.(pkgjobs.Resizer); ok {
		rs.RunAsAsked()
	}
	annotations := job.Object().GetAnnotations()
	delete(annotations, AddedByAdmissionAnnotation)
	job.Object().SetAnnotations(annotations)
	return nil
}

// childrenStopWait is how long a job whose children still run waits
// before the agent looks again (ChildRestore). Their suspension and the
// end of their pods change the job's status, which brings it back sooner;
// this is the fallback.
const childrenStopWait = 2 * time.Second

// earlierWorkloadRetry is how often a job whose Workload name the
// Workload of an earlier copy of the same name, deleted and waiting for
// its pods, still holds looks again (its deletion's event is the usual
// way back).
const earlierWorkloadRetry = 10 * time.Second

// takeBackAndUpdate takes the admission back from the Job and writes it;
// while its children still run, it asks (again) for another look later.
func (r *Reconciler) takeBackAndUpdate(ctx context.Context, job pkgjobs.Job, again *time.Duration) error {
	if err := r.takeBackAdmission(ctx, job); err != nil {
		if errors.Is(err, pkgjobs.ErrChildrenRunning) {
			ctrl.LoggerFrom(ctx).V(1).Info("Not restoring the Job's templates yet", "job", klog.KObj(job.Object()), "reason", err.Error())
			*again = childrenStopWait
			return nil
		}
		return fmt.Errorf("taking the admission back from the Job: %w", err)
	}
	return r.client.Update(ctx, job.Object())
}

// staleOnChildren returns what removes from a child's pod template, made
// from the job's template i, what no admission of the job now holds: the
// Strata labels and annotations, the topology gate, and the node selector
// entries and tolerations of any ResourceFlavor that admitted template i
// (as it is about to start) does not have. The rest is the user's or the
// child's controller's and stays.
func (r *Reconciler) staleOnChildren(ctx context.Context, admitted []*corev1.PodTemplateSpec) (func(int, *corev1.PodTemplateSpec), error) {
	var flavors strata.ResourceFlavorList
	if err := r.client.List(ctx, &flavors); err != nil {
		return nil, fmt.Errorf("listing ResourceFlavors: %w", err)
	}
	return stripStale(flavors.Items, admitted), nil
}

// stripStale is staleOnChildren's removal, given the ResourceFlavors.
func stripStale(flavors []strata.ResourceFlavor, admitted []*corev1.PodTemplateSpec) func(int, *corev1.PodTemplateSpec) {
	return func(i int, tmpl *corev1.PodTemplateSpec) {
		if i >= len(admitted) {
			return
		}
		want := admitted[i]
		for _, m := range []map[string]string{tmpl.Labels, tmpl.Annotations} {
			for k := range m {
				_, inLabels := want.Labels[k]
				_, inAnnotations := want.Annotations[k]
				if strings.HasPrefix(k, strata.Prefix) && !inLabels && !inAnnotations {
					delete(m, k)
				}
			}
		}
		if !slices.ContainsFunc(want.Spec.SchedulingGates, workload.IsTopologyGate) {
			tmpl.Spec.SchedulingGates = slices.DeleteFunc(tmpl.Spec.SchedulingGates, workload.IsTopologyGate)
			if len(tmpl.Spec.SchedulingGates) == 0 {
				tmpl.Spec.SchedulingGates = nil
			}
		}
		for _, f := range flavors {
			for k := range f.Spec.NodeLabels {
				if _, ok := want.Spec.NodeSelector[k]; !ok {
					delete(tmpl.Spec.NodeSelector, k)
				}
			}
			for _, t := range f.Spec.Tolerations {
				if !slices.ContainsFunc(want.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, t) }) {
					tmpl.Spec.Tolerations = slices.DeleteFunc(tmpl.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, t) })
				}
			}
		}
		if len(tmpl.Spec.NodeSelector) == 0 {
			tmpl.Spec.NodeSelector = nil
		}
		if len(tmpl.Spec.Tolerations) == 0 {
			tmpl.Spec.Tolerations = nil
		}
	}
}

// flavorNodeLabels guesses what an admission added to a template when it
// was not recorded: the node selector entries equal to a flavor's node
// labels.
func (r *Reconciler) flavorNodeLabels(ctx context.Context, tmpl *corev1.PodTemplateSpec) addedByAdmission {
	var added addedByAdmission
	var flavors strata.ResourceFlavorList
	if err := r.client.List(ctx, &flavors); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ResourceFlavors to restore a Job's node selector")
		return added
	}
	for _, f := range flavors.Items {
		for k, v := range f.Spec.NodeLabels {
			if tmpl.Spec.NodeSelector[k] == v {
				setKey(&added.NodeSelector, k, v)
			}
		}
	}
	return added
}

// stop suspends a Job whose Workload was evicted, then restores its
// template: in two steps, because the template may change only once the
// Job controller has seen the suspension (and cleared its start time).
func (r *Reconciler) stop(ctx context.Context, job pkgjobs.Job, wl *strata.Workload, again *time.Duration) error {
	if !job.Suspended() {
		job.SetSuspended(true)
		if err := r.client.Update(ctx, job.Object()); err != nil {
			return err
		}
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, "Stopped", "Evict", "The Workload was evicted; the Job waits in LocalQueue %s again", wl.Spec.QueueName)
		return nil // the update brings the Job back for the second step
	}
	if !job.TemplatesMutable() {
		return nil // the Job controller's status update brings it back
	}
	return r.takeBackAndUpdate(ctx, job, again)
}

// hold suspends a Job that runs although Strata did not start it — its
// spec.suspend was removed, its queue label came after its creation, or it
// was created before strata-agent was installed — so that it waits for
// admission like every other Job. When the Workload is already admitted,
// the next reconcile starts the Job with that admission.
func (r *Reconciler) hold(ctx context.Context, job pkgjobs.Job, note string) error {
	job.SetSuspended(true)
	if err := r.client.Update(ctx, job.Object()); err != nil {
		return fmt.Errorf("suspending a Job that has not been admitted: %w", err)
	}
	r.recorder.Eventf(job.Object(), nil, corev1.EventTypeNormal, "Suspended", "Suspend", "%s", note)
	return nil
}

// holdNote is the event hold leaves on a Job of Workload wl: what is
// true of it, not that it waits for an admission it cannot get.
func holdNote(wl *strata.Workload) string {
	if reason := wl.Annotations[strata.InvalidAnnotation]; reason != "" {
		return fmt.Sprintf("The Job cannot be admitted as it is (%s; see its Workload's Invalid condition); it stays suspended until that is fixed", reason)
	}
	if a := wl.Status.Admission; a != nil {
		return fmt.Sprintf("The Job ran without being started by Strata; it starts again as admitted by ClusterQueue %s", a.ClusterQueue)
	}
	return fmt.Sprintf("The Job waits for admission in LocalQueue %s", wl.Spec.QueueName)
}

// requeue takes back the admission of a Job the user suspended: the
// Workload waits again, and what start added leaves the template. The
// admission goes first, so that its capacity is free at once even if the
// Job's update fails; the retry then finds a started Job without admission
// and stops it, which finishes the job.
func (r *Reconciler) requeue(ctx context.Context, job pkgjobs.Job, wl *strata.Workload, again *time.Duration) error {
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, r.clock.Now())
	wl.Status.Admission = nil
	wl.Status.ReclaimablePods = job.ReclaimablePods() // see syncReclaimable
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Suspended", Message: "the Job was suspended; it waits in its queue again",
	})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "JobSuspended", Message: "the Job was suspended after it had been admitted",
	})
	workload.SetRequeued(wl, metav1.ConditionTrue, "JobSuspended", "the Job was suspended; it waits in its queue again", r.clock.Now())
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return err
	}
	r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, "Requeued", "Evict", "The Job was suspended; it waits in LocalQueue %s again", wl.Spec.QueueName)
	if !job.TemplatesMutable() {
		return nil // stop restores the template once the Job controller has caught up
	}
	return r.takeBackAndUpdate(ctx, job, again)
}

// podSetsChanged says how the Job's pod sets differ from those its
// Workload's admission assigned and charged ("" when they do not): the
// Job was changed while suspended after the admission, and an admitted
// Workload's spec is not brought up to date. Started so, a template
// without an assignment would run without the admission's node selector
// and labels (and then be suspended again as a Job Strata did not start),
// a count that grew would run pods no quota or topology assignment
// counts, and pods that grew would take more of their nodes and quota
// than the admission charged (as Kueue, which stops a job that no longer
// matches its Workload).
func podSetsChanged(podSets []strata.PodSet, wl *strata.Workload) string {
	a := wl.Status.Admission
	for _, ps := range podSets {
		i := slices.IndexFunc(a.PodSetAssignments, func(psa strata.PodSetAssignment) bool { return psa.Name == ps.Name })
		switch {
		case i < 0:
			return fmt.Sprintf("pod set %s has no assignment", ps.Name)
		case a.PodSetAssignments[i].Count != ps.Count && !admittedPartially(ps, wl, a.PodSetAssignments[i].Count):
			return fmt.Sprintf("pod set %s has %d pods, its assignment %d", ps.Name, ps.Count, a.PodSetAssignments[i].Count)
		}
		j := slices.IndexFunc(wl.Spec.PodSets, func(w strata.PodSet) bool { return w.Name == ps.Name })
		if j < 0 {
			continue
		}
		got, was := workload.TemplateRequests(&ps.Template.Spec), workload.TemplateRequests(&wl.Spec.PodSets[j].Template.Spec)
		if !sameRequests(got, was) {
			return fmt.Sprintf("pod set %s requests %s per pod, its admission %s", ps.Name, formatRequests(got), formatRequests(was))
		}
	}
	return ""
}

// admittedPartially says whether an admission of count pods is a partial
// admission of the Job's pod set ps as its Workload asked for it: the
// same pods asked for, and at least its minCount.
func admittedPartially(ps strata.PodSet, wl *strata.Workload, count int32) bool {
	asked := workload.PodSet(wl, ps.Name)
	return asked != nil && asked.Count == ps.Count && count < ps.Count && workload.AdmitsCount(&ps, count)
}

// sameRequests says whether two pods' requests are equal, resource by
// resource (a zero request is no request).
func sameRequests(a, b corev1.ResourceList) bool {
	for name, q := range a {
		if other := b[name]; q.Cmp(other) != 0 {
			return false
		}
	}
	for name, q := range b {
		if _, ok := a[name]; !ok && !q.IsZero() {
			return false
		}
	}
	return true
}

// formatRequests is a pod's requests as "cpu=2,memory=1Gi", by name.
func formatRequests(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "nothing"
	}
	parts := make([]string, 0, len(rl))
	for _, name := range slices.Sorted(maps.Keys(rl)) {
		q := rl[name]
		parts = append(parts, string(name)+"="+q.String())
	}
	return strings.Join(parts, ",")
}

// resizable are the kinds whose pod counts a user may change while they
// run (a Job's parallelism, an MPIJob's workers). A LeaderWorkerSet's
// groups are resized by its rolling update, group by group; a JobSet's
// replicated Jobs may change only while it is suspended. Of these, only
// an MPIJob's templates may change too while it runs (the API server
// refuses a running Job's template change): its workers made again after
// such a change would ask for what the admission did not charge.
var resizable = map[pkgjobs.Kind]bool{batchjob.Kind: true, mpijob.Kind: true}

// resized says how a running Job's pod sets differ from its admission's
// ("" when they do not, or its kind is not resizable).
func resized(job pkgjobs.Job, wl *strata.Workload) string {
	if !resizable[job.Kind()] || wl.Status.Admission == nil || workload.Elastic(wl) {
		// An elastic Job's admission follows its size in place
		// (workload.ResizeOf).
		return ""
	}
	podSets, errs := job.PodSets()
	if len(errs) > 0 {
		return ""
	}
	if rs, ok := job.(pkgjobs.Resizer); ok {
		// Started with fewer pods than it asks for (partial admission):
		// its pod sets say what it asks for; what it runs is its
		// admission's count, unless its user changed it since.
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if n, partial := rs.RunningWith(psa.Name); partial && n != psa.Count {
				return fmt.Sprintf("pod set %s runs %d pods, its admission %d", psa.Name, n, psa.Count)
			}
		}
	}
	return podSetsChanged(podSets, wl)
}

// requeueChanged takes back the admission of a Job changed after it
// (podSetsChanged) before it starts: its Workload is brought up to date
// and admitted again as the Job is now.
func (r *Reconciler) requeueChanged(ctx context.Context, job pkgjobs.Job, wl *strata.Workload, changed string) error {
	message := "the Job changed after its admission (" + changed + "); it is admitted again as it is now"
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, r.clock.Now())
	wl.Status.Admission = nil
	wl.Status.ReclaimablePods = job.ReclaimablePods() // see syncReclaimable
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonJobChanged, Message: message,
	})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonJobChanged, Message: message,
	})
	workload.SetRequeued(wl, metav1.ConditionTrue, ReasonJobChanged, message, r.clock.Now())
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return err
	}
	r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, "Requeued", "Evict", "The Job changed after its admission (%s); it waits in LocalQueue %s again", changed, wl.Spec.QueueName)
	return nil
}

// syncReclaimable records on a Workload the pods of its job that finished
// for good (status.reclaimablePods), so that the cache and the queues
// release their capacity and quota now, not at the end. While admitted
// the count only grows (the quota it freed may be taken); without an
// admission it is what the job says now, as Kueue has it: a job whose
// parallelism was lowered while it waited must not keep an earlier count,
// which would charge its next admission less than it runs.
func (r *Reconciler) syncReclaimable(ctx context.Context, job pkgjobs.Job, wl *strata.Workload) error {
	want := job.ReclaimablePods()
	if wl.Status.Admission != nil {
		want = workload.MoreReclaimable(wl.Status.ReclaimablePods, want)
	}
	if len(want) == 0 && len(wl.Status.ReclaimablePods) == 0 || equality.Semantic.DeepEqual(want, wl.Status.ReclaimablePods) {
		return nil
	}
	wl.Status.ReclaimablePods = want
	return r.client.Status().Update(ctx, wl)
}

// deactivate takes back the admission of a Workload whose spec.active is
// false (the user's hold, Kueue's deactivation), as requeue does for a
// suspended Job; the next reconcile stops the Job. A Workload not admitted
// gets its Admitted condition's reason, Deactivated, and waits.
func (r *Reconciler) deactivate(ctx context.Context, job pkgjobs.Job, wl *strata.Workload) error {
	admitted := wl.Status.Admission != nil
	workload.AccumulateExecution(wl.Spec.MaximumExecutionTimeSeconds, &wl.Status, r.clock.Now())
	wl.Status.Admission = nil
	wl.Status.ReclaimablePods = job.ReclaimablePods() // see syncReclaimable
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonDeactivated,
		Message: "the Workload is deactivated (spec.active: false); it waits until spec.active is true",
	})
	if admitted {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: ReasonDeactivated, Message: "the Workload was deactivated after it had been admitted",
		})
	}
	workload.SetRequeued(wl, metav1.ConditionFalse, ReasonDeactivated, "the Workload is deactivated (spec.active: false)", r.clock.Now())
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return err
	}
	if admitted {
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, ReasonDeactivated, "Evict", "The Workload was deactivated; the Job waits until its spec.active is true")
	}
	return nil
}

// ReasonDeactivated is the Admitted and Evicted reason of a Workload whose
// spec.active is false.
const ReasonDeactivated = "Deactivated"

// deactivatedSaid says whether a Workload's Admitted condition already
// says it is deactivated.
func deactivatedSaid(wl *strata.Workload) bool {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	return c != nil && c.Reason == ReasonDeactivated
}

// childrenWait is how long an admitted Job whose controller has not made
// its children yet waits before the agent looks again (ChildSync).
const childrenWait = 250 * time.Millisecond

// start applies an admission to the Job's pod template — the flavor's node
// labels and tolerations, the topology scheduling gate, the labels that tie
// pods to the workload — records what it added, and unsuspends the Job.
func (r *Reconciler) start(ctx context.Context, job pkgjobs.Job, wl *strata.Workload, again *time.Duration) error {
	if !job.TemplatesMutable() {
		return nil // suspended, but the Job controller has not caught up yet
	}
	if cs, ok := job.(pkgjobs.ChildSync); ok {
		if err := cs.ChildrenMade(ctx, r.client); err != nil {
			if errors.Is(err, pkgjobs.ErrChildrenPending) {
				// Untouched and suspended until they are: the next try
				// starts it.
				ctrl.LoggerFrom(ctx).V(1).Info("Not starting the admitted Job yet", "job", klog.KObj(job.Object()), "reason", err.Error())
				*again = childrenWait
				return nil
			}
			return fmt.Errorf("starting Job: %w", err)
		}
	}
	podSets, _ := job.PodSets()
	if changed := podSetsChanged(podSets, wl); changed != "" {
		return r.requeueChanged(ctx, job, wl, changed)
	}
	before := job.Object().DeepCopyObject()
	if _, ok, _ := recordedAdded(job); ok {
		// Left from an admission that was not fully taken back.
		if err := r.takeBackAdmission(ctx, job); err != nil {
			if errors.Is(err, pkgjobs.ErrChildrenRunning) {
				*again = childrenStopWait
				return nil
			}
			return fmt.Errorf("starting Job: %w", err)
		}
	}
	templates := job.Templates()
	perTemplate := make([]addedByAdmission, len(templates))
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		i := slices.IndexFunc(podSets, func(ps strata.PodSet) bool { return ps.Name == psa.Name })
		if i < 0 || i >= len(templates) {
			continue
		}
		var flavor strata.ResourceFlavor
		if err := r.client.Get(ctx, types.NamespacedName{Name: psa.Flavor}, &flavor); err != nil {
			return fmt.Errorf("starting Job: flavor %q: %w", psa.Flavor, err)
		}
		perTemplate[i] = admitTemplate(templates[i], &flavor, wl.Name, psa.Name, psa.TopologyAssignment != nil)
		applyPodSetUpdates(templates[i], psa.Name, wl.Status.AdmissionChecks, &perTemplate[i])
		if pkgjobs.LabelsOwner(job) {
			setKey(&templates[i].Labels, strata.OwnerUIDLabel, string(job.Object().GetUID()))
		}
	}
	if cr, ok := job.(pkgjobs.ChildRestore); ok {
		// What an earlier admission left on the children — made from the
		// admitted templates after that admission was taken back from
		// them, or by an agent that kept no record — goes before the
		// job's controller merges the new templates into theirs.
		strip, err := r.staleOnChildren(ctx, templates)
		if err != nil {
			return fmt.Errorf("starting Job: %w", err)
		}
		if err := cr.RestoreChildren(ctx, r.client, strip); err != nil {
			if errors.Is(err, pkgjobs.ErrChildrenRunning) {
				*again = childrenStopWait
				return nil
			}
			return fmt.Errorf("starting Job: %w", err)
		}
	}
	if rs, ok := job.(pkgjobs.Resizer); ok {
		// Admitted with fewer pods than it asks for (partial admission):
		// it runs that many, and asks for all of them again when the
		// admission is taken back (takeBackAdmission).
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if i := slices.IndexFunc(podSets, func(ps strata.PodSet) bool { return ps.Name == psa.Name }); i >= 0 && psa.Count < podSets[i].Count {
				rs.RunWith(psa.Name, psa.Count)
			}
		}
	}
	added := recordOf(perTemplate)
	added.Admission = admissionID(wl)
	if cs, ok := job.(pkgjobs.ChildSync); ok {
		// Its controller made children from the templates while it was
		// suspended: the admitted templates go to them before it resumes.
		// Written once, marked as a start not finished: a retry (its
		// children's sync or the resume failed) finishes it with the same
		// admission, which changes nothing.
		added.Starting = true
		if err := recordAdded(job, added); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(before, job.Object()) {
			if err := r.client.Update(ctx, job.Object()); err != nil {
				return fmt.Errorf("starting Job: %w", err)
			}
		}
		if err := cs.SyncChildren(ctx, r.client); err != nil {
			return fmt.Errorf("starting Job: bringing its children's templates to the admission: %w", err)
		}
		added.Starting = false
	}
	if err := recordAdded(job, added); err != nil {
		return err
	}
	job.SetSuspended(false)
	if err := r.client.Update(ctx, job.Object()); err != nil {
		return fmt.Errorf("starting Job: %w", err)
	}
	r.started(job, wl)
	return nil
}

// announce records, once per admission, that a gated Job started on wl's
// admission: its pods are released by the ungater, not by a write here.
func (r *Reconciler) announce(job pkgjobs.Job, wl *strata.Workload) {
	key := client.ObjectKeyFromObject(job.Object())
	id := admissionID(wl)
	if prev, ok := r.announced.Swap(key, id); ok && prev == id {
		return
	}
	r.started(job, wl)
}

// podsReleased says whether an active pod of the gated Job's Workload runs
// without the topology scheduling gate: it was released for an admission.
func (r *Reconciler) podsReleased(ctx context.Context, job pkgjobs.Job, wl *strata.Workload) (bool, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, append(index.PodsOf(wl.Namespace, wl.Name), client.UnsafeDisableDeepCopy)...); err != nil {
		return false, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job.Object()) || !p.DeletionTimestamp.IsZero() || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !workload.TopologyGated(p) {
			return true, nil
		}
	}
	return false, nil
}

// started records that the Job started on wl's admission.
func (r *Reconciler) started(job pkgjobs.Job, wl *strata.Workload) {
	note := "Admitted by ClusterQueue " + wl.Status.Admission.ClusterQueue
	if r.admissions == nil {
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, ReasonStarted, "Admit", "%s", note)
		return
	}
	r.admissions.Admitted(admitevents.Admission{ClusterQueue: wl.Status.Admission.ClusterQueue, Workload: wl.Namespace + "/" + wl.Name,
		Regarding: job.Object(), Related: wl, Reason: ReasonStarted, Note: note})
}

// ReasonStarted is the reason of the event on a Job that its admission
// started (events.admissions PerWorkload).
const ReasonStarted = "Started"

// deleteLegacyWorkload removes the Workload that agents before
// workload.JobWorkloadName named "job-" + the Job's name when that name is
// too long for a label value: such a Job could never start, and its
// Workload may hold capacity.
func (r *Reconciler) deleteLegacyWorkload(ctx context.Context, j pkgjobs.Job) error {
	job := j.Object()
	if _, ok := j.(batchjob.Job); !ok {
		return nil // only Jobs had legacy names
	}
	legacy := "job-" + job.GetName()
	if legacy == WorkloadName(job.GetName()) {
		return nil
	}
	var wl strata.Workload
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: legacy}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, job) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}))
}
