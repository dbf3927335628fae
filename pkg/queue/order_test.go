package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var created = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// rl is a ResourceList from name/quantity pairs.
func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// queued is workload ns/name with a priority (nil: none), created at
// created plus age seconds.
func queued(ns, name string, priority *int32, age int) *strata.Workload {
	wl := testutil.MakeWorkload(name, ns).Obj()
	wl.Spec.Priority = priority
	wl.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(age) * time.Second))
	return wl
}

// dispatched is queued("ns", name, nil, 0), a hub's copy dispatched at
// created plus micros microseconds.
func dispatched(name string, micros int) *strata.Workload {
	wl := queued("ns", name, nil, 0)
	wl.Labels = map[string]string{strata.HubWorkloadUIDLabel: "uid-" + name, strata.DispatchGenerationLabel: "1"}
	wl.Annotations = map[string]string{strata.DispatchTimeAnnotation: created.Add(time.Duration(micros) * time.Microsecond).Format(metav1.RFC3339Micro)}
	return wl
}

// evicted is wl with Evicted=True for reason, two minutes after created.
func evicted(wl *strata.Workload, reason string) *strata.Workload {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: reason, LastTransitionTime: metav1.NewTime(created.Add(2 * time.Minute))})
	return wl
}

func TestBefore(t *testing.T) {
	cases := map[string]struct {
		a, b *strata.Workload
		want bool
	}{
		"higher priority first, even when younger": {
			a:    queued("ns", "a", ptr.To[int32](10), 60),
			b:    queued("ns", "b", ptr.To[int32](5), 0),
			want: true,
		},
		"lower priority after, even when older": {
			a:    queued("ns", "a", ptr.To[int32](5), 0),
			b:    queued("ns", "b", ptr.To[int32](10), 60),
			want: false,
		},
		"no priority counts as 0, above a negative one": {
			a:    queued("ns", "a", nil, 60),
			b:    queued("ns", "b", ptr.To[int32](-1), 0),
			want: true,
		},
		"no priority counts as 0, below a positive one": {
			a:    queued("ns", "a", nil, 0),
			b:    queued("ns", "b", ptr.To[int32](1), 60),
			want: false,
		},
		"same priority: older first": {
			a:    queued("ns", "z", ptr.To[int32](3), 0),
			b:    queued("ns", "a", ptr.To[int32](3), 1),
			want: true,
		},
		"same priority: younger after": {
			a:    queued("ns", "a", ptr.To[int32](3), 1),
			b:    queued("ns", "z", ptr.To[int32](3), 0),
			want: false,
		},
		"nil and 0 priority are equal: older first": {
			a:    queued("ns", "z", ptr.To[int32](0), 0),
			b:    queued("ns", "a", nil, 1),
			want: true,
		},
		"same priority and time: name order": {
			a:    queued("ns", "a", nil, 0),
			b:    queued("ns", "b", nil, 0),
			want: true,
		},
		"same priority and time: name order, reversed": {
			a:    queued("ns", "b", nil, 0),
			b:    queued("ns", "a", nil, 0),
			want: false,
		},
		"same priority and time: namespace before name": {
			a:    queued("ns1", "z", nil, 0),
			b:    queued("ns2", "a", nil, 0),
			want: true,
		},
		"copies created in one second: in the hub's dispatch order, not name order": {
			a:    dispatched("z", 1),
			b:    dispatched("a", 2),
			want: true,
		},
		"copies created in one second: a later dispatch after": {
			a:    dispatched("a", 2),
			b:    dispatched("z", 1),
			want: false,
		},
		"a copy created in an earlier second comes before a local workload": {
			a:    queued("ns", "a", nil, 1),
			b:    dispatched("z", 500),
			want: false,
		},
		"a copy created after a local workload comes after it, though the hub's clock is 15 minutes behind": {
			a: queued("ns", "a", nil, 1),
			b: func() *strata.Workload {
				wl := dispatched("z", 0)
				wl.CreationTimestamp = metav1.NewTime(created.Add(2 * time.Second))
				wl.Annotations[strata.DispatchTimeAnnotation] = created.Add(-15 * time.Minute).Format(metav1.RFC3339Micro)
				return wl
			}(),
			want: true,
		},
		"a copy created before a local workload comes first, though the hub's clock is 15 minutes ahead": {
			a: func() *strata.Workload {
				wl := dispatched("z", 0)
				wl.Annotations[strata.DispatchTimeAnnotation] = created.Add(15 * time.Minute).Format(metav1.RFC3339Micro)
				return wl
			}(),
			b:    queued("ns", "a", nil, 1),
			want: true,
		},
		"dispatch time does not outrank priority": {
			a:    dispatched("a", 1),
			b:    queued("ns", "b", ptr.To[int32](1), 60),
			want: false,
		},
		"an unparsable dispatch time falls back to the creation time": {
			a: func() *strata.Workload {
				wl := dispatched("z", 0)
				wl.Annotations[strata.DispatchTimeAnnotation] = "yesterday"
				return wl
			}(),
			b:    queued("ns", "a", nil, 1),
			want: true,
		},
		"a dispatch time without the dispatch labels is not a hub's: creation time": {
			a: func() *strata.Workload {
				wl := dispatched("z", 0)
				wl.Labels = nil
				wl.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
				return wl
			}(),
			b:    queued("ns", "a", nil, 0),
			want: false,
		},
		"evicted for pods not ready: queued again from the eviction, behind a younger one": {
			a:    evicted(queued("ns", "a", nil, 0), strata.EvictedByPodsReadyTimeout),
			b:    queued("ns", "b", nil, 60),
			want: false,
		},
		"evicted for pods not ready: ahead of one created after the eviction": {
			a:    evicted(queued("ns", "a", nil, 0), strata.EvictedByPodsReadyTimeout),
			b:    queued("ns", "b", nil, 121),
			want: true,
		},
		"a copy evicted for pods not ready: the eviction, not the dispatch time": {
			a:    evicted(dispatched("a", 1), strata.EvictedByPodsReadyTimeout),
			b:    dispatched("b", 2),
			want: false,
		},
		"admitted again after such an eviction: its creation time (as a preemption candidate)": {
			a: func() *strata.Workload {
				wl := evicted(queued("ns", "a", nil, 0), strata.EvictedByPodsReadyTimeout)
				wl.Status.Admission = &strata.Admission{ClusterQueue: "q"}
				return wl
			}(),
			b:    queued("ns", "b", nil, 60),
			want: true,
		},
		"evicted otherwise (preempted): its creation time": {
			a:    evicted(queued("ns", "a", nil, 0), strata.EvictedByPreemption),
			b:    queued("ns", "b", nil, 60),
			want: true,
		},
		"same workload is not before itself": {
			a:    queued("ns", "a", ptr.To[int32](3), 0),
			b:    queued("ns", "a", ptr.To[int32](3), 0),
			want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Before(tc.a, tc.b); got != tc.want {
				t.Errorf("Before() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTotalRequests(t *testing.T) {
	cases := map[string]struct {
		ps   strata.PodSet
		want corev1.ResourceList
	}{
		"one pod": {
			ps:   testutil.MakePodSet("main", 1, "cpu", "500m", "memory", "1Gi").Obj(),
			want: rl("cpu", "500m", "memory", "1Gi", "pods", "1"),
		},
		"requests times count": {
			ps:   testutil.MakePodSet("main", 4, "cpu", "500m", "memory", "1Gi", "nvidia.com/gpu", "2").Obj(),
			want: rl("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "8", "pods", "4"),
		},
		"no pods": {
			ps:   testutil.MakePodSet("main", 0, "cpu", "1").Obj(),
			want: rl("cpu", "0"),
		},
		"no requests": {
			ps:   testutil.MakePodSet("main", 3).Obj(),
			want: rl("pods", "3"),
		},
		"containers are summed": {
			ps: func() strata.PodSet {
				ps := testutil.MakePodSet("main", 2, "cpu", "1").Obj()
				ps.Template.Spec.Containers = append(ps.Template.Spec.Containers, corev1.Container{
					Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m")},
				})
				return ps
			}(),
			want: rl("cpu", "2500m", "pods", "2"),
		},
		"no int64 overflow at scale: 60,000 pods x 200Gi": {
			ps:   testutil.MakePodSet("main", 60000, "memory", "200Gi").Obj(),
			want: rl("memory", "12000000Gi", "pods", "60000"),
		},
		"init containers count by their maximum": {
			ps: func() strata.PodSet {
				ps := testutil.MakePodSet("main", 2, "cpu", "1").Obj()
				ps.Template.Spec.InitContainers = []corev1.Container{{
					Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3")},
				}}
				return ps
			}(),
			want: rl("cpu", "6", "pods", "2"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TotalRequests(&tc.ps)); diff != "" {
				t.Errorf("TotalRequests() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAddUsage(t *testing.T) {
	cases := map[string]struct {
		usage map[string]corev1.ResourceList
		psas  []strata.PodSetAssignment
		want  map[string]corev1.ResourceList
	}{
		"nothing to add": {
			usage: map[string]corev1.ResourceList{},
			want:  map[string]corev1.ResourceList{},
		},
		"into an empty usage": {
			usage: map[string]corev1.ResourceList{},
			psas:  []strata.PodSetAssignment{{Name: "main", Flavor: "f1", ResourceUsage: rl("cpu", "4")}},
			want:  map[string]corev1.ResourceList{"f1": rl("cpu", "4")},
		},
		"onto existing usage": {
			usage: map[string]corev1.ResourceList{"f1": rl("cpu", "1", "memory", "1Gi")},
			psas:  []strata.PodSetAssignment{{Name: "main", Flavor: "f1", ResourceUsage: rl("cpu", "500m", "nvidia.com/gpu", "2")}},
			want:  map[string]corev1.ResourceList{"f1": rl("cpu", "1500m", "memory", "1Gi", "nvidia.com/gpu", "2")},
		},
		"pod sets on two flavors": {
			usage: map[string]corev1.ResourceList{"f1": rl("cpu", "1")},
			psas: []strata.PodSetAssignment{
				{Name: "leader", Flavor: "f1", ResourceUsage: rl("cpu", "1")},
				{Name: "workers", Flavor: "f2", ResourceUsage: rl("cpu", "8")},
				{Name: "more", Flavor: "f1", ResourceUsage: rl("cpu", "2")},
			},
			want: map[string]corev1.ResourceList{"f1": rl("cpu", "4"), "f2": rl("cpu", "8")},
		},
		"an assignment without usage still names its flavor": {
			usage: map[string]corev1.ResourceList{},
			psas:  []strata.PodSetAssignment{{Name: "main", Flavor: "f1"}},
			want:  map[string]corev1.ResourceList{"f1": {}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			AddUsage(tc.usage, tc.psas)
			if diff := cmp.Diff(tc.want, tc.usage); diff != "" {
				t.Errorf("AddUsage() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestKeyLess(t *testing.T) {
	keys := [][2]string{{"a", "b"}, {"a", "a"}, {"a-b", "x"}, {"a", ""}, {"", "a"}, {"ab", "c"}, {"a", "bc"}, {"a/b", "c"}, {"a", "b/c"}}
	for _, x := range keys {
		for _, y := range keys {
			want := x[0]+"/"+x[1] < y[0]+"/"+y[1]
			if got := keyLess(x[0], x[1], y[0], y[1]); got != want {
				t.Errorf("keyLess(%q, %q, %q, %q) = %v, want %v", x[0], x[1], y[0], y[1], got, want)
			}
		}
	}
}

func TestWorkloadUsage(t *testing.T) {
	admitted := func(workers int32) *strata.Admission {
		return &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{
			{Name: "leader", Flavor: "f", Count: 1}, {Name: "workers", Flavor: "f", Count: workers}}}
	}
	placed := func(counts ...strata.PodSetCount) *strata.Placement {
		return &strata.Placement{Cluster: "w1", Flavor: "f", PodSetCounts: counts}
	}
	cases := []struct {
		name        string
		admission   *strata.Admission
		placement   *strata.Placement
		reclaimable []strata.ReclaimablePod
		want        corev1.ResourceList
		less        bool
	}{
		{name: "all its pods", want: rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5")},
		{name: "3 workers reclaimable", reclaimable: []strata.ReclaimablePod{{Name: "workers", Count: 3}, {Name: "gone", Count: 9}},
			want: rl("cpu", "3", "nvidia.com/gpu", "1", "pods", "2"), less: true},
		{name: "admitted with all", admission: admitted(4), want: rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5")},
		{name: "admitted with 2 workers", admission: admitted(2), want: rl("cpu", "4", "nvidia.com/gpu", "2", "pods", "3"), less: true},
		{name: "admitted with 2 workers, 1 reclaimable", admission: admitted(2), reclaimable: []strata.ReclaimablePod{{Name: "workers", Count: 1}},
			want: rl("cpu", "3", "nvidia.com/gpu", "1", "pods", "2"), less: true},
		{name: "placed with 3 workers", placement: placed(strata.PodSetCount{Name: "workers", Count: 3}),
			want: rl("cpu", "5", "nvidia.com/gpu", "3", "pods", "4"), less: true},
		{name: "the admission wins over the placement", admission: admitted(4), placement: placed(strata.PodSetCount{Name: "workers", Count: 3}),
			want: rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5")},
		{name: "counts out of range are not read", admission: admitted(9), placement: placed(strata.PodSetCount{Name: "workers", Count: 0}),
			want: rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5")},
		{name: "a count for another pod set is not read", placement: placed(strata.PodSetCount{Name: "other", Count: 1}),
			want: rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := testutil.MakeWorkload("w", "ns").PodSets(
				testutil.MakePodSet("leader", 1, "cpu", "2").Obj(),
				testutil.MakePodSet("workers", 4, "cpu", "1", "nvidia.com/gpu", "1").Obj(),
			).Obj()
			wl.Status.Admission, wl.Status.Placement, wl.Status.ReclaimablePods = tc.admission, tc.placement, tc.reclaimable
			if diff := cmp.Diff(tc.want, WorkloadUsage(wl)); diff != "" {
				t.Errorf("WorkloadUsage (-want,+got):\n%s", diff)
			}
			if got := ChargedLess(wl); got != tc.less {
				t.Errorf("ChargedLess = %v, want %v", got, tc.less)
			}
			if diff := cmp.Diff(rl("cpu", "6", "nvidia.com/gpu", "4", "pods", "5"), WorkloadRequests(wl)); diff != "" {
				t.Errorf("WorkloadRequests changed (-want,+got):\n%s", diff)
			}
		})
	}
}
