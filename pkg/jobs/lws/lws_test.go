package lws

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

const (
	rack = "cloud.provider.com/topology-rack"
	host = "kubernetes.io/hostname"
)

// leaderWorkerSet is KEP-2724's LeaderWorkerSet example: replicas groups
// of size pods, the leader's and the workers' templates with the given
// annotations; no leader template when leaderAnn is nil and noLeader.
func leaderWorkerSet(replicas, size int32, noLeader bool, leaderAnn, workerAnn map[string]string) *lwsapi.LeaderWorkerSet {
	l := testutil.MakeLeaderWorkerSet("tas-example-lws", "default").Queue("user-queue").Replicas(replicas).Size(size).
		Request("cpu", "1").LeaderAnnotations(leaderAnn).WorkerAnnotations(workerAnn)
	if noLeader {
		l.NoLeader()
	}
	return l.Obj()
}

func TestPodSets(t *testing.T) {
	onHost := map[string]string{strata.PodSetRequiredTopologyAnnotation: host}
	grouped := map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"}
	type podSet struct {
		Name  string
		Count int32
		Req   *strata.PodSetTopologyRequest
	}
	cases := map[string]struct {
		lws  *lwsapi.LeaderWorkerSet
		want []podSet
		errs []string
	}{
		"co-locate leader with workers: a group leaves offsets to the group (KEP-2724)": {
			lws: leaderWorkerSet(2, 3, false, grouped, grouped),
			want: []podSet{
				{Leader, 1, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodSetGroupName: ptr.To("lws-group"), PodIndexLabel: ptr.To(WorkerIndexLabel)}},
				{Worker, 2, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodSetGroupName: ptr.To("lws-group"), PodIndexLabel: ptr.To(WorkerIndexLabel)}},
			},
		},
		"respect pod index order within workers: workers' indexes start at 1 (KEP-2724)": {
			lws: leaderWorkerSet(2, 3, false, onHost, onHost),
			want: []podSet{
				{Leader, 1, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodIndexLabel: ptr.To(WorkerIndexLabel)}},
				{Worker, 2, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodIndexLabel: ptr.To(WorkerIndexLabel), PodIndexOffset: ptr.To[int32](1)}},
			},
		},
		"no leader template: one pod set of the whole group, named main as Kueue's, no offset (KEP-2724)": {
			lws:  leaderWorkerSet(2, 3, true, nil, onHost),
			want: []podSet{{Main, 3, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodIndexLabel: ptr.To(WorkerIndexLabel)}}},
		},
		"a leader alone": {
			lws:  leaderWorkerSet(1, 1, false, onHost, onHost),
			want: []podSet{{Leader, 1, &strata.PodSetTopologyRequest{Required: ptr.To(host), PodIndexLabel: ptr.To(WorkerIndexLabel)}}},
		},
		"no topology annotations": {
			lws:  leaderWorkerSet(1, 4, false, nil, nil),
			want: []podSet{{Leader, 1, nil}, {Worker, 3, nil}},
		},
		"an invalid annotation is an error pointing into the template": {
			lws:  leaderWorkerSet(1, 2, false, nil, map[string]string{strata.PodSetSliceSizeAnnotation: "x", strata.PodSetSliceRequiredTopologyAnnotation: rack}),
			want: []podSet{{Leader, 1, nil}, {Worker, 1, nil}},
			errs: []string{"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[strata.dev/podset-slice-size]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			podSets, errs := Group{LeaderWorkerSet: tc.lws}.PodSets()
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Field)
			}
			if diff := cmp.Diff(tc.errs, gotErrs); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			var got []podSet
			for _, ps := range podSets {
				got = append(got, podSet{ps.Name, ps.Count, ps.TopologyRequest})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod sets (-want,+got):\n%s", diff)
			}
			if n := len(Group{LeaderWorkerSet: tc.lws}.Templates()); n != len(podSets) {
				t.Errorf("%d templates for %d pod sets", n, len(podSets))
			}
		})
	}
}

