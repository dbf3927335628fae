package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

func TestJudgeQueue(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml", Labels: map[string]string{"team": "ml"}}}
	lq := &strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ml"}, Spec: strata.LocalQueueSpec{ClusterQueue: "cq"}}
	cq := func(sel *metav1.LabelSelector) *strata.ClusterQueue {
		return &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: strata.ClusterQueueSpec{NamespaceSelector: sel}}
	}
	all := cq(&metav1.LabelSelector{})
	stoppedLQ := lq.DeepCopy()
	stoppedLQ.Spec.StopPolicy = ptr.To(strata.StopHold)
	stoppedCQ := all.DeepCopy()
	stoppedCQ.Spec.StopPolicy = ptr.To(strata.StopHoldAndDrain)
	deletedCQ := all.DeepCopy()
	deletedCQ.DeletionTimestamp = &metav1.Time{}
	target := QueueTarget{Namespace: "ml", LocalQueue: "q"}
	creates := QueueTarget{Namespace: "ml", LocalQueue: "q", CreatesNamespace: true}
	onboards := QueueTarget{Namespace: "ml", LocalQueue: "q", OnboardingClusterQueue: "cq"}
	type result struct{ Reason, Message string }
	cases := map[string]struct {
		t    QueueTarget
		ns   *corev1.Namespace
		lq   *strata.LocalQueue
		cq   *strata.ClusterQueue
		want result
	}{
		"everything there": {t: target, ns: ns, lq: lq, cq: all},
		"no namespace": {t: target, cq: all,
			want: result{ReasonNamespaceNotFound, "namespace ml does not exist there"}},
		"no namespace, the hub creates it but not the LocalQueue": {t: creates,
			want: result{queue.ReasonLocalQueueNotFound, "LocalQueue q does not exist in namespace ml there (the hub creates the namespace, not the LocalQueue)"}},
		"no namespace, the hub onboards to a ClusterQueue that exists": {t: onboards, cq: all},
		"no namespace, the hub onboards to a ClusterQueue that does not exist": {t: onboards,
			want: result{queue.ReasonClusterQueueNotFound, "ClusterQueue cq (WorkerCluster w1 spec.onboarding) does not exist there"}},
		"no LocalQueue": {t: target, ns: ns,
			want: result{queue.ReasonLocalQueueNotFound, `LocalQueue "q" does not exist in namespace "ml"; create it (a LocalQueue whose spec.clusterQueue names a ClusterQueue) or fix the strata.dev/queue-name label`}},
		"no LocalQueue, the hub onboards": {t: onboards, ns: ns, cq: all},
		"no LocalQueue, the hub onboards to a ClusterQueue that does not take the namespace": {t: onboards, ns: ns,
			cq:   cq(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "infra"}}),
			want: result{queue.ReasonNamespaceNotAllowed, `ClusterQueue "cq" does not admit namespace "ml" (namespaceSelector team=infra)`}},
		"no ClusterQueue": {t: target, ns: ns, lq: lq,
			want: result{queue.ReasonClusterQueueNotFound, `ClusterQueue "cq" of LocalQueue "ml/q" does not exist; ask an admin to create it, or point the LocalQueue at another ClusterQueue`}},
		"a ClusterQueue that takes no namespace": {t: target, ns: ns, lq: lq, cq: cq(nil),
			want: result{queue.ReasonNamespaceNotAllowed, `ClusterQueue "cq" admits no namespace (it has no namespaceSelector)`}},
		"a stopped LocalQueue": {t: target, ns: ns, lq: stoppedLQ, cq: all,
			want: result{strata.QueueStopped, "LocalQueue q is stopped (stopPolicy Hold); its workloads wait until the policy is None there"}},
		"a stopped ClusterQueue": {t: target, ns: ns, lq: lq, cq: stoppedCQ,
			want: result{strata.QueueStopped, "ClusterQueue cq is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None there"}},
		"a ClusterQueue being deleted (its agent keeps it while its workloads run)": {t: target, ns: ns, lq: lq, cq: deletedCQ,
			want: result{strata.QueueStopped, "ClusterQueue cq is being deleted: it admits no more workloads; its workloads wait for a ClusterQueue of that name there"}},
		"no namespace, the hub onboards to a stopped ClusterQueue": {t: onboards, cq: stoppedCQ,
			want: result{strata.QueueStopped, "ClusterQueue cq is stopped (stopPolicy HoldAndDrain); its workloads wait until the policy is None there"}},
		"a stopped ClusterQueue that does not take the namespace: that first": {t: target, ns: ns, lq: lq,
			cq:   func() *strata.ClusterQueue { c := cq(nil); c.Spec.StopPolicy = ptr.To(strata.StopHold); return c }(),
			want: result{queue.ReasonNamespaceNotAllowed, `ClusterQueue "cq" admits no namespace (it has no namespaceSelector)`}},
		"a ClusterQueue under a cycle of Cohort parents (its agent says so)": {t: target, ns: ns, lq: lq,
			cq: func() *strata.ClusterQueue {
				c := all.DeepCopy()
				c.Spec.Cohort = "loop"
				c.Status.Conditions = []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueCohortCycle}}
				return c
			}(),
			want: result{strata.QueueCohortCycle, "ClusterQueue cq is inactive: its cohort loop is on a cycle of Cohort parents (spec.parentName) there"}},
		"a ClusterQueue whose admission check is not Active (its agent says so)": {t: target, ns: ns, lq: lq,
			cq: func() *strata.ClusterQueue {
				c := all.DeepCopy()
				c.Spec.AdmissionChecks = []string{"budget"}
				c.Status.Conditions = []metav1.Condition{{Type: "Active", Status: metav1.ConditionFalse, Reason: strata.QueueAdmissionCheckNotReady,
					Message: "ClusterQueue cq admits no workloads: admission check budget does not exist"}}
				return c
			}(),
			want: result{strata.QueueAdmissionCheckNotReady, "ClusterQueue cq admits no workloads: admission check budget does not exist there"}},
		"a ClusterQueue whose selector takes the namespace": {t: target, ns: ns, lq: lq,
			cq: cq(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got result
			got.Reason, got.Message = JudgeQueue("w1", tc.t, tc.ns, tc.lq, tc.cq)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JudgeQueue() (-want,+got):\n%s", diff)
			}
		})
	}
}
