package tas

import (
	stdcmp "cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

const (
	block = "cloud.provider.com/topology-block"
	rack  = "cloud.provider.com/topology-rack"
	host  = "kubernetes.io/hostname"
)

// node is a test node: name, block, rack, cpu allocatable (pods: 110).
type node struct {
	name, block, rack string
	cpu               string
}

func (n node) engineNode() Node {
	labels := map[string]string{host: n.name, "pool": "tas"}
	if n.block != "" {
		labels[block] = n.block
	}
	if n.rack != "" {
		labels[rack] = n.rack
	}
	return Node{
		Name:   n.name,
		Labels: labels,
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:  resource.MustParse(n.cpu),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		Ready: true,
	}
}

func snapshotOf(levels []string, nodes ...node) *Snapshot {
	s := NewSnapshot(levels, map[string]string{"pool": "tas"})
	for _, n := range nodes {
		s.SetNode(n.engineNode())
	}
	return s
}

func cpu(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
}

func hosts(pairs ...any) []DomainAssignment {
	var out []DomainAssignment
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, DomainAssignment{Values: []string{pairs[i].(string)}, Count: int32(pairs[i+1].(int))})
	}
	return out
}

func opts(required, preferred, unconstrained configv1beta1.Algorithm) Options {
	return Options{Required: required, Preferred: preferred, Unconstrained: unconstrained}
}

var (
	bestFit = DefaultOptions()
	lfc     = opts(configv1beta1.LeastFreeCapacity, configv1beta1.LeastFreeCapacity, configv1beta1.LeastFreeCapacity)
)

