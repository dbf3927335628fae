package nodefailure

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
)

// TestFailStrandedPods: a pod sent to a replaced node that never started
// is failed, so that its Job makes another; an MPIJob's worker, which the
// MPI operator makes again only when it is missing, is deleted instead.
func TestFailStrandedPods(t *testing.T) {
	pod := func(name string, owner metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
				Labels: map[string]string{strata.PodSetLabel: "worker"}, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{strata.HostnameLabel: "gone"}, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}
	}
	yes := true
	jobOwner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "launcher", UID: "j", Controller: &yes}
	mpiOwner := metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "pi", UID: "m", Controller: &yes}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&corev1.Pod{}).
		WithObjects(pod("of-a-job", jobOwner), pod("pi-worker-1", mpiOwner)).Build()
	r := &Reconciler{client: c, recorder: events.NewFakeRecorder(10), clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	if err := r.failStrandedPods(context.Background(), pods.Items, assignedHosts{"worker": {"new": true}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"of-a-job", "pi-worker-1"} {
		var p corev1.Pod
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: name}, &p); err != nil {
			got[name] = "deleted"
			continue
		}
		got[name] = string(p.Status.Phase)
	}
	if diff := cmp.Diff(map[string]string{"of-a-job": "Failed", "pi-worker-1": "deleted"}, got); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}
