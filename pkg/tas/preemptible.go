package tas

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// A summary's preemptible capacity (status.preemptible) tells the hub what
// preempting would free on a flavor: per ClusterQueue and priority p, the
// free capacity once every workload of the queue with priority ≤ p is
// gone. It is captured on the agent's own snapshot with those workloads
// released, exactly as the agent's preemption search releases them, so
// that the hub's "fits after preempting up to p" is the agent's answer.

// MaxPreemptible bounds the entries of a summary's preemptible capacity.
const MaxPreemptible = 32

// Held is an admitted workload's hold on a flavor, as a possible victim.
type Held struct {
	Queue    string
	Priority int32
	Usage    Usage
	// Requests is the quota the workload holds on the flavor.
	Requests corev1.ResourceList
	// AdmittedAt and Key order a queue's workloads as the agent's search
	// takes them back when it reclaims from the queue
	// (preemption.Order: within a priority, the most recently admitted
	// first, then by key).
	AdmittedAt time.Time
	Key        string
}

// Victims says whose workloads a flavor's preemptible capacity lists.
type Victims struct {
	// Within are the queues that preempt within themselves: each band
	// releases every workload of the queue up to a priority.
	Within map[string]bool
	// Borrowed are the queues a cohort peer reclaims from, with what each
	// borrows on the flavor (its usage beyond its nominal quota): each
	// band releases the queue's workloads up to a priority, in the order
	// the agent's search takes them back, only while the queue borrows
	// what it borrows now (a reclaim band).
	Borrowed map[string]corev1.ResourceList
}

// preemptibleLayer is one entry's free rows, aligned with Capacity.free.
type preemptibleLayer struct {
	queue     string
	priority  int32
	workloads int32
	reclaim   bool
	holding   corev1.ResourceName
	// requests is the quota those workloads hold on the flavor;
	// resources those every one of them holds.
	requests  corev1.ResourceList
	resources []corev1.ResourceName
	free      []int64
}

// Band is one entry of a queue's preemptible capacity: the first
// Workloads of its workloads in their order go, all of priority ≤
// Priority, holding Requests; each of them holds some of every one of
// Resources (sorted; of a reclaim band, only resources the queue
// borrows). A band whose workloads share no such resource is of no use
// (a preemption search takes a workload only when it holds some of what
// the preemptor is short of): the bands end before it.
type Band struct {
	Priority  int32
	Workloads int32
	Requests  corev1.ResourceList
	Resources []corev1.ResourceName
}

// narrow keeps of common the resources requests holds some of.
func narrow(common []corev1.ResourceName, requests corev1.ResourceList) []corev1.ResourceName {
	return slices.DeleteFunc(common, func(r corev1.ResourceName) bool {
		q, ok := requests[r]
		return !ok || q.IsZero()
	})
}

// resourceNames are the resources of rl, sorted.
func resourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(rl))
}

// FullBands returns the bands of a queue's workloads (sorted by priority
// in place): at each of their priorities, every workload up to it.
func FullBands(held []Held) []Band {
	slices.SortStableFunc(held, func(a, b Held) int { return cmp.Compare(a.Priority, b.Priority) })
	var common []corev1.ResourceName
	if len(held) > 0 {
		common = resourceNames(held[0].Requests)
	}
	var out []Band
	requests := corev1.ResourceList{}
	for i, h := range held {
		addTo(requests, h.Requests)
		if common = narrow(common, h.Requests); len(common) == 0 {
			break
		}
		if i == len(held)-1 || held[i+1].Priority != h.Priority {
			out = append(out, Band{Priority: h.Priority, Workloads: int32(i + 1), Requests: requests.DeepCopy(), Resources: slices.Clone(common)})
		}
	}
	return out
}

