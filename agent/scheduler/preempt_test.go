package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// TestMayPreempt: a workload submitted on the worker preempts as its
// queue allows; a hub copy only when the hub marked it, and only up to the
// priority the hub chose.
func TestMayPreempt(t *testing.T) {
	preempting := &strata.ClusterQueue{Spec: strata.ClusterQueueSpec{Preemption: &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}}}
	never := &strata.ClusterQueue{}
	copyLabels := map[string]string{strata.HubWorkloadUIDLabel: "uid"}
	cases := map[string]struct {
		cq          *strata.ClusterQueue
		labels      map[string]string
		annotations map[string]string
		want        bool
		upTo        *int32
	}{
		"own workload":                   {cq: preempting, want: true},
		"own workload, queue never":      {cq: never},
		"hub copy without a mark":        {cq: preempting, labels: copyLabels},
		"hub copy marked":                {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}, want: true, upTo: ptr.To[int32](10)},
		"hub copy marked, negative":      {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "-5"}, want: true, upTo: ptr.To[int32](-5)},
		"hub copy with a malformed mark": {cq: preempting, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "ten"}},
		"hub copy marked, queue never":   {cq: never, labels: copyLabels, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}},
		"own workload with a stray mark": {cq: preempting, annotations: map[string]string{strata.PreemptUpToAnnotation: "10"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			got, upTo := preemption.Allowed(tc.cq, wl)
			if got != tc.want {
				t.Errorf("mayPreempt = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.upTo, upTo); diff != "" {
				t.Errorf("up to (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionOutlivesAFailedAdmissionWrite: the preemptor's admission
// write conflicts while the next pass runs. The capacity it gives back in
// the middle of that pass is still the preemptor's: its victim is not
// admitted into it, and the preemptor is admitted in the pass after.
func TestPreemptionOutlivesAFailedAdmissionWrite(t *testing.T) {
	release := make(chan struct{})
	var armed, written atomic.Bool
	var e *schedEnv
	funcs := interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if wl, ok := obj.(*strata.Workload); ok && wl.Name == "high" && wl.Status.Admission != nil && written.CompareAndSwap(false, true) {
				<-release
				return apierrors.NewConflict(schema.GroupResource{Group: "strata.dev", Resource: "workloads"}, "high", errors.New("changed"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*strata.ClusterQueueList); ok && armed.CompareAndSwap(true, false) {
				// The write fails, and gives the capacity back, while this
				// pass runs.
				close(release)
				e.settle()
			}
			return c.List(ctx, list, opts...)
		},
	}
	cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	e = newSchedEnv(t, []client.Object{cq, job("low", "cq", 4, ptr.To[int32](1), 0)}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, funcs)
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := e.outcomes(t)
		e.informed(t)
		return got
	}
	if diff := cmp.Diff(map[string]outcome{"low": admitted}, withoutMessages(pass(), nil)); diff != "" {
		t.Fatalf("first pass (-want,+got):\n%s", diff)
	}
	if err := e.c.Create(t.Context(), job("high", "cq", 4, ptr.To[int32](10), 1)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	// high preempts low, which had no pods, and is admitted at once; its
	// write waits for release.
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.informed(t)
	armed.Store(true)
	want := map[string]outcome{"low": {Reason: ReasonPending}, "high": {}}
	if diff := cmp.Diff(want, withoutMessages(pass(), want)); diff != "" {
		t.Errorf("the pass during which the write failed (-want,+got):\n%s", diff)
	}
	want = map[string]outcome{"low": {Reason: ReasonPending}, "high": admitted}
	got := pass()
	if diff := cmp.Diff(want, withoutMessages(maps.Clone(got), want)); diff != "" {
		t.Errorf("the pass after (-want,+got):\n%s", diff)
	}
	// Its Admitted condition names what it preempted (a hub keeps it).
	if m, wantNote := got["high"].Message, "; "+strata.AdmittedAfterPreempting+"1 workload(s): ns/low"; !strings.HasSuffix(m, wantNote) {
		t.Errorf("high's Admitted message = %q, want it to end with %q", m, wantNote)
	}
}

// TestPreemptionFlavorChoice: which flavor a preemptor preempts on, as
// Kueue's flavor assigner chooses it. Pass 1 admits the running
// workloads; pass 2 brings the preemptor.
func TestPreemptionFlavorChoice(t *testing.T) {
	onOther := outcome{Reason: ReasonAdmitted, Flavor: "other"}
	cases := map[string]struct {
		queues   []*strata.ClusterQueue
		running  []*strata.Workload
		nodes    []*corev1.Node
		want     map[string]outcome
		wantPass map[string]outcome
	}{
		"whenCanPreempt TryNextFlavor: reclaiming from a borrower on a later flavor beats preempting its own on the first": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "10").Flavor("other", "cpu", "10").
					Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny}).Obj(),
				testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "0").Flavor("other", "cpu", "10").Obj(),
			},
			running:  []*strata.Workload{job("a1", "a", 10, nil, 0), job("b2", "b", 14, nil, 1), job("b1", "b", 6, nil, 2)},
			nodes:    []*corev1.Node{tasNode("r1-n1", "r1", "16"), otherNode("r2-n1", "r2", "24")},
			wantPass: map[string]outcome{"a1": admitted, "b2": onOther, "b1": onOther},
			want:     map[string]outcome{"a1": admitted, "b2": onOther, "b1": {Reason: ReasonPending}, "pre": onOther},
		},
		"whenCanPreempt Preempt: preempting without borrowing on a later flavor beats borrowing on the first (whenCanBorrow TryNextFlavor)": {
			queues: []*strata.ClusterQueue{
				func() *strata.ClusterQueue {
					q := testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "2").Flavor("other", "cpu", "10").
						Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
					q.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor, WhenCanPreempt: strata.FungibilityPreempt}
					return q
				}(),
				testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "10").Flavor("other", "cpu", "0").Obj(),
			},
			running:  []*strata.Workload{job("a1", "a", 10, nil, 0)},
			nodes:    []*corev1.Node{tasNode("r1-n1", "r1", "16"), otherNode("r3-n1", "r3", "10")},
			wantPass: map[string]outcome{"a1": onOther},
			// a1, preempted, then fits on the first flavor by borrowing.
			want: map[string]outcome{"a1": admitted, "pre": onOther},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			for _, q := range tc.queues {
				objs = append(objs, q)
			}
			for _, wl := range tc.running {
				objs = append(objs, wl)
			}
			e := newSchedEnv(t, objs, twoFlavors, tc.nodes, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.wantPass, withoutMessages(e.outcomes(t), tc.wantPass)); diff != "" {
				t.Fatalf("first pass (-want,+got):\n%s", diff)
			}
			e.informed(t)
			if err := e.c.Create(t.Context(), job("pre", "a", 4, ptr.To[int32](10), 10)); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			for range 2 { // the preemption, then the admission into what it freed
				if err := e.s.Schedule(t.Context()); err != nil {
					t.Fatalf("Schedule(): %v", err)
				}
				e.settle()
				e.informed(t)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("after the preemptor (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHeadTakesALaterPreemptorsHold: the quota held for a preemptor
// while its victim's pods stop is taken by a workload of the same queue
// that comes before it (Kueue has no holds: the queue's head is served
// first). Before, in a StrictFIFO queue, the newcomer did not fit for the
// hold, found nothing to preempt, and blocked the preemptor behind it:
// neither was ever admitted.
func TestHeadTakesALaterPreemptorsHold(t *testing.T) {
	for _, strategy := range []strata.QueueingStrategy{strata.StrictFIFO, strata.BestEffortFIFO} {
		t.Run(string(strategy), func(t *testing.T) {
			cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor", "cpu", "4").Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
			cq.Spec.QueueingStrategy = strategy
			e := newSchedEnv(t, []client.Object{cq, job("low", "cq", 4, ptr.To[int32](0), 0)}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			pass := func() map[string]outcome {
				t.Helper()
				if err := e.s.Schedule(t.Context()); err != nil {
					t.Fatalf("Schedule(): %v", err)
				}
				got := e.outcomes(t)
				e.informed(t)
				return got
			}
			if diff := cmp.Diff(map[string]outcome{"low": admitted}, withoutMessages(pass(), nil)); diff != "" {
				t.Fatalf("first pass (-want,+got):\n%s", diff)
			}
			// low's pods run: its capacity stays held until they end.
			var pods []*corev1.Pod
			for i := range 4 {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("low-%d", i), UID: types.UID(fmt.Sprintf("low-%d", i)),
					Labels: map[string]string{strata.WorkloadLabel: "low", strata.TASLabel: "true"}},
					Spec: corev1.PodSpec{NodeName: "r1-n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
				e.s.cache.SetPod(p)
				pods = append(pods, p)
			}
			if err := e.c.Create(t.Context(), job("mid", "cq", 4, ptr.To[int32](5), 1)); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			want := map[string]outcome{"low": {Reason: strata.EvictedByPreemption}, "mid": {Reason: ReasonPreempting}}
			if diff := cmp.Diff(want, withoutMessages(pass(), want)); diff != "" {
				t.Fatalf("mid preempts low, whose pods still run (-want,+got):\n%s", diff)
			}
			if err := e.c.Create(t.Context(), job("high", "cq", 4, ptr.To[int32](10), 2)); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			pass()
			for _, p := range pods {
				e.s.cache.DeletePod(p.UID)
			}
			got := withoutMessages(pass(), nil)
			if got["high"] != admitted {
				t.Errorf("once low's pods are gone, high (the queue's head) is not admitted: %+v", got)
			}
			if got["mid"] == admitted {
				t.Errorf("mid admitted ahead of high: %+v", got)
			}
		})
	}
}

// TestVictimBlocksItsStrictFIFOQueue: a preempted workload waits at its
// place in a StrictFIFO queue, and the younger workloads behind it wait
// too (Kueue requeues a victim at its place, where it blocks).
func TestVictimBlocksItsStrictFIFOQueue(t *testing.T) {
	a := testutil.MakeClusterQueue("a").Cohort("co").Flavor("tas-flavor", "cpu", "4").
		Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj()
	b := strictFIFO(testutil.MakeClusterQueue("b").Cohort("co").Flavor("tas-flavor", "cpu", "4").Obj())
	e := newSchedEnv(t, []client.Object{a, b, job("v", "b", 6, nil, 0)}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4"), tasNode("r1-n2", "r1", "4")}, interceptor.Funcs{})
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := e.outcomes(t)
		e.informed(t)
		return got
	}
	if diff := cmp.Diff(map[string]outcome{"v": admitted}, withoutMessages(pass(), nil)); diff != "" {
		t.Fatalf("first pass: v borrows 2 (-want,+got):\n%s", diff)
	}
	// v's pods run: its capacity stays held until they end.
	for i := range 6 {
		e.s.cache.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("v-%d", i), UID: types.UID(fmt.Sprintf("v-%d", i)),
			Labels: map[string]string{strata.WorkloadLabel: "v", strata.TASLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("r1-n%d", 1+i/4), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	if err := e.c.Create(t.Context(), job("a1", "a", 4, nil, 1)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	want := map[string]outcome{"v": {Reason: strata.EvictedByPreemption}, "a1": {Reason: ReasonPreempting}}
	if diff := cmp.Diff(want, withoutMessages(pass(), want)); diff != "" {
		t.Fatalf("a1 reclaims its quota from v (-want,+got):\n%s", diff)
	}
	if err := e.c.Create(t.Context(), job("w2", "b", 2, nil, 2)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	if got := withoutMessages(pass(), nil); got["w2"] == admitted {
		t.Errorf("w2 admitted ahead of v, older and preempted, in StrictFIFO queue b: %+v", got)
	}
}

// TestVictimDoesNotStallItsQueue: a victim blocks its StrictFIFO queue
// only while its preemptor can be served. Once a workload that does not
// fit comes ahead of the preemptor in its own StrictFIFO queue, the
// preemptor waits behind it, holding the victim's quota; a victim that
// still blocked its queue would stall it for as long.
func TestVictimDoesNotStallItsQueue(t *testing.T) {
	a := strictFIFO(testutil.MakeClusterQueue("a").Cohort("co").Flavor("tas-flavor", "cpu", "4").
		Preemption(strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}).Obj())
	b := strictFIFO(testutil.MakeClusterQueue("b").Cohort("co").Flavor("tas-flavor", "cpu", "4").Obj())
	e := newSchedEnv(t, []client.Object{a, b, job("v", "b", 6, nil, 0)}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4"), tasNode("r1-n2", "r1", "4")}, interceptor.Funcs{})
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := e.outcomes(t)
		e.informed(t)
		return got
	}
	if diff := cmp.Diff(map[string]outcome{"v": admitted}, withoutMessages(pass(), nil)); diff != "" {
		t.Fatalf("first pass: v borrows 2 (-want,+got):\n%s", diff)
	}
	for i := range 6 {
		e.s.cache.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("v-%d", i), UID: types.UID(fmt.Sprintf("v-%d", i)),
			Labels: map[string]string{strata.WorkloadLabel: "v", strata.TASLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("r1-n%d", 1+i/4), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	if err := e.c.Create(t.Context(), job("a1", "a", 4, nil, 1)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	want := map[string]outcome{"v": {Reason: strata.EvictedByPreemption}, "a1": {Reason: ReasonPreempting}}
	if diff := cmp.Diff(want, withoutMessages(pass(), want)); diff != "" {
		t.Fatalf("a1 reclaims its quota from v (-want,+got):\n%s", diff)
	}
	// a0, of a higher priority, comes ahead of a1 in StrictFIFO queue a
	// and does not fit: a1 waits behind it.
	if err := e.c.Create(t.Context(), job("a0", "a", 8, ptr.To[int32](5), 2)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(t.Context(), job("w2", "b", 2, nil, 3)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	got := withoutMessages(pass(), nil)
	if got["a0"] == admitted || got["a1"] == admitted {
		t.Fatalf("a0 or a1 admitted with v's pods still running: %+v", got)
	}
	if got["w2"] != admitted {
		t.Errorf("w2 waits behind v, whose preemptor waits behind a0: queue b stalls (%+v)", got)
	}
}

// TestPreemptorOrderedByItsHeightAfterVictims: a head that must preempt
// is served by how high it still borrows once its victims are gone
// (Kueue's preemption oracle). p, in a (nominal 8, full), still borrows 2
// of b's once low2 alone is gone: as d1 borrows too, d1's priority goes
// first, and p then preempts low1 and low2 to fit a's nominal quota.
// Served first as if it fit its nominal quota, p took b's 2 CPUs with one
// victim and left d1 pending.
func TestPreemptorOrderedByItsHeightAfterVictims(t *testing.T) {
	within := strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	a := testutil.MakeClusterQueue("a").Cohort("co").Flavor("tas-flavor", "cpu", "8").Preemption(within).Obj()
	b := testutil.MakeClusterQueue("b").Cohort("co").Flavor("tas-flavor", "cpu", "2").Obj()
	d := testutil.MakeClusterQueue("d").Cohort("co").Flavor("tas-flavor", "cpu", "0").Obj()
	e := newSchedEnv(t, []client.Object{a, b, d,
		job("hi", "a", 4, ptr.To[int32](50), 0), job("low1", "a", 2, ptr.To[int32](0), 1), job("low2", "a", 2, ptr.To[int32](0), 2)}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "16"), tasNode("r2-n1", "r2", "16")}, interceptor.Funcs{})
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := e.outcomes(t)
		e.informed(t)
		return got
	}
	want := map[string]outcome{"hi": admitted, "low1": admitted, "low2": admitted}
	if diff := cmp.Diff(want, withoutMessages(pass(), nil)); diff != "" {
		t.Fatalf("first pass (-want,+got):\n%s", diff)
	}
	for _, wl := range []*strata.Workload{job("p", "a", 4, ptr.To[int32](10), 3), job("d1", "d", 2, ptr.To[int32](100), 4)} {
		if err := e.c.Create(t.Context(), wl); err != nil {
			t.Fatal(err)
		}
	}
	e.informed(t)
	got := withoutMessages(pass(), nil)
	if got["d1"] != admitted {
		t.Errorf("d1 not admitted: %+v", got)
	}
	for _, v := range []string{"low1", "low2"} {
		if got[v].Reason != strata.EvictedByPreemption {
			t.Errorf("%s not preempted: %+v", v, got)
		}
	}
	if got["hi"] != admitted {
		t.Errorf("hi not admitted: %+v", got)
	}
}

// TestPreemptionSurvivesARestart: a scheduler that starts while a
// preemption's victim still has pods (an agent restarted, or a new
// leader) keeps waiting for them, as the one before did; it searches
// again only if it was not told of them, evicting a second victim.
func TestPreemptionSurvivesARestart(t *testing.T) {
	for name, deleted := range map[string]bool{"victim pending": false, "victim's Workload deleted": true} {
		t.Run(name, func(t *testing.T) { testPreemptionSurvivesARestart(t, deleted) })
	}
}

// testPreemptionSurvivesARestart is TestPreemptionSurvivesARestart; with
// deleted, the victim's Workload is deleted before the restart (its Job
// deleted, its pods still terminating): only the preemptor's condition
// names it.
func testPreemptionSurvivesARestart(t *testing.T, deleted bool) {
	cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	low1, low2 := job("low1", "cq", 4, ptr.To[int32](1), 0), job("low2", "cq", 4, ptr.To[int32](1), 1)
	low1.UID, low2.UID = "uid-low1", "uid-low2"
	e := newSchedEnv(t, []client.Object{cq, low1, low2}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4"), tasNode("r2-n1", "r2", "4")}, interceptor.Funcs{})
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := e.outcomes(t)
		e.informed(t)
		return got
	}
	if diff := cmp.Diff(map[string]outcome{"low1": admitted, "low2": admitted}, withoutMessages(pass(), nil)); diff != "" {
		t.Fatalf("first pass (-want,+got):\n%s", diff)
	}
	// Both run: their pods hold their racks until they end.
	for _, name := range []string{"low1", "low2"} {
		var wl strata.Workload
		if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, &wl); err != nil {
			t.Fatal(err)
		}
		a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
		if err != nil {
			t.Fatal(err)
		}
		node := a.Domains[0].Values[len(a.Domains[0].Values)-1]
		for i := range 4 {
			e.s.cache.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", name, i), UID: types.UID(fmt.Sprintf("%s-%d", name, i)),
				Labels: map[string]string{strata.WorkloadLabel: name, strata.TASLabel: "true"}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
	}
	if err := e.c.Create(t.Context(), job("high", "cq", 4, ptr.To[int32](10), 2)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	got := withoutMessages(pass(), nil)
	if got["high"].Reason != ReasonPreempting {
		t.Fatalf("high: %+v, want it preempting", got["high"])
	}
	evicted := func(got map[string]outcome) []string {
		var out []string
		for _, name := range []string{"low1", "low2"} {
			if got[name].Reason != ReasonAdmitted {
				out = append(out, name)
			}
		}
		return out
	}
	victims := evicted(got)
	if len(victims) != 1 {
		t.Fatalf("victims %v, want one", victims)
	}

	if deleted {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: victims[0]}}
		if err := e.c.Delete(t.Context(), wl); err != nil {
			t.Fatal(err)
		}
		e.s.WorkloadEvent(wl, true)
	}
	// A new process: the same cache (the victim's pods still run), a new
	// scheduler.
	e.s = New(e.c, e.s.cache, tas.DefaultOptions(), &events.FakeRecorder{})
	e.informed(t)
	for range 2 {
		got = withoutMessages(pass(), nil)
		if deleted {
			delete(got, victims[0])
			got[victims[0]] = outcome{Reason: "deleted"}
		}
		if diff := cmp.Diff(victims, evicted(got)); diff != "" {
			t.Fatalf("after the restart, victims (-before,+after):\n%s", diff)
		}
		if got["high"].Reason != ReasonPreempting {
			t.Errorf("after the restart, high: %+v, want it still preempting", got["high"])
		}
	}
	if !deleted {
		// The victim's own Evicted condition names the preemptor: the
		// restored preemption knows it by its UID.
		var v strata.Workload
		if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: victims[0]}, &v); err != nil {
			t.Fatal(err)
		}
		p := e.s.preemptions[types.NamespacedName{Namespace: "ns", Name: "high"}]
		if p == nil || v.UID == "" || p.victimUIDs[client.ObjectKeyFromObject(&v)] != v.UID {
			t.Errorf("restored preemption %+v: want victim %s known by its UID %q", p, victims[0], v.UID)
		}
	}
}

// TestRestoreSkipsVictimsAdmittedAgain: a preemptor's waiting message
// (or a victim's Evicted condition) that names a workload admitted now
// is a record of an earlier preemption: a restart does not wait for it.
func TestRestoreSkipsVictimsAdmittedAgain(t *testing.T) {
	cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	e := newSchedEnv(t, []client.Object{cq, job("low1", "cq", 4, ptr.To[int32](1), 0)}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	if got := e.outcomes(t); got["low1"].Reason != ReasonAdmitted {
		t.Fatalf("low1: %+v, want it admitted", got["low1"])
	}
	e.informed(t)
	e.s.cache.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "low1-0", UID: "low1-0",
		Labels: map[string]string{strata.WorkloadLabel: "low1", strata.TASLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: "r1-n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	high := testutil.MakeWorkload("high", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 4, "cpu", "1").PodSet).Obj()
	meta.SetStatusCondition(&high.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonPreempting,
		Message: "preempting 1 workload(s) on flavor tas-flavor; admitted once the pods of ns/low1 are gone"})
	s := New(e.c, e.s.cache, tas.DefaultOptions(), &events.FakeRecorder{})
	s.restorePreemptions(map[string][]*strata.Workload{"cq": {high}}, nil)
	if p := s.preemptions[client.ObjectKeyFromObject(high)]; p != nil {
		t.Errorf("restored %+v for a victim admitted now, want none", p)
	}
}

// TestHeldPreemptorLetsItsHoldGo: a preemptor the agent may not admit
// (its hub fenced, its dispatch revoked) holds no capacity for itself:
// its preemption ends, and its victims are not kept waiting for it.
func TestHeldPreemptorLetsItsHoldGo(t *testing.T) {
	high := job("high", "cq", 4, ptr.To[int32](10), 0)
	e := newSchedEnv(t, []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), high}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
	var cur strata.Workload
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(high), &cur); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(high)
	e.s.preemptions[key] = &pendingPreemption{uid: cur.UID, flavor: "tas-flavor", queue: "cq", victims: []types.NamespacedName{{Namespace: "ns", Name: "low"}},
		requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
	e.s.WithHolds(func(wl *strata.Workload) string {
		if wl.Name == "high" {
			return "its hub is fenced"
		}
		return ""
	})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	if p := e.s.preemptions[key]; p != nil {
		t.Errorf("the held preemptor keeps its preemption: %+v", p)
	}
	if got := e.outcomes(t); got["high"].Reason != ReasonHeld {
		t.Errorf("high: %+v, want it held", got["high"])
	}
}

// TestPreemptingMessageWrittenWhole: a preemptor's waiting message is
// written again when it names other victims, though only their numbers
// differ (it is the record a restart reads); other reasons are written
// when their meaning changes.
func TestPreemptingMessageWrittenWhole(t *testing.T) {
	cases := map[string]struct {
		reason, before, after, want string
	}{
		"other victims": {reason: ReasonPreempting,
			before: "preempting 1 workload(s) on flavor f; admitted once the pods of ns/job-1 are gone",
			after:  "preempting 1 workload(s) on flavor f; admitted once the pods of ns/job-2 are gone",
			want:   "preempting 1 workload(s) on flavor f; admitted once the pods of ns/job-2 are gone"},
		"live numbers of another reason": {reason: ReasonPending,
			before: "the best rack fits 2 of 4 pods", after: "the best rack fits 3 of 4 pods", want: "the best rack fits 2 of 4 pods"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := job("high", "cq", 4, ptr.To[int32](10), 0)
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: tc.reason, Message: tc.before})
			e := newSchedEnv(t, []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), wl}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
			var cur strata.Workload
			if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
				t.Fatal(err)
			}
			if err := e.s.setNotAdmitted(t.Context(), &cur, tc.reason, tc.after); err != nil {
				t.Fatalf("setNotAdmitted(): %v", err)
			}
			if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
				t.Fatal(err)
			}
			if got := meta.FindStatusCondition(cur.Status.Conditions, strata.WorkloadAdmitted).Message; got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPartialAdmissionPreempts: a workload that may run with fewer pods
// (minCount) preempts for the most pods it can, as Kueue's partial
// admission: for all of them when a search finds victims for all,
// otherwise for the fewest pods taken away with which it fits or a
// search finds victims; without preemption, with the pods that fit.
func TestPartialAdmissionPreempts(t *testing.T) {
	preempting := strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	evicted := outcome{Reason: strata.EvictedByPreemption}
	cases := map[string]struct {
		preemption *strata.ClusterQueuePreemption
		midPrio    int32
		want       map[string]outcome
		wantCount  int32
		// wantNote ends pre's Admitted message.
		wantNote string
	}{
		"all of its pods when preempting makes room for them": {
			preemption: &preempting,
			want:       map[string]outcome{"mid": evicted, "low": evicted, "pre": admitted},
			wantCount:  10,
		},
		"the most pods a preemption makes room for": {
			preemption: &preempting,
			midPrio:    20,
			want:       map[string]outcome{"mid": admitted, "low": evicted, "pre": admitted},
			wantCount:  6,
			wantNote:   "with 6 of the 10 pods of pod set main (partial admission: all did not fit); " + strata.AdmittedAfterPreempting + "1 workload(s): ns/low",
		},
		"the pods that fit when its queue does not preempt": {
			midPrio:   20,
			want:      map[string]outcome{"mid": admitted, "low": admitted, "pre": admitted},
			wantCount: 2,
			wantNote:  "with 2 of the 10 pods of pod set main (partial admission: all did not fit)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj()
			cq.Spec.Preemption = tc.preemption
			objs := []client.Object{cq, job("mid", "cq", 4, ptr.To(tc.midPrio), 0), job("low", "cq", 4, ptr.To[int32](0), 1)}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "10")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			e.settle()
			e.informed(t)
			pre := job("pre", "cq", 10, ptr.To[int32](10), 2)
			pre.Spec.PodSets[0].MinCount = ptr.To[int32](2)
			if err := e.c.Create(t.Context(), pre); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("after the preemptor (-want,+got):\n%s", diff)
			}
			var got strata.Workload
			if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "pre"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Admission == nil {
				t.Fatalf("pre not admitted: %v", got.Status.Conditions)
			}
			if n := got.Status.Admission.PodSetAssignments[0].Count; n != tc.wantCount {
				t.Errorf("pre admitted with %d pods, want %d", n, tc.wantCount)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, strata.WorkloadAdmitted); tc.wantNote != "" && !strings.HasSuffix(c.Message, tc.wantNote) {
				t.Errorf("pre's Admitted message = %q, want it to end with %q", c.Message, tc.wantNote)
			}
		})
	}
}

