package mpijob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/testutil"
)

const rack = "cloud.provider.com/topology-rack"

// mpiJob is KEP-2724's "MPIJob with runLauncherAsWorker" example: one
// launcher, workers replicas, with the given template annotations.
func mpiJob(asWorker bool, workers int32, launcherAnn, workerAnn map[string]string) *kubeflow.MPIJob {
	return testutil.MakeMPIJob("pi", "ml").SlotsPerWorker(1).RunLauncherAsWorker(asWorker).Workers(workers).
		LauncherAnnotations(launcherAnn).WorkerAnnotations(workerAnn).Obj()
}

func TestPodSets(t *testing.T) {
	required := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack}
	grouped := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack, strata.PodSetGroupNameAnnotation: "mpi"}
	cases := map[string]struct {
		job  *kubeflow.MPIJob
		want map[string]*strata.PodSetTopologyRequest // by pod set name
		errs []string
	}{
		"runLauncherAsWorker: workers' indexes start at 1 (KEP-2724)": {
			job: mpiJob(true, 2, required, required),
			want: map[string]*strata.PodSetTopologyRequest{
				Launcher: {Required: ptr.To(rack)},
				Worker:   {Required: ptr.To(rack), PodIndexLabel: ptr.To(ReplicaIndexLabel), PodIndexOffset: ptr.To[int32](1)},
			},
		},
		"a separate launcher: workers' indexes start at 0": {
			job: mpiJob(false, 2, required, required),
			want: map[string]*strata.PodSetTopologyRequest{
				Launcher: {Required: ptr.To(rack)},
				Worker:   {Required: ptr.To(rack), PodIndexLabel: ptr.To(ReplicaIndexLabel)},
			},
		},
		"a pod set group leaves offsets to the group": {
			job: mpiJob(true, 2, grouped, grouped),
			want: map[string]*strata.PodSetTopologyRequest{
				Launcher: {Required: ptr.To(rack), PodSetGroupName: ptr.To("mpi")},
				Worker:   {Required: ptr.To(rack), PodIndexLabel: ptr.To(ReplicaIndexLabel), PodSetGroupName: ptr.To("mpi")},
			},
		},
		"grouped, a separate launcher: the workers' offset is 0, not the group's": {
			job: mpiJob(false, 2, grouped, grouped),
			want: map[string]*strata.PodSetTopologyRequest{
				Launcher: {Required: ptr.To(rack), PodSetGroupName: ptr.To("mpi")},
				Worker:   {Required: ptr.To(rack), PodIndexLabel: ptr.To(ReplicaIndexLabel), PodIndexOffset: ptr.To[int32](0), PodSetGroupName: ptr.To("mpi")},
			},
		},
		"no topology annotations": {
			job:  mpiJob(true, 2, nil, nil),
			want: map[string]*strata.PodSetTopologyRequest{Launcher: nil, Worker: nil},
		},
		"an invalid annotation is an error pointing into the replica spec": {
			job:  mpiJob(false, 2, nil, map[string]string{strata.PodSetSliceSizeAnnotation: "x", strata.PodSetSliceRequiredTopologyAnnotation: rack}),
			want: map[string]*strata.PodSetTopologyRequest{Launcher: nil, Worker: nil},
			errs: []string{"spec.mpiReplicaSpecs[Worker].template.metadata.annotations[strata.dev/podset-slice-size]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			podSets, errs := Adapt(tc.job).PodSets()
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Field)
			}
			if diff := cmp.Diff(tc.errs, gotErrs); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			if len(podSets) != 2 || podSets[0].Name != Launcher || podSets[1].Name != Worker {
				t.Fatalf("pod sets %v: want launcher, worker", podSets)
			}
			if podSets[0].Count != 1 || podSets[1].Count != 2 {
				t.Errorf("counts %d, %d: want 1, 2", podSets[0].Count, podSets[1].Count)
			}
			got := map[string]*strata.PodSetTopologyRequest{}
			for _, ps := range podSets {
				got[ps.Name] = ps.TopologyRequest
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("topology requests (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTemplatesFollowPodSets: an admission changes the templates in the
// order of the pod sets, whatever the map's order.
func TestTemplatesFollowPodSets(t *testing.T) {
	j := Adapt(mpiJob(true, 3, nil, nil))
	tmpls := j.Templates()
	if len(tmpls) != 2 || tmpls[0].Spec.Containers[0].Name != "mpi-launcher" || tmpls[1].Spec.Containers[0].Name != "mpi-worker" {
		t.Fatalf("templates %v: want the launcher's, then the workers'", tmpls)
	}
	tmpls[1].Spec.NodeSelector = map[string]string{"pool": "a"}
	if got := j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Spec.NodeSelector; got["pool"] != "a" {
		t.Errorf("the worker template was not changed in place: %v", got)
	}
}

func TestSuspendAndForWorker(t *testing.T) {
	mj := mpiJob(true, 2, nil, nil)
	mj.Labels = map[string]string{strata.QueueNameLabel: "q"}
	mj.Spec.RunPolicy = kubeflow.RunPolicy{ManagedBy: ptr.To("strata.dev/hub"), TTLSecondsAfterFinished: ptr.To[int32](60), BackoffLimit: ptr.To[int32](3)}
	j := Adapt(mj)
	if j.Suspended() || j.TemplatesMutable() {
		t.Errorf("a job without runPolicy.suspend reads as suspended")
	}
	j.SetSuspended(true)
	if !ptr.Deref(mj.Spec.RunPolicy.Suspend, false) || !j.TemplatesMutable() {
		t.Errorf("SetSuspended(true) did not set runPolicy.suspend")
	}
	// Suspended, but the operator has not stopped the workers yet.
	mj.Status.ReplicaStatuses = map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{kubeflow.MPIReplicaTypeWorker: {Active: 2}}
	if j.TemplatesMutable() {
		t.Errorf("suspended with active workers: TemplatesMutable() true")
	}
	mj.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Active = 0
	if !j.TemplatesMutable() {
		t.Errorf("suspended, no active pod: TemplatesMutable() false")
	}
	mj.Status.ReplicaStatuses = nil
	if j.ManagedBy() != "strata.dev/hub" {
		t.Errorf("ManagedBy = %q", j.ManagedBy())
	}
	j.SetSuspended(false)
	w := j.ForWorker().(MPIJob)
	want := kubeflow.RunPolicy{Suspend: ptr.To(true), BackoffLimit: ptr.To[int32](3)}
	if diff := cmp.Diff(want, w.Spec.RunPolicy); diff != "" {
		t.Errorf("the worker's runPolicy (-want,+got):\n%s", diff)
	}
	if w.Labels[strata.QueueNameLabel] != "q" || w.Name != "pi" || w.Namespace != "ml" {
		t.Errorf("the worker's copy lost its identity: %v", w.ObjectMeta)
	}
	if mj.Spec.RunPolicy.ManagedBy == nil {
		t.Errorf("ForWorker changed the hub's object")
	}
}

func TestStatus(t *testing.T) {
	cond := func(t kubeflow.JobConditionType) kubeflow.JobCondition {
		return kubeflow.JobCondition{Type: t, Status: corev1.ConditionTrue}
	}
	running := kubeflow.JobStatus{Conditions: []kubeflow.JobCondition{cond(kubeflow.JobCreated), cond(kubeflow.JobRunning)},
		ReplicaStatuses: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{kubeflow.MPIReplicaTypeWorker: {Active: 2}, kubeflow.MPIReplicaTypeLauncher: {Active: 1}}}
	hub := Adapt(mpiJob(true, 2, nil, nil))
	copyJob := Adapt(mpiJob(true, 2, nil, nil))
	copyJob.Status = *running.DeepCopy()
	if !hub.MirrorStatus(copyJob) || hub.MirrorStatus(copyJob) {
		t.Errorf("MirrorStatus: want a change once, then none")
	}
	if done, _ := hub.Finished(); done {
		t.Errorf("a running job reads as finished")
	}
	if !hub.ClearRun() || hub.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Active != 0 || hub.ClearRun() {
		t.Errorf("ClearRun: want the active pods zeroed once")
	}
	for _, c := range hub.Status.Conditions {
		if c.Type == kubeflow.JobRunning && (c.Status != corev1.ConditionFalse || c.Reason != RunTakenBackReason) {
			t.Errorf("ClearRun: the Running condition is %s (%s), want False (%s)", c.Status, c.Reason, RunTakenBackReason)
		}
	}
	for ct, want := range map[kubeflow.JobConditionType]string{kubeflow.JobSucceeded: "Succeeded", kubeflow.JobFailed: "Failed"} {
		j := Adapt(mpiJob(true, 2, nil, nil))
		j.Status = *running.DeepCopy()
		j.Status.Conditions = append(j.Status.Conditions, cond(ct))
		if done, how := j.Finished(); !done || how != want {
			t.Errorf("%s: Finished = %v, %q", ct, done, how)
		}
		if j.ClearRun() {
			t.Errorf("%s: ClearRun changed a finished job", ct)
		}
	}
}

// TestPriorityClass: as in Kueue, spec.runPolicy.schedulingPolicy's
// priorityClass comes before the templates', and a WorkloadPriorityClass
// label before both.
func TestPriorityClass(t *testing.T) {
	mj := mpiJob(false, 2, nil, nil)
	mj.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Spec.PriorityClassName = "low"
	mj.Spec.RunPolicy.SchedulingPolicy = &kubeflow.SchedulingPolicy{PriorityClass: "high"}
	mj.Labels = map[string]string{strata.QueueNameLabel: "q"}
	wl, errs := jobs.WorkloadFor(Adapt(mj))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if wl.Spec.PriorityClassName != "high" || wl.Spec.PriorityClassSource != strata.PodPriorityClassSource {
		t.Errorf("schedulingPolicy.priorityClass high: the Workload's class is %q (%s)", wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource)
	}
	mj.Labels[strata.PriorityClassLabel] = "urgent"
	if wl, _ = jobs.WorkloadFor(Adapt(mj)); wl.Spec.PriorityClassName != "urgent" || wl.Spec.PriorityClassSource != strata.WorkloadPriorityClassSource {
		t.Errorf("a WorkloadPriorityClass label: the Workload's class is %q (%s)", wl.Spec.PriorityClassName, wl.Spec.PriorityClassSource)
	}
}
