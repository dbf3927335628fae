package lws

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

func TestSetPodSets(t *testing.T) {
	grouped := map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"}
	onHost := map[string]string{strata.PodSetRequiredTopologyAnnotation: host}
	cases := map[string]struct {
		lws  *lwsapi.LeaderWorkerSet
		want []podSet
		errs []string
	}{
		"KEP example: two groups, each its own podset group": {
			lws: leaderWorkerSet(2, 3, false, grouped, grouped),
			want: []podSet{{"leader-0", 1, "lws-group-0", 0}, {"worker-0", 2, "lws-group-0", 0},
				{"leader-1", 1, "lws-group-1", 0}, {"worker-1", 2, "lws-group-1", 0}},
		},
		"no group name: workers offset by the leader": {
			lws:  leaderWorkerSet(1, 4, false, onHost, onHost),
			want: []podSet{{"leader-0", 1, "", 0}, {"worker-0", 3, "", 1}},
		},
		"no leader template: one pod set per group": {
			lws:  leaderWorkerSet(3, 2, true, nil, onHost),
			want: []podSet{{"main-0", 2, "", 0}, {"main-1", 2, "", 0}, {"main-2", 2, "", 0}},
		},
		"as many groups as a Workload holds": {
			lws:  leaderWorkerSet(16, 2, false, nil, nil),
			want: groupPodSets(16),
		},
		"more groups than a Workload holds: invalid, with those it holds": {
			lws:  leaderWorkerSet(17, 2, false, nil, nil),
			want: groupPodSets(16),
			errs: []string{"spec.replicas: Invalid value: 17: through the hub a LeaderWorkerSet has at most 16 groups"},
		},
		"no groups: invalid, with one group's pod sets": {
			lws:  leaderWorkerSet(0, 2, false, nil, nil),
			want: []podSet{{"leader-0", 1, "", 0}, {"worker-0", 1, "", 0}},
			errs: []string{"spec.replicas: Invalid value: 0: a LeaderWorkerSet of no groups has nothing to dispatch"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sets, errs := Set{LeaderWorkerSet: tc.lws}.PodSets()
			var got []podSet
			for _, ps := range sets {
				p := podSet{Name: ps.Name, Count: ps.Count}
				if r := ps.TopologyRequest; r != nil {
					p.Group, p.Offset = ptr.Deref(r.PodSetGroupName, ""), ptr.Deref(r.PodIndexOffset, 0)
				}
				got = append(got, p)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod sets (-want,+got):\n%s", diff)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %v, want %v", errs, tc.errs)
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), tc.errs[i]) {
					t.Errorf("error %q, want it to start with %q", e.Error(), tc.errs[i])
				}
			}
		})
	}
}

// TestSetPlacesEachGroupOnOneHost: the hub's Workload of the KEP's
// example, placed by the engine, puts each group on a host of its own, as
// the agent places each group's Workload.
func TestSetPlacesEachGroupOnOneHost(t *testing.T) {
	grouped := map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"}
	set := Set{LeaderWorkerSet: leaderWorkerSet(2, 3, false, grouped, grouped)}
	wl, errs := jobs.WorkloadFor(set)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if want := "lwsset-tas-example-lws"; wl.Name != want {
		t.Errorf("workload name %q, want %q", wl.Name, want)
	}
	snap := tas.NewSnapshot([]string{rack, host}, nil)
	for i, r := range []string{"r1", "r1", "r2", "r2"} {
		h := fmt.Sprint("h", i+1)
		snap.SetNode(tas.Node{Name: h, Labels: map[string]string{rack: r, host: h}, Ready: true,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourcePods: resource.MustParse("110")}})
	}
	assignments, _, err := workload.Place(snap, "", nil, wl, tas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for i, ps := range wl.Spec.PodSets {
		for _, d := range assignments[i].Domains {
			got[ps.Name] = append(got[ps.Name], fmt.Sprintf("%s×%d", d.Values[len(d.Values)-1], d.Count))
		}
	}
	want := map[string][]string{"leader-0": {"h1×1"}, "worker-0": {"h1×2"}, "leader-1": {"h2×1"}, "worker-1": {"h2×2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placement (-want,+got):\n%s", diff)
	}
}

