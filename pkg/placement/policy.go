// Package placement is the hub's choice of a worker cluster and flavor for
// a workload: the TAS engine on every eligible (cluster, flavor) summary,
// less the hub's in-flight reservations, then a ranking of the candidates
// where the workload fits (KEP-5732's generate, filter, score with
// clusters in place of nodes). It is plain Go with no API calls, shared by
// the hub and `kubectl strata simulate --cluster`.
package placement

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	corev1 "k8s.io/api/core/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// DefaultMemoSize bounds the memoized engine answers.
const DefaultMemoSize = 16384

// Policy decides where workloads go. It memoizes the engine's answer per
// (cluster, flavor, summary generation, reservations version, workload
// shape), so that a burst of decisions re-runs the engine only on the
// target that changed. A Policy is not safe for concurrent use.
type Policy struct {
	kind configv1beta1.PlacementPolicy
	opts tas.Options
	memo *lru.Cache[memoKey, *answer]
}

type memoKey struct {
	cluster, flavor string
	generation      int64
	version         uint64
	shape           string
	// empty: the answer for the flavor when empty (version is then the
	// target's emptyVersion, generation 0).
	empty bool
}

// answer is the engine's verdict on one target.
type answer struct {
	fits bool
	// mismatch: the topology lacks a level the workload names; no
	// capacity will ever let it in.
	mismatch    bool
	assignments []*tas.Assignment
	domain      []string
	room        int64
	reason      string
}

// New returns a policy of the given kind (Compact when empty) that places
// with opts, remembering up to memoSize answers (DefaultMemoSize when not
// positive).
func New(kind configv1beta1.PlacementPolicy, opts tas.Options, memoSize int) *Policy {
	if kind == "" {
		kind = configv1beta1.Compact
	}
	if memoSize <= 0 {
		memoSize = DefaultMemoSize
	}
	memo, _ := lru.New[memoKey, *answer](memoSize)
	return &Policy{kind: kind, opts: opts, memo: memo}
}

// Decision is where a workload goes, or why it goes nowhere.
type Decision struct {
	// Cluster and Flavor are the choice; empty when the workload fits
	// nowhere now.
	Cluster string
	Flavor  string
	// PodSets are the chosen placement, one per pod set in spec order, at
	// the summary's leaf level.
	PodSets []PodSetPlacement
	// Reason is one line a person can read: the choice and why, or why
	// the workload waits.
	Reason string
	// NeverFits: no eligible cluster could hold the workload even empty;
	// waiting does not help.
	NeverFits bool
	// Candidates are every (cluster, flavor) considered, best first.
	Candidates []Candidate
	// Provisional: the workload fits none of the chosen target's nodes
	// now, and its worker provisions nodes for it (DecideProvisional); its
	// pod sets carry no assignment.
	Provisional bool
}

// PodSetPlacement is one pod set's planned assignment.
type PodSetPlacement struct {
	Name string
	// Flavor is the pod set's flavor: the decision's, or, when it places
	// pod sets on different flavors (DecideSplit), its own.
	Flavor     string
	Assignment *tas.Assignment
	// Requests are one pod's requests, for Target.Reserve.
	Requests corev1.ResourceList
}

// Candidate is the verdict on one (cluster, flavor).
type Candidate struct {
	Cluster string
	Flavor  string
	Fits    bool
	// Level is the depth of the smallest domain that holds every pod (1:
	// a domain of the top level; 0: spread over several), capped at the
	// summary's leaf level. Comparable across clusters whose topologies
	// differ in the levels below.
	Level int
	// Domain names that domain, one value per level.
	Domain []string
	// Room is how many more pods of the workload's largest pod set that
	// domain could take after the placement.
	Room   int64
	Reason string
}

// Decide places wl on the best of targets. flavors is the ClusterQueue's
// flavor order: targets of other flavors are not considered; when it is
// empty, every target is, in the order of first appearance of its flavor.
// It does not reserve: call the decision's Reserve.
func (p *Policy) Decide(wl *strata.Workload, flavors []string, targets []*Target) *Decision {
	return p.DecideShape(wl, Shape(wl), flavors, targets)
}

