// Package metrics holds Strata's Prometheus metrics (prefix strata_),
// registered in controller-runtime's registry and served on the binaries'
// metrics endpoint. Label sets are bounded: queues, flavors, top-level
// domains and resources.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	strata "strata.dev/strata/api/v1beta1"
)

var (
	// AdmissionLatency is the time from a workload's creation to its admission.
	AdmissionLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_admission_latency_seconds",
		Help:    "Time from a workload's creation to its admission.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
	}, []string{"cluster_queue"})

	// PendingWorkloads is the number of valid workloads waiting per queue,
	// by status (queue.PendingActive, queue.PendingInadmissible).
	PendingWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_pending_workloads",
		Help: "Valid workloads waiting for admission, per ClusterQueue and status: inadmissible when a scheduling pass found it cannot be admitted now and said why in its Admitted condition, active when not yet tried, requeued, preempting, or in a StrictFIFO queue.",
	}, []string{"cluster_queue", "status"})

	// AdmittedPods is the number of pods of admitted, unfinished workloads per flavor.
	AdmittedPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_admitted_pods",
		Help: "Pods of admitted, unfinished workloads, per flavor.",
	}, []string{"flavor"})

	// FreeCapacity is the free capacity per flavor, top-level domain and resource.
	FreeCapacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_free_capacity",
		Help: "Free capacity of usable nodes per flavor, top-level topology domain and resource (cpu in cores, memory in bytes).",
	}, []string{"flavor", "domain", "resource"})

	// SummaryBytes is the JSON size of the last published capacity summary.
	SummaryBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_summary_bytes",
		Help: "JSON size of the last published CapacitySummary, per flavor.",
	}, []string{"flavor"})

	// SummaryTimestamp is when each flavor's summary was last published;
	// its age is time() - strata_summary_published_timestamp_seconds.
	SummaryTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_summary_published_timestamp_seconds",
		Help: "Unix time of the last published CapacitySummary, per flavor.",
	}, []string{"flavor"})
)

var (
	// PreemptedWorkloads counts the workloads an agent preempted, by the
	// preempting workload's ClusterQueue and the reason (Kueue's:
	// InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing,
	// InCohortFairSharing).
	PreemptedWorkloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_preempted_workloads_total",
		Help: "Workloads preempted, by the preempting workload's ClusterQueue and the reason.",
	}, []string{"preempting_cluster_queue", "reason"})

	// BorrowedQuota is what a ClusterQueue's admitted workloads hold beyond
	// its nominal quota, per flavor and resource.
	BorrowedQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_cluster_queue_borrowed_quota",
		Help: "Quota a ClusterQueue borrows from its cohort, per flavor and resource (cpu in cores, memory in bytes).",
	}, []string{"cluster_queue", "flavor", "resource"})

	// CohortWeightedShare is a cohort's weighted share of what it borrows
	// from its parent under fair sharing (Kueue's
	// kueue_cohort_weighted_share).
	CohortWeightedShare = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_cohort_weighted_share",
		Help: "A cohort's weighted share of what it borrows from its parent cohort under fair sharing (0 for a root cohort).",
	}, []string{"cohort"})

	// LentQuota is the part of a ClusterQueue's unused nominal quota that
	// other queues of its cohort use, per flavor and resource.
	LentQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_cluster_queue_lent_quota",
		Help: "Quota of a ClusterQueue that other queues of its cohort use, per flavor and resource (cpu in cores, memory in bytes).",
	}, []string{"cluster_queue", "flavor", "resource"})
)

// The results of an admission attempt.
const (
	AttemptSuccess      = "success"
	AttemptInadmissible = "inadmissible"
)

var (
	// AdmissionAttempts counts the agent's scheduling passes that had
	// pending workloads to try, by result (AttemptSuccess: it admitted at
	// least one; AttemptInadmissible: none), as Kueue's
	// kueue_admission_attempts_total counts its cycles.
	AdmissionAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_admission_attempts_total",
		Help: "Scheduling passes that tried pending workloads, by result: success when the pass admitted at least one, inadmissible when none.",
	}, []string{"result"})

	// AdmissionAttemptDuration is how long those passes took, by result.
	AdmissionAttemptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_admission_attempt_duration_seconds",
		Help:    "Time a scheduling pass that tried pending workloads took, by result (success, inadmissible).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"result"})
)

