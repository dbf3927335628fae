// Package controller wires the agent's controllers into a manager.
package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"strata.dev/strata/agent/controller/jobs"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// SetupControllers registers every controller of strata-agent with mgr.
func SetupControllers(mgr ctrl.Manager, _ *configv1beta1.AgentConfiguration) error {
	return jobs.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("strata-agent")).SetupWithManager(mgr)
}
