package tas

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Usage is what a committed assignment takes from each node, so that it can
// be released again.
type Usage map[string]corev1.ResourceList

// Commit takes the capacity of an assignment. When the lowest level is the
// host, each host gets its pods; otherwise the pods of each domain are
// packed onto its nodes, largest free node first, as FindAssignment counted
// them. Pods that find no room (replaying an older admission) are recorded
// on the domain's first node rather than dropped. It fails only for domains
// that are not in the tree. It returns the usage per node.
func (s *Snapshot) Commit(a *Assignment, podRequests corev1.ResourceList) (Usage, error) {
	return s.commit(a, podRequests, false)
}

// CommitIfFree is Commit for a new placement: it takes only capacity that is
// free, and fails with a *FitError, taking nothing, when a domain has no
// room left for its pods (the placement was found on an older state).
// Nodes that are not schedulable count with their free capacity: pods
// already there are not moved by a new placement of the others. A host not
// in the tree (deleted) is recorded as Commit records it.
func (s *Snapshot) CommitIfFree(a *Assignment, podRequests corev1.ResourceList) (Usage, error) {
	return s.commit(a, podRequests, true)
}

// Dispatched is the capacity a hub's reservation took (CommitReservation):
// on a summary snapshot, pods per anonymous node, kept as compactly as a
// hub holding thousands of reservations needs and given back without
// resource lists; else the Usage of Commit. Give it back with
// ReleaseDispatched, on the snapshot that took it.
type Dispatched struct {
	usage Usage
	takes []take
	dem   demand
}

// take is n pods of a reservation on one bin.
type take struct {
	b *bin
	n int64
}

// CommitReservation is Commit for a hub's in-flight reservation on a
// summary snapshot: the pods of each domain go onto its anonymous nodes as
// an agent's BestFit puts them on real ones (see packBestFit), so that the
// hub's view fragments a domain's nodes as the worker will. On other
// snapshots it is Commit.
func (s *Snapshot) CommitReservation(a *Assignment, podRequests corev1.ResourceList) (*Dispatched, error) {
	if !s.summary || s.hostLevel(a) {
		u, err := s.commit(a, podRequests, false)
		if err != nil {
			return nil, err
		}
		return &Dispatched{usage: u}, nil
	}
	dem := s.res.newDemand(podRequests)
	if len(s.res.names) != s.stride {
		s.restride()
	}
	out := &Dispatched{dem: dem}
	record := func(b *bin, n int64) {
		s.takeBin(b, dem, n)
		out.takes = append(out.takes, take{b, n})
	}
	for _, d := range a.Domains {
		if err := s.commitSummaryDomain(d, a, dem, false, s.packBestFit, record); err != nil {
			s.ReleaseDispatched(out)
			return nil, err
		}
	}
	return out, nil
}

// takeBin adds (n > 0) or removes (n < 0) n pods of dem on bin b.
func (s *Snapshot) takeBin(b *bin, dem demand, n int64) {
	at := int(b.slot) * s.stride
	for _, r := range dem {
		s.binUsed[at+r.idx] += n * r.amount
	}
	s.recompute(b)
}

// ReleaseDispatched gives back what CommitReservation took.
func (s *Snapshot) ReleaseDispatched(d *Dispatched) {
	if d == nil {
		return
	}
	if d.usage != nil {
		s.Release(d.usage)
	}
	for _, t := range d.takes {
		s.takeBin(t.b, d.dem, -t.n)
	}
	d.usage, d.takes = nil, nil
}

// usageRecorder records pods taken on a bin into usage, by node name.
func (s *Snapshot) usageRecorder(usage Usage, perPod corev1.ResourceList) func(*bin, int64) {
	return func(b *bin, n int64) { addUsage(s, usage, b.name, perPod, n) }
}

func (s *Snapshot) commit(a *Assignment, podRequests corev1.ResourceList, fit bool) (Usage, error) {
	dem := s.res.newDemand(podRequests)
	perPod := WithPod(podRequests)
	usage := Usage{}
	exact := !s.summary || s.hostLevel(a)
	for _, d := range a.Domains {
		var err error
		if exact {
			err = s.commitDomain(d, dem, perPod, usage, fit)
		} else {
			err = s.commitSummaryDomain(d, a, dem, fit, s.packLargestFirst, s.usageRecorder(usage, perPod))
		}
		if err != nil {
			s.Release(usage)
			return nil, err
		}
	}
	return usage, nil
}

