package dispatch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// TestReclaimQuota: a Workload that fits no flavor of its hub queue's
// quota evicts dispatched Workloads as the queue's policy allows, the
// fewest by Kueue's order; victims being evicted already count as gone;
// a reclaim under way waits for its victims and starts no other.
// inQueue puts a Workload in LocalQueue lq.
func inQueue(wl *strata.Workload, lq string) *strata.Workload {
	wl.Spec.QueueName = lq
	return wl
}

func TestReclaimQuota(t *testing.T) {
	const flavor = "gpu"
	base := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	// dispatchedWL is a Workload of 4 CPUs dispatched at base+sec.
	dispatchedWL := func(name string, priority int32, sec int, evicting bool) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
		wl.UID = types.UID("uid-" + name)
		wl.Spec.Priority = &priority
		RecordDispatch(&wl.Status, "w1", flavor, "fits", base.Add(time.Duration(sec)*time.Second))
		if evicting {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption})
		}
		return wl
	}
	// shaped is a Workload of pods of cpu CPUs dispatched at base+sec,
	// done of its pods finished (reclaimable).
	shaped := func(name string, pods int32, cpu string, done int32, sec int) *strata.Workload {
		wl := dispatchedWL(name, 0, sec, false)
		wl.Spec.PodSets = []strata.PodSet{testutil.MakePodSet("main", pods, "cpu", cpu).Obj()}
		if done > 0 {
			wl.Status.ReclaimablePods = []strata.ReclaimablePod{{Name: "main", Count: done}}
		}
		return wl
	}
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	queues := func(bPolicy *strata.ClusterQueuePreemption) []*strata.ClusterQueue {
		a := testutil.MakeClusterQueue("a").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "2").Obj()
		b := testutil.MakeClusterQueue("b").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "6").Obj()
		b.Spec.Preemption = bPolicy
		return []*strata.ClusterQueue{a, b}
	}
	reclaimAny := &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}
	type running struct {
		wl    *strata.Workload
		queue string
	}
	cases := map[string]struct {
		policy  *strata.ClusterQueuePreemption
		running []running
		// under is a reclaim under way for the preemptor, of these victims.
		under       []string
		wantMessage string
		wantVictims []string // the reclaim recorded
		wantMarked  []string // evicted by this call's writes
		// noSearchLeft: the pass made its reclaimSearchesPerPass searches.
		noSearchLeft bool
		// lqUsed turns admission fair sharing on in queue a: the CPUs
		// each LocalQueue of ns consumed.
		lqUsed map[string]string
	}{
		"admission fair sharing in the victims' queue: the LocalQueue that consumed more gives first, not the newest": {
			policy:      reclaimAny,
			running:     []running{{inQueue(dispatchedWL("a1", 0, 1, false), "heavy"), "a"}, {inQueue(dispatchedWL("a2", 0, 2, false), "light"), "a"}},
			lqUsed:      map[string]string{"heavy": "8", "light": "1"},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a1",
			wantVictims: []string{"a1"},
			wantMarked:  []string{"a1"},
		},
		"no search left in this pass: nothing said, nothing done": {
			policy:       reclaimAny,
			running:      []running{{dispatchedWL("a1", 0, 1, false), "a"}, {dispatchedWL("a2", 0, 2, false), "a"}},
			noSearchLeft: true,
		},
		"the newest borrower goes": {
			policy:      reclaimAny,
			running:     []running{{dispatchedWL("a1", 0, 1, false), "a"}, {dispatchedWL("a2", 0, 2, false), "a"}},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a2",
			wantVictims: []string{"a2"},
			wantMarked:  []string{"a2"},
		},
		// a2's finished pod gave 2 of its 4 CPUs back: preempting it
		// frees 2, not the 4 that would seem to let b1 in.
		"a victim frees what it is charged, not its requests": {
			policy: reclaimAny,
			running: []running{{shaped("a1", 1, "4", 0, 1), "a"}, {shaped("a2", 2, "2", 1, 2), "a"},
				{shaped("b0", 1, "2", 0, 0), "b"}},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a1",
			wantVictims: []string{"a1"},
			wantMarked:  []string{"a1"},
		},
		"a queue that preempts nothing": {
			running: []running{{dispatchedWL("a1", 0, 1, false), "a"}, {dispatchedWL("a2", 0, 2, false), "a"}},
		},
		"reclaiming lower priority only: nothing helps": {
			policy:      &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionLowerPriority},
			running:     []running{{dispatchedWL("a1", 5, 1, false), "a"}, {dispatchedWL("a2", 5, 2, false), "a"}},
			wantMessage: "no preemption at the hub frees quota: flavor gpu: ",
		},
		"a victim being evicted already (a restarted hub) is enough: none more": {
			policy:      reclaimAny,
			running:     []running{{dispatchedWL("a1", 0, 1, true), "a"}, {dispatchedWL("a2", 0, 2, false), "a"}},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a1",
			wantVictims: []string{"a1"},
		},
		"a reclaim under way waits for its victims": {
			policy:      reclaimAny,
			running:     []running{{dispatchedWL("a1", 0, 1, false), "a"}, {dispatchedWL("a2", 0, 2, true), "a"}},
			under:       []string{"a2"},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a2",
			wantVictims: []string{"a2"},
		},
		"a reclaim whose victims are gone and still no room: a new one": {
			policy:      reclaimAny,
			running:     []running{{dispatchedWL("a1", 0, 1, false), "a"}, {dispatchedWL("a2", 0, 2, false), "a"}},
			under:       []string{"gone"},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/a2",
			wantVictims: []string{"a2"},
			wantMarked:  []string{"a2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cqs := queues(tc.policy)
			var objs []client.Object
			view := &passView{quota: map[quotaKey]quotaOutcome{}, reclaimSearches: reclaimSearchesPerPass, noReclaim: map[reclaimKey]string{}}
			if tc.noSearchLeft {
				view.reclaimSearches = 0
			}
			if tc.lqUsed != nil {
				view.afsScoped = map[string]bool{"a": true}
				view.lqUsage = queue.NewAdmissionFairSharing(&configv1beta1.AdmissionFairSharing{}).NewPass(func(key types.NamespacedName) *strata.LocalQueue {
					lq := testutil.MakeLocalQueue(key.Name, key.Namespace, "a")
					lq.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
						ConsumedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.lqUsed[key.Name])}}}
					return lq
				}, queue.Penalties{})
			}
			usage := map[string]map[string]corev1.ResourceList{}
			for _, r := range tc.running {
				objs = append(objs, r.wl)
				e := newEntry(r.wl, nil)
				view.dispatched = append(view.dispatched, dispatched{e: e, queue: r.queue})
				if usage[r.queue] == nil {
					usage[r.queue] = map[string]corev1.ResourceList{}
				}
				queue.AddRequests(usage[r.queue], flavor, e.charged()) // as chargeUsage
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&strata.Workload{}).Build()
			d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, policy: placement.New("", tas.DefaultOptions(), 0)}
			books := queue.NewBooks(cqs)
			books.ChargeAll(usage)
			pre := testutil.MakeWorkload("b1", "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
			pre.UID = "uid-b1"
			p := pending{entry: newEntry(pre, nil), queue: "b"}
			if diff := cmp.Diff(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("1")}, p.need); diff != "" {
				t.Fatalf("the preemptor's need (-want,+got):\n%s", diff)
			}
			if tc.under != nil {
				r := &reclaim{queue: "b", flavor: flavor, need: p.need}
				for _, v := range tc.under {
					r.victims = append(r.victims, types.UID("uid-"+v))
				}
				d.reclaims = map[types.UID]*reclaim{p.uid: r}
			}
			writes := &passWrites{}
			got := d.reclaimQuota(t.Context(), cqs[1], books, view, p, writes)
			if tc.wantMessage == "" || tc.wantMessage[len(tc.wantMessage)-2:] != ": " {
				if got != tc.wantMessage {
					t.Errorf("message = %q, want %q", got, tc.wantMessage)
				}
			} else if len(got) < len(tc.wantMessage) || got[:len(tc.wantMessage)] != tc.wantMessage {
				t.Errorf("message = %q, want it to start with %q", got, tc.wantMessage)
			}
			var victims []string
			if r := d.reclaims[p.uid]; r != nil {
				for _, uid := range r.victims {
					victims = append(victims, string(uid)[len("uid-"):])
				}
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("the reclaim's victims (-want,+got):\n%s", diff)
			}
			if errs := d.runWrites(context.Background(), writes); len(errs) > 0 {
				t.Fatalf("writes: %v", errs)
			}
			var marked []string
			for _, r := range tc.running {
				var wl strata.Workload
				if err := c.Get(t.Context(), client.ObjectKeyFromObject(r.wl), &wl); err != nil {
					t.Fatal(err)
				}
				if Evicting(&wl) && !Evicting(r.wl) {
					marked = append(marked, wl.Name)
					pc := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
					if pc == nil || pc.Reason != strata.PreemptedInCohortReclamation {
						t.Errorf("%s: Preempted = %+v, want reason %s", wl.Name, pc, strata.PreemptedInCohortReclamation)
					}
				}
			}
			slices.Sort(marked)
			if diff := cmp.Diff(tc.wantMarked, marked); diff != "" {
				t.Errorf("evicted now (-want,+got):\n%s", diff)
			}
			// The preemptor's hold: B's quota taken, so A cannot borrow it
			// back meanwhile.
			if len(tc.wantVictims) > 0 {
				if fit := books.Check("a", flavor, four, false); fit.Err == nil {
					t.Errorf("a may borrow 4 more while B's reclaim is under way")
				}
			}
		})
	}
}

