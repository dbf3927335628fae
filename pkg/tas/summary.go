package tas

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	strata "strata.dev/strata/api/v1beta1"
)

// Capacity is a copy of a snapshot's capacity at the summary's leaf level,
// taken quickly (under the caller's lock) and summarized later, outside it.
type Capacity struct {
	levels    []string
	leafDepth int
	resources []corev1.ResourceName
	stride    int
	domains   []capacityDomain
	// free holds a row per schedulable node, alloc a row per node.
	free, alloc []int64
	// freeTaint holds, per row of free, 0 for a node without NoSchedule or
	// NoExecute taints, otherwise 1 + its set's position in taintSets.
	freeTaint []int32
	taintSets [][]corev1.Taint
	// nodeLabels holds, per row of alloc, the node's labels (never
	// changed in place: read outside the snapshot's lock); freeNode, per
	// row of free, its row in alloc.
	nodeLabels []map[string]string
	freeNode   []int32
	// layers are the preemptible entries (CapturePreemptible).
	layers []preemptibleLayer
}

type capacityDomain struct {
	values            []string
	freeEnd, allocEnd int // row ends in free and alloc
}

// Capture copies what Summarize needs: per leaf domain (the lowest level
// above the host), the free vector of every schedulable node and the
// allocatable vector of every node. It costs one pass over the nodes.
func (s *Snapshot) Capture() *Capacity { return s.capture(nil) }

// capture is Capture with the taints tolerations tolerate left out of
// every node's first (see CaptureForFlavor): before the taint sets are
// counted, so that nodes whose only distinct taints are tolerated ones
// are not left out beyond maxTaintSets.
func (s *Snapshot) capture(tolerations []corev1.Toleration) *Capacity {
	leafDepth := s.depth
	if s.summary {
		leafDepth = s.leafDepth
	} else if s.hostIsLowest {
		leafDepth--
	}
	c := &Capacity{levels: slices.Clone(s.levels), leafDepth: leafDepth, resources: slices.Clone(s.res.names), stride: len(s.res.names)}
	if len(s.res.names) != s.stride {
		s.restride()
	}
	var key string
	taintSet := map[string]int32{}
	type taints struct {
		set []corev1.Taint
		key string
	}
	tolerated := map[string]taints{} // by a node's taint key
	for _, leaf := range s.orderedLeaves() {
		values := leaf.values[:leafDepth]
		if k := domainKey(values); len(c.domains) == 0 || k != key {
			key = k
			c.domains = append(c.domains, capacityDomain{values: values, freeEnd: len(c.free) / max(c.stride, 1), allocEnd: len(c.alloc) / max(c.stride, 1)})
		}
		d := &c.domains[len(c.domains)-1]
		for _, b := range leaf.bins {
			row := s.binFree[int(b.slot)*s.stride : int(b.slot+1)*s.stride]
			var labels map[string]string
			if b.node != nil {
				labels = b.node.Labels
			}
			for range b.count {
				for r := range c.stride {
					c.alloc = append(c.alloc, b.alloc.at(r))
				}
				c.nodeLabels = append(c.nodeLabels, labels)
				d.allocEnd++
				if !b.usable {
					continue
				}
				set, setKey := b.hardTaints, b.taintKey
				if len(tolerations) > 0 && setKey != "" {
					left, ok := tolerated[setKey]
					if !ok {
						left.set, left.key = normalTaints(untolerated(set, tolerations))
						tolerated[setKey] = left
					}
					set, setKey = left.set, left.key
				}
				taint := c.taintSetOf(set, setKey, taintSet)
				if taint < 0 {
					continue // its taints cannot be listed: left out, never overstated
				}
				for _, v := range row {
					c.free = append(c.free, max(v, 0))
				}
				c.freeTaint = append(c.freeTaint, taint)
				c.freeNode = append(c.freeNode, int32(len(c.nodeLabels)-1))
				d.freeEnd++
			}
		}
	}
	c.dropEmptyColumns()
	return c
}

