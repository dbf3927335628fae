// Package jobs is the agent's intake: for every batch/v1 Job labelled with
// strata.dev/queue-name it keeps a Workload, and says on it (and with an
// event on the Job) when the Job cannot be admitted as written.
package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Reasons of the Workload's Invalid condition (and of the Job's events).
const (
	ReasonValid                 = "Valid"
	ReasonInvalidJob            = "InvalidJob"
	ReasonQueueNotFound         = "ClusterQueueNotFound"
	ReasonNamespaceNotAllowed   = "NamespaceNotAllowed"
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

// WorkloadName is the name of a Job's Workload.
func WorkloadName(job string) string { return "job-" + job }

// SetupWithManager registers the reconciler: Jobs with the queue label,
// their Workloads, and every Job of a queue when the queue changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("job").
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		}))).
		Owns(&strata.Workload{}).
		Watches(&strata.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfQueue)).
		Complete(r)
}

func (r *Reconciler) jobsOfQueue(ctx context.Context, o client.Object) []ctrl.Request {
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.MatchingLabels{strata.QueueNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Jobs of a ClusterQueue", "clusterQueue", o.GetName())
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
	var job batchv1.Job
	if err := r.client.Get(ctx, req.NamespacedName, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteWorkload(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if job.Labels[strata.QueueNameLabel] == "" || !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if done, reason := finished(&job); done {
		return ctrl.Result{}, r.finish(ctx, &job, reason)
	}
	desired, errs := workload.FromJob(&job)
	desired.Name = WorkloadName(job.Name)
	errs = append(errs, workload.ValidatePodSets(desired.Spec.PodSets, field.NewPath("spec", "template"))...)
	reason, message := ReasonValid, ""
	if len(errs) > 0 {
		reason, message = ReasonInvalidJob, errs.ToAggregate().Error()
	} else {
		qReason, qMessage, err := r.checkQueue(ctx, &job)
		if err != nil {
			return ctrl.Result{}, err
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
				return ctrl.Result{}, err
			default:
				desired.Spec.Priority = ptr.To(pc.Value)
			}
		}
	}
	wl, err := r.apply(ctx, &job, desired, reason, message)
	if err != nil || wl == nil {
		return ctrl.Result{}, err
	}
	switch {
	case wl.Status.Admission == nil && job.Spec.Template.Labels[strata.WorkloadLabel] == wl.Name:
		// Evicted after it started: stop the Job until it is admitted again.
		return ctrl.Result{}, r.stop(ctx, &job, wl)
	case wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
	case ptr.Deref(job.Spec.Suspend, false) && job.Spec.Template.Labels[strata.WorkloadLabel] == wl.Name:
		// Started by us, suspended since: the user sent it back to the queue.
		return ctrl.Result{}, r.requeue(ctx, &job, wl)
	case ptr.Deref(job.Spec.Suspend, false):
		return ctrl.Result{}, r.start(ctx, &job, wl)
	}
	return ctrl.Result{}, nil
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

// restoreTemplate takes what start added out of the Job's pod template:
// the node labels of the flavors (all of them, as the admission may be gone),
// the gate and the labels.
func (r *Reconciler) restoreTemplate(ctx context.Context, job *batchv1.Job) {
	tmpl := &job.Spec.Template
	var flavors strata.ResourceFlavorList
	if err := r.client.List(ctx, &flavors); err == nil {
		for _, f := range flavors.Items {
			for k, v := range f.Spec.NodeLabels {
				if tmpl.Spec.NodeSelector[k] == v {
					delete(tmpl.Spec.NodeSelector, k)
				}
			}
		}
	}
	tmpl.Spec.SchedulingGates = slices.DeleteFunc(tmpl.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == strata.TopologySchedulingGate
	})
	for _, l := range []string{strata.WorkloadLabel, strata.PodSetLabel, strata.TASLabel} {
		delete(tmpl.Labels, l)
	}
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
		r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Stopped", "Evict", "The Workload was evicted; the Job waits in ClusterQueue %s again", wl.Spec.QueueName)
		return nil // the update brings the Job back for the second step
	}
	r.restoreTemplate(ctx, job)
	return r.client.Update(ctx, job)
}

// requeue takes back the admission of a Job the user suspended: the flavor's
// node selector and the gate leave the template, the Workload waits again.
func (r *Reconciler) requeue(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	r.restoreTemplate(ctx, job)
	if err := r.client.Update(ctx, job); err != nil {
		return err
	}
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
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Requeued", "Evict", "The Job was suspended; it waits in ClusterQueue %s again", wl.Spec.QueueName)
	return nil
}

// start applies an admission to the Job's pod template — the flavor's node
// labels and tolerations, the topology scheduling gate, the labels that tie
// pods to the workload — and unsuspends it.
func (r *Reconciler) start(ctx context.Context, job *batchv1.Job, wl *strata.Workload) error {
	tmpl := &job.Spec.Template
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name != workload.MainPodSet {
			continue
		}
		var flavor strata.ResourceFlavor
		if err := r.client.Get(ctx, types.NamespacedName{Name: psa.Flavor}, &flavor); err != nil {
			return fmt.Errorf("starting Job: flavor %q: %w", psa.Flavor, err)
		}
		if len(flavor.Spec.NodeLabels) > 0 && tmpl.Spec.NodeSelector == nil {
			tmpl.Spec.NodeSelector = map[string]string{}
		}
		for k, v := range flavor.Spec.NodeLabels {
			tmpl.Spec.NodeSelector[k] = v
		}
		for _, t := range flavor.Spec.Tolerations {
			if !slices.ContainsFunc(tmpl.Spec.Tolerations, func(x corev1.Toleration) bool { return x.MatchToleration(&t) }) {
				tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, t)
			}
		}
		if tmpl.Labels == nil {
			tmpl.Labels = map[string]string{}
		}
		tmpl.Labels[strata.WorkloadLabel] = wl.Name
		tmpl.Labels[strata.PodSetLabel] = psa.Name
		if psa.TopologyAssignment != nil {
			tmpl.Labels[strata.TASLabel] = "true"
			if !slices.ContainsFunc(tmpl.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == strata.TopologySchedulingGate }) {
				tmpl.Spec.SchedulingGates = append(tmpl.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate})
			}
		}
	}
	job.Spec.Suspend = ptr.To(false)
	if err := r.client.Update(ctx, job); err != nil {
		return fmt.Errorf("starting Job: %w", err)
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, "Started", "Admit", "Admitted by ClusterQueue %s", wl.Status.Admission.ClusterQueue)
	return nil
}

