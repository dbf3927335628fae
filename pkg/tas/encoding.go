package tas

import (
	"fmt"
	"strings"

	strata "strata.dev/strata/api/v1beta1"
)

// Limits of the compact TopologyAssignment format (see the API's schema).
const (
	maxSlices          = 1000
	maxDomainsPerSlice = 100000
	// maxDecodedDomains bounds what Decode expands, so that a hostile object
	// cannot make it allocate without limit.
	maxDecodedDomains = 1 << 20
	// sliceOverhead approximates the JSON bytes a slice costs besides its
	// values, to decide when splitting into slices pays off.
	sliceOverhead = 96
)

// Encode converts an assignment to the compact "slices" format of KEP-2724.
// Consecutive domains whose last-level values share a stem (the value up to
// its last '-') form one slice, with the common prefix and suffix of each
// level factored out; neighbouring slices are merged when that is smaller.
// Decode(Encode(a)) == a.
func Encode(a *Assignment) *strata.TopologyAssignment {
	ta := &strata.TopologyAssignment{Levels: append([]string(nil), a.Levels...)}
	if len(a.Domains) == 0 {
		return ta
	}
	var runs []run
	start := 0
	for i := 1; i <= len(a.Domains); i++ {
		if i == len(a.Domains) || i-start == maxDomainsPerSlice ||
			stem(lastValue(a.Domains[i])) != stem(lastValue(a.Domains[start])) {
			runs = append(runs, newRun(a.Domains[start:i], len(a.Levels)))
			start = i
		}
	}
	runs = mergeRuns(runs)
	for _, r := range runs {
		ta.Slices = append(ta.Slices, r.slice())
	}
	return ta
}

func lastValue(d DomainAssignment) string { return d.Values[len(d.Values)-1] }

// stem is a value up to and including its last '-', or "" without one.
func stem(v string) string { return v[:strings.LastIndexByte(v, '-')+1] }

// run is a candidate slice: consecutive domains with per-level statistics.
type run struct {
	domains []DomainAssignment
	levels  []levelStats
}

type levelStats struct {
	prefix, suffix string // longest common prefix and suffix
	sumLen, minLen int
	allEqual       bool
}

// affixes are the prefix and suffix to factor out: the suffix is shortened
// so that it does not overlap the prefix in the shortest value.
func (st levelStats) affixes() (string, string) {
	suffix := st.suffix
	if over := len(st.prefix) + len(suffix) - st.minLen; over > 0 {
		suffix = suffix[over:]
	}
	return st.prefix, suffix
}

func newRun(domains []DomainAssignment, nLevels int) run {
	r := run{domains: domains, levels: make([]levelStats, nLevels)}
	for l := range nLevels {
		first := domains[0].Values[l]
		st := levelStats{prefix: first, suffix: first, minLen: len(first), allEqual: true}
		for _, d := range domains {
			v := d.Values[l]
			st.sumLen += len(v)
			st.minLen = min(st.minLen, len(v))
			if v != first {
				st.allEqual = false
			}
			st.prefix = commonPrefix(st.prefix, v)
			st.suffix = commonSuffix(st.suffix, v)
		}
		r.levels[l] = st
	}
	return r
}

// cost estimates the JSON size of the run as one slice.
func (r run) cost() int {
	c := sliceOverhead
	n := len(r.domains)
	for _, st := range r.levels {
		if st.allEqual {
			c += len(st.prefix) + 16
			continue
		}
		p, s := st.affixes()
		c += len(p) + len(s) + st.sumLen - n*(len(p)+len(s)) + 3*n + 40
	}
	if !r.universalCount() {
		c += 3 * n
	}
	return c
}

func (r run) universalCount() bool {
	for _, d := range r.domains {
		if d.Count != r.domains[0].Count {
			return false
		}
	}
	return true
}

// merge joins two neighbouring runs; a.domains and b.domains are adjacent
// parts of one slice.
func merge(a, b run) run {
	m := run{domains: a.domains[:len(a.domains)+len(b.domains)], levels: make([]levelStats, len(a.levels))}
	for l := range a.levels {
		x, y := a.levels[l], b.levels[l]
		m.levels[l] = levelStats{
			prefix:   commonPrefix(x.prefix, y.prefix),
			suffix:   commonSuffix(x.suffix, y.suffix),
			sumLen:   x.sumLen + y.sumLen,
			minLen:   min(x.minLen, y.minLen),
			allEqual: x.allEqual && y.allEqual && x.prefix == y.prefix,
		}
	}
	return m
}

// mergeRuns merges neighbouring runs when one slice is smaller than two,
// and until there are at most maxSlices.
func mergeRuns(runs []run) []run {
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 && len(out[n-1].domains)+len(r.domains) <= maxDomainsPerSlice {
			if m := merge(out[n-1], r); m.cost() <= out[n-1].cost()+r.cost() {
				out[n-1] = m
				continue
			}
		}
		out = append(out, r)
	}
	for len(out) > maxSlices {
		merged := out[:0]
		for i := 0; i < len(out); i += 2 {
			if i+1 < len(out) && len(out[i].domains)+len(out[i+1].domains) <= maxDomainsPerSlice {
				merged = append(merged, merge(out[i], out[i+1]))
			} else {
				merged = append(merged, out[i])
			}
		}
		out = merged
	}
	return out
}

