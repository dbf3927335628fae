package preemption

import (
	"slices"

	strata "strata.dev/strata/api/v1beta1"
)

// Trial is what one flavor says of a workload's pod counts (WalkFlavors).
type Trial struct {
	// Fit: the counts fit there now, quota and topology.
	Fit bool
	// Short: they do not, and a preemption may help (not an untolerated
	// taint, more than the flavor's whole quota, a topology level the
	// flavor lacks, or a flavor that is not ready).
	Short bool
}

// Flavors is what WalkFlavors asks of a workload's flavors, by index in
// its ClusterQueue's order.
type Flavors struct {
	N int
	// Borrowing says whether the counts fit flavor i's quota only by
	// borrowing, and how high in the cohort tree (Books.BorrowHeight);
	// asked only under whenCanBorrow: TryNextFlavor.
	Borrowing func(i int) (height int, borrows bool)
	// Try tries the counts on flavor i, taking nothing.
	Try func(i int) Trial
	// Search searches flavor i for victims, preempting nothing (nil:
	// none). Not asked when the workload may not preempt (Preempts).
	Search   func(i int) *Result
	Preempts bool
}

// WalkFlavors chooses the flavor for a workload's pod counts as Kueue's
// flavor assigner does, and as the agent walks them for all of a
// workload's pods: the first flavor where the counts fit (under
// whenCanBorrow: TryNextFlavor, one where they fit only by borrowing is
// put aside, and those are tried after the others, the lowest borrowing
// first); under whenCanPreempt: Preempt, the first flavor where a search
// finds victims, unless it would then borrow and whenCanBorrow is
// TryNextFlavor; else the best preemption over the flavors (Better, the
// first flavor winning a tie). It returns the flavor's index, or -1, and
// the victims found there (nil: the counts fit).
func WalkFlavors(fs Flavors, fung strata.FlavorFungibility, queueName string) (int, *Result) {
	best, bestResult := -1, (*Result)(nil)
	consider := func(i int, r *Result) {
		if r != nil && (bestResult == nil || Better(*r, *bestResult, queueName)) {
			best, bestResult = i, r
		}
	}
	type borrowing struct{ i, height int }
	var open []int // flavors a preemption may help, not searched yet
	var borrows []borrowing
	for i := range fs.N {
		if fung.WhenCanBorrow == strata.FungibilityTryNextFlavor {
			if h, ok := fs.Borrowing(i); ok {
				borrows = append(borrows, borrowing{i, h})
				continue
			}
		}
		t := fs.Try(i)
		switch {
		case t.Fit:
			return i, nil
		case !t.Short || !fs.Preempts:
		case fung.WhenCanPreempt == strata.FungibilityPreempt:
			r := fs.Search(i)
			if r != nil && (!r.Borrows || fung.WhenCanBorrow != strata.FungibilityTryNextFlavor) {
				return i, r
			}
			consider(i, r)
		default:
			open = append(open, i)
		}
	}
	slices.SortStableFunc(borrows, func(a, b borrowing) int { return a.height - b.height })
	for _, b := range borrows {
		t := fs.Try(b.i)
		if t.Fit {
			return b.i, nil
		}
		if t.Short && fs.Preempts {
			open = append(open, b.i)
		}
	}
	for _, i := range open {
		consider(i, fs.Search(i))
	}
	return best, bestResult
}
