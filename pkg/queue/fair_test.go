package queue

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func weighted(cq *strata.ClusterQueue, w string) *strata.ClusterQueue {
	cq.Spec.FairSharing = &strata.FairSharing{Weight: ptr.To(resource.MustParse(w))}
	return cq
}

// TestShare: a queue's dominant resource share is what it uses beyond its
// quota per mille of what its cohort could let it have, over its weight.
func TestShare(t *testing.T) {
	type use struct{ queue, gpus string }
	cases := []struct {
		name    string
		queues  []*strata.ClusterQueue
		cohorts []*strata.Cohort
		used    []use
		queue   string
		want    float64
	}{
		{name: "no cohort", queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil)}, used: []use{{"a", "8"}}, queue: "a"},
		{name: "within quota", queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "8"}}, queue: "a"},
		// 4 borrowed of the 16 the cohort could give it: 250‰.
		{name: "borrowing", queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "12"}}, queue: "a", want: 250},
		{name: "weight 2 halves it", queues: []*strata.ClusterQueue{weighted(groupQueue("a", "t", nil, nil), "2"), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "12"}}, queue: "a", want: 125},
		{name: "weight 0 borrowing is infinite", queues: []*strata.ClusterQueue{weighted(groupQueue("a", "t", nil, nil), "0"), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "12"}}, queue: "a", want: math.Inf(1)},
		{name: "weight 0 not borrowing is 0", queues: []*strata.ClusterQueue{weighted(groupQueue("a", "t", nil, nil), "0"), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "4"}}, queue: "a"},
		// The cohort could give a 8 + 8 + 4 of its own = 20; 5 borrowed.
		{name: "cohort quota counts in what could be lent", queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)},
			cohorts: []*strata.Cohort{treeCohort("t", "", "4", "", "")}, used: []use{{"a", "13"}}, queue: "a", want: 250},
		// What could be lent is the cohort's (16), as Kueue's: the queue's
		// own borrowingLimit does not count; 2 of 16.
		{name: "own borrowingLimit does not count", queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, ptr.To("2")), groupQueue("b", "t", nil, nil)},
			used: []use{{"a", "10"}}, queue: "a", want: 125},
		// A cohort's borrowingLimit does: t could have its 8 and 2 of root's
		// 8; a borrows 2 of t's 10.
		{name: "a cohort's borrowingLimit caps what could be lent", queues: []*strata.ClusterQueue{treeQueue("a", "t", "8"), treeQueue("b", "u", "8")},
			cohorts: []*strata.Cohort{treeCohort("t", "root", "0", "", "2"), treeCohort("u", "root", "0", "", ""), treeCohort("root", "", "0", "", "")},
			used:    []use{{"a", "10"}}, queue: "a", want: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBooks(tc.queues, tc.cohorts...)
			for _, u := range tc.used {
				b.Charge(u.queue, "h100", gpus(u.gpus), 1)
			}
			if diff := cmp.Diff(tc.want, b.Share(tc.queue).Value()); diff != "" {
				t.Errorf("share (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShareRounded(t *testing.T) {
	for _, tc := range []struct {
		s    Share
		want int64
	}{
		{Share{weight: 1}, 0},
		{Share{weight: 1, ratio: 166.67}, 167},
		{Share{weight: 2, ratio: 500}, 250},
		{Share{weight: 0, ratio: 1}, math.MaxInt64},
		{Share{weight: 0}, 0},
	} {
		if got := tc.s.Rounded(); got != tc.want {
			t.Errorf("%+v.Rounded() = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestTournament: under fair sharing the head of the member whose share
// would be lowest with it admitted is served first; one that would not
// borrow before one that would, whatever the shares and priorities.
func TestTournament(t *testing.T) {
	type use struct{ queue, gpus string }
	type head struct {
		queue, gpus string
		priority    int32
	}
	cases := []struct {
		name    string
		queues  []*strata.ClusterQueue
		cohorts []*strata.Cohort
		used    []use
		heads   []head
		want    string
	}{
		{name: "lowest share wins over priority",
			queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil), groupQueue("c", "t", nil, nil)},
			used:   []use{{"a", "12"}, {"b", "9"}},
			heads:  []head{{"a", "1", 9}, {"b", "1", 0}}, want: "b"},
		{name: "weight favours",
			queues: []*strata.ClusterQueue{weighted(groupQueue("a", "t", nil, nil), "4"), groupQueue("b", "t", nil, nil), groupQueue("c", "t", nil, nil)},
			used:   []use{{"a", "12"}, {"b", "9"}},
			heads:  []head{{"b", "1", 0}, {"a", "1", 0}}, want: "a"},
		{name: "not borrowing first",
			queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)},
			used:   []use{{"b", "9"}},
			heads:  []head{{"b", "1", 9}, {"a", "2", 0}}, want: "a"},
		{name: "equal shares: priority",
			queues: []*strata.ClusterQueue{groupQueue("a", "t", nil, nil), groupQueue("b", "t", nil, nil)},
			heads:  []head{{"a", "1", 0}, {"b", "1", 5}}, want: "b"},
		// a would borrow 1 of 16 and b 3 of 16, but cohort left (a and d)
		// would borrow 5 from root and right (b and c) nothing: b first.
		{name: "cohorts play at their level",
			queues: []*strata.ClusterQueue{treeQueue("a", "left", "4"), treeQueue("d", "left", "0"), treeQueue("b", "right", "4"), treeQueue("c", "right", "8")},
			cohorts: []*strata.Cohort{treeCohort("left", "root", "0", "", ""), treeCohort("right", "root", "0", "", ""),
				treeCohort("root", "", "0", "", "")},
			used:  []use{{"a", "4"}, {"d", "4"}, {"b", "6"}},
			heads: []head{{"a", "1", 0}, {"b", "1", 0}}, want: "b"},
		{name: "a queue without cohort is taken as it is",
			queues: []*strata.ClusterQueue{groupQueue("a", "", nil, nil), groupQueue("b", "t", nil, nil)},
			heads:  []head{{"a", "1", 0}, {"b", "1", 0}}, want: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBooks(tc.queues, tc.cohorts...)
			for _, u := range tc.used {
				b.Charge(u.queue, "h100", gpus(u.gpus), 1)
			}
			before := map[string]float64{}
			for _, q := range tc.queues {
				before[q.Name] = b.Share(q.Name).Value()
			}
			var heads []Contender
			for i, h := range tc.heads {
				wl := queued("ns", h.queue+"-head", ptr.To(h.priority), i)
				heads = append(heads, Contender{Queue: h.queue, Workload: wl, Flavor: "h100", Requests: gpus(h.gpus)})
			}
			got := heads[b.Tournament(heads)].Queue
			if got != tc.want {
				t.Errorf("served %s first, want %s", got, tc.want)
			}
			for _, q := range tc.queues {
				if got := b.Share(q.Name).Value(); got != before[q.Name] {
					t.Errorf("the books changed: %s's share %v, was %v", q.Name, got, before[q.Name])
				}
			}
		})
	}
}

// TestNominee: a head is charged where the flavor walk would take it.
func TestNominee(t *testing.T) {
	twoFlavors := func(name, f1, f2 string, tryNext bool) *strata.ClusterQueue {
		cq := groupQueue(name, "t", nil, nil)
		g := &cq.Spec.ResourceGroups[0]
		g.Flavors = []strata.FlavorQuotas{
			{Name: "f1", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(f1)}}},
			{Name: "f2", Resources: []strata.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(f2)}}},
		}
		if tryNext {
			cq.Spec.FlavorFungibility = &strata.FlavorFungibility{WhenCanBorrow: strata.FungibilityTryNextFlavor}
		}
		return cq
	}
	head := func(n string) *strata.Workload {
		wl := queued("ns", "h", nil, 0)
		wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: gpus(n)}}}}}}}
		return wl
	}
	cases := []struct {
		name       string
		a          *strata.ClusterQueue
		need       string
		used       string // what a holds on f2
		wantFlavor string
		wantNone   bool
	}{
		{name: "fits on the first flavor by borrowing: taken", a: twoFlavors("a", "0", "4", false), need: "3", wantFlavor: "f1"},
		{name: "TryNextFlavor: a flavor where it fits without borrowing", a: twoFlavors("a", "0", "4", true), need: "3", wantFlavor: "f2"},
		{name: "fits nowhere now: the first flavor where preemption may help", a: twoFlavors("a", "0", "4", false), need: "4", used: "1", wantFlavor: "f1"},
		{name: "no flavor may ever hold it: charged nothing", a: twoFlavors("a", "0", "0", false), need: "99", wantNone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := twoFlavors("c", "4", "0", false)
			b := NewBooks([]*strata.ClusterQueue{tc.a, other})
			b.Charge("c", "f1", gpus("1"), 1)
			if tc.used != "" {
				b.Charge("a", "f2", gpus(tc.used), 1)
			}
			c := b.Nominee(tc.a, head(tc.need))
			if tc.wantNone {
				if len(c.Requests) != 0 {
					t.Errorf("charged %v on %s, want nothing", c.Requests, c.Flavor)
				}
				return
			}
			if c.Flavor != tc.wantFlavor {
				t.Errorf("flavor %s, want %s", c.Flavor, tc.wantFlavor)
			}
		})
	}
}

// TestCohortShares: a cohort that uses more than its subtree's quota
// borrows from its parent: 2 of the 16 its parent could let it have is
// 125‰; its sibling borrows nothing, and a root cohort has no parent.
func TestCohortShares(t *testing.T) {
	b := NewBooks([]*strata.ClusterQueue{treeQueue("a", "t", "8"), treeQueue("b", "u", "8")},
		treeCohort("t", "root", "0", "", ""), treeCohort("u", "root", "0", "", ""), treeCohort("root", "", "0", "", ""))
	b.Charge("a", "h100", gpus("10"), 1)
	got := map[string]int64{}
	for name, s := range b.CohortShares() {
		got[name] = s.Rounded()
	}
	if diff := cmp.Diff(map[string]int64{"t": 125, "u": 0, "root": 0}, got); diff != "" {
		t.Errorf("cohort shares (-want +got):\n%s", diff)
	}
}