func (r run) slice() strata.TopologyAssignmentSlice {
	n := len(r.domains)
	s := strata.TopologyAssignmentSlice{DomainCount: int32(n)}
	for l, st := range r.levels {
		if st.allEqual {
			v := st.prefix
			s.ValuesPerLevel = append(s.ValuesPerLevel, strata.TopologyAssignmentSliceLevelValues{Universal: &v})
			continue
		}
		iv := &strata.TopologyAssignmentSliceLevelIndividualValues{Roots: make([]string, n)}
		prefix, suffix := st.affixes()
		if prefix != "" {
			iv.Prefix = &prefix
		}
		if suffix != "" {
			iv.Suffix = &suffix
		}
		for i, d := range r.domains {
			v := d.Values[l]
			iv.Roots[i] = v[len(prefix) : len(v)-len(suffix)]
		}
		s.ValuesPerLevel = append(s.ValuesPerLevel, strata.TopologyAssignmentSliceLevelValues{Individual: iv})
	}
	if r.universalCount() {
		c := r.domains[0].Count
		s.PodCounts.Universal = &c
	} else {
		s.PodCounts.Individual = make([]int32, n)
		for i, d := range r.domains {
			s.PodCounts.Individual[i] = d.Count
		}
	}
	return s
}

func commonPrefix(a, b string) string {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return a[:i]
}

func commonSuffix(a, b string) string {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return a[len(a)-i:]
}

// Decode expands a compact TopologyAssignment, checking every rule of the
// format; it never panics, whatever the input.
func Decode(ta *strata.TopologyAssignment) (*Assignment, error) {
	if ta == nil {
		return nil, fmt.Errorf("no topology assignment")
	}
	if len(ta.Levels) == 0 {
		return nil, fmt.Errorf("levels: at least one level is required")
	}
	total := 0
	for i, s := range ta.Slices {
		if s.DomainCount < 1 {
			return nil, fmt.Errorf("slices[%d].domainCount: %d must be at least 1", i, s.DomainCount)
		}
		total += int(s.DomainCount)
		if total > maxDecodedDomains {
			return nil, fmt.Errorf("slices: more than %d domains", maxDecodedDomains)
		}
	}
	a := &Assignment{Levels: append([]string(nil), ta.Levels...), Domains: make([]DomainAssignment, 0, total)}
	for i, s := range ta.Slices {
		n := int(s.DomainCount)
		if len(s.ValuesPerLevel) != len(ta.Levels) {
			return nil, fmt.Errorf("slices[%d].valuesPerLevel: has %d entries, want one per level (%d)", i, len(s.ValuesPerLevel), len(ta.Levels))
		}
		values := make([][]string, n)
		flat := make([]string, n*len(ta.Levels))
		for d := range values {
			values[d] = flat[d*len(ta.Levels) : (d+1)*len(ta.Levels)]
		}
		for l, lv := range s.ValuesPerLevel {
			switch {
			case (lv.Universal == nil) == (lv.Individual == nil):
				return nil, fmt.Errorf("slices[%d].valuesPerLevel[%d]: exactly one of universal and individual must be set", i, l)
			case lv.Universal != nil:
				for d := range values {
					values[d][l] = *lv.Universal
				}
			default:
				iv := lv.Individual
				if len(iv.Roots) != n {
					return nil, fmt.Errorf("slices[%d].valuesPerLevel[%d].individual.roots: has %d entries, want domainCount (%d)", i, l, len(iv.Roots), n)
				}
				var prefix, suffix string
				if iv.Prefix != nil {
					prefix = *iv.Prefix
				}
				if iv.Suffix != nil {
					suffix = *iv.Suffix
				}
				for d, root := range iv.Roots {
					values[d][l] = prefix + root + suffix
				}
			}
		}
		pc := s.PodCounts
		if (pc.Universal == nil) == (pc.Individual == nil) {
			return nil, fmt.Errorf("slices[%d].podCounts: exactly one of universal and individual must be set", i)
		}
		if pc.Individual != nil && len(pc.Individual) != n {
			return nil, fmt.Errorf("slices[%d].podCounts.individual: has %d entries, want domainCount (%d)", i, len(pc.Individual), n)
		}
		for d := range n {
			c := int32(0)
			if pc.Universal != nil {
				c = *pc.Universal
			} else {
				c = pc.Individual[d]
			}
			if c < 1 {
				return nil, fmt.Errorf("slices[%d].podCounts: count %d must be at least 1", i, c)
			}
			a.Domains = append(a.Domains, DomainAssignment{Values: values[d], Count: c})
		}
	}
	return a, nil
}