// dropEmptyColumns leaves out the resources none of the captured nodes
// has (allocatable 0 on every one): a pod on another flavor's nodes made
// the snapshot count them. To the hub a resource the summary does not
// list is none, as it is; and the API takes at most 32 resources, which a
// cluster's every extended resource could pass. The same nodes give the
// same columns, so a preemptible layer's capture matches.
func (c *Capacity) dropEmptyColumns() {
	if c.stride == 0 {
		return
	}
	keep := make([]bool, c.stride)
	for at := 0; at+c.stride <= len(c.alloc); at += c.stride {
		for r := range c.stride {
			if c.alloc[at+r] != 0 {
				keep[r] = true
			}
		}
	}
	if !slices.Contains(keep, false) || !slices.Contains(keep, true) {
		// Nothing to leave out, or no node has anything (no node at all):
		// the columns stay, and the summary's vectors have some.
		return
	}
	compact := func(rows []int64) []int64 {
		out := make([]int64, 0, len(rows))
		for at := 0; at+c.stride <= len(rows); at += c.stride {
			for r := range c.stride {
				if keep[r] {
					out = append(out, rows[at+r])
				}
			}
		}
		return out
	}
	c.alloc, c.free = compact(c.alloc), compact(c.free)
	resources := make([]corev1.ResourceName, 0, len(c.resources))
	for r, name := range c.resources {
		if keep[r] {
			resources = append(resources, name)
		}
	}
	c.resources, c.stride = resources, len(resources)
}

// The API's limits on a summary's taint sets.
const (
	maxTaintSets   = 64
	maxSetTaints   = 32
	leftOutOfTaint = -1
)

// normalTaints returns the NoSchedule and NoExecute taints of taints as a
// summary lists them — sorted, without duplicates or timeAdded — and a
// key naming that set ("" when there are none).
func normalTaints(taints []corev1.Taint) ([]corev1.Taint, string) {
	var set []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			set = append(set, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	if len(set) == 0 {
		return nil, ""
	}
	slices.SortFunc(set, func(a, b corev1.Taint) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Effect, b.Effect))
	})
	set = slices.CompactFunc(set, func(a, b corev1.Taint) bool { return a == b })
	var key strings.Builder
	for _, t := range set {
		key.WriteString(t.Key + "\x00" + t.Value + "\x00" + string(t.Effect) + "\x00")
	}
	return set, key.String()
}

// taintSetOf returns the free row's taint value (see freeTaint) of a node
// with the taint set of that key (see normalTaints), adding the set to
// c.taintSets when it is new; leftOutOfTaint when the set cannot be
// listed (more taints than a set may hold, or a new set beyond
// maxTaintSets: nodes carrying unique taint values, such as an
// autoscaler's deletion marks). Such a node is left out of the free
// capacity, as if unschedulable.
func (c *Capacity) taintSetOf(set []corev1.Taint, key string, known map[string]int32) int32 {
	if key == "" {
		return 0
	}
	if len(set) > maxSetTaints {
		return leftOutOfTaint
	}
	if i, ok := known[key]; ok {
		return i
	}
	if len(c.taintSets) >= maxTaintSets {
		return leftOutOfTaint
	}
	c.taintSets = append(c.taintSets, set)
	i := int32(len(c.taintSets))
	known[key] = i
	return i
}

// Tolerate leaves out of the captured taints those that tolerations
// tolerate — a ResourceFlavor's, which every pod admitted on it gets — so
// that the summary lists only the taints that keep some pods away.
func (c *Capacity) Tolerate(tolerations []corev1.Toleration) {
	if len(tolerations) == 0 || len(c.taintSets) == 0 {
		return
	}
	known := map[string]int32{}
	old := c.taintSets
	c.taintSets = nil
	remap := make([]int32, len(old)+1)
	for i, set := range old {
		set, key := normalTaints(untolerated(set, tolerations))
		remap[i+1] = c.taintSetOf(set, key, known)
	}
	for i, t := range c.freeTaint {
		c.freeTaint[i] = remap[t]
	}
}

// CaptureForFlavor captures the capacity a flavor's summary describes: the
// snapshot's, with the taints the flavor's tolerations tolerate left out
// (every pod admitted on it gets them). The agent's publisher and
// `kubectl strata simulate --cluster` both build summaries from it, so that
// the hub's answer offline is the one it gives on the live fleet.
func (s *Snapshot) CaptureForFlavor(tolerations []corev1.Toleration) *Capacity {
	return s.capture(tolerations)
}

// untolerated are the taints of set that tolerations do not tolerate.
func untolerated(set []corev1.Taint, tolerations []corev1.Toleration) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(set), func(t corev1.Taint) bool {
		return slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Logger{}, &t, true) })
	})
}

// Summarize describes the snapshot's free capacity for the hub; see
// Capacity.Summarize.
func (s *Snapshot) Summarize(maxBytes int) (strata.CapacitySummaryStatus, error) {
	return s.Capture().Summarize(maxBytes)
}

