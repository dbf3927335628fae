package tas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAvoid covers the domains a request keeps out of (topology
// spreading): required ones never, preferred ones unless nothing else
// holds the pods; on a summary snapshot as on the agent's.
func TestAvoid(t *testing.T) {
	levels := []string{block, rack, host}
	nodes := []node{{"a1", "b1", "r1", "4"}, {"a2", "b1", "r1", "4"}, {"c1", "b2", "r2", "4"}, {"c2", "b2", "r2", "2"}}
	req := func(avoid ...Avoid) Request {
		return Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack, Avoid: avoid}
	}
	cases := map[string]struct {
		req     Request
		want    []DomainAssignment
		wantErr string
	}{
		"nothing avoided: the tightest rack, r2": {req: req(), want: hosts("c1", 4)},
		"block b2 avoided: rack r1": {
			req:  req(Avoid{Level: block, Values: []string{"b2"}}),
			want: hosts("a1", 4),
		},
		"both blocks avoided, required: no fit, and the reason says why": {
			req:     req(Avoid{Level: block, Values: []string{"b1"}}, Avoid{Level: block, Values: []string{"b2"}}),
			wantErr: "rack required: the best rack fits 0 of 4 pods; 4 nodes skipped: topology spreading",
		},
		"both avoided, one preferred: it is used": {
			req:  req(Avoid{Level: block, Values: []string{"b1"}, Preferred: true}, Avoid{Level: block, Values: []string{"b2"}}),
			want: hosts("a1", 4),
		},
		"an unknown domain is left alone": {
			req:  req(Avoid{Level: block, Values: []string{"b9"}}),
			want: hosts("c1", 4),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := snapshotOf(levels, nodes...).FindAssignment(tc.req, bestFit)
			if tc.wantErr != "" {
				if err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr {
					t.Fatalf("FindAssignment() = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Domains); diff != "" {
				t.Errorf("FindAssignment() (-want,+got):\n%s", diff)
			}
		})
	}
}