// leafOf finds the leaf domain an assignment entry names.
func (s *Snapshot) leafOf(d DomainAssignment) *domain {
	if s.hostIsLowest && len(d.Values) == 1 {
		return s.hostLeaf(d.Values[0])
	}
	if leaf := s.domains[domainKey(d.Values)]; leaf != nil && leaf.level == s.depth-1 {
		return leaf
	}
	return nil
}

func (s *Snapshot) commitDomain(d DomainAssignment, dem demand, perPod corev1.ResourceList, usage Usage, fit bool) error {
	leaf := s.leafOf(d)
	if leaf == nil && s.hostIsLowest && len(d.Values) == 1 {
		// A host not (yet) in the tree: record the usage on the node of that
		// name; it applies when the node appears. A new placement never names
		// one; a replacement keeps the pods of a deleted node that still waits
		// for its own replacement (a workload within its unhealthy-nodes
		// eviction threshold), and those take nothing anyone else could have.
		addUsage(s, usage, d.Values[0], perPod, int64(d.Count))
		return nil
	}
	if leaf == nil {
		return fmt.Errorf("domain %v is not a leaf of the topology", d.Values)
	}
	// One host: its pods stay on it, schedulable or not.
	host := s.hostIsLowest && len(d.Values) == 1
	return s.pack(leaf.bins, int64(d.Count), dem, fit, host, d.Values, s.usageRecorder(usage, perPod))
}

// commitSummaryDomain commits an entry of a summary snapshot's assignment:
// a domain of the leaf level (the summary's own reporting level), whose
// pods are packed onto its nodes.
func (s *Snapshot) commitSummaryDomain(d DomainAssignment, a *Assignment, dem demand, fit bool,
	pack func(bins []*bin, count int64, dem demand, fit bool, values []string, record func(*bin, int64)) error, record func(*bin, int64)) error {
	dom := s.root
	if len(d.Values) != s.leafDepth {
		return fmt.Errorf("domain %v: want %d values, one per level %v", d.Values, s.leafDepth, s.levels[:s.leafDepth])
	}
	if s.leafDepth > 0 {
		dom = s.domains[domainKey(d.Values)]
		if dom == nil {
			return fmt.Errorf("domain %v is not in the summary", d.Values)
		}
	}
	bins := s.binsOf(dom) // shared: read only
	if len(bins) == 0 {
		return fmt.Errorf("domain %v has no nodes", d.Values)
	}
	p := &plan{s: s}
	selector, affinity, _ := s.checkable(Request{NodeSelector: a.NodeSelector, NodeAffinity: a.NodeAffinity})
	p.req.Tolerations = a.Tolerations
	p.selects = s.hostIsLowest && (len(selector) > 0 || affinity != nil)
	if p.selects {
		p.affinity = requiredAffinity(selector, affinity)
	}
	if p.selects || s.taintsCount() {
		// Only the nodes the pods may use, as they were counted; all of
		// them if none is (pods are recorded, never dropped).
		if admitted := slices.DeleteFunc(slices.Clone(bins), func(b *bin) bool { return !p.admits(b) }); len(admitted) > 0 {
			bins = admitted
		}
	}
	return pack(bins, int64(d.Count), dem, fit, d.Values, record)
}

// packLargestFirst packs a summary domain's pods as FindAssignment counted
// them (see pack).
func (s *Snapshot) packLargestFirst(bins []*bin, count int64, dem demand, fit bool, values []string, record func(*bin, int64)) error {
	return s.pack(bins, count, dem, fit, false, values, record)
}

