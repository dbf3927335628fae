package scheduler

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/testutil"
)

// indexOp is an informer event: a workload's new object, or the deletion
// of the workload named del.
type indexOp struct {
	set *strata.Workload
	del string
}

// viewSummary is an indexView with names for workloads.
type viewSummary struct {
	Pending  map[string][]string
	Admitted map[string]int32
	Usage    map[string]map[string]corev1.ResourceList
	Pods     map[string]int32
	Recheck  []string
	Asked    map[string]workloadState
}

func summarize(v *indexView) viewSummary {
	s := viewSummary{Pending: map[string][]string{}, Admitted: v.admitted, Usage: v.usage, Pods: v.pods, Asked: map[string]workloadState{}}
	for q, wls := range v.pending {
		// Every workload of the tests is in namespace "ns".
		for _, wl := range wls {
			s.Pending[q.Name] = append(s.Pending[q.Name], wl.Name)
		}
		slices.Sort(s.Pending[q.Name])
	}
	for _, wl := range v.recheck {
		s.Recheck = append(s.Recheck, wl.Name)
	}
	slices.Sort(s.Recheck)
	for key, e := range v.asked {
		s.Asked[key.Name] = e.state
	}
	return s
}

func TestWorkloadIndex(t *testing.T) {
	pending := func(name, queue string) *strata.Workload {
		return testutil.MakeWorkload(name, "ns").Queue(queue).Obj()
	}
	admitted := func(name, queue string, psas ...strata.PodSetAssignment) *strata.Workload {
		return testutil.MakeWorkload(name, "ns").Queue(queue).Admission(&strata.Admission{ClusterQueue: queue, PodSetAssignments: psas}).Obj()
	}
	withCondition := func(wl *strata.Workload, typ string) *strata.Workload {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R"})
		return wl
	}
	psa := func(flavor string, count int32, usage corev1.ResourceList) strata.PodSetAssignment {
		return strata.PodSetAssignment{Name: "main", Flavor: flavor, Count: count, ResourceUsage: usage}
	}
	cases := map[string]struct {
		ops  []indexOp
		ask  []string
		want viewSummary
	}{
		"nothing": {},
		"pending workloads by queue": {
			ops: []indexOp{{set: pending("a", "q1")}, {set: pending("b", "q1")}, {set: pending("c", "q2")}},
			want: viewSummary{
				Pending: map[string][]string{"q1": {"a", "b"}, "q2": {"c"}},
			},
		},
		"admitted workloads summed by the admission's queue and flavor": {
			ops: []indexOp{
				{set: admitted("a", "q1", psa("f1", 2, rl("cpu", "2")))},
				{set: admitted("b", "q1", psa("f1", 1, rl("cpu", "500m", "memory", "1Gi")), psa("f2", 4, rl("cpu", "4")))},
				{set: admitted("c", "q2", psa("f1", 3, rl("cpu", "3")))},
			},
			want: viewSummary{
				Admitted: map[string]int32{"q1": 2, "q2": 1},
				Usage: map[string]map[string]corev1.ResourceList{
					"q1": {"f1": rl("cpu", "2500m", "memory", "1Gi"), "f2": rl("cpu", "4")},
					"q2": {"f1": rl("cpu", "3")},
				},
				Pods:    map[string]int32{"f1": 6, "f2": 4},
				Recheck: []string{"a", "b", "c"},
			},
		},
		"admission moves a workload from pending to the totals": {
			ops: []indexOp{{set: pending("a", "q1")}, {set: admitted("a", "q1", psa("f1", 2, rl("cpu", "2")))}},
			want: viewSummary{
				Admitted: map[string]int32{"q1": 1},
				Usage:    map[string]map[string]corev1.ResourceList{"q1": {"f1": rl("cpu", "2")}},
				Pods:     map[string]int32{"f1": 2},
				Recheck:  []string{"a"},
			},
		},
		"eviction gives the usage back exactly": {
			ops: []indexOp{
				{set: admitted("a", "q1", psa("f1", 2, rl("cpu", "1500m")))},
				{set: admitted("b", "q1", psa("f1", 1, rl("cpu", "1")))},
				{set: pending("a", "q1")},
			},
			want: viewSummary{
				Pending:  map[string][]string{"q1": {"a"}},
				Admitted: map[string]int32{"q1": 1},
				Usage:    map[string]map[string]corev1.ResourceList{"q1": {"f1": rl("cpu", "1")}},
				Pods:     map[string]int32{"f1": 1},
				Recheck:  []string{"b"},
			},
		},
		"finished and deleted workloads leave nothing behind": {
			ops: []indexOp{
				{set: admitted("a", "q1", psa("f1", 2, rl("cpu", "2")))},
				{set: withCondition(admitted("a", "q1", psa("f1", 2, rl("cpu", "2"))), strata.WorkloadFinished)},
				{set: pending("b", "q1")},
				{del: "b"},
				{set: admitted("c", "q2", psa("f1", 1, rl("cpu", "1")))},
				{del: "c"},
				{del: "never-seen"},
			},
		},
		"invalid workloads are not pending": {
			ops: []indexOp{
				{set: withCondition(pending("a", "q1"), strata.WorkloadInvalid)},
				{set: func() *strata.Workload {
					wl := pending("b", "q1")
					wl.Annotations = map[string]string{strata.InvalidAnnotation: "bad"}
					return wl
				}()},
			},
			ask: []string{"a", "b", "missing"},
			want: viewSummary{
				Asked: map[string]workloadState{"a": stateInvalid, "b": stateInvalid},
			},
		},
		"asked entries say each workload's state": {
			ops: []indexOp{
				{set: pending("a", "q1")},
				{set: admitted("b", "q1", psa("f1", 1, rl("cpu", "1")))},
				{set: withCondition(pending("c", "q1"), strata.WorkloadFinished)},
			},
			ask: []string{"a", "b", "c"},
			want: viewSummary{
				Pending:  map[string][]string{"q1": {"a"}},
				Admitted: map[string]int32{"q1": 1},
				Usage:    map[string]map[string]corev1.ResourceList{"q1": {"f1": rl("cpu", "1")}},
				Pods:     map[string]int32{"f1": 1},
				Recheck:  []string{"b"},
				Asked:    map[string]workloadState{"a": statePending, "b": stateAdmitted, "c": stateFinished},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := newWorkloadIndex()
			for _, op := range tc.ops {
				if op.set != nil {
					x.set(op.set)
				} else {
					x.delete(types.NamespacedName{Namespace: "ns", Name: op.del})
				}
			}
			var keys []types.NamespacedName
			for _, n := range tc.ask {
				keys = append(keys, types.NamespacedName{Namespace: "ns", Name: n})
			}
			if diff := cmp.Diff(tc.want, summarize(x.view(keys)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("view (-want,+got):\n%s", diff)
			}
			// The recheck set is emptied by a view.
			if got := x.view(nil).recheck; len(got) != 0 {
				t.Errorf("second view rechecks %d workloads, want none", len(got))
			}
		})
	}
}

// TestWorkloadIndexViewIsACopy checks that a pass adding its own
// admissions to a view's usage does not change the index's totals.
func TestWorkloadIndexViewIsACopy(t *testing.T) {
	x := newWorkloadIndex()
	x.set(testutil.MakeWorkload("a", "ns").Queue("q").Admission(&strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{
		{Name: "main", Flavor: "f", Count: 1, ResourceUsage: rl("cpu", "1")},
	}}).Obj())
	v := x.view(nil)
	queue.AddUsage(v.usage["q"], []strata.PodSetAssignment{{Name: "main", Flavor: "f", ResourceUsage: rl("cpu", "5")}})
	if diff := cmp.Diff(map[string]map[string]corev1.ResourceList{"q": {"f": rl("cpu", "1")}}, x.view(nil).usage); diff != "" {
		t.Errorf("index usage after changing a view (-want,+got):\n%s", diff)
	}
}

