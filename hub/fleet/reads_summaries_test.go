package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// TestOnePerFlavor: one summary per flavor, the agent's (named after its
// flavor) before any other, whatever order the cache lists them in.
func TestOnePerFlavor(t *testing.T) {
	summary := func(name, flavor string) strata.CapacitySummary {
		return strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: strata.CapacitySummarySpec{Flavor: flavor}}
	}
	cases := map[string]struct {
		in   []strata.CapacitySummary
		want []string
	}{
		"one each, sorted by flavor": {
			in:   []strata.CapacitySummary{summary("gpu", "gpu"), summary("cpu", "cpu")},
			want: []string{"cpu", "gpu"},
		},
		"a hand-made one of the agent's flavor is left out, listed first or last": {
			in:   []strata.CapacitySummary{summary("aaa-copy", "gpu"), summary("gpu", "gpu"), summary("zzz-copy", "gpu")},
			want: []string{"gpu"},
		},
		"none named after the flavor: the first by name": {
			in:   []strata.CapacitySummary{summary("y", "gpu"), summary("x", "gpu")},
			want: []string{"x"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range onePerFlavor(tc.in) {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("onePerFlavor() (-want,+got):\n%s", diff)
			}
		})
	}
}