// packBestFit records count pods on a summary domain's anonymous nodes the
// way an agent's BestFit places them on real ones, so that the hub's
// view of a domain fragments as the worker's does: the largest nodes
// whole while the rest fits in no single node, then the tightest node
// that holds the rest. Pods that find no room are recorded all the same,
// unless fit is set: that is then a *FitError naming the domain.
func (s *Snapshot) packBestFit(bins []*bin, count int64, dem demand, fit bool, values []string, record func(*bin, int64)) error {
	type candidate struct {
		b   *bin
		fit int64
	}
	cands := make([]candidate, 0, len(bins))
	room := int64(0)
	for _, b := range bins {
		if !b.usable {
			continue
		}
		if f := dem.fit(s.binFree[int(b.slot)*s.stride : int(b.slot+1)*s.stride]); f > 0 {
			cands = append(cands, candidate{b, f})
			room += f
		}
	}
	if fit && room < count {
		return &FitError{Reason: fmt.Sprintf("%s has room for %d of the %d pods placed there", strings.Join(values, "/"), room, count)}
	}
	// Largest first; of equals, the first in the given order.
	slices.SortStableFunc(cands, func(x, y candidate) int { return cmp.Compare(y.fit, x.fit) })
	left := count
	for len(cands) > 0 && left > 0 {
		// The tightest node that holds the rest, if one does: the last of
		// the prefix that holds it (largest first, stable).
		last := sort.Search(len(cands), func(i int) bool { return cands[i].fit < left }) - 1
		if last >= 0 {
			record(cands[last].b, left)
			return nil
		}
		record(cands[0].b, cands[0].fit)
		left -= cands[0].fit
		cands = cands[1:]
	}
	if left > 0 {
		// No room left (the usage of a workload admitted earlier is
		// replayed): record the pods anyway, so that capacity is never
		// overstated.
		record(bins[0], left)
	}
	return nil
}

// leavesUnder returns the leaf domains under d in name order.
func (s *Snapshot) leavesUnder(d *domain) []*domain {
	if len(d.children) == 0 {
		if d == s.root {
			return nil
		}
		return []*domain{d}
	}
	var out []*domain
	for _, c := range d.children {
		out = append(out, s.leavesUnder(c)...)
	}
	return out
}

// pack records count pods on bins, largest free bin first, as
// FindAssignment counted them (any bin with room when anyNode is set, else
// the schedulable ones). Pods that find no room are recorded all the same,
// unless fit is set: that is then a *FitError naming the domain.
func (s *Snapshot) pack(bins []*bin, count int64, dem demand, fit, anyNode bool, values []string, record func(*bin, int64)) error {
	type candidate struct {
		b   *bin
		fit int64
	}
	cands := make([]candidate, 0, len(bins))
	room := int64(0)
	for _, b := range bins {
		if !b.usable && !anyNode {
			continue
		}
		if f := dem.fit(s.binFree[int(b.slot)*s.stride : int(b.slot+1)*s.stride]); f > 0 {
			cands = append(cands, candidate{b, f})
			room += f
		}
	}
	if fit && room < count {
		return &FitError{Reason: fmt.Sprintf("%s has room for %d of the %d pods placed there", strings.Join(values, "/"), room, count)}
	}
	// Largest fit first, the first of equals in the given order: taking
	// from one node does not change another's fit, so one sort suffices.
	slices.SortStableFunc(cands, func(x, y candidate) int { return cmp.Compare(y.fit, x.fit) })
	left := count
	for _, c := range cands {
		if left == 0 {
			return nil
		}
		n := min(c.fit, left)
		record(c.b, n)
		left -= n
	}
	if left > 0 {
		// No room left (a node went NotReady, or the usage of a workload
		// admitted earlier is replayed): record the pods anyway, so that
		// capacity is never overstated.
		record(bins[0], left)
	}
	return nil
}

func addUsage(s *Snapshot, usage Usage, node string, perPod corev1.ResourceList, n int64) {
	total := make(corev1.ResourceList, len(perPod))
	for name, q := range perPod {
		total[name] = *resource.NewMilliQuantity(q.MilliValue()*n, q.Format)
	}
	s.AddUsage(node, total, 1)
	acc := usage[node]
	if acc == nil {
		usage[node] = total
		return
	}
	for name, q := range total {
		sum := acc[name]
		sum.Add(q)
		acc[name] = sum
	}
}

// Release gives back usage taken by Commit.
func (s *Snapshot) Release(u Usage) {
	for node, rl := range u {
		s.AddUsage(node, rl, -1)
	}
}

// WithPod returns a pod's requests plus one of the pods resource: what the
// pod uses of a node.
func WithPod(rl corev1.ResourceList) corev1.ResourceList {
	out := rl.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	if _, ok := out[corev1.ResourcePods]; !ok {
		out[corev1.ResourcePods] = resource.MustParse("1")
	}
	return out
}
