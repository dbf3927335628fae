package copies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Reasons of a worker's Dispatching condition and of refusals the hub
// finds itself.
const (
	ReasonDispatching       = "Dispatching"
	ReasonNamespaceNotFound = fleet.ReasonNamespaceNotFound
	ReasonForbidden         = "Forbidden"
	ReasonNameTaken         = "NameTaken"
	// ReasonQuotaExceeded: a ResourceQuota of the worker refused the copy.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonAdmissionDenied: an admission webhook or policy of the worker
	// refused the copy.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonRefused: the worker's API server refused the copy otherwise
	// (a 4xx answer).
	ReasonRefused = "Refused"
	// ReasonNotCreated: the copy could not be created (the worker failed
	// or did not answer) within the admission timeout from the dispatch.
	ReasonNotCreated = "CopyNotCreated"
	// ReasonNamespaceNotOnboardable: onboarding would create a LocalQueue
	// in a worker namespace it did not make and no administrator opted in.
	ReasonNamespaceNotOnboardable = "NamespaceNotOnboardable"
	// ReasonNamespaceTerminating: the worker namespace is being deleted.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonInvalid: the worker's API server found the copy invalid.
	ReasonInvalid = "Invalid"
	// ReasonWorkerClusterNotFound: the WorkerCluster of the dispatch is
	// gone.
	ReasonWorkerClusterNotFound = "WorkerClusterNotFound"
)

// createRefusal says whether an error creating a copy is the worker's
// refusal — for a reason to name, then the hub places the workload
// elsewhere — or a failure worth retrying (reason ""): the worker's
// server errors, throttling, timeouts, a connection that failed. Missing
// namespaces, taken names and invalid copies are handled before.
func createRefusal(err error) string {
	status, ok := err.(apierrors.APIStatus)
	if !ok || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) {
		return ""
	}
	msg := status.Status().Message
	switch code := status.Status().Code; {
	case code == 403 && (apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) || strings.Contains(msg, "because it is being terminated")):
		return ReasonNamespaceTerminating
	case code == 403 && strings.Contains(msg, "exceeded quota"):
		return ReasonQuotaExceeded
	case code == 403 && (strings.Contains(msg, "admission webhook") || strings.Contains(msg, "ValidatingAdmissionPolicy")):
		return ReasonAdmissionDenied
	case code == 403:
		return ReasonForbidden
	case code >= 400 && code < 500:
		return ReasonRefused
	}
	return ""
}

