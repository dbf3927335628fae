package jobs

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"strata.dev/strata/agent/index"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// env is a Reconciler on a fake API server that, like the real one,
// rejects Workloads that break the CRD schema.
type env struct {
	t        *testing.T
	client   client.Client
	recorder *events.FakeRecorder
	r        *Reconciler
	// failJobUpdates fails that many Job updates, with jobUpdateErr or,
	// when it is nil, ServiceUnavailable.
	failJobUpdates int
	jobUpdateErr   error
	// workloadCreateErr, when set, fails Workload creation.
	workloadCreateErr error
	// rejectWorkloads rejects every Workload write, as for a schema rule
	// the agent does not know.
	rejectWorkloads bool
}

var flavor = &strata.ResourceFlavor{
	ObjectMeta: metav1.ObjectMeta{Name: "h100"},
	Spec: strata.ResourceFlavorSpec{
		NodeLabels:  map[string]string{"gpu": "h100"},
		Tolerations: []corev1.Toleration{{Key: "reserved", Operator: corev1.TolerationOpExists}},
	},
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := strata.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, recorder: events.NewFakeRecorder(100)}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: queueName}, Spec: strata.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}}},
		&strata.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: queueName, Namespace: ns}, Spec: strata.LocalQueueSpec{ClusterQueue: queueName}},
		flavor.DeepCopy(),
	)
	check := func(obj client.Object) error {
		wl, ok := obj.(*strata.Workload)
		if !ok {
			return nil
		}
		errs := workload.ValidateSpec(&wl.Spec, field.NewPath("spec"))
		if e.rejectWorkloads {
			errs = append(errs, field.Forbidden(field.NewPath("spec"), "a rule the agent does not know"))
		}
		if len(errs) > 0 {
			return apierrors.NewInvalid(schema.GroupKind{Group: "strata.dev", Kind: "Workload"}, wl.Name, errs)
		}
		return nil
	}
	e.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&strata.Workload{}, &batchv1.Job{}).
		WithIndex(&corev1.Pod{}, index.PodWorkload, func(o client.Object) []string {
			if name := o.GetLabels()[strata.WorkloadLabel]; name != "" {
				return []string{name}
			}
			return nil
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := check(obj); err != nil {
					return err
				}
				if _, ok := obj.(*strata.Workload); ok && e.workloadCreateErr != nil {
					return e.workloadCreateErr
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := check(obj); err != nil {
					return err
				}
				if _, ok := obj.(*batchv1.Job); ok && e.failJobUpdates > 0 {
					e.failJobUpdates--
					if e.jobUpdateErr != nil {
						return e.jobUpdateErr
					}
					return apierrors.NewServiceUnavailable("etcd is busy")
				}
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	e.r = NewReconciler(e.client, e.recorder)
	return e
}

func (e *env) reconcile(job *batchv1.Job) error {
	e.t.Helper()
	_, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
	return err
}

func (e *env) job(name string) *batchv1.Job {
	e.t.Helper()
	var job batchv1.Job
	if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		e.t.Fatal(err)
	}
	return &job
}

func (e *env) workload(name string) *strata.Workload {
	e.t.Helper()
	var wl strata.Workload
	if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &wl); err != nil {
		e.t.Fatal(err)
	}
	return &wl
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// admittedWorkload is the Workload of job, admitted on flavor.
func admittedWorkload(t *testing.T, job *batchv1.Job) *strata.Workload {
	t.Helper()
	wl, errs := intake.DesiredWorkload(batchjob.Adapt(job), tas.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := controllerutil.SetControllerReference(job, wl, clientgoscheme.Scheme); err != nil {
		t.Fatal(err)
	}
	wl.Status.Admission = &strata.Admission{ClusterQueue: queueName, PodSetAssignments: []strata.PodSetAssignment{{Name: "main", Flavor: flavor.Name, Count: 4}}}
	wl.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.Now()}}
	return wl
}

func TestReconcileHoldsAJobThatRunsWithoutAdmission(t *testing.T) {
	job := makeJob("train", nil)
	job.Spec.Suspend = nil // the user removed it, or the agent came later
	e := newEnv(t, job)
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if got := e.job("train"); !ptr.Deref(got.Spec.Suspend, false) {
		t.Error("the Job still runs without admission")
	}
	e.workload(WorkloadName("train"))
	if diff := cmp.Diff([]string{"Normal Suspended The Job waits for admission in LocalQueue training"}, e.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	// Suspended and waiting: nothing more to do.
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), e.events()); diff != "" {
		t.Errorf("events of the second reconcile (-want,+got):\n%s", diff)
	}
}