// DecideShape is Decide for a workload whose Shape the caller keeps.
func (p *Policy) DecideShape(wl *strata.Workload, shape string, flavors []string, targets []*Target) *Decision {
	return p.DecideAvoiding(wl, shape, flavors, targets, nil)
}

// Avoider gives the domains a pod set must keep out of on a target:
// topology spreading across the fleet, counted by the caller.
type Avoider func(t *Target, ps *strata.PodSet) []tas.Avoid

// DecideAvoiding is DecideShape where, with avoid not nil, each pod set
// keeps out of the domains avoid gives on each target. Such answers
// depend on more than the target and the shape, so they are not memoized.
func (p *Policy) DecideAvoiding(wl *strata.Workload, shape string, flavors []string, targets []*Target, avoid Avoider) *Decision {
	if len(flavors) == 0 {
		for _, t := range targets {
			if !slices.Contains(flavors, t.Flavor) {
				flavors = append(flavors, t.Flavor)
			}
		}
	}
	d := &Decision{Candidates: make([]Candidate, 0, len(targets))}
	answers := make(map[*Target]*answer, len(targets))
	for _, t := range targets {
		if !slices.Contains(flavors, t.Flavor) {
			continue
		}
		c := Candidate{Cluster: t.Cluster, Flavor: t.Flavor}
		if t.Unavailable != "" {
			c.Reason = t.Unavailable
			d.Candidates = append(d.Candidates, c)
			continue
		}
		var a *answer
		if avoid != nil {
			a = p.place(t, t.free, wl, avoid)
		} else {
			a = p.evaluate(t, wl, shape)
		}
		answers[t] = a
		c.Fits, c.Domain, c.Level, c.Room, c.Reason = a.fits, a.domain, len(a.domain), a.room, a.reason
		d.Candidates = append(d.Candidates, c)
	}
	flavorPos := func(f string) int { return slices.Index(flavors, f) }
	// Compactness is compared at the summaries' leaf level: how many
	// levels above its leaf level the smallest domain that holds every pod
	// is (0: within one leaf domain), so that a cluster with a level more
	// at the top (a zone above its blocks) does not win by it.
	leaf := make(map[[2]string]int, len(targets))
	for _, t := range targets {
		leaf[[2]string{t.Cluster, t.Flavor}] = leafDepth(t.Levels())
	}
	height := func(c Candidate) int { return leaf[[2]string{c.Cluster, c.Flavor}] - c.Level }
	slices.SortStableFunc(d.Candidates, func(a, b Candidate) int {
		if a.Fits != b.Fits {
			if a.Fits {
				return -1
			}
			return 1
		}
		if !a.Fits {
			return cmp.Or(cmp.Compare(flavorPos(a.Flavor), flavorPos(b.Flavor)), cmp.Compare(a.Cluster, b.Cluster))
		}
		room := cmp.Compare(a.Room, b.Room)
		if p.kind == configv1beta1.Spread {
			room = -room
		}
		return cmp.Or(cmp.Compare(height(a), height(b)), room, cmp.Compare(flavorPos(a.Flavor), flavorPos(b.Flavor)), cmp.Compare(a.Cluster, b.Cluster))
	})
	if len(d.Candidates) == 0 {
		d.Reason = fmt.Sprintf("no worker cluster offers the flavors %s", strings.Join(flavors, ", "))
		return d
	}
	if best := d.Candidates[0]; best.Fits {
		d.Cluster, d.Flavor = best.Cluster, best.Flavor
		a := answers[Find(targets, best.Cluster, best.Flavor)]
		for i := range wl.Spec.PodSets {
			ps := &wl.Spec.PodSets[i]
			d.PodSets = append(d.PodSets, PodSetPlacement{Name: ps.Name, Flavor: best.Flavor, Assignment: a.assignments[i], Requests: workload.Request(ps).PodRequests})
		}
		d.Reason = fmt.Sprintf("%s: %s", label(best), best.Reason)
		if len(d.Candidates) > 1 {
			d.Reason += "; " + runnersUp(d.Candidates[1:])
		}
		return d
	}
	// Nothing fits now: would anything, empty?
	d.NeverFits = true
	mismatch := false
	for i := range d.Candidates {
		c := &d.Candidates[i]
		t := Find(targets, c.Cluster, c.Flavor)
		a := answers[t]
		switch {
		case a == nil:
			d.NeverFits = false // unavailable for now
		case a.mismatch:
			mismatch = true
		case p.fitsWhenEmpty(t, wl, shape):
			d.NeverFits = false
		default:
			c.Reason += " (also when empty)"
		}
	}
	switch {
	case d.NeverFits && mismatch:
		d.Reason = "no cluster can ever hold it: " + others(d.Candidates)
	case d.NeverFits:
		d.Reason = "fits no cluster, even empty: " + others(d.Candidates)
	default:
		d.Reason = "fits nowhere now: " + others(d.Candidates)
	}
	if split := p.splitHint(wl, flavors, targets); split != "" {
		d.Reason += "; " + split
	}
	return d
}

