package tas

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// maxCapsCaches bounds the demands whose leaf capacity a snapshot keeps:
// the shapes a hub decides for in a burst, and what a summary of 10,000
// nodes costs in memory (a row of 8 bytes per bin each).
const maxCapsCaches = 4

// capsCache is the pod capacity of every domain for one demand, and of
// every bin (contrib) so that a bin's change is applied as a difference.
type capsCache struct {
	key     string
	epoch   uint64
	logPos  int
	contrib []int64 // per bin slot: pods of the demand that fit, times its count
	sums    []int64 // per domain id: the sum of the contrib of the bins under it
	// buckets group the leaves by sums, when asked for (leafBuckets).
	buckets capBuckets
}

// logCaps notes that a bin's free capacity was recomputed. The log is
// bounded: past the bins' number, it starts over and every cache is
// rebuilt (a whole new summary, say, changes most bins anyway).
func (s *Snapshot) logCaps(slot int32) {
	if len(s.caps) == 0 {
		return
	}
	if len(s.capsLog) >= max(1024, len(s.binByID)) {
		s.capsLog = s.capsLog[:0]
		s.capsEpoch++
		return
	}
	s.capsLog = append(s.capsLog, slot)
}

// demandKey identifies a demand whatever the order of its resources.
func demandKey(dem demand) string {
	sorted := slices.Clone(dem)
	slices.SortFunc(sorted, func(a, b need) int { return a.idx - b.idx })
	buf := make([]byte, 0, len(sorted)*12)
	for _, r := range sorted {
		buf = binary.AppendUvarint(buf, uint64(r.idx))
		buf = binary.AppendVarint(buf, r.amount)
	}
	return string(buf)
}

// binCaps is what bin slot holds of dem: its pods times its node count;
// nothing when it is not in the tree or not usable.
func (s *Snapshot) binCaps(slot int, dem demand) int64 {
	if s.binLeaf[slot] < 0 || !s.binUsable[slot] {
		return 0
	}
	f := dem.fit(s.binFree[slot*s.stride : (slot+1)*s.stride])
	return f * s.binCount[slot]
}

// domainCaps returns, per domain id, the pods of dem that fit in each
// domain, node by node: what computeCaps sums over every bin and then up
// the levels, here kept per demand and brought up to date from the bins
// recomputed since it was last asked — after a reservation, the few bins
// it took from and their ancestors. Read it only; it changes with the next
// call.
func (s *Snapshot) domainCaps(dem demand) []int64 {
	key := demandKey(dem)
	i := slices.IndexFunc(s.caps, func(c *capsCache) bool { return c.key == key })
	var c *capsCache
	if i >= 0 {
		c = s.caps[i]
		copy(s.caps[1:i+1], s.caps[:i])
		s.caps[0] = c
	} else {
		if len(s.caps) < maxCapsCaches {
			s.caps = append(s.caps, nil)
		}
		c = s.caps[len(s.caps)-1]
		if c == nil {
			c = &capsCache{}
		}
		copy(s.caps[1:], s.caps[:len(s.caps)-1])
		s.caps[0] = c
		*c = capsCache{key: key, epoch: s.capsEpoch - 1, contrib: c.contrib[:0], sums: c.sums[:0], buckets: c.buckets.reset()}
	}
	if c.epoch != s.capsEpoch || c.logPos > len(s.capsLog) || len(c.contrib) != len(s.binLeaf) || len(c.sums) != len(s.podCap) {
		c.buckets = c.buckets.reset()
		c.contrib = slices.Grow(c.contrib[:0], len(s.binLeaf))[:len(s.binLeaf)]
		c.sums = slices.Grow(c.sums[:0], len(s.podCap))[:len(s.podCap)]
		clear(c.sums)
		for slot := range s.binLeaf {
			n := s.binCaps(slot, dem)
			c.contrib[slot] = n
			if n != 0 {
				c.sums[s.binLeaf[slot]] += n
			}
		}
		for lvl := s.depth - 1; lvl >= 0; lvl-- {
			for _, id := range s.levelIDs[lvl] {
				c.sums[s.parentID[id]] += c.sums[id]
			}
		}
		c.epoch, c.logPos = s.capsEpoch, len(s.capsLog)
		return c.sums
	}
	// Buckets by leaf rank follow only while the leaves' order stands.
	if c.buckets.built && (s.leafOrder == nil || c.buckets.orderGen != s.orderGen) {
		c.buckets.built = false
	}
	for _, slot := range s.capsLog[c.logPos:] {
		n := s.binCaps(int(slot), dem)
		d := n - c.contrib[slot]
		if d == 0 {
			continue
		}
		c.contrib[slot] = n
		if leaf := s.binLeaf[slot]; c.buckets.built {
			c.buckets.move(s.leafRank[leaf], c.sums[leaf], c.sums[leaf]+d)
		}
		for id := s.binLeaf[slot]; ; id = s.parentID[id] {
			c.sums[id] += d
			if id == s.root.id {
				break
			}
		}
	}
	c.logPos = len(s.capsLog)
	return c.sums
}