// TestRanksPerHost places each group of the KEP's examples on a snapshot
// of hosts with room for 3 pods each (two racks of two) and reads, as the
// agent's ungater does, each pod's host from its worker-index: the leader
// (worker-index 0) and workers 1 and 2 of a group.
func TestRanksPerHost(t *testing.T) {
	onHost := map[string]string{strata.PodSetRequiredTopologyAnnotation: host}
	grouped := map[string]string{strata.PodSetRequiredTopologyAnnotation: host, strata.PodSetGroupNameAnnotation: "lws-group"}
	onRack := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack}
	cases := map[string]struct {
		lws  *lwsapi.LeaderWorkerSet
		want []map[string]string // per group: pod (leader, worker-1, ...) -> host
	}{
		"each group of leader and 2 workers on one host": {
			lws: leaderWorkerSet(2, 3, false, grouped, grouped),
			want: []map[string]string{
				{"leader": "h1", "worker-1": "h1", "worker-2": "h1"},
				{"leader": "h2", "worker-1": "h2", "worker-2": "h2"},
			},
		},
		"leader and workers apart, each on a host of its own; workers in index order": {
			lws: leaderWorkerSet(1, 4, false, onHost, onHost),
			want: []map[string]string{
				{"leader": "h1", "worker-1": "h2", "worker-2": "h2", "worker-3": "h2"},
			},
		},
		"no leader template: the leader is worker-index 0 of one pod set": {
			lws: leaderWorkerSet(2, 3, true, nil, onRack),
			want: []map[string]string{
				{"worker-0": "h1", "worker-1": "h1", "worker-2": "h1"},
				{"worker-0": "h2", "worker-1": "h2", "worker-2": "h2"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := tas.NewSnapshot([]string{rack, host}, nil)
			for i, r := range []string{"r1", "r1", "r2", "r2"} {
				h := fmt.Sprint("h", i+1)
				snap.SetNode(tas.Node{Name: h, Labels: map[string]string{rack: r, host: h}, Ready: true,
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourcePods: resource.MustParse("110")}})
			}
			for g := range Replicas(tc.lws) {
				group := Group{LeaderWorkerSet: tc.lws, Index: g}
				wl, errs := jobs.WorkloadFor(group)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				if want := GroupWorkloadName(tc.lws.Name, g); wl.Name != want {
					t.Errorf("workload name %q, want %q", wl.Name, want)
				}
				assignments, _, err := workload.Place(snap, "", nil, wl, tas.Options{})
				if err != nil {
					t.Fatalf("group %d: %v", g, err)
				}
				got := map[string]string{}
				for i := range wl.Spec.PodSets {
					ps := workload.RankedPodSet(wl.Spec.PodSets, i)
					offset := ptr.Deref(ps.TopologyRequest.PodIndexOffset, 0)
					for k := range ps.Count {
						index := offset + k // the pod's worker-index
						if ps.Name == Leader {
							index = 0
						}
						d := assignments[i].DomainOfRank(index - offset)
						pod := fmt.Sprintf("worker-%d", index)
						if ps.Name == Leader {
							pod = "leader"
						}
						got[pod] = strings.Join(assignments[i].Domains[d].Values, "/")
					}
				}
				if diff := cmp.Diff(tc.want[g], got); diff != "" {
					t.Errorf("group %d: hosts (-want,+got):\n%s", g, diff)
				}
			}
		})
	}
}

func TestPodOf(t *testing.T) {
	withLeader := leaderWorkerSet(2, 3, false, nil, nil)
	noLeader := leaderWorkerSet(2, 3, true, nil, nil)
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	cases := []struct {
		name    string
		lws     *lwsapi.LeaderWorkerSet
		pod     *corev1.Pod
		group   int32
		podSet  string
		matches bool
	}{
		{"leader", withLeader, pod(map[string]string{NameLabel: withLeader.Name, GroupIndexLabel: "1", WorkerIndexLabel: "0"}), 1, Leader, true},
		{"worker", withLeader, pod(map[string]string{NameLabel: withLeader.Name, GroupIndexLabel: "1", WorkerIndexLabel: "2"}), 1, Worker, true},
		{"leader without a leader template", noLeader, pod(map[string]string{NameLabel: noLeader.Name, GroupIndexLabel: "0", WorkerIndexLabel: "0"}), 0, Main, true},
		{"another set's", withLeader, pod(map[string]string{NameLabel: "other", GroupIndexLabel: "1", WorkerIndexLabel: "0"}), 0, "", false},
		{"no group index yet", withLeader, pod(map[string]string{NameLabel: withLeader.Name, WorkerIndexLabel: "0"}), 0, "", false},
		{"a malformed worker index", withLeader, pod(map[string]string{NameLabel: withLeader.Name, GroupIndexLabel: "0", WorkerIndexLabel: "x"}), 0, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, ps, ok := PodOf(tc.lws, tc.pod)
			if g != tc.group || ps != tc.podSet || ok != tc.matches {
				t.Errorf("PodOf = %d, %q, %t; want %d, %q, %t", g, ps, ok, tc.group, tc.podSet, tc.matches)
			}
		})
	}
}

