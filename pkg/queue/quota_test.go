package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func groupQueue(name, cohort string, lending, borrowing *string) *strata.ClusterQueue {
	rq := strata.ResourceQuota{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}
	if lending != nil {
		rq.LendingLimit = ptr.To(resource.MustParse(*lending))
	}
	if borrowing != nil {
		rq.BorrowingLimit = ptr.To(resource.MustParse(*borrowing))
	}
	cq := &strata.ClusterQueue{}
	cq.Name, cq.Spec.Cohort = name, cohort
	cq.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
		Flavors: []strata.FlavorQuotas{{Name: "h100", Resources: []strata.ResourceQuota{rq}}}}}
	return cq
}

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
}

func TestBooksCheck(t *testing.T) {
	type use struct {
		queue, gpus string
	}
	cases := []struct {
		name          string
		queues        []*strata.ClusterQueue
		used          []use
		need          corev1.ResourceList
		withinNominal bool
		want          Fit
		wantErr       string
	}{
		{name: "no cohort: within quota", queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil)}, used: []use{{"a", "4"}}, need: gpus("4")},
		{name: "no cohort: over quota", queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil)}, used: []use{{"a", "6"}}, need: gpus("4"),
			want: Fit{Borrows: true}, wantErr: "quota: nvidia.com/gpu needs 4, more than is left of the quota of 8"},
		{name: "no cohort: more than the whole quota", queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil)}, need: gpus("9"),
			want: Fit{Never: true}, wantErr: "quota: nvidia.com/gpu needs 9, more than the whole quota of 8"},
		{name: "cohort: borrows unused quota", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", nil, nil)},
			used: []use{{"a", "8"}}, need: gpus("8"), want: Fit{Borrows: true}},
		{name: "cohort: not what the others use", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", nil, nil)},
			used: []use{{"a", "8"}, {"b", "4"}}, need: gpus("8"), want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 8, more than is left of the nominal quota of 8 and of what cohort team lends"},
		{name: "cohort: borrowingLimit", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, ptr.To("2")), groupQueue("b", "team", nil, nil)},
			used: []use{{"a", "8"}}, need: gpus("4"), want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 4, more than is left of the nominal quota of 8 and of what cohort team lends"},
		{name: "cohort: more than nominal and borrowingLimit", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, ptr.To("2")), groupQueue("b", "team", nil, nil)},
			need: gpus("11"), want: Fit{Never: true},
			wantErr: "quota: nvidia.com/gpu needs 11, more than the whole quota of 8 with all that cohort team could lend (10)"},
		{name: "cohort: lendingLimit keeps the rest for the lender", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", ptr.To("2"), nil)},
			used: []use{{"a", "8"}}, need: gpus("3"), want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 3, more than is left of the nominal quota of 8 and of what cohort team lends"},
		{name: "cohort: up to the lendingLimit", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", ptr.To("2"), nil)},
			used: []use{{"a", "8"}}, need: gpus("2"), want: Fit{Borrows: true}},
		{name: "cohort: more than the cohort could ever lend", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", ptr.To("2"), nil)},
			need: gpus("11"), want: Fit{Never: true},
			wantErr: "quota: nvidia.com/gpu needs 11, more than the whole quota of 8 with all that cohort team could lend (10)"},
		{name: "cohort: the lender uses what it keeps", queues: []*strata.ClusterQueue{groupQueue("b", "team", nil, nil), groupQueue("a", "team", ptr.To("2"), nil)},
			used: []use{{"b", "10"}}, need: gpus("6")},
		{name: "cohort: a stopped queue lends nothing", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), stopped(groupQueue("b", "team", nil, nil))},
			used: []use{{"a", "8"}}, need: gpus("1"), want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 1, more than is left of the nominal quota of 8 and of what cohort team lends"},
		{name: "cohort: what a stopped queue uses is not the cohort's", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("c", "team", nil, nil), stopped(groupQueue("b", "team", nil, nil))},
			used: []use{{"b", "12"}}, need: gpus("16"), want: Fit{Borrows: true}},
		{name: "cohort: a queue being deleted lends nothing", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), terminating(groupQueue("b", "team", nil, nil))},
			used: []use{{"a", "8"}}, need: gpus("1"), want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 1, more than is left of the nominal quota of 8 and of what cohort team lends"},
		{name: "pods covered by a group of their own: not counted on the others' flavors", queues: []*strata.ClusterQueue{func() *strata.ClusterQueue {
			cq := groupQueue("a", "", nil, nil)
			cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, strata.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourcePods},
				Flavors: []strata.FlavorQuotas{{Name: "pod-slots", Resources: []strata.ResourceQuota{{Name: corev1.ResourcePods, NominalQuota: resource.MustParse("1")}}}}})
			return cq
		}()}, need: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("4")}},
		{name: "reclaim: within nominal only", queues: []*strata.ClusterQueue{groupQueue("a", "team", nil, nil), groupQueue("b", "team", nil, nil)},
			used: []use{{"a", "6"}}, need: gpus("4"), withinNominal: true, want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 4, more than is left of the nominal quota of 8"},
		{name: "resourceGroups: an uncovered resource", queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil)}, need: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			want: Fit{Never: true}, wantErr: "quota: cpu is not covered by any resource group of ClusterQueue a"},
		{name: "flavors: an unlisted resource is limited by capacity only", queues: []*strata.ClusterQueue{{ObjectMeta: metaName("a"), Spec: strata.ClusterQueueSpec{Flavors: []strata.FlavorQuotas{{Name: "h100"}}}}},
			need: gpus("100")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBooks(tc.queues)
			for _, u := range tc.used {
				b.Charge(u.queue, "h100", gpus(u.gpus), 1)
			}
			got := b.Check("a", "h100", tc.need, tc.withinNominal)
			var gotErr string
			if got.Err != nil {
				gotErr = got.Err.Error()
			}
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if gotErr != tc.wantErr {
				t.Errorf("Check error = %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}

func TestBooksReservation(t *testing.T) {
	a, b, c := groupQueue("a", "team", nil, nil), groupQueue("b", "team", nil, nil), groupQueue("c", "team", ptr.To("4"), nil)
	books := NewBooks([]*strata.ClusterQueue{a, b, c})
	books.Charge("a", "h100", gpus("14"), 1) // borrows 6
	books.Charge("b", "h100", gpus("2"), 1)  // 6 unused to lend
	// c lends at most 4, has 8 unused: offers 4. 10 offered, 6 borrowed.
	got := map[string]string{}
	for _, q := range []*strata.ClusterQueue{a, b, c} {
		r := books.Reservation(q)[0].Resources[0]
		got[q.Name] = r.Total.String() + "/" + r.Borrowed.String() + "/" + r.Lent.String()
	}
	want := map[string]string{"a": "14/6/0", "b": "2/0/3600m", "c": "0/0/2400m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reservation total/borrowed/lent (-want +got):\n%s", diff)
	}
}

func stopped(cq *strata.ClusterQueue) *strata.ClusterQueue {
	cq.Spec.StopPolicy = ptr.To(strata.StopPolicy("Hold"))
	return cq
}

func terminating(cq *strata.ClusterQueue) *strata.ClusterQueue {
	cq.DeletionTimestamp = &metav1.Time{}
	return cq
}

func metaName(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n} }

// TestBooksIgnoreUsageWithoutQuota: what a queue of the older flat shape
// uses of a resource it gives no quota for is not taken from its
// cohort's pool.
func TestBooksIgnoreUsageWithoutQuota(t *testing.T) {
	flat := &strata.ClusterQueue{ObjectMeta: metaName("flat"), Spec: strata.ClusterQueueSpec{Cohort: "team",
		Flavors: []strata.FlavorQuotas{{Name: "h100", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}}}
	cpuQueue := &strata.ClusterQueue{ObjectMeta: metaName("a"), Spec: strata.ClusterQueueSpec{Cohort: "team",
		ResourceGroups: []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []strata.FlavorQuotas{{Name: "h100", Resources: []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("10")}}}}}}}}
	b := NewBooks([]*strata.ClusterQueue{flat, cpuQueue})
	b.Charge("flat", "h100", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}, 1)
	if fit := b.Check("a", "h100", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}, false); fit.Err != nil {
		t.Errorf("a within its nominal quota: %v", fit.Err)
	}
	if got := b.Reservation(cpuQueue)[0].Resources[0].Lent; !got.IsZero() {
		t.Errorf("a lends %s, want 0", got.String())
	}
}