// createCopy sends the copy of the current dispatch to its worker, after
// onboarding its namespace there when the WorkerCluster asks for it.
func (r *Reconciler) createCopy(ctx context.Context, s *scope) (ctrl.Result, error) {
	wl, hubJob, cluster, flavor, gen, key, jobRef := s.wl, s.hubJob, s.cluster, s.flavor, s.gen, s.dispatch, s.job
	if at, sent := r.memory.createdAt(key); sent {
		if wait := at.Add(creationGrace).Sub(r.clock.Now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil // the informer has not shown it yet
		}
	}
	wc := s.wc
	if wc == nil {
		return ctrl.Result{}, r.refuse(ctx, s, outcome{result: strata.PlacementUnreachable, reason: dispatch.ReasonRejected, cause: ReasonWorkerClusterNotFound,
			message: fmt.Sprintf("WorkerCluster %s no longer exists", cluster)})
	}
	queueName := wc.Spec.LocalQueueName
	if queueName == "" {
		queueName = hubJob.Object().GetLabels()[strata.QueueNameLabel]
	}
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
	}
	if s.copyMayExist {
		// Sent before and not in the informer: on the same cluster, or
		// the worker's name now reaches another, where a new copy would
		// run beside the first.
		if err := r.fleet.SameCluster(ctx, cluster); err != nil {
			ctrl.LoggerFrom(ctx).Info("Not sending the copy again: the worker's identity could not be confirmed", "cluster", cluster, "error", err.Error())
			return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
		}
	}
	if ob := wc.Spec.Onboarding; ob != nil {
		if err := r.onboard(ctx, c, cluster, hubJob.Object().GetNamespace(), queueName, ob.ClusterQueue); err != nil {
			if reason, message := onboardRefusal(cluster, err); reason != "" {
				return ctrl.Result{}, r.workerRefused(ctx, s, reason, message)
			}
			return ctrl.Result{}, err
		}
	}
	// The placement the hub reserved for this dispatch, so that the agent
	// takes the capacity where the hub counted it (a hub restarted since
	// the decision has the one it rebuilt).
	var hint string
	if reserved := r.fleet.Hint(key); reserved != nil {
		if hint, err = workload.EncodeTopologyHints(wl.Spec.PodSets, reserved); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Encoding the topology hint; the copy goes without one", "cluster", cluster)
			hint = ""
		}
	}
	// The informer's job is lean (kinds.HubTransform): the copy is made of
	// the job as the API server has it, whole. At least as new as the
	// informer's is what the API server's watch cache serves, without
	// reading etcd (a GET with a resourceVersion).
	whole, err := dispatch.HubJob(ctx, r.reader, wl, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: hubJob.Object().GetResourceVersion()}})
	if err != nil {
		return ctrl.Result{}, err
	}
	if whole == nil {
		return ctrl.Result{RequeueAfter: informerBehindRetry}, nil // gone meanwhile: its deletion comes as an event
	}
	signKey, err := r.signing.Get(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	cp := dispatch.NewCopy(whole, wl, r.fleet.Origin(), queueName, flavor, gen, hint).Object()
	dispatch.Sign(signKey, jobRef.kind.GroupVersionKind().GroupKind(), cp)
	err = c.Create(ctx, cp)
	if apierrors.IsNotFound(err) && r.cfg.Dispatch.CreateNamespaces {
		if nsErr := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cp.GetNamespace()}}); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return ctrl.Result{}, r.workerRefused(ctx, s, ReasonForbidden, fmt.Sprintf("creating namespace %s on %s: %v", cp.GetNamespace(), cluster, nsErr))
		}
		err = c.Create(ctx, cp)
	}
	if err == nil || apierrors.IsAlreadyExists(err) || fleet.RequestOutcome(err) == fleet.Unknown {
		r.memory.noteSent(key)
	}
	if err != nil && fleet.RequestOutcome(err) == fleet.Unknown {
		r.memory.noteUnknownCreate(key)
	}
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing := jobRef.kind.NewObject()
		if getErr := c.Get(ctx, client.ObjectKeyFromObject(cp), existing); getErr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(getErr)
		}
		if uid, g, ok := dispatch.CopyOf(existing); ok && uid == wl.UID && g == gen {
			if existing.GetLabels()[strata.OriginLabel] == r.fleet.Origin() {
				break // created before, by this hub: the informer is behind
			}
			// Created before, its origin label taken off there since: the
			// informer, which selects on it, never shows it.
			return ctrl.Result{}, r.refuse(ctx, s, relabelledOutcome(cluster))
		}
		if existing.GetLabels()[strata.OriginLabel] == r.fleet.Origin() && Made(signKey, jobRef.kind.GroupVersionKind().GroupKind(), existing, wl) {
			// A stale copy of ours: it and its pods go before this one is
			// created, as for actRemoveStale.
			return ctrl.Result{}, r.removeCopy(ctx, cluster, existing, true)
		}
		return ctrl.Result{}, r.workerRefused(ctx, s, ReasonNameTaken,
			fmt.Sprintf("%s exists on %s and is not a copy from this hub", jobRef, cluster))
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.workerRefused(ctx, s, ReasonNamespaceNotFound,
			fmt.Sprintf("namespace %s does not exist on %s (the hub creates it only with dispatch.createNamespaces)", cp.GetNamespace(), cluster))
	case apierrors.IsInvalid(err):
		return ctrl.Result{}, r.refuse(ctx, s, outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonInvalid,
			message: fmt.Sprintf("the worker's API server rejected the copy: %v", err)})
	case fleet.RequestOutcome(err) == fleet.NotSent && !s.copyMayExist:
		// Provably nothing reached the worker, now or before: no copy can
		// run there.
		return ctrl.Result{}, r.abandon(ctx, s, ReasonCopyNotSent, fmt.Sprintf(
			"creating the copy on %s never reached it (%v): no copy can run there; placing it again at once", cluster, err))
	default:
		switch reason := createRefusal(err); reason {
		case ReasonForbidden:
			return ctrl.Result{}, r.workerRefused(ctx, s, reason,
				fmt.Sprintf("the hub's credential may not create %s in namespace %s on %s: %v", jobs.Resource(jobRef.kind), cp.GetNamespace(), cluster, err))
		case ReasonNamespaceTerminating:
			return ctrl.Result{}, r.workerRefused(ctx, s, reason,
				fmt.Sprintf("namespace %s is being deleted on %s: %v", cp.GetNamespace(), cluster, err))
		case ReasonQuotaExceeded, ReasonAdmissionDenied, ReasonRefused:
			return ctrl.Result{}, r.workerRefused(ctx, s, reason,
				fmt.Sprintf("%s refused the copy: %v", cluster, err))
		}
		// The admission timeout counts from the dispatch, also while no
		// copy could be created: the Workload must not say "dispatched"
		// for ever while the worker fails.
		if p := wl.Status.Placement; p != nil && p.DispatchTime != nil {
			if timeout := r.cfg.Dispatch.AdmissionTimeout.Duration; r.clock.Since(p.DispatchTime.Time) >= timeout {
				return ctrl.Result{}, r.refuse(ctx, s, outcome{result: strata.PlacementTimedOut, reason: dispatch.ReasonRejected, cause: ReasonNotCreated,
					message: fmt.Sprintf("the copy could not be created on %s within the admission timeout of %s: %v; placing it again", cluster, timeout, err)})
			}
		}
		if fleet.RequestOutcome(err) == fleet.Unknown {
			// It may exist: say so, and look again; it is placed elsewhere
			// only once the worker answers, or its fencing Lease expired.
			s.change(func(ws *strata.WorkloadStatus) bool { return setCreateUnknown(ws, cluster, flavor, err) })
			return ctrl.Result{RequeueAfter: notConnectedRetry}, nil
		}
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created a copy", "cluster", cluster, "job", jobRef.String(), "dispatch", key)
	r.fleet.ForgetHint(key)
	r.memory.noteCreated(key, r.clock.Now())
	return ctrl.Result{RequeueAfter: r.cfg.Dispatch.AdmissionTimeout.Duration}, nil
}