func TestReconcileInvalidJob(t *testing.T) {
	job := makeJob("train", map[string]string{
		"strata.dev/podset-required-topology":                   "cloud.provider.com/topology-block",
		"strata.dev/podset-preferred-topology":                  "cloud.provider.com/topology-rack",
		"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "kubernetes.io/hostname", "size": 4294967296}]`,
		"strata.dev/podset-group-name":                          strings.Repeat("g", 64),
	})
	e := newEnv(t, job)
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	wl := e.workload(WorkloadName("train"))
	if wl.Annotations[strata.InvalidAnnotation] != ReasonInvalidJob {
		t.Errorf("annotation %s = %q, want %q", strata.InvalidAnnotation, wl.Annotations[strata.InvalidAnnotation], ReasonInvalidJob)
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalidJob {
		t.Fatalf("Invalid condition = %+v, want True with reason %s", c, ReasonInvalidJob)
	}
	for _, want := range []string{"only one of", "at most 2147483647", "must be 1 to 63 characters"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Invalid condition message %q does not contain %q", c.Message, want)
		}
	}
	evs := e.events()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning InvalidJob ") {
		t.Errorf("events = %q, want one Warning InvalidJob", evs)
	}
}

func TestReconcileRejectedWorkload(t *testing.T) {
	job := makeJob("train", nil)
	job.Spec.Suspend = ptr.To(false)
	e := newEnv(t, job)
	e.rejectWorkloads = true
	err := e.reconcile(job)
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("Reconcile() = %v, want a terminal error", err)
	}
	if got := e.job("train"); !ptr.Deref(got.Spec.Suspend, false) {
		t.Error("the Job runs although it has no Workload")
	}
	evs := e.events()
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "Warning InvalidJob The API server rejected the Job's Workload; change the Job: ") {
		t.Errorf("events = %q, want a Warning InvalidJob and the suspension", evs)
	}
}

func TestReconcileRequeueReleasesCapacityFirst(t *testing.T) {
	user := makeJob("train", nil)
	job := user.DeepCopy()
	added := admitTemplate(&job.Spec.Template, flavor, WorkloadName("train"), "main", false)
	if err := recordAdded(batchjob.Adapt(job), added); err != nil {
		t.Fatal(err)
	}
	job.Spec.Suspend = ptr.To(true) // the user suspended it
	e := newEnv(t, job, admittedWorkload(t, job))
	// The scheduler's clock, not the wall clock, stamps Requeued: it
	// orders requeued Workloads by that time.
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e.r.WithClock(clocktesting.NewFakePassiveClock(at))
	e.failJobUpdates = 1
	if err := e.reconcile(job); err == nil {
		t.Fatal("Reconcile() succeeded although the Job's update failed")
	}
	wl := e.workload(WorkloadName("train"))
	if a := wl.Status.Admission; a != nil {
		t.Errorf("admission = %+v; want it released before the Job's update", a)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadRequeued); c == nil || !c.LastTransitionTime.Time.Equal(at) {
		t.Errorf("Requeued condition = %+v, want it stamped %v by the injected clock", c, at)
	}
	// The retry finishes the job.
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	got := e.job("train")
	if _, ok := got.Annotations[AddedByAdmissionAnnotation]; ok {
		t.Errorf("annotation %s left on the Job", AddedByAdmissionAnnotation)
	}
	if diff := cmp.Diff(user.Spec.Template, got.Spec.Template, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("template (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal Requeued The Job was suspended; it waits in LocalQueue training again"}, e.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	// Nothing left to do, and the Job stays suspended.
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(e.job("train").Spec.Suspend, false) {
		t.Error("the Job was unsuspended")
	}
}

func TestReconcileStartsAJobWithALongName(t *testing.T) {
	name := strings.Repeat("a", 63)
	job := makeJob(name, nil)
	legacy := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-" + name, Namespace: ns}, Spec: strata.WorkloadSpec{QueueName: queueName, PodSets: []strata.PodSet{{Name: "main"}}}}
	if err := controllerutil.SetControllerReference(job, legacy, clientgoscheme.Scheme); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, job, admittedWorkload(t, job), legacy)
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	got := e.job(name)
	if ptr.Deref(got.Spec.Suspend, true) {
		t.Error("the admitted Job was not started")
	}
	if diff := cmp.Diff(WorkloadName(name), got.Spec.Template.Labels[strata.WorkloadLabel]); diff != "" {
		t.Errorf("workload label (-want,+got):\n%s", diff)
	}
	var old strata.Workload
	if err := e.client.Get(context.Background(), client.ObjectKeyFromObject(legacy), &old); !apierrors.IsNotFound(err) {
		t.Errorf("the Workload an older agent named %q: %v; want it deleted", legacy.Name, err)
	}
}

