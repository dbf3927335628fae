package queue

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// Flavors returns a ClusterQueue's flavors with their quotas, in the order
// they are tried: spec.flavors as they are, or the flavors of
// spec.resourceGroups, group by group.
func Flavors(cq *strata.ClusterQueue) []strata.FlavorQuotas {
	if len(cq.Spec.ResourceGroups) == 0 {
		return cq.Spec.Flavors
	}
	var out []strata.FlavorQuotas
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			if !slices.ContainsFunc(out, func(o strata.FlavorQuotas) bool { return o.Name == f.Name }) {
				out = append(out, f)
			}
		}
	}
	return out
}

// FlavorsFor returns the flavors of the queue to try a workload on: all of
// them, in order, or only the one a hub pinned the workload to (the
// strata.dev/flavor annotation of its Job). When the queue does not have
// the pinned flavor it returns why, for an Inadmissible condition: nothing
// but a change of the ClusterQueue (whose event brings a pass) can let the
// workload in.
func FlavorsFor(cq *strata.ClusterQueue, wl *strata.Workload) ([]strata.FlavorQuotas, string) {
	pinned := workload.PinnedFlavor(wl)
	flavors := Flavors(cq)
	if pinned == "" {
		return flavors, ""
	}
	i := slices.IndexFunc(flavors, func(fq strata.FlavorQuotas) bool { return fq.Name == pinned })
	if i < 0 {
		return nil, fmt.Sprintf("the hub pinned flavor %q (annotation %s), which ClusterQueue %q does not have", pinned, strata.FlavorAnnotation, cq.Name)
	}
	return flavors[i : i+1], ""
}

// Fungibility returns a queue's flavorFungibility with Kueue's defaults
// (whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor).
func Fungibility(cq *strata.ClusterQueue) strata.FlavorFungibility {
	f := strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityBorrow, WhenCanPreempt: strata.FungibilityTryNextFlavor}
	if cq == nil {
		return f
	}
	if ff := cq.Spec.FlavorFungibility; ff != nil {
		if ff.WhenCanBorrow != "" {
			f.WhenCanBorrow = ff.WhenCanBorrow
		}
		if ff.WhenCanPreempt != "" {
			f.WhenCanPreempt = ff.WhenCanPreempt
		}
	}
	return f
}

// WouldBorrow says whether wl, at the head of cq, fits first (in cq's
// flavor order) on a flavor only by borrowing from the cohort: Kueue
// serves such heads after those that fit within their nominal quota.
// Quota alone decides; the topology is checked when it is served.
func (b *Books) WouldBorrow(cq *strata.ClusterQueue, wl *strata.Workload) bool {
	need := WorkloadRequests(wl)
	for _, fq := range Flavors(cq) {
		if fit := b.Check(cq.Name, fq.Name, need, false); fit.Err == nil {
			return fit.Borrows
		}
	}
	return false
}

// Books keeps the quota of a set of ClusterQueues and what their admitted
// workloads use of it, and answers whether a workload fits: within its
// queue's nominal quota, or by borrowing what the other queues of its
// cohort do not use (Kueue's flat cohorts). Quantities are kept in
// milli-units.
type Books struct {
	queues  map[string]*books
	cohorts map[string][]*books
}

type books struct {
	name, cohort string
	// groups: the queue gives its quota as resourceGroups, which must
	// cover every resource a workload requests; covered says by which
	// group's flavors. With spec.flavors a resource a flavor does not list
	// is limited only by capacity.
	groups  bool
	covered map[corev1.ResourceName][]string
	quota   map[flavorResource]quota
	usage   map[flavorResource]int64
}

type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// quota of one resource on one flavor, in milli-units; nil limits are
// unlimited (borrowing) or all of nominal (lending).
type quota struct {
	nominal            int64
	borrowing, lending *int64
	// as written, for messages
	written resource.Quantity
}

// guaranteed is the part of the nominal quota the queue does not lend.
func (q quota) guaranteed() int64 {
	if q.lending == nil {
		return 0
	}
	return max(0, q.nominal-*q.lending)
}

// lendable is the part of the nominal quota the cohort may use.
func (q quota) lendable() int64 { return q.nominal - q.guaranteed() }

