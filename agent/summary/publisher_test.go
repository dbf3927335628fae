package summary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

const (
	block = "example.com/block"
	rack  = "example.com/rack"
	host  = corev1.LabelHostname
)

// t0 is on a whole second: the API keeps times to the second.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func ready(status metav1.ConditionStatus, reason, message string, since time.Duration) metav1.Condition {
	return metav1.Condition{Type: ConditionReady, Status: status, Reason: reason, Message: message, LastTransitionTime: *at(since)}
}

func jsonSize(t *testing.T, st *strata.CapacitySummaryStatus) int {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// domains returns n leaf domains of one bucket each.
func domains(n int) []strata.SummaryDomain {
	var ds []strata.SummaryDomain
	for i := range n {
		ds = append(ds, strata.SummaryDomain{
			Values: []string{"b1", fmt.Sprintf("rack-%04d", i)},
			Free:   []int32{int32(i), 4},
		})
	}
	return ds
}

// vectors returns the n free vectors domains(n) refers to.
func vectors(n int) []strata.ResourceVector {
	var vs []strata.ResourceVector
	for i := range n {
		vs = append(vs, strata.ResourceVector{int64(1000 * i), 110000})
	}
	return vs
}

func TestBuild(t *testing.T) {
	const maxBytes = 4096
	summary := func(n int) strata.CapacitySummaryStatus {
		return strata.CapacitySummaryStatus{
			Levels: []string{block, rack, host}, LeafLevels: 2, Resources: []corev1.ResourceName{"cpu", "pods"},
			Vectors: vectors(n), Domains: domains(n), Nodes: int32(4 * n),
		}
	}
	memory := []strata.UnderstatedResource{{Name: corev1.ResourceMemory, Amount: resource.MustParse("3Gi")}}
	gpus := append(slices.Clone(memory), strata.UnderstatedResource{Name: "nvidia.com/gpu", Amount: resource.MustParse("12")})
	published := ready(metav1.ConditionTrue, ReasonPublished, "current capacity of the flavor's nodes", 0)
	long := strings.Repeat("x", 1500)
	cases := map[string]struct {
		old         strata.CapacitySummaryStatus
		sum         strata.CapacitySummaryStatus
		sumErr      error
		want        strata.CapacitySummaryStatus
		wantMessage string // a part of the Ready message; the whole one when empty
	}{
		"a summary within the budget": {
			sum: summary(3),
			want: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Conditions = []metav1.Condition{published}
				return st
			}(),
		},
		"a coarsened summary says so": {
			sum: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Coarsened = true
				st.Understated = memory
				return st
			}(),
			want: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Coarsened, st.Understated = true, memory
				st.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, ReasonPublished, "free capacity rounded down to stay within 4096 bytes: memory 3Gi", 0)}
				return st
			}(),
		},
		"a summary that had to understate a count is not Ready": {
			sum: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Coarsened = true
				st.Understated = gpus
				return st
			}(),
			want: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Coarsened, st.Understated = true, gpus
				st.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, ReasonCountsUnderstated,
					"to stay within summary.maxBytes (4096 bytes) the summary reports less than is free: memory 3Gi, nvidia.com/gpu 12; raise summary.maxBytes", 0)}
				return st
			}(),
		},
		"an unchanged summary keeps the generation, time and transition time": {
			old: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.SummaryGeneration, st.ObservedTime = 7, at(-10*time.Second)
				st.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, ReasonPublished, "current capacity of the flavor's nodes", -time.Hour)}
				return st
			}(),
			sum: summary(3),
			want: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.SummaryGeneration, st.ObservedTime = 7, at(-10*time.Second)
				st.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, ReasonPublished, "current capacity of the flavor's nodes", -time.Hour)}
				return st
			}(),
		},
		"too large even coarsened: no domains": {
			old: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.SummaryGeneration, st.ObservedTime = 2, at(-time.Minute)
				st.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, ReasonPublished, "current capacity of the flavor's nodes", -time.Hour)}
				return st
			}(),
			sum:    func() strata.CapacitySummaryStatus { st := summary(400); st.Coarsened = true; return st }(),
			sumErr: errors.New("the summary of 400 domains needs 20000 bytes, more than the budget of 3072 even when coarsened"),
			want: strata.CapacitySummaryStatus{
				SummaryGeneration: 2, ObservedTime: at(-time.Minute),
				Levels: []string{block, rack, host}, LeafLevels: 2, Resources: []corev1.ResourceName{"cpu", "pods"}, Nodes: 1600,
				Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooLarge,
					"no domains published, the summary does not fit in summary.maxBytes (4096 bytes): the summary of 400 domains needs 20000 bytes, more than the budget of 3072 even when coarsened", 0)},
			},
		},
		"within tas's budget but not with the status fields": {
			sum: summary(75),
			want: strata.CapacitySummaryStatus{
				Levels: []string{block, rack, host}, LeafLevels: 2, Resources: []corev1.ResourceName{"cpu", "pods"}, Nodes: 300,
				Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooLarge, "", 0)},
			},
			wantMessage: "the summary of 75 domains needs",
		},
		"a summary lists its dispatches": {
			sum: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Dispatches = []string{"u1/1", "u2/4"}
				return st
			}(),
			want: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Dispatches = []string{"u1/1", "u2/4"}
				st.Conditions = []metav1.Condition{published}
				return st
			}(),
		},
		"too many dispatches: neither domains nor dispatches": {
			old: func() strata.CapacitySummaryStatus {
				st := summary(3)
				st.Dispatches = []string{"u1/1"}
				st.SummaryGeneration, st.ObservedTime = 2, at(-time.Minute)
				st.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, ReasonPublished, "current capacity of the flavor's nodes", -time.Hour)}
				return st
			}(),
			sumErr: &tooManyDispatchesError{count: 120, bytes: 5000, budget: 3072, maxBytes: maxBytes},
			want: strata.CapacitySummaryStatus{
				SummaryGeneration: 2, ObservedTime: at(-time.Minute),
				Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooManyDispatches,
					"no domains or dispatches published: the 120 dispatches the flavor's capacity accounts for need 5000 bytes, more than the 3072 bytes summary.maxBytes (4096 bytes) leaves for the summary; raise summary.maxBytes", 0)},
			},
		},
		"dispatches that fit tas's budget but not with the status fields: dropped with the domains": {
			sum: func() strata.CapacitySummaryStatus {
				st := summary(3)
				for i := range 100 {
					st.Dispatches = append(st.Dispatches, fmt.Sprintf("%036d/1", i))
				}
				return st
			}(),
			want: strata.CapacitySummaryStatus{
				Levels: []string{block, rack, host}, LeafLevels: 2, Resources: []corev1.ResourceName{"cpu", "pods"}, Nodes: 12,
				Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooLarge, "", 0)},
			},
			wantMessage: "needs",
		},
		"too large with levels too long to name": {
			sum: strata.CapacitySummaryStatus{
				Levels: []string{"example.com/" + long, "example.com/" + long + "2", "example.com/" + long + "3"}, LeafLevels: 3,
				Resources: []corev1.ResourceName{"cpu"}, Domains: domains(1), Nodes: 4,
			},
			sumErr: errors.New("too large"),
			want: strata.CapacitySummaryStatus{
				Nodes:      4,
				Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooLarge, "", 0)},
			},
			wantMessage: "too large",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := build(&tc.old, tc.sum, tc.sumErr, maxBytes, t0)
			opts := cmp.Options{}
			if tc.wantMessage != "" {
				opts = append(opts, cmpopts.IgnoreFields(metav1.Condition{}, "Message"))
			}
			if diff := cmp.Diff(tc.want, got, opts); diff != "" {
				t.Errorf("build() (-want,+got):\n%s", diff)
			}
			if tc.wantMessage != "" && (len(got.Conditions) != 1 || !strings.Contains(got.Conditions[0].Message, tc.wantMessage)) {
				t.Errorf("build() conditions %+v, want a Ready message containing %q", got.Conditions, tc.wantMessage)
			}
			written, _ := next(&tc.old, &got, t0.Add(time.Hour), time.Minute)
			written.SummaryGeneration = 1 << 62
			if n := jsonSize(t, &written); n > maxBytes {
				t.Errorf("the written status has %d bytes, more than the budget of %d", n, maxBytes)
			}
		})
	}
}