// splitHint says, of a workload with several flavor assignment units (pod
// sets, or PodSet groups: workload.FlavorUnits) that fits on no one
// target, on which clusters its units would fit now on different flavors,
// as the clusters' agents admit them. "" when none, or when it has a
// single unit. Quota is not looked at: it is a hint, for the reason of a
// workload DecideSplit does not place either.
func (p *Policy) splitHint(wl *strata.Workload, flavors []string, targets []*Target) string {
	fits := p.splitClusters(wl, flavors, targets, func(t *Target) *tas.Snapshot { return t.free })
	if len(fits) == 0 {
		return ""
	}
	return fmt.Sprintf("its pod sets would fit on different flavors of %s, capacity alone considered (the hub places them so where its ClusterQueue's quota holds each on its flavor: DecideSplit)",
		strings.Join(fits, ", "))
}

// splitClusters are the clusters (in name order) where the units of wl,
// a workload of several, fit on different flavors of snapshot's, quota
// not looked at; none when it has a single unit.
func (p *Policy) splitClusters(wl *strata.Workload, flavors []string, targets []*Target, snapshot func(*Target) *tas.Snapshot) []string {
	if len(wl.Spec.PodSets) < 2 || len(workload.FlavorUnits(wl)) < 2 {
		return nil
	}
	clusters, byCluster := byClusterInOrder(flavors, targets)
	slices.Sort(clusters)
	var fits []string
	for _, c := range clusters {
		ts := byCluster[c]
		if len(ts) < 2 {
			continue
		}
		units := unitFlavors(ts, snapshot)
		placed, ok := workload.PlaceByUnit(wl, units, func(int, *strata.Workload) workload.QuotaAnswer {
			return workload.QuotaAnswer{Fits: true}
		}, false, p.opts)
		if !ok {
			continue
		}
		placed.Release(units)
		if placed.Distinct() > 1 {
			fits = append(fits, c)
		}
	}
	return fits
}

// Options are the engine options the policy places with.
func (p *Policy) Options() tas.Options { return p.opts }

// Find returns the target of flavor on cluster, or nil.
func Find(targets []*Target, cluster, flavor string) *Target {
	for _, t := range targets {
		if t.Cluster == cluster && t.Flavor == flavor {
			return t
		}
	}
	return nil
}

// Assignments returns the decision's assignment of each pod set, at the
// summary's leaf level.
func (d *Decision) Assignments() []*tas.Assignment {
	out := make([]*tas.Assignment, len(d.PodSets))
	for i, ps := range d.PodSets {
		out[i] = ps.Assignment
	}
	return out
}

