package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
)

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// wl builds a Workload created at t0 with the given admission queue ("":
// none) and conditions.
func wl(queue string, conds ...metav1.Condition) *strata.Workload {
	w := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", CreationTimestamp: metav1.NewTime(t0)},
		Spec: strata.WorkloadSpec{QueueName: "team"}}
	if queue != "" {
		w.Status.Admission = &strata.Admission{ClusterQueue: queue}
	}
	w.Status.Conditions = conds
	return w
}

// dispatchedTo records a hub dispatch (the first) on w.
func dispatchedTo(w *strata.Workload) *strata.Workload {
	w.Status.Placement = &strata.Placement{Cluster: "w1", DispatchGeneration: 1}
	return w
}

func cond(t, status, reason, message string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)}
}

func TestOf(t *testing.T) {
	admitted := cond(strata.WorkloadAdmitted, "True", "Admitted", "admitted by ClusterQueue q", t0)
	waiting := cond(strata.WorkloadAdmitted, "False", strata.WaitingForAdmissionChecks, "quota reserved", t0)
	reserved := cond(strata.WorkloadQuotaReserved, "True", "QuotaReserved", "quota reserved by ClusterQueue q", t0)
	pending := cond(strata.WorkloadAdmitted, "False", "Pending", "waiting for capacity", t0)
	preempted := cond(strata.WorkloadEvicted, "True", strata.EvictedByPreemption, "preempted to make room for ml/a", t0)
	preemptedAgain := cond(strata.WorkloadEvicted, "True", strata.EvictedByPreemption, "preempted to make room for ml/b", t0)
	fenced := cond(strata.WorkloadEvicted, "True", strata.EvictedByFencing, "fenced", t0)
	for _, tc := range []struct {
		name     string
		old, cur *strata.Workload
		want     Transition
	}{
		{name: "nothing: a pending reason changes", old: wl("", pending), cur: wl("", cond(strata.WorkloadAdmitted, "False", "Pending", "other", t0))},
		{name: "admitted at once (no checks)", old: wl("", pending), cur: wl("q", admitted),
			want: Transition{ClusterQueue: "q", Reserved: true, Admitted: true}},
		{name: "quota reserved for checks", old: wl("", pending), cur: wl("q", reserved, waiting),
			want: Transition{ClusterQueue: "q", Reserved: true}},
		{name: "admitted once the checks are Ready", old: wl("q", reserved, waiting), cur: wl("q", reserved, admitted),
			want: Transition{ClusterQueue: "q", Admitted: true}},
		{name: "nothing: an admitted workload's status changes", old: wl("q", admitted), cur: wl("q", admitted, cond(strata.WorkloadPodsReady, "True", "PodsReady", "", t0))},
		{name: "preempted: evicted and released in one write", old: wl("q", admitted), cur: wl("", preempted, pending),
			want: Transition{ClusterQueue: "q", Evicted: strata.EvictedByPreemption, Released: true, Why: strata.EvictedByPreemption}},
		{name: "evicted first, released in a later write", old: wl("q", admitted), cur: wl("q", admitted, fenced),
			want: Transition{ClusterQueue: "q", Evicted: strata.EvictedByFencing}},
		{name: "the later write: released, its condition unchanged", old: wl("q", admitted, fenced), cur: wl("", fenced, pending),
			want: Transition{ClusterQueue: "q", Released: true, Why: strata.EvictedByFencing}},
		{name: "re-admitted with an old Evicted condition: no eviction", old: wl("", preempted, pending), cur: wl("q", preempted, admitted),
			want: Transition{ClusterQueue: "q", Reserved: true, Admitted: true}},
		{name: "preempted again: the condition stays True with a new message", old: wl("q", preempted, admitted), cur: wl("", preemptedAgain, pending),
			want: Transition{ClusterQueue: "q", Evicted: strata.EvictedByPreemption, Released: true, Why: strata.EvictedByPreemption}},
		{name: "evicted again as before: the condition unchanged, the admission taken back", old: wl("q", preempted, admitted), cur: wl("", preempted, pending),
			want: Transition{ClusterQueue: "q", Released: true, Why: strata.EvictedByPreemption}},
		{name: "taken back with no Evicted condition: the Admitted condition says why", old: wl("q", admitted),
			cur:  wl("", cond(strata.WorkloadAdmitted, "False", "Deactivated", "deactivated", t0)),
			want: Transition{ClusterQueue: "q", Released: true, Why: "Deactivated"}},
		{name: "nothing: an Evicted condition on a workload holding no admission", old: wl("", pending), cur: wl("", fenced, pending)},
		{name: "finished: released", old: wl("q", admitted), cur: wl("", admitted, cond(strata.WorkloadFinished, "True", "Succeeded", "", t0)),
			want: Transition{ClusterQueue: "q", Released: true, Why: "Admitted", Finished: true}},
		{name: "a hub's reservation becomes a dispatch: handed over", old: wl("q", reserved, waiting), cur: dispatchedTo(wl("", waiting)),
			want: Transition{ClusterQueue: "q", HandedOver: true}},
		{name: "the worker's admission of the dispatched copy", old: dispatchedTo(wl("", waiting)), cur: dispatchedTo(wl("q", admitted)),
			want: Transition{ClusterQueue: "q", Reserved: true, Admitted: true}},
		{name: "a copy taken back without a new dispatch: released", old: dispatchedTo(wl("q", admitted)), cur: dispatchedTo(wl("", pending)),
			want: Transition{ClusterQueue: "q", Released: true, Why: "Pending"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.old, tc.cur)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueuedSince(t *testing.T) {
	requeued := cond(strata.WorkloadRequeued, "True", "Preempted", "", t0.Add(time.Minute))
	for _, tc := range []struct {
		name string
		wl   *strata.Workload
		want time.Time
	}{
		{name: "created", wl: wl(""), want: t0},
		{name: "requeued after its creation", wl: wl("", requeued), want: t0.Add(time.Minute)},
		{name: "held out of its queue: its creation", wl: wl("", cond(strata.WorkloadRequeued, "False", "Deactivated", "", t0.Add(time.Minute))), want: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QueuedSince(tc.wl); !got.Equal(tc.want) {
				t.Errorf("QueuedSince = %v, want %v", got, tc.want)
			}
		})
	}
}

// fresh returns lifecycle metrics registered nowhere.
func fresh() metrics.Lifecycle {
	counter := func(labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c"}, labels)
	}
	hist := func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{1, 10, 100}}, []string{"cluster_queue"})
	}
	return metrics.Lifecycle{QuotaReserved: counter("cluster_queue"), Admitted: counter("cluster_queue"), Evicted: counter("cluster_queue", "reason"),
		QuotaReservedWait: hist(), AdmissionWait: hist(), ChecksWait: hist(), Latency: hist()}
}

