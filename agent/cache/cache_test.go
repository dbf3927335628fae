package cache

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

const (
	rackLabel  = "cloud.provider.com/topology-rack"
	hostLabel  = strata.HostnameLabel
	flavorName = "tas-flavor"
	podSetName = "main"
)

var (
	heartbeat      = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)
	laterHeartbeat = heartbeat.Add(10 * time.Second)
	taint          = corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}
)

// node is a Ready node of the flavor's pool in rack with 4 cpu allocatable
// and room for 110 pods.
func node(name, rack string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			ResourceVersion: "1",
			Labels:          map[string]string{hostLabel: name, rackLabel: rack, "pool": "tas"},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:  resource.MustParse("4"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{
				Type:              corev1.NodeReady,
				Status:            corev1.ConditionTrue,
				LastHeartbeatTime: metav1.NewTime(heartbeat),
			}},
		},
	}
}

// changed returns a copy of n changed by fn.
func changed(n *corev1.Node, fn func(*corev1.Node)) *corev1.Node {
	n = n.DeepCopy()
	fn(n)
	return n
}

func setHeartbeat(n *corev1.Node) {
	n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(laterHeartbeat)
}

func setNotReady(n *corev1.Node) {
	n.Status.Conditions[0].Status = corev1.ConditionFalse
}

// newCache returns a cache with topology "default" (rack, host), the
// topology-aware flavor of the "tas" pool and nodes, with Changed() and
// the returned subscription drained.
func newCache(t *testing.T, nodes ...*corev1.Node) (*Cache, <-chan struct{}) {
	t.Helper()
	c := New()
	sub := c.Subscribe()
	c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
	c.SetFlavor(testutil.MakeResourceFlavor(flavorName).NodeLabel("pool", "tas").TopologyName("default").Obj())
	for _, n := range nodes {
		c.SetNode(n)
	}
	signalled(c.Changed())
	signalled(sub)
	return c, sub
}

// signalled says whether ch holds a signal, consuming it; it never blocks.
func signalled(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// onHost is a host-level domain assignment.
func onHost(host string, count int32) tas.DomainAssignment {
	return tas.DomainAssignment{Values: []string{host}, Count: count}
}

// admittedWorkload is workload ns/name at resourceVersion rv, admitted on the
// flavor with its pod set "main" of 1-cpu pods assigned to domains.
func admittedWorkload(name, rv string, domains ...tas.DomainAssignment) *strata.Workload {
	var count int32
	for _, d := range domains {
		count += d.Count
	}
	wl := testutil.MakeWorkload(name, "ns").
		PodSets(testutil.MakePodSet(podSetName, count, "cpu", "1").Obj()).
		Admission(&strata.Admission{
			ClusterQueue: "cq",
			PodSetAssignments: []strata.PodSetAssignment{{
				Name:   podSetName,
				Flavor: flavorName,
				Count:  count,
				TopologyAssignment: tas.Encode(&tas.Assignment{
					Levels:  []string{hostLabel},
					Domains: domains,
				}),
			}},
		}).
		Obj()
	wl.ResourceVersion = rv
	return wl
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

// succeededPod is a succeeded pod of workload a's pod set "main" that ran
// on node.
func succeededPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("a-" + name),
			Labels: map[string]string{strata.WorkloadLabel: "a", strata.TASLabel: "true", strata.PodSetLabel: podSetName}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded},
	}
}

// addWorkload adds an admitted workload, failing the test on error.
func addWorkload(t *testing.T, c *Cache, wl *strata.Workload) {
	t.Helper()
	if err := c.AddWorkload(key(wl.Name), wl); err != nil {
		t.Fatalf("AddWorkload(%s): %v", wl.Name, err)
	}
}

// placement places count 1-cpu pods in one rack of the flavor and returns
// the pods per host, or the engine's reason when they do not fit.
func placement(t *testing.T, c *Cache, count int32) any {
	t.Helper()
	var got any
	found := c.Flavor(flavorName, func(s *tas.Snapshot, _ *strata.Topology) {
		a, err := s.FindAssignment(tas.Request{
			Count:       count,
			PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			Mode:        tas.Required,
			Level:       rackLabel,
		}, tas.DefaultOptions())
		if err != nil {
			got = err.Error()
			return
		}
		hosts := map[string]int32{}
		for _, d := range a.Domains {
			hosts[d.Values[len(d.Values)-1]] = d.Count
		}
		got = hosts
	})
	if !found {
		t.Fatalf("Flavor(%q) is not known to the cache", flavorName)
	}
	return got
}

