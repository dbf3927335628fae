package preemption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
)

func TestWalkFlavors(t *testing.T) {
	own := &Result{Victims: []Victim{{Workload: Workload{Key: types.NamespacedName{Name: "mine"}, Queue: "q"}}}}
	reclaim := &Result{Victims: []Victim{{Workload: Workload{Key: types.NamespacedName{Name: "theirs"}, Queue: "other"}}}}
	borrowing := &Result{Victims: own.Victims, Borrows: true, BorrowHeight: 1}
	defaults := strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityTryNextFlavor}
	preemptFirst := strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityPreempt}
	nextWhenBorrowing := strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor, WhenCanPreempt: strata.FungibilityTryNextFlavor}
	fit, short, never := Trial{Fit: true}, Trial{Short: true}, Trial{}
	type flavor struct {
		trial Trial
		// borrows: the counts fit its quota only by borrowing, this high.
		borrows *int
		victims *Result
	}
	height := func(h int) *int { return &h }
	cases := map[string]struct {
		flavors     []flavor
		fung        strata.FlavorFungibility
		noPreempt   bool
		want        int
		wantVictims *Result
		// wantSearched are the flavors searched, in order.
		wantSearched []int
	}{
		"the first flavor where the counts fit": {
			flavors: []flavor{{trial: never}, {trial: fit}, {trial: fit}},
			want:    1,
		},
		"a fit on a later flavor beats preempting on an earlier one": {
			flavors: []flavor{{trial: short, victims: own}, {trial: fit}},
			want:    1,
		},
		"whenCanPreempt Preempt: preempting on the first flavor where victims are found": {
			flavors:      []flavor{{trial: short}, {trial: short, victims: own}, {trial: fit}},
			fung:         preemptFirst,
			want:         1,
			wantVictims:  own,
			wantSearched: []int{0, 1},
		},
		"whenCanPreempt Preempt: not where it would then borrow under whenCanBorrow TryNextFlavor": {
			flavors: []flavor{{trial: short, victims: borrowing}, {trial: fit}},
			fung:    strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor, WhenCanPreempt: strata.FungibilityPreempt},
			want:    1, wantSearched: []int{0},
		},
		"whenCanBorrow TryNextFlavor: a fit without borrowing on a later flavor first": {
			flavors: []flavor{{trial: fit, borrows: height(1)}, {trial: fit}},
			fung:    nextWhenBorrowing,
			want:    1,
		},
		"whenCanBorrow TryNextFlavor: the lowest borrowing first, before any preemption": {
			flavors:      []flavor{{trial: fit, borrows: height(2)}, {trial: short, victims: own}, {trial: fit, borrows: height(1)}},
			fung:         nextWhenBorrowing,
			want:         2,
			wantSearched: nil,
		},
		"the best preemption: reclaiming beats preempting in its own queue": {
			flavors:      []flavor{{trial: short, victims: own}, {trial: short, victims: reclaim}},
			fung:         defaults,
			want:         1,
			wantVictims:  reclaim,
			wantSearched: []int{0, 1},
		},
		"a tie: the earlier flavor": {
			flavors:      []flavor{{trial: short, victims: own}, {trial: short, victims: own}},
			want:         0,
			wantVictims:  own,
			wantSearched: []int{0, 1},
		},
		"a flavor no preemption helps is not searched": {
			flavors:      []flavor{{trial: never, victims: own}, {trial: short}},
			want:         -1,
			wantSearched: []int{1},
		},
		"a workload that may not preempt searches nothing": {
			flavors:   []flavor{{trial: short, victims: own}},
			noPreempt: true,
			want:      -1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fung := tc.fung
			if fung == (strata.FlavorFungibility{}) {
				fung = defaults
			}
			var searched []int
			got, victims := WalkFlavors(Flavors{
				N: len(tc.flavors),
				Borrowing: func(i int) (int, bool) {
					if h := tc.flavors[i].borrows; h != nil {
						return *h, true
					}
					return 0, false
				},
				Try: func(i int) Trial { return tc.flavors[i].trial },
				Search: func(i int) *Result {
					searched = append(searched, i)
					return tc.flavors[i].victims
				},
				Preempts: !tc.noPreempt,
			}, fung, "q")
			if got != tc.want {
				t.Errorf("flavor = %d, want %d", got, tc.want)
			}
			if victims != tc.wantVictims {
				t.Errorf("victims = %+v, want %+v", victims, tc.wantVictims)
			}
			if diff := cmp.Diff(tc.wantSearched, searched); diff != "" {
				t.Errorf("searched (-want,+got):\n%s", diff)
			}
		})
	}
}
