package tas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// place returns the host counts of a required-rack placement, or the error text.
func place(t *testing.T, s *Snapshot, req Request) any {
	t.Helper()
	a, err := s.FindAssignment(req, DefaultOptions())
	if err != nil {
		return err.Error()
	}
	got := map[string]int32{}
	for _, d := range a.Domains {
		got[d.Values[len(d.Values)-1]] = d.Count
	}
	return got
}

func TestCapacity(t *testing.T) {
	levels := []string{rack, host}
	base := []node{{"n1", "", "r1", "4"}, {"n2", "", "r1", "4"}}
	oneRack := Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: rack}
	cases := map[string]struct {
		change func(s *Snapshot)
		req    Request
		want   any
	}{
		"all nodes free": {
			req:  oneRack,
			want: map[string]int32{"n1": 4, "n2": 4},
		},
		"a NotReady node has no capacity": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				n.Ready = false
				s.SetNode(n)
			},
			req:  oneRack,
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (1 node)",
		},
		"an unschedulable node has no capacity": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				n.Unschedulable = true
				s.SetNode(n)
			},
			req:  oneRack,
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (1 node)",
		},
		"usage of other pods is subtracted, and given back": {
			change: func(s *Snapshot) {
				s.AddUsage("n1", cpu("3"), 1)
				s.AddUsage("n2", cpu("2"), 1)
				s.AddUsage("n2", cpu("2"), -1)
			},
			req:  Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: map[string]int32{"n1": 1, "n2": 4},
		},
		"usage recorded before the node appears applies to it": {
			change: func(s *Snapshot) {
				s.RemoveNode("n2")
				s.AddUsage("n2", cpu("4"), 1)
				s.SetNode(base[1].engineNode())
			},
			req:  oneRack,
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (2 nodes)",
		},
		"the pods resource limits pods per node": {
			change: func(s *Snapshot) {
				s.AddUsage("n1", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("109")}, 1)
			},
			req:  Request{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: "rack required: the best rack fits 5 of 6 pods; limited by cpu (1 node), pods (1 node)",
		},
		"a node that loses its labels leaves the tree": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				delete(n.Labels, rack)
				if s.SetNode(n) {
					t.Error("SetNode() = true for a node without the rack label")
				}
			},
			req:  oneRack,
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (1 node)",
		},
		"a node of another flavor is not in the tree": {
			change: func(s *Snapshot) {
				n := node{"n3", "", "r1", "64"}.engineNode()
				n.Labels["pool"] = "other"
				s.SetNode(n)
			},
			req:  Request{Count: 9, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: "rack required: the best rack fits 8 of 9 pods; limited by cpu (2 nodes)",
		},
		"a node that moves to another rack": {
			change: func(s *Snapshot) {
				s.SetNode(node{"n2", "", "r2", "4"}.engineNode())
			},
			req:  Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: map[string]int32{"n1": 4},
		},
		"an untolerated NoSchedule taint skips the node": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				n.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
				s.SetNode(n)
			},
			req:  oneRack,
			want: "rack required: the best rack fits 4 of 8 pods; limited by cpu (1 node); 1 node skipped: untolerated taints or node selector/affinity",
		},
		"a tolerated taint does not": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				n.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
				s.SetNode(n)
			},
			req: Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: rack,
				Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}},
			want: map[string]int32{"n1": 4, "n2": 4},
		},
		"a PreferNoSchedule taint does not": {
			change: func(s *Snapshot) {
				n := base[1].engineNode()
				n.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectPreferNoSchedule}}
				s.SetNode(n)
			},
			req:  oneRack,
			want: map[string]int32{"n1": 4, "n2": 4},
		},
		"the node selector skips other nodes": {
			req: Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack,
				NodeSelector: map[string]string{host: "n2"}},
			want: map[string]int32{"n2": 4},
		},
		"required node affinity skips other nodes": {
			req: Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: rack,
				NodeAffinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: host, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}},
				}}}},
			want: "rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node); 1 node skipped: untolerated taints or node selector/affinity",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(levels, base...)
			if tc.change != nil {
				tc.change(s)
			}
			if diff := cmp.Diff(tc.want, place(t, s, tc.req)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRemoveNodePrunesEmptyDomains(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"a", "b1", "r1", "1"}, node{"b", "b2", "r1", "1"})
	s.RemoveNode("b")
	if got := len(s.byLevel[0]); got != 1 {
		t.Errorf("blocks after removing b2's only node = %d, want 1", got)
	}
	if got := len(s.domains); got != 3 {
		t.Errorf("domains = %d, want 3 (b1, b1/r1, b1/r1/a)", got)
	}
	if got := s.NodeCount(); got != 1 {
		t.Errorf("NodeCount() = %d, want 1", got)
	}
}