// checkQueue says whether the Job's ClusterQueue exists and admits its
// namespace; it returns an empty reason when it does.
func (r *Reconciler) checkQueue(ctx context.Context, job *batchv1.Job) (string, string, error) {
	name := job.Labels[strata.QueueNameLabel]
	var cq strata.ClusterQueue
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &cq); err != nil {
		if apierrors.IsNotFound(err) {
			return ReasonQueueNotFound, fmt.Sprintf("ClusterQueue %q does not exist; fix the %s label or ask an admin to create the queue", name, strata.QueueNameLabel), nil
		}
		return "", "", err
	}
	var ns corev1.Namespace
	if err := r.client.Get(ctx, types.NamespacedName{Name: job.Namespace}, &ns); err != nil {
		return "", "", err
	}
	if cq.Spec.NamespaceSelector == nil {
		return ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q admits no namespace (it has no namespaceSelector)", name), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	if err != nil {
		return ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q has an invalid namespaceSelector: %v", name, err), nil
	}
	if !sel.Matches(labels.Set(ns.Labels)) {
		return ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterQueue %q does not admit namespace %q (namespaceSelector %s)", name, job.Namespace, sel), nil
	}
	return "", "", nil
}

// apply creates the Workload or brings an unadmitted one up to date —
// spec and InvalidAnnotation in one write — then writes its Invalid
// condition and, when it changed to invalid, an event. A valid Workload
// that was never invalid has no Invalid condition: that saves a write per
// Job.
func (r *Reconciler) apply(ctx context.Context, job *batchv1.Job, desired *strata.Workload, reason, message string) (*strata.Workload, error) {
	invalid := reason != ReasonValid
	if invalid {
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, strata.InvalidAnnotation, reason)
	}
	var wl strata.Workload
	err := r.client.Get(ctx, client.ObjectKeyFromObject(desired), &wl)
	switch {
	case apierrors.IsNotFound(err):
		wl = *desired
		if err := controllerutil.SetControllerReference(job, &wl, r.client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.client.Create(ctx, &wl); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case wl.Status.Admission == nil && (!equality.Semantic.DeepEqual(wl.Spec, desired.Spec) || wl.Annotations[strata.InvalidAnnotation] != desired.Annotations[strata.InvalidAnnotation]):
		wl.Spec = desired.Spec
		if invalid {
			metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.InvalidAnnotation, reason)
		} else {
			delete(wl.Annotations, strata.InvalidAnnotation)
		}
		if err := r.client.Update(ctx, &wl); err != nil {
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
	if err := r.client.Status().Update(ctx, &wl); err != nil {
		return nil, err
	}
	if invalid && (was == nil || was.Message != message) {
		r.recorder.Eventf(job, &wl, corev1.EventTypeWarning, reason, "Validate", "%s", message)
	}
	return &wl, nil
}