// dispatchKeys are n dispatches of 38 characters each, unsorted: with
// the quotes and commas, 41 bytes apiece in the summary, and 15 more.
func dispatchKeys(n int) []string {
	keys := make([]string, 0, n)
	for i := range n {
		keys = append(keys, fmt.Sprintf("%08d-0000-0000-0000-000000000000/%d", (i*7919)%n, i%3+1))
	}
	return keys
}

func TestSummarize(t *testing.T) {
	const maxBytes = 4096
	cases := map[string]struct {
		racks      int
		dispatches []string
		// want: the dispatches listed, or the error's type and a part of
		// its message.
		want        []string
		wantTooMany bool
		wantErr     string
	}{
		"no dispatches": {
			racks: 3,
		},
		"dispatches sorted": {
			racks:      3,
			dispatches: []string{"b/1", "a/2", "a/10"},
			want:       []string{"a/10", "a/2", "b/1"},
		},
		"dispatches that take the whole budget": {
			racks:       3,
			dispatches:  dispatchKeys(100),
			wantTooMany: true,
			wantErr:     "the 100 dispatches the flavor's capacity accounts for need 4115 bytes, more than the 3072 bytes summary.maxBytes (4096 bytes) leaves",
		},
		"dispatches that leave too little for the domains": {
			racks:      60,
			dispatches: dispatchKeys(40),
			wantErr:    "(the 40 dispatches listed take 1655 bytes of it)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, configv1beta1.Summary{}, "f")
			e.racks(0, tc.racks)
			captured, ok := e.cache.Capture("f", nil)
			capacity := captured.Capacity
			if !ok {
				t.Fatal("Capture() found no flavor f")
			}
			sum, err := summarize(capacity, tc.dispatches, nil, nil, maxBytes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("summarize() error = %v, want one containing %q", err, tc.wantErr)
				}
				if got := errors.As(err, new(*tooManyDispatchesError)); got != tc.wantTooMany {
					t.Errorf("summarize() error %v is a *tooManyDispatchesError: %t, want %t", err, got, tc.wantTooMany)
				}
				return
			}
			if err != nil {
				t.Fatalf("summarize(): %v", err)
			}
			if diff := cmp.Diff(tc.want, sum.Dispatches); diff != "" {
				t.Errorf("dispatches (-want,+got):\n%s", diff)
			}
			if n := jsonSize(t, &sum); n > summaryBudget(maxBytes) {
				t.Errorf("the summary has %d bytes, more than the budget of %d", n, summaryBudget(maxBytes))
			}
		})
	}
}

