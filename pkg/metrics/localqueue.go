package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

// LocalQueueGauges are Kueue's LocalQueue gauges (its LocalQueueMetrics
// feature), by the queue's name and namespace: pending workloads by
// status, active workloads, whether the queue is active, and what its
// workloads reserve and use per flavor and resource (cpu in cores, memory
// in bytes). A binary records them only when its configuration's
// metrics.localQueueMetrics is on: one set of series per LocalQueue.
type LocalQueueGauges struct {
	Pending                         *prometheus.GaugeVec
	ReservingActive, AdmittedActive *prometheus.GaugeVec
	Status                          *prometheus.GaugeVec
	Reservation, Usage              *prometheus.GaugeVec
	// series are each LocalQueue's, replaced at once by Record.
	series Series
}

// LocalQueueState is what LocalQueueGauges.Record shows of one queue.
type LocalQueueState struct {
	// Pending counts its pending workloads by status (queue.PendingActive,
	// queue.PendingInadmissible).
	Pending map[string]int
	// Status is the status to be written (its counts and Active
	// condition).
	Status *strata.LocalQueueStatus
	// Reservation and Usage are what its workloads holding quota reserve
	// and its admitted ones use, by flavor.
	Reservation, Usage map[string]map[string]float64
}

// buildLocalQueueGauges returns LocalQueueGauges named prefix...,
// unregistered.
func buildLocalQueueGauges(prefix string) *LocalQueueGauges {
	vec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: prefix + name, Help: help}, append([]string{"name", "namespace"}, labels...))
	}
	return &LocalQueueGauges{
		Pending: vec("local_queue_pending_workloads", "Valid workloads waiting for admission, per LocalQueue and status (active, inadmissible: as strata_pending_workloads).", "status"),
		ReservingActive: vec("local_queue_reserving_active_workloads",
			"Workloads holding a quota reservation that have not finished, per LocalQueue."),
		AdmittedActive: vec("local_queue_admitted_active_workloads", "Admitted workloads that have not finished, per LocalQueue."),
		Status: vec("local_queue_status", "1 for the status of a LocalQueue's Active condition (True, False, Unknown), 0 for the others.",
			"active"),
		Reservation: vec("local_queue_resource_reservation",
			"What a LocalQueue's workloads holding quota reserve, per flavor and resource (cpu in cores, memory in bytes).", "flavor", "resource"),
		Usage: vec("local_queue_resource_usage",
			"What a LocalQueue's admitted workloads use, per flavor and resource (cpu in cores, memory in bytes).", "flavor", "resource"),
	}
}

func newLocalQueueGauges(prefix string) *LocalQueueGauges {
	g := buildLocalQueueGauges(prefix)
	register(g.Pending, g.ReservingActive, g.AdmittedActive, g.Status, g.Reservation, g.Usage)
	return g
}

// Record sets the gauges of LocalQueue key from st, in place of those it
// had.
func (g *LocalQueueGauges) Record(key types.NamespacedName, st LocalQueueState) {
	name, ns := key.Name, key.Namespace
	g.series.Replace(key.String(), func(put Put) {
		for _, s := range []string{"active", "inadmissible"} {
			put(g.Pending, float64(st.Pending[s]), name, ns, s)
		}
		put(g.ReservingActive, float64(st.Status.ReservingWorkloads), name, ns)
		put(g.AdmittedActive, float64(st.Status.AdmittedWorkloads), name, ns)
		active := "Unknown"
		if c := meta.FindStatusCondition(st.Status.Conditions, strata.LocalQueueActive); c != nil {
			active = string(c.Status)
		}
		for _, s := range []string{"True", "False", "Unknown"} {
			v := 0.0
			if s == active {
				v = 1
			}
			put(g.Status, v, name, ns, s)
		}
		for flavor, rs := range st.Reservation {
			for r, v := range rs {
				put(g.Reservation, v, name, ns, flavor, r)
			}
		}
		for flavor, rs := range st.Usage {
			for r, v := range rs {
				put(g.Usage, v, name, ns, flavor, r)
			}
		}
	})
}

// Forget removes the gauges of LocalQueue key (deleted).
func (g *LocalQueueGauges) Forget(key types.NamespacedName) { g.series.Drop(key.String()) }

// AgentLocalQueues are strata-agent's: strata_local_queue_....
var AgentLocalQueues = newLocalQueueGauges("strata_")

// HubLocalQueues are strata-hub's: strata_hub_local_queue_....
var HubLocalQueues = newLocalQueueGauges("strata_hub_")

// LocalQueueLifecycle are Kueue's LocalQueue lifecycle metrics, by the
// queue's name and namespace: the counters and wait times of Lifecycle,
// recorded with them (pkg/lifecycle) when metrics.localQueueMetrics is on.
type LocalQueueLifecycle struct {
	QuotaReserved, Admitted                      *prometheus.CounterVec
	Evicted                                      *prometheus.CounterVec
	QuotaReservedWait, AdmissionWait, ChecksWait *prometheus.HistogramVec
}

func newLocalQueueLifecycle(prefix, who string) *LocalQueueLifecycle {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + name, Help: help}, append([]string{"name", "namespace"}, labels...))
	}
	wait := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18)}, []string{"name", "namespace"})
	}
	l := &LocalQueueLifecycle{
		QuotaReserved: counter("local_queue_quota_reserved_workloads_total", "Workloads that reserved quota"+who+", per LocalQueue."),
		Admitted:      counter("local_queue_admitted_workloads_total", "Workloads admitted"+who+", per LocalQueue."),
		Evicted: counter("local_queue_evicted_workloads_total", "Admitted workloads evicted"+who+", per LocalQueue and reason (the Evicted condition's).",
			"reason"),
		QuotaReservedWait: wait("local_queue_quota_reserved_wait_time_seconds", "Time from a workload's creation or requeueing to its quota reservation"+who+", per LocalQueue."),
		AdmissionWait:     wait("local_queue_admission_wait_time_seconds", "Time from a workload's creation or requeueing to its admission"+who+", per LocalQueue."),
		ChecksWait:        wait("local_queue_admission_checks_wait_time_seconds", "Time from a workload's quota reservation to its admission once its admission checks are Ready"+who+", per LocalQueue."),
	}
	register(l.QuotaReserved, l.Admitted, l.Evicted, l.QuotaReservedWait, l.AdmissionWait, l.ChecksWait)
	return l
}

// Forget removes the series of LocalQueue key (deleted).
func (l *LocalQueueLifecycle) Forget(key types.NamespacedName) {
	match := prometheus.Labels{"name": key.Name, "namespace": key.Namespace}
	for _, c := range []*prometheus.CounterVec{l.QuotaReserved, l.Admitted, l.Evicted} {
		c.DeletePartialMatch(match)
	}
	for _, h := range []*prometheus.HistogramVec{l.QuotaReservedWait, l.AdmissionWait, l.ChecksWait} {
		h.DeletePartialMatch(match)
	}
}

// AgentLocalQueueLifecycle are strata-agent's.
var AgentLocalQueueLifecycle = newLocalQueueLifecycle("strata_", "")

// HubLocalQueueLifecycle are strata-hub's, for its own Workloads.
var HubLocalQueueLifecycle = newLocalQueueLifecycle("strata_hub_", " by the hub")