func TestSchedulingChanged(t *testing.T) {
	base := node("n1", "r1")
	cases := map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"no change": {
			change: func(*corev1.Node) {},
			want:   false,
		},
		"heartbeat only": {
			change: setHeartbeat,
			want:   false,
		},
		"annotations only": {
			change: func(n *corev1.Node) { n.Annotations = map[string]string{"example.com/note": "x"} },
			want:   false,
		},
		"resourceVersion only": {
			change: func(n *corev1.Node) { n.ResourceVersion = "2" },
			want:   false,
		},
		"heartbeat, annotations and resourceVersion together": {
			change: func(n *corev1.Node) {
				setHeartbeat(n)
				n.Annotations = map[string]string{"example.com/note": "x"}
				n.ResourceVersion = "2"
			},
			want: false,
		},
		"Ready message only": {
			change: func(n *corev1.Node) { n.Status.Conditions[0].Message = "kubelet is posting ready status" },
			want:   false,
		},
		"allocatable written differently but equal": {
			change: func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4000m") },
			want:   false,
		},
		"label value changed": {
			change: func(n *corev1.Node) { n.Labels[rackLabel] = "r2" },
			want:   true,
		},
		"label added": {
			change: func(n *corev1.Node) { n.Labels["example.com/gpu"] = "a100" },
			want:   true,
		},
		"allocatable changed": {
			change: func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3") },
			want:   true,
		},
		"taint added": {
			change: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint} },
			want:   true,
		},
		"unschedulable flipped": {
			change: func(n *corev1.Node) { n.Spec.Unschedulable = true },
			want:   true,
		},
		"Ready True to False": {
			change: setNotReady,
			want:   true,
		},
		"Ready condition gone": {
			change: func(n *corev1.Node) { n.Status.Conditions = nil },
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SchedulingChanged(base, changed(base, tc.change)); got != tc.want {
				t.Errorf("SchedulingChanged() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetNodeSignals(t *testing.T) {
	n1 := node("n1", "r1")
	cases := map[string]struct {
		set           *corev1.Node
		wantSignal    bool
		wantPlacement any
	}{
		"the same node again": {
			set:           n1.DeepCopy(),
			wantPlacement: map[string]int32{"n1": 4},
		},
		"a heartbeat": {
			set:           changed(n1, setHeartbeat),
			wantPlacement: map[string]int32{"n1": 4},
		},
		"a heartbeat with new annotations and resourceVersion": {
			set: changed(n1, func(n *corev1.Node) {
				setHeartbeat(n)
				n.Annotations = map[string]string{"example.com/note": "x"}
				n.ResourceVersion = "2"
			}),
			wantPlacement: map[string]int32{"n1": 4},
		},
		"a taint": {
			set:           changed(n1, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint} }),
			wantSignal:    true,
			wantPlacement: "rack required: the best rack fits 0 of 4 pods; 1 node skipped: untolerated taints or node selector/affinity",
		},
		"NotReady": {
			set:           changed(n1, setNotReady),
			wantSignal:    true,
			wantPlacement: "rack required: the best rack fits 0 of 4 pods",
		},
		"more allocatable": {
			set: changed(n1, func(n *corev1.Node) {
				n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8")
			}),
			wantSignal:    true,
			wantPlacement: map[string]int32{"n1": 4},
		},
		"a new node": {
			set:           node("n2", "r1"),
			wantSignal:    true,
			wantPlacement: map[string]int32{"n1": 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, sub := newCache(t, n1)
			c.SetNode(tc.set)
			if got := signalled(c.Changed()); got != tc.wantSignal {
				t.Errorf("Changed() signalled = %v, want %v", got, tc.wantSignal)
			}
			if got := signalled(sub); got != tc.wantSignal {
				t.Errorf("Subscribe() channel signalled = %v, want %v", got, tc.wantSignal)
			}
			if diff := cmp.Diff(tc.wantPlacement, placement(t, c, 4)); diff != "" {
				t.Errorf("placement after SetNode() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWorkloadsOnNode(t *testing.T) {
	cases := map[string]struct {
		steps func(t *testing.T, c *Cache)
		want  map[string][]types.NamespacedName // node -> workloads
	}{
		"no workloads": {
			steps: func(*testing.T, *Cache) {},
			want:  map[string][]types.NamespacedName{"n1": {}, "n2": {}, "n3": {}},
		},
		"one workload on two hosts": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2), onHost("n2", 1)))
			},
			want: map[string][]types.NamespacedName{"n1": {key("a")}, "n2": {key("a")}, "n3": {}},
		},
		"two workloads sharing a host": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				addWorkload(t, c, admittedWorkload("b", "11", onHost("n1", 1), onHost("n3", 1)))
			},
			want: map[string][]types.NamespacedName{"n1": {key("a"), key("b")}, "n2": {}, "n3": {key("b")}},
		},
		"removed workload": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2), onHost("n2", 1)))
				c.RemoveWorkload(key("a"))
			},
			want: map[string][]types.NamespacedName{"n1": {}, "n2": {}, "n3": {}},
		},
		"one of two workloads removed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				addWorkload(t, c, admittedWorkload("b", "11", onHost("n1", 1), onHost("n3", 1)))
				c.RemoveWorkload(key("b"))
			},
			want: map[string][]types.NamespacedName{"n1": {key("a")}, "n2": {}, "n3": {}},
		},
		"re-added on other hosts": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				addWorkload(t, c, admittedWorkload("a", "12", onHost("n2", 2)))
			},
			want: map[string][]types.NamespacedName{"n1": {}, "n2": {key("a")}, "n3": {}},
		},
		"re-added without an admission": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				wl := admittedWorkload("a", "12", onHost("n1", 2))
				wl.Status.Admission = nil
				addWorkload(t, c, wl)
			},
			want: map[string][]types.NamespacedName{"n1": {}, "n2": {}, "n3": {}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"), node("n3", "r2"))
			tc.steps(t, c)
			got := map[string][]types.NamespacedName{}
			for n := range tc.want {
				got[n] = c.WorkloadsOnNode(n)
			}
			sortKeys := cmpopts.SortSlices(func(a, b types.NamespacedName) bool { return a.String() < b.String() })
			if diff := cmp.Diff(tc.want, got, sortKeys); diff != "" {
				t.Errorf("WorkloadsOnNode() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWorkloadCapacity(t *testing.T) {
	cases := map[string]struct {
		steps      func(t *testing.T, c *Cache)
		count      int32
		want       any
		wantSignal bool
	}{
		"empty flavor": {
			steps: func(*testing.T, *Cache) {},
			count: 8,
			want:  map[string]int32{"n1": 4, "n2": 4},
		},
		"an admitted workload takes its hosts' capacity": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3)))
			},
			count: 8,
			want:  "rack required: the best rack fits 5 of 8 pods; limited by cpu (2 nodes)",
		},
		"what is left is still free": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3)))
			},
			count: 5,
			want:  map[string]int32{"n1": 1, "n2": 4},
		},
		"a host listed twice (an elastic Job grown) takes both counts": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 1), onHost("n2", 1), onHost("n1", 2)))
			},
			count: 4,
			want:  map[string]int32{"n1": 1, "n2": 3},
		},
		"a removed workload gives its capacity back": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3), onHost("n2", 4)))
				c.RemoveWorkload(key("a"))
			},
			count:      8,
			want:       map[string]int32{"n1": 4, "n2": 4},
			wantSignal: true,
		},
		"re-adding a workload replaces its usage": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 4)))
				addWorkload(t, c, admittedWorkload("a", "11", onHost("n2", 1)))
			},
			count:      7,
			want:       map[string]int32{"n1": 4, "n2": 3},
			wantSignal: true,
		},
		"a workload without an admission takes nothing": {
			steps: func(t *testing.T, c *Cache) {
				wl := admittedWorkload("a", "10", onHost("n1", 4))
				wl.Status.Admission = nil
				addWorkload(t, c, wl)
			},
			count: 8,
			want:  map[string]int32{"n1": 4, "n2": 4},
		},
		"a workload admitted before its flavor existed counts once it appears": {
			steps: func(t *testing.T, c *Cache) {
				c.DeleteFlavor(flavorName)
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n2", 4)))
				c.SetFlavor(testutil.MakeResourceFlavor(flavorName).NodeLabel("pool", "tas").TopologyName("default").Obj())
			},
			count:      5,
			want:       "rack required: the best rack fits 4 of 5 pods; limited by cpu (2 nodes)",
			wantSignal: true,
		},
		// Kueue's reclaimable pods: finished for good, they free their
		// nodes before the workload ends.
		"reclaimable pods free the nodes where they succeeded": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 4), onHost("n2", 4)))
				c.SetPod(succeededPod("p1", "n2"))
				c.SetPod(succeededPod("p2", "n2"))
				c.SetPod(succeededPod("p3", "n1"))
				wl := admittedWorkload("a", "11", onHost("n1", 4), onHost("n2", 4))
				wl.Status.ReclaimablePods = []strata.ReclaimablePod{{Name: podSetName, Count: 2}}
				if err := c.SyncAdmitted(key("a"), wl); err != nil {
					t.Fatal(err)
				}
			},
			count:      2,
			want:       map[string]int32{"n1": 1, "n2": 1},
			wantSignal: true,
		},
		"reclaimable pods counted before their pods are seen free their nodes once seen": {
			steps: func(t *testing.T, c *Cache) {
				wl := admittedWorkload("a", "10", onHost("n1", 4), onHost("n2", 4))
				wl.Status.ReclaimablePods = []strata.ReclaimablePod{{Name: podSetName, Count: 3}}
				addWorkload(t, c, wl)
				c.SetPod(succeededPod("p1", "n2"))
				c.SetPod(succeededPod("p2", "n2"))
				c.SetPod(succeededPod("p3", "n2"))
				c.SetPod(succeededPod("p4", "n2")) // beyond the 3: not released
			},
			count:      3,
			want:       map[string]int32{"n2": 3},
			wantSignal: true,
		},
		"usage is kept across a rebuild": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
			},
			count:      7,
			want:       "rack required: the best rack fits 6 of 7 pods; limited by cpu (2 nodes)",
			wantSignal: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
			tc.steps(t, c)
			if got := signalled(c.Changed()); got != tc.wantSignal {
				t.Errorf("Changed() signalled = %v, want %v", got, tc.wantSignal)
			}
			if diff := cmp.Diff(tc.want, placement(t, c, tc.count)); diff != "" {
				t.Errorf("placement of %d pods (-want,+got):\n%s", tc.count, diff)
			}
		})
	}
}