// Coarsening stages, tried in order until the summary fits its budget.
// Counted resources (pods, GPUs, other extended resources) stay exact in
// every stage but the last; the others (cpu, memory, storage, hugepages)
// are rounded down to a number of significant digits relative to their own
// magnitude, which merges the buckets of nodes that differ slightly.
var stages = []struct {
	digits int  // significant digits of amounts that may be rounded; 0: exact
	merge  bool // merge every node of a domain with the same counts (minimum)
	lossy  bool // merge every node of a domain (minimum), counts included
}{
	{}, {digits: 6}, {digits: 4}, {digits: 3}, {digits: 2}, {digits: 1},
	{digits: 1, merge: true}, {digits: 1, merge: true, lossy: true},
}

// Shape is what a summary of the captured capacity names, without any
// capacity: its levels, how many are above the host, and its resources.
// A summary that cannot carry its domains still says what it would
// describe.
func (c *Capacity) Shape() strata.CapacitySummaryStatus {
	return strata.CapacitySummaryStatus{Levels: slices.Clone(c.levels), LeafLevels: int32(c.leafDepth), Resources: slices.Clone(c.resources)}
}

// Summarize describes the captured free capacity for the hub (BRIEF
// decision 2): the domain tree down to the lowest level above the host,
// and under each such domain its schedulable nodes in buckets of equal free
// vectors, plus every node's capacity when empty. Distinct vectors are
// listed once. When the JSON would exceed maxBytes, amounts are coarsened
// (see stages), never reported higher than they are; what was given up is
// listed in Understated. Generation, observed time and conditions are left
// to the caller.
func (c *Capacity) Summarize(maxBytes int) (strata.CapacitySummaryStatus, error) {
	counted := make([]bool, c.stride)
	for r, name := range c.resources {
		counted[r] = isCounted(name)
	}
	var st strata.CapacitySummaryStatus
	var size int
	labels := chooseLabels(c.nodeLabels, c.levels)
	for i, stage := range stages {
		st = c.summarize(counted, stage.digits, stage.merge, stage.lossy, labels)
		data, err := json.Marshal(st)
		if err != nil {
			return st, err
		}
		size = len(data)
		if size <= maxBytes {
			st.Coarsened = i > 0
			// What preempting would free gets what the budget leaves
			// (with room for "coarsened":true).
			c.addPreemptible(&st, counted, stage.digits, stage.merge, stage.lossy, labels, size+len(`,"coarsened":true`), maxBytes)
			return st, nil
		}
	}
	return st, fmt.Errorf("the summary of %d domains needs %d bytes, more than the budget of %d even with one bucket per domain", len(st.Domains), size, maxBytes)
}

// isCounted says whether a resource is a count of whole things that must
// not be rounded: everything but cpu, memory, storage and hugepages.
func isCounted(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return false
	}
	return !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// roundDown keeps the first digits significant decimal digits of v.
func roundDown(v int64, digits int) int64 {
	step := roundingStep(v, digits)
	return v / step * step
}

// roundUp is roundDown's counterpart for capacities, which must not be
// understated ("never fits" would then be wrong).
func roundUp(v int64, digits int) int64 {
	step := roundingStep(v, digits)
	d := v / step * step
	if d == v || d > math.MaxInt64-step {
		return d
	}
	return d + step
}

// roundingStep is the power of ten that leaves digits significant digits
// of v (1 when digits is 0: exact).
func roundingStep(v int64, digits int) int64 {
	step := int64(1)
	if digits == 0 {
		return step
	}
	limit := int64(1)
	for range digits {
		limit *= 10
	}
	for x := v; x >= limit; x /= 10 {
		step *= 10
	}
	return step
}