func TestNext(t *testing.T) {
	const heartbeat = 30 * time.Second
	base := strata.CapacitySummaryStatus{
		SummaryGeneration: 4, ObservedTime: at(0), Levels: []string{block, rack}, LeafLevels: 2,
		Resources: []corev1.ResourceName{"cpu"}, Domains: domains(2), Nodes: 8,
	}
	with := func(f func(*strata.CapacitySummaryStatus)) strata.CapacitySummaryStatus {
		st := *base.DeepCopy()
		f(&st)
		return st
	}
	changed := with(func(st *strata.CapacitySummaryStatus) { st.Nodes = 9 })
	cases := map[string]struct {
		old, want strata.CapacitySummaryStatus
		now       time.Duration
		wantWrite bool
		wantSt    strata.CapacitySummaryStatus
	}{
		"a change is published with the next generation": {
			old: base, want: changed, now: time.Second, wantWrite: true,
			wantSt: with(func(st *strata.CapacitySummaryStatus) {
				st.Nodes, st.SummaryGeneration, st.ObservedTime = 9, 5, at(time.Second)
			}),
		},
		"an unchanged summary is not written before its heartbeat": {
			old: base, want: base, now: heartbeat - time.Second, wantSt: base,
		},
		"an unchanged summary is re-published at its heartbeat, same generation": {
			old: base, want: base, now: heartbeat, wantWrite: true,
			wantSt: with(func(st *strata.CapacitySummaryStatus) { st.ObservedTime = at(heartbeat) }),
		},
		"a summary never observed is written": {
			old:       with(func(st *strata.CapacitySummaryStatus) { st.ObservedTime = nil }),
			want:      with(func(st *strata.CapacitySummaryStatus) { st.ObservedTime = nil }),
			now:       time.Second,
			wantWrite: true,
			wantSt:    with(func(st *strata.CapacitySummaryStatus) { st.ObservedTime = at(time.Second) }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, write := next(&tc.old, &tc.want, t0.Add(tc.now), heartbeat)
			if write != tc.wantWrite {
				t.Errorf("next() write = %v, want %v", write, tc.wantWrite)
			}
			if diff := cmp.Diff(tc.wantSt, got); diff != "" {
				t.Errorf("next() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	cases := map[string]struct {
		minInterval, heartbeat time.Duration
		failures               []int
		want                   []time.Duration
	}{
		"doubling up to 30s": {
			minInterval: 250 * time.Millisecond, heartbeat: time.Minute,
			failures: []int{1, 2, 3, 4, 5, 6, 7},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second},
		},
		"at most the heartbeat": {
			minInterval: 250 * time.Millisecond, heartbeat: 5 * time.Second,
			failures: []int{1, 2, 3, 4, 5},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second},
		},
		"at least minInterval": {
			minInterval: 3 * time.Second, heartbeat: time.Minute,
			failures: []int{1, 2, 3},
			want:     []time.Duration{3 * time.Second, 3 * time.Second, 4 * time.Second},
		},
		"many failures do not overflow": {
			heartbeat: time.Minute,
			failures:  []int{64, 1000},
			want:      []time.Duration{30 * time.Second, 30 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []time.Duration
			for _, n := range tc.failures {
				got = append(got, backoff(n, tc.minInterval, tc.heartbeat))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("backoff() (-want,+got):\n%s", diff)
			}
		})
	}
}

// env is a publisher on a capacity cache and a fake API server that hold
// the same topology and flavors.
type env struct {
	t      *testing.T
	cache  *cache.Cache
	client client.Client
	clock  *testingclock.FakeClock
	pub    *Publisher
	// mu guards writes for a test that runs Start.
	mu     sync.Mutex
	writes int
	// failWrites fails that many status writes.
	failWrites int
}

func newEnv(t *testing.T, cfg configv1beta1.Summary, flavors ...string) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := strata.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cache: cache.New(), clock: testingclock.NewFakeClock(t0)}
	topo := testutil.MakeTopology("topo", block, rack, host).Obj()
	objs := []client.Object{topo}
	e.cache.SetTopology(topo)
	for _, f := range flavors {
		rf := testutil.MakeResourceFlavor(f).TopologyName("topo").Obj()
		objs = append(objs, rf)
		e.cache.SetFlavor(rf)
	}
	e.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&strata.CapacitySummary{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				e.mu.Lock()
				e.writes++
				e.mu.Unlock()
				if e.failWrites > 0 {
					e.failWrites--
					return apierrors.NewServiceUnavailable("etcd is busy")
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	if cfg.MaxBytes == nil {
		cfg.MaxBytes = ptr.To[int32](512 * 1024)
	}
	if cfg.MinInterval == nil {
		cfg.MinInterval = &metav1.Duration{Duration: 250 * time.Millisecond}
	}
	if cfg.HeartbeatInterval == nil {
		cfg.HeartbeatInterval = &metav1.Duration{Duration: 30 * time.Second}
	}
	e.pub = NewPublisher(e.client, e.client, e.cache, cfg, e.clock)
	return e
}

// racks adds n racks of one 8-CPU node each.
func (e *env) racks(first, n int) {
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("node-%04d", i)
		e.cache.SetNode(&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{block: "b1", rack: fmt.Sprintf("rack-%04d", i), host: name}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		})
	}
}