func init() {
	register(AdmissionLatency, PendingWorkloads, AdmittedPods, FreeCapacity, SummaryBytes, SummaryTimestamp,
		PreemptedWorkloads, BorrowedQuota, LentQuota, CohortWeightedShare, AdmissionAttempts, AdmissionAttemptDuration)
}

// QueueGauges show ClusterQueues' status as Kueue's metrics do: their
// active workloads (status.admittedWorkloads and reservingWorkloads),
// whether they can admit (Status), their weighted share under fair
// sharing, and usage (status.flavorsUsage), reservations (the totals of
// status.flavorsReservation), nominal quota, borrowing and lending limits
// per flavor and resource (cpu in cores, memory in bytes) with the
// queue's cohort.
type QueueGauges struct {
	AdmittedActive, ReservingActive  *prometheus.GaugeVec
	Usage, Reservation, NominalQuota *prometheus.GaugeVec
	BorrowingLimit, LendingLimit     *prometheus.GaugeVec
	// Status is 1 for the queue's status (QueueActive, QueuePending,
	// QueueTerminating) and 0 for the two others, as Kueue's
	// kueue_cluster_queue_status.
	Status *prometheus.GaugeVec
	// WeightedShare is status.fairSharing.weightedShare, by
	// cluster_queue and cohort, while fair sharing is on.
	WeightedShare *prometheus.GaugeVec
	// series are each ClusterQueue's, replaced at once by Record.
	series Series
}

// A ClusterQueue's status in QueueGauges.Status, Kueue's values.
const (
	// QueuePending: the queue exists but admits nothing (its Active
	// condition is False: a flavor or admission check missing, stopped,
	// a cohort cycle).
	QueuePending = "pending"
	// QueueActive: the queue admits workloads.
	QueueActive = "active"
	// QueueTerminating: the queue is being deleted.
	QueueTerminating = "terminating"
)

var queueStatuses = []string{QueuePending, QueueActive, QueueTerminating}

func newQueueGauges(prefix string) *QueueGauges {
	g := buildQueueGauges(prefix)
	register(g.AdmittedActive, g.ReservingActive, g.Usage, g.Reservation, g.NominalQuota,
		g.BorrowingLimit, g.LendingLimit, g.Status, g.WeightedShare)
	return g
}

// buildQueueGauges returns QueueGauges named prefix..., unregistered.
func buildQueueGauges(prefix string) *QueueGauges {
	perQueue := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: prefix + name, Help: help}, append([]string{"cluster_queue"}, labels...))
	}
	perResource := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: prefix + name, Help: help + ", per flavor and resource (cpu in cores, memory in bytes)."},
			[]string{"cohort", "cluster_queue", "flavor", "resource"})
	}
	return &QueueGauges{
		AdmittedActive:  perQueue("admitted_active_workloads", "Admitted workloads that have not finished, per ClusterQueue."),
		ReservingActive: perQueue("reserving_active_workloads", "Workloads holding a quota reservation that have not finished (admitted, or waiting for admission checks), per ClusterQueue."),
		Usage:           perResource("cluster_queue_resource_usage", "What a ClusterQueue's admitted workloads use"),
		Reservation:     perResource("cluster_queue_resource_reservation", "What a ClusterQueue's workloads holding quota reserve"),
		NominalQuota:    perResource("cluster_queue_nominal_quota", "A ClusterQueue's nominal quota"),
		BorrowingLimit:  perResource("cluster_queue_borrowing_limit", "A ClusterQueue's borrowing limit, where it sets one"),
		LendingLimit:    perResource("cluster_queue_lending_limit", "A ClusterQueue's lending limit, where it sets one"),
		Status: perQueue("cluster_queue_status", "1 for a ClusterQueue's status (pending: it admits nothing, see its Active condition; active; terminating: being deleted), 0 for the others.",
			"status"),
		WeightedShare: perQueue("cluster_queue_weighted_share", "A ClusterQueue's weighted share of what it borrows under fair sharing (status.fairSharing.weightedShare), per ClusterQueue and cohort.",
			"cohort"),
	}
}

