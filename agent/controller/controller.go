// Package controller wires the agent's controllers into a manager.
package controller

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/controller/admissionchecks"
	"strata.dev/strata/agent/controller/fencing"
	"strata.dev/strata/agent/controller/inuse"
	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/nodefailure"
	"strata.dev/strata/agent/controller/podsready"
	"strata.dev/strata/agent/controller/provisioning"
	"strata.dev/strata/agent/controller/ungater"
	"strata.dev/strata/agent/index"
	"strata.dev/strata/agent/scheduler"
	"strata.dev/strata/agent/summary"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/admitevents"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/controller/localqueue"
	queueindex "strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/lifecycle"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
)

// Option changes how SetupControllers wires the agent.
type Option func(*options)

type options struct {
	// apiWatch: stop the manager once the cluster serves an API missing
	// now (cmdutil.APIWatch), every apiWatch; 0 leaves it out.
	apiWatch         time.Duration
	nodeFailureClock clock.WithDelayedExecution
	fencingClock     clock.Clock
	eventsClock      clock.WithTicker
	podsReadyClock   clock.WithDelayedExecution
}

// startInformersWithCache creates the informers of every kind the
// controllers watch or read that the capacity cache does not already
// watch, so that they start with the manager's cache instead of when their
// controller starts. Every controller waits for all of the cache's
// informers to sync; an informer created meanwhile (the Job controller's
// Namespaces and PriorityClasses, before this) added up to a second and a
// half before the first admission after a restart.
//
// Not WorkloadPriorityClasses: the manager starts no controller before
// every informer of its cache has synced, and on a cluster that has none,
// their list answers only at the API server's next progress notification,
// more than half a second later. The Job controller starts without waiting
// for them (see intake.Keeper.Watch).
func startInformersWithCache(ctx context.Context, mgr ctrl.Manager) error {
	for _, o := range []client.Object{&batchv1.Job{}, &corev1.Namespace{}, &schedulingv1.PriorityClass{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// WithNodeFailureClock replaces the real clock that measures hot swap's
// delays, backoff and recovery timeout (tests step a fake one).
func WithNodeFailureClock(c clock.WithDelayedExecution) Option {
	return func(o *options) { o.nodeFailureClock = c }
}

// WithFencingClock replaces the real clock that measures how long a hub's
// fencing Lease has been silent (tests give hub and worker clocks that
// disagree).
func WithFencingClock(c clock.Clock) Option {
	return func(o *options) { o.fencingClock = c }
}

// WithPodsReadyClock replaces the real clock that measures
// waitForPodsReady's timeouts and the requeued workloads' backoff.
func WithPodsReadyClock(c clock.WithDelayedExecution) Option {
	return func(o *options) { o.podsReadyClock = c }
}

// WithRestartOnNewAPIs stops the manager with cmdutil.ErrNewAPI once the
// cluster serves an API the agent runs controllers for and did not serve
// at its start (a workload kind's CRD, the cluster autoscaler's
// ProvisioningRequest), asking every interval: strata-agent then exits,
// and its Deployment starts it again with them.
func WithRestartOnNewAPIs(interval time.Duration) Option {
	return func(o *options) { o.apiWatch = interval }
}

// WithEventsClock replaces the real clock that paces the ClusterQueues'
// admission digests (events.admissions PerClusterQueue).
func WithEventsClock(c clock.WithTicker) Option {
	return func(o *options) { o.eventsClock = c }
}

// SetupControllers registers every controller of strata-agent with mgr:
// the capacity cache fed by informers, the scheduler, the summary
// publisher, the controllers of the registered workload kinds served
// here, the LocalQueue status controller, the ungater and hot swap.
func SetupControllers(ctx context.Context, mgr ctrl.Manager, cfg *configv1beta1.AgentConfiguration, opts ...Option) error {
	o := options{nodeFailureClock: clock.RealClock{}, fencingClock: clock.RealClock{}, eventsClock: clock.RealClock{}, podsReadyClock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := startInformersWithCache(ctx, mgr); err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("strata-agent")
	admissions := admitevents.New(recorder, cfg.Events.Admissions, "Admit").WithClock(o.eventsClock)
	if err := mgr.Add(admissions); err != nil {
		return err
	}
	recorded := lifecycle.New(mgr.GetCache(), metrics.AgentLifecycle, clock.RealClock{})
	if cfg.Metrics.LocalQueueMetrics {
		recorded.WithLocalQueues(metrics.AgentLocalQueueLifecycle, mgr.GetClient())
	}
	if err := mgr.Add(recorded); err != nil {
		return err
	}
	capacity := cache.New()
	sched := scheduler.New(mgr.GetClient(), capacity, tas.OptionsFrom(cfg.TopologyAwareScheduling), recorder).WithAPIReader(mgr.GetAPIReader()).
		WithPodsReady(cfg.WaitForPodsReady, o.podsReadyClock).WithFairSharing(cfg.FairSharing).
		WithAdmissionFairSharing(queue.NewAdmissionFairSharing(cfg.AdmissionFairSharing))
	fence := fencing.New(mgr.GetClient(), recorder, o.fencingClock, cfg.Fencing.Namespace, sched.Wake)
	sched.WithHolds(fence.Holds)
	if err := fence.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := fencing.NewPodsGone(mgr.GetClient(), mgr.GetAPIReader(), recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := capacity.SetupWithManager(ctx, mgr, cache.Hooks{Workload: sched.WorkloadEvent, Queue: sched.Wake}); err != nil {
		return err
	}
	if err := mgr.Add(sched); err != nil {
		return err
	}
	summaries, err := summary.NewSummaryCache(mgr)
	if err != nil {
		return err
	}
	if err := mgr.Add(summary.NewPublisher(mgr.GetClient(), summaries, capacity, cfg.Summary, clock.RealClock{}).WithInformers(mgr.GetCache()).WithFairSharing(cfg.FairSharing != nil)); err != nil {
		return err
	}
	if err := nodefailure.NewReconciler(mgr.GetClient(), capacity, cfg.NodeFailure, o.nodeFailureClock, recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := ungater.NewReconciler(mgr.GetClient(), cfg.Queueing.UngateBatchPeriod.Duration).WithBypassCheck(mgr.GetAPIReader(), recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	// Also with waitForPodsReady off: it takes back the admissions of
	// deactivated Workloads, which not every kind's controller does.
	if err := podsready.NewReconciler(mgr.GetClient(), cfg.WaitForPodsReady, o.podsReadyClock, recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := admissionchecks.NewReconciler(mgr.GetClient(), o.podsReadyClock, recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	// Kueue's ProvisioningRequest check; without the cluster autoscaler's
	// CRD its AdmissionChecks stay inactive, saying so.
	// Strata's own CRDs older than the agent (their kinds run flat, or
	// not at all, saying so) and the optional APIs below are waited for.
	missing := cmdutil.Unserved(mgr.GetRESTMapper(), mgr.GetScheme(), &strata.Cohort{}, &strata.AdmissionCheck{}, &strata.ProvisioningRequestConfig{})
	prServed := provisioning.Served(mgr.GetRESTMapper())
	if !prServed {
		missing = append(missing, provisioning.GVK)
	}
	if err := provisioning.NewReconciler(mgr.GetClient(), clock.RealClock{}, recorder, prServed).SetupWithManager(mgr); err != nil {
		return err
	}
	// Kueue's resource-in-use finalizer on ClusterQueues, ResourceFlavors
	// and Topologies.
	if err := inuse.Setup(ctx, mgr, recorder); err != nil {
		return err
	}
	queueWorkloads, err := queueindex.SetupQueueWorkloads(ctx, mgr.GetCache())
	if err != nil {
		return err
	}
	lqs := localqueue.NewReconciler(mgr.GetClient(), queueWorkloads, clock.RealClock{}).
		WithAdmissionFairSharing(queue.NewAdmissionFairSharing(cfg.AdmissionFairSharing))
	if cfg.Metrics.LocalQueueMetrics {
		lqs.WithMetrics(metrics.AgentLocalQueues, metrics.AgentLocalQueueLifecycle)
	}
	if err := lqs.SetupWithManager(mgr); err != nil {
		return err
	}
	for _, r := range kinds.Registered {
		if !kinds.Serves(r.Kind, mgr.GetRESTMapper()) {
			ctrl.Log.WithName("setup").Info("Not running this workload kind: the cluster does not serve its API; once its CRD is installed, strata-agent restarts to run it",
				"kind", r.Kind.GroupVersionKind().String())
			missing = append(missing, r.Kind.GroupVersionKind())
			continue
		}
		// A kind with a controller of its own (LeaderWorkerSets: one
		// workload per group, without suspension) has its own intake.
		if r.AgentController != nil {
			if err := r.AgentController(mgr, recorder, tas.OptionsFrom(cfg.TopologyAwareScheduling)); err != nil {
				return err
			}
			continue
		}
		if err := jobs.NewKindReconciler(r.Kind, mgr.GetClient(), recorder).WithAdmissionEvents(admissions).WithClock(o.podsReadyClock).
			WithTAS(tas.OptionsFrom(cfg.TopologyAwareScheduling)).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if o.apiWatch > 0 && len(missing) > 0 {
		w, err := cmdutil.NewAPIWatch(mgr.GetConfig(), missing)
		if err != nil {
			return err
		}
		return mgr.Add(w.WithInterval(o.apiWatch))
	}
	return nil
}