// writeCount is writes, read while Start may write.
func (e *env) writeCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writes
}

// publish runs PublishAll at t0+d.
func (e *env) publish(d time.Duration) (time.Time, error) {
	e.t.Helper()
	e.clock.SetTime(t0.Add(d))
	return e.pub.PublishAll(context.Background())
}

func (e *env) summary(name string) *strata.CapacitySummary {
	e.t.Helper()
	var cs strata.CapacitySummary
	if err := e.client.Get(context.Background(), client.ObjectKey{Name: name}, &cs); err != nil {
		e.t.Fatalf("getting summary %s: %v", name, err)
	}
	return &cs
}

// seriesOf removes and counts a flavor's metric series.
func seriesOf(flavor string) int {
	n := metrics.FreeCapacity.DeletePartialMatch(prometheus.Labels{"flavor": flavor})
	if metrics.SummaryBytes.DeleteLabelValues(flavor) {
		n++
	}
	if metrics.SummaryTimestamp.DeleteLabelValues(flavor) {
		n++
	}
	return n
}

func TestPublishAllTooLarge(t *testing.T) {
	const maxBytes = 4096
	e := newEnv(t, configv1beta1.Summary{MaxBytes: ptr.To[int32](maxBytes)}, "too-large")
	e.racks(0, 400)
	if _, err := e.publish(0); err != nil {
		t.Fatal(err)
	}
	cs := e.summary("too-large")
	want := strata.CapacitySummaryStatus{
		SummaryGeneration: 1, ObservedTime: at(0),
		Levels: []string{block, rack, host}, LeafLevels: 2, Resources: []corev1.ResourceName{"cpu", "pods"}, Nodes: 400, // no node has memory
		Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooLarge, "", 0)},
	}
	if diff := cmp.Diff(want, cs.Status, cmpopts.IgnoreFields(metav1.Condition{}, "Message")); diff != "" {
		t.Errorf("status (-want,+got):\n%s", diff)
	}
	if n := jsonSize(t, &cs.Status); n > maxBytes {
		t.Errorf("the status has %d bytes, more than the budget of %d", n, maxBytes)
	}
	if n := metrics.FreeCapacity.DeletePartialMatch(prometheus.Labels{"flavor": "too-large"}); n != 0 {
		t.Errorf("%d free capacity series for a summary without domains, want 0", n)
	}
	seriesOf("too-large")
}

func TestPublishAllRetriesFailedWrites(t *testing.T) {
	e := newEnv(t, configv1beta1.Summary{}, "retried")
	e.racks(0, 2)
	e.failWrites = 2
	steps := []struct {
		at         time.Duration
		wantErr    bool
		wantWrites int
		wantDue    time.Duration
		wantGen    int64
	}{
		{at: 0, wantErr: true, wantWrites: 1, wantDue: time.Second},
		{at: 500 * time.Millisecond, wantWrites: 1, wantDue: time.Second},
		{at: time.Second, wantErr: true, wantWrites: 2, wantDue: 3 * time.Second},
		{at: 3 * time.Second, wantWrites: 3, wantDue: 33 * time.Second, wantGen: 1},
	}
	for i, s := range steps {
		due, err := e.publish(s.at)
		if (err != nil) != s.wantErr {
			t.Errorf("step %d: PublishAll() error = %v, want error %v", i, err, s.wantErr)
		}
		got := struct {
			Writes int
			Due    time.Time
			Gen    int64
		}{e.writes, due, e.summary("retried").Status.SummaryGeneration}
		want := struct {
			Writes int
			Due    time.Time
			Gen    int64
		}{s.wantWrites, t0.Add(s.wantDue), s.wantGen}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("step %d at %v (-want,+got):\n%s", i, s.at, diff)
		}
	}
	seriesOf("retried")
}

func TestPublishAllHeartbeat(t *testing.T) {
	e := newEnv(t, configv1beta1.Summary{HeartbeatInterval: &metav1.Duration{Duration: 30 * time.Second}}, "quiet")
	e.racks(0, 2)
	type state struct {
		Writes   int
		Due      time.Time
		Gen      int64
		Observed time.Time
		Nodes    int32
	}
	steps := []struct {
		at     time.Duration
		change func()
		want   state
	}{
		{at: 0, want: state{Writes: 1, Due: t0.Add(30 * time.Second), Gen: 1, Observed: t0, Nodes: 2}},
		{at: 10 * time.Second, want: state{Writes: 1, Due: t0.Add(30 * time.Second), Gen: 1, Observed: t0, Nodes: 2}},
		{at: 30 * time.Second, want: state{Writes: 2, Due: t0.Add(60 * time.Second), Gen: 1, Observed: t0.Add(30 * time.Second), Nodes: 2}},
		{at: 31 * time.Second, change: func() { e.racks(2, 1) },
			want: state{Writes: 3, Due: t0.Add(61 * time.Second), Gen: 2, Observed: t0.Add(31 * time.Second), Nodes: 3}},
		{at: 61 * time.Second, want: state{Writes: 4, Due: t0.Add(91 * time.Second), Gen: 2, Observed: t0.Add(61 * time.Second), Nodes: 3}},
	}
	for i, s := range steps {
		if s.change != nil {
			s.change()
		}
		due, err := e.publish(s.at)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		cs := e.summary("quiet")
		got := state{Writes: e.writes, Due: due, Gen: cs.Status.SummaryGeneration, Nodes: cs.Status.Nodes}
		if cs.Status.ObservedTime != nil {
			got.Observed = cs.Status.ObservedTime.UTC()
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d at %v (-want,+got):\n%s", i, s.at, diff)
		}
	}
	seriesOf("quiet")
}

