package simulate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"strata.dev/strata/pkg/tas"
)

func TestWithoutLast(t *testing.T) {
	a := &tas.Assignment{Levels: []string{"h"}, Domains: []tas.DomainAssignment{
		{Values: []string{"h1"}, Count: 2}, {Values: []string{"h2"}, Count: 3}, {Values: []string{"h3"}, Count: 1},
	}}
	cases := map[string]struct {
		n    int32
		want []tas.DomainAssignment
	}{
		"none":          {n: 0, want: a.Domains},
		"the last host": {n: 1, want: a.Domains[:2]},
		"into the second": {n: 2, want: []tas.DomainAssignment{
			{Values: []string{"h1"}, Count: 2}, {Values: []string{"h2"}, Count: 2},
		}},
		"all and more": {n: 9, want: []tas.DomainAssignment{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := withoutLast(a, tc.n)
			if diff := cmp.Diff(tc.want, got.Domains); diff != "" {
				t.Errorf("withoutLast(%d) (-want,+got):\n%s", tc.n, diff)
			}
		})
	}
	if a.Domains[2].Count != 1 {
		t.Error("withoutLast changed its input")
	}
}
