package tas

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// PodsResource is counted like any other resource: every pod uses one.
const PodsResource = corev1.ResourcePods

// Vector holds resource amounts in milli-units, indexed by a Snapshot's
// resource index. Missing trailing entries are zero.
type Vector []int64

func (v Vector) at(i int) int64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// resourceIndex maps resource names to Vector positions.
type resourceIndex struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

func newResourceIndex() *resourceIndex {
	ri := &resourceIndex{index: map[corev1.ResourceName]int{}}
	ri.get(corev1.ResourceCPU)
	ri.get(corev1.ResourceMemory)
	ri.get(PodsResource)
	return ri
}

// get returns the position of name, adding it if new.
func (ri *resourceIndex) get(name corev1.ResourceName) int {
	if i, ok := ri.index[name]; ok {
		return i
	}
	ri.index[name] = len(ri.names)
	ri.names = append(ri.names, name)
	return len(ri.names) - 1
}

// vector converts a ResourceList to a Vector, adding unknown resources.
func (ri *resourceIndex) vector(rl corev1.ResourceList) Vector {
	for name := range rl {
		ri.get(name)
	}
	v := make(Vector, len(ri.names))
	for name, q := range rl {
		v[ri.index[name]] = q.MilliValue()
	}
	return v
}

// demand is a per-pod request as (resource position, amount) pairs, only
// the non-zero ones, so that fit checks touch nothing else.
type demand []need

type need struct {
	idx    int
	amount int64
}

// newDemand converts per-pod requests, adding one pod of the pods resource.
func (ri *resourceIndex) newDemand(requests corev1.ResourceList) demand {
	var d demand
	podsIdx := ri.get(PodsResource)
	hasPods := false
	for name, q := range requests {
		amount := q.MilliValue()
		if amount <= 0 {
			continue
		}
		i := ri.get(name)
		if i == podsIdx {
			hasPods = true
		}
		d = append(d, need{i, amount})
	}
	if !hasPods {
		d = append(d, need{podsIdx, 1000})
	}
	return d
}

// fit is how many pods of demand d fit in free.
func (d demand) fit(free Vector) int64 {
	best := int64(-1)
	for _, r := range d {
		n := free.at(r.idx) / r.amount
		if n <= 0 {
			return 0
		}
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

// limiting returns the position of the resource that allows the fewest pods
// in free, or -1 when none limits.
func (d demand) limiting(free Vector) int {
	idx, best := -1, int64(0)
	for _, r := range d {
		n := free.at(r.idx) / r.amount
		// Ties go to the first resource of the index: a demand's order is
		// its request map's, and a reason must not change with it. Free
		// capacity may be negative (usage over allocatable).
		if idx < 0 || n < best || n == best && r.idx < idx {
			idx, best = r.idx, n
		}
	}
	return idx
}

func (ri *resourceIndex) clone() *resourceIndex {
	c := &resourceIndex{names: slices.Clone(ri.names), index: make(map[corev1.ResourceName]int, len(ri.index))}
	for k, v := range ri.index {
		c.index[k] = v
	}
	return c
}