func TestPublishAllDeletesOrphans(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		// change is applied after a first PublishAll of flavors "<case>-a"
		// and "<case>-b", both topology-aware.
		change        func(t *testing.T, e *env, a, b string)
		wantSummaries []string
		wantSeries    map[string]bool
	}{
		"a deleted flavor": {
			change: func(t *testing.T, e *env, a, _ string) {
				e.cache.DeleteFlavor(a)
				if err := e.client.Delete(ctx, &strata.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: a}}); err != nil {
					t.Fatal(err)
				}
			},
			wantSummaries: []string{"b"},
			wantSeries:    map[string]bool{"b": true},
		},
		"a flavor no longer topology-aware": {
			change: func(t *testing.T, e *env, a, _ string) {
				var rf strata.ResourceFlavor
				if err := e.client.Get(ctx, client.ObjectKey{Name: a}, &rf); err != nil {
					t.Fatal(err)
				}
				rf.Spec.TopologyName = nil
				if err := e.client.Update(ctx, &rf); err != nil {
					t.Fatal(err)
				}
				e.cache.SetFlavor(&rf)
			},
			wantSummaries: []string{"b"},
			wantSeries:    map[string]bool{"b": true},
		},
		"a deleted topology": {
			change: func(t *testing.T, e *env, _, _ string) {
				e.cache.DeleteTopology("topo")
				if err := e.client.Delete(ctx, &strata.Topology{ObjectMeta: metav1.ObjectMeta{Name: "topo"}}); err != nil {
					t.Fatal(err)
				}
			},
			wantSeries: map[string]bool{},
		},
		"a summary left by an earlier agent for a flavor gone since": {
			change: func(t *testing.T, e *env, a, _ string) {
				if err := e.client.Create(ctx, testutil.MakeCapacitySummary(a+"-old").Obj()); err != nil {
					t.Fatal(err)
				}
			},
			wantSummaries: []string{"a", "b"},
			wantSeries:    map[string]bool{"a": true, "b": true},
		},
		"a flavor the cache has not seen yet keeps its summary": {
			change: func(t *testing.T, e *env, a, _ string) {
				// As after a restart: the informers know the flavor (and
				// its summary) before the capacity cache does.
				e.cache.DeleteFlavor(a)
			},
			wantSummaries: []string{"a", "b"},
			wantSeries:    map[string]bool{"b": true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := strings.ReplaceAll(name, " ", "-")
			a, b := id+"-a", id+"-b"
			e := newEnv(t, configv1beta1.Summary{}, a, b)
			e.racks(0, 2)
			if _, err := e.publish(0); err != nil {
				t.Fatal(err)
			}
			tc.change(t, e, a, b)
			if _, err := e.publish(time.Second); err != nil {
				t.Fatal(err)
			}
			var list strata.CapacitySummaryList
			if err := e.client.List(ctx, &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cs := range list.Items {
				got = append(got, strings.TrimPrefix(cs.Name, id+"-"))
			}
			if diff := cmp.Diff(tc.wantSummaries, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("summaries (-want,+got):\n%s", diff)
			}
			gotSeries := map[string]bool{}
			for _, f := range []string{"a", "b"} {
				if seriesOf(id+"-"+f) > 0 {
					gotSeries[f] = true
				}
			}
			if diff := cmp.Diff(tc.wantSeries, gotSeries); diff != "" {
				t.Errorf("flavors with metric series (-want,+got):\n%s", diff)
			}
		})
	}
}

// dispatchedWorkload is workload name, the copy of hub workload uid at
// dispatch generation gen (none when uid is ""), admitted on flavor "f"
// with one pod on node.
func dispatchedWorkload(name, uid, gen, node string) *strata.Workload {
	wl := testutil.MakeWorkload(name, "ns").
		PodSets(testutil.MakePodSet("main", 1, "cpu", "10m").Obj()).
		Admission(&strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{
			Name: "main", Flavor: "f", Count: 1,
			TopologyAssignment: tas.Encode(&tas.Assignment{Levels: []string{host}, Domains: []tas.DomainAssignment{{Values: []string{node}, Count: 1}}}),
		}}}).Obj()
	if uid != "" {
		metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.HubWorkloadUIDLabel, uid)
		metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.DispatchGenerationLabel, gen)
	}
	return wl
}

