package tas

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// MainResource is the resource a summary is read by at a glance: a GPU,
// else the first extended resource, else cpu, else pods.
func MainResource(names []corev1.ResourceName) corev1.ResourceName {
	for _, n := range names {
		if IsExtended(n) && strings.Contains(strings.ToLower(string(n)), "gpu") {
			return n
		}
	}
	for _, n := range names {
		if IsExtended(n) {
			return n
		}
	}
	for _, want := range []corev1.ResourceName{corev1.ResourceCPU, PodsResource} {
		if slices.Contains(names, want) {
			return want
		}
	}
	return ""
}

// IsExtended says whether a resource is an extended one
// (vendor.example/thing), not a Kubernetes one.
func IsExtended(n corev1.ResourceName) bool {
	s := string(n)
	return strings.Contains(s, "/") && !strings.HasPrefix(s, "kubernetes.io/") && !strings.HasPrefix(s, "requests.")
}

// LevelFree is the freest domain of one level of a summary, by one
// resource, in milli-units.
type LevelFree struct {
	Level, Domain string
	Free          int64
}

// SummaryFree sums the free capacity of a summary's schedulable nodes:
// in all, per resource (milli-units, in the order of st.Resources), and of
// the freest domain of each level by resource main (levels in order; ties
// keep the first domain in the summary's order).
func SummaryFree(st *strata.CapacitySummaryStatus, main corev1.ResourceName) ([]int64, []LevelFree) {
	total := make([]int64, len(st.Resources))
	r := slices.Index(st.Resources, main)
	depth := min(len(st.Levels), int(st.LeafLevels))
	if st.LeafLevels == 0 {
		depth = len(st.Levels)
	}
	type key struct {
		level int
		path  string
	}
	sums := map[key]int64{}
	var order []key
	for _, d := range st.Domains {
		free := make([]int64, len(st.Resources))
		for i := 0; i+1 < len(d.Free); i += 2 {
			if int(d.Free[i]) >= len(st.Vectors) {
				continue
			}
			vec, count := st.Vectors[d.Free[i]], int64(d.Free[i+1])
			for j := range free {
				if j < len(vec) {
					free[j] += vec[j] * count
				}
			}
		}
		for j := range total {
			total[j] += free[j]
		}
		if r < 0 {
			continue
		}
		for l := 0; l < depth && l < len(d.Values); l++ {
			k := key{level: l, path: strings.Join(d.Values[:l+1], "/")}
			if _, seen := sums[k]; !seen {
				order = append(order, k)
			}
			sums[k] += free[r]
		}
	}
	var largest []LevelFree
	for l := range depth {
		best := LevelFree{Level: st.Levels[l], Free: -1}
		for _, k := range order {
			if k.level == l && sums[k] > best.Free {
				best.Domain, best.Free = k.path, sums[k]
			}
		}
		if best.Free >= 0 {
			largest = append(largest, best)
		}
	}
	return total, largest
}

// SummaryCapacity sums the allocatable capacity of all of a summary's
// nodes, schedulable or not, per resource (milli-units, in the order of
// st.Resources): what SummaryFree's total is out of.
func SummaryCapacity(st *strata.CapacitySummaryStatus) []int64 {
	total := make([]int64, len(st.Resources))
	for _, d := range st.Domains {
		for i := 0; i+1 < len(d.Capacity); i += 2 {
			if int(d.Capacity[i]) >= len(st.Vectors) {
				continue
			}
			vec, count := st.Vectors[d.Capacity[i]], int64(d.Capacity[i+1])
			for j := range total {
				if j < len(vec) {
					total[j] += vec[j] * count
				}
			}
		}
	}
	return total
}
