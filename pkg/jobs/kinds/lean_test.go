package kinds_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// richTemplate is a pod template with everything a real one carries
// besides what placement reads: images, commands, environment, volumes,
// probes, labels; and all that placement reads: a sidecar, an init
// container, overhead, pod-level resources, a node selector, node and pod
// affinity, tolerations, a priority class, a scheduling gate.
func richTemplate(annotations map[string]string, gpus string) corev1.PodTemplateSpec {
	res := func(cpu, gpu string) corev1.ResourceRequirements {
		r := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
		if gpu != "" {
			r["nvidia.com/gpu"] = resource.MustParse(gpu)
		}
		return corev1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train", "controller-uid": "0123"}, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:     corev1.RestartPolicyNever,
			PriorityClassName: "high",
			NodeSelector:      map[string]string{"gpu": "h100"},
			Tolerations:       []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			SchedulingGates:   []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}},
			Overhead:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
				}}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}},
			},
			InitContainers: []corev1.Container{
				{Name: "fetch", Image: "busybox", Command: []string{"sh", "-c", "fetch"}, Resources: res("4", "")},
				{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: res("500m", "")},
			},
			Containers: []corev1.Container{{
				Name: "train", Image: "registry.example/train:v1", Command: []string{"python", "train.py"},
				Env:            []corev1.EnvVar{{Name: "EPOCHS", Value: "90"}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources:      res("8", gpus),
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// TestHubTransform: a job of every hub kind, and its Workload, made lean
// by the hub's informers give the hub exactly what the whole job gives:
// the same Workload (lean), the same errors, the same placement shape
// and quota requests, the same suspension and management; and the
// transform of a lean object changes nothing.
func TestHubTransform(t *testing.T) {
	required := map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack"}
	preferred := map[string]string{strata.PodSetPreferredTopologyAnnotation: "block", "team": "a"}
	invalid := map[string]string{strata.PodSetRequiredTopologyAnnotation: "rack", strata.PodSetPreferredTopologyAnnotation: "block"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{strata.QueueNameLabel: "lq"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	}
	batch := func(name string, ann map[string]string, mode batchv1.CompletionMode) client.Object {
		return &batchv1.Job{ObjectMeta: meta(name), Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), CompletionMode: ptr.To(mode), Suspend: ptr.To(true),
			ManagedBy: ptr.To(strata.ManagedByController), Template: richTemplate(ann, "8"),
		}}
	}
	cases := map[string]client.Object{
		"Job, rack required":               batch("job", required, batchv1.NonIndexedCompletion),
		"Indexed Job, block preferred":     batch("indexed", preferred, batchv1.IndexedCompletion),
		"Job with invalid annotations":     batch("invalid", invalid, batchv1.NonIndexedCompletion),
		"Job without topology annotations": batch("plain", nil, batchv1.NonIndexedCompletion),
		"JobSet of a leader and workers": &jobsetapi.JobSet{ObjectMeta: meta("js"), Spec: jobsetapi.JobSetSpec{
			ManagedBy: ptr.To(strata.ManagedByController),
			ReplicatedJobs: []jobsetapi.ReplicatedJob{
				{Name: "leader", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: richTemplate(required, "")}}},
				{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Template: richTemplate(required, "8")}}},
			},
		}},
		"MPIJob": &kubeflow.MPIJob{ObjectMeta: meta("mpi"), Spec: kubeflow.MPIJobSpec{
			RunPolicy: kubeflow.RunPolicy{ManagedBy: ptr.To(strata.ManagedByController), Suspend: ptr.To(true)},
			MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: richTemplate(preferred, "")},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](8), Template: richTemplate(preferred, "8")},
			},
		}},
		"LeaderWorkerSet of one pod per group": &lwsapi.LeaderWorkerSet{ObjectMeta: meta("lws1"), Spec: lwsapi.LeaderWorkerSetSpec{
			Replicas: ptr.To[int32](2),
			LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
				Size: ptr.To[int32](1), LeaderTemplate: ptr.To(richTemplate(required, "8")), WorkerTemplate: richTemplate(required, "8"),
			},
		}},
		"LeaderWorkerSet": &lwsapi.LeaderWorkerSet{ObjectMeta: meta("lws"), Spec: lwsapi.LeaderWorkerSetSpec{
			Replicas: ptr.To[int32](3),
			LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{
				Size: ptr.To[int32](4), LeaderTemplate: ptr.To(richTemplate(required, "")), WorkerTemplate: richTemplate(required, "8"),
			},
		}},
	}
	transform := kinds.HubTransform()
	for name, full := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := transform(full.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			lean := out.(client.Object)
			if len(lean.GetManagedFields()) != 0 {
				t.Errorf("managedFields kept: %v", lean.GetManagedFields())
			}
			wholeJob, ok := jobs.AdaptAny(kinds.Hub, full)
			if !ok {
				t.Fatalf("%T is no hub kind", full)
			}
			leanJob, _ := jobs.AdaptAny(kinds.Hub, lean)
			for _, tmpl := range leanJob.Templates() {
				if c := tmpl.Spec.Containers[0]; c.Image != "" || len(c.Env) > 0 || len(tmpl.Spec.Volumes) > 0 || len(tmpl.Labels) > 0 {
					t.Errorf("a lean template keeps what placement does not read: %+v", tmpl)
				}
			}

			if l, ok := lean.(*lwsapi.LeaderWorkerSet); ok && l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Image != "" {
				t.Errorf("the workers' template of a LeaderWorkerSet is not lean")
			}

			want, wantErrs := intake.DesiredWorkload(wholeJob, tas.Options{})
			workload.LeanWorkload(want)
			got, gotErrs := intake.DesiredWorkload(leanJob, tas.Options{})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Workload of the lean job (-whole, leaned +lean):\n%s", diff)
			}
			if diff := cmp.Diff(wantErrs.ToAggregate(), gotErrs.ToAggregate(), cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
				t.Errorf("errors (-whole +lean):\n%s", diff)
			}
			whole, _ := intake.DesiredWorkload(wholeJob, tas.Options{})
			if diff := cmp.Diff(placement.Shape(whole), placement.Shape(got)); diff != "" {
				t.Errorf("shape (-whole +lean):\n%s", diff)
			}
			if diff := cmp.Diff(queue.WorkloadRequests(whole), queue.WorkloadRequests(got)); diff != "" {
				t.Errorf("quota requests (-whole +lean):\n%s", diff)
			}
			if whole.Spec.PriorityClassName != got.Spec.PriorityClassName {
				t.Errorf("priority class %q, lean %q", whole.Spec.PriorityClassName, got.Spec.PriorityClassName)
			}
			if wholeJob.Suspended() != leanJob.Suspended() || wholeJob.ManagedBy() != leanJob.ManagedBy() {
				t.Errorf("suspended %v, managed by %q; lean: %v, %q", wholeJob.Suspended(), wholeJob.ManagedBy(), leanJob.Suspended(), leanJob.ManagedBy())
			}

			// The hub Workload of the whole job, as the hub's informer
			// keeps it: what the lean job's intake wants.
			wl := whole.DeepCopy()
			wl.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "strata-hub"}}
			cached, err := transform(wl)
			if err != nil {
				t.Fatal(err)
			}
			cached.(*strata.Workload).ManagedFields = nil
			if diff := cmp.Diff(got, cached); diff != "" {
				t.Errorf("hub Workload as cached (-wanted by intake +cached):\n%s", diff)
			}

			again, err := transform(lean.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(lean, again); diff != "" {
				t.Errorf("transform of a lean object changed it:\n%s", diff)
			}
		})
	}
}