func TestAddWorkloadErrors(t *testing.T) {
	cases := map[string]struct {
		wl      func() *strata.Workload
		wantErr string
	}{
		"pod set not in the workload": {
			wl: func() *strata.Workload {
				wl := admittedWorkload("a", "10", onHost("n1", 1))
				wl.Status.Admission.PodSetAssignments[0].Name = "other"
				return wl
			},
			wantErr: `admission names pod set "other", which the workload does not have`,
		},
		"invalid topology assignment": {
			wl: func() *strata.Workload {
				wl := admittedWorkload("a", "10", onHost("n1", 1))
				wl.Status.Admission.PodSetAssignments[0].TopologyAssignment.Levels = nil
				return wl
			},
			wantErr: "pod set main: levels: at least one level is required",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"))
			err := c.AddWorkload(key("a"), tc.wl())
			if err == nil {
				t.Fatalf("AddWorkload() succeeded, want error %q", tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("AddWorkload() error (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int32{"n1": 4}, placement(t, c, 4)); diff != "" {
				t.Errorf("placement after a failed AddWorkload() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeletedNodeLabels(t *testing.T) {
	n1, n2 := node("n1", "r1"), node("n2", "r1")
	cases := map[string]struct {
		steps func(t *testing.T, c *Cache)
		node  string
		want  map[string]string
	}{
		"a node that is not deleted": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
			},
			node: "n1",
		},
		"a deleted node with an admitted workload": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
			},
			node: "n1",
			want: n1.Labels,
		},
		"a deleted node whose workload was removed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
				c.RemoveWorkload(key("a"))
			},
			node: "n1",
		},
		"a deleted node with one of two workloads removed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				addWorkload(t, c, admittedWorkload("b", "11", onHost("n1", 1)))
				c.DeleteNode("n1")
				c.RemoveWorkload(key("a"))
			},
			node: "n1",
			want: n1.Labels,
		},
		"a deleted node without workloads": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n2")
			},
			node: "n2",
		},
		"a deleted node whose replacement was reserved and then given back (the write failed)": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
				reserve(t, c, admittedWorkload("a", "10", onHost("n2", 2)))
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2))) // hot swap's restore
			},
			node: "n1",
			want: n1.Labels,
		},
		"a deleted node whose replacement was written": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
				reserve(t, c, admittedWorkload("a", "10", onHost("n2", 2)))
				if err := c.SyncAdmitted(key("a"), admittedWorkload("a", "11", onHost("n2", 2))); err != nil {
					t.Fatalf("SyncAdmitted: %v", err)
				}
			},
			node: "n1",
		},
		"a deleted node whose workload is recorded again in place": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
				addWorkload(t, c, admittedWorkload("a", "11", onHost("n1", 2)))
			},
			node: "n1",
			want: n1.Labels,
		},
		"a deleted node re-added": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.DeleteNode("n1")
				c.SetNode(n1)
			},
			node: "n1",
		},
		"an unknown node": {
			steps: func(*testing.T, *Cache) {},
			node:  "n9",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, n1, n2)
			tc.steps(t, c)
			if diff := cmp.Diff(tc.want, c.DeletedNodeLabels(tc.node)); diff != "" {
				t.Errorf("DeletedNodeLabels(%q) (-want,+got):\n%s", tc.node, diff)
			}
		})
	}
}

// reserve records wl's admission through Reserve, as hot swap does.
func reserve(t *testing.T, c *Cache, wl *strata.Workload) {
	t.Helper()
	found, err := c.Reserve(flavorName, key(wl.Name), func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) { return wl, nil })
	if !found || err != nil {
		t.Fatalf("Reserve(%s) = %v, %v", wl.Name, found, err)
	}
}

