package tas

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// Bounds of a summary's node labels (the API's limits). Within them the
// agent lists as many keys as it can; see chooseLabels.
const (
	MaxLabelSets     = 64
	MaxLabelKeys     = 32
	MaxCommonLabels  = 64
	MaxOmittedLabels = 256
)

// labelChoice is what a summary says of its nodes' labels: the published
// part, and each node's set (0: none of the listed keys; else 1 + its
// position in out.Sets).
type labelChoice struct {
	out     *strata.SummaryNodeLabels
	nodeSet []int32
}

// chooseLabels decides which of the nodes' labels (one map per node; the
// topology's levels left out) a summary lists. Labels every node has with
// the same value are common. The others are listed key by key, the keys
// with the fewest distinct values first, as long as the nodes' distinct
// sets of the listed keys stay within MaxLabelSets and the keys within
// MaxLabelKeys; a key that would break a bound (a node's own name or ID,
// an autoscaler's per-node marks) is omitted, and the hub does not check
// selectors on it. Nil when even the omitted keys exceed their bound:
// the summary then says nothing of labels.
func chooseLabels(nodes []map[string]string, levels []string) labelChoice {
	type keyInfo struct {
		values map[string]int32 // value → id, from 1
		count  int              // nodes having the key
		first  string
	}
	infos := map[string]*keyInfo{}
	for _, l := range nodes {
		for k, v := range l {
			if slices.Contains(levels, k) {
				continue
			}
			ki := infos[k]
			if ki == nil {
				ki = &keyInfo{values: map[string]int32{}, first: v}
				infos[k] = ki
			}
			if _, ok := ki.values[v]; !ok {
				ki.values[v] = int32(len(ki.values) + 1)
			}
			ki.count++
		}
	}
	out := &strata.SummaryNodeLabels{}
	var cands []string
	for _, k := range slices.Sorted(maps.Keys(infos)) {
		ki := infos[k]
		if ki.count == len(nodes) && len(ki.values) == 1 && len(out.Common) < MaxCommonLabels {
			if out.Common == nil {
				out.Common = map[string]string{}
			}
			out.Common[k] = ki.first
			continue
		}
		cands = append(cands, k)
	}
	distinct := func(k string) int {
		ki := infos[k]
		n := len(ki.values)
		if ki.count < len(nodes) {
			n++ // absent is a value too
		}
		return n
	}
	slices.SortStableFunc(cands, func(a, b string) int { return cmp.Compare(distinct(a), distinct(b)) })
	ids := make([]int32, len(nodes))
	next := make([]int32, len(nodes))
	type pair struct{ set, value int32 }
	seen := map[pair]int32{}
	for _, k := range cands {
		if len(out.Keys) == MaxLabelKeys || distinct(k) > MaxLabelSets {
			out.OmittedKeys = append(out.OmittedKeys, k)
			continue
		}
		ki := infos[k]
		clear(seen)
		for i, l := range nodes {
			var value int32
			if v, ok := l[k]; ok {
				value = ki.values[v]
			}
			p := pair{ids[i], value}
			id, ok := seen[p]
			if !ok {
				id = int32(len(seen))
				seen[p] = id
			}
			next[i] = id
		}
		if len(seen) > MaxLabelSets {
			out.OmittedKeys = append(out.OmittedKeys, k)
			continue
		}
		ids, next = next, ids
		out.Keys = append(out.Keys, k)
	}
	if len(out.OmittedKeys) > MaxOmittedLabels {
		return labelChoice{}
	}
	slices.Sort(out.Keys)
	slices.Sort(out.OmittedKeys)
	// Number the distinct sets in the nodes' order, the empty one 0.
	c := labelChoice{out: out, nodeSet: make([]int32, len(nodes))}
	setOf := map[int32]int32{}
	for i, l := range nodes {
		set, ok := setOf[ids[i]]
		if !ok {
			labels := map[string]string{}
			for _, k := range out.Keys {
				if v, ok := l[k]; ok {
					labels[k] = v
				}
			}
			if len(labels) > 0 {
				out.Sets = append(out.Sets, strata.LabelSet{Labels: labels})
				set = int32(len(out.Sets))
			}
			setOf[ids[i]] = set
		}
		c.nodeSet[i] = set
	}
	return c
}