func label(c Candidate) string { return c.Cluster + "/" + c.Flavor }

// MaxRunnersUp is how many candidates after the chosen one the reason of
// a placement names. The reason goes into the Workload's status with each
// dispatch; naming every (cluster, flavor) of a large fleet would make
// every status write of every Job grow with the fleet, and what a reader
// asks of a placement is which came next, not the whole field.
const MaxRunnersUp = 3

// runnersUp is others of the first MaxRunnersUp of cs, and how many more
// there were.
func runnersUp(cs []Candidate) string {
	if len(cs) <= MaxRunnersUp {
		return others(cs)
	}
	return fmt.Sprintf("%s; and %d more", others(cs[:MaxRunnersUp]), len(cs)-MaxRunnersUp)
}

// others lists candidates' reasons: "b/gpu: rack required: ...; c/gpu: summary stale".
func others(cs []Candidate) string {
	n := 0
	for _, c := range cs {
		n += len(c.Cluster) + len(c.Flavor) + len(c.Reason) + 5
	}
	var b strings.Builder
	b.Grow(n)
	for i, c := range cs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.Cluster)
		b.WriteByte('/')
		b.WriteString(c.Flavor)
		b.WriteString(": ")
		b.WriteString(c.Reason)
	}
	return b.String()
}

func (p *Policy) evaluate(t *Target, wl *strata.Workload, shape string) *answer {
	gen, version := t.Version()
	key := memoKey{cluster: t.Cluster, flavor: t.Flavor, generation: gen, version: version, shape: shape}
	if a, ok := p.memo.Get(key); ok {
		return a
	}
	a := p.place(t, t.free, wl, nil)
	p.memo.Add(key, a)
	return a
}

// fitsWhenEmpty says whether wl fits on t's flavor with nothing running.
// Only asked when the workload fits nowhere now.
func (p *Policy) fitsWhenEmpty(t *Target, wl *strata.Workload, shape string) bool {
	key := memoKey{cluster: t.Cluster, flavor: t.Flavor, version: t.emptyVersion, shape: shape, empty: true}
	e, ok := p.memo.Get(key)
	if !ok {
		empty, err := t.emptySnapshot()
		if err != nil {
			e = &answer{reason: err.Error()}
		} else {
			e = p.place(t, empty, wl, nil)
		}
		p.memo.Add(key, e)
	}
	return e.fits
}

// place runs the engine on s and gives the capacity back; with avoid,
// each pod set keeps out of the domains it gives on t.
func (p *Policy) place(t *Target, s *tas.Snapshot, wl *strata.Workload, avoid Avoider) *answer {
	topology := t.Topology
	if topology == "" {
		topology = "of flavor " + t.Flavor
	}
	if len(wl.Spec.PodSets) == 1 {
		// One pod set: one engine pass, nothing to take and give back.
		ps := &wl.Spec.PodSets[0]
		if err := workload.ValidateAgainstTopology(ps.TopologyRequest, topology, s.Levels()); err != nil {
			return &answer{reason: fmt.Sprintf("pod set %s: %v", ps.Name, err), mismatch: true}
		}
		req := workload.Request(ps)
		if avoid != nil {
			req.Avoid = slices.Concat(req.Avoid, avoid(t, ps))
		}
		assignment, domain, room, err := s.FindWithRoom(req, p.opts)
		if err != nil {
			return &answer{reason: err.Error()}
		}
		return describe(t, &answer{fits: true, assignments: []*tas.Assignment{assignment}, domain: domain, room: room}, s.UncheckedReason(s.Unchecked(req)))
	}
	var avoidOn func(ps *strata.PodSet) []tas.Avoid
	if avoid != nil {
		avoidOn = func(ps *strata.PodSet) []tas.Avoid { return avoid(t, ps) }
	}
	assignments, usage, err := workload.PlaceAvoiding(s, topology, nil, wl, avoidOn, p.opts)
	if err != nil {
		a := &answer{reason: err.Error()}
		var mismatch *workload.TopologyMismatchError
		if errors.As(err, &mismatch) {
			a.mismatch = true
		}
		return a
	}
	defer func() {
		for _, u := range usage {
			s.Release(u)
		}
	}()
	a := &answer{fits: true, assignments: assignments, domain: s.Enclosing(assignments)}
	main := 0
	var unchecked []string
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].Count > wl.Spec.PodSets[main].Count {
			main = i
		}
		for _, u := range s.Unchecked(workload.Request(&wl.Spec.PodSets[i])) {
			if !slices.Contains(unchecked, u) {
				unchecked = append(unchecked, u)
			}
		}
	}
	a.room, _ = s.Room(a.domain, workload.Request(&wl.Spec.PodSets[main]))
	return describe(t, a, s.UncheckedReason(unchecked))
}

