package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
)

const (
	ns        = "ml"
	queueName = "training"
)

// makeJob is a Job of 4 pods in queue training, suspended as the admission
// policy leaves it.
func makeJob(name string, annotations map[string]string) *batchv1.Job {
	return testutil.MakeJob(name, ns).UID(name + "-uid").Queue(queueName).Parallelism(4).Completions(4).Suspend(true).
		RestartPolicy("").PodAnnotations(annotations).Obj()
}

func TestWorkloadName(t *testing.T) {
	cases := map[string]struct {
		job      string
		wantName string
	}{
		"short name unchanged": {job: "train", wantName: "job-train"},
		"59 characters fit":    {job: strings.Repeat("a", 59), wantName: "job-" + strings.Repeat("a", 59)},
		"60 characters":        {job: strings.Repeat("a", 60)},
		"63 characters":        {job: strings.Repeat("a", 62) + "z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := WorkloadName(tc.job)
			if tc.wantName != "" && got != tc.wantName {
				t.Errorf("WorkloadName(%q) = %q, want %q", tc.job, got, tc.wantName)
			}
			if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
				t.Errorf("WorkloadName(%q) = %q is no label value: %v", tc.job, got, msgs)
			}
			if got != WorkloadName(tc.job) {
				t.Errorf("WorkloadName(%q) is not deterministic", tc.job)
			}
		})
	}
}

func TestNextStep(t *testing.T) {
	wlName := WorkloadName("train")
	admittedAt := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	admission := &strata.Admission{ClusterQueue: queueName, PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "h100", Count: 4}}}
	cases := map[string]struct {
		suspended bool
		started   bool // the template carries the Workload's label
		admission *strata.Admission
		finished  bool
		// inactive: spec.active false; said: its Admitted condition
		// already says Deactivated.
		inactive, said bool
		// startedAt is when the admission the Job was started with was
		// made, when not the current one's admittedAt.
		startedAt time.Time
		// gated: sent running, its pods held by the gate, labelled for
		// the Workload, no admission recorded (pkgjobs.Gated); released:
		// one of its pods was released; evicted: its Workload has an
		// Evicted condition.
		gated, released, evicted bool
		// starting: the record marks a start not finished.
		starting bool
		// pods is the Job's parallelism and completions, when not 4.
		pods int32
		want step
	}{
		"gated, waiting":                        {gated: true, want: stepNone},
		"gated, admitted":                       {gated: true, admission: admission, want: stepAnnounce},
		"gated, admitted, released":             {gated: true, released: true, admission: admission, want: stepAnnounce},
		"gated, released, admission gone":       {gated: true, released: true, want: stepStop},
		"gated, evicted before any release":     {gated: true, evicted: true, want: stepStop},
		"gated, admitted again after eviction":  {gated: true, evicted: true, admission: admission, want: stepStop},
		"gated, being stopped, admitted again":  {gated: true, suspended: true, admission: admission, want: stepStop},
		"gated, being stopped":                  {gated: true, suspended: true, want: stepStop},
		"gated, deactivated while waiting":      {gated: true, inactive: true, want: stepDeactivate},
		"gated, deactivated, said so":           {gated: true, inactive: true, said: true, want: stepNone},
		"gated, deactivated, said so, released": {gated: true, inactive: true, said: true, released: true, want: stepStop},
		"gated, deactivated while admitted":     {gated: true, inactive: true, admission: admission, want: stepDeactivate},
		"gated, workload finished":              {gated: true, admission: admission, finished: true, want: stepNone},
		"waiting":                               {suspended: true, want: stepNone},
		"admitted":                              {suspended: true, admission: admission, want: stepStart},
		"running as admitted":                   {started: true, admission: admission, want: stepNone},
		"suspended by the user":                 {suspended: true, started: true, admission: admission, want: stepRequeue},
		"evicted while running":                 {started: true, want: stepStop},
		"evicted, suspended, template not yet":  {suspended: true, started: true, want: stepStop},
		"running without admission":             {want: stepHold},
		"running, admitted, not started by us":  {admission: admission, want: stepHold},
		"workload finished":                     {admission: admission, finished: true, want: stepNone},
		"deactivated while running":             {started: true, admission: admission, inactive: true, want: stepDeactivate},
		"deactivated while waiting":             {suspended: true, inactive: true, want: stepDeactivate},
		"deactivated, waiting, said so":         {suspended: true, inactive: true, said: true, want: stepNone},
		"deactivated, admission taken back":     {started: true, inactive: true, said: true, want: stepStop},
		"being stopped, admitted again meanwhile": {
			suspended: true, started: true, admission: admission, want: stepStop, startedAt: admittedAt.Add(-time.Minute),
		},
		"a start not finished":                         {suspended: true, started: true, starting: true, admission: admission, want: stepStart},
		"a start not finished, the admission replaced": {suspended: true, started: true, starting: true, admission: admission, startedAt: admittedAt.Add(-time.Minute), want: stepStop},
		"a start not finished, the admission lost":     {suspended: true, started: true, starting: true, want: stepStop},
		"running, evicted and admitted again before it was stopped": {
			started: true, admission: admission, want: stepStop, startedAt: admittedAt.Add(-time.Minute),
		},
		"resized while running (parallelism 6, admitted 4)": {started: true, admission: admission, pods: 6, want: stepRequeueResized},
		"resized while suspended by the user":               {suspended: true, started: true, admission: admission, pods: 6, want: stepRequeue},
		"resized, its admission taken back":                 {started: true, pods: 6, want: stepStop},
		"suspended by the user after a hot swap changed the assignment": {
			suspended: true, started: true, admission: &strata.Admission{ClusterQueue: queueName, PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "h100", Count: 4, TopologyAssignment: &strata.TopologyAssignment{Levels: []string{"kubernetes.io/hostname"}}}}},
			want: stepRequeue,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := makeJob("train", nil)
			job.Spec.Suspend = ptr.To(tc.suspended)
			if tc.pods != 0 {
				job.Spec.Parallelism, job.Spec.Completions = ptr.To(tc.pods), ptr.To(tc.pods)
			}
			if tc.started {
				job.Spec.Template.Labels = map[string]string{strata.WorkloadLabel: wlName}
			}
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: wlName}, Status: strata.WorkloadStatus{Admission: tc.admission}}
			if tc.admission != nil {
				wl.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(admittedAt)}}
			}
			if tc.started {
				at := admittedAt
				if !tc.startedAt.IsZero() {
					at = tc.startedAt
				}
				then := wl.DeepCopy()
				then.Status.Admission = admission
				then.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
				if err := recordAdded(batchjob.Adapt(job), addedByAdmission{Admission: admissionID(then), Starting: tc.starting}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.gated {
				batchjob.Adapt(job).StartGated(wlName)
				job.Spec.Suspend = ptr.To(tc.suspended) // suspended: the agent stops it
			}
			if tc.evicted {
				wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"})
			}
			if tc.finished {
				wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue})
			}
			if tc.inactive {
				wl.Spec.Active = ptr.To(false)
			}
			if tc.said {
				wl.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: ReasonDeactivated}}
			}
			if diff := cmp.Diff(tc.want, nextStep(batchjob.Adapt(job), wl, tc.released)); diff != "" {
				t.Errorf("nextStep() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTemplateMutable(t *testing.T) {
	started := metav1.Now()
	cases := map[string]struct {
		suspend   *bool
		startTime *metav1.Time
		want      bool
	}{
		"suspended, never started":                            {suspend: ptr.To(true), want: true},
		"suspended, the Job controller has not caught up yet": {suspend: ptr.To(true), startTime: &started},
		"running":       {suspend: ptr.To(false), startTime: &started},
		"suspend unset": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Suspend: tc.suspend}, Status: batchv1.JobStatus{StartTime: tc.startTime}}
			if got := batchjob.Adapt(job).TemplatesMutable(); got != tc.want {
				t.Errorf("templateMutable() = %t, want %t", got, tc.want)
			}
		})
	}
}

