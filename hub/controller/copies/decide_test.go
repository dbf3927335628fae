package copies

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs/batchjob"
)

// TestNextStep: one row per rung of the copies controller's decision.
func TestNextStep(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	dispatched := now.Add(-time.Minute)
	// workerClock is a time on a worker's clock, 30 s behind the hub's:
	// only ever compared with the worker's own times.
	workerClock := now.Add(-30 * time.Second)
	cfg := &configv1beta1.HubConfiguration{
		Dispatch: configv1beta1.Dispatch{
			AdmissionTimeout:  &metav1.Duration{Duration: 5 * time.Minute},
			PendingTimeout:    &metav1.Duration{Duration: 2 * time.Minute},
			FinishedRetention: &metav1.Duration{Duration: 10 * time.Minute},
		},
		Fencing: configv1beta1.Fencing{Mode: configv1beta1.FencingEnabled,
			FenceAfter: &metav1.Duration{Duration: 10 * time.Minute}, ReplaceAfter: &metav1.Duration{Duration: 15 * time.Minute}},
	}
	job := func(mut ...func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "job-uid"}}
		for _, m := range mut {
			m(j)
		}
		return j
	}
	ours := func(gen string) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Labels = map[string]string{strata.HubWorkloadUIDLabel: "wl-uid", strata.DispatchGenerationLabel: gen}
		}
	}
	suspended := func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }
	complete := func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}
	}
	successCriteriaMet := func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: "True"}}
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
	}
	copyWL := func(admitted bool, conds ...metav1.Condition) *strata.Workload {
		wl := &strata.Workload{Status: strata.WorkloadStatus{Conditions: conds}}
		if admitted {
			wl.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
		}
		return wl
	}
	// base is a Job dispatched to w1 a minute ago, not created there yet.
	base := func() *observed {
		owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}
		wl := &strata.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "team-a", UID: "wl-uid", OwnerReferences: []metav1.OwnerReference{owner}},
			Status: strata.WorkloadStatus{Placement: &strata.Placement{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 2,
				Attempts: []strata.PlacementAttempt{{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 2, Time: metav1.NewTime(dispatched)}}}},
		}
		return &observed{
			key: types.NamespacedName{Namespace: "team-a", Name: "job-train"}, wl: wl, owner: &wl.OwnerReferences[0],
			cluster: "w1", flavor: "gpu", gen: 2, placed: true, dispatch: dispatch.Key("wl-uid", 2),
			job:    ref{kind: batchjob.Kind, key: types.NamespacedName{Namespace: "team-a", Name: "train"}},
			hubJob: batchjob.Adapt(job()), wc: &strata.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}},
			lastRenewed: now.Add(-5 * time.Second), copyMayExist: true, cfg: cfg,
		}
	}
	withCopy := func(o *observed, cwl *strata.Workload, mut ...func(*batchv1.Job)) *observed {
		o.copyJob, o.copyWL = batchjob.Adapt(job(append([]func(*batchv1.Job){ours("2")}, mut...)...)), cwl
		return o
	}
	finished := func(o *observed, at time.Time) *observed {
		o.wl.Status.Conditions = append(o.wl.Status.Conditions, cond(strata.WorkloadFinished, metav1.ConditionTrue, "Succeeded", at))
		return o
	}
	admittedOnHub := func(o *observed) *observed {
		o.wl.Status.Admission = &strata.Admission{ClusterQueue: "hub-cq"}
		return o
	}
	draining := func(o *observed) *observed {
		o.wc.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		o.wc.Finalizers = []string{"strata.dev/drain"}
		return o
	}
	deleting := func(o *observed) *observed {
		o.wl.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		o.wl.Finalizers = []string{strata.CopyGoneFinalizer}
		return o
	}
	readErr := errors.New("cache not started")
	notConnected := func(o *observed) *observed {
		o.copyErr = errors.Join(errors.New("worker w1"), fleet.ErrNotConnected)
		o.connErr = o.copyErr
		return o
	}

	cases := map[string]struct {
		o    func() *observed
		want step
	}{
		"the hub Workload is gone": {
			o:    func() *observed { return &observed{cfg: cfg} },
			want: step{action: actForget},
		},
		"orphaned (its job deleted with --cascade=orphan)": {
			o:    func() *observed { o := base(); o.owner = nil; return o },
			want: step{action: actDeleteOrphan},
		},
		"not dispatched": {
			o:    func() *observed { o := base(); o.placed = false; return o },
			want: step{action: actUntrack},
		},
		"the hub job cannot be read": {
			o:    func() *observed { o := base(); o.hubJobErr = readErr; return o },
			want: step{action: actFail, err: readErr},
		},
		"deleted: taken back, nothing recorded": {
			o:    func() *observed { o := base(); o.hubJob = nil; return o },
			want: step{action: actTakeBack, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended}},
		},
		"the Workload deleted, its job still there: taken back, nothing recorded (its finalizer goes then)": {
			o:    func() *observed { return deleting(base()) },
			want: step{action: actTakeBack, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended}},
		},
		"the Workload deleted, its worker down within replaceAfter: waits, saying so": {
			o: func() *observed {
				o := deleting(base())
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-14*time.Minute-50*time.Second)
				return o
			},
			want: step{action: actMarkUnreachable, requeue: 10 * time.Second},
		},
		"the Workload deleted, its worker down past replaceAfter: revoked, then it goes": {
			o: func() *observed {
				o := deleting(withCopy(admittedOnHub(base()), copyWL(true)))
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-15*time.Minute)
				return o
			},
			want: step{action: actTakeBackUnreached, revoke: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended}},
		},
		"an orphaned Workload being deleted: its copy taken back, not deleted again": {
			o:    func() *observed { o := deleting(base()); o.owner = nil; o.hubJob = nil; return o },
			want: step{action: actTakeBack, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonSuspended}},
		},
		"the Workload deleted, not dispatched: untracked (its finalizer goes)": {
			o:    func() *observed { o := deleting(base()); o.placed = false; return o },
			want: step{action: actUntrack},
		},
		"deactivated on the hub: taken back and recorded": {
			o:    func() *observed { o := base(); o.wl.Spec.Active = ptr.To(false); return o },
			want: step{action: actTakeBack, record: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated}},
		},
		"deactivated past a worker's backoffLimitCount, its copy still going: the refusal is what is recorded": {
			o: func() *observed {
				o := base()
				o.wl.Spec.Active = ptr.To(false)
				o.undoing = &outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated, cause: strata.RequeuingLimitExceeded, message: "the worker deactivated the copy"}
				return o
			},
			want: step{action: actTakeBack, record: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated, cause: strata.RequeuingLimitExceeded}},
		},
		"evicted at the hub (preempted for quota): taken back and recorded": {
			o: func() *observed {
				o := admittedOnHub(base())
				meta.SetStatusCondition(&o.wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: "preempted at the hub"})
				return o
			},
			want: step{action: actTakeBack, record: true, outcome: outcome{result: strata.PlacementEvicted, reason: strata.EvictedByPreemption}},
		},
		"deactivated, its worker down within replaceAfter: says so, waits": {
			o: func() *observed {
				o := base()
				o.wl.Spec.Active = ptr.To(false)
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-14*time.Minute-50*time.Second)
				return o
			},
			want: step{action: actMarkUnreachable, requeue: 10 * time.Second},
		},
		"deactivated, its worker down past replaceAfter: taken back without the worker, revoked and recorded": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true))
				o.wl.Spec.Active = ptr.To(false)
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-15*time.Minute)
				return o
			},
			want: step{action: actTakeBackUnreached, record: true, revoke: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated}},
		},
		"evicted at the hub, its worker not connected and the copy never sent: taken back at once": {
			o: func() *observed {
				o := notConnected(admittedOnHub(base()))
				o.copyMayExist = false
				meta.SetStatusCondition(&o.wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: "preempted at the hub"})
				return o
			},
			want: step{action: actTakeBackUnreached, record: true, outcome: outcome{result: strata.PlacementEvicted, reason: strata.EvictedByPreemption}},
		},
		"evicted at the hub, its worker not connected yet: waits for the connection": {
			o: func() *observed {
				o := notConnected(admittedOnHub(base()))
				meta.SetStatusCondition(&o.wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: "preempted at the hub"})
				return o
			},
			want: step{action: actNone, requeue: connectGrace},
		},
		"deleted, its worker down, no fencing: waits for the worker": {
			o: func() *observed {
				o := base()
				o.hubJob = nil
				o.down, o.lastRenewed = "readyz: timeout", now.Add(-time.Hour)
				o.cfg = &configv1beta1.HubConfiguration{Dispatch: cfg.Dispatch, Fencing: configv1beta1.Fencing{Mode: configv1beta1.FencingDisabled}}
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"deactivated, its WorkerCluster gone: taken back without it": {
			o: func() *observed {
				o := notConnected(base())
				o.wc = nil
				o.wl.Spec.Active = ptr.To(false)
				return o
			},
			want: step{action: actTakeBack, record: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated}},
		},
		"its copy gone after an earlier process's take-back, not recorded: recorded evicted, not sent again": {
			o: func() *observed {
				o := base()
				meta.SetStatusCondition(&o.wl.Status.Conditions, cond(ConditionCopyGoing, metav1.ConditionTrue, ReasonWaitingForCopy, dispatched.Add(time.Second)))
				return o
			},
			want: step{action: actRefuse, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonRejected, cause: ReasonTakenBack}},
		},
		"a CopyGoing of an earlier dispatch: the copy is sent": {
			o: func() *observed {
				o := base()
				meta.SetStatusCondition(&o.wl.Status.Conditions, cond(ConditionCopyGoing, metav1.ConditionTrue, ReasonWaitingForCopy, dispatched.Add(-time.Minute)))
				return o
			},
			want: step{action: actCreate},
		},
		"an eviction of an earlier dispatch (Evicted=False): followed": {
			o: func() *observed {
				o := admittedOnHub(base())
				meta.SetStatusCondition(&o.wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: dispatch.ReasonDispatched})
				return o
			},
			want: nextStep(admittedOnHub(base()), now),
		},
		"evicted at the hub after it finished: cleaned, not taken back": {
			o: func() *observed {
				o := finished(admittedOnHub(base()), now)
				meta.SetStatusCondition(&o.wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption})
				return o
			},
			want: step{action: actCleanFinished},
		},
		"deactivated after it finished: cleaned, not taken back": {
			o: func() *observed {
				o := finished(admittedOnHub(base()), now)
				o.wl.Spec.Active = ptr.To(false)
				return o
			},
			want: step{action: actCleanFinished},
		},
		// A copy that finished before the hub mirrored it: its result
		// comes first, whatever else happened meanwhile; taking it back
		// would lose it and run the job again.
		"deactivated after its copy finished, not mirrored yet: mirrored, not taken back": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), complete)
				o.wl.Spec.Active = ptr.To(false)
				return o
			},
			want: step{action: actNone, mirror: true, release: true},
		},
		"draining after its copy finished, not mirrored yet: mirrored, not taken back": {
			o:    func() *observed { return draining(withCopy(admittedOnHub(base()), copyWL(true), complete)) },
			want: step{action: actNone, mirror: true, release: true},
		},
		// SuccessCriteriaMet (or FailureTarget) comes before Complete (or
		// Failed), while the last pods terminate: the result is decided.
		"deactivated after its copy's success criteria were met, before Complete: mirrored, not taken back": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), successCriteriaMet)
				o.wl.Spec.Active = ptr.To(false)
				return o
			},
			want: step{action: actRecordAdmission, mirror: true},
		},
		"admitted, with a maximum execution time: looked at again when it is up, and the worker's grace after": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true))
				o.wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](600)
				o.wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](100)
				o.wl.Status.Conditions = []metav1.Condition{cond(strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", now.Add(-200*time.Second))}
				return o
			},
			want: step{action: actRecordAdmission, mirror: true, requeue: 300*time.Second + executionGrace},
		},
		"admitted past its maximum execution time and the grace, the worker not deactivating the copy: the hub deactivates it": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true))
				o.wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](600)
				o.wl.Status.Conditions = []metav1.Condition{cond(strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", now.Add(-600*time.Second-executionGrace))}
				return o
			},
			want: step{action: actRefuse, mirror: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated,
				cause:   strata.MaximumExecutionTimeExceeded,
				message: "admitted for its maximum execution time, 600s, and not deactivated by the worker: the hub deactivates the Workload (spec.active: false); it is dispatched again when spec.active is true"}},
		},
		"an elastic Job granted 4 pods at the hub, its admitted copy running 2: the copy is brought to 4": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })
				o.wl.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
				o.wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 4}}
				withMain(o.copyWL, *o.copyJob.(batchjob.Job).Spec.Parallelism)
				return o
			},
			want: step{action: actRecordAdmission, mirror: true, scaleTo: 4},
		},
		"an elastic Job's copy running the size granted: left as it is": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](4) })
				o.wl.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
				o.wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 4}}
				withMain(o.copyWL, *o.copyJob.(batchjob.Job).Spec.Parallelism)
				return o
			},
			want: step{action: actRecordAdmission, mirror: true},
		},
		"a Job that is not elastic, its copy running another size: not resized": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })
				o.wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 4}}
				withMain(o.copyWL, 4)
				return o
			},
			want: step{action: actRecordAdmission, mirror: true},
		},
		"a take-back under way when its copy's success criteria were met: mirrored": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), successCriteriaMet)
				o.undoing = &outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated}
				return o
			},
			want: step{action: actRecordAdmission, mirror: true},
		},
		"a take-back under way when its copy finished: mirrored": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), complete)
				o.undoing = &outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated}
				return o
			},
			want: step{action: actNone, mirror: true, release: true},
		},
		// The hub job's suspend is Strata's, as Kueue's: a job suspended
		// on the hub (a Kueue manifest's suspend: true) runs on.
		"suspended on the hub: its copy runs on": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true))
				o.hubJob = batchjob.Adapt(job(suspended))
				return o
			},
			want: nextStep(withCopy(admittedOnHub(base()), copyWL(true)), now),
		},
		"the WorkerCluster cannot be read": {
			o:    func() *observed { o := base(); o.wcErr = readErr; return o },
			want: step{action: actFail, err: readErr},
		},
		"draining: the copy is taken back": {
			o:    func() *observed { return draining(withCopy(admittedOnHub(base()), copyWL(true))) },
			want: step{action: actRefuse, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonRejected, cause: ReasonWorkerClusterDeleted}},
		},
		"draining, copies given up: placed again without taking back": {
			o: func() *observed {
				o := draining(base())
				o.wc.Annotations = map[string]string{strata.AbandonCopiesAnnotation: "true"}
				return o
			},
			want: step{action: actAbandon, outcome: outcome{reason: ReasonWorkerClusterDeleted}},
		},
		"draining and down: as any unreachable worker": {
			o:    func() *observed { o := draining(base()); o.down = "readyz: connection refused"; return o },
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"unreachable within replaceAfter: says so, waits": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-14*time.Minute-50*time.Second)
				return o
			},
			want: step{action: actMarkUnreachable, requeue: 10 * time.Second},
		},
		"unreachable past replaceAfter: placed again": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-15*time.Minute)
				return o
			},
			want: step{action: actAbandon, outcome: outcome{reason: ReasonWorkerUnreachable}},
		},
		// A hub restarted with other fencing settings while the worker
		// was cut off counts with what the worker's Lease last carried.
		"unreachable past replaceAfter, its Lease last written without a duration (fencing Disabled then): waits": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-time.Hour)
				o.published, o.publishedKnown = 0, true
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"unreachable past replaceAfter, its Lease last carrying a longer fenceAfter: waits the difference": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-15*time.Minute)
				o.published, o.publishedKnown = cfg.Fencing.FenceAfter.Duration+20*time.Minute, true
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"unreachable past replaceAfter and the difference: placed again": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-35*time.Minute)
				o.published, o.publishedKnown = cfg.Fencing.FenceAfter.Duration+20*time.Minute, true
				return o
			},
			want: step{action: actAbandon, outcome: outcome{reason: ReasonWorkerUnreachable}},
		},
		"unreachable past replaceAfter, its Lease last carrying a shorter fenceAfter: placed again": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-15*time.Minute)
				o.published, o.publishedKnown = time.Minute, true
				return o
			},
			want: step{action: actAbandon, outcome: outcome{reason: ReasonWorkerUnreachable}},
		},
		"deactivated, its worker down past replaceAfter, its Lease last without a duration: waits": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true))
				o.wl.Spec.Active = ptr.To(false)
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-time.Hour)
				o.published, o.publishedKnown = 0, true
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"unreachable without fencing: waits for ever": {
			o: func() *observed {
				o := base()
				o.down, o.lastRenewed = "readyz: connection refused", now.Add(-time.Hour)
				o.cfg = &configv1beta1.HubConfiguration{Dispatch: cfg.Dispatch, Fencing: configv1beta1.Fencing{Mode: configv1beta1.FencingDisabled}}
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"unreachable after its copy finished, not mirrored yet: mirrored, not placed again": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), copyWL(true), complete)
				o.down = "readyz: timeout"
				return o
			},
			want: step{action: actNone, mirror: true, release: true},
		},
		"its finished copy deleted on the worker before the hub mirrored it: mirrored": {
			o: func() *observed {
				return withCopy(admittedOnHub(base()), copyWL(true), complete, func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })
			},
			want: step{action: actNone, mirror: true, release: true},
		},
		"unreachable after it finished: its copy goes later": {
			o:    func() *observed { o := finished(base(), now); o.down = "readyz: timeout"; return o },
			want: step{action: actNone, requeue: unreachableRetry},
		},
		"unreachable, its copy never sent: placed again at once": {
			o:    func() *observed { o := base(); o.down, o.copyMayExist = "readyz: connection refused", false; return o },
			want: step{action: actAbandon, outcome: outcome{reason: ReasonCopyNotSent}},
		},
		"dispatched to the cluster the worker stood for before it accepted another: waits for replaceAfter from the old cluster's last renewal": {
			o: func() *observed {
				o := withCopy(admittedOnHub(base()), nil)
				o.switched = &fleet.ClusterSwitch{At: now.Add(-30 * time.Second), LastRenewal: now.Add(-time.Minute), From: "old", To: "new"}
				return o
			},
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"dispatched to the old cluster, replaceAfter over: placed again": {
			o: func() *observed {
				o := admittedOnHub(base())
				o.switched = &fleet.ClusterSwitch{At: now.Add(-14 * time.Minute), LastRenewal: now.Add(-15 * time.Minute), From: "old", To: "new"}
				o.wl.Status.Placement.Attempts[0].Time = metav1.NewTime(now.Add(-20 * time.Minute))
				return o
			},
			want: step{action: actAbandon, outcome: outcome{reason: ReasonClusterChanged}},
		},
		"dispatched after the switch: followed as usual": {
			o: func() *observed {
				o := base()
				o.switched = &fleet.ClusterSwitch{At: now.Add(-5 * time.Minute), LastRenewal: now.Add(-6 * time.Minute), From: "old", To: "new"}
				return o
			},
			want: step{action: actCreate},
		},
		"not connected yet: the connection has its chance": {
			o:    func() *observed { return notConnected(base()) },
			want: step{action: actNone, requeue: connectGrace},
		},
		"not connected for long": {
			o:    func() *observed { o := notConnected(base()); o.lastRenewed = now.Add(-time.Minute); return o },
			want: step{action: actMarkUnreachable, requeue: unreachableRetry},
		},
		"not connected, its WorkerCluster gone: placed again": {
			o:    func() *observed { o := notConnected(base()); o.wc = nil; return o },
			want: step{action: actRefuse, outcome: outcome{result: strata.PlacementUnreachable, reason: dispatch.ReasonRejected, cause: ReasonWorkerClusterDeleted}},
		},
		"the worker does not serve the kind": {
			o:    func() *observed { o := base(); o.copyErr = fleet.ErrKindNotServed; return o },
			want: step{action: actRefuse, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonKindNotServed}},
		},
		"the copy cannot be read": {
			o:    func() *observed { o := base(); o.copyErr = readErr; return o },
			want: step{action: actFail, err: readErr},
		},
		"the worker answers again": {
			o: func() *observed {
				o := withCopy(base(), nil)
				o.wl.Status.Conditions = []metav1.Condition{cond(ConditionUnreachable, metav1.ConditionTrue, ReasonWorkerUnreachable, now)}
				return o
			},
			want: step{action: actMarkReachable},
		},
		"a copy of an earlier dispatch": {
			o:    func() *observed { return withCopy(base(), nil, ours("1")) },
			want: step{action: actRemoveStale},
		},
		"finished, admission never seen": {
			o:    func() *observed { return finished(base(), now) },
			want: step{action: actCleanFinished, ranUnseen: true},
		},
		"finished, its copy's admission still readable": {
			o:    func() *observed { return finished(withCopy(base(), copyWL(true), complete), now) },
			want: step{action: actRecordAdmission},
		},
		"finished, its copy kept for finishedRetention": {
			o: func() *observed {
				return finished(withCopy(admittedOnHub(base()), copyWL(true), complete), now.Add(-time.Minute))
			},
			want: step{action: actCleanFinished, requeue: 9 * time.Minute, mirror: true},
		},
		"finished, retention over: the copy goes": {
			o: func() *observed {
				return finished(withCopy(admittedOnHub(base()), copyWL(true), complete), now.Add(-10*time.Minute))
			},
			want: step{action: actCleanFinished, deleteCopy: true, mirror: true},
		},
		"taken back, its record not written yet": {
			o: func() *observed {
				o := withCopy(base(), nil)
				o.undoing = &outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: "Inadmissible"}
				return o
			},
			want: step{action: actTakeBack, record: true, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: "Inadmissible"}},
		},
		"taken back and recorded, the cache not showing the record yet: nothing is sent again": {
			o: func() *observed {
				o := base()
				o.takenBack = true
				return o
			},
			want: step{action: actNone, requeue: informerBehindRetry},
		},
		"the copy is being deleted": {
			o: func() *observed {
				return withCopy(base(), nil, func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })
			},
			want: step{action: actNone, requeue: copyGoingRetry},
		},
		"admitted, then vanished from the worker": {
			o:    func() *observed { return admittedOnHub(base()) },
			want: step{action: actConfirmGone},
		},
		"no copy yet, its maximum execution time used up by earlier copies: the hub deactivates it, sending none": {
			o: func() *observed {
				o := base()
				o.wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](600)
				o.wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](600)
				return o
			},
			want: step{action: actRefuse, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated,
				cause: strata.MaximumExecutionTimeExceeded}},
		},
		"no copy yet, some of its maximum execution time left": {
			o: func() *observed {
				o := base()
				o.wl.Spec.MaximumExecutionTimeSeconds = ptr.To[int32](600)
				o.wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](599)
				return o
			},
			want: step{action: actCreate},
		},
		"no copy yet": {
			o:    func() *observed { return base() },
			want: step{action: actCreate},
		},
		"the copy finished": {
			o:    func() *observed { return withCopy(admittedOnHub(base()), copyWL(true), complete) },
			want: step{action: actNone, mirror: true, release: true},
		},
		"the copy finished before its admission was recorded": {
			o:    func() *observed { return withCopy(base(), copyWL(true), complete) },
			want: step{action: actRecordAdmission, mirror: true, release: true},
		},
		"refused by the worker": {
			o: func() *observed {
				return withCopy(base(), copyWL(false, cond(strata.WorkloadInvalid, metav1.ConditionTrue, "InvalidPodSets", now)))
			},
			want: step{action: actRefuse, mirror: true, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: "InvalidPodSets"}},
		},
		"evicted by the worker: its pods were not ready in time": {
			o: func() *observed {
				// The worker's clock is off the hub's: the backoff (two
				// minutes there) runs from the hub's now.
				cw := copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, strata.EvictedByPodsReadyTimeout, workerClock),
					cond(strata.WorkloadEvicted, metav1.ConditionTrue, strata.EvictedByPodsReadyTimeout, workerClock))
				cw.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2), RequeueAt: ptr.To(metav1.NewTime(workerClock.Add(2 * time.Minute)))}
				return withCopy(base(), cw)
			},
			want: step{action: actRefuse, mirror: true, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: strata.EvictedByPodsReadyTimeout,
				requeue: &strata.RequeueState{Count: ptr.To[int32](2), RequeueAt: ptr.To(metav1.NewTime(now.Add(2 * time.Minute)))}}},
		},
		"evicted by the worker with a backoff of days: the hub holds it an hour at most": {
			o: func() *observed {
				cw := copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, strata.EvictedByPodsReadyTimeout, workerClock),
					cond(strata.WorkloadEvicted, metav1.ConditionTrue, strata.EvictedByPodsReadyTimeout, workerClock))
				cw.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](9), RequeueAt: ptr.To(metav1.NewTime(workerClock.Add(72 * time.Hour)))}
				return withCopy(base(), cw)
			},
			want: step{action: actRefuse, mirror: true, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: strata.EvictedByPodsReadyTimeout,
				requeue: &strata.RequeueState{Count: ptr.To[int32](9), RequeueAt: ptr.To(metav1.NewTime(now.Add(time.Hour)))}}},
		},
		"deactivated by the worker past its backoffLimitCount": {
			o: func() *observed {
				c := cond(strata.WorkloadAdmitted, metav1.ConditionFalse, "Deactivated", workerClock)
				c.Message = "deactivated (RequeuingLimitExceeded): its pods were not ready in time after 1 requeue(s)"
				cw := copyWL(false, c)
				cw.Spec.Active = ptr.To(false)
				return withCopy(base(), cw)
			},
			want: step{action: actRefuse, mirror: true, outcome: outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated, cause: strata.RequeuingLimitExceeded}},
		},
		"deactivated on the worker, its eviction under way: no timeout": {
			o: func() *observed {
				c := cond(strata.WorkloadAdmitted, metav1.ConditionFalse, "Deactivated", workerClock)
				cw := copyWL(false, c)
				cw.Spec.Active = ptr.To(false)
				cw.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2)}
				return withCopy(base(), cw)
			},
			want: step{action: actNone, mirror: true},
		},
		"admitted by the worker": {
			o:    func() *observed { return withCopy(base(), copyWL(true)) },
			want: step{action: actRecordAdmission, mirror: true},
		},
		"waiting for the admission, first seen now": {
			o:    func() *observed { return withCopy(base(), nil) },
			want: step{action: actMarkWaiting, mirror: true, noteSeen: true, requeue: 5 * time.Minute},
		},
		"waiting for the admission, seen at the dispatch": {
			o:    func() *observed { o := withCopy(base(), nil); o.seen = dispatched; return o },
			want: step{action: actMarkWaiting, mirror: true, requeue: 4 * time.Minute},
		},
		"not admitted within admissionTimeout": {
			o: func() *observed {
				o := withCopy(base(), nil)
				o.seen = now.Add(-10 * time.Minute)
				o.wl.Status.Placement.Attempts[0].Time = metav1.NewTime(now.Add(-10 * time.Minute))
				return o
			},
			want: step{action: actConfirmThenRefuse, mirror: true, outcome: outcome{result: strata.PlacementTimedOut, reason: dispatch.ReasonTimedOut, cause: ReasonAdmissionTimeout}},
		},
		"pending on the worker, first seen now: pendingTimeout from now": {
			o: func() *observed {
				o := withCopy(base(), copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, workerPending, workerClock)))
				o.seen = dispatched
				return o
			},
			want: step{action: actMarkWaiting, mirror: true, requeue: 2 * time.Minute, notePending: &pendingSighting{workerSince: workerClock, at: now}},
		},
		"pending on the worker, within pendingTimeout on the hub's clock": {
			o: func() *observed {
				o := withCopy(base(), copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, workerPending, workerClock)))
				o.seen, o.pending = dispatched, &pendingSighting{workerSince: workerClock, at: now.Add(-90 * time.Second)}
				return o
			},
			want: step{action: actMarkWaiting, mirror: true, requeue: 30 * time.Second},
		},
		"pending again, a new spell: counted anew": {
			o: func() *observed {
				o := withCopy(base(), copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, workerPending, workerClock.Add(time.Second))))
				o.seen, o.pending = dispatched, &pendingSighting{workerSince: workerClock, at: now.Add(-3 * time.Minute)}
				return o
			},
			want: step{action: actMarkWaiting, mirror: true, requeue: 2 * time.Minute, notePending: &pendingSighting{workerSince: workerClock.Add(time.Second), at: now}},
		},
		"pending on the worker for pendingTimeout on the hub's clock": {
			o: func() *observed {
				o := withCopy(base(), copyWL(false, cond(strata.WorkloadAdmitted, metav1.ConditionFalse, workerPending, workerClock)))
				o.seen, o.pending = dispatched, &pendingSighting{workerSince: workerClock, at: now.Add(-2 * time.Minute)}
				return o
			},
			want: step{action: actConfirmThenRefuse, mirror: true, outcome: outcome{result: strata.PlacementRejected, reason: dispatch.ReasonRejected, cause: ReasonPendingOnWorker}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := nextStep(tc.o(), now)
			if got.why == "" {
				t.Errorf("nextStep() says no why")
			}
			if got.outcome.message == "" && (got.action == actRefuse || got.action == actAbandon || got.action == actConfirmThenRefuse || got.action == actTakeBack && tc.want.outcome.cause == "") {
				t.Errorf("nextStep() = %s with no message", got.action)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(step{}, outcome{}, pendingSighting{}), cmpopts.EquateErrors(),
				cmpopts.IgnoreFields(step{}, "why", "message"), cmpopts.IgnoreFields(outcome{}, "message")); diff != "" {
				t.Errorf("nextStep() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeletedMessage: a take-back for a deletion says what was deleted.
func TestDeletedMessage(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}
	observe := func(jobDeleting, wlDeleting, jobGone bool) *observed {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "job-uid"}}
		if jobDeleting {
			j.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "team-a", UID: "wl-uid", OwnerReferences: []metav1.OwnerReference{owner}}}
		if wlDeleting {
			wl.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		o := &observed{wl: wl, owner: &wl.OwnerReferences[0], cluster: "w1", placed: true,
			job: ref{kind: batchjob.Kind, key: types.NamespacedName{Namespace: "team-a", Name: "train"}}, hubJob: batchjob.Adapt(j)}
		if jobGone {
			o.hubJob = nil
		}
		return o
	}
	for _, tc := range []struct {
		name                             string
		jobDeleting, wlDeleting, jobGone bool
		want                             string
	}{
		{name: "the job gone", jobGone: true, want: "the Job was deleted"},
		{name: "the job being deleted", jobDeleting: true, wlDeleting: true, want: "the Job was deleted"},
		{name: "the Workload alone deleted", wlDeleting: true, want: "the Workload was deleted"},
	} {
		if got := nextStep(observe(tc.jobDeleting, tc.wlDeleting, tc.jobGone), now).outcome.message; got != tc.want {
			t.Errorf("%s: nextStep().outcome.message = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestScopeChange: a reconcile writes the hub Workload's status only when
// an action changed it.
func TestScopeChange(t *testing.T) {
	wl := &strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: ConditionUnreachable, Status: metav1.ConditionTrue, Reason: ReasonWorkerUnreachable, Message: "worker w1 does not answer"},
	}}}
	s := &scope{observed: &observed{wl: wl}}
	if s.change(func(ws *strata.WorkloadStatus) bool { return setUnreachable(ws, "worker w1 does not answer") }) || s.updated != nil {
		t.Fatal("the same condition again: want nothing to write")
	}
	if !s.change(clearUnreachable) || s.updated == nil || len(s.updated.Status.Conditions) != 0 {
		t.Fatalf("a removed condition: want it written, got %+v", s.updated)
	}
	if len(wl.Status.Conditions) != 1 {
		t.Error("the observed Workload was changed in place")
	}
	if s.change(clearUnreachable) || s.updated == nil {
		t.Error("a second action that changes nothing keeps the first's change")
	}
}

func TestAdmittedOtherShape(t *testing.T) {
	wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "leader-0"}, {Name: "worker-0"}, {Name: "main", Count: 4, MinCount: ptr.To[int32](2)}}}}
	admitted := func(names ...string) *strata.Workload {
		c := &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{}}}
		for _, n := range names {
			c.Status.Admission.PodSetAssignments = append(c.Status.Admission.PodSetAssignments, strata.PodSetAssignment{Name: n})
		}
		return c
	}
	cases := map[string]struct {
		copyWL *strata.Workload
		want   string
	}{
		"the same pod sets":            {copyWL: withMain(admitted("leader-0", "worker-0"), 4)},
		"not admitted":                 {copyWL: &strata.Workload{}},
		"a group more (scaled up)":     {copyWL: admitted("leader-0", "worker-0", "leader-1", "worker-1"), want: "pod set leader-1 is not the Workload's"},
		"a pod set less (scaled down)": {copyWL: admitted("leader-0"), want: "1 pod sets admitted, the Workload has 3"},
		"another count (parallelism changed)": {copyWL: func() *strata.Workload {
			c := withMain(admitted("leader-0", "worker-0"), 4)
			c.Status.Admission.PodSetAssignments[1].Count = 3
			return c
		}(), want: "pod set worker-0 admitted with 3 pods, the Workload has 0"},
		"fewer pods, down to minCount (partial admission)": {copyWL: withMain(admitted("leader-0", "worker-0"), 2)},
		"fewer pods than minCount":                         {copyWL: withMain(admitted("leader-0", "worker-0"), 1), want: "pod set main admitted with 1 pods, the Workload has 4"},
		"more pods than count":                             {copyWL: withMain(admitted("leader-0", "worker-0"), 5), want: "pod set main admitted with 5 pods, the Workload has 4"},
	}
	// Placed with 3 of main's 4 pods (its hub quota held no more).
	capped := wl.DeepCopy()
	capped.Status.Placement = &strata.Placement{PodSetCounts: []strata.PodSetCount{{Name: "main", Count: 3}}}
	for copyCount, want := range map[int32]string{
		2: "", 3: "",
		4: "pod set main admitted with 4 pods, more than the 3 it was placed with (strata.dev/pod-set-counts)",
	} {
		if got := admittedOtherShape(capped, withMain(admitted("leader-0", "worker-0"), copyCount)); got != want {
			t.Errorf("placed with 3, admitted with %d: admittedOtherShape() = %q, want %q", copyCount, got, want)
		}
	}
	// A hub Workload without minCount (made before the hub read it),
	// whose copy's Workload has one.
	old := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: 4}}}}
	copyWL := withMain(admitted(), 3)
	if got := admittedOtherShape(old, copyWL); got == "" {
		t.Error("a copy without minCount admitted with fewer pods: want it refused")
	}
	copyWL.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 4, MinCount: ptr.To[int32](2)}}
	if got := admittedOtherShape(old, copyWL); got != "" {
		t.Errorf("a copy with its own minCount admitted with fewer pods: admittedOtherShape() = %q, want it accepted", got)
	}
	// An elastic Workload granted 4 pods, its copy admitted with 2 and
	// recorded so: on its way up; one granted 2 whose copy the hub
	// recorded with 4: on its way down; more than both: changed there.
	elastic := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.ElasticJobAnnotation: "true"}},
		Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: 4}}}}
	for _, c := range []struct {
		granted, recorded, admitted int32
		want                        string
	}{
		{granted: 4, recorded: 2, admitted: 2},
		{granted: 4, recorded: 2, admitted: 4},
		{granted: 2, recorded: 4, admitted: 4},
		{granted: 2, recorded: 4, admitted: 2},
		{granted: 4, recorded: 4, admitted: 6, want: "pod set main admitted with 6 pods, the Workload has 4"},
	} {
		e := elastic.DeepCopy()
		e.Spec.PodSets[0].Count = c.granted
		e.Status.Admission = &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Count: c.recorded}}}
		if got := admittedOtherShape(e, withMain(admitted(), c.admitted)); got != c.want {
			t.Errorf("elastic, granted %d, recorded %d, admitted %d: admittedOtherShape() = %q, want %q", c.granted, c.recorded, c.admitted, got, c.want)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := admittedOtherShape(wl, tc.copyWL); got != tc.want {
				t.Errorf("admittedOtherShape() = %q, want %q", got, tc.want)
			}
		})
	}
}

// withMain adds pod set "main" admitted with count pods to c's admission.
func withMain(c *strata.Workload, count int32) *strata.Workload {
	c.Status.Admission.PodSetAssignments = append(c.Status.Admission.PodSetAssignments, strata.PodSetAssignment{Name: "main", Count: count})
	return c
}
