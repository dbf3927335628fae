package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/workload"
)

// PodsGone removes strata.PodsGoneFinalizer from a hub's copy Workload
// once it is deleted and none of its pods runs any more. A copy deleted on
// its worker (kubectl delete job, background) is gone at once while its
// pods terminate for their grace period; its Workload, held, tells the
// hub (which may not read pods) that the copy may still run, so that the
// workload is not placed elsewhere meanwhile (workload.PodsGoing). Until
// then the Workload names the pods that keep it
// (strata.GoingPodsAnnotation).
//
// A Workload deleted on its own while its job is there (not being
// deleted) is let go at once: the job's controller keeps its pods, and
// the job gets a new Workload.
type PodsGone struct {
	client client.Client
	// reader reads from the API server: a pod created a moment ago may be
	// missing from the cache, and the job's presence is read live.
	reader   client.Reader
	recorder events.EventRecorder
}

// NewPodsGone returns a PodsGone; reader reads past the cache.
func NewPodsGone(c client.Client, reader client.Reader, recorder events.EventRecorder) *PodsGone {
	return &PodsGone{client: c, reader: reader, recorder: recorder}
}

// heldForPods says whether wl is deleted and held by
// strata.PodsGoneFinalizer (whatever its labels say now: a Workload that
// has the finalizer is let go by it).
func heldForPods(wl *strata.Workload) bool {
	return !wl.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(wl, strata.PodsGoneFinalizer)
}

// +kubebuilder:rbac:groups=strata.dev,resources=workloads,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// SetupWithManager watches deleted copy Workloads held by the finalizer,
// and the end of the pods that carry a workload's label.
func (p *PodsGone) SetupWithManager(mgr ctrl.Manager) error {
	held := predicate.NewPredicateFuncs(func(o client.Object) bool {
		wl, ok := o.(*strata.Workload)
		return ok && heldForPods(wl)
	})
	// Only a pod's end matters: it deleted, ended (Succeeded or Failed),
	// or marked for deletion.
	ending := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetLabels()[strata.WorkloadLabel] != "" },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			pod, ok := e.ObjectNew.(*corev1.Pod)
			return ok && pod.Labels[strata.WorkloadLabel] != "" && (!pod.DeletionTimestamp.IsZero() || podEnded(pod))
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podsgone").
		For(&strata.Workload{}, builder.WithPredicates(held)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[strata.WorkloadLabel]}}}
		}), builder.WithPredicates(ending)).
		Complete(p)
}

// podEnded says whether a pod ended: nothing of it runs any more.
func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// goingPods returns the pods among pods that have not ended.
func goingPods(pods []corev1.Pod) []corev1.Pod {
	var going []corev1.Pod
	for i := range pods {
		if !podEnded(&pods[i]) {
			going = append(going, pods[i])
		}
	}
	return going
}

// Reconcile lets a held copy Workload go once its pods have, or at once
// when its job is still there.
func (p *PodsGone) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl strata.Workload
	if err := p.client.Get(ctx, req.NamespacedName, &wl); err != nil || !heldForPods(&wl) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	jobThere, err := p.jobThere(ctx, &wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !jobThere {
		var pods corev1.PodList
		if err := p.client.List(ctx, &pods, index.PodsOf(wl.Namespace, wl.Name)...); err != nil {
			return ctrl.Result{}, err
		}
		// Its own pods only: a job of the same name created since has
		// pods with the same label, which wait for this Workload to go.
		going := goingPods(workload.OwnedPods(&wl, pods.Items))
		if len(going) == 0 {
			// The cache may miss a pod created a moment ago: confirmed
			// from the API server before the Workload goes.
			if err := p.reader.List(ctx, &pods, client.InNamespace(wl.Namespace), client.MatchingLabels{strata.WorkloadLabel: wl.Name}); err != nil {
				return ctrl.Result{}, err
			}
			going = goingPods(workload.OwnedPods(&wl, pods.Items))
		}
		var errs []error
		if metav1.GetControllerOfNoCopy(&wl) == nil {
			// Orphaned, then deleted: nothing else stops its pods
			// (stopOrphaned's).
			going, errs = deleteOrphanedPods(ctx, p.client, p.recorder, &wl, going)
		}
		if len(going) > 0 {
			// Named for the hub; each pod's end brings it back, and it
			// looks again in a while all the same.
			if _, err := intake.ReportGoingPods(ctx, p.client, &wl, going); err != nil {
				errs = append(errs, err)
			}
			if err := errors.Join(errs...); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: intake.GoingPodsInterval}, nil
		}
	}
	before := wl.DeepCopy()
	if !controllerutil.RemoveFinalizer(&wl, strata.PodsGoneFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := p.client.Patch(ctx, &wl, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil // the newer Workload comes as an event; looked at again all the same
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// jobThere says whether the job that controls wl is still there and not
// being deleted, read from the API server: the Workload was then deleted
// on its own, and the job's controller, not its deletion, keeps its pods.
// A job of a kind the API server does not serve is gone.
func (p *PodsGone) jobThere(ctx context.Context, wl *strata.Workload) (bool, error) {
	owner := metav1.GetControllerOfNoCopy(wl)
	if owner == nil {
		return false, nil
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return false, nil
	}
	job := &metav1.PartialObjectMetadata{}
	job.SetGroupVersionKind(gv.WithKind(owner.Kind))
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}, job); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the job of copy %s: %w", wl.Name, err)
	}
	return job.UID == owner.UID && job.DeletionTimestamp.IsZero(), nil
}