// A write that fails because the informer's copy is outdated is not an
// error: the newer object's event brings the Job back. Any other failure
// is, so that the Job is retried.
func TestReconcileSupersededWrites(t *testing.T) {
	gr := schema.GroupResource{Group: "strata.dev", Resource: "workloads"}
	for name, tc := range map[string]struct {
		admitted          bool
		jobUpdateErr      error
		workloadCreateErr error
		wantErr           bool
	}{
		"start conflicts with the Job controller's status write": {
			admitted: true, jobUpdateErr: apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("the object has been modified")),
		},
		"the Workload was created by an earlier reconcile": {
			workloadCreateErr: apierrors.NewAlreadyExists(gr, WorkloadName("train")),
		},
		"the Job's update fails": {
			admitted: true, jobUpdateErr: apierrors.NewServiceUnavailable("etcd is busy"), wantErr: true,
		},
		"the Workload's creation fails": {
			workloadCreateErr: apierrors.NewServiceUnavailable("etcd is busy"), wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			job := makeJob("train", nil)
			objs := []client.Object{job}
			if tc.admitted {
				objs = append(objs, admittedWorkload(t, job))
			}
			e := newEnv(t, objs...)
			e.failJobUpdates, e.jobUpdateErr, e.workloadCreateErr = 1, tc.jobUpdateErr, tc.workloadCreateErr
			err := e.reconcile(job)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Reconcile() error = %v, want error: %t", err, tc.wantErr)
			}
			if !ptr.Deref(e.job("train").Spec.Suspend, false) {
				t.Error("the Job was started although its update failed")
			}
			if e.failJobUpdates, e.workloadCreateErr = 0, nil; tc.admitted {
				// The event of the newer object: now the Job starts.
				if err := e.reconcile(job); err != nil {
					t.Fatal(err)
				}
				if ptr.Deref(e.job("train").Spec.Suspend, true) {
					t.Error("the admitted Job was not started on the next reconcile")
				}
			}
		})
	}
}

