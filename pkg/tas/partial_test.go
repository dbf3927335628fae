package tas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPartialSlices covers Kueue's TASPartialSlices: a single slice layer
// whose size does not divide the pod count leaves one partial slice, held
// like the whole ones by one domain of the slice level and placed last.
func TestPartialSlices(t *testing.T) {
	threeLevel := []string{block, rack, host}
	// blocks of 2 racks of 4 hosts of 8 pods (KEP-2724's multi-level cluster).
	var kepMulti []node
	for b := 1; b <= 2; b++ {
		for r := 1; r <= 2; r++ {
			for h := 1; h <= 4; h++ {
				kepMulti = append(kepMulti, node{fmt.Sprintf("b%d-r%d-h%d", b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), "8"})
			}
		}
	}
	cases := map[string]struct {
		nodes   []node
		req     Request
		opts    Options
		want    *Assignment
		wantErr string
	}{
		// The example: 20 pods in rack slices of 16 used to be
		// refused; one rack holds them all.
		"20 pods in rack slices of 16: one rack": {
			nodes: kepMulti, opts: bestFit,
			req: Request{Count: 20, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{rack, 16}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h1", 8, "b1-r1-h2", 8, "b1-r1-h3", 4)},
		},
		"40 pods in rack slices of 16: two whole slices in one rack, the partial one in the other": {
			nodes: kepMulti, opts: bestFit,
			req: Request{Count: 40, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{rack, 16}}},
			want: &Assignment{Levels: []string{host}, Domains: hosts(
				"b1-r1-h1", 8, "b1-r1-h2", 8, "b1-r1-h3", 8, "b1-r1-h4", 8,
				"b1-r2-h1", 8)},
		},
		"host slices of 3 for 10 pods: three whole slices and one of 1, last": {
			nodes: []node{{"a", "b1", "r1", "3"}, {"b", "b1", "r1", "3"}, {"c", "b1", "r1", "3"}, {"d", "b1", "r1", "1"}},
			opts:  bestFit,
			req:   Request{Count: 10, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 3}}},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("a", 3, "b", 3, "c", 3, "d", 1)},
		},
		"the partial slice goes beside whole slices when a domain has room for it": {
			nodes: []node{{"a", "b1", "r1", "4"}, {"b", "b1", "r1", "5"}},
			opts:  bestFit,
			req:   Request{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 3}}},
			// a holds a slice and the partial one, after b's slice.
			want: &Assignment{Levels: []string{host}, Domains: hosts("b", 3, "a", 4)},
		},
		"the partial slice opens a host of its own when the hosts of the whole slices are full": {
			// Room for 2, 2 and 1 slices of 4, with 1, 0 and 3 pods to spare.
			nodes: []node{{"a", "b1", "r1", "9"}, {"b", "b1", "r1", "8"}, {"c", "b1", "r1", "7"}},
			opts:  bestFit,
			req:   Request{Count: 19, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 4}}},
			want:  &Assignment{Levels: []string{host}, Domains: hosts("a", 8, "b", 8, "c", 3)},
		},
		"a partial slice that no domain holds is refused": {
			nodes:   []node{{"a", "b1", "r1", "4"}, {"b", "b1", "r1", "4"}},
			opts:    bestFit,
			req:     Request{Count: 10, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 4}}},
			wantErr: "rack required: the best rack fits 8 of 10 pods",
		},
		"unconstrained slices alone with a partial slice": {
			nodes: kepMulti, opts: lfc,
			req: Request{Count: 10, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 4}}},
			// One host takes two whole slices, the next the partial one.
			want: &Assignment{Levels: []string{host}, Domains: hosts("b1-r1-h1", 8, "b1-r1-h2", 2)},
		},
		"several layers must still divide the count": {
			nodes: kepMulti, opts: bestFit,
			req:     Request{Count: 20, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{rack, 16}, {host, 4}}},
			wantErr: "slice layer 0: size 16 does not divide the pod count 20, as it must with more than one layer",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(threeLevel, tc.nodes...)
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

