package dispatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
)

// TestReserveThenDispatch: a reservation at the hub holds its queue's
// quota on the flavors chosen, each check Pending, and is not a dispatch;
// the dispatch's record ends it, the check states kept as they were.
func TestReserveThenDispatch(t *testing.T) {
	wl := testutil.MakeWorkload("train", "ml").PodSets(
		testutil.MakePodSet("launcher", 1, "cpu", "1").PodSet,
		testutil.MakePodSet("worker", 4, "cpu", "2", "nvidia.com/gpu", "1").PodSet).Obj()
	// Evicted (a check's Retry) before this reservation.
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByAdmissionCheck})
	Reserve(wl, "team", "a100", []strata.PodSetFlavor{{Name: "launcher", Flavor: "cpu-only"}}, []int32{1, 2}, []string{"budget"}, t0)
	if !ReservedAtHub(wl) {
		t.Fatalf("ReservedAtHub() = false after Reserve")
	}
	want := &strata.Admission{ClusterQueue: "team", PodSetAssignments: []strata.PodSetAssignment{
		{Name: "launcher", Flavor: "cpu-only", Count: 1, ResourceUsage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")}},
		{Name: "worker", Flavor: "a100", Count: 2, ResourceUsage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("2")}},
	}}
	quantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	if diff := cmp.Diff(want, wl.Status.Admission, quantities); diff != "" {
		t.Errorf("admission (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]corev1.ResourceList{
		"cpu-only": {corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")},
		"a100":     {corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("2")},
	}, ReservedUsage(wl), quantities); diff != "" {
		t.Errorf("ReservedUsage() (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{1, 2}, reservedCounts(wl)); diff != "" {
		t.Errorf("reservedCounts() (-want,+got):\n%s", diff)
	}
	conds := map[string]string{}
	for _, c := range wl.Status.Conditions {
		conds[c.Type] = string(c.Status) + "/" + c.Reason
	}
	if diff := cmp.Diff(map[string]string{strata.WorkloadQuotaReserved: "True/QuotaReserved", strata.WorkloadAdmitted: "False/" + strata.WaitingForAdmissionChecks,
		strata.WorkloadEvicted: "False/QuotaReserved"}, conds); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]strata.AdmissionCheckState{{Name: "budget", State: strata.CheckStatePending}}, wl.Status.AdmissionChecks,
		cmpopts.IgnoreFields(strata.AdmissionCheckState{}, "LastTransitionTime")); diff != "" {
		t.Errorf("check states (-want,+got):\n%s", diff)
	}

	wl.Status.AdmissionChecks[0].State = strata.CheckStateReady
	RecordDispatch(&wl.Status, "w1", "a100", "fits", t0.Add(time.Minute))
	if wl.Status.Admission != nil || ReservedAtHub(wl) {
		t.Errorf("the reservation stays after the dispatch: %+v", wl.Status.Admission)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved); c != nil {
		t.Errorf("QuotaReserved stays after the dispatch: %+v", c)
	}
	if wl.Status.AdmissionChecks[0].State != strata.CheckStateReady {
		t.Errorf("check states changed by the dispatch: %+v", wl.Status.AdmissionChecks)
	}
}

