package testutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
)

func TestJobKindBuilders(t *testing.T) {
	queue := map[string]string{strata.QueueNameLabel: "lq"}
	ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack"}
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	gate := []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}}
	cases := map[string]struct {
		got, want any
	}{
		"Job": {
			got: MakeJob("j", "ns").UID("j-uid").Queue("lq").Parallelism(4).Completions(8).Indexed().Suspend(true).
				Image("fake").Request("cpu", "2").PodAnnotations(ann).Obj(),
			want: &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "j-uid", Labels: queue},
				Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](8), Suspend: ptr.To(true),
					CompletionMode: ptr.To(batchv1.IndexedCompletion),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Annotations: ann},
						Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
							Containers: []corev1.Container{{Name: "c", Image: "fake", Resources: cpu("2")}}},
					},
				},
			},
		},
		"Job without a queue, restart policy or pod annotations, its pod spec replaced": {
			got: MakeJob("j", "ns").Queue("").RestartPolicy("").PodAnnotations(nil).
				PodSpec(corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}).Obj(),
			want: &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"},
				Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}},
			},
		},
		"JobSet": {
			got: MakeJobSet("js", "ns").Queue("lq").ReplicatedJob(2, MakeJob("workers", "").Parallelism(4).Obj()).Obj(),
			want: &jobsetapi.JobSet{
				ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", Labels: queue},
				Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{{
					Name: "workers", Replicas: 2,
					Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Template: corev1.PodTemplateSpec{
						Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
					}}},
				}}},
			},
		},
		"MPIJob": {
			got: MakeMPIJob("pi", "ns").Queue("lq").SlotsPerWorker(1).RunLauncherAsWorker(true).Workers(3).Request("cpu", "1").
				LauncherAnnotations(ann).WorkerAnnotations(map[string]string{"w": "x"}).Obj(),
			want: &kubeflow.MPIJob{
				ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns", Labels: queue},
				Spec: kubeflow.MPIJobSpec{
					SlotsPerWorker: ptr.To[int32](1), RunLauncherAsWorker: ptr.To(true),
					MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
						kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Annotations: ann},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{
								Name: "mpi-launcher", Image: "mpioperator/mpi-pi:openmpi", Resources: cpu("1")}}},
						}},
						kubeflow.MPIReplicaTypeWorker: {Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"w": "x"}},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{
								Name: "mpi-worker", Image: "mpioperator/mpi-pi:openmpi", Resources: cpu("1")}}},
						}},
					},
				},
			},
		},
		"MPIJob with containers renamed": {
			got: MakeMPIJob("pi", "ns").ContainerName("c").Obj(),
			want: &kubeflow.MPIJob{
				ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"},
				Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
					kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mpioperator/mpi-pi:openmpi"}}}}},
					kubeflow.MPIReplicaTypeWorker: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mpioperator/mpi-pi:openmpi"}}}}},
				}},
			},
		},
		"LeaderWorkerSet": {
			got: MakeLeaderWorkerSet("l", "ns").Queue("lq").Replicas(2).Size(3).Defaulted().Gated().Image("x").Request("cpu", "1").
				PodLabel("app", "l").LeaderAnnotations(ann).WorkerAnnotations(map[string]string{"w": "x"}).Obj(),
			want: &lwsapi.LeaderWorkerSet{
				ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", Labels: queue},
				Spec: lwsapi.LeaderWorkerSetSpec{
					Replicas:        ptr.To[int32](2),
					StartupPolicy:   lwsapi.LeaderCreatedStartupPolicy,
					RolloutStrategy: lwsapi.RolloutStrategy{Type: lwsapi.RollingUpdateStrategyType},
					LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
						Size: ptr.To[int32](3),
						LeaderTemplate: &corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "l"}, Annotations: ann},
							Spec:       corev1.PodSpec{SchedulingGates: gate, Containers: []corev1.Container{{Name: "c", Image: "x", Resources: cpu("1")}}},
						},
						WorkerTemplate: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "l"}, Annotations: map[string]string{"w": "x"}},
							Spec:       corev1.PodSpec{SchedulingGates: gate, Containers: []corev1.Container{{Name: "c", Image: "x", Resources: cpu("1")}}},
						},
					},
				},
			},
		},
		"LeaderWorkerSet without a leader template": {
			got: MakeLeaderWorkerSet("l", "ns").NoLeader().LeaderAnnotations(ann).Obj(),
			want: &lwsapi.LeaderWorkerSet{
				ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"},
				Spec: lwsapi.LeaderWorkerSetSpec{LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "c", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53"}}}},
				}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("built object (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTemplatesDoNotShare: a kind's templates, and the maps given to
// them, are separate: changing one changes no other.
func TestTemplatesDoNotShare(t *testing.T) {
	ann := map[string]string{"a": "b"}
	l := MakeLeaderWorkerSet("l", "ns").Request("cpu", "1").LeaderAnnotations(ann).WorkerAnnotations(ann).Obj()
	lt := &l.Spec.LeaderWorkerTemplate
	lt.LeaderTemplate.Annotations["a"] = "changed"
	lt.LeaderTemplate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	if ann["a"] != "b" || lt.WorkerTemplate.Annotations["a"] != "b" || lt.WorkerTemplate.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Errorf("the leader's template shares with the workers' or the caller's map: %v, %v", ann, lt.WorkerTemplate)
	}
	m := MakeMPIJob("pi", "ns").LauncherAnnotations(ann).WorkerAnnotations(ann).Obj()
	m.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Annotations["a"] = "changed"
	if got := m.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Annotations["a"]; got != "b" {
		t.Errorf("the launcher's template shares the workers' annotations")
	}
}