// validateNodeLabels checks a summary's node labels and every domain's
// references to them.
func validateNodeLabels(st *strata.CapacitySummaryStatus) error {
	nl := st.NodeLabels
	if nl == nil {
		for i, d := range st.Domains {
			if len(d.FreeLabels) > 0 || len(d.CapacityLabels) > 0 {
				return fmt.Errorf("domains[%d]: label references without nodeLabels", i)
			}
		}
		return nil
	}
	switch {
	case len(nl.Common) > MaxCommonLabels:
		return fmt.Errorf("nodeLabels.common: %d labels, at most %d", len(nl.Common), MaxCommonLabels)
	case len(nl.Keys) > MaxLabelKeys:
		return fmt.Errorf("nodeLabels.keys: %d keys, at most %d", len(nl.Keys), MaxLabelKeys)
	case len(nl.OmittedKeys) > MaxOmittedLabels:
		return fmt.Errorf("nodeLabels.omittedKeys: %d keys, at most %d", len(nl.OmittedKeys), MaxOmittedLabels)
	case len(nl.Sets) > MaxLabelSets:
		return fmt.Errorf("nodeLabels.sets: %d sets, at most %d", len(nl.Sets), MaxLabelSets)
	}
	for i, set := range nl.Sets {
		if len(set.Labels) == 0 {
			return fmt.Errorf("nodeLabels.sets[%d] is empty", i)
		}
		for k := range set.Labels {
			if !slices.Contains(nl.Keys, k) {
				return fmt.Errorf("nodeLabels.sets[%d]: key %q is not one of nodeLabels.keys", i, k)
			}
		}
	}
	for i := range st.Domains {
		d := &st.Domains[i]
		for _, refs := range []struct {
			field       string
			labels      []int32
			pairsLength int
		}{{"freeLabels", d.FreeLabels, len(d.Free)}, {"capacityLabels", d.CapacityLabels, len(d.Capacity)}} {
			if len(refs.labels) == 0 {
				continue
			}
			if len(refs.labels) != refs.pairsLength/2 {
				return fmt.Errorf("domains[%d].%s: %d numbers for %d pairs", i, refs.field, len(refs.labels), refs.pairsLength/2)
			}
			for j, l := range refs.labels {
				if l < 0 || int(l) > len(nl.Sets) {
					return fmt.Errorf("domains[%d].%s[%d]: label set %d does not exist (%d label sets, counted from 1)", i, refs.field, j, l, len(nl.Sets))
				}
			}
		}
	}
	return nil
}

// summaryNodes makes the labelled stand-ins of a summary's nodes: one per
// leaf domain and label set, shared by the nodes it stands for. Their
// labels are the domain's level values, the common labels and the set's.
type summaryNodes struct {
	st     *strata.CapacitySummaryStatus
	levels []string
	made   map[[2]int32]*corev1.Node
}

func newSummaryNodes(st *strata.CapacitySummaryStatus, leafDepth int) *summaryNodes {
	return &summaryNodes{st: st, levels: st.Levels[:leafDepth], made: map[[2]int32]*corev1.Node{}}
}

// node returns the stand-in of the nodes of pair k of domain i's free
// list (its capacity list when capacity is set).
func (n *summaryNodes) node(i, k int, capacity bool) *corev1.Node {
	d := &n.st.Domains[i]
	refs := d.FreeLabels
	if capacity {
		refs = d.CapacityLabels
	}
	var set int32
	if k < len(refs) {
		set = refs[k]
	}
	key := [2]int32{int32(i), set}
	if node := n.made[key]; node != nil {
		return node
	}
	labels := make(map[string]string, len(n.levels))
	for l, level := range n.levels {
		labels[level] = d.Values[l]
	}
	if nl := n.st.NodeLabels; nl != nil {
		maps.Copy(labels, nl.Common)
		if set > 0 {
			maps.Copy(labels, nl.Sets[set-1].Labels)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	n.made[key] = node
	return node
}

// labelSetOf is the label set (0: none) of pair k of a domain's list.
func labelSetOf(refs []int32, k int) int32 {
	if k < len(refs) {
		return refs[k]
	}
	return 0
}

// labelSetPrints names the labels of each label set of a summary (the
// common labels with the set's), by set index: equal names, equal labels.
func labelSetPrints(st *strata.CapacitySummaryStatus) []string {
	nl := st.NodeLabels
	if nl == nil {
		return []string{"-"}
	}
	out := make([]string, len(nl.Sets)+1)
	for set := range out {
		labels := maps.Clone(nl.Common)
		if set > 0 {
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, nl.Sets[set-1].Labels)
		}
		var b strings.Builder
		b.WriteString("+")
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(labels[k])
			b.WriteByte(0)
		}
		out[set] = b.String()
	}
	return out
}

