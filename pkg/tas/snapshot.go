package tas

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// Snapshot is the topology tree of one flavor with the free capacity of its
// nodes. The agent builds it from Nodes (NewSnapshot, SetNode, AddUsage); the
// hub builds it from a capacity summary (NewSummarySnapshot, AddBins).
type Snapshot struct {
	levels []string
	// depth is the number of topology levels held as domains: len(levels).
	depth int
	// summary: built from a CapacitySummary. Its nodes are anonymous
	// (named after their leaf domain), its assignments are reported at
	// leafDepth, the summary's leaf level, and it is frozen once built.
	summary   bool
	leafDepth int
	// frozen: the tree's shape no longer changes (a finished summary
	// snapshot or a clone of one), so clones may share it. Usage may still
	// be added to known nodes.
	frozen bool
	// shared: the snapshot was cloned, or is a clone; they share nodes.
	shared bool
	// domainSlab and binSlab allocate a summary's nodes in blocks.
	domainSlab []domain
	binSlab    []bin
	valueSlab  []string
	// hostIsLowest: assignments name hosts only, and node taints, selectors
	// and affinity are honoured.
	hostIsLowest bool
	nodeLabels   map[string]string
	// labels: what a summary says of its nodes' labels.
	labels labelKnowledge

	res     *resourceIndex
	root    *domain
	byLevel [][]*domain
	leaves  []*domain
	domains map[string]*domain
	nodes   map[string]*bin
	// hostLeaves finds host domains by hostname when the host is lowest.
	hostLeaves map[string]*domain

	// Dense state for the per-request passes, kept apart from the pointer
	// tree so that a placement streams through contiguous memory.
	// Per domain (by domain.id; 0 is the root):
	parentID []int32
	levelIDs [][]int32 // ids per level, same order as byLevel
	podCap   []int64   // pods that fit, node by node
	unitCap  []int64   // groups of unit(level) pods that fit
	assigned []int64   // pods assigned
	freeIDs  []int32
	// Per bin (by bin.slot):
	stride    int     // resources per row of binFree and binUsed
	binFree   []int64 // free capacity rows
	binUsed   []int64 // usage rows
	binCount  []int64
	binLeaf   []int32 // leaf domain id, -1 when the bin is not in the tree
	binUsable []bool
	binByID   []*bin
	freeSlots []int32

	// leafOrder caches the leaves in name (rank) order and order the
	// natural pre-order position of every domain; nil when the tree's shape
	// changed since.
	leafOrder []*domain
	order     []int32
	// leafRank is each leaf's position in leafOrder (by domain id), and
	// orderGen counts the times leafOrder was worked out: what is kept by
	// leaf rank (capBuckets) is valid for one generation.
	leafRank []int32
	orderGen uint64
	// tainted counts nodes with taints, so that placements skip taint
	// checks when there are none.
	tainted  int
	scratch  []*domain
	scratch2 []*domain
	ranks    []int
	// leaderMemo and leaderKnown are leader.go's per-domain rooms, reused.
	leaderMemo  []leaderRoom
	leaderKnown []bool

	// Per-demand pod capacity of the leaves, kept up to date from the
	// bins whose free capacity changed (see leafCaps): capsEpoch changes
	// with the bins' layout (a bin made, freed, attached, detached, the
	// rows widened), capsLog lists the bins recomputed since.
	capsEpoch uint64
	capsLog   []int32
	caps      []*capsCache
	// layout changes with the tree's shape and the bins' places in it;
	// binsUnder caches Refresh's bins of each summary domain while it
	// does not.
	layout          uint64
	binsUnder       map[*domain][]*bin
	binsUnderLayout uint64
}

// layoutChanged notes a change of the tree's shape or of where its bins
// are: what is kept per layout is worked out again.
func (s *Snapshot) layoutChanged() {
	s.layout++
	s.capsEpoch++
}

// domain is a topology domain: a node of the tree.
type domain struct {
	id       int32
	level    int
	values   []string
	key      string
	parent   *domain
	children []*domain // name order of values
	bins     []*bin    // leaves only
	levelPos int       // position in byLevel[level] and levelIDs[level]
	leafPos  int       // position in leaves
}

