// Package v1beta1 holds the versioned configuration files of strata-agent
// (AgentConfiguration) and strata-hub (HubConfiguration), group
// config.strata.dev. Behaviour is chosen here, not with feature gates; the
// defaults follow KEP-2724's recommended behaviour.
//
// +kubebuilder:object:generate=true
// +groupName=config.strata.dev
package v1beta1