func TestSetAggregate(t *testing.T) {
	l := leaderWorkerSet(2, 3, false, nil, nil)
	owner := []metav1.OwnerReference{{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: l.Name}}
	group := func(i int, admitted bool, conds ...metav1.Condition) *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: GroupWorkloadName(l.Name, int32(i)), Namespace: l.Namespace, OwnerReferences: owner,
			Labels: map[string]string{strata.HubWorkloadUIDLabel: "uid", strata.DispatchGenerationLabel: "1"}}}
		wl.Status.Conditions = conds
		if admitted {
			wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{
				{Name: Leader, Flavor: "f", Count: 1},
				{Name: Worker, Flavor: "f", Count: 2}}}
		}
		return wl
	}
	pending := metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Pending", Message: "no room"}
	inadmissible := metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Inadmissible", Message: "flavor f is not offered"}
	invalid := metav1.Condition{Type: strata.WorkloadInvalid, Status: metav1.ConditionTrue, Reason: "LocalQueueNotFound", Message: "no queue"}
	type result struct {
		None      bool
		Admitted  []string // pod set assignments' names
		Condition string   // type=status/reason: message of the deciding condition
		Inactive  bool     // spec.active false
		Requeues  int32    // status.requeueState.count
	}
	requeued := func(wl *strata.Workload, count int32) *strata.Workload {
		wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To(count)}
		return wl
	}
	deactivated := func(wl *strata.Workload) *strata.Workload {
		wl.Spec.Active = ptr.To(false)
		return wl
	}
	cases := map[string]struct {
		wls  []*strata.Workload
		want result
	}{
		"no group Workload yet": {wls: []*strata.Workload{nil, nil}, want: result{None: true}},
		"every group admitted: one admission under the hub's names": {
			wls:  []*strata.Workload{group(0, true), group(1, true)},
			want: result{Admitted: []string{"leader-0", "worker-0", "leader-1", "worker-1"}, Condition: "Admitted=True/Admitted: all 2 groups admitted"},
		},
		"one group admitted, the other waits: waits as it does": {
			wls:  []*strata.Workload{group(0, true), group(1, false, pending)},
			want: result{Condition: "Admitted=False/Pending: no room"},
		},
		"a group without a Workload yet: waiting": {
			wls:  []*strata.Workload{group(0, true), nil},
			want: result{},
		},
		"an inadmissible group makes the copy inadmissible": {
			wls:  []*strata.Workload{group(0, false, pending), group(1, false, inadmissible)},
			want: result{Condition: "Admitted=False/Inadmissible: group 1: flavor f is not offered"},
		},
		"a later group refused (pods not ready in time) refuses the copy while an earlier one waits": {
			wls: []*strata.Workload{group(0, false, pending), group(1, false, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
				Reason: strata.EvictedByPodsReadyTimeout, Message: "not ready in time"})},
			want: result{Condition: "Admitted=False/" + strata.EvictedByPodsReadyTimeout + ": group 1: not ready in time"},
		},
		"a refused group's retries are the copy's": {
			wls: []*strata.Workload{group(0, false, pending), requeued(group(1, false, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse,
				Reason: strata.EvictedByPodsReadyTimeout, Message: "not ready in time"}), 2)},
			want: result{Condition: "Admitted=False/" + strata.EvictedByPodsReadyTimeout + ": group 1: not ready in time", Requeues: 2},
		},
		"a waiting group's retries are the copy's": {
			wls:  []*strata.Workload{group(0, true), requeued(group(1, false, pending), 1)},
			want: result{Condition: "Admitted=False/Pending: no room", Requeues: 1},
		},
		"a group its worker deactivated deactivates the copy": {
			wls:  []*strata.Workload{group(0, true), requeued(deactivated(group(1, false, pending)), 3)},
			want: result{Condition: "Admitted=False/Pending: group 1: no room", Inactive: true, Requeues: 3},
		},
		"an invalid group makes the copy invalid": {
			wls:  []*strata.Workload{group(0, false, invalid), group(1, true)},
			want: result{Condition: "Invalid=True/LocalQueueNotFound: group 0: no queue"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			agg := SetKind.(setKind).Aggregate(l, tc.wls)
			var got result
			if agg == nil {
				got.None = true
			} else {
				if agg.Name != "lwsset-tas-example-lws" || agg.Labels[strata.HubWorkloadUIDLabel] != "uid" {
					t.Errorf("aggregate %s, labels %v: want the set's hub Workload name and the groups' labels", agg.Name, agg.Labels)
				}
				if a := agg.Status.Admission; a != nil {
					for _, psa := range a.PodSetAssignments {
						got.Admitted = append(got.Admitted, psa.Name)
					}
				}
				for _, t := range []string{strata.WorkloadInvalid, strata.WorkloadAdmitted} {
					if c := meta.FindStatusCondition(agg.Status.Conditions, t); c != nil {
						got.Condition = fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
						break
					}
				}
				got.Inactive = agg.Spec.Active != nil && !*agg.Spec.Active
				if rs := agg.Status.RequeueState; rs != nil && rs.Count != nil {
					got.Requeues = *rs.Count
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Aggregate() (-want,+got):\n%s", diff)
			}
		})
	}
	if name, ok := SetKind.(setKind).HubWorkload(group(1, true)); !ok || name != "lwsset-tas-example-lws" {
		t.Errorf("HubWorkload() = %q, %t; want the set's", name, ok)
	}
}

