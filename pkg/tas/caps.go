package tas

import (
	"encoding/binary"
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
		*c = capsCache{key: key, epoch: s.capsEpoch - 1, contrib: c.contrib[:0], sums: c.sums[:0]}
	}
	if c.epoch != s.capsEpoch || c.logPos > len(s.capsLog) || len(c.contrib) != len(s.binLeaf) || len(c.sums) != len(s.podCap) {
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
	for _, slot := range s.capsLog[c.logPos:] {
		n := s.binCaps(int(slot), dem)
		d := n - c.contrib[slot]
		if d == 0 {
			continue
		}
		c.contrib[slot] = n
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