// When the agent starts, the Jobs that wait for it are queued with the
// events that follow; the settled ones wait behind them.
func TestJobHandlerPriorities(t *testing.T) {
	started := func(j *batchv1.Job) {
		j.Spec.Suspend = ptr.To(false)
		j.Spec.Template.Labels = map[string]string{strata.WorkloadLabel: WorkloadName(j.Name)}
	}
	cases := map[string]struct {
		change  func(*batchv1.Job)
		initial bool
		want    int
	}{
		"listed at start, waiting for intake or admission": {initial: true, want: 0},
		"listed at start, running as started":              {initial: true, change: started, want: handler.LowPriority},
		"listed at start, running without admission": {initial: true, want: 0, change: func(j *batchv1.Job) {
			j.Spec.Suspend = ptr.To(false)
		}},
		"listed at start, finished": {initial: true, want: handler.LowPriority, change: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}},
		"created later, finished": {want: 0, change: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := makeJob("train", nil)
			if tc.change != nil {
				tc.change(job)
			}
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			jobHandler(batchjob.Kind).Create(context.Background(), event.CreateEvent{Object: job, IsInInitialList: tc.initial}, q)
			req, priority, _ := q.GetWithPriority()
			if diff := cmp.Diff(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "train"}}, req); diff != "" {
				t.Errorf("request (-want,+got):\n%s", diff)
			}
			if priority != tc.want {
				t.Errorf("priority = %d, want %d", priority, tc.want)
			}
		})
	}
}

