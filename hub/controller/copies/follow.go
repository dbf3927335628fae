package copies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/admitevents"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/metrics"
)

// recordAdmission records the worker's admission, as copyWL shows it, on
// the hub Workload.
func (r *Reconciler) recordAdmission(ctx context.Context, s *scope, copyWL *strata.Workload) error {
	wl := s.wl
	// The copy is admitted: no timeout counts from its creation any more.
	r.memory.forgetTimers(s.dispatch)
	if r.memory.admissionWritten(s.dispatch, wl.Status.Admission != nil) && wl.Status.Admission == nil {
		// The cache is behind this process's own write (the copy's next
		// change, such as the agent starting it, comes first): writing
		// again would only conflict. The write's event brings it back.
		return nil
	}
	var lq strata.LocalQueue
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, &lq); client.IgnoreNotFound(err) != nil {
		return err
	}
	now := r.clock.Now()
	var resized string
	if !s.change(func(ws *strata.WorkloadStatus) bool {
		before := ws.Admission.DeepCopy()
		changed := dispatch.RecordAdmission(ws, lq.Spec.ClusterQueue, copyWL, now)
		noted, event := dispatch.NoteResize(ws, wl, before, copyWL, s.cluster, now)
		resized = event
		return changed || noted
	}) {
		return nil
	}
	s.afterWrite(func(ctx context.Context) error {
		if resized != "" {
			r.recorder.Eventf(s.hubJob.Object(), s.updated, corev1.EventTypeNormal, dispatch.ReasonResized, "Resize", "%s", resized)
		}
		first := wl.Status.Admission == nil
		if first {
			r.memory.noteAdmissionWritten(s.dispatch)
		}
		if err := r.setDispatching(ctx, s.cluster, metav1.ConditionTrue, ReasonDispatching, "the worker admits the hub's copies"); err != nil {
			return err
		}
		if first {
			metrics.HubAdmissionLatency.WithLabelValues(s.cluster).Observe(now.Sub(dispatchTime(wl)).Seconds())
			note := fmt.Sprintf("Admitted on %s (%s)", s.cluster, dispatch.FlavorWords(wl.Status.Placement))
			if why := dispatch.ChoiceReason(wl); why != "" {
				note += ", dispatched there: " + why
			}
			r.admissions.Admitted(admitevents.Admission{ClusterQueue: lq.Spec.ClusterQueue, Workload: wl.Namespace + "/" + wl.Name,
				Regarding: s.hubJob.Object(), Related: s.updated, Reason: "Admitted", Note: intake.Truncate(note, intake.MaxEventNote)})
		}
		return nil
	})
	return nil
}

// scaleCopy brings an elastic Job's copy to the size its hub queue
// granted (count, the hub Workload's): the worker's agent then resizes
// the copy's admission in place.
func (r *Reconciler) scaleCopy(ctx context.Context, s *scope, count int32) error {
	scaler, ok := s.copyJob.(jobs.Scaler)
	if !ok {
		return nil
	}
	patch := scaler.ScalePatch(count)
	if patch == nil {
		return nil
	}
	c, err := r.fleet.Client(s.cluster)
	if err != nil {
		return nil // the connection's return brings the Workload back
	}
	obj := s.job.kind.NewObject()
	obj.SetNamespace(s.job.key.Namespace)
	obj.SetName(s.job.key.Name)
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			return nil // its event brings the Workload back
		case apierrors.IsForbidden(err):
			r.recorder.Eventf(s.wl, nil, corev1.EventTypeWarning, ReasonCopyNotResized, "Resize",
				"the hub may not resize its copy on %s to %d pods (%v): the hub's identity there needs patch on the kind (the strata-agent chart's hub-access role grants it; upgrade the chart there)",
				s.cluster, count, err)
			return nil
		}
		return fmt.Errorf("resizing the copy on %s to %d pods: %w", s.cluster, count, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Resized the copy", "cluster", s.cluster, "pods", count)
	return nil
}