// TestReclaimQuotaForFewerPods: a Workload that may run with fewer pods
// (minCount), for all of whose pods no preemption at the hub frees quota,
// preempts for the most pods it can, as Kueue's partial admission: its
// hold is of those pods.
func TestReclaimQuotaForFewerPods(t *testing.T) {
	const flavor = "gpu"
	base := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	running := func(name string, priority int32, cpu string) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", cpu).Obj()).Obj()
		wl.UID = types.UID("uid-" + name)
		wl.Spec.Priority = &priority
		RecordDispatch(&wl.Status, "w1", flavor, "fits", base)
		return wl
	}
	cases := map[string]struct {
		minCount    *int32
		wantVictims []string
		wantMessage string
		wantHold    string // CPUs
	}{
		"all of its pods or none: no preemption helps": {
			wantMessage: "no preemption at the hub frees quota: flavor gpu: ",
		},
		"5 of its 8 pods once the lower priority goes": {
			minCount:    ptr.To[int32](2),
			wantVictims: []string{"low"},
			wantMessage: "preempting 1 workload(s) at the hub to free quota of flavor gpu; dispatched once their copies are taken back: ns/low; for 5 of the 8 pods of pod set main (partial admission: its queue's quota holds no more)",
			wantHold:    "5",
		},
		"not even its fewest pods: no preemption helps": {
			minCount:    ptr.To[int32](6),
			wantMessage: "no preemption at the hub frees quota: flavor gpu: ",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := testutil.MakeClusterQueue("b").ResourceGroup("cpu").GroupFlavor(flavor, "8").Obj()
			cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
			low, high := running("low", 0, "4"), running("high", 10, "3")
			view := &passView{quota: map[quotaKey]quotaOutcome{}, reclaimSearches: reclaimSearchesPerPass, noReclaim: map[reclaimKey]string{}}
			usage := map[string]map[string]corev1.ResourceList{"b": {}}
			for _, wl := range []*strata.Workload{low, high} {
				e := newEntry(wl, nil)
				view.dispatched = append(view.dispatched, dispatched{e: e, queue: "b"})
				queue.AddRequests(usage["b"], flavor, e.charged())
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(low, high).WithStatusSubresource(&strata.Workload{}).Build()
			d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, policy: placement.New("", tas.DefaultOptions(), 0)}
			books := queue.NewBooks([]*strata.ClusterQueue{cq})
			books.ChargeAll(usage)
			ps := testutil.MakePodSet("main", 8, "cpu", "1").Obj()
			ps.MinCount = tc.minCount
			pre := testutil.MakeWorkload("pre", "ns").PodSets(ps).Obj()
			pre.UID, pre.Spec.Priority = "uid-pre", ptr.To[int32](5)
			p := pending{entry: newEntry(pre, nil), queue: "b"}
			got := d.reclaimQuota(t.Context(), cq, books, view, p, &passWrites{})
			if !strings.HasPrefix(got, tc.wantMessage) {
				t.Errorf("message = %q, want it to start with %q", got, tc.wantMessage)
			}
			var victims []string
			var hold string
			if r := d.reclaims[p.uid]; r != nil {
				for _, uid := range r.victims {
					victims = append(victims, strings.TrimPrefix(string(uid), "uid-"))
				}
				hold = r.need.Cpu().String()
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("the reclaim's victims (-want,+got):\n%s", diff)
			}
			if hold != tc.wantHold {
				t.Errorf("held %q CPUs, want %q", hold, tc.wantHold)
			}
		})
	}
}