// AgentQueues are strata-agent's: strata_admitted_active_workloads,
// strata_cluster_queue_resource_usage, ...
var AgentQueues = newQueueGauges("strata_")

// HubQueues are strata-hub's, for its ClusterQueues: strata_hub_....
var HubQueues = newQueueGauges("strata_hub_")

// QueueStatus is a ClusterQueue's status for QueueGauges.Status, from
// the queue and the status st to be written: terminating while it is
// being deleted (the agent's and the hub's resource-in-use finalizer keep
// it while what it admitted runs); else as its Active condition says
// (the agent's and the hub's both write one); without one yet, pending
// while stopped, else active.
func QueueStatus(cq *strata.ClusterQueue, st *strata.ClusterQueueStatus) string {
	if cq.DeletionTimestamp != nil {
		return QueueTerminating
	}
	if c := meta.FindStatusCondition(st.Conditions, "Active"); c != nil {
		if c.Status == metav1.ConditionTrue {
			return QueueActive
		}
		return QueuePending
	}
	if strata.Stopped(cq.Spec.StopPolicy) {
		return QueuePending
	}
	return QueueActive
}

// Record sets the gauges of ClusterQueue cq from the status st to be
// written and its flavors' quotas, in place of those it had: a scrape
// meanwhile finds the old values or the new ones. The resource gauges
// carry the cohort as Kueue's do.
func (g *QueueGauges) Record(cq *strata.ClusterQueue, st *strata.ClusterQueueStatus, flavors []strata.FlavorQuotas) {
	name, cohort := cq.Name, cq.Spec.Cohort
	g.series.Replace(name, func(put Put) {
		put(g.AdmittedActive, float64(st.AdmittedWorkloads), name)
		put(g.ReservingActive, float64(st.ReservingWorkloads), name)
		status := QueueStatus(cq, st)
		for _, s := range queueStatuses {
			v := 0.0
			if s == status {
				v = 1
			}
			put(g.Status, v, name, s)
		}
		if st.FairSharing != nil {
			put(g.WeightedShare, float64(st.FairSharing.WeightedShare), name, cohort)
		}
		for _, f := range st.FlavorsUsage {
			for r, q := range f.Resources {
				put(g.Usage, q.AsApproximateFloat64(), cohort, name, f.Name, string(r))
			}
		}
		for _, f := range st.FlavorsReservation {
			for _, r := range f.Resources {
				put(g.Reservation, r.Total.AsApproximateFloat64(), cohort, name, f.Name, string(r.Name))
			}
		}
		for _, fq := range flavors {
			for _, r := range fq.Resources {
				put(g.NominalQuota, r.NominalQuota.AsApproximateFloat64(), cohort, name, fq.Name, string(r.Name))
				if r.BorrowingLimit != nil {
					put(g.BorrowingLimit, r.BorrowingLimit.AsApproximateFloat64(), cohort, name, fq.Name, string(r.Name))
				}
				if r.LendingLimit != nil {
					put(g.LendingLimit, r.LendingLimit.AsApproximateFloat64(), cohort, name, fq.Name, string(r.Name))
				}
			}
		}
	})
}

// Forget removes the gauges of ClusterQueue name (deleted).
func (g *QueueGauges) Forget(name string) { g.series.Drop(name) }

// Lifecycle are the workload lifecycle metrics of one binary (Kueue's
// names under its prefix), recorded by pkg/lifecycle from the Workloads'
// transitions, all by ClusterQueue.
type Lifecycle struct {
	// QuotaReserved and Admitted count reservations and admissions.
	QuotaReserved, Admitted *prometheus.CounterVec
	// Evicted counts evictions, by ClusterQueue and reason.
	Evicted *prometheus.CounterVec
	// QuotaReservedWait and AdmissionWait are the times from a workload's
	// creation or requeueing to its reservation and its admission;
	// ChecksWait from its reservation to its admission, for queues with
	// admission checks.
	QuotaReservedWait, AdmissionWait, ChecksWait *prometheus.HistogramVec
	// Latency, when set, is the time from a workload's creation to its
	// admission.
	Latency *prometheus.HistogramVec
}

