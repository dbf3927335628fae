package kubectlstrata

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

const (
	blockLevel = "cloud.provider.com/topology-block"
	rackLevel  = "cloud.provider.com/topology-rack"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
)

// gib is a GiB in the milli-units of a summary.
const gib = int64(1) << 30 * 1000

// gpuSummary is a summary of six 8-GPU nodes in two blocks: rack r1 idle,
// r2 with one node running a pod that takes all its GPUs, r3 with a node
// that takes no pods.
func gpuSummary() *strata.CapacitySummary {
	cs := testutil.MakeCapacitySummary("gpu").Obj()
	cs.Status = strata.CapacitySummaryStatus{
		SummaryGeneration: 7,
		ObservedTime:      minutes(2),
		Levels:            []string{blockLevel, rackLevel, strata.HostnameLabel},
		LeafLevels:        2,
		Resources:         []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, gpu},
		Vectors: []strata.ResourceVector{
			{96000, 512 * gib, 110000, 8000}, // an idle node
			{0, 0, 109000, 0},                // a node with one 8-GPU pod
		},
		Domains: []strata.SummaryDomain{
			{Values: []string{"b1", "r1"}, Free: []int32{0, 2}, Capacity: []int32{0, 2}},
			{Values: []string{"b1", "r2"}, Free: []int32{0, 1, 1, 1}, Capacity: []int32{0, 2}},
			{Values: []string{"b2", "r3"}, Free: []int32{0, 1}, Capacity: []int32{0, 2}},
		},
		Nodes:      5,
		Dispatches: []string{"uid-1/1"},
		Conditions: []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Published", "")},
	}
	return cs
}

// amounts is a resource list of a gpu summary's resources.
func amounts(cpu, memGi, pods, gpus int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", memGi)),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		gpu:                   *resource.NewQuantity(gpus, resource.DecimalSI),
	}
}

// tree is gpuSummary's tree of domains, with inFlight's reservations
// (2 pods in r1, 1 in r2) when given, and r2's hosts changed by hosts.
func tree(inFlight func(workloads, pods int32, gpus int64) *InFlightView, hosts func([]HostsView)) *DomainView {
	held := func(workloads, pods int32, gpus int64) *InFlightView {
		if inFlight == nil {
			return nil
		}
		return inFlight(workloads, pods, gpus)
	}
	idle, busy := amounts(96, 512, 110, 8), amounts(0, 0, 109, 0)
	r2 := []HostsView{{Nodes: 1, Free: idle}, {Nodes: 1, Free: busy}}
	if hosts != nil {
		hosts(r2)
	}
	return &DomainView{
		Name: "gpu", Nodes: 6, SchedulableNodes: 5,
		Free: amounts(384, 2048, 549, 32), Capacity: amounts(576, 3072, 660, 48), InFlight: held(2, 3, 24),
		Children: []*DomainView{
			{
				Level: blockLevel, Name: "b1", Nodes: 4, SchedulableNodes: 4,
				Free: amounts(288, 1536, 439, 24), Capacity: amounts(384, 2048, 440, 32), InFlight: held(2, 3, 24),
				Children: []*DomainView{
					{Level: rackLevel, Name: "r1", Nodes: 2, SchedulableNodes: 2, Free: amounts(192, 1024, 220, 16), Capacity: amounts(192, 1024, 220, 16),
						InFlight: held(1, 2, 16), Hosts: []HostsView{{Nodes: 2, Free: idle}}},
					{Level: rackLevel, Name: "r2", Nodes: 2, SchedulableNodes: 2, Free: amounts(96, 512, 219, 8), Capacity: amounts(192, 1024, 220, 16),
						InFlight: held(1, 1, 8), Hosts: r2},
				},
			},
			{
				Level: blockLevel, Name: "b2", Nodes: 2, SchedulableNodes: 1,
				Free: amounts(96, 512, 110, 8), Capacity: amounts(192, 1024, 220, 16),
				Children: []*DomainView{
					{Level: rackLevel, Name: "r3", Nodes: 2, SchedulableNodes: 1, Free: amounts(96, 512, 110, 8), Capacity: amounts(192, 1024, 220, 16),
						Hosts: []HostsView{{Nodes: 1, Free: idle}, {Nodes: 1, Unschedulable: true}}},
				},
			},
		},
	}
}