// TestHoldReclaims: a waiting preemptor's reclaim holds its quota; one
// dispatched but not admitted keeps its reclaim without charging it (its
// dispatch does), so that a refusal finds the quota held again; an
// admitted or gone one's reclaim ends.
func TestHoldReclaims(t *testing.T) {
	const flavor = "gpu"
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	wl := func(name string, dispatched, admitted bool) *entry {
		w := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
		w.UID = types.UID("uid-" + name)
		if dispatched {
			RecordDispatch(&w.Status, "w1", flavor, "fits", time.Now())
		}
		if admitted {
			w.Status.Admission = &strata.Admission{ClusterQueue: "b"}
		}
		return newEntry(w, nil)
	}
	waiting, inFlight, admitted, recordedOnly := wl("waiting", false, false), wl("in-flight", true, false), wl("admitted", true, true), wl("recorded", false, false)
	// An admitted elastic Workload whose scale-up waits for its reclaim.
	scaling := wl("scaling", true, true)
	d := &Dispatcher{recorded: map[types.UID]recorded{recordedOnly.uid: {generation: 1, flavor: flavor}}, reclaims: map[types.UID]*reclaim{}}
	for _, e := range []*entry{waiting, inFlight, admitted, recordedOnly, scaling, wl("gone", false, false)} {
		d.reclaims[e.uid] = &reclaim{queue: "b", flavor: flavor, need: four}
	}
	cq := testutil.MakeClusterQueue("b").ResourceGroup("cpu").GroupFlavor(flavor, "12").Obj()
	books := queue.NewBooks([]*strata.ClusterQueue{cq})
	d.holdReclaims([]pending{{entry: waiting, queue: "b"}},
		[]dispatched{{e: inFlight, queue: "b"}, {e: admitted, queue: "b"}, {e: scaling, queue: "b"}},
		[]resizing{{e: scaling, queue: "b", resize: workload.Resize{From: 1, To: 2}}}, books)
	var kept []string
	for uid := range d.reclaims {
		kept = append(kept, string(uid))
	}
	slices.Sort(kept)
	if diff := cmp.Diff([]string{"uid-in-flight", "uid-recorded", "uid-scaling", "uid-waiting"}, kept); diff != "" {
		t.Errorf("reclaims kept (-want,+got):\n%s", diff)
	}
	// Only the waiting one's and the scale-up's 4 CPUs are held: 4 of 12
	// are left.
	if fit := books.Check("b", flavor, four, false); fit.Err != nil {
		t.Errorf("4 CPUs do not fit after two holds: %v", fit.Err)
	}
	if fit := books.Check("b", flavor, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}, false); fit.Err == nil {
		t.Error("5 CPUs fit: a waiting preemptor's hold is not charged")
	}
}