// TestReconcileStaleWorkload: a Workload at the Job's Workload name that
// the Job does not control — an earlier Job's of the same name, or one
// orphaned — is never adopted: the Job gets a Workload of its own, not
// admitted, and is not started on the other's admission; a Workload of
// another kind of owner is left alone.
func TestReconcileStaleWorkload(t *testing.T) {
	earlier := makeJob("train", nil)
	earlier.UID = "earlier-uid"
	earlier.Spec.Parallelism = ptr.To[int32](2)
	earlier.Spec.Completions = ptr.To[int32](2)
	jobSetOwner := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: "jobset-uid", Controller: ptr.To(true)}
	cases := []struct {
		name string
		// owners of the stale Workload; nil when orphaned
		owners []metav1.OwnerReference
		// finished: the new Job has completed
		finished   bool
		wantErr    bool
		wantOwner  types.UID // of the Workload after the reconcile
		wantCount  int32
		wantAdmit  bool
		wantEvents []string
	}{{
		name:      "an earlier Job's",
		owners:    []metav1.OwnerReference{*metav1.NewControllerRef(earlier, batchv1.SchemeGroupVersion.WithKind("Job"))},
		wantOwner: "train-uid", wantCount: 4,
	}, {
		name:      "orphaned",
		wantOwner: "train-uid", wantCount: 4,
	}, {
		name:      "another kind's",
		owners:    []metav1.OwnerReference{jobSetOwner},
		wantErr:   true,
		wantOwner: "jobset-uid", wantCount: 2, wantAdmit: true,
		wantEvents: []string{"Warning WorkloadTaken the Workload job-train is controlled by JobSet train, not by this Job; rename the Job or remove the Workload"},
	}, {
		name:      "an earlier Job's, the new Job finished",
		owners:    []metav1.OwnerReference{*metav1.NewControllerRef(earlier, batchv1.SchemeGroupVersion.WithKind("Job"))},
		finished:  true,
		wantOwner: "earlier-uid", wantCount: 2, wantAdmit: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stale := admittedWorkload(t, earlier)
			stale.OwnerReferences = tc.owners
			job := makeJob("train", nil)
			if tc.finished {
				job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			}
			e := newEnv(t, job, stale)
			err := e.reconcile(job)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile() = %v, want an error: %v", err, tc.wantErr)
			}
			wl := e.workload(WorkloadName("train"))
			got := struct {
				Owner    types.UID
				Count    int32
				Admitted bool
				Finished bool
			}{metav1.GetControllerOf(wl).UID, wl.Spec.PodSets[0].Count, wl.Status.Admission != nil, meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)}
			want := got
			want.Owner, want.Count, want.Admitted, want.Finished = tc.wantOwner, tc.wantCount, tc.wantAdmit, false
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Workload (-want,+got):\n%s", diff)
			}
			if j := e.job("train"); !ptr.Deref(j.Spec.Suspend, false) || j.Spec.Template.Labels[strata.WorkloadLabel] != "" {
				t.Error("the Job was started on a Workload it does not own")
			}
			if diff := cmp.Diff(tc.wantEvents, e.events()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReconcileCarriesDispatchMetadata: the Workload of a hub's copy
// carries the copy's dispatch labels and pinned flavor, whether it is
// created with them or existed without them; a Job without them leaves its
// Workload as it is.
func TestReconcileCarriesDispatchMetadata(t *testing.T) {
	dispatchLabels := map[string]string{
		strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "9f1e", strata.DispatchGenerationLabel: "2",
	}
	hubCopy := func() *batchv1.Job {
		job := makeJob("train", nil)
		for k, v := range dispatchLabels {
			job.Labels[k] = v
		}
		job.Annotations = map[string]string{strata.FlavorAnnotation: flavor.Name}
		return job
	}
	plain := func(wl *strata.Workload) *strata.Workload {
		wl.Labels, wl.Annotations = nil, nil
		return wl
	}
	type meta struct {
		Labels, Annotations map[string]string
		Admitted            bool
	}
	carried := meta{Labels: dispatchLabels, Annotations: map[string]string{strata.FlavorAnnotation: flavor.Name}}
	cases := map[string]struct {
		job *batchv1.Job
		// existing builds the Workload there is before the reconcile, if any.
		existing    func(t *testing.T, job *batchv1.Job) *strata.Workload
		want        meta
		wantWritten bool
		// wantFinal, when set, is the Workload's finalizers after it.
		wantFinal []string
	}{
		"created with them": {
			job:         hubCopy(),
			want:        carried,
			wantWritten: true,
		},
		"a waiting Workload without them gets them": {
			job: hubCopy(),
			existing: func(t *testing.T, job *batchv1.Job) *strata.Workload {
				wl := plain(admittedWorkload(t, job))
				wl.Status = strata.WorkloadStatus{}
				return wl
			},
			want:        carried,
			wantWritten: true,
		},
		"an admitted Workload without them gets them and keeps its admission": {
			job: func() *batchv1.Job {
				job := hubCopy()
				job.Spec.Suspend = ptr.To(false)
				job.Spec.Template.Labels = map[string]string{strata.WorkloadLabel: WorkloadName("train")}
				return job
			}(),
			existing: func(t *testing.T, job *batchv1.Job) *strata.Workload {
				return plain(admittedWorkload(t, job))
			},
			want:        meta{Labels: carried.Labels, Annotations: carried.Annotations, Admitted: true},
			wantWritten: true,
		},
		"a Workload with them is not written": {
			job: hubCopy(),
			existing: func(t *testing.T, job *batchv1.Job) *strata.Workload {
				wl := admittedWorkload(t, job)
				wl.Status = strata.WorkloadStatus{}
				wl.Finalizers = []string{strata.PodsGoneFinalizer}
				return wl
			},
			want: carried,
		},
		"a copy's Workload made without the finalizer (an earlier agent) gets it": {
			job: hubCopy(),
			existing: func(t *testing.T, job *batchv1.Job) *strata.Workload {
				wl := admittedWorkload(t, job)
				wl.Status = strata.WorkloadStatus{}
				return wl
			},
			want:        carried,
			wantFinal:   []string{strata.PodsGoneFinalizer},
			wantWritten: true,
		},
		"a Job of no hub: its Workload is not written": {
			job: makeJob("train", nil),
			existing: func(t *testing.T, job *batchv1.Job) *strata.Workload {
				wl := admittedWorkload(t, job)
				wl.Status = strata.WorkloadStatus{}
				return wl
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.job}
			var before string
			if tc.existing != nil {
				objs = append(objs, tc.existing(t, tc.job))
			}
			e := newEnv(t, objs...)
			if tc.existing != nil {
				before = e.workload(WorkloadName("train")).ResourceVersion
			}
			if err := e.reconcile(tc.job); err != nil {
				t.Fatal(err)
			}
			wl := e.workload(WorkloadName("train"))
			// The job's own labels are copied at creation too (for topology
			// spreading's selectors): here, its queue label.
			labels := maps.Clone(wl.Labels)
			delete(labels, strata.QueueNameLabel)
			got := meta{Labels: labels, Annotations: wl.Annotations, Admitted: wl.Status.Admission != nil}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Workload (-want,+got):\n%s", diff)
			}
			if written := wl.ResourceVersion != before; written != tc.wantWritten {
				t.Errorf("Workload written: %t, want %t", written, tc.wantWritten)
			}
			if tc.wantFinal != nil {
				if diff := cmp.Diff(tc.wantFinal, wl.Finalizers); diff != "" {
					t.Errorf("finalizers (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestReconcileGatedCopy: an admitted copy sent running with its pods
// gated is not written to; its Started event is recorded once per
// admission.
func TestReconcileGatedCopy(t *testing.T) {
	job := makeJob("train", nil)
	if !batchjob.Adapt(job).StartGated(WorkloadName("train")) {
		t.Fatal("StartGated() = false")
	}
	wl := admittedWorkload(t, job)
	e := newEnv(t, job, wl)
	before := e.job("train")
	for range 2 {
		if err := e.reconcile(job); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(before, e.job("train")); diff != "" {
		t.Errorf("the Job was written to (-before,+after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal Started Admitted by ClusterQueue " + queueName}, e.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	// Admitted anew (its admission's time changed): recorded again.
	admitted := e.workload(wl.Name)
	admitted.Status.Conditions[0].LastTransitionTime = metav1.NewTime(admitted.Status.Conditions[0].LastTransitionTime.Add(time.Minute))
	if err := e.client.Status().Update(context.Background(), admitted); err != nil {
		t.Fatal(err)
	}
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Normal Started Admitted by ClusterQueue " + queueName}, e.events()); diff != "" {
		t.Errorf("events after the new admission (-want,+got):\n%s", diff)
	}
}

// TestReconcileStopsAGatedCopy: a gated copy whose Workload was evicted
// is suspended, then its template loses only what the hub added (the gate
// and the Workload's labels): a node selector entry equal to a flavor's
// node label is the user's, and stays.
func TestReconcileStopsAGatedCopy(t *testing.T) {
	job := makeJob("train", nil)
	job.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "h100"} // flavor h100's node label
	if !batchjob.Adapt(job).StartGated(WorkloadName("train")) {
		t.Fatal("StartGated() = false")
	}
	wl := admittedWorkload(t, job)
	wl.Status.Admission = nil
	wl.Status.Conditions = []metav1.Condition{
		{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Preempted", LastTransitionTime: metav1.Now()},
		{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", LastTransitionTime: metav1.Now()},
	}
	e := newEnv(t, job, wl)
	for range 2 {
		if err := e.reconcile(job); err != nil {
			t.Fatal(err)
		}
	}
	got := e.job("train")
	if !ptr.Deref(got.Spec.Suspend, false) {
		t.Error("the evicted copy was not suspended")
	}
	want := map[string]string{"gpu": "h100"}
	if diff := cmp.Diff(want, got.Spec.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want,+got):\n%s", diff)
	}
	if len(got.Spec.Template.Spec.SchedulingGates) != 0 || got.Spec.Template.Labels[strata.WorkloadLabel] != "" {
		t.Errorf("the hub's gate and labels stay: gates %v, labels %v", got.Spec.Template.Spec.SchedulingGates, got.Spec.Template.Labels)
	}
}

// TestReconcileRestartsAJobReadmittedBeforeItStopped: a running Job whose
// Workload was evicted and admitted again before the Job was stopped
// (the scheduler's pass came first) has its pods where the old admission
// put them. It is stopped and started anew with the new admission, not
// left running on the old one.
func TestReconcileRestartsAJobReadmittedBeforeItStopped(t *testing.T) {
	job := makeJob("train", nil)
	wl := admittedWorkload(t, job)
	old := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC))
	wl.Status.Conditions[0].LastTransitionTime = old
	e := newEnv(t, job, wl)
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(e.job("train").Spec.Suspend, true) {
		t.Fatal("the admitted Job was not started")
	}
	// Evicted and admitted again, as the Job controller would see it
	// after both writes.
	readmitted := e.workload(WorkloadName("train"))
	readmitted.Status.Conditions[0].LastTransitionTime = metav1.NewTime(old.Add(time.Minute))
	if err := e.client.Status().Update(context.Background(), readmitted); err != nil {
		t.Fatal(err)
	}
	e.events()
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(e.job("train").Spec.Suspend, false) {
		t.Fatal("the Job still runs on the admission it lost")
	}
	for range 2 { // restore the template, then start with the new admission
		if err := e.reconcile(job); err != nil {
			t.Fatal(err)
		}
	}
	got := e.job("train")
	if ptr.Deref(got.Spec.Suspend, true) {
		t.Error("the Job was not started again")
	}
	if !startedWith(batchjob.Adapt(got), e.workload(WorkloadName("train"))) {
		t.Error("the Job was not started with the new admission")
	}
	if diff := cmp.Diff([]string{
		"Normal Stopped The Workload was evicted; the Job waits in LocalQueue training again",
		"Normal Started Admitted by ClusterQueue training",
	}, e.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// TestReconcileRequeuesAJobChangedAfterItsAdmission: a suspended Job whose
// pods changed after its admission (more of them) is not started on an
// admission that counts fewer: the admission is taken back and the
// Workload brought up to date, to be admitted again as the Job is now.
func TestReconcileRequeuesAJobChangedAfterItsAdmission(t *testing.T) {
	job := makeJob("train", nil)
	wl := admittedWorkload(t, job) // 4 pods
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](6), ptr.To[int32](6)
	e := newEnv(t, job, wl)
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(e.job("train").Spec.Suspend, false) {
		t.Fatal("the Job was started on an admission of 4 pods with 6")
	}
	got := e.workload(WorkloadName("train"))
	if got.Status.Admission != nil {
		t.Errorf("admission = %+v, want it taken back", got.Status.Admission)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, strata.WorkloadEvicted); c == nil || c.Reason != ReasonJobChanged {
		t.Errorf("Evicted condition = %+v, want reason %s", c, ReasonJobChanged)
	}
	if diff := cmp.Diff([]string{"Normal Requeued The Job changed after its admission (pod set main has 6 pods, its assignment 4); it waits in LocalQueue training again"}, e.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	// The next pass brings the Workload up to date.
	if err := e.reconcile(job); err != nil {
		t.Fatal(err)
	}
	if n := e.workload(WorkloadName("train")).Spec.PodSets[0].Count; n != 6 {
		t.Errorf("the Workload's pod set counts %d pods, want 6", n)
	}
}

// TestReconcileJobThatLeftItsQueue: a Job whose queue label was removed
// before it started is no longer Strata's: its Workload, which would wait
// in the queue or hold an admission's quota for nothing, is deleted. A
// started one keeps its Workload (the chart's policy keeps a running
// Job's label).
func TestReconcileJobThatLeftItsQueue(t *testing.T) {
	cases := map[string]struct {
		started     bool
		wantDeleted bool
		wantEvents  []string
	}{
		"admitted, not started": {wantDeleted: true, wantEvents: []string{
			"Normal LeftQueue The label strata.dev/queue-name was removed: the Job's Workload job-train is deleted, and Strata no longer admits the Job",
		}},
		"started": {started: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := makeJob("train", nil)
			wl := admittedWorkload(t, job)
			delete(job.Labels, strata.QueueNameLabel)
			if tc.started {
				job.Spec.Template.Labels = map[string]string{strata.WorkloadLabel: WorkloadName("train")}
				job.Spec.Suspend = ptr.To(false)
			}
			e := newEnv(t, job, wl)
			if err := e.reconcile(job); err != nil {
				t.Fatal(err)
			}
			err := e.client.Get(context.Background(), client.ObjectKeyFromObject(wl), &strata.Workload{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Errorf("Workload deleted: %t (%v), want %t", deleted, err, tc.wantDeleted)
			}
			if diff := cmp.Diff(tc.wantEvents, e.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}