// ReclaimBands returns the bands of a queue that borrows borrowed, as the
// agent's search takes its workloads back for a cohort peer (held sorted
// in place, in that order): one at each priority while the queue still
// borrows, the last where it stops borrowing (as soon as any resource it
// borrows now is given back: on one resource, where the search stops;
// on several, never after it). Nothing when it borrows nothing.
func ReclaimBands(held []Held, borrowed corev1.ResourceList) []Band {
	slices.SortStableFunc(held, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), b.AdmittedAt.Compare(a.AdmittedAt), cmp.Compare(a.Key, b.Key))
	})
	borrows := func(given corev1.ResourceList) bool {
		for r, b := range borrowed {
			if g := given[r]; g.Cmp(b) >= 0 {
				return false
			}
		}
		return len(borrowed) > 0
	}
	common := resourceNames(borrowed)
	var out []Band
	requests := corev1.ResourceList{}
	for i, h := range held {
		if !borrows(requests) {
			break
		}
		addTo(requests, h.Requests)
		if common = narrow(common, h.Requests); len(common) == 0 {
			break
		}
		if i == len(held)-1 || held[i+1].Priority != h.Priority || !borrows(requests) {
			out = append(out, Band{Priority: h.Priority, Workloads: int32(i + 1), Requests: requests.DeepCopy(), Resources: slices.Clone(common)})
		}
	}
	return out
}

func addTo(sum, add corev1.ResourceList) {
	for r, v := range add {
		q := sum[r]
		q.Add(v)
		sum[r] = q
	}
}

// Series is one list of a queue's bands, each band cumulative over the
// one before it: the bands of all the queue's workloads that the search
// may take (Holding empty), or of only those holding some of Holding
// (for a preemptor short of it, whose search takes no other). Held are
// the series' workloads in its order; a band's first Workloads of them
// go.
type Series struct {
	Queue   string
	Reclaim bool
	Holding corev1.ResourceName
	Held    []Held
	Bands   []Band
}

// QueueSeries returns the series of bands of the victims' queues among
// held, by queue name: for a queue that preempts within itself, its
// FullBands; for one a peer reclaims from, its ReclaimBands. Where the
// queue's workloads do not all hold the same resources, the bands of all
// of them end early or count for fewer preemptors (a band counts only
// for a preemptor short of what every one of its workloads holds), so a
// series follows per resource of those holding it: a reclaim series of
// resource r ends where the queue stops borrowing r, not where it stops
// borrowing any resource. A series whose bands list the same workloads
// as one before it is left out (addSeries).
func QueueSeries(held []Held, victims Victims) []Series {
	byQueue := map[string][]Held{}
	for _, h := range held {
		byQueue[h.Queue] = append(byQueue[h.Queue], h)
	}
	var out []Series
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		if victims.Within[q] {
			hs := slices.Clone(byQueue[q])
			out = addSeries(out, Series{Queue: q, Held: hs, Bands: FullBands(hs)})
			for _, r := range heldResources(hs) {
				sub := holding(hs, r)
				if len(sub) == len(hs) {
					continue // every one holds r: the series of all of them
				}
				out = addSeries(out, Series{Queue: q, Holding: r, Held: sub, Bands: FullBands(sub)})
			}
		}
		if b := victims.Borrowed[q]; len(b) > 0 {
			hs := slices.Clone(byQueue[q])
			out = addSeries(out, Series{Queue: q, Reclaim: true, Held: hs, Bands: ReclaimBands(hs, b)})
			if len(b) == 1 && !slices.ContainsFunc(hs, func(h Held) bool { return !holds(h, resourceNames(b)[0]) }) {
				continue // one resource borrowed, held by every one: the series above
			}
			for _, r := range resourceNames(b) {
				sub := holding(hs, r)
				if len(sub) == 0 {
					continue
				}
				out = addSeries(out, Series{Queue: q, Reclaim: true, Holding: r, Held: sub, Bands: ReclaimBands(sub, corev1.ResourceList{r: b[r]})})
			}
		}
	}
	return out
}

// holds says whether h holds some of r.
func holds(h Held, r corev1.ResourceName) bool {
	q, ok := h.Requests[r]
	return ok && !q.IsZero()
}

// holding returns those of held (in order) that hold some of r.
func holding(held []Held, r corev1.ResourceName) []Held {
	var out []Held
	for _, h := range held {
		if holds(h, r) {
			out = append(out, h)
		}
	}
	return out
}

