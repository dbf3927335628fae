package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// provCheck is an Active AdmissionCheck of controller.
func provCheck(name, controller string) *strata.AdmissionCheck {
	return &strata.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       strata.AdmissionCheckSpec{ControllerName: controller},
		Status: strata.AdmissionCheckStatus{Conditions: []metav1.Condition{{
			Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", LastTransitionTime: metav1.NewTime(created),
		}}},
	}
}

// provisioned is a node a ProvisioningRequest made: labelled for the
// check's pod set update.
func provisioned(name, rack, cpu string) *corev1.Node {
	n := tasNode(name, rack, cpu)
	n.Labels["provisioned"] = "yes"
	return n
}

// TestScheduleDelayedTopology: on a flavor a ProvisioningRequest check
// applies to, the first pass reserves quota only (KEP-2724), even for a
// workload the nodes there now cannot hold; once the check is Ready the
// second pass places it on the nodes it provisioned (its pod set update's
// node selector) and admits it in the same write. A placement that fails
// is tried again with a backoff, and past the limit the workload is
// evicted.
func TestScheduleDelayedTopology(t *testing.T) {
	type step struct {
		// ready sets the check Ready (with a node selector to
		// provisioned nodes) before the pass; nodes are added to the
		// cache; advance moves the clock.
		ready   bool
		nodes   []*corev1.Node
		advance time.Duration
		want    outcome
		// wantHosts are the hosts of the topology assignment; delayed
		// the pod set's delayedTopologyRequest.
		wantHosts   []string
		wantDelayed *strata.DelayedTopologyRequestState
	}
	reserved := outcome{Reason: strata.WaitingForAdmissionChecks, Flavor: "tas-flavor"}
	retrying := outcome{Reason: strata.WaitingForTopologyAssignment, Flavor: "tas-flavor"}
	cases := map[string]struct {
		controller string
		steps      []step
	}{
		"ProvisioningRequest check: quota only, then placed on the provisioned nodes": {
			controller: strata.ProvisioningRequestControllerName,
			steps: []step{
				{want: reserved, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{ready: true, nodes: []*corev1.Node{provisioned("r2-n1", "r2", "8")},
					want: outcome{Reason: "Admitted", Flavor: "tas-flavor"}, wantHosts: []string{"r2-n1"}, wantDelayed: ptr.To(strata.DelayedTopologyRequestReady)},
			},
		},
		"ProvisioningRequest check: retried with backoff, then evicted": {
			controller: strata.ProvisioningRequestControllerName,
			steps: []step{
				{want: reserved, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{ready: true, want: retrying, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				// Not due yet: nothing changes.
				{advance: 5 * time.Second, want: retrying, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{advance: 5 * time.Second, want: retrying, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{advance: 5 * time.Minute, want: outcome{Reason: strata.EvictedByTopologyAssignment}},
			},
		},
		"ProvisioningRequest check: a node becomes ready between attempts": {
			controller: strata.ProvisioningRequestControllerName,
			steps: []step{
				{want: reserved, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{ready: true, want: retrying, wantDelayed: ptr.To(strata.DelayedTopologyRequestPending)},
				{advance: 10 * time.Second, nodes: []*corev1.Node{provisioned("r2-n1", "r2", "8")},
					want: outcome{Reason: "Admitted", Flavor: "tas-flavor"}, wantHosts: []string{"r2-n1"}, wantDelayed: ptr.To(strata.DelayedTopologyRequestReady)},
			},
		},
		"another check: the topology is assigned at the reservation": {
			controller: "example.com/budget",
			steps: []step{
				{nodes: []*corev1.Node{tasNode("r1-n2", "r1", "4")}, want: reserved, wantHosts: []string{"r1-n1", "r1-n2"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor").Obj()
			cq.Spec.AdmissionChecks = []string{"prov"}
			e := newSchedEnv(t, []client.Object{cq, provCheck("prov", tc.controller), job("a1", "a", 6, nil, 0)}, nil,
				[]*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			clk := testingclock.NewFakeClock(created)
			e.s.WithPodsReady(configv1beta1.WaitForPodsReady{Enable: ptr.To(false)}, clk)
			key := types.NamespacedName{Namespace: "ns", Name: "a1"}
			for i, st := range tc.steps {
				clk.Step(st.advance)
				for _, n := range st.nodes {
					e.s.cache.SetNode(n)
				}
				if st.ready {
					var wl strata.Workload
					if err := e.c.Get(t.Context(), key, &wl); err != nil {
						t.Fatal(err)
					}
					wl.Status.AdmissionChecks[0].State = strata.CheckStateReady
					wl.Status.AdmissionChecks[0].PodSetUpdates = []strata.PodSetUpdate{{Name: "main", NodeSelector: map[string]string{"provisioned": "yes"}}}
					if err := e.c.Status().Update(t.Context(), &wl); err != nil {
						t.Fatal(err)
					}
					e.informed(t)
				}
				if err := e.s.Schedule(t.Context()); err != nil {
					t.Fatalf("step %d: Schedule(): %v", i, err)
				}
				got := withoutMessages(e.outcomes(t), nil)
				if diff := cmp.Diff(map[string]outcome{"a1": st.want}, got); diff != "" {
					t.Errorf("step %d: outcomes (-want,+got):\n%s", i, diff)
				}
				e.informed(t)
				var wl strata.Workload
				if err := e.c.Get(t.Context(), key, &wl); err != nil {
					t.Fatal(err)
				}
				var hosts []string
				var delayed *strata.DelayedTopologyRequestState
				if a := wl.Status.Admission; a != nil {
					psa := a.PodSetAssignments[0]
					delayed = psa.DelayedTopologyRequest
					if psa.TopologyAssignment != nil {
						assignment, err := tas.Decode(psa.TopologyAssignment)
						if err != nil {
							t.Fatal(err)
						}
						for _, d := range assignment.Domains {
							hosts = append(hosts, d.Values[len(d.Values)-1])
						}
					}
				}
				if diff := cmp.Diff(st.wantHosts, hosts); diff != "" {
					t.Errorf("step %d: hosts (-want,+got):\n%s", i, diff)
				}
				if diff := cmp.Diff(st.wantDelayed, delayed); diff != "" {
					t.Errorf("step %d: delayedTopologyRequest (-want,+got):\n%s", i, diff)
				}
				if st.want.Reason == strata.EvictedByTopologyAssignment {
					if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted); c == nil || c.Reason != strata.EvictedByTopologyAssignment {
						t.Errorf("step %d: Evicted = %+v, want reason %s", i, c, strata.EvictedByTopologyAssignment)
					}
					if s := wl.Status.AdmissionChecks[0].State; s != strata.CheckStatePending {
						t.Errorf("step %d: check state %s after the eviction, want Pending", i, s)
					}
				}
			}
		})
	}
}

// TestScheduleDelayedTopologyPreempts: a reservation whose topology is
// delayed holds quota and no node; a higher-priority workload of its
// queue preempts it on quota alone, as the first pass reserves (Kueue).
func TestScheduleDelayedTopologyPreempts(t *testing.T) {
	cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "4").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	cq.Spec.AdmissionChecks = []string{"prov"}
	e := newSchedEnv(t, []client.Object{cq, provCheck("prov", strata.ProvisioningRequestControllerName), job("low", "a", 4, ptr.To[int32](1), 0)}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "1")}, interceptor.Funcs{})
	reserved := outcome{Reason: strata.WaitingForAdmissionChecks, Flavor: "tas-flavor"}
	pass := func() map[string]outcome {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		got := withoutMessages(e.outcomes(t), nil)
		e.informed(t)
		return got
	}
	if diff := cmp.Diff(map[string]outcome{"low": reserved}, pass()); diff != "" {
		t.Fatalf("first pass (-want,+got):\n%s", diff)
	}
	if err := e.c.Create(t.Context(), job("high", "a", 4, ptr.To[int32](10), 1)); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	// low held no node and no pod: high takes its quota at once.
	got := pass()
	if diff := cmp.Diff(map[string]outcome{"low": {Reason: "Preempted"}, "high": reserved}, got); diff != "" {
		t.Errorf("second pass (-want,+got):\n%s", diff)
	}
	var low strata.Workload
	if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "low"}, &low); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(low.Status.Conditions, strata.WorkloadEvicted); c == nil || c.Reason != "Preempted" {
		t.Errorf("low's Evicted = %+v, want reason Preempted", c)
	}
}