// bin is one node (count 1) or, in a summary, a bucket of nodes with the
// same free capacity.
type bin struct {
	name   string
	slot   int32 // row in the snapshot's dense bin arrays
	leaf   *domain
	pos    int // position in leaf.bins
	count  int64
	alloc  Vector
	usable bool
	node   *corev1.Node // labels only, for node affinity matching
	taints []corev1.Taint
	// hardTaints are taints' NoSchedule and NoExecute ones as a summary
	// lists them (see normalTaints), taintKey their key: worked out when
	// the taints change, not on every summary.
	hardTaints []corev1.Taint
	taintKey   string
	// labelPrint names the label set of a summary bin's node stand-in,
	// so that a Refresh that keeps the set keeps the stand-in.
	labelPrint string
}

// Node is what the engine needs to know of a Kubernetes Node.
type Node struct {
	Name          string
	Labels        map[string]string
	Allocatable   corev1.ResourceList
	Ready         bool
	Unschedulable bool
	Taints        []corev1.Taint
}

// NodeFromAPI converts a Node. A node without a Ready condition counts as
// Ready only when assumeReady is set (hand-written simulation inputs).
func NodeFromAPI(n *corev1.Node, assumeReady bool) Node {
	ready := assumeReady
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	return Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Allocatable:   n.Status.Allocatable,
		Ready:         ready,
		Unschedulable: n.Spec.Unschedulable,
		Taints:        n.Spec.Taints,
	}
}

// NewSnapshot returns an empty snapshot of a flavor whose nodes carry
// flavorNodeLabels and whose Topology has the given levels (highest first).
func NewSnapshot(levels []string, flavorNodeLabels map[string]string) *Snapshot {
	s := newSnapshot(levels, len(levels))
	s.nodeLabels = flavorNodeLabels
	s.hostIsLowest = len(levels) > 0 && levels[len(levels)-1] == strata.HostnameLabel
	return s
}

// NewSummarySnapshot returns an empty snapshot for capacity bins reported by
// a summary (see AddBins): the hub's view of one flavor of a worker. Every
// bin is expanded into anonymous nodes, so that the engine runs on it
// exactly as on the agent's nodes; assignments are reported at the leaf
// level, the lowest level above the host.
func NewSummarySnapshot(levels []string) *Snapshot {
	s := newSnapshot(levels, len(levels))
	s.hostIsLowest = len(levels) > 0 && levels[len(levels)-1] == strata.HostnameLabel
	s.summary = true
	s.leafDepth = len(levels)
	if s.hostIsLowest {
		s.leafDepth--
	}
	return s
}

func newSnapshot(levels []string, depth int) *Snapshot {
	s := &Snapshot{
		levels:     append([]string(nil), levels...),
		depth:      depth,
		res:        newResourceIndex(),
		root:       &domain{level: -1},
		byLevel:    make([][]*domain, depth),
		levelIDs:   make([][]int32, depth),
		domains:    map[string]*domain{},
		nodes:      map[string]*bin{},
		hostLeaves: map[string]*domain{},
		parentID:   []int32{-1},
		podCap:     []int64{0},
		unitCap:    []int64{0},
		assigned:   []int64{0},
	}
	s.stride = len(s.res.names)
	return s
}

// Levels returns the topology levels, highest first.
func (s *Snapshot) Levels() []string { return s.levels }

// Resources returns the names of the resources seen so far, in Vector order.
func (s *Snapshot) Resources() []corev1.ResourceName { return s.res.names }

// NodeCount is the number of nodes in the tree (bins counted with their size).
func (s *Snapshot) NodeCount() int64 {
	var n int64
	for _, l := range s.leaves {
		for _, b := range l.bins {
			n += b.count
		}
	}
	return n
}