// newLifecycle returns the lifecycle metrics named prefix_..., registered.
func newLifecycle(prefix, who string, latency *prometheus.HistogramVec) Lifecycle {
	wait := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18)}, []string{"cluster_queue"})
	}
	l := Lifecycle{
		QuotaReserved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "quota_reserved_workloads_total",
			Help: "Workloads that reserved quota" + who + ", per ClusterQueue."}, []string{"cluster_queue"}),
		Admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "admitted_workloads_total",
			Help: "Workloads admitted" + who + ", per ClusterQueue."}, []string{"cluster_queue"}),
		Evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "evicted_workloads_total",
			Help: "Admitted workloads evicted" + who + ", per ClusterQueue and reason (the Evicted condition's)."}, []string{"cluster_queue", "reason"}),
		QuotaReservedWait: wait("quota_reserved_wait_time_seconds", "Time from a workload's creation or requeueing to its quota reservation"+who+"."),
		AdmissionWait:     wait("admission_wait_time_seconds", "Time from a workload's creation or requeueing to its admission"+who+"."),
		ChecksWait:        wait("admission_checks_wait_time_seconds", "Time from a workload's quota reservation to its admission once its admission checks are Ready"+who+"."),
		Latency:           latency,
	}
	register(l.QuotaReserved, l.Admitted, l.Evicted, l.QuotaReservedWait, l.AdmissionWait, l.ChecksWait)
	return l
}

// Forget removes the series of ClusterQueue name (deleted), as Kueue
// clears a deleted queue's.
func (l Lifecycle) Forget(name string) {
	match := prometheus.Labels{"cluster_queue": name}
	for _, c := range []*prometheus.CounterVec{l.QuotaReserved, l.Admitted, l.Evicted} {
		c.DeletePartialMatch(match)
	}
	for _, h := range []*prometheus.HistogramVec{l.QuotaReservedWait, l.AdmissionWait, l.ChecksWait, l.Latency} {
		if h != nil {
			h.DeletePartialMatch(match)
		}
	}
}

// ForgetAgentQueue removes the counters and histograms of strata-agent's
// ClusterQueue name (deleted): its lifecycle metrics and the preemptions
// its workloads made.
func ForgetAgentQueue(name string) {
	AgentLifecycle.Forget(name)
	PreemptedWorkloads.DeletePartialMatch(prometheus.Labels{"preempting_cluster_queue": name})
}

// AgentLifecycle are strata-agent's lifecycle metrics: strata_..._total
// and strata_..._seconds, and strata_admission_latency_seconds.
var AgentLifecycle = newLifecycle("strata_", "", AdmissionLatency)

// HubLifecycle are strata-hub's: strata_hub_..., for its own Workloads
// (reserved and admitted when a worker reserves quota for the copy;
// reserved at the hub first where the hub queue has admission checks).
var HubLifecycle = newLifecycle("strata_hub_", " by the hub", nil)

var (
	// Replacements counts failed-node replacement searches by result
	// (succeeded, failed); their sum is the attempts.
	Replacements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_node_replacements_total",
		Help: "Failed-node replacement attempts, by result (succeeded, failed).",
	}, []string{"result"})

	// NodeFailureEvictions counts workloads evicted by hot swap, by reason
	// (MultipleNodes, MultiplePodSets, ThresholdExceeded, NoReplacement).
	NodeFailureEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_node_failure_evictions_total",
		Help: "Workloads evicted and requeued because a failed node could not be replaced, by reason (MultipleNodes, MultiplePodSets, ThresholdExceeded, NoReplacement).",
	}, []string{"reason"})

	// ReplacementLatency is the time from a node failure being first
	// observable (across retries) to the new assignment being written.
	ReplacementLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_node_replacement_latency_seconds",
		Help:    "Time from a node failure being observable to the new assignment being written.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
)

func init() {
	register(Replacements, ReplacementLatency, NodeFailureEvictions)
}

