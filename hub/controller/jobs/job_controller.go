// Package jobs is the hub's intake: for every batch/v1 Job labelled with
// strata.dev/queue-name it keeps a hub Workload, checked by the same code
// and with the same reasons as on the agents. The hub's own Job
// controller never runs such a Job: the hub chart's admission policy sets
// its spec.managedBy to strata.dev/hub when it is created; a Job that
// escaped the policy is marked invalid, not dispatched.
package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	pkgjobs "strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
)

// ReasonNotManagedByHub says the Job is not held off the hub's Job controller.
const ReasonNotManagedByHub = "NotManagedByHub"

// Reconciler keeps the hub Workload of each queue-labelled Job.
type Reconciler struct {
	client client.Client
	intake *intake.Keeper
}

// NewReconciler returns a Reconciler.
func NewReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, intake: intake.New(batchjob.Kind, c, recorder, managedByHub).WithOrphans()}
}

// managedByHub checks that the hub's Job controller leaves the Job alone.
func managedByHub(j pkgjobs.Job) (string, string) {
	job := j.(batchjob.Job)
	if ptr.Deref(job.Spec.ManagedBy, "") == strata.ManagedByController {
		return "", ""
	}
	return ReasonNotManagedByHub, fmt.Sprintf("spec.managedBy is %q, not %q: the hub's own Job controller would run this Job here; "+
		"install the strata-hub chart's admission policy (it sets spec.managedBy on creation) and create the Job again",
		ptr.Deref(job.Spec.ManagedBy, ""), strata.ManagedByController)
}

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=localqueues;clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("hub-job").
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		})))
	return r.intake.Watch(mgr, b).Complete(r)
}

// Reconcile keeps the Job's hub Workload: created and checked while the
// Job runs, Finished once the Job finished (its status comes from the
// worker's copy), deleted with the Job.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job batchv1.Job
	if err := r.client.Get(ctx, req.NamespacedName, &job); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, r.intake.DeleteWorkload(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !job.DeletionTimestamp.IsZero() {
		// Being deleted (foreground, or --cascade=orphan, which would leave
		// the Workload and so the copy behind): its copy goes now.
		return ctrl.Result{}, r.intake.DeleteWorkload(ctx, req.NamespacedName)
	}
	if job.Labels[strata.QueueNameLabel] == "" {
		return ctrl.Result{}, nil
	}
	if done, reason := intake.Finished(&job); done {
		return ctrl.Result{}, r.intake.Finish(ctx, batchjob.Adapt(&job), reason)
	}
	_, err := r.intake.Sync(ctx, batchjob.Adapt(&job))
	if intake.Superseded(err) {
		return ctrl.Result{}, nil // the newer object comes as an event
	}
	return ctrl.Result{}, err
}