// TestWorkloadIndexRecheckLater checks that a workload whose admission
// write failed is rechecked once the informer shows it admitted, and not
// while it is pending.
func TestWorkloadIndexRecheckLater(t *testing.T) {
	x := newWorkloadIndex()
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	x.set(testutil.MakeWorkload("a", "ns").Queue("q").Obj())
	x.recheckLater(key)
	if got := x.view(nil).recheck; len(got) != 0 {
		t.Errorf("pending workload rechecked: %v", got)
	}
	x.set(testutil.MakeWorkload("a", "ns").Queue("q").Admission(&strata.Admission{ClusterQueue: "q"}).Obj())
	_ = x.view(nil)
	x.recheckLater(key)
	if got := x.view(nil).recheck; len(got) != 1 || got[0].Name != "a" {
		t.Errorf("recheck = %v, want workload a", got)
	}
}

// TestStateOf: what the index makes of a workload's object; one marked for
// its maximum execution time and not admitted is about to be deactivated,
// never pending.
func TestStateOf(t *testing.T) {
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason}
	}
	inactive := false
	deleted := metav1.Now()
	cases := map[string]struct {
		wl   strata.Workload
		want workloadState
	}{
		"queued": {want: statePending},
		"admitted": {wl: strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq"}}},
			want: stateAdmitted},
		"admitted and marked for its maximum execution time": {wl: strata.Workload{Status: strata.WorkloadStatus{
			Admission:  &strata.Admission{ClusterQueue: "cq"},
			Conditions: []metav1.Condition{cond(strata.WorkloadDeactivationTarget, strata.MaximumExecutionTimeExceeded)}}},
			want: stateAdmitted},
		"evicted after its maximum execution time's mark, before its deactivation": {wl: strata.Workload{Status: strata.WorkloadStatus{
			Conditions: []metav1.Condition{cond(strata.WorkloadDeactivationTarget, strata.MaximumExecutionTimeExceeded)}}},
			want: stateInactive},
		"deactivated": {wl: strata.Workload{Spec: strata.WorkloadSpec{Active: &inactive}}, want: stateInactive},
		"being deleted, not admitted (a copy held until its pods are gone)": {wl: strata.Workload{ObjectMeta: metav1.ObjectMeta{
			DeletionTimestamp: &deleted, Finalizers: []string{strata.PodsGoneFinalizer}}}, want: stateInactive},
		"being deleted, admitted": {wl: strata.Workload{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted},
			Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq"}}}, want: stateAdmitted},
		"finished": {wl: strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq"},
			Conditions: []metav1.Condition{cond(strata.WorkloadFinished, "Succeeded")}}}, want: stateFinished},
		"invalid": {wl: strata.Workload{Status: strata.WorkloadStatus{Conditions: []metav1.Condition{cond(strata.WorkloadInvalid, "InvalidJob")}}},
			want: stateInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := stateOf(&tc.wl); got != tc.want {
				t.Errorf("stateOf = %v, want %v", got, tc.want)
			}
		})
	}
}