// TestPartialSlicesHold checks on random clusters that a required request
// with a partial slice fits exactly when some domain of the required level
// can hold its whole slices and the partial one (a closed formula), and
// that the assignment keeps every slice, the partial one last, in one
// domain of the slice level without overfilling a host.
func TestPartialSlicesHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	levels := []string{block, rack, host}
	fits, refused := 0, 0
	for trial := range 400 {
		var nodes []node
		capOf := map[string]int{}
		where := map[string][3]string{}
		for b := range 2 {
			for r := range 1 + rng.IntN(3) {
				for h := range 1 + rng.IntN(4) {
					c := 1 + rng.IntN(9)
					name := fmt.Sprintf("b%d-r%d-h%d", b, r, h)
					nodes = append(nodes, node{name, fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), fmt.Sprint(c)})
					capOf[name] = c
					where[name] = [3]string{fmt.Sprintf("b%d", b), fmt.Sprintf("b%d/r%d", b, r), name}
				}
			}
		}
		size := int32(2 + rng.IntN(6))
		count := size*int32(rng.IntN(5)) + 1 + int32(rng.IntN(int(size)-1))
		target := rng.IntN(2) // block or rack required
		sliceLvl := target + rng.IntN(3-target)
		opt := []Options{bestFit, lfc}[rng.IntN(2)]
		req := Request{Count: count, PodRequests: cpu("1"), Mode: Required, Level: levels[target], Layers: []Layer{{levels[sliceLvl], size}}}

		// The closed formula: a target domain fits when, for one of its
		// slice-level domains i, the partial slice fits in i and the whole
		// slices in what is left of i and the others.
		q, tail := int(count/size), int(count%size)
		slicePods := map[string]map[string]int{} // target domain -> slice domain -> pods
		for name, c := range capOf {
			td, sd := where[name][target], where[name][sliceLvl]
			if slicePods[td] == nil {
				slicePods[td] = map[string]int{}
			}
			slicePods[td][sd] += c
		}
		want := false
		for _, sds := range slicePods {
			whole := 0
			for _, p := range sds {
				whole += p / int(size)
			}
			for _, p := range sds {
				if p >= tail && whole-p/int(size)+(p-tail)/int(size) >= q {
					want = true
				}
			}
		}

		a, err := snapshotOf(levels, nodes...).FindAssignment(req, opt)
		if got := err == nil; got != want {
			t.Fatalf("trial %d: %v on %v: fits %v, want %v (err %v)", trial, req.Layers, nodes, got, want, err)
		}
		if err != nil {
			refused++
			continue
		}
		fits++
		if a.PodCount() != count {
			t.Fatalf("trial %d: %d pods placed, want %d", trial, a.PodCount(), count)
		}
		// Pods by rank: each rank's host.
		var rankHost []string
		targets := map[string]bool{}
		for _, d := range a.Domains {
			if int(d.Count) > capOf[d.Values[0]] {
				t.Fatalf("trial %d: host %s given %d pods, room for %d", trial, d.Values[0], d.Count, capOf[d.Values[0]])
			}
			targets[where[d.Values[0]][target]] = true
			for range d.Count {
				rankHost = append(rankHost, d.Values[0])
			}
		}
		if len(targets) != 1 {
			t.Fatalf("trial %d: the pods span %d %ss: %v", trial, len(targets), LevelName(levels[target]), a.Domains)
		}
		for lo := 0; lo < len(rankHost); lo += int(size) {
			hi := min(lo+int(size), len(rankHost))
			for r := lo; r < hi; r++ {
				if where[rankHost[r]][sliceLvl] != where[rankHost[lo]][sliceLvl] {
					t.Fatalf("trial %d: slice of ranks %d-%d spans %ss: %v", trial, lo, hi-1, LevelName(levels[sliceLvl]), a.Domains)
				}
			}
		}
	}
	if fits < 100 || refused < 20 {
		t.Fatalf("the generator is off: %d fits, %d refused", fits, refused)
	}
}