func TestRemoveWorkloadIfNewer(t *testing.T) {
	cases := map[string]struct {
		version       string
		wantKept      bool
		wantPlacement any
		wantOnNode    []types.NamespacedName
	}{
		"an older version": {
			version:       "9",
			wantKept:      true,
			wantPlacement: "rack required: the best rack fits 1 of 2 pods; limited by cpu (1 node)",
			wantOnNode:    []types.NamespacedName{key("a")},
		},
		"the same version": {
			version:       "10",
			wantKept:      true,
			wantPlacement: "rack required: the best rack fits 1 of 2 pods; limited by cpu (1 node)",
			wantOnNode:    []types.NamespacedName{key("a")},
		},
		"a newer version": {
			version:       "11",
			wantPlacement: map[string]int32{"n1": 2},
			wantOnNode:    []types.NamespacedName{},
		},
		"an unparsable version counts as newest": {
			version:       "",
			wantPlacement: map[string]int32{"n1": 2},
			wantOnNode:    []types.NamespacedName{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"))
			addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3)))
			evicted := admittedWorkload("a", tc.version)
			evicted.Status.Admission = nil
			c.RemoveWorkloadIfNewer(key("a"), evicted)
			if got := c.HasWorkload(key("a")); got != tc.wantKept {
				t.Errorf("HasWorkload() = %v, want %v", got, tc.wantKept)
			}
			if diff := cmp.Diff(tc.wantOnNode, c.WorkloadsOnNode("n1")); diff != "" {
				t.Errorf("WorkloadsOnNode() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPlacement, placement(t, c, 2)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestUsageAcrossNodeDeletion: usage on a node outlives the node, so that
// releasing it later neither underflows nor leaks into a node of the same
// name that comes back.
func TestUsageAcrossNodeDeletion(t *testing.T) {
	cases := map[string]struct {
		steps func(c *Cache)
		// want is the placement of 5 one-cpu pods in a rack afterwards (the
		// rack is one 4-cpu node).
		want any
	}{
		"workload released after its node was deleted, node back: the node is empty": {
			steps: func(c *Cache) {
				addWorkload(t, c, admittedWorkload("w", "1", onHost("n1", 3)))
				c.DeleteNode("n1")
				c.RemoveWorkload(key("w"))
				c.SetNode(node("n1", "r1"))
			},
			want: "rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)",
		},
		"node back while the workload is admitted: its usage still counts": {
			steps: func(c *Cache) {
				addWorkload(t, c, admittedWorkload("w", "1", onHost("n1", 3)))
				c.DeleteNode("n1")
				c.SetNode(node("n1", "r1"))
			},
			want: "rack required: the best rack fits 1 of 5 pods; limited by cpu (1 node)",
		},
		"a bound pod deleted after its node, node back: the node is empty": {
			steps: func(c *Cache) {
				c.SetPod(&corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"},
					Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
					}}}},
				})
				c.DeleteNode("n1")
				c.DeletePod("p")
				c.SetNode(node("n1", "r1"))
			},
			want: "rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"))
			tc.steps(c)
			if diff := cmp.Diff(tc.want, placement(t, c, 5)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRebuild: a flavor or topology change rebuilds the snapshots; the
// node index and the usage of workloads follow, including workloads whose
// usage could not be committed.
func TestRebuild(t *testing.T) {
	t.Run("the node index forgets removed workloads after a rebuild", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"))
		addWorkload(t, c, admittedWorkload("w", "1", onHost("n1", 1)))
		c.DeleteFlavor(flavorName)
		c.RemoveWorkload(key("w"))
		if got := c.WorkloadsOnNode("n1"); len(got) != 0 {
			t.Errorf("WorkloadsOnNode(n1) = %v after the workload was removed", got)
		}
	})
	t.Run("a workload whose commit failed holds no capacity, before or after a rebuild", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"))
		wl := admittedWorkload("w", "1", onHost("n1", 3))
		wl.Status.Admission.PodSetAssignments = append(wl.Status.Admission.PodSetAssignments, strata.PodSetAssignment{
			Name: "missing", Flavor: flavorName, Count: 1,
			TopologyAssignment: tas.Encode(&tas.Assignment{Levels: []string{hostLabel}, Domains: []tas.DomainAssignment{onHost("n1", 1)}}),
		})
		if err := c.AddWorkload(key("w"), wl); err == nil {
			t.Fatal("AddWorkload() of an admission naming a missing pod set succeeded")
		}
		if diff := cmp.Diff(map[string]int32{"n1": 4}, placement(t, c, 4)); diff != "" {
			t.Errorf("placement after the failed commit (-want,+got):\n%s", diff)
		}
		c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
		c.RemoveWorkload(key("w"))
		if diff := cmp.Diff(map[string]int32{"n1": 4}, placement(t, c, 4)); diff != "" {
			t.Errorf("placement after a rebuild and removal (-want,+got):\n%s", diff)
		}
	})
	t.Run("a workload admitted before its flavor exists is indexed on its nodes", func(t *testing.T) {
		c := New()
		addWorkload(t, c, admittedWorkload("w", "1", onHost("n1", 1)))
		if diff := cmp.Diff([]types.NamespacedName{key("w")}, c.WorkloadsOnNode("n1")); diff != "" {
			t.Errorf("WorkloadsOnNode(n1) (-want,+got):\n%s", diff)
		}
	})
}