func TestCappedCopy(t *testing.T) {
	cases := map[string]struct {
		cap       string // strata.dev/pod-set-counts; "-": none
		busy      int32  // pods of another workload on the node first
		wantCount int32
		wantNote  string
	}{
		"no cap: all of its pods":                 {cap: "-", wantCount: 10},
		"the pods the hub placed it with":         {cap: "main=6", wantCount: 6, wantNote: "with 6 of the 10 pods of pod set main (partial admission: its hub placed it with at most as many, strata.dev/pod-set-counts: main=6)"},
		"never below its minCount":                {cap: "main=1", wantCount: 2},
		"fewer than the cap when they do not fit": {cap: "main=8", busy: 4, wantCount: 6},
		"a cap that does not parse is not read":   {cap: "main=six", wantCount: 10},
		"a cap of another pod set is not read":    {cap: "other=3", wantCount: 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj()
			objs := []client.Object{cq}
			if tc.busy > 0 {
				objs = append(objs, job("busy", "cq", tc.busy, nil, 0))
			}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "10")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			e.settle()
			e.informed(t)
			wl := job("copy", "cq", 10, nil, 1)
			wl.Spec.PodSets[0].MinCount = ptr.To[int32](2)
			if tc.cap != "-" {
				metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.PodSetCountsAnnotation, tc.cap)
			}
			if err := e.c.Create(t.Context(), wl); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			e.settle()
			var got strata.Workload
			if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "copy"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Admission == nil {
				t.Fatalf("not admitted: %v", got.Status.Conditions)
			}
			if n := got.Status.Admission.PodSetAssignments[0].Count; n != tc.wantCount {
				t.Errorf("admitted with %d pods, want %d", n, tc.wantCount)
			}
			if n := got.Spec.PodSets[0].Count; n != 10 {
				t.Errorf("the Workload's count became %d; the admission must leave it at 10", n)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, strata.WorkloadAdmitted); tc.wantNote != "" && !strings.HasSuffix(c.Message, tc.wantNote) {
				t.Errorf("Admitted message = %q, want it to end with %q", c.Message, tc.wantNote)
			}
		})
	}
}