// freshLocal returns LocalQueue lifecycle metrics registered nowhere.
func freshLocal() *metrics.LocalQueueLifecycle {
	counter := func(labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c"}, append([]string{"name", "namespace"}, labels...))
	}
	hist := func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{1, 10, 100}}, []string{"name", "namespace"})
	}
	return &metrics.LocalQueueLifecycle{QuotaReserved: counter(), Admitted: counter(), Evicted: counter("reason"),
		QuotaReservedWait: hist(), AdmissionWait: hist(), ChecksWait: hist()}
}

// sum is the sum of the observations of a histogram for queue q (or the
// LocalQueue of labels lq).
func sum(t *testing.T, h *prometheus.HistogramVec, lq ...string) float64 {
	t.Helper()
	labels := []string{"q"}
	if len(lq) > 0 {
		labels = lq
	}
	var m dto.Metric
	if err := h.WithLabelValues(labels...).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

func TestRecorder(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0.Add(10 * time.Second))
	m, local := fresh(), freshLocal()
	r := New(nil, m, clk).WithLocalQueues(local, nil)
	pending := cond(strata.WorkloadAdmitted, "False", "Pending", "waiting", t0)
	reserved := cond(strata.WorkloadQuotaReserved, "True", "QuotaReserved", "", t0)
	waiting := cond(strata.WorkloadAdmitted, "False", strata.WaitingForAdmissionChecks, "", t0)
	admitted := cond(strata.WorkloadAdmitted, "True", "Admitted", "", t0)

	// Created at t0, its quota reserved 10 s later, admitted once its
	// checks are Ready 5 s after that.
	r.Update(wl("", pending), wl("q", reserved, waiting))
	clk.SetTime(t0.Add(15 * time.Second))
	r.Update(wl("q", reserved, waiting), wl("q", reserved, admitted))
	// Preempted at 20 s, admitted again at 27 s: its wait counts from its
	// eviction, though its conditions keep whole seconds of older times.
	clk.SetTime(t0.Add(20 * time.Second))
	r.Update(wl("q", admitted), wl("", cond(strata.WorkloadEvicted, "True", strata.EvictedByPreemption, "by ml/a", t0), pending))
	clk.SetTime(t0.Add(27 * time.Second))
	r.Update(wl("", pending), wl("q", admitted))

	// Evicted by fencing while admitted, its admission taken back in a
	// later write: one eviction. Then admitted again at 30 s, evicted
	// again the same way with its condition unchanged: a second.
	clk.SetTime(t0.Add(28 * time.Second))
	fenced := cond(strata.WorkloadEvicted, "True", strata.EvictedByFencing, "fenced", t0)
	r.Update(wl("q", admitted), wl("q", admitted, fenced))
	r.Update(wl("q", admitted, fenced), wl("", fenced, pending))
	clk.SetTime(t0.Add(30 * time.Second))
	r.Update(wl("", fenced, pending), wl("q", fenced, admitted))
	r.Update(wl("q", fenced, admitted), wl("", fenced, pending))

	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"evicted by fencing", promtest.ToFloat64(m.Evicted.WithLabelValues("q", strata.EvictedByFencing)), 2},
		{"quota reserved", promtest.ToFloat64(m.QuotaReserved.WithLabelValues("q")), 3},
		{"admitted", promtest.ToFloat64(m.Admitted.WithLabelValues("q")), 3},
		{"evicted by preemption", promtest.ToFloat64(m.Evicted.WithLabelValues("q", strata.EvictedByPreemption)), 1},
		{"reservation waits (10 s, 7 s, 2 s)", sum(t, m.QuotaReservedWait), 19},
		{"admission waits (15 s, 7 s, 2 s)", sum(t, m.AdmissionWait), 24},
		{"check waits (5 s; none for an admission at once)", sum(t, m.ChecksWait), 5},
		{"latency from creation (15 s, 27 s, 30 s)", sum(t, m.Latency), 72},
		// The same by LocalQueue (metrics.localQueueMetrics).
		{"LocalQueue: evicted by fencing", promtest.ToFloat64(local.Evicted.WithLabelValues("team", "ml", strata.EvictedByFencing)), 2},
		{"LocalQueue: evicted by preemption", promtest.ToFloat64(local.Evicted.WithLabelValues("team", "ml", strata.EvictedByPreemption)), 1},
		{"LocalQueue: quota reserved", promtest.ToFloat64(local.QuotaReserved.WithLabelValues("team", "ml")), 3},
		{"LocalQueue: admitted", promtest.ToFloat64(local.Admitted.WithLabelValues("team", "ml")), 3},
		{"LocalQueue: reservation waits", sum(t, local.QuotaReservedWait, "team", "ml"), 19},
		{"LocalQueue: admission waits", sum(t, local.AdmissionWait, "team", "ml"), 24},
		{"LocalQueue: check waits", sum(t, local.ChecksWait, "team", "ml"), 5},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestRecorderHubHandOver: a hub Workload whose queue has admission