// maxBucketValues bounds the distinct leaf capacities capBuckets keeps a
// set of leaves for: a set costs a bit per leaf. Past it, placements
// order the leaves as they would without buckets.
const maxBucketValues = 128

// capBuckets are the leaves of a snapshot grouped by their pod capacity
// for a demand, each group a bit set over the leaves' name order
// (leafRank): LeastFreeCapacity takes leaves from the least free up, ties
// in name order, and finds the tightest leaf that holds a count, by
// reading the few groups and leaves it needs rather than ordering every
// leaf.
type capBuckets struct {
	built    bool
	orderGen uint64
	// values are the capacities (> 0) that have a set, ascending; sets[i]
	// and counts[i] the leaves of capacity values[i] and their number.
	values []int64
	sets   [][]uint64
	counts []int
	words  int
}

// reset empties b, keeping its memory.
func (b capBuckets) reset() capBuckets {
	for i := range b.sets {
		clear(b.sets[i])
	}
	return capBuckets{values: b.values[:0], sets: b.sets[:0], counts: b.counts[:0]}
}

// set returns the index of the set of leaves of capacity v, made when
// missing; -1 when there are too many distinct capacities.
func (b *capBuckets) set(v int64) int {
	i, found := slices.BinarySearch(b.values, v)
	if found {
		return i
	}
	if len(b.values) >= maxBucketValues {
		return -1
	}
	var leaves []uint64
	if n := len(b.sets); n < cap(b.sets) {
		leaves = b.sets[:n+1][n] // a cleared set of an earlier use
	}
	if len(leaves) != b.words {
		leaves = make([]uint64, b.words)
	}
	b.values = slices.Insert(b.values, i, v)
	b.sets = slices.Insert(b.sets, i, leaves)
	b.counts = slices.Insert(b.counts, i, 0)
	return i
}

// move moves the leaf of rank r from capacity from to capacity to. A set
// that cannot be made drops the buckets (built false): they are built
// again when next asked for, or not used.
func (b *capBuckets) move(r int32, from, to int64) {
	if from == to {
		return
	}
	if from > 0 {
		i, _ := slices.BinarySearch(b.values, from)
		b.sets[i][r/64] &^= 1 << (r % 64)
		b.counts[i]--
	}
	if to > 0 {
		i := b.set(to)
		if i < 0 {
			*b = b.reset()
			return
		}
		b.sets[i][r/64] |= 1 << (r % 64)
		b.counts[i]++
	}
}

// leafBuckets returns the leaves of the snapshot grouped by their pod
// capacity for dem (domainCaps), nil when there are too many distinct
// capacities to group.
func (s *Snapshot) leafBuckets(dem demand) *capBuckets {
	sums := s.domainCaps(dem)
	c := s.caps[0] // domainCaps puts the demand's cache first
	s.ensureOrder()
	b := &c.buckets
	if b.built && b.orderGen == s.orderGen {
		return b
	}
	*b = b.reset()
	b.words = (len(s.leafOrder) + 63) / 64
	for r, d := range s.leafOrder {
		v := sums[d.id]
		if v <= 0 {
			continue
		}
		i := b.set(v)
		if i < 0 {
			*b = b.reset()
			return nil
		}
		b.sets[i][r/64] |= 1 << (r % 64)
		b.counts[i]++
	}
	b.built, b.orderGen = true, s.orderGen
	return b
}

// first returns the rank of the first leaf of set i.
func (b *capBuckets) first(i int) int {
	for w, word := range b.sets[i] {
		if word != 0 {
			return w*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}