// TestPreemptingMessage: the preemptor's waiting message says for how
// many of its pods it preempts when fewer than it asks for, and
// restorePreemptions reads them back (the quota it holds after a
// restart is theirs, not all of its pods').
func TestPreemptingMessage(t *testing.T) {
	asked := job("pre", "cq", 10, nil, 0)
	asked.Spec.PodSets[0].MinCount = ptr.To[int32](2)
	capped := workload.WithCounts(asked, []int32{8})
	held := []types.NamespacedName{{Namespace: "ns", Name: "low"}}
	cases := []struct {
		name       string
		tried      *strata.Workload
		counts     []int32
		podSets    []string
		wantCounts string
	}{
		{name: "all of its pods", tried: asked},
		{name: "fewer pods", tried: asked, counts: []int32{6}, wantCounts: "main=6"},
		{name: "all the pods its hub placed it with", tried: capped, wantCounts: "main=8"},
		{name: "fewer than its hub placed it with", tried: capped, counts: []int32{4}, wantCounts: "main=4"},
		{name: "for one of its pod sets", tried: asked, podSets: []string{"workers"}},
		{name: "for two of its pod sets", tried: asked, podSets: []string{"ps", "workers"}},
		{name: "fewer pods of some pod sets", tried: asked, counts: []int32{6}, podSets: []string{"main", "workers"}, wantCounts: "main=6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &pendingPreemption{flavor: "f", victims: held, counts: fewerCounts(asked, tc.tried, tc.counts), podSets: tc.podSets}
			if p.counts != tc.wantCounts {
				t.Errorf("counts = %q, want %q", p.counts, tc.wantCounts)
			}
			m := preemptingVictims.FindStringSubmatch(preemptingMessage(p, held))
			if m == nil {
				t.Fatalf("%q does not match preemptingVictims", preemptingMessage(p, held))
			}
			if diff := cmp.Diff([]string{"f", tc.wantCounts, strings.Join(tc.podSets, ", "), "ns/low"}, m[1:]); diff != "" {
				t.Errorf("read back (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionTakesFromTheHeavierLocalQueue: under admission fair
// sharing, a preemption in a ClusterQueue takes first from the LocalQueue
// that consumed more, before priority (Kueue's candidate ordering);
// without it, the lower priority goes first.
func TestPreemptionTakesFromTheHeavierLocalQueue(t *testing.T) {
	for name, tc := range map[string]struct {
		afs         *configv1beta1.AdmissionFairSharing
		wantEvicted string
	}{
		"admission fair sharing: the heavier LocalQueue's workload": {
			afs: &configv1beta1.AdmissionFairSharing{UsageSamplingInterval: &metav1.Duration{Duration: time.Minute}}, wantEvicted: "heavy",
		},
		"without it: the lower priority": {wantEvicted: "light"},
	} {
		t.Run(name, func(t *testing.T) {
			cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
			cq.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
			lq := func(name, used string) *strata.LocalQueue {
				q := testutil.MakeLocalQueue(name, "ns", "cq")
				q.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
					ConsumedResources: rl("cpu", used), LastUpdate: metav1.NewTime(created)}}
				return q
			}
			e := newSchedEnv(t, []client.Object{cq, lq("a", "10"), lq("b", "1"), lq("c", "0"),
				job("heavy", "a", 2, ptr.To[int32](1), 0), job("light", "b", 2, ptr.To[int32](0), 1)},
				nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			e.s.WithAdmissionFairSharing(queue.NewAdmissionFairSharing(tc.afs))
			pass := func() map[string]outcome {
				t.Helper()
				if err := e.s.Schedule(t.Context()); err != nil {
					t.Fatalf("Schedule(): %v", err)
				}
				got := e.outcomes(t)
				e.informed(t)
				return got
			}
			if diff := cmp.Diff(map[string]outcome{"heavy": admitted, "light": admitted}, withoutMessages(pass(), nil)); diff != "" {
				t.Fatalf("first pass (-want,+got):\n%s", diff)
			}
			if err := e.c.Create(t.Context(), job("high", "c", 2, ptr.To[int32](10), 2)); err != nil {
				t.Fatal(err)
			}
			e.informed(t)
			got := pass()
			for _, name := range []string{"heavy", "light"} {
				if evicted := got[name].Reason != ReasonAdmitted; evicted != (name == tc.wantEvicted) {
					t.Errorf("%s: %+v, want evicted %t", name, got[name], name == tc.wantEvicted)
				}
			}
		})
	}
}

// TestPreemptionByUnit: a preemptor of two pod sets, the first fitting on
// the first flavor and the second nowhere, preempts for the second alone
// on the flavor where that takes least (Kueue's flavor assigner gives each
// pod set its flavor, and preempts for those that must): it is admitted
// split, its first pod set where it fitted. Preempting for both on the
// second flavor, as for a workload of one pod set, would move that pod set
// too.
func TestPreemptionByUnit(t *testing.T) {
	q := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "4").Flavor("other", "cpu", "8").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	e := newSchedEnv(t, []client.Object{q, job("low", "a", 8, nil, 0)}, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	onOther := outcome{Reason: ReasonAdmitted, Flavor: "other"}
	if diff := cmp.Diff(map[string]outcome{"low": onOther}, withoutMessages(e.outcomes(t), map[string]outcome{"low": onOther})); diff != "" {
		t.Fatalf("first pass (-want,+got):\n%s", diff)
	}
	e.informed(t)
	pre := job("pre", "a", 3, ptr.To[int32](10), 10)
	pre.Spec.PodSets = append(pre.Spec.PodSets, testutil.MakePodSet("second", 4, "cpu", "1").Required(rackLabel).Obj())
	if err := e.c.Create(t.Context(), pre); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	for range 2 { // the preemption, then the admission into what it freed
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
	}
	var got strata.Workload
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(pre), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Admission == nil {
		t.Fatalf("pre not admitted: %v", got.Status.Conditions)
	}
	flavors := map[string]string{}
	for _, psa := range got.Status.Admission.PodSetAssignments {
		flavors[psa.Name] = psa.Flavor
	}
	if diff := cmp.Diff(map[string]string{"main": "tas-flavor", "second": "other"}, flavors); diff != "" {
		t.Errorf("pre's flavors (-want,+got):\n%s", diff)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, strata.WorkloadAdmitted)
	if want := "after preempting 1 workload(s): ns/low"; c == nil || !strings.Contains(c.Message, want) {
		t.Errorf("Admitted condition %v, want a message with %q", c, want)
	}
	if o := e.outcomes(t)["low"]; o.Flavor != "" {
		t.Errorf("low still admitted on %s", o.Flavor)
	}
}

// TestPreemptionByUnitSurvivesARestart: a preemption for one pod set of
// a workload whose other pod set fits on a flavor of its own holds, after
// a restart, the quota of that pod set only (its waiting message names
// it), as the process before held; the workload is then admitted split
// once the victim's pods are gone.
func TestPreemptionByUnitSurvivesARestart(t *testing.T) {
	q := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "4").Flavor("other", "cpu", "8").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	e := newSchedEnv(t, []client.Object{q, job("low", "a", 8, nil, 0)}, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	e.informed(t)
	// low runs: its pods hold the other flavor's node until they end.
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("low-%d", i), UID: types.UID(fmt.Sprintf("low-%d", i)),
			Labels: map[string]string{strata.WorkloadLabel: "low", strata.TASLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: "r2-n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	for i := range 8 {
		e.s.cache.SetPod(pod(i))
	}
	pre := job("pre", "a", 3, ptr.To[int32](10), 10)
	pre.Spec.PodSets = append(pre.Spec.PodSets, testutil.MakePodSet("second", 4, "cpu", "1").Required(rackLabel).Obj())
	if err := e.c.Create(t.Context(), pre); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	e.informed(t)
	key := client.ObjectKeyFromObject(pre)
	wantHeld := &pendingPreemption{flavor: "other", queue: "a", requests: rl("cpu", "4", "pods", "4"), podSets: []string{"second"},
		victims: []types.NamespacedName{{Namespace: "ns", Name: "low"}}}
	opts := cmp.Options{cmp.AllowUnexported(pendingPreemption{}), cmpopts.IgnoreFields(pendingPreemption{}, "pods"), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}
	if diff := cmp.Diff(wantHeld, e.s.preemptions[key], opts); diff != "" {
		t.Fatalf("the preemption (-want,+got):\n%s", diff)
	}
	if o := e.outcomes(t)["pre"]; o.Reason != ReasonPreempting || !strings.Contains(o.Message, "for its pod set second;") {
		t.Fatalf("pre: %+v, want it preempting for its pod set second", o)
	}

	// A new process: the same cache (low's pods still run), a new
	// scheduler. It holds what the one before held.
	e.s = New(e.c, e.s.cache, tas.DefaultOptions(), &events.FakeRecorder{})
	e.informed(t)
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	e.informed(t)
	if diff := cmp.Diff(wantHeld, e.s.preemptions[key], opts); diff != "" {
		t.Fatalf("after the restart, the preemption (-want,+got):\n%s", diff)
	}
	if o := e.outcomes(t)["pre"]; o.Reason != ReasonPreempting {
		t.Fatalf("after the restart, pre: %+v, want it still preempting", o)
	}

	// low's pods end: pre is admitted split.
	for i := range 8 {
		e.s.cache.DeletePod(pod(i).UID)
	}
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	var got strata.Workload
	if err := e.c.Get(t.Context(), key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Admission == nil {
		t.Fatalf("pre not admitted: %v", got.Status.Conditions)
	}
	flavors := map[string]string{}
	for _, psa := range got.Status.Admission.PodSetAssignments {
		flavors[psa.Name] = psa.Flavor
	}
	if diff := cmp.Diff(map[string]string{"main": "tas-flavor", "second": "other"}, flavors); diff != "" {
		t.Errorf("pre's flavors (-want,+got):\n%s", diff)
	}
}

// TestSplitWorkloadOrderedByItsAssignment: the agent orders a head whose
// pod sets it admits on different flavors by how that assignment
// borrows (Kueue's), not by how the whole workload would borrow on one
// flavor: here it borrows nothing split, and as the older head is served
// before a later workload of another queue of its cohort.
func TestSplitWorkloadOrderedByItsAssignment(t *testing.T) {
	a := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "2").Flavor("other", "cpu", "4").Cohort("c").Obj()
	a.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor}
	b := testutil.MakeClusterQueue("b").Flavor("tas-flavor", "cpu", "4").Cohort("c").Obj()
	split := job("split", "a", 2, nil, 0)
	split.Spec.PodSets[0].Name = "driver"
	split.Spec.PodSets = append(split.Spec.PodSets, testutil.MakePodSet("workers", 4, "cpu", "1").Required(rackLabel).Obj())
	e := newSchedEnv(t, []client.Object{a, b, split, job("later", "b", 4, nil, 1)}, twoFlavors,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "4")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	got := e.outcomes(t)
	if got["split"].Reason != ReasonAdmitted || got["later"].Reason == ReasonAdmitted {
		t.Errorf("split %+v, later %+v; want split admitted and later waiting", got["split"], got["later"])
	}
}

// TestVictimOnTwoFlavorsFreesBothInThePass: a victim admitted on two
// flavors is evicted whole, and the rest of the pass sees its quota free
// on both, not only on the flavor the preemption was for: the next head
// is admitted on the other flavor in the same pass.
func TestVictimOnTwoFlavorsFreesBothInThePass(t *testing.T) {
	q := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "4").Flavor("other", "cpu", "4").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	q.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor}
	low := job("low", "a", 2, nil, 0)
	low.Spec.PodSets = append(low.Spec.PodSets, testutil.MakePodSet("second", 4, "cpu", "1").Required(rackLabel).Obj())
	e := newSchedEnv(t, []client.Object{q, low}, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "4")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	e.informed(t)
	var got strata.Workload
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(low), &got); err != nil || got.Status.Admission == nil || len(got.Status.Admission.PodSetAssignments) != 2 ||
		got.Status.Admission.PodSetAssignments[1].Flavor != "other" {
		t.Fatalf("low not admitted split: %v %v", err, got.Status)
	}
	for _, wl := range []*strata.Workload{job("high", "a", 4, ptr.To[int32](10), 1), job("after", "a", 4, ptr.To[int32](5), 2)} {
		if err := e.c.Create(t.Context(), wl); err != nil {
			t.Fatal(err)
		}
	}
	e.informed(t)
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	outcomes := e.outcomes(t)
	want := map[string]outcome{
		"low":   {Reason: strata.EvictedByPreemption},
		"high":  {Reason: ReasonAdmitted, Flavor: "tas-flavor"},
		"after": {Reason: ReasonAdmitted, Flavor: "other"},
	}
	if diff := cmp.Diff(want, withoutMessages(outcomes, want)); diff != "" {
		t.Errorf("after one pass (-want,+got):\n%s", diff)
	}
}