// NewBooks returns the books of the given queues, with nothing used.
func NewBooks(cqs []*strata.ClusterQueue) *Books {
	b := &Books{queues: map[string]*books{}, cohorts: map[string][]*books{}}
	for _, cq := range cqs {
		q := &books{name: cq.Name, cohort: cq.Spec.Cohort, groups: len(cq.Spec.ResourceGroups) > 0,
			covered: map[corev1.ResourceName][]string{}, quota: map[flavorResource]quota{}, usage: map[flavorResource]int64{}}
		for _, g := range cq.Spec.ResourceGroups {
			for _, r := range g.CoveredResources {
				for _, f := range g.Flavors {
					q.covered[r] = append(q.covered[r], f.Name)
				}
			}
		}
		for _, f := range Flavors(cq) {
			for _, r := range f.Resources {
				qt := quota{nominal: r.NominalQuota.MilliValue(), written: r.NominalQuota}
				if cq.Spec.Cohort != "" {
					qt.borrowing = milli(r.BorrowingLimit)
					qt.lending = milli(r.LendingLimit)
				} else {
					qt.borrowing = new(int64)
				}
				q.quota[flavorResource{f.Name, r.Name}] = qt
			}
		}
		b.queues[cq.Name] = q
		if q.cohort != "" {
			b.cohorts[q.cohort] = append(b.cohorts[q.cohort], q)
		}
		if strata.Stopped(cq.Spec.StopPolicy) {
			b.Detach(cq.Name)
		}
	}
	return b
}

// Detach takes a queue that cannot admit (Kueue's inactive ClusterQueue:
// stopped, or a flavor it lists is missing) out of its cohort, as Kueue
// leaves such a queue out of its snapshot: its quota is not lent to the
// cohort, what it uses is not counted there, and its workloads are not
// reclaimed by the cohort's queues. Its own books stay, for its status.
func (b *Books) Detach(queue string) {
	q := b.queues[queue]
	if q == nil || q.cohort == "" {
		return
	}
	b.cohorts[q.cohort] = slices.DeleteFunc(b.cohorts[q.cohort], func(m *books) bool { return m == q })
	q.cohort = ""
	for fr, qt := range q.quota {
		qt.borrowing, qt.lending = new(int64), nil
		q.quota[fr] = qt
	}
}

func milli(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := q.MilliValue()
	return &v
}

// Charge adds (sign 1) or takes back (-1) what a workload admitted on a
// flavor through a queue holds.
func (b *Books) Charge(queue, flavor string, requests corev1.ResourceList, sign int64) {
	q := b.queues[queue]
	if q == nil {
		return
	}
	for r, v := range requests {
		q.usage[flavorResource{flavor, r}] += sign * v.MilliValue()
	}
}

// SetFlavorUsage replaces what every queue holds on a flavor with usage
// (by queue; a queue it does not name holds nothing there).
func (b *Books) SetFlavorUsage(flavor string, usage map[string]corev1.ResourceList) {
	for name, q := range b.queues {
		for fr := range q.usage {
			if fr.flavor == flavor {
				delete(q.usage, fr)
			}
		}
		b.Charge(name, flavor, usage[name], 1)
	}
}

// ChargeAll charges every queue's usage per flavor.
func (b *Books) ChargeAll(usage map[string]map[string]corev1.ResourceList) {
	for q, byFlavor := range usage {
		for f, rl := range byFlavor {
			b.Charge(q, f, rl, 1)
		}
	}
}

// Fit is the answer of Check.
type Fit struct {
	// Err says why the workload does not fit now; nil when it does.
	Err error
	// Never: no change of usage lets it in (it asks for more than the
	// queue could ever have, or for a resource the queue has no quota of
	// on the flavor).
	Never bool
	// Borrows: it fits, or would, only beyond the queue's nominal quota.
	Borrows bool
}