// summarize builds the status for one coarsening stage.
func (c *Capacity) summarize(counted []bool, digits int, merge, lossy bool, labels labelChoice) strata.CapacitySummaryStatus {
	st := strata.CapacitySummaryStatus{
		Levels:     slices.Clone(c.levels),
		LeafLevels: int32(c.leafDepth),
		Resources:  slices.Clone(c.resources),
		Domains:    make([]strata.SummaryDomain, 0, len(c.domains)),
		NodeLabels: labels.out,
	}
	// Each free row's label set, from its node's.
	var freeLabels []int32
	if labels.out != nil && len(labels.out.Sets) > 0 {
		freeLabels = make([]int32, len(c.freeNode))
		for i, n := range c.freeNode {
			freeLabels[i] = labels.nodeSet[n]
		}
	}
	stride := c.stride
	vectors := map[string]int32{}
	keyBuf := make([]byte, 8*stride)
	intern := func(v []int64) int32 {
		for r, x := range v {
			binary.LittleEndian.PutUint64(keyBuf[8*r:], uint64(x))
		}
		if i, ok := vectors[string(keyBuf)]; ok {
			return i
		}
		i := int32(len(st.Vectors))
		vectors[string(keyBuf)] = i
		st.Vectors = append(st.Vectors, slices.Clone(v))
		return i
	}
	left := make([]int64, stride) // understated totals
	type group struct {
		val          []int64
		n            int32
		taint, label int32
	}
	groups := map[string]int{}
	var list []group
	key := make([]int64, stride)
	groupKey := make([]byte, 8*stride+8)
	// bucket groups the rows of one domain's nodes: by equal taints and
	// labels (when taints or labels, one per row, are given) and equal key
	// (counted amounts exact, others rounded; in merging stages the others
	// or everything ignored), each group's vector the minimum of its rows
	// (capacities: the maximum), rounded the same way. It returns the
	// pairs of vector and node count, and with taints or labels, those of
	// each pair.
	bucket := func(rows []int64, taints, labels []int32, capacity bool) (pairs, pairTaints, pairLabels []int32) {
		clear(groups)
		list = list[:0]
		for at := 0; at+stride <= len(rows); at += stride {
			row := rows[at : at+stride]
			var taint, label int32
			if taints != nil {
				taint = taints[at/stride]
			}
			if labels != nil {
				label = labels[at/stride]
			}
			for r, v := range row {
				switch {
				case lossy, merge && !counted[r]:
					key[r] = 0
				case counted[r]:
					key[r] = v
				case capacity:
					key[r] = roundUp(v, digits)
				default:
					key[r] = roundDown(v, digits)
				}
				binary.LittleEndian.PutUint64(groupKey[8*r:], uint64(key[r]))
			}
			binary.LittleEndian.PutUint32(groupKey[8*stride:], uint32(taint))
			binary.LittleEndian.PutUint32(groupKey[8*stride+4:], uint32(label))
			g, ok := groups[string(groupKey)]
			if !ok {
				g = len(list)
				groups[string(groupKey)] = g
				list = append(list, group{val: slices.Clone(row), taint: taint, label: label})
			}
			gr := &list[g]
			gr.n++
			for r, v := range row {
				if capacity {
					gr.val[r] = max(gr.val[r], v)
				} else {
					gr.val[r] = min(gr.val[r], v)
				}
			}
		}
		pairs = make([]int32, 0, 2*len(list))
		if taints != nil {
			pairTaints = make([]int32, 0, len(list))
		}
		if labels != nil {
			pairLabels = make([]int32, 0, len(list))
		}
		for _, g := range list {
			for r, v := range g.val {
				switch {
				case counted[r]:
				case capacity:
					g.val[r] = roundUp(v, digits)
				default:
					g.val[r] = roundDown(v, digits)
				}
			}
			pairs = append(pairs, intern(g.val), g.n)
			if taints != nil {
				pairTaints = append(pairTaints, g.taint)
			}
			if labels != nil {
				pairLabels = append(pairLabels, g.label)
			}
		}
		return pairs, pairTaints, pairLabels
	}
	// nonZero is rows, or nil when all are 0.
	nonZero := func(rows []int32) []int32 {
		if slices.ContainsFunc(rows, func(t int32) bool { return t != 0 }) {
			return rows
		}
		return nil
	}
	for _, set := range c.taintSets {
		st.TaintSets = append(st.TaintSets, strata.TaintSet{Taints: slices.Clone(set)})
	}
	freeStart, allocStart := 0, 0
	for _, d := range c.domains {
		free := c.free[freeStart*stride : d.freeEnd*stride]
		taints := nonZero(c.freeTaint[freeStart:d.freeEnd])
		var rowLabels, allocLabels []int32
		if freeLabels != nil {
			rowLabels = nonZero(freeLabels[freeStart:d.freeEnd])
			allocLabels = nonZero(labels.nodeSet[allocStart:d.allocEnd])
		}
		sd := strata.SummaryDomain{Values: slices.Clone(d.values)}
		sd.Free, sd.FreeTaints, sd.FreeLabels = bucket(free, taints, rowLabels, false)
		// What was left out of free: every row minus its bucket's vector.
		for at := 0; at+stride <= len(free); at += stride {
			for r := range stride {
				left[r] += free[at+r]
			}
		}
		for i := 0; i < len(sd.Free); i += 2 {
			v := st.Vectors[sd.Free[i]]
			for r := range stride {
				left[r] -= v[r] * int64(sd.Free[i+1])
			}
		}
		st.Nodes += int32(d.freeEnd - freeStart)
		sd.Capacity, _, sd.CapacityLabels = bucket(c.alloc[allocStart*stride:d.allocEnd*stride], nil, allocLabels, true)
		freeStart, allocStart = d.freeEnd, d.allocEnd
		st.Domains = append(st.Domains, sd)
	}
	for r, amount := range left {
		if amount > 0 {
			st.Understated = append(st.Understated, strata.UnderstatedResource{Name: c.resources[r], Amount: *resource.NewMilliQuantity(amount, resource.DecimalSI)})
		}
	}
	return st
}

