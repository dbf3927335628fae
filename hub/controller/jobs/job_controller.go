// Package jobs is the hub's intake: for every job of a served kind (a
// batch/v1 Job, a JobSet, an MPIJob, a LeaderWorkerSet) labelled with
// strata.dev/queue-name it keeps a hub Workload, checked by the same code
// and with the same reasons as on the agents. The kind's own controller
// never runs such a job on the hub: the hub chart's admission policies set
// its spec.managedBy to strata.dev/hub when it is created (a JobSet's
// controller need not even be installed there, only its CRD), or, for a
// LeaderWorkerSet (which has no managedBy), gate its pod templates; a job
// that escaped the policy is marked invalid, not dispatched.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	pkgjobs "strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/tas"
)

// ReasonNotManagedByHub says the job is not held off its kind's own
// controller on the hub.
const ReasonNotManagedByHub = "NotManagedByHub"

// Reconciler keeps the hub Workload of each queue-labelled job of one
// kind.
type Reconciler struct {
	kind   pkgjobs.Kind
	client client.Client
	intake *intake.Keeper
}

// NewReconciler returns a Reconciler of kind's jobs.
func NewReconciler(kind pkgjobs.Kind, c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{kind: kind, client: c, intake: intake.New(kind, c, recorder, managedByHub).WithOrphans().WithLeanWorkloads().
		WithFinalizer(strata.CopyGoneFinalizer)}
}

// WithTAS applies the topology rules of the hub's configuration to the
// jobs' pod-set annotations (tas.Options.PartialSlices).
func (r *Reconciler) WithTAS(opts tas.Options) *Reconciler {
	r.intake.WithTAS(opts)
	return r
}

// managedByHub checks that the kind's controller on the hub leaves the job
// alone.
func managedByHub(j pkgjobs.Job) (string, string) {
	if j.ManagedBy() == strata.ManagedByController {
		return "", ""
	}
	kind := j.Kind().GroupVersionKind().Kind
	if _, grouped := j.Kind().(pkgjobs.GroupedWorkloads); grouped {
		// A LeaderWorkerSet: no spec.managedBy; the gate holds its pods.
		return ReasonNotManagedByHub, fmt.Sprintf("its pod templates lack the scheduling gate %s: a %s controller on the hub would run this %s here; "+
			"install the strata-hub chart's admission policies (they gate the templates on creation) and create the %s again",
			strata.TopologySchedulingGate, kind, kind, kind)
	}
	return ReasonNotManagedByHub, fmt.Sprintf("spec.managedBy is %q, not %q: the hub's own %s controller would run this %s here; "+
		"install the strata-hub chart's admission policies (they set spec.managedBy on creation) and create the %s again",
		j.ManagedBy(), strata.ManagedByController, kind, kind, kind)
}

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=strata.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=strata.dev,resources=localqueues;clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=strata.dev,resources=workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	name := "hub-job"
	if gvk := r.kind.GroupVersionKind(); gvk.Group != "batch" {
		name = "hub-" + gvk.Group
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		For(r.kind.NewObject(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[strata.QueueNameLabel] != ""
		})))
	return r.intake.Watch(mgr, b).Complete(r)
}

// Reconcile keeps the job's hub Workload: created and checked while the
// job runs, Finished once it finished (its status comes from the worker's
// copy), deleted with the job.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, r.intake.DeleteWorkload(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		// Being deleted (foreground, or --cascade=orphan, which would leave
		// the Workload and so the copy behind): its copy goes now.
		return ctrl.Result{}, r.intake.DeleteWorkload(ctx, req.NamespacedName)
	}
	if obj.GetLabels()[strata.QueueNameLabel] == "" {
		return ctrl.Result{}, nil
	}
	job, _ := r.kind.Adapt(obj)
	if done, reason := job.Finished(); done {
		return ctrl.Result{}, r.intake.Finish(ctx, job, reason)
	}
	_, err := r.intake.Sync(ctx, job)
	if intake.Superseded(err) {
		return ctrl.Result{}, nil // the newer object comes as an event
	}
	if errors.Is(err, intake.ErrEarlierWorkloadGoing) {
		// Its deletion event brings the job back, unless it was orphaned.
		return ctrl.Result{RequeueAfter: earlierWorkloadRetry}, nil
	}
	return ctrl.Result{}, err
}

// earlierWorkloadRetry is how often a job whose Workload name an earlier
// job's Workload, being deleted, still holds looks again.
const earlierWorkloadRetry = 10 * time.Second
