package tas

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	strata "strata.dev/strata/api/v1beta1"
)

// Summarize describes the snapshot's free capacity for the hub (BRIEF
// decision 2): the domain tree down to the lowest level above the host, and
// under each such domain its usable nodes' free vectors in buckets of equal
// vectors. When the JSON would exceed maxBytes, free amounts are rounded
// down to coarser steps until it fits, so capacity is never overstated.
// Generation and observed time are left to the caller.
func (s *Snapshot) Summarize(maxBytes int) (strata.CapacitySummaryStatus, error) {
	depth := s.depth
	if s.hostIsLowest {
		depth--
	}
	st := strata.CapacitySummaryStatus{
		Levels:     slices.Clone(s.levels),
		LeafLevels: int32(depth),
		Resources:  slices.Clone(s.res.names),
	}
	type bucket struct {
		free  []int64
		nodes int32
	}
	var domains []struct {
		values  []string
		buckets []bucket
	}
	index := map[string]int{}
	for _, leaf := range s.orderedLeaves() {
		values := leaf.values[:depth]
		key := domainKey(values)
		i, ok := index[key]
		if !ok {
			i = len(domains)
			index[key] = i
			domains = append(domains, struct {
				values  []string
				buckets []bucket
			}{values: values})
		}
		for _, b := range leaf.bins {
			if !b.usable {
				continue
			}
			row := s.binFree[int(b.slot)*s.stride : int(b.slot+1)*s.stride]
			free := make([]int64, len(row))
			for r, v := range row {
				free[r] = max(v, 0)
			}
			st.Nodes += int32(b.count)
			domains[i].buckets = append(domains[i].buckets, bucket{free: free, nodes: int32(b.count)})
		}
	}
	steps := make([]int64, len(st.Resources))
	for r := range steps {
		steps[r] = 1
	}
	for round := 0; ; round++ {
		st.Domains = st.Domains[:0]
		for _, d := range domains {
			merged := map[string]int{}
			sd := strata.SummaryDomain{Values: d.values}
			for _, b := range d.buckets {
				free := make([]int64, len(b.free))
				for r, v := range b.free {
					free[r] = v / steps[r] * steps[r]
				}
				k := fmt.Sprint(free)
				if j, ok := merged[k]; ok {
					sd.Buckets[j].Nodes += b.nodes
					continue
				}
				merged[k] = len(sd.Buckets)
				sd.Buckets = append(sd.Buckets, strata.CapacityBucket{Free: free, Nodes: b.nodes})
			}
			st.Domains = append(st.Domains, sd)
		}
		data, err := json.Marshal(st)
		if err != nil {
			return st, err
		}
		if len(data) <= maxBytes {
			return st, nil
		}
		if round == 40 {
			return st, fmt.Errorf("the summary of %d domains needs %d bytes, more than the budget of %d even when coarsened", len(st.Domains), len(data), maxBytes)
		}
		st.Coarsened = true
		for r := range steps {
			// Coarsen in steps that keep values readable: ×2 per round,
			// starting from one unit of the resource.
			if steps[r] == 1 {
				steps[r] = 1000
			} else {
				steps[r] *= 2
			}
		}
	}
}

// NewSnapshotFromSummary builds the hub's view of a flavor from a summary.
func NewSnapshotFromSummary(st *strata.CapacitySummaryStatus) (*Snapshot, error) {
	if len(st.Levels) == 0 {
		return nil, fmt.Errorf("the summary has no levels")
	}
	s := NewSummarySnapshot(st.Levels)
	if int(st.LeafLevels) != s.depth {
		return nil, fmt.Errorf("the summary's domains cover %d levels, want %d for levels %s", st.LeafLevels, s.depth, strings.Join(st.Levels, ", "))
	}
	for i, d := range st.Domains {
		for j, b := range d.Buckets {
			if len(b.Free) != len(st.Resources) {
				return nil, fmt.Errorf("domains[%d].buckets[%d]: %d free amounts for %d resources", i, j, len(b.Free), len(st.Resources))
			}
			free := corev1.ResourceList{}
			for r, name := range st.Resources {
				free[name] = *resource.NewMilliQuantity(b.Free[r], resource.DecimalSI)
			}
			if err := s.AddBins(d.Values, free, int64(b.Nodes)); err != nil {
				return nil, fmt.Errorf("domains[%d]: %w", i, err)
			}
		}
	}
	return s, nil
}
