package intake

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/testutil"
)

// newPriorityKeeper is a Keeper of Jobs on a fake API server with the
// queue of makeJob, a WorkloadPriorityClass "high" (1000), and
// PriorityClasses "pods" (5) and "missing-wpc" (7): a PriorityClass of the
// name a Job's label gives must not stand in for the missing
// WorkloadPriorityClass.
func newPriorityKeeper(t *testing.T) *Keeper {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := strata.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&strata.Workload{}).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		testutil.MakeClusterQueue(queueName).Obj(),
		testutil.MakeLocalQueue(queueName, ns, queueName),
		&strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Value: 5},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "missing-wpc"}, Value: 7},
	).Build()
	return New(batchjob.Kind, c, events.NewFakeRecorder(10))
}

func TestSyncPriority(t *testing.T) {
	type want struct {
		Priority        *int32
		Source          string
		Reason, Message string
	}
	cases := map[string]struct {
		labels   map[string]string
		podClass string
		want     want
	}{
		"WorkloadPriorityClass": {
			labels:   map[string]string{strata.PriorityClassLabel: "high"},
			podClass: "pods",
			want:     want{Priority: ptr.To[int32](1000), Source: strata.WorkloadPriorityClassSource, Reason: ReasonValid},
		},
		"WorkloadPriorityClass by Kueue's label": {
			labels: map[string]string{strata.KueuePriorityClassLabel: "high"},
			want:   want{Priority: ptr.To[int32](1000), Source: strata.WorkloadPriorityClassSource, Reason: ReasonValid},
		},
		"missing WorkloadPriorityClass": {
			labels:   map[string]string{strata.PriorityClassLabel: "missing-wpc"},
			podClass: "pods",
			want: want{Source: strata.WorkloadPriorityClassSource, Reason: ReasonPriorityClassNotFound,
				Message: `WorkloadPriorityClass "missing-wpc" does not exist`},
		},
		"the pods' PriorityClass": {
			podClass: "pods",
			want:     want{Priority: ptr.To[int32](5), Source: strata.PodPriorityClassSource, Reason: ReasonValid},
		},
		"missing PriorityClass": {
			podClass: "nope",
			want:     want{Source: strata.PodPriorityClassSource, Reason: ReasonPriorityClassNotFound, Message: `PriorityClass "nope" does not exist`},
		},
		"no class": {
			want: want{Reason: ReasonValid},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := newPriorityKeeper(t)
			job := makeJob("train", nil)
			for l, v := range tc.labels {
				job.Labels[l] = v
			}
			job.Spec.Template.Spec.PriorityClassName = tc.podClass
			wl, err := k.Sync(context.Background(), batchjob.Adapt(job))
			if err != nil {
				t.Fatalf("Sync() error: %v", err)
			}
			got := want{Priority: wl.Spec.Priority, Source: wl.Spec.PriorityClassSource, Reason: ReasonValid}
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid); c != nil {
				got.Reason, got.Message = c.Reason, c.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Workload (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.podClass, wl.Spec.PodSets[0].Template.Spec.PriorityClassName); diff != "" {
				t.Errorf("pod template's PriorityClass (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestJobsWaitingFor: a new class brings back the Jobs waiting for a class
// of its name and kind only.
func TestJobsWaitingFor(t *testing.T) {
	ctx := context.Background()
	k := newPriorityKeeper(t)
	sync := func(name string, labels map[string]string, podClass string) {
		t.Helper()
		job := makeJob(name, nil)
		for l, v := range labels {
			job.Labels[l] = v
		}
		job.Spec.Template.Spec.PriorityClassName = podClass
		if _, err := k.Sync(ctx, batchjob.Adapt(job)); err != nil {
			t.Fatalf("Sync(%s) error: %v", name, err)
		}
	}
	sync("wants-wpc", map[string]string{strata.PriorityClassLabel: "new"}, "")
	sync("wants-kueue-wpc", map[string]string{strata.KueuePriorityClassLabel: "new"}, "pods")
	sync("wants-pc", nil, "new")
	sync("wants-other-wpc", map[string]string{strata.PriorityClassLabel: "other"}, "")
	sync("valid", map[string]string{strata.PriorityClassLabel: "high"}, "")
	// A Workload written before Workloads had a priorityClassSource: its
	// class is a PriorityClass.
	sync("legacy", nil, "new")
	var legacy strata.Workload
	key := types.NamespacedName{Namespace: ns, Name: batchjob.Kind.WorkloadName("legacy")}
	if err := k.client.Get(ctx, key, &legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Spec.PriorityClassSource = ""
	if err := k.client.Update(ctx, &legacy); err != nil {
		t.Fatal(err)
	}
	requests := func(names ...string) []ctrl.Request {
		var out []ctrl.Request
		for _, n := range names {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}})
		}
		return out
	}
	sorted := cmp.Transformer("sorted", func(rs []ctrl.Request) map[types.NamespacedName]bool {
		out := map[types.NamespacedName]bool{}
		for _, r := range rs {
			out[r.NamespacedName] = true
		}
		return out
	})
	for name, tc := range map[string]struct {
		source string
		class  client.Object
		want   []ctrl.Request
	}{
		"WorkloadPriorityClass": {
			source: strata.WorkloadPriorityClassSource,
			class:  &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "new"}},
			want:   requests("wants-wpc", "wants-kueue-wpc"),
		},
		"PriorityClass": {
			source: strata.PodPriorityClassSource,
			class:  &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "new"}},
			want:   requests("wants-pc", "legacy"),
		},
		"a class no Job waits for": {
			source: strata.WorkloadPriorityClassSource,
			class:  &strata.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := k.jobsWaitingFor(tc.source)(ctx, tc.class)
			if diff := cmp.Diff(tc.want, got, sorted); diff != "" {
				t.Errorf("jobsWaitingFor(%s) (-want,+got):\n%s", tc.source, diff)
			}
		})
	}
}

// TestSyncDefaultPriority: a Job that names no class takes the value of
// the PriorityClass marked globalDefault, as its pods do (Kueue's); a
// class named on a later pod set counts when the first names none.
func TestSyncDefaultPriority(t *testing.T) {
	k := newPriorityKeeper(t)
	if err := k.client.Create(context.Background(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "cluster-default"}, Value: 100, GlobalDefault: true}); err != nil {
		t.Fatal(err)
	}
	wl, err := k.Sync(context.Background(), batchjob.Adapt(makeJob("plain", nil)))
	if err != nil {
		t.Fatalf("Sync() error: %v", err)
	}
	type spec struct {
		Priority     *int32
		Name, Source string
	}
	if diff := cmp.Diff(spec{ptr.To[int32](100), "cluster-default", strata.PodPriorityClassSource},
		spec{wl.Spec.Priority, wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource}); diff != "" {
		t.Errorf("a Job without a class (-want,+got):\n%s", diff)
	}
	named := makeJob("named", nil)
	named.Spec.Template.Spec.PriorityClassName = "pods"
	if wl, err = k.Sync(context.Background(), batchjob.Adapt(named)); err != nil {
		t.Fatalf("Sync() error: %v", err)
	}
	if got := ptr.Deref(wl.Spec.Priority, -1); got != 5 {
		t.Errorf("a Job naming a class: priority %d, want its class's 5", got)
	}
}
