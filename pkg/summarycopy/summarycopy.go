// Package summarycopy decides the hub's copies of its workers' capacity
// summaries: CapacitySummaries in the hub cluster, one per worker and
// flavor, labelled strata.dev/worker-cluster, that let a reader of the hub's
// API alone (kubectl strata dashboard, or anyone with get on
// capacitysummaries there) see each worker's topology and the hub's
// in-flight reservations on it. The functions are pure: the hub's
// summarycopies controller reads and writes.
package summarycopy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	strata "strata.dev/strata/api/v1beta1"
)

// Published selects the summaries an agent publishes: those without the
// WorkerClusterLabel. An agent and the hub's reads of a worker use it, so
// that a hub cluster that is also a worker neither collects nor plans on
// the hub's copies.
func Published() labels.Selector {
	req, err := labels.NewRequirement(strata.WorkerClusterLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant key
	}
	return labels.NewSelector().Add(*req)
}

// Of selects the hub's copies of one worker's summaries.
func Of(worker string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{strata.WorkerClusterLabel: worker})
}

// Name is the name of the copy of worker's summary of flavor:
// "<worker>.<flavor>" when the worker's name has no dot and that is a
// valid name; otherwise the worker's name (its first 200 characters) and
// a hash of the pair. Names of both may hold dots, so "<worker>.<flavor>"
// alone would give worker "a.b" with flavor "c" and worker "a" with
// flavor "b.c" one copy.
func Name(worker, flavor string) string {
	name := worker + "." + flavor
	if !strings.Contains(worker, ".") && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(worker + "/" + flavor)) // '/' is in neither name
	return strings.TrimRight(worker[:min(len(worker), 200)], ".-") + "." + hex.EncodeToString(sum[:8])
}

// Status is the copy's status: the worker's summary as the hub last read
// it, without what only placement reads (the dispatches it counts, what
// preempting would free, which can be large, and the priority classes that
// go with it), and with the hub's in-flight reservations on it.
func Status(summary *strata.CapacitySummaryStatus, inFlight []strata.InFlightDomain) strata.CapacitySummaryStatus {
	out := *summary.DeepCopy()
	out.Dispatches = nil
	out.Preemptible = nil
	out.PriorityClasses = nil
	out.InFlight = inFlight
	if len(out.InFlight) == 0 {
		out.InFlight = nil
	}
	return out
}

// HeartbeatEvery is how old a copy's observedTime may get before the copy
// is written again although nothing else changed: a worker's agent renews
// its summary's observedTime often, and the copy need not follow each
// renewal.
const HeartbeatEvery = time.Minute

// Stale says whether a copy whose status is written must be written again
// as want: anything but the observedTime differs, or the observedTime is
// HeartbeatEvery behind.
func Stale(written, want *strata.CapacitySummaryStatus) bool {
	a, b := *written, *want
	a.ObservedTime, b.ObservedTime = nil, nil
	if !equality.Semantic.DeepEqual(&a, &b) {
		return true
	}
	switch {
	case want.ObservedTime == nil:
		return written.ObservedTime != nil
	case written.ObservedTime == nil:
		return true
	}
	return want.ObservedTime.Sub(written.ObservedTime.Time) >= HeartbeatEvery
}