// SetNode adds or updates a node. It returns false when the node does not
// belong in the tree: it lacks a label of a level or does not match the
// flavor's node labels (it is then removed if it was there).
func (s *Snapshot) SetNode(n Node) bool {
	s.mustNotBeFrozen()
	b := s.nodes[n.Name]
	values, ok := s.nodeValues(n)
	if !ok {
		if b != nil {
			s.detach(b)
			if s.unused(b) {
				s.freeBin(b)
				delete(s.nodes, n.Name)
			}
		}
		return false
	}
	if b == nil {
		b = s.newBin(n.Name, 1)
		s.nodes[n.Name] = b
	}
	b.alloc = s.res.vector(n.Allocatable)
	b.usable = n.Ready && !n.Unschedulable
	b.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
	s.setTaints(b, n.Taints)
	leaf := s.leafFor(values)
	if b.leaf != leaf {
		s.detach(b)
		s.attach(b, leaf)
	}
	s.recompute(b)
	return true
}

// RemoveNode removes a node. Usage recorded on it stays until AddUsage
// takes it back (its pods and workloads go later than the node), and
// applies again if a node of that name returns.
func (s *Snapshot) RemoveNode(name string) {
	s.mustNotBeFrozen()
	b := s.nodes[name]
	if b == nil {
		return
	}
	s.detach(b)
	s.setTaints(b, nil)
	if s.unused(b) {
		s.freeBin(b)
		delete(s.nodes, name)
	}
}

// AddUsage adds (sign 1) or removes (sign -1) the requests of pods bound to
// a node: non-Strata pods, or pods of admitted workloads. Usage of a node not
// (yet) known is kept and applies once the node is set; on a frozen
// snapshot it is ignored, as is usage of resources the snapshot does not
// know (the node has none of them).
func (s *Snapshot) AddUsage(nodeName string, usage corev1.ResourceList, sign int64) {
	b := s.bin(nodeName)
	if b == nil {
		if s.frozen {
			return
		}
		b = s.newBin(nodeName, 1)
		s.nodes[nodeName] = b
	}
	for name, q := range usage {
		i, ok := s.res.index[name]
		if !ok {
			if s.frozen {
				continue
			}
			i = s.res.get(name)
		}
		if i >= s.stride {
			// New here, or named by a request (newDemand) since the rows
			// were last widened.
			if s.frozen {
				continue
			}
			s.restride()
		}
		s.binUsed[int(b.slot)*s.stride+i] += sign * q.MilliValue()
	}
	s.recompute(b)
	if b.leaf == nil && s.unused(b) {
		s.freeBin(b)
		delete(s.nodes, nodeName)
	}
}

// AddBins adds count nodes of a summarized snapshot with the given free
// capacity, in the leaf domain named by values (one per level above the
// host). When the lowest level is the host, each node is a host domain of
// its own.
func (s *Snapshot) AddBins(values []string, free corev1.ResourceList, count int64) error {
	s.mustNotBeFrozen()
	if !s.summary {
		return fmt.Errorf("AddBins needs a summary snapshot")
	}
	return s.addNodes(values, s.res.vector(free), count)
}

// addNodes adds count anonymous nodes with capacity alloc to the leaf
// domain values of a summary snapshot.
func (s *Snapshot) addNodes(values []string, alloc Vector, count int64) error {
	if len(values) != s.leafDepth {
		return fmt.Errorf("domain %v has %d values, want %d (one per level %v)", values, len(values), s.leafDepth, s.levels[:s.leafDepth])
	}
	if count <= 0 {
		return fmt.Errorf("domain %v: node count %d must be positive", values, count)
	}
	parent := s.root
	if s.leafDepth > 0 {
		parent = s.leafFor(values)
	}
	s.addNodesTo(parent, alloc, count, nil, nil)
	return nil
}

// addNodesTo adds count anonymous nodes under parent, the leaf-level
// domain.
func (s *Snapshot) addNodesTo(parent *domain, alloc Vector, count int64, taints []corev1.Taint, node *corev1.Node) {
	for range count {
		b := s.newBin("", 1)
		// Anonymous nodes are named by their slot: found without a map.
		b.name = anonPrefix + strconv.Itoa(int(b.slot))
		b.alloc = alloc
		b.usable = true
		b.node = node
		if len(taints) > 0 {
			s.setTaints(b, taints)
		}
		leaf := parent
		if s.hostIsLowest {
			leaf = s.newHostDomain(parent, b.name)
		}
		s.attach(b, leaf)
		s.recompute(b)
	}
}