func TestFindAssignment(t *testing.T) {
	twoLevel := []string{rack, host}
	threeLevel := []string{block, rack, host}
	// KEP-2724 "Computing the assignment": one rack whose nodes hold 3, 3, 2, 1 pods.
	kepRack := []node{{"n1", "", "r1", "3"}, {"n2", "", "r1", "3"}, {"n3", "", "r1", "2"}, {"n4", "", "r1", "1"}}
	// KEP-2724 "Two-level": nodes that hold 6, 5, 4, 3, 2 pods.
	kepSlices := []node{{"a", "", "r1", "6"}, {"b", "", "r1", "5"}, {"c", "", "r1", "4"}, {"d", "", "r1", "3"}, {"e", "", "r1", "2"}}
	// KEP-2724 "Multi-level": blocks of 2 racks of 4 hosts of 8 pods.
	var kepMulti []node
	for b := 1; b <= 2; b++ {
		for r := 1; r <= 2; r++ {
			for h := 1; h <= 4; h++ {
				kepMulti = append(kepMulti, node{fmt.Sprintf("b%d-r%d-h%d", b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), "8"})
			}
		}
	}
	cases := map[string]struct {
		levels  []string
		nodes   []node
		req     Request
		opts    Options
		want    *Assignment
		wantErr string
	}{
		"KEP 3,3,2,1 rack: BestFit fills the two largest and picks the tightest last node": {
			levels: twoLevel, nodes: kepRack, opts: bestFit,
			req:  Request{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: &Assignment{Levels: []string{host}, Domains: hosts("n1", 3, "n2", 3, "n4", 1)},
		},
		"block over racks: BestFit fills the hosts of both racks together, the largest first (Kueue)": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"r1a", "b1", "r1", "3"}, {"r1b", "b1", "r1", "3"}, {"r2a", "b1", "r2", "6"}},
			req:   Request{Count: 9, PodRequests: cpu("1"), Mode: Required, Level: block},
			// Racks r1 (6) then r2 (3); the hosts of both together: r2a's 6,
			// then r1a, the first that holds the 3 left: two hosts, not
			// r1a, r1b and r2a.
			want: &Assignment{Levels: []string{host}, Domains: hosts("r1a", 3, "r2a", 6)},
		},
		"block over racks in host slices: the hosts of both racks together, in slices (Kueue)": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h1", "b1", "r1", "4"}, {"h2", "b1", "r1", "2"}, {"h3", "b1", "r2", "6"}},
			req:   Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 2}}},
			// Racks r1 (3 slices) then r2 (1); the hosts together in
			// slices: h3's 3, then h2, the tightest that holds the last
			// one: two hosts, where r1's own hosts and r2's take three.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h2", 2, "h3", 6)},
		},
		"block over racks in rack slices: below the slice level each rack's own hosts": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h1", "b1", "r1", "3"}, {"h2", "b1", "r2", "1"}, {"h3", "b1", "r2", "1"}},
			req:   Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{rack, 2}}},
			// A slice per rack; h1 takes only r1's two pods, though it has
			// room for three: filling the hosts together would split r2's slice.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h1", 2, "h2", 1, "h3", 1)},
		},
		"unconstrained host slices: the least free rack of the block first, then its hosts (Kueue)": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h1", "b1", "r1", "2"}, {"h2", "b1", "r1", "6"}, {"h3", "b1", "r2", "2"}, {"h4", "b1", "r2", "2"}},
			req:   Request{Count: 4, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 2}}},
			// r2 (2 slices) before r1 (4): both slices in r2, where the
			// hosts of the block from the least free up take h1 and h3.
			want: &Assignment{Levels: []string{host}, Domains: hosts("h3", 2, "h4", 2)},
		},
		"preferred host that nothing holds: of the placements with the fewest hosts, the one in fewer racks (Kueue's)": {
			levels: twoLevel, opts: bestFit,
			nodes: []node{{"a1", "", "r1", "4"}, {"a2", "", "r1", "4"}, {"b1", "", "r2", "4"}, {"c1", "", "r3", "3"}, {"c2", "", "r3", "3"}, {"c3", "", "r3", "3"}},
			req:   Request{Count: 14, PodRequests: cpu("1"), Mode: Preferred, Level: host},
			// The largest hosts of the flavor take a1, a2, b1 and c1: four
			// hosts in three racks; racks r3 and r1 first, then their hosts,
			// take four hosts in two.
			want: &Assignment{Levels: []string{host}, Domains: hosts("a1", 4, "a2", 4, "c1", 3, "c2", 3)},
		},
		"block over racks: LeastFreeCapacity splits each rack's pods among its own hosts": {
			levels: threeLevel, opts: lfc,
			nodes: []node{{"r1a", "b1", "r1", "3"}, {"r1b", "b1", "r1", "3"}, {"r2a", "b1", "r2", "5"}},
			req:   Request{Count: 9, PodRequests: cpu("1"), Mode: Required, Level: block},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("r1a", 3, "r1b", 1, "r2a", 5)},
		},
		"KEP 3,3,2,1 rack: LeastFreeCapacity fills from the smallest": {
			levels: twoLevel, nodes: kepRack, opts: lfc,
			req:  Request{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: &Assignment{Levels: []string{host}, Domains: hosts("n1", 3, "n2", 1, "n3", 2, "n4", 1)},
		},
		"KEP two-level table: BestFit, 12 pods in host slices of 2": {
			levels: twoLevel, nodes: kepSlices, opts: bestFit,
			req:  Request{Count: 12, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 2}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("a", 6, "c", 4, "e", 2)},
		},
		"KEP two-level table: LeastFreeCapacity, 10 pods in host slices of 2": {
			levels: twoLevel, nodes: kepSlices, opts: lfc,
			req:  Request{Count: 10, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 2}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b", 2, "c", 4, "d", 2, "e", 2)},
		},
		"KEP multi-level: 64 pods, 32 per block, 16 per rack": {
			levels: threeLevel, nodes: kepMulti, opts: bestFit,
			req: Request{Count: 64, PodRequests: cpu("1"), Mode: Required, Level: block,
				Layers: []Layer{{block, 32}, {rack, 16}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h1", 8, "b1-r1-h2", 8, "b1-r1-h3", 8, "b1-r1-h4", 8,
				"b1-r2-h1", 8, "b1-r2-h2", 8, "b1-r2-h3", 8, "b1-r2-h4", 8)},
		},
		"required rack that no rack holds names the best rack and the resource": {
			levels: threeLevel, opts: bestFit,
			nodes:   []node{{"x1", "b1", "r1", "3"}, {"x2", "b1", "r1", "3"}, {"x3", "b1", "r2", "2"}},
			req:     Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: rack},
			wantErr: "rack required: the best rack fits 6 of 8 pods; limited by cpu (2 nodes)",
		},
		"racks with the same name in different blocks are different racks": {
			levels: threeLevel, opts: bestFit,
			nodes:   []node{{"x1", "b1", "r1", "2"}, {"x2", "b2", "r1", "2"}},
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			wantErr: "rack required: the best rack fits 2 of 4 pods",
		},
		"preferred rack climbs to the block": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"x1", "b1", "r1", "2"}, {"x2", "b1", "r2", "2"}, {"x3", "b2", "r1", "3"}},
			req:   Request{Count: 4, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("x1", 2, "x2", 2)},
		},
		"preferred rack spreads over blocks when no block holds it": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"x1", "b1", "r1", "2"}, {"x2", "b2", "r1", "3"}},
			req:   Request{Count: 5, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("x1", 2, "x2", 3)},
		},
		// No block holds 20 pods. Splitting over blocks first (b1 takes 12,
		// b2 the other 8) used all four racks of b1 and b2's: 5 racks. The
		// two 8-pod racks and the tightest rack that holds the last 4 are 3.
		"preferred rack that no block holds uses the fewest racks of the flavor, and the fewest hosts in each": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "4"}, {"b1-r1-h2", "b1", "r1", "4"},
				{"b1-r2-h1", "b1", "r2", "2"}, {"b1-r3-h1", "b1", "r3", "1"}, {"b1-r4-h1", "b1", "r4", "1"},
				{"b2-r1-h1", "b2", "r1", "5"}, {"b2-r1-h2", "b2", "r1", "3"},
				{"b3-r1-h1", "b3", "r1", "1"}, {"b3-r1-h2", "b3", "r1", "3"}, {"b3-r1-h3", "b3", "r1", "2"},
				{"b3-r2-h1", "b3", "r2", "3"},
			},
			req: Request{Count: 20, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h1", 4, "b1-r1-h2", 4, "b2-r1-h1", 5, "b2-r1-h2", 3, "b3-r1-h1", 1, "b3-r1-h2", 3)},
		},
		// No block holds 10 pods. Strata's own placement (the largest
		// racks of the flavor: h4 7, h1 3) and Kueue's (blocks first: b1
		// 8 and b2 2, then racks below them together: h3 6, h1 4) both
		// take two racks in two blocks: as compact, so Kueue's.
		"preferred rack that no block holds: Kueue's placement when Strata's is no more compact": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h1", "b1", "r1", "4"}, {"h2", "b1", "r2", "4"}, {"h3", "b2", "r3", "6"}, {"h4", "b3", "r4", "7"}},
			req:   Request{Count: 10, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("h1", 4, "h3", 6)},
		},
		"preferred that fits nowhere": {
			levels: threeLevel, opts: bestFit,
			nodes:   []node{{"x1", "b1", "r1", "2"}, {"x2", "b2", "r1", "3"}},
			req:     Request{Count: 6, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			wantErr: "rack preferred: no single rack holds 6 pods and the whole flavor fits only 5; limited by cpu (2 nodes)",
		},
		"unconstrained with LeastFreeCapacity takes the one node that holds all pods": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"x1", "b1", "r1", "4"}, {"x2", "b1", "r2", "1"}, {"x3", "b2", "r1", "2"}},
			req:   Request{Count: 3, PodRequests: cpu("1"), Mode: Unconstrained},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("x1", 3)},
		},
		"unconstrained with LeastFreeCapacity takes the tightest node that holds all pods": {
			levels: twoLevel, opts: bestFit,
			nodes: []node{{"h1", "", "r1", "4"}, {"h2", "", "r1", "12"}, {"h3", "", "r2", "7"}, {"h4", "", "r2", "9"}},
			req:   Request{Count: 6, PodRequests: cpu("1"), Mode: Unconstrained},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("h3", 6)},
		},
		// KEP-2724: LeastFreeCapacity "selects as many domains as needed
		// starting from the one with the least free capacity" — hosts of
		// any rack and block, not the tightest block.
		"unconstrained with LeastFreeCapacity: no node holds all, so hosts of the whole flavor from the least free up": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "4"}, {"b1-r1-h2", "b1", "r1", "4"},
				{"b1-r2-h1", "b1", "r2", "2"}, {"b1-r2-h2", "b1", "r2", "3"}, {"b1-r2-h3", "b1", "r2", "6"},
				{"b2-r1-h1", "b2", "r1", "5"}, {"b2-r1-h2", "b2", "r1", "5"},
				{"b2-r2-h1", "b2", "r2", "5"}, {"b2-r2-h2", "b2", "r2", "5"},
			},
			req:  Request{Count: 12, PodRequests: cpu("1"), Mode: Unconstrained},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 4, "b1-r1-h2", 3, "b1-r2-h1", 2, "b1-r2-h2", 3)},
		},
		"unconstrained with LeastFreeCapacity: no block holds all, so the smallest nodes of the flavor first": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "4"}, {"b1-r1-h2", "b1", "r1", "1"},
				{"b2-r1-h1", "b2", "r1", "2"}, {"b2-r1-h2", "b2", "r1", "5"},
			},
			req:  Request{Count: 8, PodRequests: cpu("1"), Mode: Unconstrained},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 4, "b1-r1-h2", 1, "b2-r1-h1", 2, "b2-r1-h2", 1)},
		},
		"LeastFreeCapacity below a required rack takes the tightest node that holds all pods": {
			levels: twoLevel, nodes: kepRack, opts: lfc,
			req:  Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want: &Assignment{Levels: []string{host}, Domains: hosts("n3", 2)},
		},
		"KEP two-level: LeastFreeCapacity takes the tightest node that holds all slices": {
			levels: twoLevel, nodes: kepSlices, opts: lfc,
			req:  Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 2}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("c", 4)},
		},
		"KEP two-level table: LeastFreeCapacity, 10 pods in host slices of 2, slices alone (unconstrained)": {
			levels: twoLevel, nodes: kepSlices, opts: bestFit,
			req:  Request{Count: 10, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 2}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b", 2, "c", 4, "d", 2, "e", 2)},
		},
		// Slices alone: the tightest top-level domain in slices (r1: 8,
		// r2: 12), then its hosts from the fewest free slices up.
		"unconstrained slices: the tightest top-level domain that holds all slices, its hosts least free first": {
			levels: twoLevel, opts: bestFit,
			nodes: []node{{"r1-h1", "", "r1", "8"}, {"r1-h2", "", "r1", "8"}, {"r2-h1", "", "r2", "5"}, {"r2-h2", "", "r2", "20"}},
			req:   Request{Count: 4, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 2}}},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("r1-h1", 4)},
		},
		"unconstrained slices: inside the top-level domain, slice domains of any rack from the fewest free slices up": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "8"}, {"b1-r1-h2", "b1", "r1", "2"},
				{"b1-r2-h1", "b1", "r2", "4"}, {"b1-r2-h2", "b1", "r2", "6"},
				{"b2-r1-h1", "b2", "r1", "32"},
			},
			// b1 holds 10 slices of 2, b2 16: b1; its hosts by free slices
			// 1 (r1-h2), 2 (r2-h1), 3 (r2-h2), 4 (r1-h1): the first three.
			req: Request{Count: 12, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 2}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h2", 2, "b1-r2-h1", 4, "b1-r2-h2", 6)},
		},
		"unconstrained rack slices: inside each rack, hosts from the least free up": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "1"}, {"b1-r1-h2", "b1", "r1", "2"}, {"b1-r1-h3", "b1", "r1", "4"}, {"b1-r1-h4", "b1", "r1", "8"},
			},
			req:  Request{Count: 4, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{rack, 4}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 1, "b1-r1-h2", 2, "b1-r1-h3", 1)},
		},
		"unconstrained with LeastFreeCapacity: hosts of 1, 2, 4, 6, 8 in any racks, 10 pods: 1 + 2 + 4 + 3 on the 6, not 8 + 2": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "8"}, {"b1-r1-h2", "b1", "r1", "2"},
				{"b1-r2-h1", "b1", "r2", "6"},
				{"b2-r1-h1", "b2", "r1", "1"}, {"b2-r1-h2", "b2", "r1", "4"},
			},
			req: Request{Count: 10, PodRequests: cpu("1"), Mode: Unconstrained},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h2", 2, "b1-r2-h1", 3, "b2-r1-h1", 1, "b2-r1-h2", 4)},
		},
		"KEP 3,3,2,1 rack, unconstrained: LeastFreeCapacity takes 1, 2, 3 and 1 on a 3": {
			levels: twoLevel, nodes: kepRack, opts: bestFit,
			req:  Request{Count: 7, PodRequests: cpu("1"), Mode: Unconstrained},
			want: &Assignment{Levels: []string{host}, Domains: hosts("n1", 3, "n2", 1, "n3", 2, "n4", 1)},
		},
		"unconstrained with BestFit configured still climbs to the tightest domain that holds all": {
			levels: threeLevel, opts: opts(configv1beta1.BestFit, configv1beta1.BestFit, configv1beta1.BestFit),
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "4"}, {"b1-r1-h2", "b1", "r1", "4"},
				{"b1-r2-h1", "b1", "r2", "2"}, {"b1-r2-h2", "b1", "r2", "3"},
				{"b2-r1-h1", "b2", "r1", "5"}, {"b2-r1-h2", "b2", "r1", "5"},
			},
			req:  Request{Count: 8, PodRequests: cpu("1"), Mode: Unconstrained},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 4, "b1-r1-h2", 4)},
		},
		// As Kueue: with no domain holding all slices, the racks of the
		// flavor are filled smallest-first, in slices.
		"unconstrained rack slices that no block holds fill the smallest racks first": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "4"},
				{"b1-r2-h1", "b1", "r2", "4"}, {"b1-r2-h2", "b1", "r2", "4"}, {"b1-r2-h3", "b1", "r2", "4"},
				{"b2-r1-h1", "b2", "r1", "5"},
				{"b2-r2-h1", "b2", "r2", "6"},
			},
			req: Request{Count: 20, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{rack, 4}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h1", 4, "b1-r2-h1", 4, "b1-r2-h2", 4, "b2-r1-h1", 4, "b2-r2-h1", 4)},
		},
		"unconstrained slices keep whole slices in their rack": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{
				{"b1-r1-h1", "b1", "r1", "3"}, {"b1-r1-h2", "b1", "r1", "2"},
				{"b1-r2-h1", "b1", "r2", "3"},
				{"b2-r1-h1", "b2", "r1", "1"}, {"b2-r1-h2", "b2", "r1", "1"},
			},
			req:  Request{Count: 6, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{rack, 3}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 1, "b1-r1-h2", 2, "b1-r2-h1", 3)},
		},
		"unconstrained that does not fit": {
			levels: twoLevel, opts: bestFit, nodes: kepRack,
			req:     Request{Count: 10, PodRequests: cpu("1"), Mode: Unconstrained},
			wantErr: "the flavor fits only 9 of 10 pods; limited by cpu (4 nodes)",
		},
		"rank order follows the tree, names in byte order as Kueue's": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h10", "b1", "r10", "1"}, {"h9", "b1", "r9", "1"}, {"h2", "b1", "r2", "1"}},
			req:   Request{Count: 3, PodRequests: cpu("1"), Mode: Required, Level: block},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("h10", 1, "h2", 1, "h9", 1)},
		},
		"ties between equal hosts go to the first name in byte order, as Kueue's": {
			levels: threeLevel, opts: bestFit,
			nodes: []node{{"h1", "b1", "r1", "4"}, {"h2", "b1", "r1", "4"}, {"h10", "b1", "r1", "4"}, {"h11", "b1", "r1", "4"}},
			req:   Request{Count: 8, PodRequests: cpu("1"), Mode: Required, Level: rack},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("h1", 4, "h10", 4)},
		},
		"rack as the lowest level still fits pods node by node": {
			levels: []string{block, rack}, opts: bestFit,
			nodes:   []node{{"x1", "b1", "r1", "3"}, {"x2", "b1", "r1", "3"}},
			req:     Request{Count: 1, PodRequests: cpu("4"), Mode: Required, Level: rack},
			wantErr: "rack required: the best rack fits 0 of 1 pods; limited by cpu (2 nodes)",
		},
		"rack as the lowest level: assignment per rack with all levels": {
			levels: []string{block, rack}, opts: bestFit,
			nodes: []node{{"x1", "b1", "r1", "3"}, {"x2", "b1", "r1", "3"}, {"x3", "b1", "r2", "8"}},
			req:   Request{Count: 2, PodRequests: cpu("2"), Mode: Required, Level: rack},
			want: &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
				{Values: []string{"b1", "r1"}, Count: 2}}},
		},
		"a level that is not in the topology": {
			levels: twoLevel, opts: bestFit, nodes: kepRack,
			req:     Request{Count: 1, PodRequests: cpu("1"), Mode: Required, Level: block},
			wantErr: `level "cloud.provider.com/topology-block" is not a level of the topology`,
		},
		"a slice above the required level": {
			levels: threeLevel, opts: bestFit, nodes: kepMulti,
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{block, 2}}},
			wantErr: `slice layer 0: level "cloud.provider.com/topology-block" is above the required level`,
		},
		"slices that do not fit whole": {
			levels: twoLevel, opts: bestFit, nodes: []node{{"a", "", "r1", "3"}, {"b", "", "r1", "3"}},
			req:     Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 4}}},
			wantErr: "rack required: the best rack fits 0 of 4 pods in slices of 4 per host (it has room for 6 pods, but not in whole slices)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(tc.levels, tc.nodes...)
			got, err := s.FindAssignment(tc.req, tc.opts)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("FindAssignment() = %+v, want error %q", got, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()[:min(len(err.Error()), len(tc.wantErr))]); diff != "" {
					t.Fatalf("FindAssignment() error (-want,+got prefix):\n%s\nfull: %v", diff, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindAssignment() unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindAssignment() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreferredSpillIsMinimal checks on random clusters that a preferred
// rack request that no block holds uses the fewest racks of the flavor,
// and within each rack the fewest hosts that hold its share.
func TestPreferredSpillIsMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// fewest is the least k such that the k largest caps reach need.
	fewest := func(caps []int, need int) int {
		slices.SortFunc(caps, func(a, b int) int { return b - a })
		for k, sum := 0, 0; k < len(caps); k++ {
			if sum += caps[k]; sum >= need {
				return k + 1
			}
		}
		return -1
	}
	spilled := 0
	for trial := range 300 {
		var nodes []node
		rackOf := map[string]string{}
		hostCaps := map[string][]int{}
		blockCap := map[string]int{}
		total := 0
		for b := range 3 {
			for r := range 1 + rng.IntN(4) {
				for h := range 1 + rng.IntN(4) {
					c := 1 + rng.IntN(8)
					name, bk, rk := fmt.Sprintf("b%d-r%d-h%d", b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("b%d/r%d", b, r)
					nodes = append(nodes, node{name, bk, fmt.Sprintf("r%d", r), fmt.Sprint(c)})
					rackOf[name] = rk
					hostCaps[rk] = append(hostCaps[rk], c)
					blockCap[bk] += c
					total += c
				}
			}
		}
		biggest := 0
		for _, c := range blockCap {
			biggest = max(biggest, c)
		}
		if biggest == total {
			continue
		}
		count := biggest + 1 + rng.IntN(total-biggest)
		a, err := snapshotOf([]string{block, rack, host}, nodes...).FindAssignment(
			Request{Count: int32(count), PodRequests: cpu("1"), Mode: Preferred, Level: rack}, bestFit)
		if err != nil {
			t.Fatalf("trial %d: %d pods on %v: %v", trial, count, nodes, err)
		}
		spilled++
		share := map[string]int{}
		hostsIn := map[string]int{}
		for _, d := range a.Domains {
			share[rackOf[d.Values[0]]] += int(d.Count)
			hostsIn[rackOf[d.Values[0]]]++
		}
		var rackCaps []int
		for _, caps := range hostCaps {
			sum := 0
			for _, c := range caps {
				sum += c
			}
			rackCaps = append(rackCaps, sum)
		}
		if want := fewest(rackCaps, count); len(share) != want || a.PodCount() != int32(count) {
			t.Errorf("trial %d: %d pods on %v: %d pods in %d racks, want %d racks: %v", trial, count, nodes, a.PodCount(), len(share), want, a.Domains)
		}
		for rk, n := range share {
			if want := fewest(slices.Clone(hostCaps[rk]), n); hostsIn[rk] != want {
				t.Errorf("trial %d: rack %s holds %d pods on %d hosts, want %d: %v", trial, rk, n, hostsIn[rk], want, a.Domains)
			}
		}
	}
	if spilled < 100 {
		t.Fatalf("only %d trials spilled", spilled)
	}
}

// TestOrderLargeLists checks the counting sort used for long candidate
// lists against a plain stable sort of the candidates that hold a group:
// with groups (podCap apart from unitCap), and without (podCap is
// unitCap), short and long lists.
func TestOrderLargeLists(t *testing.T) {
	for _, n := range []int{200, 1000} {
		for _, grouped := range []bool{true, false} {
			s := NewSnapshot([]string{host}, nil)
			var cands []*domain
			for i := range n {
				d := s.leafFor([]string{fmt.Sprintf("h%04d", i)})
				s.unitCap[d.id] = int64((i * 7919) % 13)
				s.podCap[d.id] = int64((i * 104729) % 5)
				if !grouped {
					s.podCap[d.id] = s.unitCap[d.id]
				}
				cands = append(cands, d)
			}
			p := &plan{s: s}
			for _, desc := range []bool{false, true} {
				want := slices.DeleteFunc(slices.Clone(cands), func(d *domain) bool { return s.unitCap[d.id] == 0 })
				slices.SortStableFunc(want, func(a, b *domain) int {
					c := stdcmp.Compare(s.unitCap[a.id], s.unitCap[b.id])
					if desc {
						c = -c
					}
					return stdcmp.Or(c, stdcmp.Compare(s.podCap[a.id], s.podCap[b.id]))
				})
				got := p.order(cands, desc, grouped)
				if len(got) != len(want) {
					t.Fatalf("n=%d grouped=%v desc=%v: %d ordered, want %d", n, grouped, desc, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("n=%d grouped=%v: order(desc=%v)[%d] = %v, want %v", n, grouped, desc, i, got[i].values, want[i].values)
					}
				}
			}
		}
	}
}

func TestDomainOfRank(t *testing.T) {
	a := &Assignment{Levels: []string{host}, Domains: hosts("a", 2, "b", 1, "c", 3)}
	got := []int{}
	for r := int32(-1); r <= 6; r++ {
		got = append(got, a.DomainOfRank(r))
	}
	if diff := cmp.Diff([]int{-1, 0, 0, 1, 2, 2, 2, -1}, got); diff != "" {
		t.Errorf("DomainOfRank(-1..6) (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{0, 2, 3}, a.FirstRank()); diff != "" {
		t.Errorf("FirstRank() (-want,+got):\n%s", diff)
	}
}

// TestTiesByNameWhateverTheNodesOrder: domains that tie are taken in name
// order (docs/engine.md, Kueue's), whatever order their nodes arrived in
// (an informer's, or after node churn). Two paths read the top-level
// domains directly: unconstrained slices no block holds, and a preferred
// leader with workers no domain holds.
func TestTiesByNameWhateverTheNodesOrder(t *testing.T) {
	levels := []string{block, rack, host}
	orders := map[string][]node{
		"sorted":   {{"h1", "b1", "r1", "4"}, {"h2", "b2", "r2", "4"}, {"h3", "b3", "r3", "4"}},
		"b3 first": {{"h3", "b3", "r3", "4"}, {"h1", "b1", "r1", "4"}, {"h2", "b2", "r2", "4"}},
		"b2 first": {{"h2", "b2", "r2", "4"}, {"h3", "b3", "r3", "4"}, {"h1", "b1", "r1", "4"}},
	}
	slices := Request{Count: 8, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{Level: rack, Size: 4}}}
	leader := Request{Count: 1, PodRequests: cpu("1"), Mode: Preferred, Level: rack}
	workers := Request{Count: 5, PodRequests: cpu("1"), Mode: Preferred, Level: rack}
	for name, nodes := range orders {
		t.Run(name, func(t *testing.T) {
			a, err := snapshotOf(levels, nodes...).FindAssignment(slices, lfc)
			if err != nil {
				t.Fatalf("FindAssignment() error: %v", err)
			}
			if diff := cmp.Diff(hosts("h1", 4, "h2", 4), a.Domains); diff != "" {
				t.Errorf("unconstrained slices (-want,+got):\n%s", diff)
			}
			g, err := snapshotOf(levels, nodes...).FindGroupAssignment([]Request{leader, workers}, bestFit)
			if err != nil {
				t.Fatalf("FindGroupAssignment() error: %v", err)
			}
			if got := g[0].Domains; len(got) != 1 || got[0].Values[0] != "h1" {
				t.Errorf("leader on %v, want h1 (the first block by name)", got)
			}
		})
	}
}

// TestUnconstrainedAvoids: LeastFreeCapacity's fast path for
// unconstrained pods keeps out of avoided domains too.
func TestUnconstrainedAvoids(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"h1", "b1", "r1", "2"}, node{"h2", "b2", "r2", "4"})
	req := Request{Count: 2, PodRequests: cpu("1"), Mode: Unconstrained, Avoid: []Avoid{{Level: block, Values: []string{"b1"}}}}
	a, err := s.FindAssignment(req, lfc)
	if err != nil {
		t.Fatalf("FindAssignment() error: %v", err)
	}
	if diff := cmp.Diff(hosts("h2", 2), a.Domains); diff != "" {
		t.Errorf("assignment (-want,+got):\n%s", diff)
	}
}
