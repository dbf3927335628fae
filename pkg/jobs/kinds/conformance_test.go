package kinds_test

// The conformance test: what every registered kind must do and have, so
// that adding a kind is its package, its line in kinds.Registered, and
// what this test asks of the charts (docs/development.md, "Adding a
// workload kind"). A kind registered without a sample here fails.

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/workload"
)

// sample is an object of a kind as it stands on the hub, and the statuses
// its copy's run gives it.
type sample struct {
	// object is a queue-labelled object managed by the hub, as the hub
	// chart's admission policy leaves it, with what its API server sets.
	object func() client.Object
	// running sets the status of a run: pods or child jobs active.
	running func(client.Object)
	// finished sets a final status over running's; nil for a kind whose
	// objects never finish (a LeaderWorkerSet serves until deleted).
	finished func(client.Object)
}

// samples are one per registered kind, by kind name.
var samples = map[string]sample{
	"Job": {
		object: func() client.Object {
			return &batchv1.Job{ObjectMeta: hubMeta(), Spec: batchv1.JobSpec{
				ManagedBy: ptr.To(strata.ManagedByController), Suspend: ptr.To(false), TTLSecondsAfterFinished: ptr.To[int32](60),
				Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "uid-1"}},
				Template: template("main", false)}}
		},
		running: func(o client.Object) {
			o.(*batchv1.Job).Status = batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](2), StartTime: ptr.To(metav1.Unix(100, 0))}
		},
		finished: func(o client.Object) {
			st := &o.(*batchv1.Job).Status
			st.Active, st.Ready, st.Succeeded, st.CompletionTime = 0, ptr.To[int32](0), 2, ptr.To(metav1.Unix(200, 0))
			st.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		},
	},
	"JobSet": {
		object: func() client.Object {
			rj := func(name string, replicas int32) jobsetapi.ReplicatedJob {
				return jobsetapi.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), Template: template(name, false)}}}
			}
			return &jobsetapi.JobSet{ObjectMeta: hubMeta(), Spec: jobsetapi.JobSetSpec{
				ManagedBy: ptr.To(strata.ManagedByController), Suspend: ptr.To(false), TTLSecondsAfterFinished: ptr.To[int32](60),
				ReplicatedJobs: []jobsetapi.ReplicatedJob{rj("driver", 1), rj("workers", 2)}}}
		},
		running: func(o client.Object) {
			o.(*jobsetapi.JobSet).Status = jobsetapi.JobSetStatus{ReplicatedJobsStatus: []jobsetapi.ReplicatedJobStatus{
				{Name: "driver", Active: 1, Ready: 1}, {Name: "workers", Active: 2, Ready: 1, Succeeded: 1}}}
		},
		finished: func(o client.Object) {
			st := &o.(*jobsetapi.JobSet).Status
			st.TerminalState = string(jobsetapi.JobSetCompleted)
			st.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetCompleted), Status: metav1.ConditionTrue}}
		},
	},
	"MPIJob": {
		object: func() client.Object {
			return &kubeflow.MPIJob{ObjectMeta: hubMeta(), Spec: kubeflow.MPIJobSpec{
				RunPolicy: kubeflow.RunPolicy{ManagedBy: ptr.To(strata.ManagedByController), Suspend: ptr.To(false), TTLSecondsAfterFinished: ptr.To[int32](60)},
				MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
					kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: template("launcher", false)},
					kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](2), Template: template("worker", false)},
				}}}
		},
		running: func(o client.Object) {
			o.(*kubeflow.MPIJob).Status = kubeflow.JobStatus{StartTime: ptr.To(metav1.Unix(100, 0)), ReplicaStatuses: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{
				kubeflow.MPIReplicaTypeLauncher: {Active: 1}, kubeflow.MPIReplicaTypeWorker: {Active: 2}}}
		},
		finished: func(o client.Object) {
			st := &o.(*kubeflow.MPIJob).Status
			st.CompletionTime = ptr.To(metav1.Unix(200, 0))
			st.Conditions = []kubeflow.JobCondition{{Type: kubeflow.JobSucceeded, Status: corev1.ConditionTrue}}
		},
	},
	"LeaderWorkerSet": {
		object: func() client.Object {
			return &lwsapi.LeaderWorkerSet{ObjectMeta: hubMeta(), Spec: lwsapi.LeaderWorkerSetSpec{
				Replicas: ptr.To[int32](2),
				LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{Size: ptr.To[int32](3),
					LeaderTemplate: ptr.To(template("leader", true)), WorkerTemplate: template("worker", true)}}}
		},
		running: func(o client.Object) {
			o.(*lwsapi.LeaderWorkerSet).Status = lwsapi.LeaderWorkerSetStatus{Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2,
				Conditions: []metav1.Condition{{Type: string(lwsapi.LeaderWorkerSetAvailable), Status: metav1.ConditionTrue}}}
		},
	},
}

