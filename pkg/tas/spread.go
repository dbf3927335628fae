package tas

import strata "strata.dev/strata/api/v1beta1"

// DomainAt names the domain of level that holds one domain of an
// assignment (its levels and values, as Assignment.Domains gives them):
// its values from the top level down to level. It reports false when the
// snapshot cannot tell: a level it does not have, below the assignment's
// (a summary's leaf level), or a host it does not know.
func (s *Snapshot) DomainAt(levels, values []string, level string) ([]string, bool) {
	lvl, err := s.levelIndex(level)
	if err != nil || len(values) == 0 {
		return nil, false
	}
	if len(levels) == 1 && levels[0] == strata.HostnameLabel && s.hostIsLowest {
		d := s.hostLeaf(values[0])
		for d != nil && d.level > lvl {
			d = d.parent
		}
		if d == nil || d.level != lvl {
			return nil, false
		}
		return d.values[:lvl+1], true
	}
	if lvl >= len(values) || len(levels) != len(values) {
		return nil, false
	}
	return values[:lvl+1], true
}