func TestGroupHint(t *testing.T) {
	hint := `{"leader-0":{"levels":["h"],"domains":[{"values":["h1"],"count":1}]},"worker-0":{"levels":["h"],"domains":[{"values":["h1"],"count":2}]},"leader-1":{"levels":["h"],"domains":[{"values":["h2"],"count":1}]}}`
	got, err := GroupHint(hint, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"leader":{"levels":["h"],"domains":[{"values":["h2"],"count":1}]}}`; got != want {
		t.Errorf("GroupHint(1) = %s, want %s", got, want)
	}
	if got, err := GroupHint(hint, 2); err != nil || got != "" {
		t.Errorf("GroupHint(2) = %q, %v; want nothing", got, err)
	}
	if _, err := GroupHint("{", 0); err == nil {
		t.Error("a hint that does not parse: no error")
	}
	// A set without a leader template: main; a hub before 2026-12-02
	// named that pod set worker.
	for _, old := range []string{"main", "worker"} {
		one := `{"` + old + `-0":{"levels":["h"],"domains":[{"values":["h1"],"count":2}]}}`
		if got, err := GroupHint(one, 0); err != nil || got != `{"main":{"levels":["h"],"domains":[{"values":["h1"],"count":2}]}}` {
			t.Errorf("GroupHint(%s) = %s, %v; want it for main", one, got, err)
		}
	}
}

// TestGroupPodSetFlavors: a group's part of the flavors the hub placed a
// set's pod sets on, by the group's pod set names, and a group Workload
// pinned so.
func TestGroupPodSetFlavors(t *testing.T) {
	const all = "leader-0=cpu,worker-0=gpu, leader-1 = cpu ,worker-1=cpu"
	cases := map[string]struct {
		v       string
		group   int32
		want    string
		wantErr bool
	}{
		"group 0":                  {v: all, group: 0, want: "leader=cpu,worker=gpu"},
		"group 1, spaces trimmed":  {v: all, group: 1, want: "leader=cpu,worker=cpu"},
		"a group it does not name": {v: all, group: 2},
		"a set without a leader":   {v: "main-0=gpu", group: 0, want: "main=gpu"},
		"not name=flavor":          {v: "leader-0", group: 0, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := GroupPodSetFlavors(tc.v, tc.group)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("GroupPodSetFlavors(%q, %d) = %q, %v; want %q (error %v)", tc.v, tc.group, got, err, tc.want, tc.wantErr)
			}
		})
	}
	// The group's Workload takes its part; one that does not parse is
	// kept, for the agent to say why it cannot admit the group on it.
	for v, want := range map[string]string{all: "leader=gpu,worker=cpu", "leader-1": "leader-1"} {
		v = strings.ReplaceAll(v, "leader-1 = cpu", "leader-1 = gpu")
		wl := &strata.Workload{}
		wl.Annotations = map[string]string{strata.PodSetFlavorsAnnotation: v}
		Group{Index: 1}.AdjustWorkload(wl)
		if got := wl.Annotations[strata.PodSetFlavorsAnnotation]; got != want {
			t.Errorf("AdjustWorkload of %q: %q, want %q", v, got, want)
		}
	}
}

func TestSetManagedByAndForWorker(t *testing.T) {
	l := leaderWorkerSet(2, 3, false, nil, nil)
	if got := (Set{LeaderWorkerSet: l}).ManagedBy(); got != "" {
		t.Errorf("ungated templates: ManagedBy() = %q, want none", got)
	}
	gate := corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate}
	l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.SchedulingGates = []corev1.PodSchedulingGate{gate}
	if got := (Set{LeaderWorkerSet: l}).ManagedBy(); got != "" {
		t.Errorf("the leader's template ungated: ManagedBy() = %q, want none", got)
	}
	l.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.SchedulingGates = []corev1.PodSchedulingGate{gate}
	if got := (Set{LeaderWorkerSet: l}).ManagedBy(); got != strata.ManagedByController {
		t.Errorf("gated templates: ManagedBy() = %q, want %q", got, strata.ManagedByController)
	}
	l.Status.ReadyReplicas = 2
	cp := Set{LeaderWorkerSet: l}.ForWorker().(Set)
	if cp.Spec.StartupPolicy != lwsapi.LeaderCreatedStartupPolicy || cp.Spec.RolloutStrategy.Type != lwsapi.RollingUpdateStrategyType {
		t.Errorf("copy's startupPolicy %q, rolloutStrategy %q: want the API's defaults", cp.Spec.StartupPolicy, cp.Spec.RolloutStrategy.Type)
	}
	if cp.Status.ReadyReplicas != 0 || cp.Name != l.Name || cp.Labels[strata.QueueNameLabel] != "user-queue" {
		t.Errorf("copy %+v: want the set's name, labels and spec, no status", cp.ObjectMeta)
	}
	l.Status.Replicas = 2
	l.Status.Conditions = []metav1.Condition{{Type: string(lwsapi.LeaderWorkerSetAvailable), Status: metav1.ConditionTrue}}
	if !(Set{LeaderWorkerSet: l}).ClearRun() || l.Status.ReadyReplicas != 0 || l.Status.Replicas != 0 {
		t.Error("ClearRun did not clear the replicas")
	}
	if c := l.Status.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != RunTakenBackReason {
		t.Errorf("ClearRun: Available is %s (%s), want False (%s)", c.Status, c.Reason, RunTakenBackReason)
	}
	if (Set{LeaderWorkerSet: l}).ClearRun() {
		t.Error("ClearRun a second time: want no change")
	}
}

// podSet is what TestSetPodSets compares of a pod set.
type podSet struct {
	Name   string
	Count  int32
	Group  string
	Offset int32
}

// groupPodSets are the pod sets of n groups of a leader and one worker,
// without topology requests.
func groupPodSets(n int) []podSet {
	var out []podSet
	for i := range n {
		out = append(out, podSet{fmt.Sprintf("leader-%d", i), 1, "", 0}, podSet{fmt.Sprintf("worker-%d", i), 1, "", 0})
	}
	return out
}

// TestGroupBounds: a worker keeps a Workload per group up to MaxGroups
// groups (and the surge groups of a rolling update whose leaders exist);
// past it, group 0's alone, which says the set is Invalid, and so does
// the hub's aggregate of the copy — never a name per group the set asks
// for.
func TestGroupBounds(t *testing.T) {
	leader := func(group int) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Labels:          map[string]string{NameLabel: "tas-example-lws", GroupIndexLabel: strconv.Itoa(group), WorkerIndexLabel: "0"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "s", Controller: ptr.To(true)}}}}
	}
	type result struct {
		Groups    int32 // workloadGroups
		Names     []string
		Jobs      int
		Aggregate string // its Invalid condition's message, or "valid"
	}
	overMessage := func(replicas int) string {
		return "spec.replicas: Invalid value: " + strconv.Itoa(replicas) + ": " + strconv.Itoa(replicas) +
			" groups, more than the 1000 a LeaderWorkerSet may have under Strata (its worker cluster keeps a Workload per group); lower it, or split the set"
	}
	cases := map[string]struct {
		replicas int32
		surge    bool
		pods     []corev1.Pod
		want     result
	}{
		"two groups": {replicas: 2,
			want: result{Groups: 2, Names: []string{"lws-tas-example-lws-0", "lws-tas-example-lws-1"}, Jobs: 2, Aggregate: "valid"}},
		"MaxGroups groups, and a surge group whose leader exists": {replicas: MaxGroups, surge: true, pods: []corev1.Pod{leader(MaxGroups)},
			want: result{Groups: MaxGroups + 1, Jobs: MaxGroups, Aggregate: "valid"}},
		"one group over: group 0's Workload alone, and no surge": {replicas: MaxGroups + 1, surge: true, pods: []corev1.Pod{leader(MaxGroups + 1)},
			want: result{Groups: 1, Names: []string{"lws-tas-example-lws-0"}, Jobs: 1, Aggregate: overMessage(MaxGroups + 1)}},
		"int32's end": {replicas: math.MaxInt32, surge: true,
			want: result{Groups: 1, Names: []string{"lws-tas-example-lws-0"}, Jobs: 1, Aggregate: overMessage(math.MaxInt32)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := leaderWorkerSet(tc.replicas, 3, false, nil, nil)
			if tc.surge {
				l.Spec.RolloutStrategy.RollingUpdateConfiguration = &lwsapi.RollingUpdateConfiguration{MaxSurge: intstr.FromString("100%")}
			}
			g := SetKind.(jobs.GroupedWorkloads)
			got := result{Groups: workloadGroups(l, tc.pods), Names: g.WorkerWorkloads(l), Jobs: len(g.WorkerJobs(l)), Aggregate: "valid"}
			wls := make([]*strata.Workload, len(got.Names))
			wls[0], _ = jobs.WorkloadFor(g.WorkerJobs(l)[0])
			if c := meta.FindStatusCondition(g.Aggregate(l, wls).Status.Conditions, strata.WorkloadInvalid); c != nil {
				got.Aggregate = c.Message
			}
			if len(got.Names) > 2 {
				got.Names = nil // many: their number is Jobs's
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
