// Package jobs is the agent's intake: for every batch/v1 Job labelled with
// strata.dev/queue-name it keeps a Workload, and says on it (and with an
// event on the Job) when the Job cannot be admitted as written.
package jobs

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
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

// Reconciler keeps the Workload of each queue-labelled Job.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

// NewReconciler returns a Reconciler.
func NewReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, recorder: recorder}
}

// WorkloadName is the name of a Job's Workload, which is also the value
// of its pods' strata.dev/workload label: see workload.JobWorkloadName.
func WorkloadName(job string) string { return workload.JobWorkloadName(job) }

// Bounds of the API server on what the agent writes.
const (
	maxConditionMessage = 32768 // metav1.Condition.Message
	maxEventNote        = 1024  // events.k8s.io/v1 Event.Note
)

// SetupWithManager registers the reconciler: Jobs with the queue label,
// their Workloads, and every Job of a LocalQueue when the LocalQueue or
// its ClusterQueue changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("job").
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Watches(&batchv1.Job{}, jobHandler(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		}))).
		Watches(&strata.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &batchv1.Job{}, handler.OnlyControllerOwner())).
		// Only a queue's creation, deletion or spec matters to its Jobs'
		// validity; the scheduler writes its status up to once a second,
		// and reconciling every Job of the queue each time would bury the
		// events that matter under thousands that do not.
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfClusterQueue), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// The same for a LocalQueue: its status changes with every
		// admission of its workloads.
		Watches(&strata.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfLocalQueue), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A namespace's labels or a new PriorityClass can clear the
		// Invalid condition of Jobs that wait for them.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			return r.invalidJobs(ctx, ReasonNamespaceNotAllowed, func(wl *strata.Workload) bool { return wl.Namespace == o.GetName() }, client.InNamespace(o.GetName()))
		})).
		Watches(&schedulingv1.PriorityClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			return r.invalidJobs(ctx, ReasonPriorityClassNotFound, func(wl *strata.Workload) bool { return wl.Spec.PriorityClassName == o.GetName() })
		})).
		Complete(r)
}

// jobHandler enqueues a Job on its events. The controller's priority queue
// puts the Jobs listed when the agent starts behind every later event, which
// would starve the Jobs submitted while the agent was away behind the
// activity of the ones it admits meanwhile. Only the listed Jobs with
// nothing to do for a while — finished, or running as started — wait
// behind; the ones waiting for their Workload, admission or start do not.
func jobHandler() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], initial bool) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
		job, isJob := o.(*batchv1.Job)
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
func settled(job *batchv1.Job) bool {
	if done, _ := finished(job); done {
		return true
	}
	return !ptr.Deref(job.Spec.Suspend, false) && job.Spec.Template.Labels[strata.WorkloadLabel] != ""
}

// invalidJobs returns the Jobs whose Workloads are marked invalid for
// reason and match.
func (r *Reconciler) invalidJobs(ctx context.Context, reason string, match func(*strata.Workload) bool, opts ...client.ListOption) []ctrl.Request {
	var wls strata.WorkloadList
	if err := r.client.List(ctx, &wls, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Workloads marked invalid", "reason", reason)
		return nil
	}
	var out []ctrl.Request
	for i := range wls.Items {
		wl := &wls.Items[i]
		owner := metav1.GetControllerOf(wl)
		if wl.Annotations[strata.InvalidAnnotation] != reason || owner == nil || owner.Kind != "Job" || !match(wl) {
			continue
		}
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}})
	}
	return out
}

// jobsOfClusterQueue returns the Jobs of every LocalQueue that points at
// a ClusterQueue.
func (r *Reconciler) jobsOfClusterQueue(ctx context.Context, o client.Object) []ctrl.Request {
	var lqs strata.LocalQueueList
	if err := r.client.List(ctx, &lqs, client.MatchingFields{index.LocalQueueClusterQueue: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the LocalQueues of a ClusterQueue", "clusterQueue", o.GetName())
		return nil
	}
	var out []ctrl.Request
	for i := range lqs.Items {
		out = append(out, r.jobsOfLocalQueue(ctx, &lqs.Items[i])...)
	}
	return out
}

// jobsOfLocalQueue returns the Jobs labelled with a LocalQueue's name in
// its namespace.
func (r *Reconciler) jobsOfLocalQueue(ctx context.Context, o client.Object) []ctrl.Request {
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(o.GetNamespace()), client.MatchingLabels{strata.QueueNameLabel: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Jobs of a LocalQueue", "localQueue", klog.KObj(o))
		return nil
	}
	out := make([]ctrl.Request, 0, len(jobs.Items))
	for _, j := range jobs.Items {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}})
	}
	return out
}

