// Package controller wires the agent's controllers into a manager.
package controller

import (
	"context"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/nodefailure"
	"strata.dev/strata/agent/controller/ungater"
	"strata.dev/strata/agent/index"
	"strata.dev/strata/agent/scheduler"
	"strata.dev/strata/agent/summary"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// Option changes how SetupControllers wires the agent.
type Option func(*options)

type options struct {
	nodeFailureClock clock.WithDelayedExecution
}

// WithNodeFailureClock replaces the real clock that measures hot swap's
// delays, backoff and recovery timeout (tests step a fake one).
func WithNodeFailureClock(c clock.WithDelayedExecution) Option {
	return func(o *options) { o.nodeFailureClock = c }
}

// SetupControllers registers every controller of strata-agent with mgr:
// the capacity cache fed by informers, the scheduler, the summary publisher,
// the Job controller, the ungater and hot swap.
func SetupControllers(ctx context.Context, mgr ctrl.Manager, cfg *configv1beta1.AgentConfiguration, opts ...Option) error {
	o := options{nodeFailureClock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("strata-agent")
	capacity := cache.New()
	sched := scheduler.New(mgr.GetClient(), capacity, tas.OptionsFrom(cfg.TopologyAwareScheduling), recorder)
	if err := capacity.SetupWithManager(ctx, mgr, sched.Wake); err != nil {
		return err
	}
	if err := sched.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.Add(summary.NewPublisher(mgr.GetClient(), capacity, cfg.Summary, clock.RealClock{})); err != nil {
		return err
	}
	if err := nodefailure.NewReconciler(mgr.GetClient(), capacity, cfg.NodeFailure, o.nodeFailureClock, recorder).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := ungater.NewReconciler(mgr.GetClient(), cfg.Queueing.UngateBatchPeriod.Duration).SetupWithManager(mgr); err != nil {
		return err
	}
	return jobs.NewReconciler(mgr.GetClient(), recorder).SetupWithManager(mgr)
}