func TestReservedFlavorsAndCounts(t *testing.T) {
	wl := testutil.MakeWorkload("train", "ml").PodSets(testutil.MakePodSet("a", 2, "cpu", "1").PodSet, testutil.MakePodSet("b", 3, "cpu", "1").PodSet).Obj()
	cases := map[string]struct {
		psas       []strata.PodSetAssignment
		wantFlavor string
		wantSplit  []strata.PodSetFlavor
		wantCounts []int32
	}{
		"none": {},
		"one flavor, every pod": {
			psas:       []strata.PodSetAssignment{{Name: "a", Flavor: "x", Count: 2}, {Name: "b", Flavor: "x", Count: 3}},
			wantFlavor: "x",
		},
		"pod sets on different flavors": {
			psas:       []strata.PodSetAssignment{{Name: "a", Flavor: "x", Count: 2}, {Name: "b", Flavor: "y", Count: 3}},
			wantFlavor: "x", wantSplit: []strata.PodSetFlavor{{Name: "a", Flavor: "x"}, {Name: "b", Flavor: "y"}},
		},
		"fewer pods of one pod set (partial admission)": {
			psas:       []strata.PodSetAssignment{{Name: "a", Flavor: "x", Count: 2}, {Name: "b", Flavor: "x", Count: 1}},
			wantFlavor: "x", wantCounts: []int32{2, 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := wl.DeepCopy()
			if tc.psas != nil {
				w.Status.Admission = &strata.Admission{ClusterQueue: "q", PodSetAssignments: tc.psas}
			}
			flavor, split := reservedFlavors(w.Status.Admission)
			if diff := cmp.Diff([]any{tc.wantFlavor, tc.wantSplit, tc.wantCounts}, []any{flavor, split, reservedCounts(w)}); diff != "" {
				t.Errorf("flavor, split, counts (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOnReservedFlavors: a Workload reserved at the hub is dispatched
// with every pod set on the flavor reserved for it, or not at all.
func TestOnReservedFlavors(t *testing.T) {
	oneFlavor := &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{{Name: "a", Flavor: "x"}, {Name: "b", Flavor: "x"}}}
	split := &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{{Name: "a", Flavor: "x"}, {Name: "b", Flavor: "y"}}}
	cases := map[string]struct {
		a             *strata.Admission
		flavor        string
		podSetFlavors []strata.PodSetFlavor
		want          bool
	}{
		"no reservation":                      {flavor: "x"},
		"on the flavor reserved":              {a: oneFlavor, flavor: "x", want: true},
		"on another flavor":                   {a: oneFlavor, flavor: "y"},
		"split though reserved on one flavor": {a: oneFlavor, flavor: "x", podSetFlavors: []strata.PodSetFlavor{{Name: "a", Flavor: "x"}, {Name: "b", Flavor: "y"}}},
		"split as reserved":                   {a: split, flavor: "x", podSetFlavors: []strata.PodSetFlavor{{Name: "a", Flavor: "x"}, {Name: "b", Flavor: "y"}}, want: true},
		"split otherwise":                     {a: split, flavor: "y", podSetFlavors: []strata.PodSetFlavor{{Name: "a", Flavor: "y"}, {Name: "b", Flavor: "x"}}},
		"whole on one of the flavors split":   {a: split, flavor: "x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OnReservedFlavors(tc.a, tc.flavor, tc.podSetFlavors); got != tc.want {
				t.Errorf("OnReservedFlavors() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRelease: a check's Retry takes the reservation back and marks the
// Workload evicted and queued again, every check Pending; a release for
// another cause is not an eviction.
func TestRelease(t *testing.T) {
	for name, evicted := range map[string]bool{"a Retry": true, "its queue stopped": false} {
		t.Run(name, func(t *testing.T) {
			wl := testutil.MakeWorkload("train", "ml").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").PodSet).Obj()
			Reserve(wl, "team", "a100", nil, nil, []string{"budget", "policy"}, t0)
			wl.Status.AdmissionChecks[0].State, wl.Status.AdmissionChecks[1].State = strata.CheckStateRetry, strata.CheckStateReady
			Release(wl, "Why", "taken back", evicted, t0.Add(time.Minute))
			if ReservedAtHub(wl) {
				t.Fatalf("still reserved")
			}
			for _, s := range wl.Status.AdmissionChecks {
				if s.State != strata.CheckStatePending {
					t.Errorf("check %s is %s, want Pending", s.Name, s.State)
				}
			}
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadQuotaReserved); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("QuotaReserved = %+v, want False", c)
			}
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c.Reason != "Why" || c.Message != "taken back" {
				t.Errorf("Admitted = %+v", c)
			}
			if got := meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadEvicted); got != evicted {
				t.Errorf("Evicted = %v, want %v", got, evicted)
			}
			if got := meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadRequeued); got != evicted {
				t.Errorf("Requeued = %v, want %v", got, evicted)
			}
		})
	}
}

// TestReleaseWhy: a reservation stands while its Workload is active, in
// the queue that reserved it, running, with its job unchanged.
func TestReleaseWhy(t *testing.T) {
	reserved := testutil.MakeWorkload("train", "ml").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").PodSet).Obj()
	Reserve(reserved, "team", "a100", nil, nil, []string{"budget"}, t0)
	team := testutil.MakeClusterQueue("team").Flavor("a100").Obj()
	other := testutil.MakeClusterQueue("other").Flavor("a100").Obj()
	inactive := reserved.DeepCopy()
	inactive.Spec.Active = ptr.To(false)
	cases := map[string]struct {
		e          *entry
		cq         *strata.ClusterQueue
		stop       queue.Stop
		wantReason string
	}{
		"stands":                                  {e: newEntry(reserved, nil), cq: team},
		"its LocalQueue points at no queue now":   {e: newEntry(reserved, nil), wantReason: ReasonPending},
		"its LocalQueue points at another queue":  {e: newEntry(reserved, nil), cq: other, wantReason: ReasonPending},
		"deactivated":                             {e: newEntry(inactive, nil), cq: team, wantReason: ReasonDeactivated},
		"its queue stopped":                       {e: newEntry(reserved, nil), cq: team, stop: queue.Stop{Stopped: true, Message: "held"}, wantReason: strata.QueueStopped},
		"its job changed (the Workload outdated)": {e: func() *entry { e := newEntry(reserved, nil); e.outdated = true; return e }(), cq: team, wantReason: ReasonPending},
		"preempted at the hub": {e: func() *entry {
			wl := reserved.DeepCopy()
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption, Message: "preempted at the hub"})
			return newEntry(wl, nil)
		}(), cq: team, wantReason: strata.EvictedByPreemption},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, why := releaseWhy(tc.e, tc.cq, tc.stop)
			if reason != tc.wantReason || (why == "") != (tc.wantReason == "") {
				t.Errorf("releaseWhy() = %q, %q; want reason %q", reason, why, tc.wantReason)
			}
		})
	}
}