func TestSyncAdmitted(t *testing.T) {
	onN1 := admittedWorkload("a", "10", onHost("n1", 3))
	cases := map[string]struct {
		held       *strata.Workload // recorded before, if any
		seen       *strata.Workload // what the informer shows
		wantOnN1   []types.NamespacedName
		wantOnN2   []types.NamespacedName
		wantPlaced any // 2 pods in the rack: where they still fit
	}{
		"not held: recorded": {
			seen:       onN1,
			wantOnN1:   []types.NamespacedName{key("a")},
			wantOnN2:   []types.NamespacedName{},
			wantPlaced: map[string]int32{"n2": 2},
		},
		"an older version with another admission: ignored": {
			held:       onN1,
			seen:       admittedWorkload("a", "9", onHost("n2", 3)),
			wantOnN1:   []types.NamespacedName{key("a")},
			wantOnN2:   []types.NamespacedName{},
			wantPlaced: map[string]int32{"n2": 2},
		},
		"a newer version with the same admission: kept": {
			held:       onN1,
			seen:       admittedWorkload("a", "11", onHost("n1", 3)),
			wantOnN1:   []types.NamespacedName{key("a")},
			wantOnN2:   []types.NamespacedName{},
			wantPlaced: map[string]int32{"n2": 2},
		},
		"a newer version with another admission (hot swap): the usage moves": {
			held:       onN1,
			seen:       admittedWorkload("a", "11", onHost("n2", 3)),
			wantOnN1:   []types.NamespacedName{},
			wantOnN2:   []types.NamespacedName{key("a")},
			wantPlaced: map[string]int32{"n1": 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
			if tc.held != nil {
				addWorkload(t, c, tc.held)
			}
			if err := c.SyncAdmitted(key("a"), tc.seen); err != nil {
				t.Fatalf("SyncAdmitted: %v", err)
			}
			if diff := cmp.Diff(tc.wantOnN1, c.WorkloadsOnNode("n1")); diff != "" {
				t.Errorf("WorkloadsOnNode(n1) (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOnN2, c.WorkloadsOnNode("n2")); diff != "" {
				t.Errorf("WorkloadsOnNode(n2) (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPlaced, placement(t, c, 2)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAdmittedVersion: the version held is the last admission recorded,
// moved by a newer version of the same admission (a write's result), so
// that a read from before that write is known to be behind.
func TestAdmittedVersion(t *testing.T) {
	c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
	if _, ok := c.AdmittedVersion(key("a")); ok {
		t.Fatal("AdmittedVersion of a workload not held: ok")
	}
	addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3)))
	for _, seen := range []*strata.Workload{
		admittedWorkload("a", "12", onHost("n1", 3)), // the write's result
		admittedWorkload("a", "11", onHost("n1", 3)), // a stale read: no step back
	} {
		if err := c.SyncAdmitted(key("a"), seen); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := c.AdmittedVersion(key("a")); !ok || v != 12 {
		t.Errorf("AdmittedVersion = %d, %t; want 12, true", v, ok)
	}
}

// tasPod is a running 1-cpu pod of workload "a" bound to node.
func tasPod(uid, node string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid),
			Labels: map[string]string{strata.WorkloadLabel: "a", strata.TASLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	return p
}

// ownedPod is p controlled by the Job of UID uid.
func ownedPod(p *corev1.Pod, uid types.UID) *corev1.Pod {
	p.OwnerReferences = jobOwner(uid)
	return p
}

// jobOwner is the controller reference to the Job of UID uid.
func jobOwner(uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "a", UID: uid, Controller: ptr.To(true)}}
}

// TestPodsCountUntilGone: the pods of a workload count through it while it
// is admitted, and on their own once it is not, until they end.
func TestPodsCountUntilGone(t *testing.T) {
	cases := map[string]struct {
		steps func(t *testing.T, c *Cache)
		want  any // placement of 8 pods in the rack
	}{
		"an admitted workload's pods count once": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.SetPod(tasPod("p2", "n1"))
			},
			want: "rack required: the best rack fits 6 of 8 pods; limited by cpu (2 nodes)",
		},
		"pods of a released workload count until they end": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.SetPod(tasPod("p2", "n1"))
				c.RemoveWorkload(key("a")) // the Job deleted with its pods orphaned
			},
			want: "rack required: the best rack fits 6 of 8 pods; limited by cpu (2 nodes)",
		},
		"pods seen before their workload's admission count through it": {
			steps: func(t *testing.T, c *Cache) {
				c.SetPod(tasPod("p1", "n2"))
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n2", 1)))
			},
			want: "rack required: the best rack fits 7 of 8 pods; limited by cpu (2 nodes)",
		},
		"a finished pod of a released workload gives its capacity back": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.SetPod(tasPod("p2", "n1"))
				c.RemoveWorkload(key("a"))
				done := tasPod("p1", "n1")
				done.Status.Phase = corev1.PodSucceeded
				c.SetPod(done)
				c.DeletePod("p2")
			},
			want: map[string]int32{"n1": 4, "n2": 4},
		},
		"pods of a workload admitted again count through it once more": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.RemoveWorkload(key("a"))
				addWorkload(t, c, admittedWorkload("a", "12", onHost("n2", 2)))
			},
			// n1: the old pod; n2: the new admission.
			want: "rack required: the best rack fits 5 of 8 pods; limited by cpu (2 nodes)",
		},
		"pods of an earlier Job of the same name count on their own": {
			steps: func(t *testing.T, c *Cache) {
				// Orphaned (no controller) and another Job's: neither is
				// the admitted Job's, whose reservation holds n1 too.
				c.SetPod(tasPod("p1", "n1"))
				c.SetPod(ownedPod(tasPod("p2", "n1"), "job-1"))
				wl := admittedWorkload("a", "10", onHost("n1", 2))
				wl.OwnerReferences = jobOwner("job-2")
				addWorkload(t, c, wl)
			},
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (2 nodes)",
		},
		"pods of the admitted Job count through it": {
			steps: func(t *testing.T, c *Cache) {
				c.SetPod(ownedPod(tasPod("p1", "n1"), "job-2"))
				p2 := tasPod("p2", "n1")
				p2.Labels[strata.OwnerUIDLabel] = "job-2" // a child's pod
				c.SetPod(p2)
				wl := admittedWorkload("a", "10", onHost("n1", 2))
				wl.OwnerReferences = jobOwner("job-2")
				addWorkload(t, c, wl)
			},
			want: "rack required: the best rack fits 6 of 8 pods; limited by cpu (2 nodes)",
		},
		"a pod orphaned while admitted counts on its own": {
			steps: func(t *testing.T, c *Cache) {
				wl := admittedWorkload("a", "10", onHost("n1", 2))
				wl.OwnerReferences = jobOwner("job-2")
				addWorkload(t, c, wl)
				c.SetPod(ownedPod(tasPod("p1", "n1"), "job-2"))
				c.SetPod(tasPod("p1", "n1")) // its controller reference removed
			},
			want: "rack required: the best rack fits 5 of 8 pods; limited by cpu (2 nodes)",
		},
		"released pods count across a rebuild": {
			steps: func(t *testing.T, c *Cache) {
				c.SetPod(tasPod("p1", "n1"))
				c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
			},
			want: "rack required: the best rack fits 7 of 8 pods; limited by cpu (2 nodes)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
			tc.steps(t, c)
			if diff := cmp.Diff(tc.want, placement(t, c, 8)); diff != "" {
				t.Errorf("placement of 8 pods (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReserve: searching and taking capacity is one step, and a placement
// that no longer fits is refused instead of over-filling a node.
func TestReserve(t *testing.T) {
	find := func(name string) func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) {
		return func(s *tas.Snapshot, _ *strata.Topology) (*strata.Workload, error) {
			a, err := s.FindAssignment(tas.Request{Count: 4, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Mode: tas.Required, Level: hostLabel}, tas.DefaultOptions())
			if err != nil {
				return nil, err
			}
			return admittedWorkload(name, "10", a.Domains...), nil
		}
	}
	t.Run("concurrent searches for the one free node", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"))
		const searches = 20
		errs := make(chan error, searches)
		for i := range searches {
			go func() {
				_, err := c.Reserve(flavorName, key(fmt.Sprint("w", i)), find(fmt.Sprint("w", i)))
				errs <- err
			}()
		}
		won := 0
		for range searches {
			if err := <-errs; err == nil {
				won++
			}
		}
		if won != 1 {
			t.Errorf("%d searches took the one free node, want 1", won)
		}
	})
	t.Run("a placement found on an older state is refused", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
		addWorkload(t, c, admittedWorkload("old", "9", onHost("n1", 3)))
		_, err := c.Reserve(flavorName, key("w"), func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) {
			return admittedWorkload("w", "10", onHost("n1", 4)), nil // seen before "old" took n1
		})
		var fit *tas.FitError
		if !errors.As(err, &fit) {
			t.Fatalf("Reserve() = %v, want a *tas.FitError", err)
		}
		if c.HasWorkload(key("w")) {
			t.Error("the refused workload holds capacity")
		}
		if diff := cmp.Diff(map[string]int32{"n2": 4}, placement(t, c, 4)); diff != "" {
			t.Errorf("capacity after the refusal (-want,+got):\n%s", diff)
		}
	})
	t.Run("a refused replacement keeps what the workload held", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
		addWorkload(t, c, admittedWorkload("w", "9", onHost("n1", 2)))
		addWorkload(t, c, admittedWorkload("other", "9", onHost("n2", 3)))
		_, err := c.Reserve(flavorName, key("w"), func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) {
			return admittedWorkload("w", "10", onHost("n2", 2)), nil
		})
		if err == nil {
			t.Fatal("Reserve() over-filled n2")
		}
		if diff := cmp.Diff("rack required: the best rack fits 3 of 4 pods; limited by cpu (2 nodes)", placement(t, c, 4)); diff != "" {
			t.Errorf("capacity after the refusal (-want,+got):\n%s", diff)
		}
	})
	t.Run("a replacement keeps the nodes where the workload's pods run", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"), node("n3", "r1"))
		addWorkload(t, c, admittedWorkload("a", "9", onHost("n1", 2), onHost("n2", 2)))
		addWorkload(t, c, admittedWorkload("other", "9", onHost("n1", 2)))
		for i, n := range []string{"n1", "n1", "n2", "n2"} {
			c.SetPod(tasPod(fmt.Sprint("p", i), n))
		}
		// n2 failed: n1 keeps its two pods, n3 takes n2's.
		if _, err := c.Reserve(flavorName, key("a"), func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) {
			return admittedWorkload("a", "10", onHost("n1", 2), onHost("n3", 2)), nil
		}); err != nil {
			t.Fatalf("Reserve(): %v", err)
		}
		// n1: a's 2 and other's 2; n2: a's 2 old pods, still running; n3: a's 2.
		if diff := cmp.Diff("rack required: the best rack fits 4 of 7 pods; limited by cpu (3 nodes)", placement(t, c, 7)); diff != "" {
			t.Errorf("capacity after the replacement (-want,+got):\n%s", diff)
		}
	})
	t.Run("an unknown flavor", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"))
		if found, _ := c.Reserve("nope", key("w"), find("w")); found {
			t.Error("Reserve() found flavor nope")
		}
	})
}