// The hub's metrics.
var (
	// HubPlacementLatency is the time one placement decision takes.
	HubPlacementLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_hub_placement_latency_seconds",
		Help:    "Time the hub takes to decide where one workload goes.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
	})

	// HubDispatchPass is the time one dispatch pass takes, from reading
	// the pending Workloads to the last decision (its writes excluded).
	HubDispatchPass = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_hub_dispatch_pass_seconds",
		Help:    "Time one dispatch pass takes to read the pending workloads and decide, its API writes excluded.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 1.5, 32),
	})

	// HubPendingWorkloads is the number of Workloads the last pass found
	// waiting to be placed.
	HubPendingWorkloads = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_hub_pending_workloads",
		Help: "Workloads waiting to be dispatched, as the last dispatch pass found them.",
	})

	// HubPreemptionDispatches counts dispatches marked to preempt, per
	// worker and flavor.
	HubPreemptionDispatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hub_preemption_dispatches_total",
		Help: "Dispatches of workloads that fit nowhere, to the one worker chosen to preempt for them, per worker and flavor.",
	}, []string{"cluster", "flavor"})
	// HubDecisions counts dispatches per worker and flavor.
	HubDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hub_dispatches_total",
		Help: "Workloads the hub dispatched, per worker cluster and flavor.",
	}, []string{"cluster", "flavor"})

	// HubRejections counts dispatches a worker refused or did not admit in
	// time, per worker and reason.
	HubRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hub_rejections_total",
		Help: "Dispatches undone because the worker refused them or did not admit them in time, per worker cluster and reason.",
	}, []string{"cluster", "reason"})

	// HubFenceRenewalFailures counts renewals of a worker's fencing Lease
	// that certainly failed, per worker and reason.
	HubFenceRenewalFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hub_fence_renewal_failures_total",
		Help: "Renewals of a worker's fencing Lease that failed (the Lease was not written), per worker cluster and reason; while they fail, the worker gets no new copies.",
	}, []string{"cluster", "reason"})

	// HubReservations is the number of in-flight reservations.
	HubReservations = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_hub_inflight_reservations",
		Help: "Dispatches the hub holds capacity for until a worker's summary counts them.",
	})

	// HubJournalDispatches is the number of dispatches the hub holds in
	// its dispatch journal only (not in their Workloads' status yet).
	HubJournalDispatches = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_hub_dispatch_journal_dispatches",
		Help: "Dispatches recorded in the hub's dispatch journal and not yet in their Workloads' status; set after every dispatch pass.",
	})
	// HubJournalPages is the number of journal pages (ConfigMaps) the hub
	// holds or has yet to delete.
	HubJournalPages = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_hub_dispatch_journal_pages",
		Help: "Pages (ConfigMaps) of the hub's dispatch journal still held or not deleted yet; set after every dispatch pass.",
	})
	// HubJournalWriteFailures counts journal pages the API server refused
	// or did not answer: their dispatches were not sent.
	HubJournalWriteFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_hub_dispatch_journal_write_failures_total",
		Help: "Dispatch journal pages that could not be written; their dispatches were not sent and are decided again by a later pass.",
	})

	// HubSummaryAge is the age of each worker's oldest summary when last read.
	HubSummaryAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_hub_summary_age_seconds",
		Help: "Age of the oldest capacity summary of each worker cluster, when the hub last read it.",
	}, []string{"cluster"})

	// HubConnected is 1 when the hub reaches a worker, 0 when not.
	HubConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_hub_worker_connected",
		Help: "1 when the hub reaches the worker cluster with the permissions it needs, else 0.",
	}, []string{"cluster"})

	// HubAdmissionLatency is the time from dispatch to the worker's admission.
	HubAdmissionLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_hub_dispatch_to_admission_seconds",
		Help:    "Time from a dispatch to the worker's admission of the copy, per worker cluster.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
	}, []string{"cluster"})
)

func init() {
	register(HubPlacementLatency, HubDispatchPass, HubPendingWorkloads, HubDecisions, HubPreemptionDispatches, HubRejections, HubFenceRenewalFailures, HubReservations, HubJournalDispatches, HubJournalPages, HubJournalWriteFailures, HubSummaryAge, HubConnected, HubAdmissionLatency)
}

// registered are the collectors register registered: every metric the
// binaries serve (their documentation is checked against it).
var registered []prometheus.Collector

// register registers cs in controller-runtime's registry, which the
// binaries serve.
func register(cs ...prometheus.Collector) {
	metrics.Registry.MustRegister(cs...)
	registered = append(registered, cs...)
}