// newHostDomain adds the host domain of an anonymous node of a summary
// under its leaf domain. Hosts are numbered in the order they are added,
// so appending keeps the children in name order; they are found by
// name through hostLeaves only.
func (s *Snapshot) newHostDomain(parent *domain, name string) *domain {
	lvl := s.depth - 1
	if len(s.domainSlab) == 0 {
		s.domainSlab = make([]domain, 256)
	}
	d := &s.domainSlab[0]
	s.domainSlab = s.domainSlab[1:]
	if len(s.valueSlab) < lvl+1 {
		s.valueSlab = make([]string, 1024*(lvl+1))
	}
	values := s.valueSlab[: lvl+1 : lvl+1]
	s.valueSlab = s.valueSlab[lvl+1:]
	copy(values, parent.values)
	values[lvl] = name
	*d = domain{id: s.newDomainID(parent.id), level: lvl, values: values, parent: parent}
	d.levelPos = len(s.byLevel[lvl])
	s.byLevel[lvl] = append(s.byLevel[lvl], d)
	s.levelIDs[lvl] = append(s.levelIDs[lvl], d.id)
	parent.children = append(parent.children, d)
	s.leafOrder = nil
	d.leafPos = len(s.leaves)
	s.leaves = append(s.leaves, d)
	return d
}

// anonPrefix starts the names of a summary's anonymous nodes: "#" and the
// node's slot. No Kubernetes node name starts with it.
const anonPrefix = "#"

// bin finds a node by name.
func (s *Snapshot) bin(name string) *bin {
	if s.summary {
		if !strings.HasPrefix(name, anonPrefix) {
			return nil
		}
		slot, err := strconv.Atoi(name[len(anonPrefix):])
		if err != nil || slot < 0 || slot >= len(s.binByID) {
			return nil
		}
		return s.binByID[slot]
	}
	return s.nodes[name]
}

// hostLeaf finds a host domain by host name.
func (s *Snapshot) hostLeaf(name string) *domain {
	if s.summary {
		if b := s.bin(name); b != nil {
			return b.leaf
		}
		return nil
	}
	return s.hostLeaves[name]
}

// Freeze fixes the tree's shape: a snapshot built from a summary is frozen
// by NewSnapshotFromSummary, after which Clone is cheap.
func (s *Snapshot) Freeze() {
	s.ensureOrder()
	s.frozen = true
}

func (s *Snapshot) mustNotBeFrozen() {
	if s.frozen {
		panic("tas: the tree of a frozen snapshot cannot change")
	}
}

// Clone returns an independent copy of a frozen snapshot: usage added to
// either one does not show in the other. The tree is shared, so a clone
// costs a copy of the per-node rows only.
func (s *Snapshot) Clone() *Snapshot {
	if !s.frozen {
		panic("tas: Clone needs a frozen snapshot")
	}
	s.shared = true
	c := *s
	c.res = s.res.clone()
	c.binFree = slices.Clone(s.binFree)
	c.binUsed = slices.Clone(s.binUsed)
	c.binUsable = slices.Clone(s.binUsable)
	c.podCap = make([]int64, len(s.podCap))
	c.unitCap = make([]int64, len(s.unitCap))
	c.assigned = make([]int64, len(s.assigned))
	c.scratch, c.scratch2, c.ranks = nil, nil, nil
	c.leaderMemo, c.leaderKnown = nil, nil
	c.caps, c.capsLog, c.binsUnder = nil, nil, nil
	return &c
}

// unused says the node has no usage recorded.
func (s *Snapshot) unused(b *bin) bool {
	for _, v := range s.binUsed[int(b.slot)*s.stride : int(b.slot+1)*s.stride] {
		if v != 0 {
			return false
		}
	}
	return true
}

