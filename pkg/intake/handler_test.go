package intake

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "strata.dev/strata/api/v1beta1"
)

// TestUnsettledFirst: of the Workloads listed when the agent starts, those
// whose Job may run on an admission they no longer hold (none, or ever
// evicted) bring their Job at normal priority; the others, at the queue's
// low priority behind later events.
func TestUnsettledFirst(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(batchv1.SchemeGroupVersion.WithKind("Job"), meta.RESTScopeNamespace)
	owner := handler.EnqueueRequestForOwner(clientgoscheme.Scheme, mapper, &batchv1.Job{}, handler.OnlyControllerOwner())
	admission := &strata.Admission{ClusterQueue: "q"}
	evicted := metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"}
	finished := metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"}
	cases := map[string]struct {
		admission  *strata.Admission
		conditions []metav1.Condition
		initial    bool
		want       int
	}{
		"waiting":                       {initial: true, want: 0},
		"admitted":                      {admission: admission, initial: true, want: handler.LowPriority},
		"admitted again after eviction": {admission: admission, conditions: []metav1.Condition{evicted}, initial: true, want: 0},
		"evicted":                       {conditions: []metav1.Condition{evicted}, initial: true, want: 0},
		"finished":                      {conditions: []metav1.Condition{finished}, initial: true, want: handler.LowPriority},
		"admitted, not listed at start": {admission: admission, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "train-uid", Controller: ptr.To(true),
			}}}}
			wl.Status.Admission = tc.admission
			wl.Status.Conditions = tc.conditions
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			unsettledFirst{owner}.Create(context.Background(), event.CreateEvent{Object: wl, IsInInitialList: tc.initial}, q)
			item, priority, _ := q.GetWithPriority()
			if diff := cmp.Diff("train", item.Name); diff != "" {
				t.Errorf("enqueued (-want,+got):\n%s", diff)
			}
			if priority != tc.want {
				t.Errorf("priority = %d, want %d", priority, tc.want)
			}
		})
	}
}