// Reconcile creates or updates the Workload of a Job and its Invalid
// condition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	err := r.reconcile(ctx, req)
	if superseded(err) {
		// The informer is behind the API server: the newer Job or
		// Workload that made this write fail comes as an event and
		// brings the Job back. Retrying now would only fail again, and
		// logging it would be noise.
		ctrl.LoggerFrom(ctx).V(2).Info("Acted on an outdated object; waiting for the newer one", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// superseded says whether a write failed only because the informer's copy
// was outdated: a conflict, or creating a Workload that exists already.
func superseded(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	var job batchv1.Job
	if err := r.client.Get(ctx, req.NamespacedName, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return r.deleteWorkload(ctx, req.NamespacedName)
		}
		return err
	}
	if job.Labels[strata.QueueNameLabel] == "" || !job.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.deleteLegacyWorkload(ctx, &job); err != nil {
		return err
	}
	if done, reason := finished(&job); done {
		return r.finish(ctx, &job, reason)
	}
	desired, errs := desiredWorkload(&job)
	reason, message := ReasonValid, ""
	if len(errs) > 0 {
		reason, message = ReasonInvalidJob, errs.ToAggregate().Error()
	} else {
		qReason, qMessage, err := r.checkQueue(ctx, &job)
		if err != nil {
			return err
		}
		if qReason != "" {
			reason, message = qReason, qMessage
		}
		if name := desired.Spec.PriorityClassName; name != "" && qReason == "" {
			var pc schedulingv1.PriorityClass
			switch err := r.client.Get(ctx, types.NamespacedName{Name: name}, &pc); {
			case apierrors.IsNotFound(err):
				reason, message = ReasonPriorityClassNotFound, fmt.Sprintf("PriorityClass %q does not exist", name)
			case err != nil:
				return err
			default:
				desired.Spec.Priority = ptr.To(pc.Value)
			}
		}
	}
	wl, err := r.apply(ctx, &job, desired, reason, message)
	if apierrors.IsInvalid(err) {
		return r.rejected(ctx, &job, err)
	}
	if err != nil || wl == nil {
		return err
	}
	switch nextStep(&job, wl) {
	case stepStop:
		return r.stop(ctx, &job, wl)
	case stepHold:
		return r.hold(ctx, &job, holdNote(wl))
	case stepRequeue:
		return r.requeue(ctx, &job, wl)
	case stepStart:
		return r.start(ctx, &job, wl)
	}
	return nil
}

// desiredWorkload builds the Workload of a Job and checks the Job. The
// Workload of an invalid Job has no topology requests: invalid ones could
// break the Workload schema, and the API server would then reject the
// Workload and with it the Invalid condition that tells the user what to
// fix. An invalid Workload is not admitted, so nothing is lost.
func desiredWorkload(job *batchv1.Job) (*strata.Workload, field.ErrorList) {
	desired, errs := workload.FromJob(job)
	errs = append(errs, workload.ValidatePodSets(desired.Spec.PodSets, field.NewPath("spec", "template"))...)
	if len(errs) == 0 {
		// What the checks above let through must fit the schema too; this
		// catches a rule they missed.
		errs = workload.ValidateSpec(&desired.Spec, field.NewPath("workload", "spec"))
	}
	if len(errs) > 0 {
		workload.DropTopologyRequests(&desired.Spec)
	}
	return desired, errs
}

// step is what Reconcile does to a Job once its Workload is up to date.
type step int

const (
	stepNone    step = iota
	stepStop         // the Workload lost the admission the Job was started with
	stepHold         // the Job runs but was not started by Strata: suspend it
	stepRequeue      // the user suspended a started Job: take its admission back
	stepStart        // the suspended Job is admitted: start it
)

// nextStep decides what to do with a Job that has not finished, given its
// Workload. A Job runs only once start has applied an admission to it —
// its template then carries the Workload's label — and only while the
// Workload keeps that admission.
func nextStep(job *batchv1.Job, wl *strata.Workload) step {
	suspended := ptr.Deref(job.Spec.Suspend, false)
	started := job.Spec.Template.Labels[strata.WorkloadLabel] == wl.Name
	admitted := wl.Status.Admission != nil
	switch {
	case started && !admitted:
		return stepStop
	case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
		return stepNone
	case !suspended && !started:
		return stepHold
	case !admitted:
		return stepNone
	case suspended && started && !startedWith(job, wl):
		// Being stopped (evicted, the template not restored yet) and
		// admitted again meanwhile: finish stopping, then start anew.
		return stepStop
	case suspended && started:
		return stepRequeue
	case suspended:
		return stepStart
	}
	return stepNone
}

// startedWith says whether the Job was started with the admission wl
// holds. When either is unknown (started by an agent that did not record
// it) it counts as the same.
func startedWith(job *batchv1.Job, wl *strata.Workload) bool {
	added, ok, _ := recordedAdded(job)
	id := admissionID(wl)
	return !ok || added.Admission == "" || id == "" || added.Admission == id
}

// rejected reports on the Job that the API server rejected its Workload —
// a Workload rule the agent's checks missed — and stops retrying: only a
// change to the Job can help. A Job that runs is suspended, since it
// cannot be admitted.
func (r *Reconciler) rejected(ctx context.Context, job *batchv1.Job, err error) error {
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidJob, "Validate", "%s",
		truncate("The API server rejected the Job's Workload; change the Job: "+err.Error(), maxEventNote))
	if !ptr.Deref(job.Spec.Suspend, false) {
		if herr := r.hold(ctx, job, "The Job cannot be admitted: the API server rejected its Workload; it stays suspended until the Job is changed"); herr != nil {
			return herr
		}
	}
	return reconcile.TerminalError(err)
}