// heldResources are the resources some of held holds, sorted.
func heldResources(held []Held) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{}
	for _, h := range held {
		for r, q := range h.Requests {
			if !q.IsZero() {
				set[r] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// addSeries appends s to out, unless a series of s's queue and kind in
// out has the same bands of the same workloads: that one then also names
// s's resources (each is held by every workload of the band, and, of a
// reclaim band, borrowed).
func addSeries(out []Series, s Series) []Series {
	if len(s.Bands) == 0 {
		return out
	}
	n := int(s.Bands[len(s.Bands)-1].Workloads)
	for _, o := range out {
		if o.Queue != s.Queue || o.Reclaim != s.Reclaim || len(o.Held) < n ||
			!slices.EqualFunc(o.Bands, s.Bands, func(a, b Band) bool { return a.Priority == b.Priority && a.Workloads == b.Workloads }) ||
			!slices.EqualFunc(o.Held[:n], s.Held[:n], func(a, b Held) bool {
				return a.Key == b.Key && a.Priority == b.Priority && a.AdmittedAt.Equal(b.AdmittedAt) && sameList(a.Requests, b.Requests)
			}) {
			continue
		}
		for j := range o.Bands {
			o.Bands[j].Resources = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(o.Bands[j].Resources), s.Bands[j].Resources...))))
		}
		return out
	}
	return append(out, s)
}