// TestWouldBorrow: a head would borrow when the first flavor where it
// fits takes it beyond its queue's nominal quota.
func TestWouldBorrow(t *testing.T) {
	wl := func(n string) *strata.Workload {
		return &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "main", Count: 1,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: gpus(n)}}}}}}}}}
	}
	flat := []*strata.ClusterQueue{groupQueue("a", "c", nil, nil), groupQueue("b", "c", nil, nil)}
	// a in team (with b), team and other (with c) under org.
	tree := []*strata.ClusterQueue{treeQueue("a", "team", "8"), treeQueue("b", "team", "8"), treeQueue("c", "other", "8")}
	treeCohorts := []*strata.Cohort{treeCohort("team", "org", "0", "", ""), treeCohort("other", "org", "0", "", "")}
	cases := map[string]struct {
		queues     []*strata.ClusterQueue
		cohorts    []*strata.Cohort
		used, need string
		want       int
	}{
		"TryNextFlavor: a later flavor within its nominal quota": {queues: []*strata.ClusterQueue{twoFlavorQueue("a", "c", "0", "4"), groupQueue("b", "c", nil, nil)},
			used: "0", need: "3"},
		"within its nominal quota":   {queues: flat, used: "2", need: "6"},
		"beyond it, from the cohort": {queues: flat, used: "4", need: "6", want: 1},
		// As Kueue's assignment of a head that must preempt: where it
		// would fit once the cohort's usage is gone.
		"fits nowhere now: the height where it could": {queues: flat, used: "8", need: "9", want: 1},
		"more than the cohort could ever hold: 0":     {queues: flat, used: "8", need: "17"},
		// Kueue's height once the victims (its own, lower) are gone.
		"fits nowhere now, its queue preempts within itself: 0": {queues: []*strata.ClusterQueue{withinLower(treeQueue("a", "c", "8")), treeQueue("b", "c", "0")},
			used: "8", need: "4"},
		"fits nowhere now, no preemption: the height where it could": {queues: []*strata.ClusterQueue{treeQueue("a", "c", "8"), treeQueue("b", "c", "0")},
			used: "8", need: "4", want: 1},
		"nothing used, all of its quota": {queues: flat, used: "0", need: "8"},
		"a tree: from its own cohort":    {queues: tree, cohorts: treeCohorts, used: "4", need: "10", want: 1},
		"a tree: from the root":          {queues: tree, cohorts: treeCohorts, used: "4", need: "16", want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			books := NewBooks(tc.queues, tc.cohorts...)
			books.Charge("a", "h100", gpus(tc.used), 1)
			if got := books.WouldBorrow(tc.queues[0], wl(tc.need)); got != tc.want {
				t.Errorf("WouldBorrow = %v, want %v", got, tc.want)
			}
		})
	}
}