// TestReclaimQuotaChoosesTheFlavor: with two flavors, the hub reclaims
// where Kueue's flavor assigner would: from a borrower of the cohort on
// the second flavor rather than in its own queue on the first.
func TestReclaimQuotaChoosesTheFlavor(t *testing.T) {
	base := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	dispatchedOn := func(name, flavor string, sec int) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
		wl.UID = types.UID("uid-" + name)
		wl.Spec.Priority = new(int32)
		RecordDispatch(&wl.Status, "w1", flavor, "fits", base.Add(time.Duration(sec)*time.Second))
		return wl
	}
	a := testutil.MakeClusterQueue("a").Cohort("teams").ResourceGroup("cpu").GroupFlavor("f1", "4").GroupFlavor("f2", "4").Obj()
	a.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny}
	b := testutil.MakeClusterQueue("b").Cohort("teams").ResourceGroup("cpu").GroupFlavor("f1", "0").GroupFlavor("f2", "4").Obj()
	running := []struct {
		wl            *strata.Workload
		queue, flavor string
	}{
		{dispatchedOn("own", "f1", 1), "a", "f1"},
		{dispatchedOn("b1", "f2", 2), "b", "f2"},
		{dispatchedOn("b2", "f2", 3), "b", "f2"},
	}
	var objs []client.Object
	view := &passView{quota: map[quotaKey]quotaOutcome{}, reclaimSearches: reclaimSearchesPerPass, noReclaim: map[reclaimKey]string{}}
	usage := map[string]map[string]corev1.ResourceList{}
	for _, r := range running {
		objs = append(objs, r.wl)
		e := newEntry(r.wl, nil)
		view.dispatched = append(view.dispatched, dispatched{e: e, queue: r.queue})
		if usage[r.queue] == nil {
			usage[r.queue] = map[string]corev1.ResourceList{}
		}
		queue.AddRequests(usage[r.queue], r.flavor, e.need)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&strata.Workload{}).Build()
	d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, policy: placement.New("", tas.DefaultOptions(), 0)}
	books := queue.NewBooks([]*strata.ClusterQueue{a, b})
	books.ChargeAll(usage)
	pre := testutil.MakeWorkload("pre", "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
	pre.UID = "uid-pre"
	pre.Spec.Priority = ptr.To[int32](10)
	p := pending{entry: newEntry(pre, nil), queue: "a"}
	got := d.reclaimQuota(t.Context(), a, books, view, p, &passWrites{})
	if want := "preempting 1 workload(s) at the hub to free quota of flavor f2; dispatched once their copies are taken back: ns/b2"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

// TestReclaimQuotaFairSharing: with the hub's fairSharing on, a hub queue
// that would borrow once its Workload is dispatched takes fleet quota back
// from the queue whose share stays higher (classically it may not: it
// would preempt while borrowing without borrowWithinCohort).
func TestReclaimQuotaFairSharing(t *testing.T) {
	const flavor = "gpu"
	base := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	dispatchedWL := func(name, cpu string, sec int) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", cpu).Obj()).Obj()
		wl.UID = types.UID("uid-" + name)
		RecordDispatch(&wl.Status, "w1", flavor, "fits", base.Add(time.Duration(sec)*time.Second))
		return wl
	}
	// a (2), b (6), c (4): 12 CPUs in cohort teams. a holds 8 in four
	// Workloads of 2, b 4: b1 (4) would take b to 8, borrowing 2 of 12
	// (167‰) against a's 6 (500‰).
	for _, tc := range []struct {
		name        string
		fair        bool
		wantVictims []string
	}{
		{name: "classical: no preemption while borrowing"},
		{name: "fair sharing: a's newest two go", fair: true, wantVictims: []string{"a4", "a3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cqs := []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "2").Obj(),
				testutil.MakeClusterQueue("b").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "6").Obj(),
				testutil.MakeClusterQueue("c").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "4").Obj(),
			}
			cqs[1].Spec.Preemption = &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny}
			running := map[string]*strata.Workload{"a1": dispatchedWL("a1", "2", 1), "a2": dispatchedWL("a2", "2", 2),
				"a3": dispatchedWL("a3", "2", 3), "a4": dispatchedWL("a4", "2", 4), "b0": dispatchedWL("b0", "4", 0)}
			var objs []client.Object
			view := &passView{quota: map[quotaKey]quotaOutcome{}, reclaimSearches: reclaimSearchesPerPass, noReclaim: map[reclaimKey]string{}}
			usage := map[string]map[string]corev1.ResourceList{}
			for _, name := range []string{"a1", "a2", "a3", "a4", "b0"} {
				wl := running[name]
				q := name[:1]
				objs = append(objs, wl)
				e := newEntry(wl, nil)
				view.dispatched = append(view.dispatched, dispatched{e: e, queue: q})
				if usage[q] == nil {
					usage[q] = map[string]corev1.ResourceList{}
				}
				queue.AddRequests(usage[q], flavor, e.charged())
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&strata.Workload{}).Build()
			d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, policy: placement.New("", tas.DefaultOptions(), 0)}
			if tc.fair {
				d.fair = []queue.FairStrategy{queue.LessThanOrEqualToFinalShare, queue.LessThanInitialShare}
			}
			books := queue.NewBooks(cqs)
			books.ChargeAll(usage)
			pre := testutil.MakeWorkload("b1", "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
			pre.UID = "uid-b1"
			p := pending{entry: newEntry(pre, nil), queue: "b"}
			d.reclaimQuota(t.Context(), cqs[1], books, view, p, &passWrites{})
			var victims []string
			if r := d.reclaims[p.uid]; r != nil {
				for _, uid := range r.victims {
					victims = append(victims, string(uid)[len("uid-"):])
				}
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("the reclaim's victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHeightAfterReclaiming: the height a head that must preempt still
// borrows once the victims of a search on quota alone are gone (Kueue's
// preemption oracle, for the order of a pass's heads). a (nominal 8,
// within: LowerPriority) runs hi (4, priority 50), low1 and low2 (2 each,
// priority 0); b lends 2; p (4, priority 10) in a.
func TestHeightAfterReclaiming(t *testing.T) {
	const flavor = "gpu"
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	run := func(name string, cpu string, priority int32, sec int, evicting bool) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", cpu).Obj()).Obj()
		wl.UID = types.UID("uid-" + name)
		wl.Spec.Priority = &priority
		RecordDispatch(&wl.Status, "w1", flavor, "fits", base.Add(time.Duration(sec)*time.Second))
		if evicting {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption})
		}
		return wl
	}
	cases := map[string]struct {
		policy     *strata.ClusterQueuePreemption
		lowEvicted bool
		want       int
		wantFound  bool
	}{
		// low2 alone goes (the newest of the lowest): p then borrows 2 of b's.
		"one victim, still borrowing": {
			policy: &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}, want: 1, wantFound: true,
		},
		"a queue that preempts nothing": {},
		// Being evicted already, low1 and low2 are no candidates: hi is
		// of a higher priority.
		"no candidates": {
			policy: &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}, lowEvicted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := testutil.MakeClusterQueue("a").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "8").Obj()
			a.Spec.Preemption = tc.policy
			b := testutil.MakeClusterQueue("b").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavor, "2").Obj()
			var ds []dispatched
			usage := map[string]map[string]corev1.ResourceList{"a": {}}
			for _, wl := range []*strata.Workload{run("hi", "4", 50, 1, false), run("low1", "2", 0, 2, tc.lowEvicted), run("low2", "2", 0, 3, tc.lowEvicted)} {
				e := newEntry(wl, nil)
				ds = append(ds, dispatched{e: e, queue: "a"})
				queue.AddRequests(usage["a"], flavor, e.charged())
			}
			books := queue.NewBooks([]*strata.ClusterQueue{a, b})
			books.ChargeAll(usage)
			pre := testutil.MakeWorkload("p", "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", "4").Obj()).Obj()
			pre.UID = "uid-p"
			pre.Spec.Priority = ptr.To[int32](10)
			h, found := heightAfterReclaiming(a, flavor, books, ds, pending{entry: newEntry(pre, nil), queue: "a"})
			if h != tc.want || found != tc.wantFound {
				t.Errorf("heightAfterReclaiming() = %d, %t; want %d, %t", h, found, tc.want, tc.wantFound)
			}
		})
	}
}

