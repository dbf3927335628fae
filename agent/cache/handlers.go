package cache

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
)

// Hooks are called by the cache's informer handlers after the cache has
// applied an event, so that what they feed is never ahead of the cache.
type Hooks struct {
	// Workload is called with a Workload's current object, or with deleted
	// set once it is gone.
	Workload func(wl *strata.Workload, deleted bool)
	// Queue is called after every ClusterQueue and LocalQueue event.
	Queue func()
}

// SetupWithManager feeds the cache from the manager's informers and calls
// hooks after each Workload, ClusterQueue and LocalQueue event.
func (c *Cache) SetupWithManager(ctx context.Context, mgr ctrl.Manager, hooks Hooks) error {
	wake := func(any) {
		if hooks.Queue != nil {
			hooks.Queue()
		}
	}
	log := ctrl.LoggerFrom(ctx).WithName("capacity-cache")
	handlers := []struct {
		obj     client.Object
		set     func(obj any)
		deleted func(obj any)
	}{
		{&strata.Topology{}, func(o any) { c.SetTopology(o.(*strata.Topology)) }, func(o any) { c.DeleteTopology(o.(*strata.Topology).Name) }},
		{&strata.ResourceFlavor{}, func(o any) { c.SetFlavor(o.(*strata.ResourceFlavor)) }, func(o any) { c.DeleteFlavor(o.(*strata.ResourceFlavor).Name) }},
		{&corev1.Node{}, func(o any) { c.SetNode(o.(*corev1.Node)) }, func(o any) { c.DeleteNode(o.(*corev1.Node).Name) }},
		{&corev1.Pod{}, func(o any) { c.SetPod(o.(*corev1.Pod)) }, func(o any) { c.DeletePod(o.(*corev1.Pod).UID) }},
		{&strata.ClusterQueue{}, wake, wake},
		{&strata.LocalQueue{}, wake, wake},
		{&strata.Workload{}, func(o any) {
			wl := o.(*strata.Workload)
			key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
			switch {
			case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
				c.RemoveWorkload(key)
			case wl.Status.Admission == nil:
				c.RemoveWorkloadIfNewer(key, wl) // evicted or requeued
			default:
				// Admitted before this agent started, by another replica, or
				// changed by hot swap.
				if err := c.SyncAdmitted(key, wl); err != nil {
					log.Error(err, "Accounting an admitted workload", "workload", key)
				}
			}
			if hooks.Workload != nil {
				hooks.Workload(wl, false)
			}
		}, func(o any) {
			wl := o.(*strata.Workload)
			c.ForgetWorkload(types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}, wl.UID)
			if hooks.Workload != nil {
				hooks.Workload(wl, true)
			}
		}},
	}
	for _, h := range handlers {
		inf, err := mgr.GetCache().GetInformer(ctx, h.obj)
		if err != nil {
			return err
		}
		set, deleted := h.set, h.deleted
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { set(o) },
			UpdateFunc: func(_, o any) { set(o) },
			DeleteFunc: func(o any) {
				if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				deleted(o)
			},
		})
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.synced = append(c.synced, reg.HasSynced)
		c.mu.Unlock()
	}
	// Cohorts are watched once the manager's cache has synced, not with
	// it: the manager starts no controller before every informer of its
	// cache has synced, and on a cluster without Cohort objects (flat
	// cohorts, or none) their list answers only at the API server's next
	// progress notification, more than half a second later. The
	// scheduler lists them only when a ClusterQueue names a cohort.
	return mgr.Add(watchCohorts(func(ctx context.Context) error {
		for _, late := range []struct {
			obj     client.Object
			missing string
		}{
			{&strata.Cohort{}, "The Cohort CRD is not installed: cohorts are flat (apply the chart's crds/: the agent restarts itself once they are served)"},
			// AdmissionChecks as Cohorts: read only when a ClusterQueue
			// names one.
			{&strata.AdmissionCheck{}, "The AdmissionCheck CRD is not installed: a ClusterQueue naming checks admits nothing (apply the chart's crds/: the agent restarts itself once they are served)"},
		} {
			inf, err := mgr.GetCache().GetInformer(ctx, late.obj, crcache.BlockUntilSynced(false))
			if meta.IsNoMatchError(err) {
				// CRDs older than the kind (helm upgrade does not update
				// them).
				log.Info(late.missing)
				continue
			}
			if err != nil {
				return err
			}
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    wake,
				UpdateFunc: func(_, o any) { wake(o) },
				DeleteFunc: wake,
			}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// watchCohorts runs on every replica (the cache is warm on a standby),
// once the manager's cache has synced.
type watchCohorts func(context.Context) error

func (w watchCohorts) Start(ctx context.Context) error { return w(ctx) }

func (watchCohorts) NeedLeaderElection() bool { return false }