// ReasonCopyNotResized is the reason of the warning that the hub may not
// resize an elastic Job's copy on its worker.
const ReasonCopyNotResized = "CopyNotResized"

// confirmLive re-reads a copy's Workload from the worker itself before a
// timeout takes the copy back on what the informer shows, which may be
// behind: a copy admitted meanwhile is recorded as admitted, and a copy
// whose state cannot be read now is left alone and looked at again (the
// worker may be unreachable; taking it back then could run the Job
// twice). decided is false when the timeout may go ahead.
func (r *Reconciler) confirmLive(ctx context.Context, s *scope) (res ctrl.Result, decided bool, err error) {
	cluster, jobRef := s.cluster, s.job
	c, err := r.fleet.Client(cluster)
	if err != nil {
		return ctrl.Result{RequeueAfter: notConnectedRetry}, true, nil
	}
	var obj client.Object
	if _, grouped := jobRef.kind.(jobs.GroupedWorkloads); grouped {
		// Its Workloads are named after what the copy holds.
		obj = jobRef.kind.NewObject()
		if err := c.Get(ctx, jobRef.key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, false, nil
			}
			ctrl.LoggerFrom(ctx).V(2).Info("Could not re-read the copy before its timeout; looking again shortly", "cluster", cluster, "error", err.Error())
			return ctrl.Result{RequeueAfter: notConnectedRetry}, true, nil
		}
	}
	live, err := jobs.WorkerWorkload(ctx, c, jobRef.kind, jobRef.key, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not re-read the copy before its timeout; looking again shortly", "cluster", cluster, "error", err.Error())
		return ctrl.Result{RequeueAfter: notConnectedRetry}, true, nil
	}
	if live == nil {
		return ctrl.Result{}, false, nil // no Workload at all: the agent never took the copy in
	}
	if verdict, _, _ := dispatch.Judge(live); verdict == dispatch.Admitted {
		return ctrl.Result{}, true, r.recordAdmission(ctx, s, live)
	}
	return ctrl.Result{}, false, nil
}

// ReasonStatusRejected is the reason of the event that says the hub's
// API server refused a copy's status on the hub's job.
const ReasonStatusRejected = "StatusRejected"

// syncJobStatus mirrors the copy's status onto the hub's job.
func (r *Reconciler) syncJobStatus(ctx context.Context, hubJob, copyJob jobs.Job) error {
	obj := hubJob.Object().DeepCopyObject().(client.Object)
	updated, _ := hubJob.Kind().Adapt(obj)
	if !updated.MirrorStatus(copyJob) {
		return nil
	}
	if err := r.client.Status().Update(ctx, obj); err != nil {
		if apierrors.IsInvalid(err) {
			// Not retried (the same status would be refused again), but
			// told where the user looks.
			ctrl.LoggerFrom(ctx).Error(err, "The hub's job cannot take the copy's status", "job", client.ObjectKeyFromObject(obj))
			r.recorder.Eventf(hubJob.Object(), nil, corev1.EventTypeWarning, ReasonStatusRejected, "Mirror", "%s",
				intake.Truncate("the hub's API server refused the copy's status: "+err.Error(), intake.MaxEventNote))
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	return nil
}

// cleanFinished ends a finished Workload's reservation, says where it
// ran when its admission was never seen, and removes its copy once its
// retention is over (st.deleteCopy).
func (r *Reconciler) cleanFinished(ctx context.Context, s *scope, st step) (ctrl.Result, error) {
	if st.ranUnseen {
		s.change(func(ws *strata.WorkloadStatus) bool { return setRanUnseen(ws, s.cluster, s.flavor) })
	}
	// Its reservation ends, and this process forgets the dispatch's
	// creation, sightings and admission: nothing more counts from them.
	r.release(s.cluster, s.flavor, s.dispatch)
	if st.deleteCopy {
		return ctrl.Result{}, r.deleteCopy(ctx, s.cluster, s.copyJob.Object())
	}
	return ctrl.Result{RequeueAfter: st.requeue}, nil
}