// TestPreemptionByUnitThenOneFlavor: a workload that preempts for the pod
// set that fits nowhere, and whose pod sets, walked again once the victim
// is gone, all fit on the flavor it freed, is admitted there at once
// (not left with its quota held while the rest of the pass takes the
// capacity the victim freed).
func TestPreemptionByUnitThenOneFlavor(t *testing.T) {
	q := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "8").Flavor("other", "cpu", "8").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	e := newSchedEnv(t, []client.Object{q, job("low", "a", 8, nil, 0)}, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "8"), otherNode("r2-n1", "r2", "2")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	e.settle()
	e.informed(t)
	pre := job("pre", "a", 2, ptr.To[int32](10), 1)
	pre.Spec.PodSets = append(pre.Spec.PodSets, testutil.MakePodSet("second", 4, "cpu", "1").Required(rackLabel).Obj())
	if err := e.c.Create(t.Context(), pre); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(t.Context(), job("behind", "a", 4, ptr.To[int32](5), 2)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	got := e.outcomes(t)
	want := map[string]outcome{
		"low":    {Reason: strata.EvictedByPreemption},
		"pre":    {Reason: ReasonAdmitted, Flavor: "tas-flavor"},
		"behind": {Reason: ReasonPending},
	}
	if diff := cmp.Diff(want, withoutMessages(got, want)); diff != "" {
		t.Errorf("after one pass (-want,+got):\n%s", diff)
	}
	if m := e.outcomes(t)["pre"].Message; !strings.Contains(m, "after preempting 1 workload(s): ns/low") {
		t.Errorf("pre's message %q does not name its victim", m)
	}
}