func TestMaxSurge(t *testing.T) {
	cases := map[string]struct {
		replicas int32
		surge    *intstr.IntOrString
		want     int32
	}{
		"no rolling update configuration": {replicas: 4, want: 0},
		"a number":                        {replicas: 4, surge: ptr.To(intstr.FromInt32(1)), want: 1},
		"a percentage, rounded up":        {replicas: 4, surge: ptr.To(intstr.FromString("30%")), want: 2},
		"at most the replicas":            {replicas: 2, surge: ptr.To(intstr.FromInt32(5)), want: 2},
		"malformed":                       {replicas: 4, surge: ptr.To(intstr.FromString("many")), want: 0},
		"negative":                        {replicas: 4, surge: ptr.To(intstr.FromInt32(-1)), want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := leaderWorkerSet(tc.replicas, 2, false, nil, nil)
			if tc.surge != nil {
				l.Spec.RolloutStrategy.RollingUpdateConfiguration = &lwsapi.RollingUpdateConfiguration{MaxSurge: *tc.surge}
			}
			if diff := cmp.Diff(tc.want, MaxSurge(l)); diff != "" {
				t.Errorf("MaxSurge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsLeader(t *testing.T) {
	for index, want := range map[string]bool{"0": true, "1": false, "": false} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{WorkerIndexLabel: index}}}
		if got := IsLeader(p); got != want {
			t.Errorf("IsLeader(worker index %q) = %v, want %v", index, got, want)
		}
	}
}

// TestRunsAsAdmitted: a released pod of a group runs as admitted only on
// its Workload's admission: the flavor it was released on, and a domain of
// the topology assignment when there is one.
func TestRunsAsAdmitted(t *testing.T) {
	assigned := tas.Encode(&tas.Assignment{Levels: []string{host}, Domains: []tas.DomainAssignment{{Values: []string{"h1"}, Count: 2}}})
	admitted := func(flavor string, topology *strata.TopologyAssignment) *strata.Workload {
		return &strata.Workload{Status: strata.WorkloadStatus{Admission: &strata.Admission{ClusterQueue: "cq",
			PodSetAssignments: []strata.PodSetAssignment{{Name: "workers", Flavor: flavor, Count: 2, TopologyAssignment: topology}}}}}
	}
	pod := func(flavor, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.PodSetLabel: "workers"}}}
		if flavor != "" {
			p.Annotations = map[string]string{strata.ReleasedFlavorAnnotation: flavor}
		}
		if node != "" {
			p.Spec.NodeSelector = map[string]string{host: node}
		}
		return p
	}
	cases := []struct {
		name string
		wl   *strata.Workload
		pod  *corev1.Pod
		want bool
	}{
		{name: "not admitted", wl: &strata.Workload{}, pod: pod("a", ""), want: false},
		{name: "admitted on the flavor it was released on", wl: admitted("a", nil), pod: pod("a", ""), want: true},
		{name: "admitted again on another flavor", wl: admitted("b", nil), pod: pod("a", ""), want: false},
		{name: "released before the flavor was noted", wl: admitted("b", nil), pod: pod("", ""), want: true},
		{name: "noted empty", wl: admitted("b", nil), pod: func() *corev1.Pod {
			p := pod("", "")
			p.Annotations = map[string]string{strata.ReleasedFlavorAnnotation: ""}
			return p
		}(), want: true},
		{name: "in a domain of the assignment", wl: admitted("a", assigned), pod: pod("a", "h1"), want: true},
		{name: "outside the assignment's domains", wl: admitted("a", assigned), pod: pod("a", "h2"), want: false},
		{name: "in a domain, but of another flavor's admission", wl: admitted("b", assigned), pod: pod("a", "h1"), want: false},
		{name: "another pod set", wl: admitted("a", nil), pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.PodSetLabel: "leader"}}}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := runsAsAdmitted(tc.wl, tc.pod); got != tc.want {
				t.Errorf("runsAsAdmitted = %t, want %t", got, tc.want)
			}
		})
	}
}