// CountsUnderstated lists the counted resources (pods, GPUs, ...) that a
// summary reports lower than they are: when there are any, the summary
// could not meet its budget without misstating counts.
func CountsUnderstated(st *strata.CapacitySummaryStatus) []strata.UnderstatedResource {
	var out []strata.UnderstatedResource
	for _, u := range st.Understated {
		if isCounted(u.Name) {
			out = append(out, u)
		}
	}
	return out
}

// NewSnapshotFromSummary builds the hub's view of a flavor's free capacity
// from a summary: its schedulable nodes as they are now. The snapshot is
// frozen: Clone it to try placements, Commit to reserve.
func NewSnapshotFromSummary(st *strata.CapacitySummaryStatus) (*Snapshot, error) {
	return snapshotFromSummary(st, false)
}

// NewEmptySnapshotFromSummary builds a flavor's capacity when empty from a
// summary: every node, with nothing running. A pod set that does not fit
// in it never fits in that cluster.
func NewEmptySnapshotFromSummary(st *strata.CapacitySummaryStatus) (*Snapshot, error) {
	return snapshotFromSummary(st, true)
}

// Bounds of what a hub accepts from a summary. A summary comes from a
// worker, which the hub does not trust with its own memory: every bucket
// of N nodes becomes N nodes in the hub's snapshot, so the node counts are
// bounded before anything is expanded. The bounds are far above what an
// agent publishes (its size budget keeps a summary near 1 MiB).
const (
	MaxSummaryNodes     = 1 << 17 // nodes in free, and again in capacity
	MaxSummaryDomains   = 1 << 16
	MaxSummaryVectors   = 1 << 16
	MaxSummaryLevels    = 16
	MaxSummaryResources = 32
	MaxSummaryTaintSets = 64
	MaxTaintsPerSet     = 32
)