func TestNewFlavorTopology(t *testing.T) {
	ready := &ConditionView{Status: metav1.ConditionTrue, Reason: "Published"}
	header := func(f FlavorTopologyView) FlavorTopologyView {
		f.Flavor, f.Generation, f.ObservedTime = "gpu", 7, minutes(2)
		f.Levels, f.LeafLevels = []string{blockLevel, rackLevel, strata.HostnameLabel}, 2
		f.Resource, f.Ready, f.Dispatches = gpu, ready, 1
		return f
	}
	cases := map[string]struct {
		summary func(*strata.CapacitySummary)
		want    FlavorTopologyView
	}{
		"racks summed into blocks and the flavor, with their hosts": {
			want: header(FlavorTopologyView{Root: tree(nil, nil)}),
		},
		"the hub's copy: its in-flight reservations, summed up the tree; a tainted node": {
			summary: func(cs *strata.CapacitySummary) {
				cs.Status.Domains[1].FreeTaints = []int32{1, 0}
				cs.Status.TaintSets = []strata.TaintSet{{Taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}}}
				cs.Status.InFlight = []strata.InFlightDomain{
					{Values: []string{"b1", "r1"}, Workloads: 1, Pods: 2, Requests: corev1.ResourceList{gpu: resource.MustParse("16")}},
					{Values: []string{"b1", "r2"}, Workloads: 1, Pods: 1, Requests: corev1.ResourceList{gpu: resource.MustParse("8")}},
					{Values: []string{"b9", "r9"}, Workloads: 1, Pods: 1},
				}
			},
			want: func() FlavorTopologyView {
				inFlight := func(workloads, pods int32, gpus int64) *InFlightView {
					return &InFlightView{Workloads: workloads, Pods: pods, Requests: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}}
				}
				root := tree(inFlight, func(r2 []HostsView) { r2[0].Tainted = true })
				root.TaintedNodes, root.Children[0].TaintedNodes, root.Children[0].Children[1].TaintedNodes = 1, 1, 1
				return header(FlavorTopologyView{InFlight: 3, Taints: []string{"maintenance:NoSchedule"}, Root: root})
			}(),
		},
		"not published yet": {
			summary: func(cs *strata.CapacitySummary) {
				cs.Status = strata.CapacitySummaryStatus{}
			},
			want: FlavorTopologyView{Flavor: "gpu", Problem: "not published yet: the summary has no levels"},
		},
		"a summary that does not decode": {
			summary: func(cs *strata.CapacitySummary) {
				cs.Status.Domains[1].Free = []int32{5, 1}
			},
			want: header(FlavorTopologyView{Problem: "the summary does not decode: domains[1].free[0]: vector 5 does not exist (2 vectors)"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := gpuSummary()
			if tc.summary != nil {
				tc.summary(cs)
			}
			if diff := cmp.Diff(tc.want, newFlavorTopology(cs)); diff != "" {
				t.Errorf("newFlavorTopology (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSelectFlavor(t *testing.T) {
	a, b := *testutil.MakeCapacitySummary("a100").Obj(), *testutil.MakeCapacitySummary("h100").Obj()
	cases := map[string]struct {
		items   []strata.CapacitySummary
		flavor  string
		want    []string
		wantErr string
	}{
		"none on the cluster": {wantErr: noSummaries},
		"all":                 {items: []strata.CapacitySummary{a, b}, want: []string{"a100", "h100"}},
		"one":                 {items: []strata.CapacitySummary{a, b}, flavor: "h100", want: []string{"h100"}},
		"an unknown flavor": {
			items: []strata.CapacitySummary{b, a}, flavor: "v100",
			wantErr: `no CapacitySummary of flavor "v100" on this cluster (it has a100, h100)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := selectFlavor(tc.items, tc.flavor)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("selectFlavor error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, cs := range got {
				names = append(names, cs.Spec.Flavor)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("selectFlavor (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteTopology(t *testing.T) {
	coarse := gpuSummary()
	coarse.Spec.Flavor = "cpu"
	coarse.Status.Coarsened = true
	coarse.Status.Understated = []strata.UnderstatedResource{{Name: corev1.ResourceCPU, Amount: resource.MustParse("3")}}
	coarse.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionFalse, "CountsUnderstated", "nvidia.com/gpu 12")}
	coarse.Status.TaintSets = []strata.TaintSet{{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}}}
	coarse.Status.Domains[1].FreeTaints = []int32{0, 1} // r2's busy node
	empty := testutil.MakeCapacitySummary("new").Obj()
	cases := map[string]struct {
		summaries []strata.CapacitySummary
		want      string
	}{
		"a tree per flavor": {
			summaries: []strata.CapacitySummary{*gpuSummary(), *coarse, *empty},
			want: `Flavor cpu: summary generation 7, observed 2m ago; levels block > rack > host (nodes counted per rack)
  Not ready (CountsUnderstated): nvidia.com/gpu 12
  Coarsened: amounts rounded down to fit the summary's size budget
  Understated by: cpu 3
  Tainted nodes (only pods that tolerate the taints use them): nvidia.com/gpu=present:NoSchedule,
    maintenance:NoExecute
cpu     [######----]  32/48 nvidia.com/gpu free  pods 549/660  6 nodes (1 unschedulable, 1 tainted)
  b1    [#######---]  24/32 nvidia.com/gpu free  pods 439/440  4 nodes (1 tainted)
    r1  [##########]  16/16 nvidia.com/gpu free  pods 220/220  2 nodes
    r2  [#####-----]  8/16 nvidia.com/gpu free   pods 219/220  2 nodes (1 tainted)
  b2    [#####-----]  8/16 nvidia.com/gpu free   pods 110/220  2 nodes (1 unschedulable)
    r3  [#####-----]  8/16 nvidia.com/gpu free   pods 110/220  2 nodes (1 unschedulable)

Flavor gpu: summary generation 7, observed 2m ago; levels block > rack > host (nodes counted per rack)
gpu     [######----]  32/48 nvidia.com/gpu free  pods 549/660  6 nodes (1 unschedulable)
  b1    [#######---]  24/32 nvidia.com/gpu free  pods 439/440  4 nodes
    r1  [##########]  16/16 nvidia.com/gpu free  pods 220/220  2 nodes
    r2  [#####-----]  8/16 nvidia.com/gpu free   pods 219/220  2 nodes
  b2    [#####-----]  8/16 nvidia.com/gpu free   pods 110/220  2 nodes (1 unschedulable)
    r3  [#####-----]  8/16 nvidia.com/gpu free   pods 110/220  2 nodes (1 unschedulable)

Flavor new: summary generation 0
  No domains: not published yet: the summary has no levels
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeTopology(&out, newTopologyView(tc.summaries), now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("writeTopology (-want,+got):\n%s", diff)
			}
		})
	}
}
