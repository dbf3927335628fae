package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Series replaces groups of gauge series at once. Resetting a vector and
// setting its series again leaves a moment when a scrape finds none of
// them, and a dashboard a gap, an alert on absent() a false alarm; Replace
// sets a group's new values first and only then deletes the series the
// group had before and no longer has. The zero value is ready to use.
type Series struct {
	mu     sync.Mutex
	groups map[string]map[seriesID]struct{}
}

// seriesID names one series: its vector and its label values, joined.
type seriesID struct {
	vec    *prometheus.GaugeVec
	labels string
}

// labelSep joins label values in a seriesID: a byte no label value of
// these metrics holds.
const labelSep = "\xff"

// Put sets one series of a Replace.
type Put func(vec *prometheus.GaugeVec, value float64, labels ...string)

// Replace makes the series of group those that set puts.
func (s *Series) Replace(group string, set func(put Put)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := map[seriesID]struct{}{}
	set(func(vec *prometheus.GaugeVec, value float64, labels ...string) {
		vec.WithLabelValues(labels...).Set(value)
		now[seriesID{vec, strings.Join(labels, labelSep)}] = struct{}{}
	})
	for id := range s.groups[group] {
		if _, ok := now[id]; !ok {
			id.delete()
		}
	}
	if s.groups == nil {
		s.groups = map[string]map[seriesID]struct{}{}
	}
	if len(now) == 0 {
		delete(s.groups, group)
		return
	}
	s.groups[group] = now
}

// Drop deletes every series of group.
func (s *Series) Drop(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.groups[group] {
		id.delete()
	}
	delete(s.groups, group)
}

func (id seriesID) delete() {
	id.vec.DeleteLabelValues(strings.Split(id.labels, labelSep)...)
}