// ValidateSummary checks a summary the way the hub reads it, without
// building anything: its levels, vectors, bounds, and every domain's pairs
// and taint references. The error names the first field that is wrong.
func ValidateSummary(st *strata.CapacitySummaryStatus) error {
	switch {
	case len(st.Levels) == 0:
		return fmt.Errorf("the summary has no levels")
	case len(st.Levels) > MaxSummaryLevels:
		return fmt.Errorf("levels: %d levels, at most %d", len(st.Levels), MaxSummaryLevels)
	case len(st.Resources) > MaxSummaryResources:
		return fmt.Errorf("resources: %d resources, at most %d", len(st.Resources), MaxSummaryResources)
	case len(st.Vectors) > MaxSummaryVectors:
		return fmt.Errorf("vectors: %d vectors, at most %d", len(st.Vectors), MaxSummaryVectors)
	case len(st.Domains) > MaxSummaryDomains:
		return fmt.Errorf("domains: %d domains, at most %d", len(st.Domains), MaxSummaryDomains)
	case len(st.TaintSets) > MaxSummaryTaintSets:
		return fmt.Errorf("taintSets: %d taint sets, at most %d", len(st.TaintSets), MaxSummaryTaintSets)
	}
	leafDepth := len(st.Levels)
	if st.Levels[leafDepth-1] == strata.HostnameLabel {
		leafDepth--
	}
	if int(st.LeafLevels) != leafDepth {
		return fmt.Errorf("the summary's domains cover %d levels, want %d for levels %s", st.LeafLevels, leafDepth, strings.Join(st.Levels, ", "))
	}
	for i, v := range st.Vectors {
		if len(v) != len(st.Resources) {
			return fmt.Errorf("vectors[%d]: %d amounts for %d resources", i, len(v), len(st.Resources))
		}
	}
	for i, ts := range st.TaintSets {
		if len(ts.Taints) > MaxTaintsPerSet {
			return fmt.Errorf("taintSets[%d]: %d taints, at most %d", i, len(ts.Taints), MaxTaintsPerSet)
		}
	}
	if err := checkTaintSets(st); err != nil {
		return err
	}
	if err := validateNodeLabels(st); err != nil {
		return err
	}
	var free, capacity int64
	for i := range st.Domains {
		d := &st.Domains[i]
		if len(d.Values) != leafDepth {
			return fmt.Errorf("domains[%d]: domain %v has %d values, want %d (one per level %v)", i, d.Values, len(d.Values), leafDepth, st.Levels[:leafDepth])
		}
		for _, list := range []struct {
			field string
			pairs []int32
			total *int64
		}{{"free", d.Free, &free}, {"capacity", d.Capacity, &capacity}} {
			if len(list.pairs)%2 != 0 {
				return fmt.Errorf("domains[%d].%s: %d numbers, want pairs of a vector position and a node count", i, list.field, len(list.pairs))
			}
			for j := 0; j < len(list.pairs); j += 2 {
				v, n := list.pairs[j], list.pairs[j+1]
				if v < 0 || int(v) >= len(st.Vectors) {
					return fmt.Errorf("domains[%d].%s[%d]: vector %d does not exist (%d vectors)", i, list.field, j, v, len(st.Vectors))
				}
				if n <= 0 {
					return fmt.Errorf("domains[%d]: domain %v: node count %d must be positive", i, d.Values, n)
				}
				if *list.total += int64(n); *list.total > MaxSummaryNodes {
					return fmt.Errorf("domains[%d].%s[%d]: more than %d nodes in the summary's %s lists", i, list.field, j+1, MaxSummaryNodes, list.field)
				}
			}
		}
		if err := checkFreeTaints(st, i); err != nil {
			return err
		}
	}
	return nil
}

func snapshotFromSummary(st *strata.CapacitySummaryStatus, empty bool) (*Snapshot, error) {
	if err := ValidateSummary(st); err != nil {
		return nil, err
	}
	s := NewSummarySnapshot(st.Levels)
	s.labels = knowledgeOf(st)
	nodes := newSummaryNodes(st, s.leafDepth)
	if int(st.LeafLevels) != s.leafDepth {
		return nil, fmt.Errorf("the summary's domains cover %d levels, want %d for levels %s", st.LeafLevels, s.leafDepth, strings.Join(st.Levels, ", "))
	}
	pos := make([]int, len(st.Resources))
	for r, name := range st.Resources {
		pos[r] = s.res.get(name)
	}
	vectors := make([]Vector, len(st.Vectors))
	for i, v := range st.Vectors {
		if len(v) != len(st.Resources) {
			return nil, fmt.Errorf("vectors[%d]: %d amounts for %d resources", i, len(v), len(st.Resources))
		}
		vec := make(Vector, len(s.res.names))
		for r, x := range v {
			vec[pos[r]] = x
		}
		vectors[i] = vec
	}
	s.restride()
	// Size the maps and rows for every node up front.
	total := 0
	for _, d := range st.Domains {
		pairs := d.Free
		if empty {
			pairs = d.Capacity
		}
		for j := 1; j < len(pairs); j += 2 {
			total += int(max(pairs[j], 0))
		}
	}
	if !empty {
		if err := checkTaintSets(st); err != nil {
			return nil, err
		}
	}
	s.binSlab = make([]bin, total)
	s.domainSlab = make([]domain, total)
	s.binFree = slices.Grow(s.binFree, total*s.stride)
	s.binUsed = slices.Grow(s.binUsed, total*s.stride)
	s.binByID = slices.Grow(s.binByID, total)
	s.binCount = slices.Grow(s.binCount, total)
	s.binLeaf = slices.Grow(s.binLeaf, total)
	s.binUsable = slices.Grow(s.binUsable, total)
	domains := total + len(st.Domains)*s.leafDepth
	s.parentID = slices.Grow(s.parentID, domains)
	s.podCap = slices.Grow(s.podCap, domains)
	s.unitCap = slices.Grow(s.unitCap, domains)
	s.assigned = slices.Grow(s.assigned, domains)
	if s.hostIsLowest {
		s.byLevel[s.depth-1] = slices.Grow(s.byLevel[s.depth-1], total)
		s.levelIDs[s.depth-1] = slices.Grow(s.levelIDs[s.depth-1], total)
		s.leaves = slices.Grow(s.leaves, total)
	}
	for i, d := range st.Domains {
		pairs, field := d.Free, "free"
		if empty {
			pairs, field = d.Capacity, "capacity"
		}
		if len(pairs)%2 != 0 {
			return nil, fmt.Errorf("domains[%d].%s: %d numbers, want pairs of a vector position and a node count", i, field, len(pairs))
		}
		if len(d.Values) != s.leafDepth {
			return nil, fmt.Errorf("domains[%d]: domain %v has %d values, want %d (one per level %v)", i, d.Values, len(d.Values), s.leafDepth, s.levels[:s.leafDepth])
		}
		if !empty {
			if err := checkFreeTaints(st, i); err != nil {
				return nil, err
			}
		}
		if len(pairs) == 0 {
			continue
		}
		parent := s.root
		if s.leafDepth > 0 {
			parent = s.leafFor(d.Values)
		}
		for j := 0; j < len(pairs); j += 2 {
			v, n := pairs[j], pairs[j+1]
			if v < 0 || int(v) >= len(vectors) {
				return nil, fmt.Errorf("domains[%d].%s[%d]: vector %d does not exist (%d vectors)", i, field, j, v, len(vectors))
			}
			if n <= 0 {
				return nil, fmt.Errorf("domains[%d]: domain %v: node count %d must be positive", i, d.Values, n)
			}
			var nodeTaints []corev1.Taint
			if !empty {
				nodeTaints = freeTaintsOf(st, &d, j/2)
			}
			s.addNodesTo(parent, vectors[v], int64(n), nodeTaints, nodes.node(i, j/2, empty))
		}
	}
	s.Freeze()
	return s, nil
}