// truncate cuts s to at most n bytes, on a character boundary, marking the
// cut.
func truncate(s string, n int) string {
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

// finished says whether the Job completed or failed, and how.
func finished(job *batchv1.Job) (bool, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "Succeeded"
		case batchv1.JobFailed:
			return true, "Failed"
		}
	}
	return false, ""
}

// finish marks the Workload Finished; the capacity cache then releases its
// usage.
func (r *Reconciler) finish(ctx context.Context, job *batchv1.Job, reason string) error {
	var wl strata.Workload
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: WorkloadName(job.Name)}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, job) {
		return nil // an earlier Job's: this one's end says nothing about it
	}
	if !meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: "the Job " + strings.ToLower(reason),
	}) {
		return nil
	}
	return r.client.Status().Update(ctx, &wl)
}

// deleteWorkload removes the Workload of a deleted Job at once (garbage
// collection would, later), which releases its capacity.
func (r *Reconciler) deleteWorkload(ctx context.Context, job types.NamespacedName) error {
	var wl strata.Workload
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: WorkloadName(job.Name)}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(&wl)
	if owner == nil || owner.Kind != "Job" || owner.Name != job.Name {
		return nil
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}))
}

// deleteStaleWorkload removes the Workload at the Job's Workload name that
// another Job of that name controls (or did, until it was orphaned), with
// a precondition on its UID: only that object goes, never a Workload
// created meanwhile. A Workload controlled by anything but a Job is not
// the agent's to remove: the Job cannot get a Workload, and says so.
func (r *Reconciler) deleteStaleWorkload(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	if owner := metav1.GetControllerOfNoCopy(wl); owner != nil && (owner.Kind != "Job" || !strings.HasPrefix(owner.APIVersion, batchv1.GroupName+"/")) {
		err := fmt.Errorf("the Workload %s is controlled by %s %s, not by this Job; rename the Job or remove the Workload", wl.Name, owner.Kind, owner.Name)
		r.recorder.Eventf(job, nil, corev1.EventTypeWarning, "WorkloadTaken", "Create", "%s", truncate(err.Error(), maxEventNote))
		return reconcile.TerminalError(err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting the Workload of an earlier Job of the same name", "workload", klog.KObj(wl), "uid", wl.UID)
	return client.IgnoreNotFound(r.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}))
}

