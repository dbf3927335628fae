// Package controller wires strata-hub's controllers into a manager.
package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/controller/clusterqueue"
	"strata.dev/strata/hub/controller/copies"
	"strata.dev/strata/hub/controller/jobs"
	"strata.dev/strata/hub/controller/summarycopies"
	"strata.dev/strata/hub/controller/workercluster"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/controller/localqueue"
	"strata.dev/strata/pkg/index"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/lifecycle"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
)

// Option changes how SetupControllers wires the hub.
type Option func(*options)

type options struct {
	clock clock.Clock
	// apiWatch: see WithRestartOnNewAPIs (0: off).
	apiWatch time.Duration
}

// WithRestartOnNewAPIs stops the manager with cmdutil.ErrNewAPI once the
// hub cluster serves a workload kind's API it did not serve at start,
// asking every interval: strata-hub then exits, and its Deployment
// starts it again taking that kind in.
func WithRestartOnNewAPIs(interval time.Duration) Option {
	return func(o *options) { o.apiWatch = interval }
}

// WithClock replaces the real clock the hub measures its timeouts and
// fencing with (tests give hub and worker clocks that disagree).
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// SetupControllers adds the hub's field indexes, fleet, controllers and
// dispatcher to mgr and returns the fleet.
func SetupControllers(mgr ctrl.Manager, cfg *configv1beta1.HubConfiguration, opts ...Option) (*fleet.Fleet, error) {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	if err := index.SetupQueues(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := workercluster.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	clk := o.clock
	recorder := mgr.GetEventRecorder("strata-hub")
	f := fleet.New(mgr.GetScheme(), cfg.Origin)
	f.SetClock(clk)
	f.SetCompression(cfg.WorkerConnections.Compression)
	f.SetFencing(fleet.Fencing{
		Enabled:       cfg.Fencing.Mode == configv1beta1.FencingEnabled,
		Namespace:     cfg.Dispatch.WorkerNamespace,
		FenceAfter:    cfg.Fencing.FenceAfter.Duration,
		RenewInterval: cfg.Fencing.RenewInterval.Duration,
		ReplaceAfter:  cfg.Fencing.ReplaceAfter.Duration,
	})
	if err := mgr.Add(f); err != nil {
		return nil, err
	}
	recorded := lifecycle.New(mgr.GetCache(), metrics.HubLifecycle, clk)
	if cfg.Metrics.LocalQueueMetrics {
		recorded.WithLocalQueues(metrics.HubLocalQueueLifecycle, mgr.GetClient())
	}
	if err := mgr.Add(recorded); err != nil {
		return nil, err
	}
	// The ClusterProfile and ManagedCluster CRDs are optional: without
	// them the hub starts, and those sources say so.
	apis, err := workercluster.DetectAPIs(mgr.GetRESTMapper())
	if err != nil {
		return nil, err
	}
	// The dispatches a pass decides are journalled in one write, and each
	// reaches its Workload's status with the copies controller's next
	// write of it (dispatch.Journal).
	journal := dispatch.NewJournal(mgr.GetClient(), mgr.GetAPIReader(), cfg.Namespace, cfg.Origin)
	journaled := func(cluster string) (int, bool) {
		select {
		case <-journal.Loaded():
			return len(journal.On(cluster)), true
		default:
			return 0, false // not read yet: what it holds is unknown
		}
	}
	if err := workercluster.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), f, cfg, apis, clk).WithJournaled(journaled).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if interval := cfg.Dispatch.SummaryCopyInterval.Duration; interval > 0 {
		if err := summarycopies.NewReconciler(mgr.GetClient(), f, interval, clk).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	served, missing := kinds.Served(kinds.Hub, mgr.GetRESTMapper())
	for _, k := range missing {
		ctrl.Log.WithName("setup").Info("Not taking in this workload kind: the hub does not serve its API; once its CRD is installed (the strata-hub chart can), strata-hub restarts to take it in",
			"kind", k.GroupVersionKind().String())
	}
	// A Cohort or AdmissionCheck CRD older than the hub (cohorts flat,
	// checks not seen, saying so) is waited for too.
	gvks := cmdutil.Unserved(mgr.GetRESTMapper(), mgr.GetScheme(), &strata.Cohort{}, &strata.AdmissionCheck{})
	// And so are the APIs of WorkerCluster sources (ClusterProfiles, OCM's
	// ManagedClusters).
	gvks = append(gvks, apis.Missing()...)
	for _, k := range missing {
		gvks = append(gvks, k.GroupVersionKind())
	}
	if o.apiWatch > 0 && len(gvks) > 0 {
		w, err := cmdutil.NewAPIWatch(mgr.GetConfig(), gvks)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(w.WithInterval(o.apiWatch)); err != nil {
			return nil, err
		}
	}
	for _, k := range served {
		if err := jobs.NewReconciler(k, mgr.GetClient(), recorder).WithTAS(tas.OptionsFrom(cfg.TopologyAwareScheduling)).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	queueWorkloads, err := index.SetupQueueWorkloads(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	lqs := localqueue.NewReconciler(mgr.GetClient(), queueWorkloads, clk).
		WithAdmissionFairSharing(queue.NewAdmissionFairSharing(cfg.AdmissionFairSharing))
	if cfg.Metrics.LocalQueueMetrics {
		lqs.WithMetrics(metrics.HubLocalQueues, metrics.HubLocalQueueLifecycle)
	}
	if err := lqs.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := clusterqueue.NewReconciler(mgr.GetClient(), queueWorkloads, clk).WithFairSharing(cfg.FairSharing != nil).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := clusterqueue.SetupInUse(ctx, mgr, recorder, queueWorkloads); err != nil {
		return nil, err
	}
	followed := copies.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), f, cfg, served, recorder, clk).WithJournal(journal)
	if err := followed.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	orphans := copies.NewOrphanCollector(mgr.GetClient(), f, followed, cfg.Dispatch.OrphanCheckInterval.Duration, clk)
	if err := mgr.Add(orphans); err != nil {
		return nil, err
	}
	// A worker that returns gets its fencing Lease renewed only once the
	// copies placed elsewhere meanwhile are gone from it.
	f.BeforeRenew(orphans.CollectWorker)
	d := dispatch.New(mgr.GetClient(), f, cfg, recorder, clk).WithJournal(journal)
	if err := mgr.Add(d); err != nil {
		return nil, err
	}
	// A pass follows whatever can change a decision.
	f.OnSummaries(func(string) { d.Wake() })
	wake := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.Wake() },
		UpdateFunc: func(any, any) { d.Wake() },
		DeleteFunc: func(any) { d.Wake() },
	}
	// Workloads and jobs also feed the dispatcher's index, which its
	// passes read instead of listing them.
	type watch struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
		indexed bool // feeds the index: passes wait for its initial list
	}
	handlers := []watch{
		{&strata.Workload{}, d.WorkloadEvents(), true},
		{&strata.WorkerCluster{}, wake, false},
		{&strata.LocalQueue{}, wake, false},
		{&strata.ClusterQueue{}, wake, false},
		{&strata.Cohort{}, wake, false},
		// A hub queue's check set Active (or not) changes what it
		// dispatches.
		{&strata.AdmissionCheck{}, wake, false},
	}
	for _, k := range served {
		handlers = append(handlers, watch{k.NewObject(), d.JobEvents(k), true})
	}
	for _, h := range handlers {
		inf, err := mgr.GetCache().GetInformer(ctx, h.obj)
		if _, cohort := h.obj.(*strata.Cohort); cohort && meta.IsNoMatchError(err) {
			// CRDs older than Cohorts (helm upgrade does not update
			// them): hub cohorts are flat until the CRD is applied and the
			// hub restarted.
			ctrl.Log.WithName("hub").Info("The Cohort CRD is not installed: cohorts are flat (apply the chart's crds/: the hub restarts itself once they are served)")
			continue
		}
		if _, check := h.obj.(*strata.AdmissionCheck); check && meta.IsNoMatchError(err) {
			ctrl.Log.WithName("hub").Info("The AdmissionCheck CRD is not installed: a hub queue naming checks dispatches nothing (apply the chart's crds/: the hub restarts itself once they are served)")
			continue
		}
		if err != nil {
			return nil, err
		}
		reg, err := inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, err
		}
		if h.indexed {
			d.Synced(reg.HasSynced)
		}
	}
	return f, nil
}