// Check says whether a workload requesting need in all fits on a flavor of
// a queue. With withinNominal it must fit in the queue's nominal quota
// (Kueue's reclaim: the preemptor does not borrow).
func (b *Books) Check(queue, flavor string, need corev1.ResourceList, withinNominal bool) Fit {
	q := b.queues[queue]
	if q == nil {
		return Fit{Err: fmt.Errorf("quota: ClusterQueue %s is not known", queue), Never: true}
	}
	names := make([]corev1.ResourceName, 0, len(need))
	for r := range need {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	var fit Fit
	for _, r := range names {
		n := need[r]
		if n.IsZero() {
			continue
		}
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			if !q.groups {
				continue // spec.flavors: limited only by capacity
			}
			if r == corev1.ResourcePods {
				// Pods count only on a flavor with a quota of them: a
				// resource group of pods alone has flavors of its own, and
				// a workload is admitted on one flavor here (Kueue would
				// assign that group's flavor besides).
				continue
			}
			if fl, covered := q.covered[r]; covered {
				return Fit{Err: fmt.Errorf("quota: flavor %s has no quota for %s in ClusterQueue %s (its resource group lists flavors %s; a workload is admitted on one flavor)",
					flavor, r, queue, strings.Join(fl, ", ")), Never: true}
			}
			return Fit{Err: fmt.Errorf("quota: %s is not covered by any resource group of ClusterQueue %s", r, queue), Never: true}
		}
		want := n.MilliValue()
		used := q.usage[fr]
		if want > b.most(q, fr) {
			return Fit{Err: fmt.Errorf("quota: %s needs %s, more than the whole quota of %s%s", r, n.String(), qt.written.String(), b.cohortNote(q, fr)), Never: true}
		}
		if used+want > qt.nominal {
			fit.Borrows = true
			if withinNominal {
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the nominal quota of %s", r, n.String(), qt.written.String())
				continue
			}
		}
		if want > b.available(q, fr) && fit.Err == nil {
			if q.cohort == "" {
				// No live usage in the message: it would change, and be
				// written again with an event, whenever any workload of the
				// queue is admitted or finishes. The ClusterQueue's status
				// has the usage.
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the quota of %s", r, n.String(), qt.written.String())
			} else {
				fit.Err = fmt.Errorf("quota: %s needs %s, more than is left of the nominal quota of %s and of what cohort %s lends", r, n.String(), qt.written.String(), q.cohort)
			}
		}
	}
	return fit
}

func (b *Books) cohortNote(q *books, fr flavorResource) string {
	if q.cohort == "" {
		return ""
	}
	return fmt.Sprintf(" with all that cohort %s could lend (%s)", q.cohort, resource.NewMilliQuantity(b.most(q, fr), resource.DecimalSI).String())
}

// most is the most a queue could ever use of a flavor's resource: its
// nominal quota, plus what its cohort could lend within its borrowing
// limit.
func (b *Books) most(q *books, fr flavorResource) int64 {
	qt := q.quota[fr]
	if q.cohort == "" {
		return qt.nominal
	}
	most := qt.guaranteed()
	for _, m := range b.cohorts[q.cohort] {
		most += m.quota[fr].lendable()
	}
	if qt.borrowing != nil {
		most = min(most, qt.nominal+*qt.borrowing)
	}
	return most
}

// available is what a queue may still take of a flavor's resource: what
// is left of the part of its nominal quota it does not lend, plus what is
// left of what the cohort's queues lend, within its borrowing limit.
func (b *Books) available(q *books, fr flavorResource) int64 {
	qt := q.quota[fr]
	used := q.usage[fr]
	if q.cohort == "" {
		return qt.nominal - used
	}
	avail := max(0, qt.guaranteed()-used)
	var pool, taken int64
	for _, m := range b.cohorts[q.cohort] {
		mq, ok := m.quota[fr]
		if !ok {
			continue // no quota of it there (spec.flavors): its use is not the cohort's
		}
		pool += mq.lendable()
		taken += max(0, m.usage[fr]-mq.guaranteed())
	}
	// A cohort overdrawn (quotas lowered under running workloads) has
	// negative room, which eats into the part its queues keep unlent, as
	// in Kueue: what is left may be negative.
	avail += pool - taken
	if qt.borrowing != nil {
		avail = min(avail, qt.nominal+*qt.borrowing-used)
	}
	return avail
}

// Borrowing says whether a queue uses more than its nominal quota of any
// of the given resources on a flavor.
func (b *Books) Borrowing(queue, flavor string, resources corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil || q.cohort == "" {
		return false
	}
	for r := range resources {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr] > qt.nominal {
			return true
		}
	}
	return false
}

// Short returns the resources of need that a queue has a quota of on a
// flavor and cannot take now, even by borrowing: the resources a
// preemption must free (Kueue's flavor-resources that need preemption).
func (b *Books) Short(queue, flavor string, need corev1.ResourceList) corev1.ResourceList {
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	short := corev1.ResourceList{}
	for r, n := range need {
		fr := flavorResource{flavor, r}
		if _, ok := q.quota[fr]; ok && !n.IsZero() && n.MilliValue() > b.available(q, fr) {
			short[r] = n
		}
	}
	return short
}

