package tas

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFindAssignmentFollowingHint(t *testing.T) {
	// Block b1: rack r1 (4 + 2 CPUs), rack r2 (4 + 4); block b2: rack r3 (8).
	cluster := func() *Snapshot {
		return snapshotOf([]string{block, rack, host},
			node{"n1", "b1", "r1", "4"}, node{"n2", "b1", "r1", "2"},
			node{"n3", "b1", "r2", "4"}, node{"n4", "b1", "r2", "4"},
			node{"n5", "b2", "r3", "8"})
	}
	racks := func(pairs ...any) *Assignment {
		a := &Assignment{Levels: []string{block, rack}}
		for i := 0; i < len(pairs); i += 3 {
			a.Domains = append(a.Domains, DomainAssignment{Values: []string{pairs[i].(string), pairs[i+1].(string)}, Count: int32(pairs[i+2].(int))})
		}
		return a
	}
	cases := map[string]struct {
		req     Request
		hint    *Assignment
		want    *Assignment
		fitErr  bool // a *FitError
		anyErr  bool // another error
		without *Assignment
	}{
		"the hinted rack, not the tightest one": {
			req:  Request{Count: 5, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			hint: racks("b1", "r2", 5),
			want: &Assignment{Levels: []string{host}, Domains: hosts("n3", 4, "n4", 1)},
			// On its own, the engine takes the tightest rack that holds 5.
			without: &Assignment{Levels: []string{host}, Domains: hosts("n1", 4, "n2", 1)},
		},
		"spread over racks as hinted": {
			req:  Request{Count: 9, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			hint: racks("b1", "r1", 1, "b2", "r3", 8),
			want: &Assignment{Levels: []string{host}, Domains: hosts("n2", 1, "n5", 8)},
		},
		"slices of 2 per host inside the hinted rack": {
			req:  Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 2}}},
			hint: racks("b1", "r1", 4),
			want: &Assignment{Levels: []string{host}, Domains: hosts("n1", 4)},
		},
		"a hinted rack without room now": {
			req:    Request{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: rack},
			hint:   racks("b1", "r1", 7),
			fitErr: true,
		},
		"a hinted rack that is not here": {
			req:    Request{Count: 1, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			hint:   racks("b9", "r9", 1),
			fitErr: true,
		},
		"a required rack split by the hint": {
			req:    Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack},
			hint:   racks("b1", "r1", 1, "b1", "r2", 1),
			anyErr: true,
		},
		"a required block kept by the hint": {
			req:  Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: block},
			hint: racks("b1", "r1", 1, "b1", "r2", 1),
			want: &Assignment{Levels: []string{host}, Domains: hosts("n2", 1, "n3", 1)},
		},
		"a required host below the hint's level": {
			req:  Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: host},
			hint: racks("b1", "r1", 2),
			want: &Assignment{Levels: []string{host}, Domains: hosts("n2", 2)},
		},
		"a required host that the hinted rack does not have": {
			req:    Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: host},
			hint:   racks("b1", "r1", 5),
			fitErr: true,
		},
		"another pod count": {
			req:    Request{Count: 3, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			hint:   racks("b1", "r1", 2),
			anyErr: true,
		},
		"not in whole slices": {
			req:    Request{Count: 4, PodRequests: cpu("1"), Mode: Preferred, Level: rack, Layers: []Layer{{rack, 4}}},
			hint:   racks("b1", "r1", 2, "b1", "r2", 2),
			anyErr: true,
		},
		"other levels": {
			req:    Request{Count: 1, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
			hint:   &Assignment{Levels: []string{rack}, Domains: []DomainAssignment{{Values: []string{"r1"}, Count: 1}}},
			anyErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := cluster()
			got, err := s.FindAssignmentFollowingHint(tc.req, tc.hint, bestFit)
			var fe *FitError
			if isFit := errors.As(err, &fe); isFit != tc.fitErr || (err != nil && !isFit) != tc.anyErr {
				t.Fatalf("error %v: want a FitError %t, another error %t", err, tc.fitErr, tc.anyErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FindAssignmentFollowingHint() (-want,+got):\n%s", diff)
			}
			if tc.without != nil {
				own, err := s.FindAssignment(tc.req, bestFit)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.without, own); diff != "" {
					t.Errorf("FindAssignment() (-want,+got):\n%s", diff)
				}
			}
		})
	}
}
