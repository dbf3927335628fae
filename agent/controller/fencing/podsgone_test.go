package fencing

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/scheme"
)

// TestPodsGone: a hub's copy Workload deleted with its job stays while a
// pod of it (not of a job of the same name created since) has not ended,
// naming it, and goes once none runs; deleted on its own while its job is
// there, it goes at once; orphaned, its pods without a controller are
// deleted.
func TestPodsGone(t *testing.T) {
	const ns = "team"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", UID: "job-uid"}}
	deleting := job.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{metav1.FinalizerDeleteDependents}
	otherJob := job.DeepCopy()
	otherJob.UID = "another-uid" // a job created again under the name
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{strata.WorkloadLabel: "job-train"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	ofOtherJob := pod("train-new-0", corev1.PodPending)
	ofOtherJob.OwnerReferences[0].UID = otherJob.UID
	orphanPod := pod("train-0", corev1.PodRunning)
	orphanPod.OwnerReferences = nil
	held := ctrl.Result{RequeueAfter: intake.GoingPodsInterval}
	cases := map[string]struct {
		job        *batchv1.Job
		pods       []*corev1.Pod
		notCopy    bool
		orphaned   bool // the Workload has no controller
		wantHeld   bool
		wantGoing  string
		wantResult ctrl.Result
		wantPods   []string // the pods there after it, when set
	}{
		"job gone, a pod running: held, named": {pods: []*corev1.Pod{pod("train-0", corev1.PodRunning), pod("train-1", corev1.PodSucceeded)},
			wantHeld: true, wantGoing: "train-0 (Running, not scheduled)", wantResult: held},
		"job gone, pods ended: goes": {pods: []*corev1.Pod{pod("train-0", corev1.PodSucceeded), pod("train-1", corev1.PodFailed)}},
		"job gone, no pod: goes":     {},
		"job being deleted, a pod pending: held": {job: deleting, pods: []*corev1.Pod{pod("train-0", corev1.PodPending)},
			wantHeld: true, wantGoing: "train-0 (Pending, not scheduled)", wantResult: held},
		"its job there: deleted on its own, goes": {job: job, pods: []*corev1.Pod{pod("train-0", corev1.PodRunning)}},
		"another job of the name there, its own pod running: held": {job: otherJob, pods: []*corev1.Pod{pod("train-0", corev1.PodRunning)},
			wantHeld: true, wantGoing: "train-0 (Running, not scheduled)", wantResult: held},
		"another job of the name there, only that job's pods: goes": {job: otherJob, pods: []*corev1.Pod{ofOtherJob}},
		"orphaned, then deleted: its pods without a controller are deleted": {orphaned: true, pods: []*corev1.Pod{orphanPod},
			wantHeld: true, wantGoing: "train-0 (Running, not scheduled)", wantResult: held, wantPods: []string{}},
		"no longer labelled a copy, held: its pods are still waited for": {notCopy: true, pods: []*corev1.Pod{pod("train-0", corev1.PodRunning)},
			wantHeld: true, wantGoing: "train-0 (Running, not scheduled)", wantResult: held},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-train", Finalizers: []string{strata.PodsGoneFinalizer},
				Labels:            map[string]string{strata.HubWorkloadUIDLabel: "hub-uid"},
				DeletionTimestamp: ptr.To(metav1.Now()),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
			if tc.notCopy {
				wl.Labels = nil
			}
			if tc.orphaned {
				wl.OwnerReferences = nil
			}
			objs := []client.Object{wl}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithIndex(&corev1.Pod{}, index.PodWorkload, func(o client.Object) []string {
					return []string{o.GetLabels()[strata.WorkloadLabel]}
				}).Build()
			got, err := NewPodsGone(c, c, events.NewFakeRecorder(10)).Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: wl.Name}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantResult, got); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			var after strata.Workload
			err = c.Get(context.Background(), client.ObjectKeyFromObject(wl), &after)
			if held := err == nil; held != tc.wantHeld {
				t.Fatalf("held: %t, want %t (%v)", held, tc.wantHeld, err)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantGoing, after.Annotations[strata.GoingPodsAnnotation]); diff != "" {
				t.Errorf("going pods (-want,+got):\n%s", diff)
			}
			if tc.wantPods != nil {
				var pods corev1.PodList
				if err := c.List(context.Background(), &pods); err != nil {
					t.Fatal(err)
				}
				got := []string{}
				for _, p := range pods.Items {
					got = append(got, p.Name)
				}
				if diff := cmp.Diff(tc.wantPods, got); diff != "" {
					t.Errorf("pods (-want,+got):\n%s", diff)
				}
			}
		})
	}
}