// deleteLegacyWorkload removes the Workload that agents before
// workload.JobWorkloadName named "job-" + the Job's name when that name is
// too long for a label value: such a Job could never start, and its
// Workload may hold capacity.
func (r *Reconciler) deleteLegacyWorkload(ctx context.Context, job *batchv1.Job) error {
	legacy := "job-" + job.Name
	if legacy == WorkloadName(job.Name) {
		return nil
	}
	var wl strata.Workload
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: legacy}, &wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&wl, job) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, &wl, client.Preconditions{UID: &wl.UID}))
}

// takeBackAdmission removes from the Job what start added: exactly what
// its AddedByAdmissionAnnotation records. A Job started by an older agent
// has no record; then the node selector entries equal to some flavor's node
// labels go, as the admission may be gone.
func (r *Reconciler) takeBackAdmission(ctx context.Context, job *batchv1.Job) {
	added, ok, err := recordedAdded(job)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Restoring the Job's pod template without a record of what its admission added", "job", klog.KObj(job))
	}
	if !ok {
		added = r.flavorNodeLabels(ctx, &job.Spec.Template)
	}
	restoreTemplate(&job.Spec.Template, added)
	delete(job.Annotations, AddedByAdmissionAnnotation)
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
func (r *Reconciler) stop(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	if !ptr.Deref(job.Spec.Suspend, false) {
		job.Spec.Suspend = ptr.To(true)
		if err := r.client.Update(ctx, job); err != nil {
			return err
		}
		r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Stopped", "Evict", "The Workload was evicted; the Job waits in LocalQueue %s again", wl.Spec.QueueName)
		return nil // the update brings the Job back for the second step
	}
	if !templateMutable(job) {
		return nil // the Job controller's status update brings it back
	}
	r.takeBackAdmission(ctx, job)
	return r.client.Update(ctx, job)
}

// templateMutable says whether the API server lets the Job's pod template
// change: only while it is suspended and the Job controller has cleared
// its start time. Until then a template update fails; the Job controller's
// status update that clears the start time triggers the next reconcile.
func templateMutable(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false) && job.Status.StartTime == nil
}

// hold suspends a Job that runs although Strata did not start it — its
// spec.suspend was removed, its queue label came after its creation, or it
// was created before strata-agent was installed — so that it waits for
// admission like every other Job. When the Workload is already admitted,
// the next reconcile starts the Job with that admission.
func (r *Reconciler) hold(ctx context.Context, job *batchv1.Job, note string) error {
	job.Spec.Suspend = ptr.To(true)
	if err := r.client.Update(ctx, job); err != nil {
		return fmt.Errorf("suspending a Job that has not been admitted: %w", err)
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, "Suspended", "Suspend", "%s", note)
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
func (r *Reconciler) requeue(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	wl.Status.Admission = nil
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Suspended", Message: "the Job was suspended; it waits in its queue again",
	})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "JobSuspended", Message: "the Job was suspended after it had been admitted",
	})
	if err := r.client.Status().Update(ctx, wl); err != nil {
		return err
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Requeued", "Evict", "The Job was suspended; it waits in LocalQueue %s again", wl.Spec.QueueName)
	if !templateMutable(job) {
		return nil // stop restores the template once the Job controller has caught up
	}
	r.takeBackAdmission(ctx, job)
	return r.client.Update(ctx, job)
}