// TestPublishAllDispatches: a summary lists, sorted, the dispatches of the
// workloads its capacity counts, and stops listing one once the capacity
// is given back; each change is a new generation.
func TestPublishAllDispatches(t *testing.T) {
	e := newEnv(t, configv1beta1.Summary{}, "f")
	e.racks(0, 2)
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	add := func(wl *strata.Workload) {
		t.Helper()
		if err := e.cache.AddWorkload(key(wl.Name), wl); err != nil {
			t.Fatal(err)
		}
	}
	type state struct {
		Gen        int64
		Dispatches []string
		Ready      metav1.ConditionStatus
	}
	steps := []struct {
		change func()
		want   state
	}{
		{change: func() {}, want: state{Gen: 1, Ready: metav1.ConditionTrue}},
		{change: func() {
			add(dispatchedWorkload("b", "u2", "1", "node-0001"))
			add(dispatchedWorkload("a", "u1", "3", "node-0000"))
			add(dispatchedWorkload("local", "", "", "node-0000"))
		}, want: state{Gen: 2, Dispatches: []string{"u1/3", "u2/1"}, Ready: metav1.ConditionTrue}},
		{change: func() { e.cache.RemoveWorkload(key("b")) }, want: state{Gen: 3, Dispatches: []string{"u1/3"}, Ready: metav1.ConditionTrue}},
		{change: func() { e.cache.RemoveWorkload(key("a")) }, want: state{Gen: 4, Ready: metav1.ConditionTrue}},
	}
	for i, s := range steps {
		s.change()
		if _, err := e.publish(time.Duration(i) * time.Second); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		cs := e.summary("f")
		got := state{Gen: cs.Status.SummaryGeneration, Dispatches: cs.Status.Dispatches}
		if c := meta.FindStatusCondition(cs.Status.Conditions, ConditionReady); c != nil {
			got.Ready = c.Status
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (-want,+got):\n%s", i, diff)
		}
	}
	seriesOf("f")
}

// TestPublishAllTooManyDispatches: dispatches that do not fit in
// summary.maxBytes make a summary without domains, Ready=False, within
// the budget; the summary comes back once they fit.
func TestPublishAllTooManyDispatches(t *testing.T) {
	const maxBytes = 4096
	e := newEnv(t, configv1beta1.Summary{MaxBytes: ptr.To[int32](maxBytes)}, "f")
	e.racks(0, 2)
	keys := dispatchKeys(100)
	for i, k := range keys {
		uid, gen, _ := strings.Cut(k, "/")
		wl := dispatchedWorkload(fmt.Sprint("w", i), uid, gen, "node-0000")
		if err := e.cache.AddWorkload(types.NamespacedName{Namespace: "ns", Name: wl.Name}, wl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.publish(0); err != nil {
		t.Fatal(err)
	}
	cs := e.summary("f")
	// Its levels and resources still: the hub keeps the flavor's target
	// (and its reservations), unavailable for the reason given.
	want := strata.CapacitySummaryStatus{
		SummaryGeneration: 1, ObservedTime: at(0),
		Levels: []string{"example.com/block", "example.com/rack", "kubernetes.io/hostname"}, LeafLevels: 2,
		Resources:  []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourcePods}, // its nodes have no memory
		Conditions: []metav1.Condition{ready(metav1.ConditionFalse, ReasonTooManyDispatches, "", 0)},
	}
	if diff := cmp.Diff(want, cs.Status, cmpopts.IgnoreFields(metav1.Condition{}, "Message")); diff != "" {
		t.Errorf("status (-want,+got):\n%s", diff)
	}
	if msg := cs.Status.Conditions[0].Message; !strings.Contains(msg, "the 100 dispatches") || !strings.Contains(msg, "raise summary.maxBytes") {
		t.Errorf("Ready message %q does not name the dispatches and the remedy", msg)
	}
	if n := jsonSize(t, &cs.Status); n > maxBytes {
		t.Errorf("the status has %d bytes, more than the budget of %d", n, maxBytes)
	}
	for i := range 90 {
		e.cache.RemoveWorkload(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("w", i)})
	}
	if _, err := e.publish(time.Second); err != nil {
		t.Fatal(err)
	}
	cs = e.summary("f")
	if c := meta.FindStatusCondition(cs.Status.Conditions, ConditionReady); c == nil || c.Status != metav1.ConditionTrue || len(cs.Status.Dispatches) != 10 || len(cs.Status.Domains) == 0 {
		t.Errorf("with 10 dispatches left: Ready %+v, %d dispatches, %d domains; want Ready, 10 and the domains", c, len(cs.Status.Dispatches), len(cs.Status.Domains))
	}
	seriesOf("f")
}

// laggingReader serves CapacitySummaries as they were when sync was last
// called, as an informer behind the publisher's own writes does.
type laggingReader struct {
	client.Client
	seen map[string]*strata.CapacitySummary
}

func (r *laggingReader) sync(t *testing.T) {
	t.Helper()
	var list strata.CapacitySummaryList
	if err := r.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	r.seen = map[string]*strata.CapacitySummary{}
	for i := range list.Items {
		r.seen[list.Items[i].Name] = &list.Items[i]
	}
}

func (r *laggingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	cs, ok := r.seen[key.Name]
	if !ok {
		return apierrors.NewNotFound(strata.GroupVersion.WithResource("capacitysummaries").GroupResource(), key.Name)
	}
	cs.DeepCopyInto(obj.(*strata.CapacitySummary))
	return nil
}

