// Package controller wires strata-hub's controllers into a manager.
package controller

import (
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/hub/controller/workercluster"
	"strata.dev/strata/hub/fleet"
)

// SetupControllers adds the hub's fleet and controllers to mgr and returns
// the fleet.
func SetupControllers(mgr ctrl.Manager, cfg *configv1beta1.HubConfiguration) (*fleet.Fleet, error) {
	f := fleet.New(mgr.GetScheme(), cfg.Origin)
	if err := mgr.Add(f); err != nil {
		return nil, err
	}
	if err := workercluster.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), f, cfg, clock.RealClock{}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return f, nil
}
