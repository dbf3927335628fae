package preemption

import (
	"fmt"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

// ReclaimFlavor is one flavor of a queue for Reclaim: the workloads on it
// being evicted already (Going: they count as gone) and the candidates.
type ReclaimFlavor struct {
	Name  string
	Going []Workload
	Cands []Workload
}

// Reclaim chooses, on quota alone, the flavor of a queue where preempting
// frees quota for pre, as the hub preempts for its fleet quota and as
// Kueue's flavor assigner chooses: every flavor is searched, a flavor where
// pre fits once Going are gone wins, so does under whenCanPreempt: Preempt
// the first with victims (unless it would then borrow and whenCanBorrow is
// TryNextFlavor), else the best preemption (Better). It returns the
// flavor's index (-1: none), whether pre fits there without victims of
// its own, the victims, and why each flavor passed over helps not. books
// are left as they were.
func Reclaim(pre Preemptor, policy Policy, fung strata.FlavorFungibility, books *queue.Books, flavors []ReclaimFlavor) (int, bool, Result, []string) {
	best, bestResult := -1, Result{}
	var whys []string
	for i, f := range flavors {
		for _, w := range f.Going {
			books.Charge(w.Queue, f.Name, w.Requests, -1)
		}
		fits := books.Check(pre.Queue, f.Name, pre.Requests, false).Err == nil
		var r Result
		if !fits {
			r = Find(pre, policy, books, f.Name, f.Cands, QuotaOnly{})
		}
		for _, w := range f.Going {
			books.Charge(w.Queue, f.Name, w.Requests, 1)
		}
		switch {
		case !fits && len(r.Victims) == 0:
			whys = append(whys, fmt.Sprintf("flavor %s: %s", f.Name, r.Why))
		case fits || fung.WhenCanPreempt == strata.FungibilityPreempt && (!r.Borrows || fung.WhenCanBorrow != strata.FungibilityTryNextFlavor):
			return i, fits, r, whys
		case best < 0 || Better(r, bestResult, pre.Queue):
			best, bestResult = i, r
		}
	}
	return best, false, bestResult, whys
}
