package nodefailure

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

func TestDetect(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cfg := func(onTermination bool) configv1beta1.NodeFailure {
		return configv1beta1.NodeFailure{
			NotReadyDelay:           &metav1.Duration{Duration: 30 * time.Second},
			ReplaceOnPodTermination: ptr.To(onTermination),
			ReplaceOnTaints:         ptr.To(true),
		}
	}
	node := func(ready corev1.ConditionStatus, since time.Duration, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-since)),
			}}},
		}
	}
	running := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	failed := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	terminating := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.NewTime(now))}, Spec: corev1.PodSpec{NodeName: "n1"}}
	pending := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "n1"}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	noExecute := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(now.Add(-10 * time.Second)))}
	noSchedule := corev1.Taint{Key: "degraded", Effect: corev1.TaintEffectNoSchedule}
	succeeded := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	cordoned := func(n *corev1.Node) *corev1.Node { n.Spec.Unschedulable = true; return n }
	// What the node lifecycle controller puts on a NotReady node.
	notReadyTaints := []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(now.Add(-10 * time.Second)))},
	}
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(now.Add(-10 * time.Second)))}

	cases := map[string]struct {
		node        *corev1.Node
		pods        []*corev1.Pod
		tolerations []corev1.Toleration
		cfg         configv1beta1.NodeFailure
		want        Verdict
	}{
		"deleted": {node: nil, cfg: cfg(true), want: Verdict{Failed: true, Reason: "the node was deleted"}},
		"ready":   {node: node(corev1.ConditionTrue, time.Hour), pods: []*corev1.Pod{running}, cfg: cfg(true)},
		// User guide matrix, replace-on-pod-termination off: wait 30s of NotReady.
		"NotReady for 10s, termination trigger off: look again in 20s": {
			node: node(corev1.ConditionFalse, 10*time.Second), pods: []*corev1.Pod{failed}, cfg: cfg(false),
			want: Verdict{Recheck: 20 * time.Second},
		},
		"NotReady for 31s, termination trigger off": {
			node: node(corev1.ConditionFalse, 31*time.Second), pods: []*corev1.Pod{running}, cfg: cfg(false),
			want: Verdict{Failed: true, Reason: "NotReady for more than 30s"},
		},
		// Matrix, replace-on-pod-termination on: no wait once the pods are terminated.
		"NotReady with terminated and terminating pods, termination trigger on": {
			node: node(corev1.ConditionUnknown, time.Second), pods: []*corev1.Pod{failed, terminating}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "NotReady, and the workload's pods on it are terminated or terminating"},
		},
		// The two heuristics exclude each other (TAS user guide): with the
		// termination trigger on, notReadyDelay is disregarded.
		"NotReady with a running pod, termination trigger on: wait for the pods": {
			node: node(corev1.ConditionUnknown, time.Second), pods: []*corev1.Pod{failed, running}, cfg: cfg(true),
		},
		"NotReady for an hour with a running pod, termination trigger on: still waiting for the pods": {
			node: node(corev1.ConditionFalse, time.Hour), pods: []*corev1.Pod{running}, cfg: cfg(true),
		},
		"NotReady for 10s with terminated pods, termination trigger off: the delay, not the pods": {
			node: node(corev1.ConditionFalse, 10*time.Second), pods: []*corev1.Pod{failed, terminating}, cfg: cfg(false),
			want: Verdict{Recheck: 20 * time.Second},
		},
		// KEP-2724: the node controller terminates the pods on a
		// NoExecute-tainted node; once they are, the node is replaced.
		"untolerated NoExecute taint, the pod still running: wait for it": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
		},
		"untolerated NoExecute taint, the pod terminating": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{terminating}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "untolerated NoExecute taint maintenance"},
		},
		"untolerated NoExecute taint, one pod failed and one recreated, routed there": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{failed, pending}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "untolerated NoExecute taint maintenance"},
		},
		"untolerated NoExecute taint, the pod succeeded: nothing to replace": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{succeeded}, cfg: cfg(true),
		},
		"NoExecute tolerated for 60s, added 10s ago": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}},
			want:        Verdict{Recheck: 50 * time.Second},
		},
		"NoSchedule taint with the workload's pod unscheduled there": {
			node: node(corev1.ConditionTrue, time.Hour, noSchedule), pods: []*corev1.Pod{pending}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled"},
		},
		"NoSchedule taint with the workload's pod still running": {
			node: node(corev1.ConditionTrue, time.Hour, noSchedule), pods: []*corev1.Pod{running}, cfg: cfg(true),
		},
		"the lifecycle controller's not-ready taints wait for notReadyDelay": {
			node: node(corev1.ConditionFalse, 10*time.Second, notReadyTaints...), pods: []*corev1.Pod{running}, cfg: cfg(false),
			want: Verdict{Recheck: 20 * time.Second},
		},
		"the lifecycle controller's not-ready taints do not fail the node, termination trigger on": {
			node: node(corev1.ConditionFalse, time.Hour, notReadyTaints...), pods: []*corev1.Pod{running}, cfg: cfg(true),
		},
		"the unreachable taint waits for notReadyDelay": {
			node: node(corev1.ConditionUnknown, 10*time.Second, unreachable), pods: []*corev1.Pod{running}, cfg: cfg(false),
			want: Verdict{Recheck: 20 * time.Second},
		},
		"NoExecute tolerated for 5s, added 10s ago, the pod still running": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}},
		},
		"NoExecute tolerated for 5s, added 10s ago, the pod terminating": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{terminating}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}},
			want:        Verdict{Failed: true, Reason: "NoExecute taint maintenance past its 5s toleration"},
		},
		"NoExecute tolerated for good": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}},
		},
		"cordoned with the workload's pod failed": {
			node: cordoned(node(corev1.ConditionTrue, time.Hour)), pods: []*corev1.Pod{failed}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled"},
		},
		"cordoned with the workload's pod terminating": {
			node: cordoned(node(corev1.ConditionTrue, time.Hour)), pods: []*corev1.Pod{terminating}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled"},
		},
		"cordoned with the workload's pods there finished: nothing to replace": {
			node: cordoned(node(corev1.ConditionTrue, time.Hour)), pods: []*corev1.Pod{succeeded}, cfg: cfg(true),
		},
		"cordoned with one pod succeeded and one failed": {
			node: cordoned(node(corev1.ConditionTrue, time.Hour)), pods: []*corev1.Pod{succeeded, failed}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "unschedulable (NoSchedule taint or cordoned) with the workload's pods there failed, terminating or unscheduled"},
		},
		"a tolerated NoSchedule taint": {
			node: node(corev1.ConditionTrue, time.Hour, noSchedule), pods: []*corev1.Pod{pending}, cfg: cfg(true),
			tolerations: []corev1.Toleration{{Key: "degraded", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		"cordoned with no pods there yet": {
			node: cordoned(node(corev1.ConditionTrue, time.Hour)), cfg: cfg(true),
		},
		"NotReady: a recreated pod routed there does not hold the termination trigger back": {
			node: node(corev1.ConditionFalse, time.Second), pods: []*corev1.Pod{failed, pending}, cfg: cfg(true),
			want: Verdict{Failed: true, Reason: "NotReady, and the workload's pods on it are terminated or terminating"},
		},
		"NotReady with only succeeded pods, termination trigger on: nothing to replace": {
			node: node(corev1.ConditionFalse, time.Hour), pods: []*corev1.Pod{succeeded}, cfg: cfg(true),
		},
		"never Ready: the delay counts from the node's creation": {
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(now.Add(-40 * time.Second))}},
			pods: []*corev1.Pod{running}, cfg: cfg(false),
			want: Verdict{Failed: true, Reason: "NotReady for more than 30s"},
		},
		"taints ignored when replaceOnTaints is off": {
			node: node(corev1.ConditionTrue, time.Hour, noExecute), pods: []*corev1.Pod{running},
			cfg: func() configv1beta1.NodeFailure { c := cfg(true); c.ReplaceOnTaints = ptr.To(false); return c }(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Detect(tc.node, tc.pods, tc.tolerations, tc.cfg, now)
			got.Since = time.Time{} // checked by the latency metric, not here
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Detect() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestMatrix plays the user guide's hot swap matrix (all five rows): per
// configuration, what happens to a workload whose node is NotReady, in
// three situations, with no replacement available unless said otherwise.
func TestMatrix(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	node := func(notReadyFor time.Duration) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-notReadyFor)),
		}}}}
	}
	running := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	terminating := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.NewTime(now))}, Spec: corev1.PodSpec{NodeName: "n1"}}
	situations := []struct {
		name        string
		node        *corev1.Node
		pod         *corev1.Pod
		replacement bool
	}{
		{"NotReady 10s, pod terminating", node(10 * time.Second), terminating, false},
		{"NotReady 31s, pod running", node(31 * time.Second), running, false},
		{"NotReady 31s, pod running, a spare node", node(31 * time.Second), running, true},
		{"NotReady 10s, pod terminating, a spare node", node(10 * time.Second), terminating, true},
	}
	// outcome composes the steps as Reconcile does: detection, the
	// engine's replacement search in the rack (on a real snapshot where n1
	// and n2 fill the rack, plus a spare n3 when the situation has one),
	// and what follows a failed search.
	outcome := func(cfg configv1beta1.NodeFailure, node *corev1.Node, pod *corev1.Pod, spare bool) string {
		if !replaceEnabled(cfg) {
			return "nothing"
		}
		v := Detect(node, []*corev1.Pod{pod}, nil, cfg, now)
		switch {
		case !v.Failed && v.Recheck == 0:
			return "wait for the pods"
		case !v.Failed:
			return fmt.Sprintf("wait %s", v.Recheck)
		}
		snap := tas.NewSnapshot([]string{"rack", corev1.LabelHostname}, nil)
		hosts := []string{"n1", "n2"}
		if spare {
			hosts = append(hosts, "n3")
		}
		for _, h := range hosts {
			snap.SetNode(tas.Node{Name: h, Labels: map[string]string{"rack": "r1", corev1.LabelHostname: h}, Ready: h != "n1",
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}})
		}
		current := &tas.Assignment{Levels: []string{corev1.LabelHostname}, Domains: []tas.DomainAssignment{{Values: []string{"n1"}, Count: 1}, {Values: []string{"n2"}, Count: 1}}}
		req := tas.Request{Count: 2, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Mode: tas.Required, Level: "rack"}
		if _, err := snap.Commit(current, req.PodRequests); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if replaced, err := snap.FindReplacementNear(req, current, "n1", nil); err == nil {
			return "replace with " + replaced.Domains[0].Values[0]
		}
		next := afterFailedSearch(cfg, false, now, now, 0)
		if next.evict {
			return "evict"
		}
		return fmt.Sprintf("retry in %s", next.retryIn)
	}
	rows := []struct {
		replace, onTermination, failFast bool
		want                             []string // per situation
	}{
		{false, true, true, []string{"nothing", "nothing", "nothing", "nothing"}},
		{true, false, false, []string{"wait 20s", "retry in 1s", "replace with n3", "wait 20s"}},
		// With the termination trigger, "the 30 seconds timeout is
		// disregarded": a running pod holds the node as it is.
		{true, true, false, []string{"retry in 1s", "wait for the pods", "wait for the pods", "replace with n3"}},
		{true, false, true, []string{"wait 20s", "evict", "replace with n3", "wait 20s"}},
		{true, true, true, []string{"evict", "wait for the pods", "wait for the pods", "replace with n3"}},
	}
	for _, row := range rows {
		cfg := configv1beta1.NodeFailure{
			ReplaceFailedNodes:      ptr.To(row.replace),
			NotReadyDelay:           &metav1.Duration{Duration: 30 * time.Second},
			ReplaceOnPodTermination: ptr.To(row.onTermination),
			FailFast:                ptr.To(row.failFast),
			RecoveryTimeout:         &metav1.Duration{Duration: 10 * time.Minute},
		}
		t.Run(fmt.Sprintf("replace=%t,onTermination=%t,failFast=%t", row.replace, row.onTermination, row.failFast), func(t *testing.T) {
			var got []string
			for _, s := range situations {
				got = append(got, outcome(cfg, s.node, s.pod, s.replacement))
			}
			if diff := cmp.Diff(row.want, got); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAfterFailedSearch(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	retrying := configv1beta1.NodeFailure{FailFast: ptr.To(false), RecoveryTimeout: &metav1.Duration{Duration: 10 * time.Minute}}
	cases := map[string]struct {
		cfg      configv1beta1.NodeFailure
		tolerant bool
		now      time.Time
		attempt  int
		want     nextAfterFailure
	}{
		"within the unhealthy-nodes threshold, fail-fast waits": {
			cfg: configv1beta1.NodeFailure{FailFast: ptr.To(true), RecoveryTimeout: &metav1.Duration{Duration: 10 * time.Minute}}, tolerant: true, now: start,
			want: nextAfterFailure{retryIn: time.Second, why: "; the workload runs on within its unhealthy-nodes eviction threshold and waits for room until the recovery timeout of 10m0s evicts it"},
		},
		"within the unhealthy-nodes threshold, the recovery timeout still evicts": {
			cfg: configv1beta1.NodeFailure{FailFast: ptr.To(true), RecoveryTimeout: &metav1.Duration{Duration: 10 * time.Minute}}, tolerant: true, now: start.Add(11 * time.Minute),
			want: nextAfterFailure{evict: true, why: "; no replacement within the recovery timeout of 10m0s"},
		},
		"fail-fast unset means on": {
			cfg: configv1beta1.NodeFailure{}, now: start,
			want: nextAfterFailure{evict: true, why: "; fail-fast is on, so the workload goes back to its queue"},
		},
		"first retry after a second": {
			cfg: retrying, now: start,
			want: nextAfterFailure{retryIn: time.Second, why: "; retrying (fail-fast is off) until the recovery timeout of 10m0s evicts it"},
		},
		"backoff doubles": {
			cfg: retrying, now: start.Add(time.Minute), attempt: 3,
			want: nextAfterFailure{retryIn: 8 * time.Second, why: "; retrying (fail-fast is off) until the recovery timeout of 10m0s evicts it"},
		},
		"backoff is capped at 30s": {
			cfg: retrying, now: start.Add(time.Minute), attempt: 40,
			want: nextAfterFailure{retryIn: 30 * time.Second, why: "; retrying (fail-fast is off) until the recovery timeout of 10m0s evicts it"},
		},
		"the last retry falls on the timeout": {
			cfg: retrying, now: start.Add(10*time.Minute - 5*time.Second), attempt: 20,
			want: nextAfterFailure{retryIn: 5 * time.Second, why: "; retrying (fail-fast is off) until the recovery timeout of 10m0s evicts it"},
		},
		"past the recovery timeout": {
			cfg: retrying, now: start.Add(10 * time.Minute), attempt: 21,
			want: nextAfterFailure{evict: true, why: "; no replacement within the recovery timeout of 10m0s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := afterFailedSearch(tc.cfg, tc.tolerant, start, tc.now, tc.attempt)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(nextAfterFailure{})); diff != "" {
				t.Errorf("afterFailedSearch() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPlanFailures(t *testing.T) {
	fail := func(podSet int, node string) failure { return failure{podSet: podSet, node: node, reason: "deleted"} }
	queued := func(names ...string) []strata.UnhealthyNode {
		var out []strata.UnhealthyNode
		for _, n := range names {
			out = append(out, strata.UnhealthyNode{Name: n})
		}
		return out
	}
	cases := map[string]struct {
		queued    []strata.UnhealthyNode
		failed    []failure
		threshold int
		want      failurePlan
	}{
		"one node, no threshold": {
			failed: []failure{fail(0, "n1")},
			want:   failurePlan{head: fail(0, "n1"), unhealthy: []string{"n1"}},
		},
		"two nodes without a threshold evict": {
			failed: []failure{fail(0, "n1"), fail(0, "n2")},
			want: failurePlan{unhealthy: []string{"n1", "n2"}, metric: "MultipleNodes",
				evict: "2 nodes failed at once: n1 (deleted), n2 (deleted); Strata replaces one node at a time unless the Job sets strata.dev/tas-unhealthy-nodes-eviction-threshold, so the workload goes back to its queue"},
		},
		"one node under two pod sets without a threshold evicts": {
			failed: []failure{fail(0, "n1"), fail(1, "n1")},
			want: failurePlan{unhealthy: []string{"n1"}, metric: "MultiplePodSets",
				evict: "node n1 failed under 2 pod sets; Strata replaces a node under one pod set at a time unless the Job sets strata.dev/tas-unhealthy-nodes-eviction-threshold, so the workload goes back to its queue"},
		},
		"two nodes within a threshold of 2: the first found is the head": {
			failed: []failure{fail(0, "n1"), fail(0, "n2")}, threshold: 2,
			want: failurePlan{head: fail(0, "n1"), unhealthy: []string{"n1", "n2"}},
		},
		"the queue keeps its order: an earlier failure stays the head": {
			queued: queued("n2"), failed: []failure{fail(0, "n1"), fail(0, "n2")}, threshold: 2,
			want: failurePlan{head: fail(0, "n2"), unhealthy: []string{"n2", "n1"}},
		},
		"a queued node that is healthy again leaves the queue": {
			queued: queued("n3", "n2"), failed: []failure{fail(0, "n2")}, threshold: 2,
			want: failurePlan{head: fail(0, "n2"), unhealthy: []string{"n2"}},
		},
		"one node more than the threshold evicts": {
			queued: queued("n1"), failed: []failure{fail(0, "n1"), fail(0, "n2"), fail(0, "n3")}, threshold: 2,
			want: failurePlan{unhealthy: []string{"n1", "n2", "n3"}, metric: "ThresholdExceeded",
				evict: "3 nodes failed: n1 (deleted), n2 (deleted), n3 (deleted); the workload's strata.dev/tas-unhealthy-nodes-eviction-threshold allows 2, so it goes back to its queue"},
		},
		"a threshold of 1 keeps one node under two pod sets": {
			failed: []failure{fail(0, "n1"), fail(1, "n1")}, threshold: 1,
			want: failurePlan{head: fail(0, "n1"), unhealthy: []string{"n1"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := planFailures(tc.queued, tc.failed, tc.threshold)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(failurePlan{}, failure{})); diff != "" {
				t.Errorf("planFailures() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRemaining(t *testing.T) {
	plan := failurePlan{unhealthy: []string{"n1", "n2"}}
	failed := []failure{{podSet: 0, node: "n1"}, {podSet: 1, node: "n1"}, {podSet: 0, node: "n2"}}
	got := remaining(plan, failed, failed[0])
	want := []strata.UnhealthyNode{{Name: "n1"}, {Name: "n2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("n1 still fails under pod set 1 (-want,+got):\n%s", diff)
	}
	got = remaining(plan, failed[2:], failed[2])
	if diff := cmp.Diff([]strata.UnhealthyNode{{Name: "n1"}}, got); diff != "" {
		t.Errorf("n2 replaced (-want,+got):\n%s", diff)
	}
}

// TestSearchStart: a search's recovery timeout counts from when the
// search for that node began, not from a search for another node.
func TestSearchStart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := t0.Add(9 * time.Minute)
	searching := func(node string, status metav1.ConditionStatus) *metav1.Condition {
		return &metav1.Condition{Type: ConditionNodeReplacement, Status: status, Reason: "Searching", LastTransitionTime: metav1.NewTime(t0),
			Message: searchingPrefix(node) + "(NotReady): no room"}
	}
	cases := map[string]struct {
		c    *metav1.Condition
		node string
		want time.Time
	}{
		"no search yet":                        {node: "a", want: now},
		"the same node: from the first search": {c: searching("a", metav1.ConditionFalse), node: "a", want: t0},
		"another node: from now":               {c: searching("a", metav1.ConditionFalse), node: "b", want: now},
		"a node whose name starts alike":       {c: searching("a", metav1.ConditionFalse), node: "a-2", want: now},
		"the last search ended":                {c: searching("a", metav1.ConditionTrue), node: "a", want: now},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := searchStart(tc.c, tc.node, now); !got.Equal(tc.want) {
				t.Errorf("searchStart() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestClearSearch: an evicted workload keeps nothing of a search for its
// last admission's failed nodes; a replacement that succeeded stays told.
func TestClearSearch(t *testing.T) {
	cond := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionNodeReplacement, Status: status, Reason: "r"}, {Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"}}
	}
	cases := map[string]struct {
		status      strata.WorkloadStatus
		want        strata.WorkloadStatus
		wantChanged bool
	}{
		"a search under way": {
			status:      strata.WorkloadStatus{UnhealthyNodes: []strata.UnhealthyNode{{Name: "a"}}, Conditions: cond(metav1.ConditionFalse)},
			want:        strata.WorkloadStatus{Conditions: cond(metav1.ConditionFalse)[1:]},
			wantChanged: true,
		},
		"a replacement done": {
			status: strata.WorkloadStatus{Conditions: cond(metav1.ConditionTrue)},
			want:   strata.WorkloadStatus{Conditions: cond(metav1.ConditionTrue)},
		},
		"failed nodes waiting their turn": {
			status:      strata.WorkloadStatus{UnhealthyNodes: []strata.UnhealthyNode{{Name: "b"}}, Conditions: cond(metav1.ConditionTrue)},
			want:        strata.WorkloadStatus{Conditions: cond(metav1.ConditionTrue)},
			wantChanged: true,
		},
		"nothing": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{Status: tc.status}
			changed := clearSearch(wl)
			if diff := cmp.Diff(tc.want, wl.Status, cmpopts.EquateEmpty()); diff != "" || changed != tc.wantChanged {
				t.Errorf("clearSearch() changed %t, want %t; status (-want,+got):\n%s", changed, tc.wantChanged, diff)
			}
		})
	}
}
