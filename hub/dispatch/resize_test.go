package dispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
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
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

// TestWantsResize: which dispatched hub Workloads' jobs ask for another
// size than the one granted.
func TestWantsResize(t *testing.T) {
	hubWorkload := func(elastic bool, count int32, admitted bool, conds ...metav1.Condition) *strata.Workload {
		wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: workload.MainPodSet, Count: count}}}}
		if elastic {
			wl.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		}
		if admitted {
			wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: workload.MainPodSet, Count: count}}}
		}
		wl.Status.Conditions = conds
		return wl
	}
	job := func(parallelism int32, ann map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}}
	}
	elastic := map[string]string{strata.ElasticJobAnnotation: "true"}
	inactive := hubWorkload(true, 2, true)
	inactive.Spec.Active = ptr.To(false)
	cases := map[string]struct {
		wl     *strata.Workload
		job    *batchv1.Job
		want   workload.Resize
		wantOK bool
	}{
		"scaled up":                      {wl: hubWorkload(true, 2, true), job: job(4, elastic), want: workload.Resize{From: 2, To: 4}, wantOK: true},
		"scaled down":                    {wl: hubWorkload(true, 4, true), job: job(1, elastic), want: workload.Resize{From: 4, To: 1}, wantOK: true},
		"the size granted":               {wl: hubWorkload(true, 4, true), job: job(4, elastic)},
		"not elastic":                    {wl: hubWorkload(false, 2, true), job: job(4, nil)},
		"not admitted on its worker yet": {wl: hubWorkload(true, 2, false), job: job(4, elastic)},
		"deactivated":                    {wl: inactive, job: job(4, elastic)},
		"evicted at the hub": {wl: hubWorkload(true, 2, true, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: strata.EvictedByPreemption}),
			job: job(4, elastic)},
		"finished": {wl: hubWorkload(true, 2, true, metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"}),
			job: job(4, elastic)},
		"scaled to no pods": {wl: hubWorkload(true, 2, true), job: job(0, elastic)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := wantsResize(tc.wl, batchjob.Adapt(tc.job))
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("wantsResize = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestResizeGrant: a scale-down is granted at once, a scale-up when the
// hub queue's quota holds the pods added.
func TestResizeGrant(t *testing.T) {
	short := errors.New("insufficient quota for cpu, 6 more needed")
	cases := map[string]struct {
		resize      workload.Resize
		check       error
		want        bool
		wantMessage string
	}{
		"down":             {resize: workload.Resize{From: 4, To: 2}, check: short, want: true},
		"up, within quota": {resize: workload.Resize{From: 2, To: 4}, want: true},
		"up, beyond quota": {resize: workload.Resize{From: 2, To: 8}, check: short,
			wantMessage: "scaling up from 2 to 8 pods waits for quota of hub ClusterQueue team on flavor gpu: insufficient quota for cpu, 6 more needed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, message := resizeGrant(tc.resize, "team", "gpu", func() error { return tc.check })
			if got != tc.want {
				t.Errorf("granted = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantMessage, message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestElasticCharged: an admitted elastic hub Workload is charged the size
// granted (its count), whatever its worker's admission runs yet; others
// the pods they are admitted with.
func TestElasticCharged(t *testing.T) {
	wl := func(elastic bool, count, admitted int32) *strata.Workload {
		w := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: workload.MainPodSet, Count: count,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}},
			Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq",
				PodSetAssignments: []strata.PodSetAssignment{{Name: workload.MainPodSet, Count: admitted}}}}}
		if elastic {
			w.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		}
		return w
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want string
	}{
		"elastic, granted 4, running 2":   {wl: wl(true, 4, 2), want: "4"},
		"elastic, granted 2, running 4":   {wl: wl(true, 2, 4), want: "2"},
		"partially admitted, 2 of 4 pods": {wl: wl(false, 4, 2), want: "2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := newEntry(tc.wl, nil).charged()
			if q := got[corev1.ResourceCPU]; q.String() != tc.want {
				t.Errorf("charged cpu = %s, want %s", q.String(), tc.want)
			}
		})
	}
}

// TestNoteResize: the Resized condition of an elastic hub Workload as its
// worker's admission follows the size granted.
func TestNoteResize(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	admission := func(count int32) *strata.Admission {
		return &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: workload.MainPodSet, Count: count}}}
	}
	hub := func(elastic bool, granted int32) *strata.Workload {
		wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: workload.MainPodSet, Count: granted}}}}
		if elastic {
			wl.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		}
		return wl
	}
	copyOf := func(count int32, conds ...metav1.Condition) *strata.Workload {
		return &strata.Workload{Status: strata.WorkloadStatus{Admission: admission(count), Conditions: conds}}
	}
	cases := map[string]struct {
		wl        *strata.Workload
		before    *strata.Admission
		copyWL    *strata.Workload
		want      *metav1.Condition
		wantEvent string
	}{
		"first admission": {wl: hub(true, 2), copyWL: copyOf(2)},
		"not elastic":     {wl: hub(false, 4), before: admission(2), copyWL: copyOf(4)},
		"the worker scaled the copy up": {wl: hub(true, 4), before: admission(2), copyWL: copyOf(4),
			want:      &metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionTrue, Reason: ReasonResized, Message: "scaled up from 2 to 4 pods in place on w1"},
			wantEvent: "scaled up from 2 to 4 pods in place on w1"},
		"the worker scaled the copy down": {wl: hub(true, 1), before: admission(3), copyWL: copyOf(1),
			want:      &metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionTrue, Reason: ReasonResized, Message: "scaled down from 3 to 1 pods in place on w1"},
			wantEvent: "scaled down from 3 to 1 pods in place on w1"},
		"granted, the copy not resized yet": {wl: hub(true, 4), before: admission(2), copyWL: copyOf(2),
			want: &metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse, Reason: ReasonResizePending, Message: "its copy on w1 is being resized from 2 to 4 pods"}},
		"granted, the worker says why it waits": {wl: hub(true, 4), before: admission(2),
			copyWL: copyOf(2, metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse, Reason: "Pending", Message: "scaling up from 2 to 4 pods: flavor gpu: no room"}),
			want: &metav1.Condition{Type: strata.WorkloadResized, Status: metav1.ConditionFalse, Reason: ReasonResizePending,
				Message: "its copy on w1 is being resized from 2 to 4 pods: scaling up from 2 to 4 pods: flavor gpu: no room"}},
		"the size granted, as before": {wl: hub(true, 4), before: admission(4), copyWL: copyOf(4)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var status strata.WorkloadStatus
			changed, event := NoteResize(&status, tc.wl, tc.before, tc.copyWL, "w1", now)
			if changed != (tc.want != nil) {
				t.Errorf("changed = %v, want %v", changed, tc.want != nil)
			}
			if diff := cmp.Diff(tc.wantEvent, event); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
			got := meta.FindStatusCondition(status.Conditions, strata.WorkloadResized)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("Resized (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResizeOrder: a pass grants the scale-downs first, their quota
// given back at once, then the scale-ups in queue order: a Job shrunk
// makes room for one grown in the same pass, without a preemption.
func TestResizeOrder(t *testing.T) {
	elastic := func(name string, count int32) *strata.Workload {
		wl := testutil.MakeWorkload(name, "ml").PodSets(testutil.MakePodSet(workload.MainPodSet, count, "cpu", "1").PodSet).Obj()
		wl.Annotations = map[string]string{strata.ElasticJobAnnotation: "true"}
		return wl
	}
	shrunk, grown := elastic("shrunk", 4), elastic("grown", 2)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(shrunk, grown).WithStatusSubresource(&strata.Workload{}).Build()
	d := &Dispatcher{client: c, recorder: &events.FakeRecorder{}, clock: clock.RealClock{}, waiting: map[types.UID]written{}}
	books := queue.NewBooks([]*strata.ClusterQueue{testutil.MakeClusterQueue("team").Flavor("f", "cpu", "6").Obj()})
	entryOf := func(wl *strata.Workload) *entry {
		var cur strata.Workload
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
			t.Fatal(err)
		}
		e := newEntry(&cur, nil)
		e.flavor = "f"
		books.Charge("team", "f", e.need, 1) // as collect charges it
		return e
	}
	resizes := []resizing{
		{e: entryOf(grown), queue: "team", resize: workload.Resize{From: 2, To: 4}},
		{e: entryOf(shrunk), queue: "team", resize: workload.Resize{From: 4, To: 2}},
	}
	var writes passWrites
	d.resize(t.Context(), resizes, map[string]*strata.ClusterQueue{}, nil, books, &writes)
	for _, f := range writes.run() {
		t.Fatalf("write failed: %v", f.err)
	}
	got := map[string]int32{}
	for _, wl := range []*strata.Workload{shrunk, grown} {
		var cur strata.Workload
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(wl), &cur); err != nil {
			t.Fatal(err)
		}
		got[wl.Name] = cur.Spec.PodSets[0].Count
	}
	if diff := cmp.Diff(map[string]int32{"shrunk": 2, "grown": 4}, got); diff != "" {
		t.Errorf("granted counts (-want,+got):\n%s", diff)
	}
}