// TestCheckDispatched: a hub queue's check retried after the dispatch
// evicts the Workload at the hub (its copy is taken back); one rejected
// deactivates it; Ready checks, a queue without checks now, or a
// Workload already inactive change nothing.
func TestCheckDispatched(t *testing.T) {
	withChecks := testutil.MakeClusterQueue("team").Flavor("a100").Obj()
	withChecks.Spec.AdmissionChecks = []string{"budget"}
	without := testutil.MakeClusterQueue("team").Flavor("a100").Obj()
	otherCheck := testutil.MakeClusterQueue("team").Flavor("a100").Obj()
	otherCheck.Spec.AdmissionChecks = []string{"audit"}
	onOtherFlavor := testutil.MakeClusterQueue("team").Flavor("a100").Flavor("h100").Obj()
	onOtherFlavor.Spec.AdmissionChecksStrategy = &strata.AdmissionChecksStrategy{AdmissionChecks: []strata.AdmissionCheckStrategyRule{{Name: "budget", OnFlavors: []string{"h100"}}}}
	cases := map[string]struct {
		state       strata.CheckState
		cq          *strata.ClusterQueue
		inactive    bool
		wantEvicted string // the Evicted condition's reason, "" when none
		wantActive  bool
	}{
		"Ready":    {state: strata.CheckStateReady, cq: withChecks, wantActive: true},
		"Retry":    {state: strata.CheckStateRetry, cq: withChecks, wantEvicted: strata.EvictedByAdmissionCheck, wantActive: true},
		"Rejected": {state: strata.CheckStateRejected, cq: withChecks},
		"Retry, the queue's checks removed since": {state: strata.CheckStateRetry, cq: without, wantActive: true},
		"Rejected, already inactive":              {state: strata.CheckStateRejected, cq: withChecks, inactive: true},
		// A state its queue's checks no longer name (one removed, another
		// added) or a check of a flavor it is not placed on: not its.
		"Retry of a check the queue no longer names": {state: strata.CheckStateRetry, cq: otherCheck, wantActive: true},
		"Rejected by a check of another flavor":      {state: strata.CheckStateRejected, cq: onOtherFlavor, wantActive: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := testutil.MakeWorkload("train", "ml").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").PodSet).Obj()
			wl.UID = "uid-train"
			RecordDispatch(&wl.Status, "w1", "a100", "fits", t0)
			wl.Status.AdmissionChecks = []strata.AdmissionCheckState{{Name: "budget", State: tc.state, Message: "said so", LastTransitionTime: metav1.NewTime(t0)}}
			if tc.inactive {
				wl.Spec.Active = ptr.To(false)
			}
			checks := []client.Object{activeCheck("budget"), activeCheck("audit")}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(checks, wl)...).WithStatusSubresource(&strata.Workload{}).Build()
			d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, waiting: map[types.UID]written{}}
			var cur strata.Workload
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
				t.Fatal(err)
			}
			if err := d.checkDispatched(t.Context(), newCheckReads(c), newEntry(&cur, nil), tc.cq, t0.Add(time.Minute)); err != nil {
				t.Fatalf("checkDispatched(): %v", err)
			}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
				t.Fatal(err)
			}
			evicted := ""
			if c := meta.FindStatusCondition(cur.Status.Conditions, strata.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
				evicted = c.Reason
			}
			if evicted != tc.wantEvicted || ptr.Deref(cur.Spec.Active, true) != tc.wantActive {
				t.Errorf("Evicted %q, active %v; want %q, %v", evicted, ptr.Deref(cur.Spec.Active, true), tc.wantEvicted, tc.wantActive)
			}
		})
	}
}