// TestHoldNote: the event on a Job the agent suspends says what is true
// of it: an invalid Job does not wait for admission.
func TestHoldNote(t *testing.T) {
	cases := map[string]struct {
		wl   *strata.Workload
		want string
	}{
		"waiting": {
			wl:   &strata.Workload{Spec: strata.WorkloadSpec{QueueName: queueName}},
			want: "The Job waits for admission in LocalQueue training",
		},
		"admitted": {
			wl:   &strata.Workload{Spec: strata.WorkloadSpec{QueueName: queueName}, Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: queueName}}},
			want: "The Job ran without being started by Strata; it starts again as admitted by ClusterQueue training",
		},
		"invalid": {
			wl: &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.InvalidAnnotation: ReasonQueueNotFound}},
				Spec: strata.WorkloadSpec{QueueName: queueName}},
			want: "The Job cannot be admitted as it is (ClusterQueueNotFound; see its Workload's Invalid condition); it stays suspended until that is fixed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, holdNote(tc.wl)); diff != "" {
				t.Errorf("holdNote() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestJobSetWithoutReplicatedJobs: a JobSet with no templates (the API
// server accepts one) is held invalid, never a panic.
func TestJobSetWithoutReplicatedJobs(t *testing.T) {
	js := jobset.Adapt(&jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "ns", Labels: map[string]string{strata.QueueNameLabel: "q"}}})
	if settled(js) {
		t.Error("an empty JobSet that never started is settled")
	}
	wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "jobset-empty"}}
	if got := nextStep(js, wl, false); got != stepHold {
		t.Errorf("nextStep() = %v, want stepHold (it runs unsuspended without admission)", got)
	}
}

// TestPodSetsChanged: a Job whose pod counts or per-pod requests differ
// from what its admission assigned and charged is changed; the admission's
// node selector and labels in its template are not a change.
func TestPodSetsChanged(t *testing.T) {
	admitted := testutil.MakeWorkload("w", ns).PodSets(testutil.MakePodSet("main", 4, "cpu", "1", "memory", "1Gi").Obj()).
		Admission(&strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "f", Count: 4}}}).Obj()
	cases := map[string]struct {
		podSet strata.PodSet
		want   string
	}{
		"as admitted": {podSet: testutil.MakePodSet("main", 4, "cpu", "1", "memory", "1Gi").Obj()},
		"as admitted, with the admission's node selector": {
			podSet: func() strata.PodSet {
				ps := testutil.MakePodSet("main", 4, "cpu", "1000m", "memory", "1Gi").Obj()
				ps.Template.Spec.NodeSelector = map[string]string{"gpu": "h100"}
				return ps
			}(),
		},
		"more pods": {podSet: testutil.MakePodSet("main", 6, "cpu", "1", "memory", "1Gi").Obj(), want: "pod set main has 6 pods, its assignment 4"},
		"more pods, with a minCount": {podSet: func() strata.PodSet {
			ps := testutil.MakePodSet("main", 6, "cpu", "1", "memory", "1Gi").Obj()
			ps.MinCount = ptr.To[int32](2)
			return ps
		}(), want: "pod set main has 6 pods, its assignment 4"},
		"larger pods":     {podSet: testutil.MakePodSet("main", 4, "cpu", "16", "memory", "1Gi").Obj(), want: "pod set main requests cpu=16,memory=1Gi per pod, its admission cpu=1,memory=1Gi"},
		"a new request":   {podSet: testutil.MakePodSet("main", 4, "cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1").Obj(), want: "pod set main requests cpu=1,memory=1Gi,nvidia.com/gpu=1 per pod, its admission cpu=1,memory=1Gi"},
		"a request gone":  {podSet: testutil.MakePodSet("main", 4, "cpu", "1").Obj(), want: "pod set main requests cpu=1 per pod, its admission cpu=1,memory=1Gi"},
		"another pod set": {podSet: testutil.MakePodSet("workers", 4, "cpu", "1").Obj(), want: "pod set workers has no assignment"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podSetsChanged([]strata.PodSet{tc.podSet}, admitted)); diff != "" {
				t.Errorf("podSetsChanged() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestResizedUnderPartialAdmission: a Job started with fewer pods than
// it asks for runs as admitted; one whose user changed that parallelism
// since is resized.
func TestResizedUnderPartialAdmission(t *testing.T) {
	admitted := testutil.MakeWorkload("w", ns).PodSets(func() strata.PodSet {
		ps := testutil.MakePodSet("main", 6, "cpu", "1").Obj()
		ps.MinCount = ptr.To[int32](2)
		return ps
	}()).Admission(&strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: "f", Count: 4}}}).Obj()
	started := func(parallelism int32) *batchv1.Job {
		j := testutil.MakeJob("train", ns).Queue(queueName).Parallelism(6).Completions(6).Request("cpu", "1").Obj()
		j.Annotations = map[string]string{strata.JobMinParallelismAnnotation: "2", AddedByAdmissionAnnotation: "{}"}
		batchjob.Adapt(j).RunWith("main", 4)
		j.Spec.Parallelism = ptr.To(parallelism)
		return j
	}
	for name, tc := range map[string]struct {
		job  *batchv1.Job
		want string
	}{
		"running as admitted":                                   {job: started(4)},
		"scaled by its user since":                              {job: started(5), want: "pod set main runs 5 pods, its admission 4"},
		"scaled past what it asked (capped by its completions)": {job: started(8), want: "pod set main runs 6 pods, its admission 4"},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resized(batchjob.Adapt(tc.job), admitted)); diff != "" {
				t.Errorf("resized() (-want,+got):\n%s", diff)
			}
		})
	}
}