// hubMeta is a hub object's metadata: a queue label and an annotation of
// the user's, and what the API server and others set.
func hubMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ml", Name: "train",
		Labels:      map[string]string{strata.QueueNameLabel: "team-a"},
		Annotations: map[string]string{"example.com/note": "kept"},
		UID:         "uid-1", ResourceVersion: "42", Generation: 3, CreationTimestamp: metav1.Unix(10, 0),
		Finalizers:    []string{"example.com/finalizer"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// template is a pod template named after its pod set; gated, it carries
// the topology scheduling gate (the charts' admission policies put it in a
// LeaderWorkerSet's templates).
func template(name string, gated bool) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "example.com/" + name,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	if gated {
		t.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}}
	}
	return t
}

// registeredKind is a registered kind and its sample.
type registeredKind struct {
	jobs.Registration
	sample
}

// registered are the registered kinds with their samples.
func registered(t *testing.T) []registeredKind {
	t.Helper()
	var out []registeredKind
	for _, r := range kinds.Registered {
		s, ok := samples[r.Kind.GroupVersionKind().Kind]
		if !ok {
			t.Errorf("%s is registered without a sample in conformance_test.go: add one", r.Kind.GroupVersionKind())
			continue
		}
		out = append(out, registeredKind{r, s})
	}
	return out
}

// jobsOf are the jobs of a new sample object: the kind's job, and for a
// kind a worker admits as several jobs (GroupedWorkloads), each of those.
func (r registeredKind) jobsOf(t *testing.T) []jobs.Job {
	t.Helper()
	obj := r.object()
	j, ok := r.Kind.Adapt(obj)
	if !ok {
		t.Fatalf("%s does not adapt its own object %T", r.Kind.GroupVersionKind(), obj)
	}
	out := []jobs.Job{j}
	if g, ok := r.Kind.(jobs.GroupedWorkloads); ok {
		out = append(out, g.WorkerJobs(obj)...)
	}
	return out
}

// eachJob runs test for each of jobsOf's jobs, each of its own object,
// in subtests named after the kind and "hub", or the worker job's index.
func (r registeredKind) eachJob(t *testing.T, test func(t *testing.T, j jobs.Job, hub bool)) {
	for i := range r.jobsOf(t) {
		name := "hub"
		if i > 0 {
			name = "worker-job-" + strconv.Itoa(i-1)
		}
		t.Run(r.Kind.GroupVersionKind().Kind+"/"+name, func(t *testing.T) { test(t, r.jobsOf(t)[i], i == 0) })
	}
}