// labelKnowledge is what a summary snapshot knows of its nodes' labels.
type labelKnowledge struct {
	// known: the summary has node labels (else no selector is checked).
	known   bool
	omitted []string
}

func knowledgeOf(st *strata.CapacitySummaryStatus) labelKnowledge {
	if st.NodeLabels == nil {
		return labelKnowledge{}
	}
	return labelKnowledge{known: true, omitted: st.NodeLabels.OmittedKeys}
}

// checkable is req's node selector and required node affinity reduced to
// what the snapshot can evaluate, and what it cannot, named. An agent's
// snapshot evaluates everything. A summary's evaluates every key but the
// host level's (hosts are anonymous in a summary) and the keys it omits;
// a requirement on such a key, or on a node's fields, is taken as met —
// never as failed — so that the hub does not turn away a workload the
// worker would take, and is named as not checked.
func (s *Snapshot) checkable(req Request) (map[string]string, *corev1.NodeSelector, []string) {
	if !s.summary || len(req.NodeSelector) == 0 && req.NodeAffinity == nil {
		return req.NodeSelector, req.NodeAffinity, nil
	}
	var unchecked []string
	if !s.labels.known {
		if len(req.NodeSelector) > 0 {
			unchecked = append(unchecked, "node selector")
		}
		if req.NodeAffinity != nil {
			unchecked = append(unchecked, "node affinity")
		}
		return nil, nil, unchecked
	}
	uncheckedKey := func(k string) bool {
		return s.hostIsLowest && k == s.levels[s.depth-1] || slices.Contains(s.labels.omitted, k)
	}
	note := func(what string) {
		if !slices.Contains(unchecked, what) {
			unchecked = append(unchecked, what)
		}
	}
	selector := req.NodeSelector
	for _, k := range slices.Sorted(maps.Keys(req.NodeSelector)) {
		if uncheckedKey(k) {
			if len(selector) == len(req.NodeSelector) {
				selector = maps.Clone(req.NodeSelector)
			}
			delete(selector, k)
			note("node selector on " + k)
		}
	}
	affinity := req.NodeAffinity
	if affinity != nil {
		var terms []corev1.NodeSelectorTerm
		reduced, anyTerm := false, false
		for _, term := range affinity.NodeSelectorTerms {
			var kept []corev1.NodeSelectorRequirement
			for _, r := range term.MatchExpressions {
				if uncheckedKey(r.Key) {
					note("node affinity on " + r.Key)
					continue
				}
				kept = append(kept, r)
			}
			if len(term.MatchFields) > 0 {
				note("node affinity on fields")
			}
			changed := len(kept) != len(term.MatchExpressions) || len(term.MatchFields) > 0
			reduced = reduced || changed
			if changed && len(kept) == 0 {
				// Nothing of the term is checked: it may match any node,
				// and so may the terms, which are alternatives.
				anyTerm = true
				break
			}
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: kept})
		}
		switch {
		case anyTerm:
			affinity = nil
		case reduced:
			affinity = &corev1.NodeSelector{NodeSelectorTerms: terms}
		}
	}
	return selector, affinity, unchecked
}

// uncheckedReason says why a summary cannot check what it names.
func (s *Snapshot) uncheckedReason(unchecked []string) string {
	if !s.labels.known {
		return strings.Join(unchecked, ", ") + " not checked: the summary has no node labels"
	}
	return strings.Join(unchecked, ", ") + " not checked: the worker's summary does not carry it"
}