// leafDepth is the depth of a summary's leaf level: its lowest level
// above the host, or its lowest when it has no host level.
func leafDepth(levels []string) int {
	if n := len(levels); n > 0 && levels[n-1] == strata.HostnameLabel {
		return n - 1
	}
	return len(levels)
}

// describe writes the reason of an answer that fits, with what of it
// could not be checked.
func describe(t *Target, a *answer, unchecked string) *answer {
	levels := t.Levels()
	if len(a.domain) == 0 {
		a.reason = fmt.Sprintf("fits spread over %s domains", tas.LevelName(levels[0]))
	} else {
		a.reason = fmt.Sprintf("fits in %s %s", tas.LevelName(levels[len(a.domain)-1]), strings.Join(a.domain, "/"))
	}
	a.reason += fmt.Sprintf(", room for %d more", a.room)
	if unchecked != "" {
		a.reason += " (" + unchecked + ")"
	}
	return a
}

// Shape identifies what the engine's answer depends on in a workload:
// its pod sets without names or metadata.
func Shape(wl *strata.Workload) string {
	type podSet struct {
		Count    int32
		Requests corev1.ResourceList
		Topology *strata.PodSetTopologyRequest
		Selector map[string]string
		Affinity *corev1.NodeSelector
		Tol      []corev1.Toleration
	}
	sets := make([]podSet, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		r := workload.Request(ps)
		sets[i] = podSet{ps.Count, r.PodRequests, ps.TopologyRequest, r.NodeSelector, r.NodeAffinity, r.Tolerations}
	}
	data, err := json.Marshal(sets)
	if err != nil {
		return fmt.Sprintf("%p", wl) // never shared
	}
	return string(data)
}

// SpreadAvoider is topology spreading across a fleet for wl: each of its
// pod sets that asks for it keeps out, on each target, of the domains that
// hold more than their share of the units of dispatched that count for it
// (Kueue's rule over the whole fleet, workload.FleetSpreadCounts and
// FleetSpreadAvoid). A rule whose level a target lacks does not apply
// there. nil when wl does not spread.
func SpreadAvoider(wl *strata.Workload, dispatched []workload.Dispatched) Avoider {
	if !workload.Spreads(wl) {
		return nil
	}
	// Per pod set, per cluster.
	avoid := map[string]map[string][]tas.Avoid{}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		sp := ps.TopologyRequest.GetTopologySpreading()
		if sp == nil {
			continue
		}
		avoid[ps.Name] = map[string][]tas.Avoid{}
		for _, rule := range sp.Rules {
			for cluster, a := range workload.FleetSpreadAvoid(rule, workload.FleetSpreadCounts(dispatched, wl, sp, rule.TopologyKey)) {
				avoid[ps.Name][cluster] = append(avoid[ps.Name][cluster], a...)
			}
		}
	}
	return func(t *Target, ps *strata.PodSet) []tas.Avoid {
		var out []tas.Avoid
		levels := t.Levels()
		for _, a := range avoid[ps.Name][t.Cluster] {
			if slices.Contains(levels, a.Level) {
				out = append(out, a)
			}
		}
		return out
	}
}