// checkTaintSets checks that every taint set of a summary has taints.
func checkTaintSets(st *strata.CapacitySummaryStatus) error {
	for i, ts := range st.TaintSets {
		if len(ts.Taints) == 0 {
			return fmt.Errorf("taintSets[%d] is empty", i)
		}
	}
	return nil
}

// checkFreeTaints checks domain i's freeTaints: none, or one per pair of
// free, each 0 or a position in taintSets counted from 1.
func checkFreeTaints(st *strata.CapacitySummaryStatus, i int) error {
	d := &st.Domains[i]
	if len(d.FreeTaints) == 0 {
		return nil
	}
	if len(d.FreeTaints) != len(d.Free)/2 {
		return fmt.Errorf("domains[%d].freeTaints: %d numbers for %d pairs of free", i, len(d.FreeTaints), len(d.Free)/2)
	}
	for j, t := range d.FreeTaints {
		if t < 0 || int(t) > len(st.TaintSets) {
			return fmt.Errorf("domains[%d].freeTaints[%d]: taint set %d does not exist (%d taint sets, counted from 1)", i, j, t, len(st.TaintSets))
		}
	}
	return nil
}

// freeTaintsOf returns the taints of the nodes of pair k of d's free list
// (nil: none), freeTaints checked.
func freeTaintsOf(st *strata.CapacitySummaryStatus, d *strata.SummaryDomain, k int) []corev1.Taint {
	if len(d.FreeTaints) == 0 || d.FreeTaints[k] == 0 {
		return nil
	}
	return st.TaintSets[d.FreeTaints[k]-1].Taints
}

// project reports an assignment of a summary snapshot at the summary's
// leaf level: the pods of consecutive hosts of one leaf domain are merged.
// It notes the pods' tolerations, node selector and affinity (with the
// host as lowest level, where they count), also before the snapshot has
// tainted or labelled nodes: a reservation is packed again onto newer
// summaries' nodes.
func (s *Snapshot) project(a *Assignment, req Request) *Assignment {
	out := &Assignment{Levels: s.levels[:s.leafDepth], Domains: make([]DomainAssignment, 0, len(a.Domains))}
	if s.hostIsLowest {
		out.Tolerations, out.NodeSelector, out.NodeAffinity = req.Tolerations, req.NodeSelector, req.NodeAffinity
	}
	if !s.hostIsLowest {
		out.Domains = append(out.Domains, a.Domains...)
		return out
	}
	for _, d := range a.Domains {
		var values []string
		if leaf := s.hostLeaf(d.Values[0]); leaf != nil {
			values = leaf.values[:s.leafDepth]
		}
		n := len(out.Domains)
		if n > 0 && slices.Equal(out.Domains[n-1].Values, values) {
			out.Domains[n-1].Count += d.Count
			continue
		}
		out.Domains = append(out.Domains, DomainAssignment{Values: values, Count: d.Count})
	}
	return out
}