// newBin allocates a bin and its dense row.
func (s *Snapshot) newBin(name string, count int64) *bin {
	var b *bin
	if s.summary {
		if len(s.binSlab) == 0 {
			s.binSlab = make([]bin, 256)
		}
		b = &s.binSlab[0]
		s.binSlab = s.binSlab[1:]
		*b = bin{name: name, count: count}
	} else {
		b = &bin{name: name, count: count}
	}
	if n := len(s.freeSlots); n > 0 {
		b.slot = s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
	} else {
		b.slot = int32(len(s.binByID))
		s.binByID = append(s.binByID, nil)
		s.binCount = append(s.binCount, 0)
		s.binLeaf = append(s.binLeaf, -1)
		s.binUsable = append(s.binUsable, false)
		s.binFree = append(s.binFree, make([]int64, s.stride)...)
		s.binUsed = append(s.binUsed, make([]int64, s.stride)...)
	}
	clear(s.binUsed[int(b.slot)*s.stride : int(b.slot+1)*s.stride])
	s.binByID[b.slot] = b
	s.binCount[b.slot] = count
	s.binLeaf[b.slot] = -1
	s.layoutChanged()
	return b
}

func (s *Snapshot) setTaints(b *bin, taints []corev1.Taint) {
	if len(b.taints) > 0 {
		s.tainted--
	}
	b.taints = taints
	b.hardTaints, b.taintKey = normalTaints(taints)
	if len(b.taints) > 0 {
		s.tainted++
	}
}

func (s *Snapshot) freeBin(b *bin) {
	s.setTaints(b, nil)
	s.binByID[b.slot] = nil
	s.binLeaf[b.slot] = -1
	s.binUsable[b.slot] = false
	s.freeSlots = append(s.freeSlots, b.slot)
	s.layoutChanged()
}

func (s *Snapshot) attach(b *bin, leaf *domain) {
	b.leaf, b.pos = leaf, len(leaf.bins)
	leaf.bins = append(leaf.bins, b)
	s.binLeaf[b.slot] = leaf.id
	s.layoutChanged()
}

// recompute writes the bin's free capacity, alloc - used, to its dense row.
func (s *Snapshot) recompute(b *bin) {
	if len(s.res.names) != s.stride {
		s.restride()
	}
	at := int(b.slot) * s.stride
	row, used := s.binFree[at:at+s.stride], s.binUsed[at:at+s.stride]
	for i := range row {
		row[i] = b.alloc.at(i) - used[i]
	}
	s.binUsable[b.slot] = b.usable
	s.logCaps(b.slot)
}

// restride widens the bin rows after a new resource name appeared.
func (s *Snapshot) restride() {
	oldStride := s.stride
	if len(s.res.names) == oldStride {
		return
	}
	s.stride = len(s.res.names)
	s.layoutChanged()
	widen := func(old []int64) []int64 {
		rows := make([]int64, len(s.binByID)*s.stride)
		for slot := range s.binByID {
			copy(rows[slot*s.stride:], old[slot*oldStride:(slot+1)*oldStride])
		}
		return rows
	}
	s.binFree = widen(s.binFree)
	s.binUsed = widen(s.binUsed)
}

// nodeValues returns the node's label value at every domain level.
func (s *Snapshot) nodeValues(n Node) ([]string, bool) {
	for k, v := range s.nodeLabels {
		if n.Labels[k] != v {
			return nil, false
		}
	}
	values := make([]string, s.depth)
	for i := range s.depth {
		v, ok := n.Labels[s.levels[i]]
		if !ok || v == "" {
			return nil, false
		}
		values[i] = v
	}
	return values, true
}

// leafFor returns the leaf domain for values, creating the path as needed.
func (s *Snapshot) leafFor(values []string) *domain {
	parent := s.root
	for lvl := range values {
		key := domainKey(values[:lvl+1])
		d := s.domains[key]
		if d == nil {
			d = &domain{id: s.newDomainID(parent.id), level: lvl, values: append([]string(nil), values[:lvl+1]...), key: key, parent: parent}
			s.domains[key] = d
			d.levelPos = len(s.byLevel[lvl])
			s.byLevel[lvl] = append(s.byLevel[lvl], d)
			s.levelIDs[lvl] = append(s.levelIDs[lvl], d.id)
			parent.insertChild(d)
			s.leafOrder = nil
			if lvl == len(values)-1 {
				d.leafPos = len(s.leaves)
				s.leaves = append(s.leaves, d)
				if s.hostIsLowest {
					s.hostLeaves[values[lvl]] = d
				}
			}
		}
		parent = d
	}
	return parent
}