// activeCheck is an AdmissionCheck of a controller of the user's, Active.
func activeCheck(name string) *strata.AdmissionCheck {
	return &strata.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       strata.AdmissionCheckSpec{ControllerName: "example.com/" + name},
		Status: strata.AdmissionCheckStatus{Conditions: []metav1.Condition{{
			Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", LastTransitionTime: metav1.NewTime(t0),
		}}},
	}
}

// TestReservedAhead: a reservation this process wrote stands for the
// Workload while the informer shows the version it was written over, and
// is forgotten once it shows any other.
func TestReservedAhead(t *testing.T) {
	before := testutil.MakeWorkload("train", "ml").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").PodSet).Obj()
	before.UID, before.ResourceVersion = "uid-train", "5"
	written := before.DeepCopy()
	Reserve(written, "team", "a100", nil, nil, []string{"budget"}, t0)
	written.ResourceVersion = "6"
	d := &Dispatcher{reservedAhead: map[types.UID]reservedWrite{before.UID: {over: "5", wl: written}}}
	if got := d.reservedAheadOf(newEntry(before, nil)); got != written {
		t.Fatalf("reservedAheadOf(the version written over) = %v, want the reservation", got)
	}
	later := before.DeepCopy()
	later.ResourceVersion = "7" // any later write, the reservation's or another's
	if got := d.reservedAheadOf(newEntry(later, nil)); got != nil {
		t.Errorf("reservedAheadOf(a later version) = %v, want nil", got)
	}
	if got := d.reservedAheadOf(newEntry(before, nil)); got != nil {
		t.Errorf("the reservation is not forgotten once the informer moved on: %v", got)
	}
}

// TestPendingWithCheckUpdates: a workload whose hub queue's Ready checks
// ask for a node selector and tolerations is placed with them (its copy
// carries them); the index's entry and Workload are left as they were,
// and a workload without such updates is the same pending.
func TestPendingWithCheckUpdates(t *testing.T) {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid", Generation: 1},
		Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}},
		Status: strata.WorkloadStatus{AdmissionChecks: []strata.AdmissionCheckState{
			{Name: "budget", State: strata.CheckStateReady, PodSetUpdates: []strata.PodSetUpdate{{Name: "main",
				NodeSelector: map[string]string{"pool": "reserved"}, Tolerations: []corev1.Toleration{gpu}}}}}}}
	e := newEntry(wl, nil)
	p := pending{entry: e}.withCheckUpdates()
	spec := p.wl.Spec.PodSets[0].Template.Spec
	if diff := cmp.Diff(map[string]string{"pool": "reserved"}, spec.NodeSelector); diff != "" {
		t.Errorf("placed node selector (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{gpu}, spec.Tolerations); diff != "" {
		t.Errorf("placed tolerations (-want,+got):\n%s", diff)
	}
	if p.entry == e || p.shape == e.shape {
		t.Error("the placed pending shares the index's entry or its shape")
	}
	if e.wl != wl || wl.Spec.PodSets[0].Template.Spec.NodeSelector != nil {
		t.Error("the index's entry or Workload changed")
	}
	wl.Status.AdmissionChecks[0].PodSetUpdates = nil
	plain := newEntry(wl, nil)
	if q := (pending{entry: plain}).withCheckUpdates(); q.entry != plain {
		t.Error("a workload without updates is placed as another entry")
	}
}