// TestReclaimUnderWay: a reclaim under way marks again only its victims
// still dispatched as they were chosen (one whose copy left and that was
// dispatched again is no longer its victim), and a preemptor evicted
// before its worker admitted it gives its own reclaim up.
func TestReclaimUnderWay(t *testing.T) {
	now := time.Now()
	cq := testutil.MakeClusterQueue("b").ResourceGroup("cpu").GroupFlavor("f1", "8").GroupFlavor("f2", "4").Obj()
	cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	mk := func(name string, priority int32, cpu string) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ns").PodSets(testutil.MakePodSet("main", 1, "cpu", cpu).Obj()).Obj()
		wl.UID, wl.Spec.Priority = types.UID("uid-"+name), ptr.To(priority)
		return wl
	}
	// again: a victim of the reclaim, chosen at its first dispatch, whose
	// copy left; dispatched again since, on f2. going: the other victim,
	// its copy still being taken back. mid: a preemptor of its own,
	// dispatched, not admitted yet, with a reclaim.
	again, going, mid := mk("again", 0, "4"), mk("going", 0, "4"), mk("mid", 3, "4")
	RecordDispatch(&again.Status, "w1", "f1", "fits", now)
	firstGeneration := Generation(again)
	RecordOutcome(&again.Status, strata.PlacementEvicted, ReasonPending, "", "taken back", now)
	RecordDispatch(&again.Status, "w1", "f2", "fits", now)
	RecordDispatch(&going.Status, "w1", "f1", "fits", now)
	meta.SetStatusCondition(&going.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption})
	RecordDispatch(&mid.Status, "w1", "f1", "fits", now)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(again, going, mid).WithStatusSubresource(&strata.Workload{}).Build()
	d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, policy: placement.New("", tas.DefaultOptions(), 0)}
	view := &passView{quota: map[quotaKey]quotaOutcome{}, reclaimSearches: reclaimSearchesPerPass, noReclaim: map[reclaimKey]string{}}
	for _, wl := range []*strata.Workload{again, going, mid} {
		view.dispatched = append(view.dispatched, dispatched{e: newEntry(wl, nil), queue: "b"})
	}
	p := pending{entry: newEntry(mk("urgent", 5, "8"), nil), queue: "b"}
	d.reclaims = map[types.UID]*reclaim{
		p.uid:   {queue: "b", flavor: "f1", need: p.need, victims: []types.UID{again.UID, going.UID}, why: map[types.UID]string{}, generation: map[types.UID]int64{again.UID: firstGeneration, going.UID: Generation(going)}},
		mid.UID: {queue: "b", flavor: "f1", need: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
	}
	books := queue.NewBooks([]*strata.ClusterQueue{cq})
	writes := &passWrites{}
	got := d.reclaimQuota(t.Context(), cq, books, view, p, writes)
	if !strings.Contains(got, "ns/going") || strings.Contains(got, "ns/again") {
		t.Errorf("reclaimQuota() = %q, want it waiting for ns/going only", got)
	}
	// The mid preemptor, a victim of a new search, gives its hold up.
	d.markEvicted(t.Context(), &view.dispatched[2], p, cq, strata.PreemptedInClusterQueue, writes)
	if _, ok := d.reclaims[mid.UID]; ok {
		t.Errorf("an evicted preemptor keeps its reclaim")
	}
	if errs := d.runWrites(t.Context(), writes); len(errs) > 0 && errs[0] != nil {
		t.Fatal(errs)
	}
	var cur strata.Workload
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(again), &cur); err != nil {
		t.Fatal(err)
	}
	if Evicting(&cur) {
		t.Errorf("%s, dispatched again since it was chosen, is evicted again", again.Name)
	}
}