// NominalCovers says whether a queue's nominal quota on a flavor holds
// each of need on its own (whatever is used): only then may a workload
// preempt for it without borrowing within the cohort.
func (b *Books) NominalCovers(queue, flavor string, need corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r, n := range need {
		if qt, ok := q.quota[flavorResource{flavor, r}]; ok && n.MilliValue() > qt.nominal {
			return false
		}
	}
	return true
}

// WithinNominal says whether need fits in what is left of a queue's
// nominal quota on a flavor, whatever the cohort lends or borrows.
func (b *Books) WithinNominal(queue, flavor string, need corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r, n := range need {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr]+n.MilliValue() > qt.nominal {
			return false
		}
	}
	return true
}

// UnderNominal says whether a queue uses strictly less than its nominal
// quota of each of the given resources on a flavor.
func (b *Books) UnderNominal(queue, flavor string, resources corev1.ResourceList) bool {
	q := b.queues[queue]
	if q == nil {
		return false
	}
	for r := range resources {
		fr := flavorResource{flavor, r}
		if qt, ok := q.quota[fr]; ok && q.usage[fr] >= qt.nominal {
			return false
		}
	}
	return true
}

// Cohort returns a queue's cohort, "" when it has none or is not known.
func (b *Books) Cohort(queue string) string {
	if q := b.queues[queue]; q != nil {
		return q.cohort
	}
	return ""
}

// Borrowed returns, of each of resources, the part a queue uses beyond
// its nominal quota on a flavor (at most the given amount): what its
// cohort may take back from it.
func (b *Books) Borrowed(queue, flavor string, resources corev1.ResourceList) corev1.ResourceList {
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for r, v := range resources {
		fr := flavorResource{flavor, r}
		qt, ok := q.quota[fr]
		if !ok {
			continue
		}
		if over := min(q.usage[fr]-qt.nominal, v.MilliValue()); over > 0 {
			out[r] = *resource.NewMilliQuantity(over, v.Format)
		}
	}
	return out
}

// Peers returns the other queues of a queue's cohort, by name.
func (b *Books) Peers(queue string) []string {
	q := b.queues[queue]
	if q == nil || q.cohort == "" {
		return nil
	}
	var out []string
	for _, o := range b.cohorts[q.cohort] {
		if o.name != queue {
			out = append(out, o.name)
		}
	}
	slices.Sort(out)
	return out
}

// Reservation is a queue's quota held per flavor and resource that has a
// quota, in the order of its flavors: the total, the part borrowed, and the part of its
// unused nominal quota that other queues of its cohort use (what they
// borrow in all, shared among the lenders in proportion to what each has
// unused to lend).
func (b *Books) Reservation(cq *strata.ClusterQueue) []strata.FlavorReservation {
	q := b.queues[cq.Name]
	if q == nil {
		return nil
	}
	var out []strata.FlavorReservation
	for _, f := range Flavors(cq) {
		fr := strata.FlavorReservation{Name: f.Name}
		for _, r := range f.Resources {
			k := flavorResource{f.Name, r.Name}
			qt := q.quota[k]
			used := q.usage[k]
			rr := strata.ResourceReservation{Name: r.Name,
				Total:    *resource.NewMilliQuantity(used, r.NominalQuota.Format),
				Borrowed: *resource.NewMilliQuantity(max(0, used-qt.nominal), r.NominalQuota.Format),
				Lent:     *resource.NewMilliQuantity(b.lent(q, k), r.NominalQuota.Format),
			}
			fr.Resources = append(fr.Resources, rr)
		}
		if len(fr.Resources) > 0 {
			out = append(out, fr)
		}
	}
	return out
}

// lent is q's share of what its cohort borrows of a flavor's resource.
func (b *Books) lent(q *books, fr flavorResource) int64 {
	if q.cohort == "" {
		return 0
	}
	unused := func(m *books) int64 {
		mq := m.quota[fr]
		return min(mq.lendable(), max(0, mq.nominal-m.usage[fr]))
	}
	var borrowed, offered int64
	for _, m := range b.cohorts[q.cohort] {
		mq, ok := m.quota[fr]
		if !ok {
			continue
		}
		borrowed += max(0, m.usage[fr]-mq.nominal)
		offered += unused(m)
	}
	if borrowed == 0 || offered == 0 {
		return 0
	}
	own := unused(q)
	if borrowed >= offered {
		return own
	}
	// own*borrowed/offered without overflowing on large memory quotas.
	return int64(float64(own) * float64(borrowed) / float64(offered))
}