// treeQueue is a queue with a nominal quota of GPUs on h100 in cohort.
func treeQueue(name, cohort, nominal string) *strata.ClusterQueue {
	cq := groupQueue(name, cohort, nil, nil)
	cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse(nominal)
	return cq
}

// treeCohort is a Cohort with a quota of GPUs on h100, its limits given
// as "" for unset.
func treeCohort(name, parent, nominal, lending, borrowing string) *strata.Cohort {
	rq := strata.ResourceQuota{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(nominal)}
	if lending != "" {
		rq.LendingLimit = ptr.To(resource.MustParse(lending))
	}
	if borrowing != "" {
		rq.BorrowingLimit = ptr.To(resource.MustParse(borrowing))
	}
	c := &strata.Cohort{ObjectMeta: metaName(name), Spec: strata.CohortSpec{ParentName: parent}}
	c.Spec.ResourceGroups = []strata.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
		Flavors: []strata.FlavorQuotas{{Name: "h100", Resources: []strata.ResourceQuota{rq}}}}}
	return c
}

// TestBooksTree: Kueue's hierarchical cohorts. a is in team1, b in team2,
// both under org unless a case says otherwise.
func TestBooksTree(t *testing.T) {
	type use struct {
		queue, gpus string
	}
	two := []*strata.ClusterQueue{treeQueue("a", "team1", "4"), treeQueue("b", "team2", "4")}
	cases := []struct {
		name    string
		queues  []*strata.ClusterQueue
		cohorts []*strata.Cohort
		used    []use
		detach  string
		need    string
		want    Fit
		wantErr string
	}{
		{name: "a cohort's own quota is lent to its queues", queues: []*strata.ClusterQueue{treeQueue("a", "org", "4")},
			cohorts: []*strata.Cohort{treeCohort("org", "", "8", "", "")}, used: []use{{"a", "4"}}, need: "8", want: Fit{Borrows: true}},
		{name: "no more than the cohort's quota", queues: []*strata.ClusterQueue{treeQueue("a", "org", "4")},
			cohorts: []*strata.Cohort{treeCohort("org", "", "8", "", "")}, used: []use{{"a", "4"}}, need: "9", want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 9, more than is left of the nominal quota of 4 and of what cohort org lends"},
		{name: "borrowed from the other branch through the root", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"a", "4"}}, need: "4", want: Fit{Borrows: true}},
		{name: "a cohort's lendingLimit keeps its subtree's quota", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "1", "")},
			used:    []use{{"a", "4"}}, need: "2", want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 2, more than is left of the nominal quota of 4 and of what cohort team1 lends"},
		{name: "up to a cohort's lendingLimit", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "1", "")},
			used:    []use{{"a", "4"}}, need: "1", want: Fit{Borrows: true}},
		{name: "a cohort's borrowingLimit caps its subtree", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", "2"), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"a", "4"}}, need: "3", want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 3, more than is left of the nominal quota of 4 and of what cohort team1 lends"},
		{name: "up to a cohort's borrowingLimit", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", "2"), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"a", "4"}}, need: "2", want: Fit{Borrows: true}},
		{name: "never more than the borrowingLimits allow", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", "2"), treeCohort("team2", "org", "0", "", "")},
			need:    "7", want: Fit{Never: true},
			wantErr: "quota: nvidia.com/gpu needs 7, more than the whole quota of 4 with all that cohort team1 could lend (6)"},
		{name: "what the other branch borrows is not left", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"b", "6"}}, need: "4", want: Fit{},
			wantErr: "quota: nvidia.com/gpu needs 4, more than is left of the nominal quota of 4 and of what cohort team1 lends"},
		{name: "a cohort's quota held for its subtree by its lendingLimit", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "2", "0", ""), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"b", "4"}}, need: "6", want: Fit{Borrows: true}},
		{name: "parent without a Cohort object", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "2", "", "")},
			used:    []use{{"a", "4"}}, need: "6", want: Fit{Borrows: true}},
		{name: "a queue taken out gives back what it borrowed", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"b", "6"}}, detach: "b", need: "4", want: Fit{}},
		{name: "a queue taken out lends nothing", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "", "")},
			used:    []use{{"a", "4"}}, detach: "b", need: "1", want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 1, more than is left of the nominal quota of 4 and of what cohort team1 lends"},
		{name: "a cycle of parents: the queue is out of its cohort", queues: two,
			cohorts: []*strata.Cohort{treeCohort("team1", "org", "0", "", ""), treeCohort("team2", "org", "0", "", ""), treeCohort("org", "team1", "8", "", "")},
			used:    []use{{"a", "4"}}, need: "1", want: Fit{Borrows: true},
			wantErr: "quota: nvidia.com/gpu needs 1, more than is left of the quota of 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBooks(tc.queues, tc.cohorts...)
			for _, u := range tc.used {
				b.Charge(u.queue, "h100", gpus(u.gpus), 1)
			}
			if tc.detach != "" {
				b.Detach(tc.detach)
			}
			got := b.Check("a", "h100", gpus(tc.need), false)
			var gotErr string
			if got.Err != nil {
				gotErr = got.Err.Error()
			}
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if gotErr != tc.wantErr {
				t.Errorf("Check error = %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}

func TestBooksInCycle(t *testing.T) {
	b := NewBooks([]*strata.ClusterQueue{treeQueue("a", "x", "1"), treeQueue("b", "z", "1"), treeQueue("c", "free", "1")},
		treeCohort("x", "y", "0", "", ""), treeCohort("y", "x", "0", "", ""), treeCohort("z", "x", "0", "", ""))
	got := map[string]bool{"a": b.InCycle("a"), "b": b.InCycle("b"), "c": b.InCycle("c")}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": true, "c": false}, got); diff != "" {
		t.Errorf("InCycle (-want +got):\n%s", diff)
	}
}

// TestBooksReclaimInTree: Reclaimable and Advantage on three levels.
// org holds div and other; div holds team and queue d; team holds a and
// b; other holds c. Every queue has 2 GPUs, no cohort any.
func TestBooksReclaimInTree(t *testing.T) {
	queues := []*strata.ClusterQueue{treeQueue("a", "team", "2"), treeQueue("b", "team", "2"), treeQueue("d", "div", "2"), treeQueue("c", "other", "2")}
	cohorts := []*strata.Cohort{treeCohort("team", "div", "0", "", ""), treeCohort("div", "org", "0", "", ""), treeCohort("other", "org", "0", "", "")}
	type use struct {
		queue, gpus string
	}
	cases := map[string]struct {
		used             []use
		victim, need     string
		reclaim, advance bool
	}{
		"a sibling that borrows":                  {used: []use{{"b", "4"}}, victim: "b", need: "2", reclaim: true, advance: true},
		"a sibling within its quota":              {used: []use{{"b", "2"}}, victim: "b", need: "2", advance: true},
		"another branch whose cohort borrows":     {used: []use{{"c", "4"}}, victim: "c", need: "2", reclaim: true, advance: true},
		"over its own quota, its cohort is not":   {used: []use{{"d", "3"}}, victim: "d", need: "2", reclaim: true, advance: true},
		"no precedence: beyond a's and team's":    {used: []use{{"b", "4"}, {"c", "4"}}, victim: "c", need: "3", reclaim: true},
		"precedence in div, below the shared org": {used: []use{{"b", "2"}, {"c", "4"}}, victim: "c", need: "3", reclaim: true, advance: true},
		"not in div, the cohort shared with d":    {used: []use{{"b", "2"}, {"d", "4"}}, victim: "d", need: "3", reclaim: true},
		"a zero request over quota counts":        {used: []use{{"a", "3"}}, victim: "b", need: "0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewBooks(queues, cohorts...)
			for _, u := range tc.used {
				b.Charge(u.queue, "h100", gpus(u.gpus), 1)
			}
			got := []bool{b.Reclaimable("a", tc.victim, "h100", gpus("1")), b.Advantage("a", tc.victim, "h100", gpus(tc.need))}
			if diff := cmp.Diff([]bool{tc.reclaim, tc.advance}, got); diff != "" {
				t.Errorf("Reclaimable, Advantage (-want +got):\n%s", diff)
			}
		})
	}
}

// twoFlavorQueue is a queue with GPU quotas on h100 and a100, in that
// order, under whenCanBorrow: TryNextFlavor.
func twoFlavorQueue(name, cohort, h100, a100 string) *strata.ClusterQueue {
	cq := groupQueue(name, cohort, nil, nil)
	cq.Spec.ResourceGroups[0].Flavors = []strata.FlavorQuotas{
		{Name: "h100", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(h100)}}},
		{Name: "a100", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(a100)}}},
	}
	cq.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor}
	return cq
}

