package tas

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// Mode is the kind of topology request.
type Mode int

const (
	// Unconstrained places pods wherever capacity is free (also the implicit
	// default on a topology-aware flavor).
	Unconstrained Mode = iota
	// Required puts all pods in one domain of Level.
	Required
	// Preferred puts all pods in one domain of Level if possible, else of the
	// lowest level above it where they fit, else spreads them.
	Preferred
)

func (m Mode) String() string {
	switch m {
	case Required:
		return "required"
	case Preferred:
		return "preferred"
	}
	return "unconstrained"
}

// Layer is one slice constraint: every group of Size consecutive pods in one
// domain of Level.
type Layer struct {
	Level string
	Size  int32
}

// Request is one pod set to place.
type Request struct {
	// Count is the number of pods.
	Count int32
	// PodRequests are the requests of one pod.
	PodRequests corev1.ResourceList
	Mode        Mode
	// Level is the node label key of a required or preferred request.
	Level string
	// Layers are the slice constraints, coarsest first; each size divides
	// the previous one and Count.
	Layers []Layer
	// Grouped says the pod set shares its domain with the other pod sets
	// of its group (podset-group-name): a replacement for its node stays
	// in that domain even when the node holds all of the pod set's pods.
	Grouped bool

	// Only when the lowest level is the host: nodes whose labels do not
	// match, or whose NoSchedule/NoExecute taints are not tolerated, are
	// skipped.
	NodeSelector map[string]string
	NodeAffinity *corev1.NodeSelector
	Tolerations  []corev1.Toleration

	// Avoid are domains the pods may not use (topology spreading: domains
	// above their share). Preferred ones are used only when the pods fit
	// nowhere else. A domain the snapshot does not have, or of a level
	// below a summary's leaf level, is left alone.
	Avoid []Avoid
}

// Avoid is a domain of Level, named by its values from the top level
// down to Level, that a request keeps out of.
type Avoid struct {
	Level     string
	Values    []string
	Preferred bool
}

// Options choose the algorithms, normally from the binary's configuration.
type Options struct {
	Required      configv1beta1.Algorithm
	Preferred     configv1beta1.Algorithm
	Unconstrained configv1beta1.Algorithm
	// BalancedPlacement spreads preferred requests evenly (KEP-2724
	// "Balanced placement") instead of packing them.
	BalancedPlacement bool
	// PartialSlices accepts a single slice layer whose size does not
	// divide the pod count (Kueue v0.20's TASPartialSlices): the last
	// count % size pods form one partial slice. Off, such a request is
	// invalid, as KEP-2724 says. The engine places a partial slice either
	// way; this is the rule the Jobs' intake applies
	// (workload.AllowPartialSlices).
	PartialSlices bool
}

// DefaultOptions are KEP-2724's recommended profile: BestFit for required
// and preferred requests, LeastFreeCapacity for unconstrained ones.
func DefaultOptions() Options {
	return Options{Required: configv1beta1.BestFit, Preferred: configv1beta1.BestFit, Unconstrained: configv1beta1.LeastFreeCapacity}
}

// OptionsFrom takes the algorithms of a configuration file.
func OptionsFrom(c configv1beta1.TopologyAwareScheduling) Options {
	return Options{Required: c.RequiredAlgorithm, Preferred: c.PreferredAlgorithm, Unconstrained: c.UnconstrainedAlgorithm,
		BalancedPlacement: c.BalancedPlacement, PartialSlices: c.PartialSlices}
}

func (o Options) algorithm(m Mode) configv1beta1.Algorithm {
	var a configv1beta1.Algorithm
	switch m {
	case Required:
		a = o.Required
	case Preferred:
		a = o.Preferred
	default:
		a = o.Unconstrained
	}
	if a == "" {
		return DefaultOptions().algorithm(m)
	}
	return a
}

// Assignment is where a pod set's pods go: per domain of the lowest level,
// in rank order (the first Count pods by index to the first domain, ...).
type Assignment struct {
	// Levels are the node label keys of Values: only the host level when it
	// is the lowest one, else every level down to the lowest.
	Levels  []string
	Domains []DomainAssignment
	// Tolerations of the pods, on an assignment a summary snapshot gave
	// (at its leaf level): committing it packs the pods onto the nodes
	// whose taints they tolerate, as they were counted. Not part of the
	// placement itself.
	Tolerations []corev1.Toleration `json:"-"`
	// NodeSelector and NodeAffinity of the pods, noted as Tolerations:
	// committing packs the pods onto the nodes they select.
	NodeSelector map[string]string    `json:"-"`
	NodeAffinity *corev1.NodeSelector `json:"-"`
}

// DomainAssignment is the pod count of one domain.
type DomainAssignment struct {
	Values []string
	Count  int32
}

// PodCount is the number of pods assigned.
func (a *Assignment) PodCount() int32 {
	var n int32
	for _, d := range a.Domains {
		n += d.Count
	}
	return n
}

// FirstRank returns the index of the first pod of each domain.
func (a *Assignment) FirstRank() []int32 {
	ranks := make([]int32, len(a.Domains))
	var next int32
	for i, d := range a.Domains {
		ranks[i] = next
		next += d.Count
	}
	return ranks
}

// DomainOfRank returns the position in Domains of the domain that holds the
// pod of the given rank (pod index minus the pod set's index offset), or -1
// when the rank is outside the assignment.
func (a *Assignment) DomainOfRank(rank int32) int {
	if rank < 0 {
		return -1
	}
	for i, d := range a.Domains {
		if rank < d.Count {
			return i
		}
		rank -= d.Count
	}
	return -1
}

// FitError says why a pod set does not fit, in words a person can act on.
type FitError struct {
	Reason string
}

func (e *FitError) Error() string { return e.Reason }

// LevelName is a short human name of a level label: "rack" for
// cloud.provider.com/topology-rack, "host" for kubernetes.io/hostname.
func LevelName(label string) string {
	if label == strata.HostnameLabel {
		return "host"
	}
	name := label[strings.LastIndex(label, "/")+1:]
	return strings.TrimPrefix(name, "topology-")
}

func nodes(n int64) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func pods(n int64) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}