// dispatched is wl labelled as the copy of hub workload uid at dispatch
// generation gen.
func dispatched(wl *strata.Workload, uid, gen string) *strata.Workload {
	metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.HubWorkloadUIDLabel, uid)
	metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.DispatchGenerationLabel, gen)
	return wl
}

// onFlavor is wl with its admission on flavor f.
func onFlavor(wl *strata.Workload, f string) *strata.Workload {
	for i := range wl.Status.Admission.PodSetAssignments {
		wl.Status.Admission.PodSetAssignments[i].Flavor = f
	}
	return wl
}

// TestCaptureDispatches: a flavor's capture lists the dispatch of every
// workload whose usage it counts, from the moment the cache counts it
// (the scheduler's Reserve included) until it releases it.
func TestCaptureDispatches(t *testing.T) {
	reserve := func(t *testing.T, c *Cache, wl *strata.Workload) error {
		t.Helper()
		_, err := c.Reserve(wl.Status.Admission.PodSetAssignments[0].Flavor, key(wl.Name), func(*tas.Snapshot, *strata.Topology) (*strata.Workload, error) {
			return wl, nil
		})
		return err
	}
	cases := map[string]struct {
		steps func(t *testing.T, c *Cache)
		want  map[string][]string // by flavor, sorted
	}{
		"no workloads": {
			steps: func(*testing.T, *Cache) {},
			want:  map[string][]string{flavorName: {}, "other": {}},
		},
		"a workload of no hub is not listed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 1)))
			},
			want: map[string][]string{flavorName: {}, "other": {}},
		},
		"a hub's copy is listed on its flavor only": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				addWorkload(t, c, onFlavor(dispatched(admittedWorkload("b", "10", onHost("o1", 1)), "u2", "3"), "other"))
				addWorkload(t, c, dispatched(admittedWorkload("c", "10", onHost("n2", 1)), "u0", "2"))
			},
			want: map[string][]string{flavorName: {"u0/2", "u1/1"}, "other": {"u2/3"}},
		},
		"one label alone is not a dispatch": {
			steps: func(t *testing.T, c *Cache) {
				wl := admittedWorkload("a", "10", onHost("n1", 1))
				metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.HubWorkloadUIDLabel, "u1")
				addWorkload(t, c, wl)
				wl = admittedWorkload("b", "10", onHost("n1", 1))
				metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.DispatchGenerationLabel, "1")
				addWorkload(t, c, wl)
			},
			want: map[string][]string{flavorName: {}, "other": {}},
		},
		"listed from the scheduler's Reserve, before the admission is written": {
			steps: func(t *testing.T, c *Cache) {
				if err := reserve(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 4)), "u1", "1")); err != nil {
					t.Fatalf("Reserve(): %v", err)
				}
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"a refused Reserve lists nothing": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("full", "10", onHost("n1", 4)))
				if err := reserve(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1")); err == nil {
					t.Fatal("Reserve() over-filled n1")
				}
			},
			want: map[string][]string{flavorName: {}, "other": {}},
		},
		"released: no longer listed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				addWorkload(t, c, dispatched(admittedWorkload("b", "10", onHost("n1", 1)), "u2", "1"))
				c.RemoveWorkload(key("a"))
			},
			want: map[string][]string{flavorName: {"u2/1"}, "other": {}},
		},
		"evicted, as a newer version without admission shows: no longer listed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				evicted := dispatched(admittedWorkload("a", "11", onHost("n1", 1)), "u1", "1")
				evicted.Status.Admission = nil
				c.RemoveWorkloadIfNewer(key("a"), evicted)
			},
			want: map[string][]string{flavorName: {}, "other": {}},
		},
		"recorded without usage (its commit failed): not listed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				wl := dispatched(admittedWorkload("b", "10", onHost("n1", 1)), "u2", "1")
				wl.Status.Admission.PodSetAssignments[0].Name = "missing"
				if err := c.AddWorkload(key("b"), wl); err == nil {
					t.Fatal("AddWorkload() of an admission naming a missing pod set succeeded")
				}
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"listed once its flavor appears": {
			steps: func(t *testing.T, c *Cache) {
				c.DeleteFlavor(flavorName)
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				c.SetFlavor(testutil.MakeResourceFlavor(flavorName).NodeLabel("pool", "tas").TopologyName("default").Obj())
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"kept across a rebuild": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"two workloads of one dispatch: listed once, until both are released": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				addWorkload(t, c, dispatched(admittedWorkload("b", "10", onHost("n2", 1)), "u1", "1"))
				c.RemoveWorkload(key("a"))
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"a dispatch of 2 Workloads (a LeaderWorkerSet's groups): listed once both count": {
			steps: func(t *testing.T, c *Cache) {
				groups := func(wl *strata.Workload) *strata.Workload {
					metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.DispatchWorkloadsAnnotation, "2")
					return dispatched(wl, "u1", "1")
				}
				addWorkload(t, c, groups(admittedWorkload("g0", "10", onHost("n1", 1))))
				if got, _ := c.Capture(flavorName, nil); len(got.Dispatches) != 0 {
					t.Errorf("one group of two admitted: listed %v", got.Dispatches)
				}
				addWorkload(t, c, groups(admittedWorkload("g1", "10", onHost("n2", 1))))
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"a dispatch of 2 Workloads, one released: no longer listed": {
			steps: func(t *testing.T, c *Cache) {
				for _, name := range []string{"g0", "g1"} {
					wl := dispatched(admittedWorkload(name, "10", onHost("n1", 1)), "u1", "1")
					metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.DispatchWorkloadsAnnotation, "2")
					addWorkload(t, c, wl)
				}
				c.RemoveWorkload(key("g0"))
			},
			want: map[string][]string{flavorName: {}, "other": {}},
		},
		"moved by hot swap: still listed": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, dispatched(admittedWorkload("a", "10", onHost("n1", 1)), "u1", "1"))
				if err := c.SyncAdmitted(key("a"), dispatched(admittedWorkload("a", "11", onHost("n2", 1)), "u1", "1")); err != nil {
					t.Fatalf("SyncAdmitted(): %v", err)
				}
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
		"labelled after its admission: listed from then on, and after a rebuild": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 1)))
				if err := c.SyncAdmitted(key("a"), dispatched(admittedWorkload("a", "11", onHost("n1", 1)), "u1", "1")); err != nil {
					t.Fatalf("SyncAdmitted(): %v", err)
				}
				c.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
			},
			want: map[string][]string{flavorName: {"u1/1"}, "other": {}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
			c.SetFlavor(testutil.MakeResourceFlavor("other").NodeLabel("pool", "other").TopologyName("default").Obj())
			c.SetNode(changed(node("o1", "r2"), func(n *corev1.Node) { n.Labels["pool"] = "other" }))
			tc.steps(t, c)
			got := map[string][]string{}
			for _, f := range []string{flavorName, "other"} {
				captured, ok := c.Capture(f, nil)
				capacity, dispatches := captured.Capacity, captured.Dispatches
				if !ok || capacity == nil {
					t.Fatalf("Capture(%s) found no flavor", f)
				}
				slices.Sort(dispatches)
				got[f] = dispatches
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("dispatches by flavor (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("an unknown flavor", func(t *testing.T) {
		c, _ := newCache(t, node("n1", "r1"))
		if _, ok := c.Capture("nope", nil); ok {
			t.Error("Capture() found flavor nope")
		}
	})
}