// withinLower lets cq's workloads preempt lower-priority ones of cq.
func withinLower(cq *strata.ClusterQueue) *strata.ClusterQueue {
	cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
	return cq
}

// TestWouldBorrowByUnit: a workload whose pod sets a worker's agent admits
// on different flavors borrows as its highest pod set does there (Kueue's
// assignment), not as the whole workload would on one flavor.
func TestWouldBorrowByUnit(t *testing.T) {
	podSet := func(name, n string) strata.PodSet {
		return strata.PodSet{Name: name, Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: gpus(n)}}}}}}
	}
	wl := func(podSets ...strata.PodSet) *strata.Workload {
		return &strata.Workload{Spec: strata.WorkloadSpec{PodSets: podSets}}
	}
	grouped := func(ps strata.PodSet) strata.PodSet {
		ps.TopologyRequest = &strata.PodSetTopologyRequest{PodSetGroupName: ptr.To("g")}
		return ps
	}
	// a: 4 GPUs on h100 and 4 on a100, trying the next flavor rather than
	// borrowing; b lends 8 on h100.
	tryNext := func() []*strata.ClusterQueue {
		return []*strata.ClusterQueue{twoFlavorQueue("a", "c", "4", "4"), groupQueue("b", "c", nil, nil)}
	}
	borrowFirst := func() []*strata.ClusterQueue {
		qs := tryNext()
		qs[0].Spec.FlavorFungibility = nil
		return qs
	}
	cases := map[string]struct {
		queues  []*strata.ClusterQueue
		used    string // a's on h100
		wl      *strata.Workload
		want    int
		wantOne int // WouldBorrow's, the whole workload on one flavor
	}{
		"split within the nominal quotas: it does not borrow": {queues: tryNext(), used: "0",
			wl: wl(podSet("driver", "2"), podSet("workers", "4")), want: 0, wantOne: 1},
		"split, one pod set borrowing: its height": {queues: tryNext(), used: "4",
			wl: wl(podSet("driver", "2"), podSet("workers", "4")), want: 1, wantOne: 1},
		"whenCanBorrow Borrow: all on the first flavor, borrowing": {queues: borrowFirst(), used: "0",
			wl: wl(podSet("driver", "2"), podSet("workers", "4")), want: 1, wantOne: 1},
		"one PodSet group: one flavor for both": {queues: tryNext(), used: "0",
			wl: wl(grouped(podSet("driver", "2")), grouped(podSet("workers", "4"))), want: 1, wantOne: 1},
		"one pod set": {queues: tryNext(), used: "0", wl: wl(podSet("main", "6")), want: 1, wantOne: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			books := NewBooks(tc.queues)
			books.Charge("a", "h100", gpus(tc.used), 1)
			if got := books.WouldBorrowByUnit(tc.queues[0], tc.wl, nil); got != tc.want {
				t.Errorf("WouldBorrowByUnit = %v, want %v", got, tc.want)
			}
			if got := books.WouldBorrow(tc.queues[0], tc.wl); got != tc.wantOne {
				t.Errorf("WouldBorrow = %v, want %v", got, tc.wantOne)
			}
		})
	}
}