// TestStillHeldWaitsForTheVictimsOwnPods: a preemptor waits for the pods
// its victim held capacity with when it was evicted, not for pods
// labelled as the victim's afterwards (a tenant relabelling pods of its
// own would keep it waiting for ever).
func TestStillHeldWaitsForTheVictimsOwnPods(t *testing.T) {
	e := newSchedEnv(t, nil, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
	victim := types.NamespacedName{Namespace: "ns", Name: "low"}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{strata.WorkloadLabel: victim.Name, strata.TASLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: "r1-n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	own := pod("low-0")
	e.s.cache.SetPod(own)
	p := &pendingPreemption{flavor: "tas-flavor", victims: []types.NamespacedName{victim}}
	if diff := cmp.Diff([]types.NamespacedName{victim}, e.s.stillHeld(p)); diff != "" {
		t.Fatalf("stillHeld() while its pod runs (-want,+got):\n%s", diff)
	}
	// A tenant's pod labelled as the victim's, then the victim's own pod
	// gone: nothing of the victim holds capacity.
	e.s.cache.SetPod(pod("tenant-0"))
	if diff := cmp.Diff([]types.NamespacedName{victim}, e.s.stillHeld(p)); diff != "" {
		t.Fatalf("stillHeld() while its own pod still runs (-want,+got):\n%s", diff)
	}
	e.s.cache.DeletePod(own.UID)
	if got := e.s.stillHeld(p); len(got) != 0 {
		t.Errorf("stillHeld() = %v once the victim's own pods are gone, want none (a relabelled pod is not the victim's)", got)
	}
	// A preemption that first looks now (after a restart) counts what
	// the victim's label shows then.
	if diff := cmp.Diff([]types.NamespacedName{victim}, e.s.stillHeld(&pendingPreemption{flavor: "tas-flavor", victims: []types.NamespacedName{victim}})); diff != "" {
		t.Errorf("stillHeld() of a new preemption (-want,+got):\n%s", diff)
	}

	// A pod of the victim on a node NotReady when the preemption first
	// looks holds nothing then, but is waited for once the node is back.
	e.s.cache.DeletePod("tenant-0")
	late := pod("low-1")
	e.s.cache.SetPod(late)
	down := tasNode("r1-n1", "r1", "8")
	down.Status.Conditions[0].Status = corev1.ConditionFalse
	e.s.cache.SetNode(down)
	fresh := &pendingPreemption{flavor: "tas-flavor", victims: []types.NamespacedName{victim}}
	if got := e.s.stillHeld(fresh); len(got) != 0 {
		t.Fatalf("stillHeld() with the victim's pod on a NotReady node = %v, want none", got)
	}
	e.s.cache.SetNode(tasNode("r1-n1", "r1", "8"))
	if diff := cmp.Diff([]types.NamespacedName{victim}, e.s.stillHeld(fresh)); diff != "" {
		t.Errorf("stillHeld() once the node is Ready again (-want,+got):\n%s", diff)
	}
}

// TestForgetPreemptions: a preemption ends when its preemptor is no
// longer pending, is pending as another Workload made under its name, or
// in another ClusterQueue;
// its victims are named with the UIDs they were evicted with.
func TestForgetPreemptions(t *testing.T) {
	pre := types.NamespacedName{Namespace: "ns", Name: "urgent"}
	victim := types.NamespacedName{Namespace: "ns", Name: "low"}
	restored := types.NamespacedName{Namespace: "ns", Name: "older"}
	held := map[types.NamespacedName]victimRef{victim: {by: pre, uid: "v-1"}, restored: {by: pre}}
	none := map[types.NamespacedName]victimRef{}
	cases := map[string]struct {
		pending map[types.NamespacedName]pendingRef
		want    map[types.NamespacedName]victimRef
	}{
		"still pending": {pending: map[types.NamespacedName]pendingRef{pre: {uid: "uid-1", queue: "cq"}}, want: held},
		"pending, its UID and queue not known (being written)": {pending: map[types.NamespacedName]pendingRef{pre: {}}, want: held},
		"admitted or deleted":       {pending: map[types.NamespacedName]pendingRef{}, want: none},
		"made again under its name": {pending: map[types.NamespacedName]pendingRef{pre: {uid: "uid-2", queue: "cq"}}, want: none},
		// Its LocalQueue points at another ClusterQueue now: the quota
		// held in the first would hold it back for nothing.
		"pending in another ClusterQueue": {pending: map[types.NamespacedName]pendingRef{pre: {uid: "uid-1", queue: "other-cq"}}, want: none},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &pendingPreemption{uid: "uid-1", flavor: "f", queue: "cq"}
			p.addVictim(victim, "v-1")
			p.addVictim(restored, "") // restored after a restart: its UID not known
			s := &Scheduler{preemptions: map[types.NamespacedName]*pendingPreemption{pre: p}}
			if diff := cmp.Diff(tc.want, s.forgetPreemptions(tc.pending), cmp.AllowUnexported(victimRef{})); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestVictimRefOf: a victim is held back as its preemptor's only as the
// Workload it was evicted as; another made under its name is not.
func TestVictimRefOf(t *testing.T) {
	wl := func(uid string) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "low", UID: types.UID(uid)}}
	}
	cases := map[string]struct {
		ref  victimRef
		wl   *strata.Workload
		want bool
	}{
		"the victim":                    {victimRef{uid: "v-1"}, wl("v-1"), true},
		"another under its name":        {victimRef{uid: "v-1"}, wl("v-2"), false},
		"its UID not known (restarted)": {victimRef{}, wl("v-2"), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.ref.of(tc.wl); got != tc.want {
				t.Errorf("of() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestStillHeldNotByAVictimMadeAgain: a Workload admitted under a
// victim's name since its eviction is another; the preemptor does not
// wait for it (it would until that one finished). One whose UID is not
// known (restored after a restart) is waited for, as before.
func TestStillHeldNotByAVictimMadeAgain(t *testing.T) {
	e := newSchedEnv(t, nil, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
	victim := types.NamespacedName{Namespace: "ns", Name: "low"}
	again := testutil.MakeWorkload(victim.Name, victim.Namespace).
		PodSets(testutil.MakePodSet("main", 1, "cpu", "1").Obj()).
		Admission(&strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "tas-flavor", Count: 1}}}).
		Obj()
	again.UID = "v-2"
	if err := e.s.cache.AddWorkload(victim, again); err != nil {
		t.Fatal(err)
	}
	p := &pendingPreemption{flavor: "tas-flavor"}
	p.addVictim(victim, "v-1")
	if got := e.s.stillHeld(p); len(got) != 0 {
		t.Errorf("stillHeld() = %v with another Workload admitted under the victim's name, want none", got)
	}
	unknown := &pendingPreemption{flavor: "tas-flavor"}
	unknown.addVictim(victim, "")
	if diff := cmp.Diff([]types.NamespacedName{victim}, e.s.stillHeld(unknown)); diff != "" {
		t.Errorf("stillHeld() of a victim whose UID is not known (-want,+got):\n%s", diff)
	}
}