// checks reserves quota at the hub, is dispatched once they are Ready
// (its reservation handed over), and is admitted when the worker admits
// its copy: one reservation, one admission, its checks' wait measured
// from the hub's reservation.
func TestRecorderHubHandOver(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0.Add(2 * time.Second))
	m := fresh()
	r := New(nil, m, clk)
	pending := cond(strata.WorkloadAdmitted, "False", "Pending", "waiting", t0)
	reserved := cond(strata.WorkloadQuotaReserved, "True", "QuotaReserved", "", t0)
	waiting := cond(strata.WorkloadAdmitted, "False", strata.WaitingForAdmissionChecks, "", t0)
	admitted := cond(strata.WorkloadAdmitted, "True", "Admitted", "", t0)
	r.Update(wl("", pending), wl("q", reserved, waiting))
	clk.SetTime(t0.Add(5 * time.Second))
	r.Update(wl("q", reserved, waiting), dispatchedTo(wl("", waiting)))
	clk.SetTime(t0.Add(6 * time.Second))
	r.Update(dispatchedTo(wl("", waiting)), dispatchedTo(wl("q", admitted)))
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"quota reserved", promtest.ToFloat64(m.QuotaReserved.WithLabelValues("q")), 1},
		{"admitted", promtest.ToFloat64(m.Admitted.WithLabelValues("q")), 1},
		{"evicted", float64(promtest.CollectAndCount(m.Evicted)), 0},
		{"reservation wait", sum(t, m.QuotaReservedWait), 2},
		{"admission wait", sum(t, m.AdmissionWait), 6},
		{"checks and dispatch wait", sum(t, m.ChecksWait), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// queuesReader has the LocalQueues named in it (a cache's Get).
type queuesReader map[types.NamespacedName]bool

func (q queuesReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	if q[key] {
		return nil
	}
	return apierrors.NewNotFound(strata.GroupVersion.WithResource("localqueues").GroupResource(), key.Name)
}

func (q queuesReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// TestRecorderDeletedLocalQueue: the transitions of a workload whose
// LocalQueue is gone (its series forgotten) are counted by ClusterQueue
// only; they do not bring the LocalQueue's series back.
func TestRecorderDeletedLocalQueue(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0.Add(10 * time.Second))
	m, local := fresh(), freshLocal()
	r := New(nil, m, clk).WithLocalQueues(local, queuesReader{})
	admitted := cond(strata.WorkloadAdmitted, "True", "Admitted", "", t0)
	r.Update(wl("", cond(strata.WorkloadAdmitted, "False", "Pending", "waiting", t0)), wl("q", admitted))
	if got := promtest.ToFloat64(m.Admitted.WithLabelValues("q")); got != 1 {
		t.Errorf("admitted by ClusterQueue: %v, want 1", got)
	}
	if n := promtest.CollectAndCount(local.Admitted); n != 0 {
		t.Errorf("LocalQueue series: %d, want none for a deleted LocalQueue", n)
	}
	r = New(nil, m, clk).WithLocalQueues(local, queuesReader{{Namespace: "ml", Name: "team"}: true})
	r.Update(wl("", cond(strata.WorkloadAdmitted, "False", "Pending", "waiting", t0)), wl("q", admitted))
	if got := promtest.ToFloat64(local.Admitted.WithLabelValues("team", "ml")); got != 1 {
		t.Errorf("admitted by its LocalQueue: %v, want 1", got)
	}
}
