package ungater

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

const (
	hostLabel = strata.HostnameLabel
	rackLabel = "example.com/rack"
)

// pod is a pod of pod set "main": gated unless host is set (then ungated
// to that host); index < 0 means no completion index label.
func pod(name string, index int, host string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{strata.PodSetLabel: "main"}}}
	if index >= 0 {
		p.Labels[strata.JobCompletionIndexLabel] = strconv.Itoa(index)
	}
	if host == "" {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: strata.TopologySchedulingGate}}
	} else {
		p.Spec.NodeSelector = map[string]string{hostLabel: host}
	}
	return p
}

func with(p corev1.Pod, change func(*corev1.Pod)) corev1.Pod {
	change(&p)
	return p
}

func TestPlan(t *testing.T) {
	indexed := &strata.PodSet{Name: "main", Count: 4, TopologyRequest: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(strata.JobCompletionIndexLabel)}}
	unindexed := &strata.PodSet{Name: "main", Count: 4}
	offset := &strata.PodSet{Name: "main", Count: 4, TopologyRequest: &strata.PodSetTopologyRequest{
		PodIndexLabel: ptr.To(strata.JobCompletionIndexLabel), PodIndexOffset: ptr.To[int32](10)}}
	// Ranks 0-1 on h1, 2-3 on h2.
	a := &tas.Assignment{Levels: []string{hostLabel}, Domains: []tas.DomainAssignment{{Values: []string{"h1"}, Count: 2}, {Values: []string{"h2"}, Count: 2}}}

	cases := map[string]struct {
		ps      *strata.PodSet
		pods    []corev1.Pod
		exp     map[types.UID]placed
		want    map[string]string // pod -> host it is released to
		wantExp map[types.UID]placed
	}{
		"indexed pods go to the domain of their rank": {
			ps:   indexed,
			pods: []corev1.Pod{pod("p3", 3, ""), pod("p0", 0, ""), pod("p2", 2, ""), pod("p1", 1, "")},
			want: map[string]string{"p0": "h1", "p1": "h1", "p2": "h2", "p3": "h2"},
		},
		"the index offset is taken off": {
			ps:   offset,
			pods: []corev1.Pod{pod("p10", 10, ""), pod("p13", 13, "")},
			want: map[string]string{"p10": "h1", "p13": "h2"},
		},
		"pods without an index fill the domains in order": {
			ps:   unindexed,
			pods: []corev1.Pod{pod("b", -1, ""), pod("a", -1, ""), pod("c", -1, "")},
			want: map[string]string{"a": "h1", "b": "h1", "c": "h2"},
		},
		"never more pods than a domain's count: an extra pod waits": {
			ps:   unindexed,
			pods: []corev1.Pod{pod("a", -1, "h1"), pod("b", -1, "h1"), pod("c", -1, "h2"), pod("d", -1, "h2"), pod("e", -1, "")},
			want: map[string]string{},
		},
		"a recreated pod takes the slot its finished predecessor left": {
			ps: indexed,
			pods: []corev1.Pod{
				pod("p0", 0, "h1"), with(pod("p1-old", 1, "h1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
				pod("p1", 1, ""), pod("p2", 2, "h2"), pod("p3", 3, "h2"),
			},
			want: map[string]string{"p1": "h1"},
		},
		"a pod being deleted frees its slot": {
			ps: indexed,
			pods: []corev1.Pod{
				with(pod("p0-old", 0, "h1"), func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }),
				pod("p0", 0, ""), pod("p1", 1, "h1"),
			},
			want: map[string]string{"p0": "h1"},
		},
		"pods this agent ungated count even while the cache still shows them gated": {
			ps:      unindexed,
			pods:    []corev1.Pod{pod("a", -1, ""), pod("b", -1, ""), pod("c", -1, ""), pod("d", -1, ""), pod("e", -1, "")},
			exp:     map[types.UID]placed{"a": {podSet: "main", domain: "h1"}, "b": {podSet: "main", domain: "h1"}, "c": {podSet: "main", domain: "h2"}},
			want:    map[string]string{"d": "h2"},
			wantExp: map[types.UID]placed{"a": {podSet: "main", domain: "h1"}, "b": {podSet: "main", domain: "h1"}, "c": {podSet: "main", domain: "h2"}},
		},
		"a pod whose patch timed out counts in its domain and is patched there again": {
			ps:      unindexed,
			pods:    []corev1.Pod{pod("a", -1, ""), pod("b", -1, ""), pod("c", -1, ""), pod("d", -1, ""), pod("e", -1, "")},
			exp:     map[types.UID]placed{"a": {podSet: "main", domain: "h1", uncertain: true}, "b": {podSet: "main", domain: "h1"}, "c": {podSet: "main", domain: "h2"}},
			want:    map[string]string{"a": "h1", "d": "h2"},
			wantExp: map[types.UID]placed{"a": {podSet: "main", domain: "h1", uncertain: true}, "b": {podSet: "main", domain: "h1"}, "c": {podSet: "main", domain: "h2"}},
		},
		"expectations are dropped once the cache shows the pod ungated, or it is gone": {
			ps:      unindexed,
			pods:    []corev1.Pod{pod("a", -1, "h1"), with(pod("b", -1, "h1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pod("c", -1, "")},
			exp:     map[types.UID]placed{"a": {podSet: "main", domain: "h1"}, "b": {podSet: "main", domain: "h1"}},
			want:    map[string]string{"c": "h1"},
			wantExp: map[types.UID]placed{},
		},
		"indexes past the assignment fill the free slots after the covered ranks": {
			// An Indexed Job with completions 6 and parallelism 4: ranks 4
			// and 5 come after their predecessors finished.
			ps: indexed,
			pods: []corev1.Pod{
				with(pod("p0", 0, "h1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				pod("p5", 5, ""), pod("p4", 4, ""), pod("p1", 1, "h1"), pod("p2", 2, "h2"),
				with(pod("p3", 3, "h2"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			},
			want: map[string]string{"p4": "h1", "p5": "h2"},
		},
		"an index below the offset waits for the covered ranks": {
			ps:   offset,
			pods: []corev1.Pod{pod("p9", 9, ""), pod("p10", 10, ""), pod("p11", 11, ""), pod("p12", 12, "")},
			want: map[string]string{"p10": "h1", "p11": "h1", "p12": "h2", "p9": "h2"},
		},
		"expectations for a domain hot swap replaced no longer count": {
			ps:      unindexed,
			pods:    []corev1.Pod{pod("a", -1, ""), pod("b", -1, ""), pod("c", -1, "")},
			exp:     map[types.UID]placed{"a": {podSet: "main", domain: "h-failed"}},
			want:    map[string]string{"b": "h1", "c": "h1"},
			wantExp: map[types.UID]placed{"a": {podSet: "main", domain: "h-failed"}},
		},
		"a release of unknown outcome to a domain hot swap replaced: placed again": {
			ps:      unindexed,
			pods:    []corev1.Pod{pod("a", -1, ""), pod("b", -1, ""), pod("c", -1, "")},
			exp:     map[types.UID]placed{"a": {podSet: "main", domain: "h-failed", uncertain: true}},
			want:    map[string]string{"a": "h1", "b": "h1", "c": "h2"},
			wantExp: map[types.UID]placed{},
		},
		"expectations of other pod sets are kept": {
			ps:      unindexed,
			pods:    []corev1.Pod{with(pod("w", -1, "h1"), func(p *corev1.Pod) { p.Labels[strata.PodSetLabel] = "workers" })},
			exp:     map[types.UID]placed{"w": {podSet: "workers", domain: "h1"}},
			want:    map[string]string{},
			wantExp: map[types.UID]placed{"w": {podSet: "workers", domain: "h1"}},
		},
		"pods of other pod sets are not touched": {
			ps:   unindexed,
			pods: []corev1.Pod{with(pod("w", -1, ""), func(p *corev1.Pod) { p.Labels[strata.PodSetLabel] = "workers" })},
			want: map[string]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for _, rel := range plan(tc.ps, a, tc.pods, tc.exp) {
				got[rel.pod.Name] = a.Domains[rel.domain].Values[0]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan() (-want,+got):\n%s", diff)
			}
			if tc.wantExp != nil {
				if diff := cmp.Diff(tc.wantExp, tc.exp, cmp.AllowUnexported(placed{})); diff != "" {
					t.Errorf("expectations after plan() (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestUngateUnknownOutcome: a patch that timed out may have landed, so its
// pod counts in its domain; a refused one does not.
func TestUngateUnknownOutcome(t *testing.T) {
	a := &tas.Assignment{Levels: []string{hostLabel}, Domains: []tas.DomainAssignment{{Values: []string{"h1"}, Count: 1}, {Values: []string{"h2"}, Count: 1}}}
	ps := &strata.PodSet{Name: "main", Count: 2}
	for name, tc := range map[string]struct {
		err  error
		want map[types.UID]placed
	}{
		"timed out": {err: apierrors.NewTimeoutError("slow", 1), want: map[types.UID]placed{
			"a": {podSet: "main", domain: "h1", uncertain: true}, "b": {podSet: "main", domain: "h2", uncertain: true}}},
		"refused": {err: apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", errors.New("changed")), want: map[types.UID]placed{}},
		"written": {want: map[types.UID]placed{"a": {podSet: "main", domain: "h1"}, "b": {podSet: "main", domain: "h2"}}},
	} {
		t.Run(name, func(t *testing.T) {
			pods := []corev1.Pod{pod("a", -1, ""), pod("b", -1, "")}
			c := fake.NewClientBuilder().WithObjects(&pods[0], &pods[1]).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if tc.err != nil {
						return tc.err
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			}).Build()
			r := NewReconciler(c, 0)
			key := types.NamespacedName{Namespace: "ns", Name: "w"}
			err := r.ungate(context.Background(), key, ps, a, &strata.ResourceFlavor{}, nil, pods)
			if (err != nil) != (tc.err != nil) {
				t.Errorf("ungate() = %v, want an error: %v", err, tc.err != nil)
			}
			got := r.expected[key]
			if got == nil {
				got = map[types.UID]placed{}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(placed{})); diff != "" {
				t.Errorf("expectations (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRanks: a pod's rank is its completion index, less the pod set's
// offset; with a sub-group label (a JobSet's job index), Job g's pods come
// after the pods of the g Jobs before it.
func TestRanks(t *testing.T) {
	withLabels := func(l map[string]string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	index := strata.JobCompletionIndexLabel
	const job = "jobset.sigs.k8s.io/job-index"
	type want struct {
		Rank int32
		OK   bool
	}
	cases := map[string]struct {
		req    *strata.PodSetTopologyRequest
		pod    *corev1.Pod
		others []corev1.Pod // the workload's other pods
		want   want
	}{
		"an offset, and a pod of the set labelled below it: its controller numbers from 0": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), PodIndexOffset: ptr.To[int32](1)}, pod: withLabels(map[string]string{index: "3"}),
			others: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{index: "0", strata.PodSetLabel: "workers"}}}},
			want:   want{3, true},
		},
		"an offset, and a pod of another set labelled below it": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), PodIndexOffset: ptr.To[int32](1)}, pod: withLabels(map[string]string{index: "3"}),
			others: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{index: "0", strata.PodSetLabel: "launcher"}}}},
			want:   want{2, true},
		},
		"no index label: no rank": {
			req: &strata.PodSetTopologyRequest{}, pod: withLabels(map[string]string{index: "3"}),
		},
		"completion index": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index)}, pod: withLabels(map[string]string{index: "3"}),
			want: want{3, true},
		},
		"with an offset": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), PodIndexOffset: ptr.To[int32](1)}, pod: withLabels(map[string]string{index: "3"}),
			want: want{2, true},
		},
		"the second Job of a JobSet of 2 Jobs of 4": {
			req:  &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), SubGroupIndexLabel: ptr.To(job), SubGroupCount: ptr.To[int32](2)},
			pod:  withLabels(map[string]string{index: "2", job: "1"}),
			want: want{6, true},
		},
		"a sub-group pod without its job index: no rank": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), SubGroupIndexLabel: ptr.To(job), SubGroupCount: ptr.To[int32](2)},
			pod: withLabels(map[string]string{index: "2"}),
		},
		"an index past the Job's pods: no rank": {
			req: &strata.PodSetTopologyRequest{PodIndexLabel: ptr.To(index), SubGroupIndexLabel: ptr.To(job), SubGroupCount: ptr.To[int32](2)},
			pod: withLabels(map[string]string{index: "4", job: "0"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rank, ok := rankFunc(&strata.PodSet{Name: "workers", Count: 8, TopologyRequest: tc.req}, tc.others)(tc.pod)
			if diff := cmp.Diff(tc.want, want{rank, ok}); diff != "" {
				t.Errorf("rank (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestKindRanksPerNode: the pod sets a kind's adapter builds rank its pods
// as KEP-2724 says, through plan: exact pods per node.
func TestKindRanksPerNode(t *testing.T) {
	mpi := func(asWorker bool, group string) *kubeflow.MPIJob {
		ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: hostLabel}
		if group != "" {
			ann[strata.PodSetGroupNameAnnotation] = group
		}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
		return &kubeflow.MPIJob{Spec: kubeflow.MPIJobSpec{RunLauncherAsWorker: ptr.To(asWorker),
			MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: tmpl},
				kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](4), Template: tmpl},
			}}}
	}
	// Ranks 0-1 on h1, 2 on h2, 3 on h3.
	a := &tas.Assignment{Levels: []string{hostLabel}, Domains: []tas.DomainAssignment{
		{Values: []string{"h1"}, Count: 2}, {Values: []string{"h2"}, Count: 1}, {Values: []string{"h3"}, Count: 1}}}
	workers := func(first int) []corev1.Pod {
		var out []corev1.Pod
		for i := first; i < first+4; i++ {
			p := pod("w"+strconv.Itoa(i), -1, "")
			p.Labels[strata.PodSetLabel] = mpijob.Worker
			p.Labels[mpijob.ReplicaIndexLabel] = strconv.Itoa(i)
			out = append(out, p)
		}
		return out
	}
	cases := map[string]struct {
		job  *kubeflow.MPIJob
		pods []corev1.Pod
		want map[string]string
	}{
		// KEP-2724 "MPIJob with runLauncherAsWorker": workers' replica
		// indexes are 1-4; worker 1 is rank 0.
		"MPIJob, runLauncherAsWorker: indexes from 1": {
			job: mpi(true, ""), pods: workers(1),
			want: map[string]string{"w1": "h1", "w2": "h1", "w3": "h2", "w4": "h3"},
		},
		"MPIJob, a separate launcher: indexes from 0": {
			job: mpi(false, ""), pods: workers(0),
			want: map[string]string{"w0": "h1", "w1": "h1", "w2": "h2", "w3": "h3"},
		},
		// Grouped, the offset is the group's: the launcher's one pod.
		"MPIJob, runLauncherAsWorker, launcher and workers grouped": {
			job: mpi(true, "g"), pods: workers(1),
			want: map[string]string{"w1": "h1", "w2": "h1", "w3": "h2", "w4": "h3"},
		},
		"MPIJob, a separate launcher, grouped: indexes from 0 still": {
			job: mpi(false, "g"), pods: workers(0),
			want: map[string]string{"w0": "h1", "w1": "h1", "w2": "h2", "w3": "h3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			podSets, errs := mpijob.Adapt(tc.job).PodSets()
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := map[string]string{}
			for _, rel := range plan(workload.RankedPodSet(podSets, 1), a, tc.pods, map[types.UID]placed{}) {
				got[rel.pod.Name] = a.Domains[rel.domain].Values[0]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods per node (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRelease: a released pod gets its domain, the flavor's node labels
// and tolerations its template lacked (a gated copy's or a
// LeaderWorkerSet's template, which no admission wrote), and, with a
// topology assignment, the label that counts it through its Workload; its
// other gates stay.
func TestRelease(t *testing.T) {
	flavor := &strata.ResourceFlavor{Spec: strata.ResourceFlavorSpec{
		NodeLabels:  map[string]string{"pool": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}}
	a := &tas.Assignment{Levels: []string{hostLabel}, Domains: []tas.DomainAssignment{{Values: []string{"h1"}, Count: 1}}}
	gated := func() corev1.Pod {
		return with(pod("a", 0, ""), func(p *corev1.Pod) {
			p.Namespace = "ns"
			p.Labels[strata.WorkloadLabel] = "job-train"
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/other"})
		})
	}
	for name, tc := range map[string]struct {
		a       *tas.Assignment
		updates *strata.PodSetUpdate
		want    func(*corev1.Pod)
	}{
		"with a topology assignment": {a: a, want: func(p *corev1.Pod) {
			p.Labels[strata.TASLabel] = "true"
			p.Spec.NodeSelector = map[string]string{"pool": "gpu", hostLabel: "h1"}
		}},
		"with its AdmissionChecks' pod set updates": {a: a, updates: &strata.PodSetUpdate{Name: "main",
			Labels: map[string]string{"provisioned": "yes"}, Annotations: map[string]string{"example.com/request": "r1"},
			NodeSelector: map[string]string{"example.com/capacity": "reserved"},
			Tolerations:  []corev1.Toleration{{Key: "example.com/new", Operator: corev1.TolerationOpExists}}},
			want: func(p *corev1.Pod) {
				p.Labels[strata.TASLabel] = "true"
				p.Labels["provisioned"] = "yes"
				p.Annotations = map[string]string{"example.com/request": "r1"}
				p.Spec.NodeSelector = map[string]string{"pool": "gpu", hostLabel: "h1", "example.com/capacity": "reserved"}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/new", Operator: corev1.TolerationOpExists}}
			}},
		"without one": {want: func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p := gated()
			c := fake.NewClientBuilder().WithObjects(&p).Build()
			if err := NewReconciler(c, 0).release(context.Background(), &p, tc.a, 0, flavor, tc.updates); err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(&p), &got); err != nil {
				t.Fatal(err)
			}
			want := gated()
			tc.want(&want)
			want.Spec.Tolerations = append(want.Spec.Tolerations, flavor.Spec.Tolerations...)
			want.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}}
			if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			delete(got.Annotations, strata.ReleasedFlavorAnnotation)
			if len(got.Annotations) == 0 {
				got.Annotations = nil
			}
			if diff := cmp.Diff(want.Annotations, got.Annotations); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
				t.Errorf("spec (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBypassed: an ungated, running pod without every level of its
// assignment in its node selector was released by someone other than an
// agent.
func TestBypassed(t *testing.T) {
	admittedAt := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := &tas.Assignment{Levels: []string{rackLabel, hostLabel}, Domains: []tas.DomainAssignment{{Values: []string{"r1", "h1"}, Count: 1}}}
	for name, tc := range map[string]struct {
		pod  func(*corev1.Pod)
		want bool
	}{
		"gated": {pod: func(*corev1.Pod) {}},
		"released by the agent": {pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Spec.NodeSelector = map[string]string{"pool": "gpu", rackLabel: "r1", hostLabel: "h1"}
		}},
		"released into a domain the assignment lost (hot swap's to fail)": {pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Spec.NodeSelector = map[string]string{rackLabel: "r1", hostLabel: "h9"}
		}},
		"gate removed, no node selector": {want: true, pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
		}},
		"gate removed, a level missing": {want: true, pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Spec.NodeSelector = map[string]string{rackLabel: "r1"}
		}},
		"gate removed, finished": {pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Status.Phase = corev1.PodSucceeded
		}},
		"gate removed, being deleted": {pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}},
		"another gate left": {want: true, pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}}
		}},
		"released by an agent for an admission of other levels (admitted again, not stopped yet)": {pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Spec.NodeSelector = map[string]string{hostLabel: "h1"}
			p.Annotations = map[string]string{strata.ReleasedFlavorAnnotation: "old-flavor"}
			p.CreationTimestamp = metav1.NewTime(admittedAt.Add(-time.Minute))
		}},
		"a tenant's release, forging an agent's annotation of another flavor on a pod of this admission": {want: true, pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Annotations = map[string]string{strata.ReleasedFlavorAnnotation: "old-flavor"}
			p.CreationTimestamp = metav1.NewTime(admittedAt.Add(time.Second))
		}},
		"a tenant's release, forging an agent's annotation of this admission's flavor": {want: true, pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Annotations = map[string]string{strata.ReleasedFlavorAnnotation: "gpu"}
			p.CreationTimestamp = metav1.NewTime(admittedAt.Add(-time.Minute))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p := pod("a", 0, "")
			tc.pod(&p)
			if got := bypassed(a, "gpu", admittedAt, &p); got != tc.want {
				t.Errorf("bypassed() = %t, want %t", got, tc.want)
			}
		})
	}
}