// TestConformanceRegistry: kinds.Hub is every registered kind, kinds.All
// those the agent's job reconciler runs, which it can suspend (a kind
// without suspension has a controller of its own on the agent); each has
// a scheme and names of its own on kubectl strata explain's command line.
func TestConformanceRegistry(t *testing.T) {
	var hub, all []jobs.Kind
	names := map[string]string{}
	for _, r := range registered(t) {
		gvk := r.Kind.GroupVersionKind()
		hub = append(hub, r.Kind)
		if r.AgentController == nil {
			all = append(all, r.Kind)
			if !suspendable(r.Kind, r.object()) {
				t.Errorf("%s cannot be suspended: it needs a controller of its own on the agent (AgentController)", gvk)
			}
		}
		if r.AddToScheme == nil {
			t.Errorf("%s: no AddToScheme", gvk)
		}
		for _, n := range r.Names() {
			if other, taken := names[n]; taken {
				t.Errorf("%s: name %q on the command line is %s's already", gvk, n, other)
			}
			names[n] = gvk.Kind
		}
		obj := r.Kind.NewObject()
		if _, ok := r.Kind.Adapt(obj); !ok {
			t.Errorf("%s: Adapt refuses NewObject's %T", gvk, obj)
		}
		if g, ok := r.Kind.(jobs.GroupedWorkloads); ok {
			// A worker's jobs are the Workloads the hub reads back.
			obj := r.object()
			var got []string
			for _, j := range g.WorkerJobs(obj) {
				got = append(got, j.Kind().WorkloadName(obj.GetName()))
			}
			if diff := cmp.Diff(g.WorkerWorkloads(obj), got); diff != "" || len(got) == 0 {
				t.Errorf("%s: the Workloads of WorkerJobs are not WorkerWorkloads (-WorkerWorkloads,+WorkerJobs'):\n%s", gvk, diff)
			}
		}
	}
	if !slices.Equal(kinds.Hub, hub) {
		t.Errorf("kinds.Hub = %v, want every registered kind %v", kinds.Hub, hub)
	}
	if !slices.Equal(kinds.All, all) {
		t.Errorf("kinds.All = %v, want the registered kinds without a controller of their own on the agent %v", kinds.All, all)
	}
	if len(kinds.All) == 0 || kinds.All[0].GroupVersionKind() != batchv1.SchemeGroupVersion.WithKind("Job") {
		t.Errorf("kinds.All = %v, want batch/v1 Job first", kinds.All)
	}
}

// TestConformanceScheme: every binary's scheme knows the kind and its
// list, and the kind lists its objects through a client of that scheme.
func TestConformanceScheme(t *testing.T) {
	s := scheme.New()
	for _, r := range registered(t) {
		gvk := r.Kind.GroupVersionKind()
		for _, kind := range []string{gvk.Kind, gvk.Kind + "List"} {
			if !s.Recognizes(gvk.GroupVersion().WithKind(kind)) {
				t.Errorf("pkg/scheme does not know %s %s", gvk.GroupVersion(), kind)
			}
		}
		// List reads the kind's objects through a client of that scheme.
		c := fake.NewClientBuilder().WithScheme(s).WithObjects(withoutServerFields(r.object())).Build()
		got, err := r.Kind.List(context.Background(), c)
		if err != nil || len(got) != 1 || got[0].Object().GetName() != "train" || got[0].Kind() != r.Kind {
			t.Errorf("%s: List() = %v, %v; want the one object, of the kind", gvk, got, err)
		}
	}
}

// withoutServerFields is obj as a client creates it.
func withoutServerFields(obj client.Object) client.Object {
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	return obj
}

