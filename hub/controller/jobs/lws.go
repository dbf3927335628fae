package jobs

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// ReasonNotDispatched says the hub does not dispatch a kind it serves.
const ReasonNotDispatched = "NotDispatched"

// LeaderWorkerSetNotice tells whoever submits a queue-labelled
// LeaderWorkerSet to the hub that the hub does not dispatch them (yet):
// without it the set would sit there silently, run by nothing.
type LeaderWorkerSetNotice struct {
	client   client.Client
	recorder events.EventRecorder
}

// NewLeaderWorkerSetNotice returns the notice's reconciler.
func NewLeaderWorkerSetNotice(c client.Client, recorder events.EventRecorder) *LeaderWorkerSetNotice {
	return &LeaderWorkerSetNotice{client: c, recorder: recorder}
}

// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch

// SetupWithManager watches the creation of queue-labelled LeaderWorkerSets.
func (r *LeaderWorkerSetNotice) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("leaderworkerset-notice").
		For(&lwsapi.LeaderWorkerSet{}, builder.WithPredicates(predicate.Funcs{
			// Sets listed when the hub starts are told too: one created
			// while it was starting comes only in that list.
			CreateFunc:  func(e event.CreateEvent) bool { return e.Object.GetLabels()[strata.QueueNameLabel] != "" },
			UpdateFunc:  func(e event.UpdateEvent) bool { return false },
			DeleteFunc:  func(e event.DeleteEvent) bool { return false },
			GenericFunc: func(e event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// Reconcile records a Warning event on the set.
func (r *LeaderWorkerSetNotice) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var l lwsapi.LeaderWorkerSet
	if err := r.client.Get(ctx, req.NamespacedName, &l); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.recorder.Eventf(&l, nil, corev1.EventTypeWarning, ReasonNotDispatched, "Dispatch",
		"The hub does not dispatch LeaderWorkerSets yet, and nothing runs it here: create it on a worker cluster, where strata-agent admits and places each group")
	return ctrl.Result{}, nil
}