// TestPublishAllCacheBehind: writes on the summary the informer does not
// show yet go on the object the publisher's last write returned, not on
// the informer's older one (which would conflict, or create it twice).
func TestPublishAllCacheBehind(t *testing.T) {
	e := newEnv(t, configv1beta1.Summary{}, "lagging")
	e.racks(0, 2)
	lag := &laggingReader{Client: e.client}
	lag.sync(t)
	e.pub = NewPublisher(e.client, lag, e.cache, e.pub.cfg, e.clock)
	steps := []struct {
		at    time.Duration
		racks int
		sync  bool
	}{
		{at: 0, racks: 2},                           // created; the informer shows nothing
		{at: time.Second, racks: 3},                 // updated on the created object
		{at: 2 * time.Second, racks: 4},             // and on the updated one
		{at: 3 * time.Second, racks: 5, sync: true}, // the informer caught up
		{at: 4 * time.Second, racks: 6},
	}
	for i, s := range steps {
		if s.racks > 2 {
			e.racks(s.racks-1, 1)
		}
		if s.sync {
			lag.sync(t)
		}
		if _, err := e.publish(s.at); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := e.summary("lagging").Status.Nodes; got != int32(s.racks) {
			t.Errorf("step %d: the summary lists %d nodes, want %d", i, got, s.racks)
		}
	}
	seriesOf("lagging")
}

// TestQueueUsage: the summary's queues are every ClusterQueue with a
// quota on the flavor, by name, with what it holds there of the
// resources of its quota, and whether its checks there include a
// ProvisioningRequest check.
func TestQueueUsage(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	cqs := []*strata.ClusterQueue{
		testutil.MakeClusterQueue("train").ResourceGroup("cpu").GroupFlavor("f", "4").Obj(),
		testutil.MakeClusterQueue("elsewhere").ResourceGroup("cpu").GroupFlavor("g", "4").Obj(),
		testutil.MakeClusterQueue("idle").ResourceGroup("cpu").GroupFlavor("f", "4").Obj(),
		testutil.MakeClusterQueue("scaled").ResourceGroup("cpu").GroupFlavor("f", "4").Obj(),
		testutil.MakeClusterQueue("checked").ResourceGroup("cpu").GroupFlavor("f", "4").Obj(),
		testutil.MakeClusterQueue("scaled-elsewhere").ResourceGroup("cpu").GroupFlavor("f", "4").GroupFlavor("g", "4").Obj(),
	}
	cqs[3].Spec.AdmissionChecks = []string{"other", "autoscaler"}
	cqs[4].Spec.AdmissionChecks = []string{"other"}
	cqs[5].Spec.AdmissionChecksStrategy = &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{
		{Name: "autoscaler", OnFlavors: []string{"g"}}}}
	usage := map[string]corev1.ResourceList{
		"train":     {corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		"elsewhere": cpus("1"),
	}
	want := []strata.QueueUsage{{Name: "checked"}, {Name: "idle"}, {Name: "scaled", Provisions: true}, {Name: "scaled-elsewhere"},
		{Name: "train", Usage: cpus("3")}}
	if diff := cmp.Diff(want, queueUsage(cqs, "f", usage, map[string]bool{"autoscaler": true})); diff != "" {
		t.Errorf("queueUsage (-want,+got):\n%s", diff)
	}
}