// hostLevel says whether a is an assignment to hosts (not a projection).
func (s *Snapshot) hostLevel(a *Assignment) bool {
	return s.hostIsLowest && len(a.Levels) == 1 && a.Levels[0] == strata.HostnameLabel
}

// Refresh moves a snapshot built by NewSnapshotFromSummary to a newer
// summary of the same shape — the same levels and resources, and the same
// leaf domains with as many schedulable nodes each — by rewriting its
// nodes' free capacity in place, much faster than building anew. Usage
// added to the snapshot is dropped. It returns false, changing nothing,
// when the shape differs or the summary is malformed, and for a snapshot
// that was cloned or is a clone (they share nodes): build anew then. The
// nodes take the new summary's taints.
func (s *Snapshot) Refresh(st *strata.CapacitySummaryStatus) bool {
	if !s.summary || s.shared || !slices.Equal(s.levels, st.Levels) || int(st.LeafLevels) != s.leafDepth {
		return false
	}
	if ValidateSummary(st) != nil {
		return false // NewSnapshotFromSummary says what is wrong
	}
	pos := make([]int, len(st.Resources))
	for r, name := range st.Resources {
		i, ok := s.res.index[name]
		if !ok || i >= s.stride {
			return false
		}
		pos[r] = i
	}
	vectors := make([]Vector, len(st.Vectors))
	for i, v := range st.Vectors {
		if len(v) != len(st.Resources) {
			return false
		}
		vec := make(Vector, s.stride)
		for r, x := range v {
			vec[pos[r]] = x
		}
		vectors[i] = vec
	}
	// Match every summary domain to its nodes before changing anything.
	type change struct {
		bins []*bin
		d    *strata.SummaryDomain
		i    int
	}
	changes := make([]change, 0, len(st.Domains))
	total := 0
	for i := range st.Domains {
		d := &st.Domains[i]
		n := 0
		for j := 0; j+1 < len(d.Free); j += 2 {
			if d.Free[j] < 0 || int(d.Free[j]) >= len(vectors) || d.Free[j+1] <= 0 {
				return false
			}
			n += int(d.Free[j+1])
		}
		if len(d.Free)%2 != 0 || len(d.Values) != s.leafDepth || checkFreeTaints(st, i) != nil {
			return false
		}
		if n == 0 {
			continue
		}
		dom := s.root
		if s.leafDepth > 0 {
			if dom = s.domains[domainKey(d.Values)]; dom == nil {
				return false
			}
		}
		bins := s.binsOf(dom)
		if len(bins) != n {
			return false
		}
		total += n
		changes = append(changes, change{bins, d, i})
	}
	if total != len(s.binByID)-len(s.freeSlots) {
		return false
	}
	clear(s.binUsed)
	s.labels = knowledgeOf(st)
	nodes := newSummaryNodes(st, s.leafDepth)
	prints := labelSetPrints(st)
	for _, c := range changes {
		k := 0
		for j := 0; j < len(c.d.Free); j += 2 {
			taints := freeTaintsOf(st, c.d, j/2)
			print := "?" // a stand-in of its own
			if set := labelSetOf(c.d.FreeLabels, j/2); set >= 0 && int(set) < len(prints) {
				print = prints[set]
			}
			for range c.d.Free[j+1] {
				b := c.bins[k]
				k++
				b.alloc = vectors[c.d.Free[j]]
				// The bin stays in its domain: its stand-in's labels
				// change only with its label set.
				if b.node == nil || b.labelPrint != print {
					b.node, b.labelPrint = nodes.node(c.i, j/2, false), print
				}
				s.setTaints(b, taints)
				s.recompute(b)
			}
		}
	}
	return true
}

// binsOf returns the bins under a domain, kept while the layout does not
// change (Refresh asks for every domain at every summary, a hub's
// reservation for its domains). The slice is shared: read it only.
func (s *Snapshot) binsOf(d *domain) []*bin {
	if s.binsUnder == nil || s.binsUnderLayout != s.layout {
		s.binsUnder, s.binsUnderLayout = map[*domain][]*bin{}, s.layout
	}
	if bins, ok := s.binsUnder[d]; ok {
		return bins
	}
	var bins []*bin
	for _, leaf := range s.leavesUnder(d) {
		bins = append(bins, leaf.bins...)
	}
	s.binsUnder[d] = bins
	return bins
}