// onboardTTL is how long a namespace and LocalQueue the hub made sure of
// on a worker are taken to still be there: one deleted meanwhile is made
// again at the next copy after that.
const onboardTTL = time.Minute

// onboard makes sure namespace ns and its LocalQueue queue (pointing at
// the worker's ClusterQueue cq) exist on a worker, creating what is
// missing; what exists is left as it is. A LocalQueue is created only in
// a namespace this hub's onboarding created (strata.dev/onboarded-by) or
// that the worker's administrators opted in (strata.dev/hub-onboarding:
// allowed), never in the agent's own namespace. It needs create, and get
// of namespaces and LocalQueues.
func (r *Reconciler) onboard(ctx context.Context, c client.Client, cluster, ns, queue, cq string) error {
	key := cluster + "/" + ns + "/" + queue
	if at, ok := r.memory.onboardedAt(key); ok && r.clock.Since(at) < onboardTTL {
		return nil
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: queue}, &strata.LocalQueue{}); err == nil {
		r.memory.noteOnboarded(key, r.clock.Now())
		return nil // there already: nothing to make
	} else if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("reading LocalQueue %s/%s on %s: %w", ns, queue, cluster, err)
	}
	if ns == r.cfg.Dispatch.WorkerNamespace {
		return &notOnboardable{fmt.Sprintf("namespace %s on %s is the agent's own: the hub never creates a LocalQueue there", ns, cluster)}
	}
	labels := map[string]string{strata.OnboardedByLabel: r.fleet.Origin()}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
	if apierrors.IsAlreadyExists(err) {
		var existing corev1.Namespace
		if err := c.Get(ctx, types.NamespacedName{Name: ns}, &existing); err != nil {
			return fmt.Errorf("reading namespace %s on %s: %w", ns, cluster, err)
		}
		if !Onboardable(&existing, r.fleet.Origin()) {
			return &notOnboardable{fmt.Sprintf("namespace %s exists on %s and neither this hub's onboarding made it (label %s=%s) nor the worker's administrators opted it in (label %s=%s): "+
				"the hub does not create LocalQueue %s there; create it on the worker, or label the namespace", ns, cluster, strata.OnboardedByLabel, r.fleet.Origin(),
				strata.HubOnboardingLabel, strata.HubOnboardingAllowed, queue)}
		}
	} else if err != nil {
		return fmt.Errorf("creating namespace %s on %s: %w", ns, cluster, err)
	}
	lq := &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: queue, Namespace: ns, Labels: labels}, Spec: strata.LocalQueueSpec{ClusterQueue: cq}}
	if err := c.Create(ctx, lq); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating LocalQueue %s/%s (ClusterQueue %s) on %s: %w", ns, queue, cq, cluster, err)
	}
	r.memory.noteOnboarded(key, r.clock.Now())
	return nil
}

// Onboardable says whether the hub of origin may create a LocalQueue in
// an existing worker namespace: its onboarding made it, or the worker's
// administrators opted it in.
func Onboardable(ns *corev1.Namespace, origin string) bool {
	return ns.Labels[strata.OnboardedByLabel] == origin || ns.Labels[strata.HubOnboardingLabel] == strata.HubOnboardingAllowed
}

// notOnboardable says why the hub does not onboard a namespace.
type notOnboardable struct{ message string }

func (e *notOnboardable) Error() string { return e.message }

// onboardRefusal names an onboarding error the worker's side caused, with
// the message to show; "" when it is worth retrying.
func onboardRefusal(cluster string, err error) (reason, message string) {
	var no *notOnboardable
	switch {
	case errors.As(err, &no):
		return ReasonNamespaceNotOnboardable, no.message
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is being terminated"):
		return ReasonNamespaceTerminating, fmt.Sprintf("onboarding on %s: %v; the namespace is being deleted there", cluster, err)
	case apierrors.IsForbidden(err) && createRefusal(err) == ReasonAdmissionDenied:
		return ReasonAdmissionDenied, fmt.Sprintf("onboarding on %s: a policy of the worker refused it: %v", cluster, err)
	case apierrors.IsForbidden(err):
		return ReasonForbidden, fmt.Sprintf("onboarding (WorkerCluster %s spec.onboarding): %v; the hub's identity there needs the agent chart's hubAccess.onboarding=true", cluster, err)
	}
	return "", ""
}