// start applies an admission to the Job's pod template — the flavor's node
// labels and tolerations, the topology scheduling gate, the labels that tie
// pods to the workload — records what it added, and unsuspends the Job.
func (r *Reconciler) start(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	if !templateMutable(job) {
		return nil // suspended, but the Job controller has not caught up yet
	}
	if _, ok, _ := recordedAdded(job); ok {
		// Left from an admission that was not fully taken back.
		r.takeBackAdmission(ctx, job)
	}
	var added addedByAdmission
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name != workload.MainPodSet {
			continue
		}
		var flavor strata.ResourceFlavor
		if err := r.client.Get(ctx, types.NamespacedName{Name: psa.Flavor}, &flavor); err != nil {
			return fmt.Errorf("starting Job: flavor %q: %w", psa.Flavor, err)
		}
		added = admitTemplate(&job.Spec.Template, &flavor, wl.Name, psa.Name, psa.TopologyAssignment != nil)
	}
	added.Admission = admissionID(wl)
	if err := recordAdded(job, added); err != nil {
		return err
	}
	job.Spec.Suspend = ptr.To(false)
	if err := r.client.Update(ctx, job); err != nil {
		return fmt.Errorf("starting Job: %w", err)
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Started", "Admit", "Admitted by ClusterQueue %s", wl.Status.Admission.ClusterQueue)
	return nil
}

// checkQueue says whether the Job's LocalQueue exists, and its
// ClusterQueue, and whether that admits the Job's namespace; it returns an
// empty reason when it does.
func (r *Reconciler) checkQueue(ctx context.Context, job *batchv1.Job) (string, string, error) {
	name := job.Labels[strata.QueueNameLabel]
	lq := &strata.LocalQueue{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", "", err
		}
		lq = nil
	}
	var cq *strata.ClusterQueue
	if lq != nil {
		cq = &strata.ClusterQueue{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: lq.Spec.ClusterQueue}, cq); err != nil {
			if !apierrors.IsNotFound(err) {
				return "", "", err
			}
			cq = nil
		}
	}
	var ns corev1.Namespace
	if err := r.client.Get(ctx, types.NamespacedName{Name: job.Namespace}, &ns); err != nil {
		return "", "", err
	}
	res := queue.Resolve(job.Namespace, name, ns.Labels, lq, cq)
	return res.Reason, res.Message, nil
}

// apply creates the Workload or brings an unadmitted one up to date —
// spec and InvalidAnnotation in one write, with the dispatch labels and
// pinned flavor of a hub's copy, which an admitted one gets too — then writes its Invalid
// condition and, when it changed to invalid, an event. A valid Workload
// that was never invalid has no Invalid condition: that saves a write per
// Job.
func (r *Reconciler) apply(ctx context.Context, job *batchv1.Job, desired *strata.Workload, reason, message string) (*strata.Workload, error) {
	invalid := reason != ReasonValid
	message = truncate(message, maxConditionMessage)
	if invalid {
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, strata.InvalidAnnotation, reason)
	}
	var wl strata.Workload
	err := r.client.Get(ctx, client.ObjectKeyFromObject(desired), &wl)
	replacing := false
	if err == nil && !metav1.IsControlledBy(&wl, job) {
		// An earlier Job of the same name left it (deleted, garbage
		// collection not done yet, or orphaned): nothing of it is this
		// Job's, least of all its admission.
		if err := r.deleteStaleWorkload(ctx, job, &wl); err != nil {
			return nil, err
		}
		replacing = true
		err = apierrors.NewNotFound(strata.GroupVersion.WithResource("workloads").GroupResource(), wl.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		wl = *desired
		if err := controllerutil.SetControllerReference(job, &wl, r.client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.client.Create(ctx, &wl); err != nil {
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
		if wl.Status.Admission == nil && (!equality.Semantic.DeepEqual(wl.Spec, desired.Spec) || wl.Annotations[strata.InvalidAnnotation] != desired.Annotations[strata.InvalidAnnotation]) {
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
		if update {
			if err := r.client.Update(ctx, &wl); err != nil {
				return nil, err
			}
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
	if err := r.client.Status().Update(ctx, &wl); err != nil {
		return nil, err
	}
	if invalid && (was == nil || was.Message != message) {
		r.recorder.Eventf(job, &wl, corev1.EventTypeWarning, reason, "Validate", "%s", truncate(message, maxEventNote))
	}
	return &wl, nil
}