// TestConformanceForWorker: a worker's copy is a new object of the kind,
// with the hub object's name, namespace, labels, annotations and spec,
// suspended and managed by the kind's own controller (or, for a kind
// without suspension, held by its templates' gate), without what the
// hub's API server set or the status, and sharing nothing with the hub
// object.
func TestConformanceForWorker(t *testing.T) {
	for _, r := range registered(t) {
		r.eachJob(t, func(t *testing.T, j jobs.Job, isHub bool) {
			if got := j.ManagedBy(); isHub && got != strata.ManagedByController {
				t.Fatalf("the sample is managed by %q, not by the hub", got)
			}
			r.running(j.Object())
			hub := j.Object().DeepCopyObject().(client.Object)
			c := j.ForWorker()
			obj := c.Object()
			if obj == j.Object() || c.Kind() != j.Kind() {
				t.Fatalf("ForWorker() = %T of %v, want a new object of the job's kind", obj, c.Kind())
			}
			if obj.GetName() != hub.GetName() || obj.GetNamespace() != hub.GetNamespace() {
				t.Errorf("ForWorker() is %s/%s, want %s/%s", obj.GetNamespace(), obj.GetName(), hub.GetNamespace(), hub.GetName())
			}
			for what, m := range map[string][2]map[string]string{"labels": {hub.GetLabels(), obj.GetLabels()}, "annotations": {hub.GetAnnotations(), obj.GetAnnotations()}} {
				for k, v := range m[0] {
					if m[1][k] != v {
						t.Errorf("ForWorker() %s: %s=%q, want the hub object's %q", what, k, m[1][k], v)
					}
				}
			}
			server := metav1.ObjectMeta{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(), Generation: obj.GetGeneration(),
				CreationTimestamp: obj.GetCreationTimestamp(), Finalizers: obj.GetFinalizers(), ManagedFields: obj.GetManagedFields(),
				OwnerReferences: obj.GetOwnerReferences(), DeletionTimestamp: obj.GetDeletionTimestamp()}
			if diff := cmp.Diff(metav1.ObjectMeta{}, server); diff != "" {
				t.Errorf("ForWorker() keeps what the hub's API server set (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(status(t, r.Kind.NewObject()), status(t, obj)); diff != "" {
				t.Errorf("ForWorker() has a status (-want,+got):\n%s", diff)
			}
			if suspendable(r.Kind, r.object()) {
				if !c.Suspended() || c.ManagedBy() != "" {
					t.Errorf("ForWorker(): suspended %t, managed by %q; want suspended, managed by the kind's own controller", c.Suspended(), c.ManagedBy())
				}
			} else {
				for k, tmpl := range c.Templates() {
					if !slices.ContainsFunc(tmpl.Spec.SchedulingGates, workload.IsTopologyGate) {
						t.Errorf("ForWorker(): template %d without the topology scheduling gate, which holds a kind without suspension", k)
					}
				}
			}
			// The copy shares nothing with the hub object.
			obj.SetLabels(setKey(obj.GetLabels()))
			obj.SetAnnotations(setKey(obj.GetAnnotations()))
			for _, tmpl := range c.Templates() {
				tmpl.Labels = setKey(tmpl.Labels)
			}
			if diff := cmp.Diff(hub, j.Object()); diff != "" {
				t.Errorf("changing the copy changed the hub object (-want,+got):\n%s", diff)
			}
		})
	}
}

// setKey sets a key in m, made when nil.
func setKey(m map[string]string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m["changed"] = "x"
	return m
}

// suspendable says whether the kind's objects can be suspended.
func suspendable(k jobs.Kind, obj client.Object) bool {
	j, _ := k.Adapt(obj)
	j.SetSuspended(true)
	return j.Suspended()
}

// status is obj's status, unstructured.
func status(t *testing.T, obj client.Object) any { return unstructured(t, obj)["status"] }

// spec is obj's spec, unstructured.
func spec(t *testing.T, obj client.Object) any { return unstructured(t, obj)["spec"] }

func unstructured(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConformanceMirrorStatus: the hub object takes its copy's status
// whole, once: mirrored again, nothing changes; its spec stays; a job of
// another kind is not mirrored.
func TestConformanceMirrorStatus(t *testing.T) {
	regs := registered(t)
	for _, r := range regs {
		r.eachJob(t, func(t *testing.T, j jobs.Job, _ bool) {
			c := j.ForWorker()
			r.running(c.Object())
			wantSpec := spec(t, j.Object())
			if !j.MirrorStatus(c) {
				t.Fatal("MirrorStatus() = false on a new status")
			}
			if diff := cmp.Diff(status(t, c.Object()), status(t, j.Object())); diff != "" {
				t.Errorf("status after MirrorStatus() (-copy's,+hub's):\n%s", diff)
			}
			before := j.Object().DeepCopyObject()
			if j.MirrorStatus(c) {
				t.Error("MirrorStatus() = true on the status it has")
			}
			if diff := cmp.Diff(before, j.Object()); diff != "" {
				t.Errorf("MirrorStatus() of the status it has changed the object (-before,+after):\n%s", diff)
			}
			if diff := cmp.Diff(wantSpec, spec(t, j.Object())); diff != "" {
				t.Errorf("MirrorStatus() changed the spec (-want,+got):\n%s", diff)
			}
			for _, other := range regs {
				if other.Kind.GroupVersionKind() == r.Kind.GroupVersionKind() {
					continue
				}
				o, _ := other.Kind.Adapt(other.object())
				other.running(o.Object())
				if j.MirrorStatus(o) {
					t.Errorf("MirrorStatus() of a %s = true", other.Kind.GroupVersionKind().Kind)
				}
			}
		})
	}
}

// TestConformanceClearRun: what a run taken back put on the status goes,
// once; a finished object keeps its status.
func TestConformanceClearRun(t *testing.T) {
	for _, r := range registered(t) {
		r.eachJob(t, func(t *testing.T, j jobs.Job, _ bool) {
			r.running(j.Object())
			wantSpec := spec(t, j.Object())
			if done, _ := j.Finished(); done {
				t.Fatal("Finished() = true while running")
			}
			if !j.ClearRun() {
				t.Error("ClearRun() = false on a running object")
			}
			if j.ClearRun() {
				t.Error("ClearRun() = true on a cleared object")
			}
			if diff := cmp.Diff(wantSpec, spec(t, j.Object())); diff != "" {
				t.Errorf("ClearRun() changed the spec (-want,+got):\n%s", diff)
			}
			if r.finished == nil {
				return
			}
			r.running(j.Object())
			r.finished(j.Object())
			if done, _ := j.Finished(); !done {
				t.Fatal("Finished() = false on a finished object")
			}
			before := j.Object().DeepCopyObject()
			if j.ClearRun() {
				t.Error("ClearRun() = true on a finished object")
			}
			if diff := cmp.Diff(before, j.Object()); diff != "" {
				t.Errorf("ClearRun() changed a finished object (-before,+after):\n%s", diff)
			}
		})
	}
}

// TestConformanceTemplates: the templates are the pod sets', in their
// order, and they are the object's own, changed in place.
func TestConformanceTemplates(t *testing.T) {
	for _, r := range registered(t) {
		r.eachJob(t, func(t *testing.T, j jobs.Job, _ bool) {
			podSets, errs := j.PodSets()
			templates := j.Templates()
			if len(errs) > 0 || len(podSets) == 0 || len(templates) != len(podSets) {
				t.Fatalf("%d templates for %d pod sets (errors: %v)", len(templates), len(podSets), errs)
			}
			for k, ps := range podSets {
				if !equality.Semantic.DeepEqual(ps.Template, *templates[k]) {
					t.Errorf("pod set %d (%s): template (-pod set's,+Templates()'s):\n%s", k, ps.Name, cmp.Diff(ps.Template, *templates[k]))
				}
			}
			// The object's templates, also those the pod sets do not name
			// (jobs.AllTemplates), are what the hub's informers make lean.
			all := jobs.ObjectTemplates(j)
			for k, tmpl := range templates {
				if !slices.Contains(all, tmpl) {
					t.Errorf("template %d is not among ObjectTemplates()", k)
				}
			}
			for _, tmpl := range templates {
				tmpl.Spec.NodeSelector = map[string]string{"flavor": "gpu"}
			}
			podSets, _ = j.PodSets()
			for k, ps := range podSets {
				if ps.Template.Spec.NodeSelector["flavor"] != "gpu" {
					t.Errorf("pod set %d (%s): a change through Templates() did not reach the object", k, ps.Name)
				}
			}
		})
	}
}

// chartDoc is what the test reads of a chart's YAML document: RBAC rules,
// and an admission policy's or binding's spec.
type chartDoc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Rules []rbacv1.PolicyRule `json:"rules"`
	Spec  struct {
		PolicyName string `json:"policyName"`
		ParamKind  *struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"paramKind"`
		ParamRef *struct {
			Name                    string                `json:"name"`
			Selector                *metav1.LabelSelector `json:"selector"`
			ParameterNotFoundAction string                `json:"parameterNotFoundAction"`
		} `json:"paramRef"`
		MatchConditions []struct {
			Name       string `json:"name"`
			Expression string `json:"expression"`
		} `json:"matchConditions"`
		MatchConstraints struct {
			ResourceRules []resourceRule `json:"resourceRules"`
		} `json:"matchConstraints"`
		MatchResources struct {
			ObjectSelector *metav1.LabelSelector `json:"objectSelector"`
		} `json:"matchResources"`
	} `json:"spec"`
}

// resourceRule is a rule of an admission policy's matchConstraints.
type resourceRule struct {
	APIGroups   []string `json:"apiGroups"`
	APIVersions []string `json:"apiVersions"`
	Operations  []string `json:"operations"`
	Resources   []string `json:"resources"`
}

var (
	// templateAction is a Helm template action.
	templateAction = regexp.MustCompile(`\{\{.*?\}\}`)
	// documentSeparator separates YAML documents.
	documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)
)

// chartDocs are the YAML documents of a chart's template, read as text:
// a line that is a template action alone (if, else, end, range) is left
// out, so that every branch is read; an action within a line stands for
// the value "X" ("name: {{ .Values.hubAccess.name }}-copies" is X-copies).
func chartDocs(t *testing.T, chart, file string) []chartDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", chart, "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(templateAction.ReplaceAllString(l, "")) == "" && strings.TrimSpace(l) != "" {
			continue
		}
		lines = append(lines, templateAction.ReplaceAllString(l, "X"))
	}
	var out []chartDoc
	for i, text := range documentSeparator.Split(strings.Join(lines, "\n"), -1) {
		var d chartDoc
		if err := yaml.Unmarshal([]byte(text), &d); err != nil {
			t.Fatalf("%s/templates/%s: document %d: %v", chart, file, i, err)
		}
		if d.Kind != "" {
			out = append(out, d)
		}
	}
	return out
}

// roleRules are the rules of the chart's role of that kind and name.
func roleRules(t *testing.T, chart, file, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, d := range chartDocs(t, chart, file) {
		if d.Kind == kind && d.Metadata.Name == name {
			return d.Rules
		}
	}
	t.Fatalf("%s/templates/%s: no %s %s", chart, file, kind, name)
	return nil
}

// allowed are the verbs rules allow on resource of group.
func allowed(rules []rbacv1.PolicyRule, group, resource string) []string {
	var out []string
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) {
			out = append(out, r.Verbs...)
		}
	}
	return out
}

// TestConformanceCharts: both charts carry every kind's RBAC, and the
// admission policy that holds a queue-labelled object when it is
// created: suspended or gated on a worker, managed by the hub (or gated)
// on the hub.
func TestConformanceCharts(t *testing.T) {
	type want struct {
		chart, file, kind, name string
		status                  bool // and the status subresource
		verbs                   []string
	}
	read, write := []string{"get", "list", "watch"}, []string{"get", "list", "watch", "update", "patch"}
	for _, r := range registered(t) {
		gvk := r.Kind.GroupVersionKind()
		res, group, _ := strings.Cut(jobs.Resource(r.Kind), ".")
		// The agent's job reconciler suspends and resumes the kinds it
		// runs; a kind with its own controller there needs to read only.
		agentVerbs := read
		if slices.Contains(kinds.All, r.Kind) {
			agentVerbs = write
		}
		for _, w := range []want{
			// The hub reads its jobs, writes their metadata and mirrors
			// their copies' status.
			{chart: "strata-hub", file: "rbac/role.yaml", kind: "ClusterRole", name: "strata-hub", verbs: write, status: true},
			{chart: "strata-agent", file: "rbac/role.yaml", kind: "ClusterRole", name: "strata-agent", verbs: agentVerbs},
			// The hub's identity on a worker follows the copies, and
			// creates and deletes them.
			{chart: "strata-agent", file: "hub-access.yaml", kind: "ClusterRole", name: "X", verbs: read},
			{chart: "strata-agent", file: "hub-access.yaml", kind: "ClusterRole", name: "X-copies", verbs: []string{"create", "delete"}},
		} {
			rules := roleRules(t, w.chart, w.file, w.kind, w.name)
			for _, sub := range []string{"", "/status"} {
				verbs := w.verbs
				if sub != "" {
					if !w.status {
						continue
					}
					verbs = []string{"get", "update", "patch"}
				}
				got := allowed(rules, group, res+sub)
				for _, v := range verbs {
					if !slices.Contains(got, v) {
						t.Errorf("%s: %s/templates/%s, %s %s: may not %s %s%s (of group %s)", gvk.Kind, w.chart, w.file, w.kind, w.name, v, res, sub, group)
					}
				}
			}
		}
		for _, chart := range []string{"strata-hub", "strata-agent"} {
			checkAdmissionPolicy(t, chart, gvk.Kind, group, gvk.Version, res)
		}
	}
}

// checkAdmissionPolicy checks that the chart's admission policies have
// one for objects of the resource created, bound to queue-labelled
// objects; one that queues an unlabelled object in its namespace's
// LocalQueue named "default" (Kueue's LocalQueue defaulting: a
// LocalQueue parameter named "default", bound to objects without the
// label); and one that gives an object without a priority-class label
// the WorkloadPriorityClass named "default" (Kueue's
// WorkloadPriorityClass defaulting).
func checkAdmissionPolicy(t *testing.T, chart, kind, group, version, res string) {
	t.Helper()
	docs := chartDocs(t, chart, "admission-policy.yaml")
	bound := func(p chartDoc, key string, op metav1.LabelSelectorOperator) (chartDoc, bool) {
		for _, b := range docs {
			if b.Kind != "MutatingAdmissionPolicyBinding" || b.Spec.PolicyName != p.Metadata.Name || b.Spec.MatchResources.ObjectSelector == nil {
				continue
			}
			if slices.ContainsFunc(b.Spec.MatchResources.ObjectSelector.MatchExpressions, func(e metav1.LabelSelectorRequirement) bool {
				return e.Key == key && e.Operator == op
			}) {
				return b, true
			}
		}
		return chartDoc{}, false
	}
	// defaults says whether p, bound to objects without key, takes the
	// object named "default" of kind as its parameter, and does nothing
	// when there is none: named in the binding's paramRef, or every
	// object of kind selected and the policy's match conditions keeping
	// the one named "default" (the charts' way: a named parameter missing
	// from the API server's cache is read from etcd at each admission).
	defaults := func(p chartDoc, key, kind string) bool {
		b, ok := bound(p, key, metav1.LabelSelectorOpDoesNotExist)
		if !ok || p.Spec.ParamKind == nil || p.Spec.ParamKind.Kind != kind || p.Spec.ParamKind.APIVersion != strata.GroupVersion.String() ||
			b.Spec.ParamRef == nil || b.Spec.ParamRef.ParameterNotFoundAction != "Allow" {
			return false
		}
		if b.Spec.ParamRef.Name == "default" {
			return true
		}
		sel := b.Spec.ParamRef.Selector
		everything := sel != nil && len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
		return b.Spec.ParamRef.Name == "" && everything && slices.ContainsFunc(p.Spec.MatchConditions, func(c struct {
			Name       string `json:"name"`
			Expression string `json:"expression"`
		}) bool {
			return strings.Join(strings.Fields(c.Expression), " ") == "params.metadata.name == 'default'"
		})
	}
	var labelled, defaulting, classDefaulting bool
	for _, p := range docs {
		if p.Kind != "MutatingAdmissionPolicy" {
			continue
		}
		matches := slices.ContainsFunc(p.Spec.MatchConstraints.ResourceRules, func(rr resourceRule) bool {
			return slices.Contains(rr.APIGroups, group) && slices.Contains(rr.APIVersions, version) &&
				slices.Contains(rr.Operations, "CREATE") && slices.Contains(rr.Resources, res)
		})
		if !matches {
			continue
		}
		if _, ok := bound(p, strata.QueueNameLabel, metav1.LabelSelectorOpExists); ok {
			labelled = true
		}
		defaulting = defaulting || defaults(p, strata.QueueNameLabel, "LocalQueue")
		classDefaulting = classDefaulting || defaults(p, strata.PriorityClassLabel, "WorkloadPriorityClass")
	}
	if !labelled {
		t.Errorf("%s: %s/templates/admission-policy.yaml: no MutatingAdmissionPolicy for %s.%s/%s on CREATE bound to objects labelled %s", kind, chart, res, group, version, strata.QueueNameLabel)
	}
	if !defaulting {
		t.Errorf("%s: %s/templates/admission-policy.yaml: no MutatingAdmissionPolicy for %s.%s/%s on CREATE that queues objects without %s in the LocalQueue named default (paramKind LocalQueue, paramRef default, parameterNotFoundAction Allow)",
			kind, chart, res, group, version, strata.QueueNameLabel)
	}
	if !classDefaulting {
		t.Errorf("%s: %s/templates/admission-policy.yaml: no MutatingAdmissionPolicy for %s.%s/%s on CREATE that labels objects without %s with the WorkloadPriorityClass named default (paramKind WorkloadPriorityClass, paramRef default, parameterNotFoundAction Allow)",
			kind, chart, res, group, version, strata.PriorityClassLabel)
	}
}