// TestSummarizeQueuesWithinBudget: the queues' usage is listed while it
// takes at most an eighth of the budget; beyond, it is left out (the hub
// reads the queues' status) and the capacity is published as before.
func TestSummarizeQueuesWithinBudget(t *testing.T) {
	s := tas.NewSnapshot([]string{"rack", strata.HostnameLabel}, nil)
	s.SetNode(tas.Node{Name: "n0", Labels: map[string]string{"rack": "r0", strata.HostnameLabel: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	few := []strata.QueueUsage{{Name: "train", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	var many []strata.QueueUsage
	for i := range 200 {
		many = append(many, strata.QueueUsage{Name: fmt.Sprintf("%s-%03d", strings.Repeat("q", 60), i)})
	}
	for name, tc := range map[string]struct {
		queues []strata.QueueUsage
		listed int
	}{"a few": {queues: few, listed: 1}, "more than an eighth of the budget": {queues: many}} {
		t.Run(name, func(t *testing.T) {
			sum, err := summarize(s.CapturePreemptible(nil, nil, tas.Victims{}), nil, tc.queues, nil, 16384)
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Queues) != tc.listed || len(sum.Domains) == 0 {
				t.Errorf("%d queues listed, %d domains; want %d queues and the domains", len(sum.Queues), len(sum.Domains), tc.listed)
			}
		})
	}
}

// TestSummarizePriorityClassesWithinBudget: the priority classes are
// listed while they take at most a sixteenth of the budget; beyond, they
// are left out (the hub then counts a copy at its own priority) and the
// capacity is published as before.
func TestSummarizePriorityClassesWithinBudget(t *testing.T) {
	s := tas.NewSnapshot([]string{"rack", strata.HostnameLabel}, nil)
	s.SetNode(tas.Node{Name: "n0", Labels: map[string]string{"rack": "r0", strata.HostnameLabel: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	few := []strata.SummaryPriorityClass{{Source: strata.WorkloadPriorityClassSource, Name: "high", Value: 1000}}
	var many []strata.SummaryPriorityClass
	for i := range maxPriorityClasses {
		many = append(many, strata.SummaryPriorityClass{Source: strata.WorkloadPriorityClassSource, Name: fmt.Sprintf("%s-%02d", strings.Repeat("c", 60), i)})
	}
	for name, tc := range map[string]struct {
		classes []strata.SummaryPriorityClass
		listed  int
	}{"a few": {classes: few, listed: 1}, "more than a sixteenth of the budget": {classes: many}} {
		t.Run(name, func(t *testing.T) {
			sum, err := summarize(s.CapturePreemptible(nil, nil, tas.Victims{}), nil, nil, tc.classes, 16384)
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.PriorityClasses) != tc.listed || len(sum.Domains) == 0 {
				t.Errorf("%d classes listed, %d domains; want %d classes and the domains", len(sum.PriorityClasses), len(sum.Domains), tc.listed)
			}
		})
	}
}

// TestUnderstatedMessageBounded: the Ready message names the understated
// resources within a bound, whatever their number and names.
func TestUnderstatedMessageBounded(t *testing.T) {
	var us []strata.UnderstatedResource
	for i := range 30 {
		us = append(us, strata.UnderstatedResource{Name: corev1.ResourceName(fmt.Sprintf("example.com/%s-%d", strings.Repeat("x", 60), i)), Amount: resource.MustParse("1")})
	}
	msg := understated(us)
	if len(msg) > understatedBytes+64 || !strings.HasSuffix(msg, "more (status.understated)") {
		t.Errorf("message of %d bytes: %q", len(msg), msg)
	}
	if got := understated(us[:1]); got != string(us[0].Name)+" 1" {
		t.Errorf("one resource: %q", got)
	}
}

func TestSpacing(t *testing.T) {
	const (
		minI = 250 * time.Millisecond
		maxI = time.Second
	)
	cases := []struct {
		name string
		last time.Duration
		busy bool
		want time.Duration
	}{
		{"quiet after the least", minI, false, minI},
		{"quiet after the most", maxI, false, minI},
		{"busy doubles", minI, true, 2 * minI},
		{"busy doubles again", 2 * minI, true, maxI},
		{"busy stays at the most", maxI, true, maxI},
		{"busy never under the least", 0, true, minI},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := spacing(c.last, c.busy, minI, maxI); got != c.want {
				t.Errorf("spacing(%v, %v) = %v, want %v", c.last, c.busy, got, c.want)
			}
		})
	}
	if got := spacing(minI, true, minI, minI); got != minI {
		t.Errorf("with maxInterval = minInterval, busy spacing = %v, want %v", got, minI)
	}
	// With minInterval 0, a busy publisher spaces its writes all the same.
	var got []time.Duration
	for last, i := time.Duration(0), 0; i < 5; i++ {
		last = spacing(last, true, 0, 500*time.Millisecond)
		got = append(got, last)
	}
	want := []time.Duration{firstSpacing, 2 * firstSpacing, 4 * firstSpacing, 500 * time.Millisecond, 500 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("busy spacing from minInterval 0 (-want +got):\n%s", diff)
	}
	if got := spacing(maxI, false, 0, maxI); got != 0 {
		t.Errorf("quiet spacing with minInterval 0 = %v, want 0", got)
	}
}

// TestStartSpacesWritesWhileBusy runs the publisher's loop on a fake clock:
// while the capacity changes before each wait ends, the writes come
// 250ms, 500ms, then every 1s apart; the first change after a quiet spell
// is written at once.
func TestStartSpacesWritesWhileBusy(t *testing.T) {
	e := newEnv(t, configv1beta1.Summary{MaxInterval: &metav1.Duration{Duration: time.Second}}, "busy")
	e.racks(0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.pub.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// settle waits until the loop has made want writes and waits on the
	// clock again.
	settle := func(step string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for e.writeCount() != want || !e.clock.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d writes (want %d), waiting on the clock: %v", step, e.writeCount(), want, e.clock.HasWaiters())
			}
			time.Sleep(time.Millisecond)
		}
	}
	settle("start", 1)
	steps := []struct {
		name   string
		change bool
		to     time.Duration // the fake clock's time, from t0
		writes int
	}{
		{"a change within the first 250ms", true, 200 * time.Millisecond, 1},
		{"written 250ms after the first", false, 250 * time.Millisecond, 2},
		{"a change right after", true, 300 * time.Millisecond, 2},
		{"not written before 500ms more", false, 700 * time.Millisecond, 2},
		{"written 500ms after the second", false, 750 * time.Millisecond, 3},
		{"another change", true, 800 * time.Millisecond, 3},
		{"not written before 1s more", false, 1700 * time.Millisecond, 3},
		{"written 1s after the third", false, 1750 * time.Millisecond, 4},
		{"yet another change", true, 1800 * time.Millisecond, 4},
		{"written 1s after the fourth, no more", false, 2750 * time.Millisecond, 5},
		{"quiet for the next second", false, 3750 * time.Millisecond, 5},
		{"after the quiet spell, a change is written at once", true, 5 * time.Second, 6},
		{"and the next one 250ms later", true, 5250 * time.Millisecond, 7},
	}
	for i, s := range steps {
		if s.change {
			e.racks(100+i, 1)
		}
		e.clock.SetTime(t0.Add(s.to))
		settle(s.name, s.writes)
	}
}