// TestQuotaOn: a band's quota is what the workload's pod sets admitted on
// the flavor hold, less their reclaimable pods.
func TestQuotaOn(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	wl := &strata.Workload{}
	wl.Status.Admission = &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{
		{Name: "a", Flavor: "gpu", Count: 4, ResourceUsage: cpus("8")},
		{Name: "b", Flavor: "cpu", Count: 1, ResourceUsage: cpus("3")},
	}}
	wl.Status.ReclaimablePods = []strata.ReclaimablePod{{Name: "a", Count: 1}}
	if diff := cmp.Diff(cpus("6"), quotaOn(wl, "gpu"), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("quotaOn gpu (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(cpus("3"), quotaOn(wl, "cpu"), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("quotaOn cpu (-want,+got):\n%s", diff)
	}
}

// TestCaptureCountsDelayedReservations: a reservation whose topology a
// ProvisioningRequest check delays holds no node, and its quota counts in
// its queue's usage in the summary (the hub must not see it free).
func TestCaptureCountsDelayedReservations(t *testing.T) {
	c, _ := newCache(t, node("n1", "r1"))
	wl := testutil.MakeWorkload("delayed", "ns").PodSets(testutil.MakePodSet(podSetName, 4, "cpu", "1").Obj()).
		Admission(&strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{{
			Name: podSetName, Flavor: flavorName, Count: 4,
			ResourceUsage:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			DelayedTopologyRequest: ptr.To(strata.DelayedTopologyRequestPending),
		}}}).Obj()
	wl.ResourceVersion = "10"
	addWorkload(t, c, wl)
	captured, ok := c.Capture(flavorName, nil)
	if !ok {
		t.Fatal("Capture() found no flavor")
	}
	want := map[string]corev1.ResourceList{"cq": {corev1.ResourceCPU: resource.MustParse("4")}}
	if diff := cmp.Diff(want, captured.Usage, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("captured queue usage (-want,+got):\n%s", diff)
	}
}