// TestReclaimKeyOf: a pass's memo of quota preemption searches that
// found nothing tells apart Workloads whose searches differ: one whose
// pod sets may go on different flavors, one that may run with fewer pods,
// and, where the queue preempts newer Workloads of its priority, one
// queued at another time.
func TestReclaimKeyOf(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	mk := func(name string, queued time.Time, podSets ...strata.PodSet) pending {
		wl := testutil.MakeWorkload(name, "ns").PodSets(podSets...).Obj()
		wl.CreationTimestamp = metav1.NewTime(queued)
		return pending{entry: newEntry(wl, nil), queue: "b"}
	}
	one := testutil.MakePodSet("main", 2, "cpu", "4").Obj()
	a, b := testutil.MakePodSet("a", 1, "cpu", "4").Obj(), testutil.MakePodSet("b", 1, "cpu", "4").Obj()
	fewer := testutil.MakePodSet("main", 2, "cpu", "4").Obj()
	fewer.MinCount = ptr.To[int32](1)
	plain := testutil.MakeClusterQueue("b").Obj()
	newer := testutil.MakeClusterQueue("b").Obj()
	newer.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerOrNewerEqualPriority}
	base := reclaimKeyOf(plain, mk("x", t0, one), false)
	cases := map[string]struct {
		cq       *strata.ClusterQueue
		p        pending
		wantSame bool
	}{
		"the same shape, queued later":         {cq: plain, p: mk("y", t0.Add(time.Minute), one), wantSame: true},
		"pod sets that may split":              {cq: plain, p: mk("y", t0, a, b)},
		"may run with fewer pods":              {cq: plain, p: mk("y", t0, fewer)},
		"queued later, newer ones preemptible": {cq: newer, p: mk("y", t0.Add(time.Minute), one)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ref := base
			if tc.cq == newer {
				ref = reclaimKeyOf(newer, mk("x", t0, one), false)
			}
			if got := reclaimKeyOf(tc.cq, tc.p, false); (got == ref) != tc.wantSame {
				t.Errorf("reclaimKeyOf() = %+v against %+v: same %v, want %v", got, ref, got == ref, tc.wantSame)
			}
		})
	}
}