func (s *Snapshot) newDomainID(parent int32) int32 {
	s.layoutChanged()
	if n := len(s.freeIDs); n > 0 {
		id := s.freeIDs[n-1]
		s.freeIDs = s.freeIDs[:n-1]
		s.parentID[id] = parent
		return id
	}
	s.parentID = append(s.parentID, parent)
	s.podCap = append(s.podCap, 0)
	s.unitCap = append(s.unitCap, 0)
	s.assigned = append(s.assigned, 0)
	return int32(len(s.parentID) - 1)
}

func domainKey(values []string) string { return strings.Join(values, "\x00") }

// DomainKey identifies a domain by its values (highest level first), for
// callers that key maps by domain.
func DomainKey(values []string) string { return domainKey(values) }

func (d *domain) insertChild(c *domain) {
	name := c.values[len(c.values)-1]
	i := len(d.children)
	for i > 0 && name < d.children[i-1].values[len(c.values)-1] {
		i--
	}
	d.children = append(d.children, nil)
	copy(d.children[i+1:], d.children[i:])
	d.children[i] = c
}

// detach removes a bin from its leaf, pruning domains left empty.
func (s *Snapshot) detach(b *bin) {
	leaf := b.leaf
	if leaf == nil {
		return
	}
	last := len(leaf.bins) - 1
	leaf.bins[b.pos] = leaf.bins[last]
	leaf.bins[b.pos].pos = b.pos
	leaf.bins = leaf.bins[:last]
	b.leaf = nil
	s.binLeaf[b.slot] = -1
	s.layoutChanged()
	if len(leaf.bins) > 0 {
		return
	}
	lastLeaf := len(s.leaves) - 1
	s.leaves[leaf.leafPos] = s.leaves[lastLeaf]
	s.leaves[leaf.leafPos].leafPos = leaf.leafPos
	s.leaves = s.leaves[:lastLeaf]
	s.leafOrder = nil
	if s.hostLeaves[leaf.values[len(leaf.values)-1]] == leaf {
		delete(s.hostLeaves, leaf.values[len(leaf.values)-1])
	}
	for d := leaf; d != s.root && len(d.children) == 0 && len(d.bins) == 0; d = d.parent {
		delete(s.domains, d.key)
		lvl, ids := s.byLevel[d.level], s.levelIDs[d.level]
		lvl[d.levelPos] = lvl[len(lvl)-1]
		ids[d.levelPos] = ids[len(ids)-1]
		lvl[d.levelPos].levelPos = d.levelPos
		s.byLevel[d.level] = lvl[:len(lvl)-1]
		s.levelIDs[d.level] = ids[:len(ids)-1]
		s.freeIDs = append(s.freeIDs, d.id)
		p := d.parent
		for i, c := range p.children {
			if c == d {
				p.children = append(p.children[:i], p.children[i+1:]...)
				break
			}
		}
	}
}

// orderedLeaves returns the leaves in name order, cached until the
// tree's shape changes.
func (s *Snapshot) orderedLeaves() []*domain {
	s.ensureOrder()
	return s.leafOrder
}

// ensureOrder numbers the domains in natural pre-order: for two domains of
// one level, the smaller number has the smaller path.
func (s *Snapshot) ensureOrder() {
	if s.leafOrder != nil {
		return
	}
	s.leafOrder = make([]*domain, 0, len(s.leaves))
	if len(s.order) < len(s.parentID) {
		s.order = make([]int32, len(s.parentID))
	}
	// A new slice: a clone shares the old one.
	s.leafRank = make([]int32, len(s.parentID))
	s.orderGen++
	next := int32(0)
	var walk func(d *domain)
	walk = func(d *domain) {
		s.order[d.id] = next
		next++
		if len(d.children) == 0 && d != s.root {
			s.leafRank[d.id] = int32(len(s.leafOrder))
			s.leafOrder = append(s.leafOrder, d)
		}
		for _, c := range d.children {
			walk(c)
		}
	}
	walk(s.root)
}