// TestCaptureVictims: the summary's preemptible entries for the victims'
// queues: all of a queue's workloads for one that preempts within
// itself, and for one a peer reclaims from, what it borrows (counted from
// the workloads admitted on the flavor) taken back in Kueue's order.
func TestCaptureVictims(t *testing.T) {
	c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
	for _, wl := range []*strata.Workload{admittedWorkload("a", "10", onHost("n1", 2)), admittedWorkload("b", "10", onHost("n2", 1))} {
		psa := &wl.Status.Admission.PodSetAssignments[0]
		psa.ResourceUsage = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(psa.Count), resource.DecimalSI)}
		addWorkload(t, c, wl)
	}
	cq := testutil.MakeClusterQueue("cq").Cohort("teams").ResourceGroup("cpu").GroupFlavor(flavorName, "1").Obj()
	type entry struct {
		Queue               string
		Priority, Workloads int32
		Reclaim             bool
		CPUs                string
	}
	for name, tc := range map[string]struct {
		victims *preemption.Victims
		want    []entry
	}{
		"none":   {},
		"within": {victims: &preemption.Victims{Within: map[string]bool{"cq": true}}, want: []entry{{"cq", 0, 2, false, "3"}}},
		"reclaimed: it borrows 2 of its 3, ns/a goes first and gives them back": {
			victims: &preemption.Victims{Reclaimed: map[string]*strata.ClusterQueue{"cq": cq}},
			want:    []entry{{"cq", 0, 1, true, "2"}},
		},
		"both": {
			victims: &preemption.Victims{Within: map[string]bool{"cq": true}, Reclaimed: map[string]*strata.ClusterQueue{"cq": cq}},
			want:    []entry{{"cq", 0, 2, false, "3"}, {"cq", 0, 1, true, "2"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			captured, ok := c.Capture(flavorName, tc.victims)
			if !ok {
				t.Fatal("Capture() found no flavor")
			}
			if got := captured.Usage["cq"][corev1.ResourceCPU]; got.String() != "3" {
				t.Errorf("cq's usage: %s CPUs, want 3", got.String())
			}
			st, err := captured.Capacity.Summarize(math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			var got []entry
			for _, e := range st.Preemptible {
				got = append(got, entry{e.ClusterQueue, e.Priority, e.Workloads, e.Reclaim, e.Requests.Cpu().String()})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemptible (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("the scheduler's holds count in the queues' usage", func(t *testing.T) {
		c.SetPreemptionHolds(map[string]map[string]corev1.ResourceList{flavorName: {"cq": {corev1.ResourceCPU: resource.MustParse("2")}, "other": {corev1.ResourceCPU: resource.MustParse("1")}}})
		defer c.SetPreemptionHolds(nil)
		captured, _ := c.Capture(flavorName, nil)
		if got := captured.Usage["cq"][corev1.ResourceCPU]; got.String() != "5" {
			t.Errorf("cq's usage with a hold of 2: %s CPUs, want 5", got.String())
		}
		if got := captured.Usage["other"][corev1.ResourceCPU]; got.String() != "1" {
			t.Errorf("a queue with only a hold: %s CPUs, want 1", got.String())
		}
	})
}

// TestReservationFollowsPods: on a topology without a host level, the
// admission assigns pods to racks and Commit packs them onto nodes of its
// choosing; kube-scheduler picks others in the rack. The reservation
// moves to the nodes the pods run on, so that the rack counts each pod
// once.
func TestReservationFollowsPods(t *testing.T) {
	rackWorkload := func(count int32) *strata.Workload {
		wl := admittedWorkload("a", "10")
		wl.Spec.PodSets = []strata.PodSet{testutil.MakePodSet(podSetName, count, "cpu", "1").Obj()}
		wl.Status.Admission.PodSetAssignments[0].Count = count
		wl.Status.Admission.PodSetAssignments[0].TopologyAssignment = tas.Encode(&tas.Assignment{
			Levels: []string{rackLabel}, Domains: []tas.DomainAssignment{{Values: []string{"r1"}, Count: count}},
		})
		return wl
	}
	// room is how many more 1-cpu pods each rack takes.
	room := func(t *testing.T, c *Cache) map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		c.Flavor(flavorName, func(s *tas.Snapshot, _ *strata.Topology) {
			for _, r := range []string{"r1", "r2"} {
				n, err := s.Room([]string{r}, tas.Request{PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
				if err != nil {
					t.Fatal(err)
				}
				out[r] = n
			}
		})
		return out
	}
	cases := map[string]struct {
		pods map[string]string // pod -> node
		want map[string]int64
	}{
		"pods where the reservation packed them": {
			pods: map[string]string{"p1": "n1", "p2": "n1", "p3": "n1", "p4": "n1"},
			want: map[string]int64{"r1": 4, "r2": 4},
		},
		"pods spread by kube-scheduler: the reservation follows": {
			pods: map[string]string{"p1": "n1", "p2": "n1", "p3": "n2", "p4": "n2"},
			want: map[string]int64{"r1": 4, "r2": 4},
		},
		"all on the node the reservation missed": {
			pods: map[string]string{"p1": "n2", "p2": "n2", "p3": "n2", "p4": "n2"},
			want: map[string]int64{"r1": 4, "r2": 4},
		},
		"a pod in another rack counts on its own there": {
			pods: map[string]string{"p1": "n1", "p2": "n1", "p3": "n2", "p4": "n3"},
			want: map[string]int64{"r1": 4, "r2": 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := New()
			c.SetTopology(testutil.MakeTopology("racks", rackLabel).Obj())
			c.SetFlavor(testutil.MakeResourceFlavor(flavorName).NodeLabel("pool", "tas").TopologyName("racks").Obj())
			for _, n := range []*corev1.Node{node("n1", "r1"), node("n2", "r1"), node("n3", "r2")} {
				c.SetNode(n)
			}
			addWorkload(t, c, rackWorkload(4))
			for _, p := range slices.Sorted(maps.Keys(tc.pods)) {
				c.SetPod(tasPod(p, tc.pods[p]))
			}
			if diff := cmp.Diff(tc.want, room(t, c)); diff != "" {
				t.Errorf("room per rack (-want,+got):\n%s", diff)
			}
			// Removed, the workload gives back exactly what it took: once
			// its pods are gone too, the racks are empty.
			c.RemoveWorkload(key("a"))
			for p := range tc.pods {
				c.DeletePod(types.UID(p))
			}
			if diff := cmp.Diff(map[string]int64{"r1": 8, "r2": 4}, room(t, c)); diff != "" {
				t.Errorf("after the workload and its pods are gone (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHolds: a workload holds capacity while admitted, or while pods of it
// run on a node placement may use.
func TestHolds(t *testing.T) {
	cases := map[string]struct {
		steps func(t *testing.T, c *Cache)
		want  bool
	}{
		"nothing of it": {
			steps: func(*testing.T, *Cache) {},
		},
		"admitted": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
			},
			want: true,
		},
		"evicted, its pods still on a Ready node": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.RemoveWorkload(key("a"))
			},
			want: true,
		},
		"evicted, its pods stuck on a node that is not Ready": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.RemoveWorkload(key("a"))
				c.SetNode(changed(node("n1", "r1"), setNotReady))
			},
		},
		"evicted, one pod on a node that is not Ready, one on a Ready node": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 1), onHost("n2", 1)))
				c.SetPod(tasPod("p1", "n1"))
				c.SetPod(tasPod("p2", "n2"))
				c.RemoveWorkload(key("a"))
				c.SetNode(changed(node("n1", "r1"), setNotReady))
			},
			want: true,
		},
		"evicted, its pods on a deleted node": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetPod(tasPod("p1", "n1"))
				c.RemoveWorkload(key("a"))
				c.DeleteNode("n1")
			},
		},
		"admitted, on a node that is not Ready": {
			steps: func(t *testing.T, c *Cache) {
				addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 2)))
				c.SetNode(changed(node("n1", "r1"), setNotReady))
			},
			want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"), node("n2", "r1"))
			tc.steps(t, c)
			if got := c.Holds(key("a")); got != tc.want {
				t.Errorf("Holds() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestSynced: the cache is synced once every informer handler has
// delivered its initial objects, and is rebuilt then.
func TestSynced(t *testing.T) {
	c, _ := newCache(t, node("n1", "r1"))
	var done bool
	c.synced = append(c.synced, func() bool { return done })
	if c.Synced() {
		t.Fatal("Synced() before the handler synced")
	}
	if c.rebuilt {
		t.Fatal("rebuilt before the handler synced")
	}
	done = true
	if !c.Synced() || !c.rebuilt {
		t.Fatalf("Synced() = false or not rebuilt after the handler synced")
	}
	if !c.WaitForSync(t.Context()) {
		t.Fatal("WaitForSync() = false once synced")
	}
}

// TestEnsureAccountedSkipsDeleted: a scheduling pass's list of admitted
// workloads, read before one of them was deleted, does not account the
// deleted one again (its capacity would stay taken, with no event left to
// give it back); a workload the cache does not hold yet is accounted, and
// a new one under the deleted one's name too.
func TestEnsureAccountedSkipsDeleted(t *testing.T) {
	cases := map[string]struct {
		uid           types.UID
		wantKept      bool
		wantPlacement any
	}{
		"the deleted workload, listed before its deletion": {
			uid:           "uid-a",
			wantPlacement: map[string]int32{"n1": 2},
		},
		"another workload of the same name": {
			uid:           "uid-a2",
			wantKept:      true,
			wantPlacement: "rack required: the best rack fits 1 of 2 pods; limited by cpu (1 node)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"))
			wl := admittedWorkload("a", "10", onHost("n1", 3))
			wl.UID = "uid-a"
			addWorkload(t, c, wl)
			c.ForgetWorkload(key("a"), wl.UID)
			listed := wl.DeepCopy()
			listed.UID = tc.uid
			if err := c.EnsureAccounted([]*strata.Workload{listed}); err != nil {
				t.Fatal(err)
			}
			if got := c.HasWorkload(key("a")); got != tc.wantKept {
				t.Errorf("HasWorkload() = %v, want %v", got, tc.wantKept)
			}
			if diff := cmp.Diff(tc.wantPlacement, placement(t, c, 2)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestEnsureAccountedSkipsReleased: a pass's list of admitted workloads,
// read before the informer showed one's admission taken back, does not
// account it again; an admission newer than the take-back is accounted.
func TestEnsureAccountedSkipsReleased(t *testing.T) {
	cases := map[string]struct {
		listed        string
		wantKept      bool
		wantPlacement any
	}{
		"the admission taken back": {
			listed:        "10",
			wantPlacement: map[string]int32{"n1": 2},
		},
		"an admission after the take-back": {
			listed:        "12",
			wantKept:      true,
			wantPlacement: "rack required: the best rack fits 1 of 2 pods; limited by cpu (1 node)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := newCache(t, node("n1", "r1"))
			addWorkload(t, c, admittedWorkload("a", "10", onHost("n1", 3)))
			evicted := admittedWorkload("a", "11")
			evicted.Status.Admission = nil
			c.RemoveWorkloadIfNewer(key("a"), evicted)
			if err := c.EnsureAccounted([]*strata.Workload{admittedWorkload("a", tc.listed, onHost("n1", 3))}); err != nil {
				t.Fatal(err)
			}
			if got := c.HasWorkload(key("a")); got != tc.wantKept {
				t.Errorf("HasWorkload() = %v, want %v", got, tc.wantKept)
			}
			if diff := cmp.Diff(tc.wantPlacement, placement(t, c, 2)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}