func TestSummarySnapshot(t *testing.T) {
	s := NewSummarySnapshot([]string{block, rack, host})
	free := func(c string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c), corev1.ResourcePods: resource.MustParse("110")}
	}
	for _, b := range []struct {
		values []string
		cpu    string
		count  int64
	}{
		{[]string{"b1", "r1"}, "8", 2},
		{[]string{"b1", "r1"}, "2", 3},
		{[]string{"b1", "r2"}, "4", 4},
	} {
		if err := s.AddBins(b.values, free(b.cpu), b.count); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddBins([]string{"b1"}, free("1"), 1); err == nil {
		t.Error("AddBins() with one value for two levels succeeded")
	}
	cases := map[string]struct {
		req  Request
		want any
	}{
		"a rack holding the pods node by node": {
			req: Request{Count: 22, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r1"}, Count: 22}}},
		},
		"pods that need a whole host": {
			req: Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: host},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r1"}, Count: 8}}},
		},
		"too many for one host": {
			req:  Request{Count: 9, PodRequests: cpu("1"), Mode: Required, Level: host},
			want: "host required: the best host fits 8 of 9 pods; limited by cpu (1 node)",
		},
		"preferred host climbs to the tightest rack": {
			req: Request{Count: 9, PodRequests: cpu("1"), Mode: Preferred, Level: host},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r2"}, Count: 9}}},
		},
		"host slices count whole slices per bucket host": {
			// r1: 2 hosts x 2 slices + 3 hosts x 0; r2: 4 hosts x 1. Equal
			// slices, r2 has less room left over.
			req: Request{Count: 16, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 4}}},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r2"}, Count: 16}}},
		},
		"host slices that need a second rack": {
			// The hosts of both racks are filled together, as Kueue's
			// engine does above the slice level: r1's two hosts of two
			// slices, then one of r2's: three hosts, not five.
			req: Request{Count: 20, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 4}}},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r1"}, Count: 16}, {Values: []string{"b1", "r2"}, Count: 4}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := s.FindAssignment(tc.req, DefaultOptions())
			var got any = a
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindAssignment() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCommitOfAResourceTheNodesDoNotList: an admitted workload's usage of
// a resource no node of the snapshot lists yet (a device plugin registers
// its GPUs after the node joined, and the agent's cache sees the workload
// first) is recorded, not a crash; the node's capacity, once it lists the
// resource, counts it as used.
func TestCommitOfAResourceTheNodesDoNotList(t *testing.T) {
	const gpu = corev1.ResourceName("nvidia.com/gpu")
	s := NewSnapshot([]string{"rack", corev1.LabelHostname}, nil)
	node := Node{Name: "n0", Labels: map[string]string{"rack": "r0", corev1.LabelHostname: "n0"}, Ready: true,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}}
	s.SetNode(node)
	a := &Assignment{Levels: []string{corev1.LabelHostname}, Domains: []DomainAssignment{{Values: []string{"n0"}, Count: 1}}}
	if _, err := s.Commit(a, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("4")}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	node.Allocatable[gpu] = resource.MustParse("4")
	s.SetNode(node)
	if _, err := s.FindAssignment(Request{Count: 1, PodRequests: corev1.ResourceList{gpu: resource.MustParse("1")}}, Options{}); err == nil {
		t.Errorf("a GPU fits where the committed workload holds all 4")
	}
	if _, err := s.FindAssignment(Request{Count: 1, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}}, Options{}); err != nil {
		t.Errorf("the 7 CPUs left do not fit: %v", err)
	}
}