// TestFlavorsFor: a hub's copy is tried on the flavor it pinned, or, with
// its pod sets pinned to flavors, on those, in the queue's order.
func TestFlavorsFor(t *testing.T) {
	cq := &strata.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}}
	cq.Spec.ResourceGroups = []strata.ResourceGroup{{Flavors: []strata.FlavorQuotas{{Name: "cpu"}, {Name: "a100"}, {Name: "h100"}}}}
	wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{{Name: "launcher"}, {Name: "worker"}}}}
	cases := map[string]struct {
		annotations map[string]string
		want        []string
		wantWhy     string
	}{
		"not pinned": {want: []string{"cpu", "a100", "h100"}},
		"pinned":     {annotations: map[string]string{strata.FlavorAnnotation: "h100"}, want: []string{"h100"}},
		"pinned, not in the queue": {
			annotations: map[string]string{strata.FlavorAnnotation: "v100"},
			wantWhy:     `the hub pinned flavor "v100" (annotation strata.dev/flavor), which ClusterQueue "cq" does not have`,
		},
		"pod sets pinned, in the queue's order": {
			annotations: map[string]string{strata.PodSetFlavorsAnnotation: "worker=h100,launcher=cpu"},
			want:        []string{"cpu", "h100"},
		},
		"pod sets pinned: they rule over the flavor": {
			annotations: map[string]string{strata.PodSetFlavorsAnnotation: "worker=h100,launcher=h100", strata.FlavorAnnotation: "cpu"},
			want:        []string{"h100"},
		},
		"a pod set pinned to a flavor not in the queue": {
			annotations: map[string]string{strata.PodSetFlavorsAnnotation: "worker=v100,launcher=cpu"},
			wantWhy:     `the hub placed pod set worker on flavor "v100" (annotation strata.dev/pod-set-flavors), which ClusterQueue "cq" does not have`,
		},
		"pod sets pinned by a malformed annotation": {
			annotations: map[string]string{strata.PodSetFlavorsAnnotation: "worker=h100"},
			wantWhy:     `annotation strata.dev/pod-set-flavors="worker=h100": no flavor for pod set launcher`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := wl.DeepCopy()
			w.Annotations = tc.annotations
			flavors, why := FlavorsFor(cq, w)
			var got []string
			for _, fq := range flavors {
				got = append(got, fq.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FlavorsFor() flavors (-want,+got):\n%s", diff)
			}
			if why != tc.wantWhy {
				t.Errorf("FlavorsFor() why = %q, want %q", why, tc.wantWhy)
			}
		})
	}
}