// sameList says whether two resource lists hold the same quantities.
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for r, q := range a {
		if p, ok := b[r]; !ok || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// CapturePreemptible captures the flavor's capacity (CaptureForFlavor)
// and the bands of victims' queues (FullBands for those that preempt
// within themselves, ReclaimBands for those a peer reclaims from): per
// band, the free capacity once its workloads are released. Bands come in
// turns (each queue's lowest band by queue name, then each queue's next:
// interleave). At most MaxPreemptible entries, shared fairly among the
// queues (bandsPerQueue): a queue with more bands than its share keeps
// bands spread from its lowest priority to its highest (each band is
// exact on its own). The snapshot is left as it was.
func (s *Snapshot) CapturePreemptible(tolerations []corev1.Toleration, held []Held, victims Victims) *Capacity {
	c := s.CaptureForFlavor(tolerations)
	if len(held) == 0 {
		return c
	}
	groups := QueueSeries(held, victims)
	shares := seriesShares(groups, MaxPreemptible)
	var released []Usage
	restore := func() {
		for _, u := range released {
			for node, rl := range u {
				s.AddUsage(node, rl, 1)
			}
		}
		released = released[:0]
	}
	defer restore()
	for gi, g := range groups {
		priorities := make([]int32, len(g.Bands))
		for i, b := range g.Bands {
			priorities[i] = b.Priority
		}
		keep := map[int32]bool{}
		for _, p := range spreadBands(priorities, shares[gi]) {
			keep[p] = true
		}
		next := 0
		for _, b := range g.Bands {
			for ; next < int(b.Workloads); next++ {
				s.Release(g.Held[next].Usage)
				released = append(released, g.Held[next].Usage)
			}
			if !keep[b.Priority] {
				continue
			}
			after := s.capture(tolerations)
			if len(after.free) != len(c.free) {
				// Releasing changed which nodes are listed (it cannot:
				// usage does not make a node usable): leave the rest out.
				return c
			}
			var requests corev1.ResourceList
			if len(b.Requests) > 0 {
				requests = b.Requests
			}
			c.layers = append(c.layers, preemptibleLayer{queue: g.Queue, priority: b.Priority, workloads: b.Workloads, reclaim: g.Reclaim, holding: g.Holding, requests: requests,
				resources: b.Resources, free: after.free})
		}
		// The next group's entries start from the flavor as it is.
		restore()
	}
	c.layers = interleave(c.layers)
	return c
}

// interleave orders layers (grouped by series, priorities ascending) in
// turns: every series' lowest band, then every series' next, and so on.
// A summary's size budget ends the list at the first entry that does not
// fit: in turns, every queue keeps its lowest bands, where in queue order
// the queues last by name would keep none.
func interleave(layers []preemptibleLayer) []preemptibleLayer {
	var groups [][]preemptibleLayer
	for i := 0; i < len(layers); {
		j := i
		for j < len(layers) && layers[j].queue == layers[i].queue && layers[j].reclaim == layers[i].reclaim && layers[j].holding == layers[i].holding {
			j++
		}
		groups = append(groups, layers[i:j])
		i = j
	}
	// In each turn the series of all a queue's workloads come before the
	// series of those holding a resource, so that a budget that cuts the
	// list leaves every queue its lowest bands first.
	slices.SortStableFunc(groups, func(a, b []preemptibleLayer) int {
		return cmp.Compare(b2i(a[0].holding != ""), b2i(b[0].holding != ""))
	})
	out := make([]preemptibleLayer, 0, len(layers))
	for turn := 0; len(out) < len(layers); turn++ {
		for _, g := range groups {
			if turn < len(g) {
				out = append(out, g[turn])
			}
		}
	}
	return out
}

// seriesShares shares limit bands among series (in QueueSeries's order):
// first among the queues' kinds (a queue within itself, a queue reclaimed
// from) by all the bands of their series, then within each kind among its
// series, the series of all its workloads first. A queue with several
// series takes no more than one with one.
func seriesShares(series []Series, limit int) []int {
	type kind struct {
		queue   string
		reclaim bool
	}
	var kinds []kind
	members := map[kind][]int{}
	for i, s := range series {
		k := kind{s.Queue, s.Reclaim}
		if _, ok := members[k]; !ok {
			kinds = append(kinds, k)
		}
		members[k] = append(members[k], i)
	}
	counts := make([]int, len(kinds))
	for i, k := range kinds {
		for _, m := range members[k] {
			counts[i] += len(series[m].Bands)
		}
	}
	out := make([]int, len(series))
	for i, share := range bandsPerQueue(counts, limit) {
		ms := members[kinds[i]]
		within := make([]int, len(ms))
		for j, m := range ms {
			within[j] = len(series[m].Bands)
		}
		for j, n := range bandsPerQueue(within, share) {
			out[ms[j]] = n
		}
	}
	return out
}

// bandsPerQueue shares limit bands among queues that have counts[i]
// distinct priorities each: every queue gets as many as it has up to an
// equal share, and what a queue leaves goes to the others (the smallest
// share first; ties to the queue first by name).
func bandsPerQueue(counts []int, limit int) []int {
	shares := make([]int, len(counts))
	left := limit
	for left > 0 {
		gave := false
		for i, n := range counts {
			if left == 0 {
				break
			}
			if shares[i] < n {
				shares[i]++
				left--
				gave = true
			}
		}
		if !gave {
			break
		}
	}
	return shares
}

// spreadBands picks k of a queue's ascending priorities: all when k is
// not less, else the lowest, the highest and the others evenly between.
func spreadBands(priorities []int32, k int) []int32 {
	n := len(priorities)
	switch {
	case k >= n:
		return priorities
	case k <= 0:
		return nil
	case k == 1:
		return priorities[:1]
	}
	out := make([]int32, 0, k)
	for j := range k {
		out = append(out, priorities[j*(n-1)/(k-1)])
	}
	return out
}

// addPreemptible encodes the captured preemptible entries into st (built
// by summarize with the same stage), each only while the JSON stays within
// budget bytes (size: st's so far). Entries are added in order; one that
// does not fit ends the list (a later one may be smaller, but a hub then
// could not tell which priorities are missing).
func (c *Capacity) addPreemptible(st *strata.CapacitySummaryStatus, counted []bool, digits int, merge, lossy bool, labels labelChoice, size, budget int) {
	if len(c.layers) == 0 {
		return
	}
	stride := c.stride
	var freeLabels []int32
	if labels.out != nil && len(labels.out.Sets) > 0 {
		freeLabels = make([]int32, len(c.freeNode))
		for i, n := range c.freeNode {
			freeLabels[i] = labels.nodeSet[n]
		}
	}
	vectors := make(map[string]int32, len(st.Vectors))
	keyBuf := make([]byte, 8*stride)
	keyOf := func(v []int64) string {
		for r, x := range v {
			binary.LittleEndian.PutUint64(keyBuf[8*r:], uint64(x))
		}
		return string(keyBuf)
	}
	for i, v := range st.Vectors {
		vectors[keyOf(v)] = int32(i)
	}
	size += len(`,"preemptible":[]`)
	for _, l := range c.layers {
		before := len(st.Vectors)
		entry := strata.PreemptibleCapacity{ClusterQueue: l.queue, Priority: l.priority, Workloads: l.workloads, Reclaim: l.reclaim, Holding: l.holding,
			Requests: l.requests, Resources: l.resources}
		freeStart := 0
		for di, d := range c.domains {
			base, rows := c.free[freeStart*stride:d.freeEnd*stride], l.free[freeStart*stride:d.freeEnd*stride]
			if slices.Equal(base, rows) {
				freeStart = d.freeEnd
				continue
			}
			taints := nonZeroRows(c.freeTaint[freeStart:d.freeEnd])
			var rowLabels []int32
			if freeLabels != nil {
				rowLabels = nonZeroRows(freeLabels[freeStart:d.freeEnd])
			}
			pd := strata.PreemptibleDomain{Index: int32(di)}
			pd.Free, pd.FreeTaints, pd.FreeLabels = bucketRows(rows, stride, taints, rowLabels, counted, digits, merge, lossy, func(v []int64) int32 {
				k := keyOf(v)
				if i, ok := vectors[k]; ok {
					return i
				}
				i := int32(len(st.Vectors))
				vectors[k] = i
				st.Vectors = append(st.Vectors, slices.Clone(v))
				return i
			})
			entry.Domains = append(entry.Domains, pd)
			freeStart = d.freeEnd
		}
		data, _ := json.Marshal(entry)
		add := len(data) + 1
		for _, v := range st.Vectors[before:] {
			vd, _ := json.Marshal(v)
			add += len(vd) + 1
		}
		if size+add > budget {
			for _, v := range st.Vectors[before:] {
				delete(vectors, keyOf(v))
			}
			st.Vectors = st.Vectors[:before]
			return
		}
		size += add
		st.Preemptible = append(st.Preemptible, entry)
	}
}

// nonZeroRows is rows, or nil when all are 0.
func nonZeroRows(rows []int32) []int32 {
	if slices.ContainsFunc(rows, func(t int32) bool { return t != 0 }) {
		return rows
	}
	return nil
}

// bucketRows groups free rows as summarize does for a domain's free
// nodes: by taint and label set and equal key, each group's vector the
// minimum of its rows, rounded down; intern gives a vector's position.
func bucketRows(rows []int64, stride int, taints, labels []int32, counted []bool, digits int, merge, lossy bool,
	intern func([]int64) int32) (pairs, pairTaints, pairLabels []int32) {
	type group struct {
		val          []int64
		n            int32
		taint, label int32
	}
	groups := map[string]int{}
	var list []group
	groupKey := make([]byte, 8*stride+8)
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
			var k int64
			switch {
			case lossy, merge && !counted[r]:
			case counted[r]:
				k = v
			default:
				k = roundDown(v, digits)
			}
			binary.LittleEndian.PutUint64(groupKey[8*r:], uint64(k))
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
			gr.val[r] = min(gr.val[r], v)
		}
	}
	for _, g := range list {
		for r, v := range g.val {
			if !counted[r] {
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

// PreemptibleStatus returns the summary as it would read once entries
// of its preemptible capacity are preempted (one entry, or one per queue:
// their workloads are disjoint): its domains with the entries' free
// capacity, for NewSnapshotFromSummary (which checks the rest). A domain
// that more than one entry lists takes the first entry's: each entry's
// free capacity there is at most what the domain would have with all of
// them gone (the summary does not say which node each freed), so the view
// never counts on more than they free.
func PreemptibleStatus(st *strata.CapacitySummaryStatus, entries ...int) (*strata.CapacitySummaryStatus, error) {
	out := *st
	out.Preemptible, out.Dispatches = nil, nil
	out.Domains = slices.Clone(st.Domains)
	set := make([]bool, len(st.Domains))
	for _, i := range entries {
		if i < 0 || i >= len(st.Preemptible) {
			return nil, fmt.Errorf("preemptible[%d] does not exist (%d entries)", i, len(st.Preemptible))
		}
		e := &st.Preemptible[i]
		last := int32(-1)
		for j, d := range e.Domains {
			if d.Index <= last || int(d.Index) >= len(st.Domains) {
				return nil, fmt.Errorf("preemptible[%d].domains[%d]: index %d is not after %d and below %d", i, j, d.Index, last, len(st.Domains))
			}
			last = d.Index
			if set[d.Index] {
				continue
			}
			set[d.Index] = true
			sd := out.Domains[d.Index]
			sd.Free, sd.FreeTaints, sd.FreeLabels = d.Free, d.FreeTaints, d.FreeLabels
			out.Domains[d.Index] = sd
		}
	}
	return &out, nil
}

// WithinAll is the Victims that list every queue of held as preempting
// within itself: each band releases all of a queue's workloads up to a
// priority.
func WithinAll(held []Held) Victims {
	v := Victims{Within: map[string]bool{}}
	for _, h := range held {
		v.Within[h.Queue] = true
	}
	return v
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
