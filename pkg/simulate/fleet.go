package simulate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/replay"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// ClusterArg is one --cluster NAME=FILE_OR_DIR.
type ClusterArg struct {
	Name, Path string
}

// ParseClusterArgs parses --cluster values: NAME=FILE_OR_DIR, each name
// once.
func ParseClusterArgs(values []string) ([]ClusterArg, error) {
	var out []ClusterArg
	seen := map[string]string{}
	for _, v := range values {
		name, path, ok := strings.Cut(v, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("--cluster %q: want NAME=FILE_OR_DIR", v)
		case name == "":
			return nil, fmt.Errorf("--cluster %q: the cluster has no name; want NAME=FILE_OR_DIR", v)
		case path == "":
			return nil, fmt.Errorf("--cluster %q: no file or directory after '='", v)
		}
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("cluster %q is given twice (--cluster %s=%s and --cluster %s)", name, name, prev, v)
		}
		seen[name] = path
		out = append(out, ClusterArg{Name: name, Path: path})
	}
	return out, nil
}

// Fleet is the input of a multi-cluster simulation: each worker's cluster
// and the hub's side (an optional ClusterQueue and the workloads).
type Fleet struct {
	Clusters []FleetCluster
	Hub      *Input
	// books are each cluster's quota books, charged with its running
	// workloads (Summaries).
	books map[string]*queue.Books
}

// FleetCluster is one worker cluster read from files.
type FleetCluster struct {
	Name string
	Path string
	In   *Input
}

// LoadFleet reads every cluster and the hub's files.
func LoadFleet(clusters []ClusterArg, hubFiles []string) (*Fleet, error) {
	f, err := LoadClusters(clusters)
	if err != nil {
		return nil, err
	}
	hub, err := Load(hubFiles...)
	if err != nil {
		return nil, err
	}
	for _, kind := range []string{"Node", "Topology", "ResourceFlavor"} {
		if where, ok := hub.sources[kind]; ok {
			return nil, fmt.Errorf("%s: a %s in the hub's files (-f); a worker's cluster objects go in --cluster NAME=FILE_OR_DIR", where, kind)
		}
	}
	f.Hub = hub
	return f, nil
}

// RunFleet places the hub's workloads in file order with the hub's
// placement policy, each on the cluster and flavor it chooses from the
// clusters' capacity summaries (built with the agent's summarizer), and
// reserves its capacity there for the workloads after it.
func RunFleet(f *Fleet, cfg *v1beta1.HubConfiguration) ([]Result, error) {
	summaries, err := f.Summaries()
	if err != nil {
		return nil, err
	}
	var targets []*placement.Target
	var seen []string // flavors in the order first seen
	for _, c := range summaries {
		t, err := placement.NewTarget(c.Name, c.Flavor, c.Summary)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		t.Topology = c.Topology
		targets = append(targets, t)
		if !slices.Contains(seen, c.Flavor) {
			seen = append(seen, c.Flavor)
		}
	}
	// Each hub ClusterQueue's flavor order; a workload of none walks the
	// flavors in the order the clusters list them.
	orders := map[string][]string{}
	for name, cq := range f.Hub.ClusterQueues {
		for _, fq := range queue.Flavors(cq) {
			if !slices.Contains(seen, fq.Name) {
				return nil, fmt.Errorf("%s: ClusterQueue %s lists flavor %q, which no cluster has (clusters' topology-aware flavors: %s)",
					f.Hub.sources["ClusterQueue/"+name], name, fq.Name, strings.Join(seen, ", "))
			}
			orders[name] = append(orders[name], fq.Name)
		}
	}
	opts := tas.OptionsFrom(cfg.TopologyAwareScheduling)
	policy := placement.New(cfg.Dispatch.PlacementPolicy, opts, 0)
	hub := newRunState(f.Hub)
	items := hubItems(f.Hub.Workloads)
	// As the hub serves its queue: by priority, then the time each was
	// queued (its creation, or its place in the input for one without).
	// The rows keep the input's order.
	turn := make([]int, len(items))
	prio := make([]int32, len(items))
	queuedAt := make([]time.Time, len(items))
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, item := range items {
		turn[i], queuedAt[i] = i, base.Add(time.Duration(i+1)*time.Second)
		if wl, _, err := toWorkload(item, true, opts); err == nil {
			hub.prioritize(wl)
			prio[i] = queue.Priority(wl)
			if !wl.CreationTimestamp.IsZero() {
				queuedAt[i] = wl.CreationTimestamp.Time
			}
		}
	}
	slices.SortStableFunc(turn, func(a, b int) int {
		if prio[a] != prio[b] {
			return -cmp.Compare(prio[a], prio[b])
		}
		return queuedAt[a].Compare(queuedAt[b])
	})
	rows := make([]*Result, len(items))
	var dispatched []workload.Dispatched
	var held []*hubHeld // what holds the hub queues' quota, in the order placed
	placed := 0
	// As the hub: a hub Workload of the input dispatched already
	// (status.placement names its worker) holds its queue's quota, and is
	// not placed again; what it uses on its worker is in that worker's
	// files.
	for _, i := range turn {
		wl := items[i].Workload
		if wl == nil || done(items[i]) || wl.Status.Placement == nil || wl.Status.Placement.Cluster == "" {
			continue
		}
		hub.prioritize(wl)
		pl := wl.Status.Placement
		res := Result{Name: wl.Name, Namespace: wl.Namespace, source: items[i].Source, Admitted: true, Cluster: ptr.To(pl.Cluster),
			Reason: fmt.Sprintf("dispatched already to %s (%s), as its status.placement says: not placed again", pl.Cluster, workload.FlavorWords(pl))}
		if cq := f.Hub.clusterQueueOf(wl.Namespace, wl.Spec.QueueName); cq != nil {
			need := queue.WorkloadUsage(wl)
			usage := queue.PlacedUsage(wl, pl.Flavor)
			for flavor, u := range usage {
				hub.books.Charge(cq.Name, flavor, u, 1)
			}
			placed++
			h := &hubHeld{row: i, queue: cq.Name, cluster: pl.Cluster, flavor: pl.Flavor, wl: wl, need: need, queuedAt: queuedAt[i],
				at: base.Add(time.Duration(len(items)+placed) * time.Second)}
			if len(pl.PodSetFlavors) > 0 {
				h.split = usage
			}
			held = append(held, h)
			res.Reason += "; it holds quota of ClusterQueue " + cq.Name
		}
		rows[i] = &res
	}
	fair := preemption.FairStrategies(cfg.FairSharing)
	// As the hub serves its queues: round by round the head of each hub
	// ClusterQueue, those that do not borrow first, then by priority and
	// age (queue.Serve); under fair sharing the tournament of shares; under
	// admission fair sharing the LocalQueue that consumed less first.
	type fleetItem struct {
		wl  *strata.Workload
		res Result
		cq  *strata.ClusterQueue
	}
	prepared := make([]*fleetItem, len(items))
	byQueue := map[string]*queue.Turn[int]{}
	var queueNames []string
	// hubRefuses says why the hub dispatches nothing of wl: a queue that
	// refuses its namespace, or is stopped ("" when none).
	hubRefuses := func(wl *strata.Workload, hubCQ *strata.ClusterQueue) string {
		if why := f.Hub.namespaceRefused(wl.Namespace, hubCQ); why != "" {
			return why
		}
		if stop := queue.StopOf(f.Hub.LocalQueues[wl.Namespace+"/"+wl.Spec.QueueName], hubCQ); stop.Stopped {
			return stop.Message
		}
		return ""
	}
	// addTurn puts item i in its hub queue's turn.
	addTurn := func(i int) {
		name := ""
		if cq := prepared[i].cq; cq != nil {
			name = cq.Name
		}
		t := byQueue[name]
		if t == nil {
			t = &queue.Turn[int]{Queue: prepared[i].cq}
			if t.Queue == nil {
				t.Queue = &strata.ClusterQueue{} // no queue in the input: one BestEffortFIFO queue
			}
			byQueue[name] = t
			queueNames = append(queueNames, name)
		}
		t.Items = append(t.Items, i)
	}
	for _, i := range turn {
		item := items[i]
		if done(item) || rows[i] != nil {
			continue // as the hub: a finished job is not placed, nor one dispatched already
		}
		if item.Workload != nil && !workload.IsActive(item.Workload) {
			rows[i] = &Result{Name: item.Workload.Name, Namespace: item.Workload.Namespace, source: item.Source, Cluster: new(string),
				Reason: "deactivated (spec.active: false): not dispatched until it is active again"}
			continue
		}
		// Offline, a Job's queue label is not resolved: the ClusterQueue in
		// the input, or none, gives the flavor order.
		wl, res, err := toWorkload(item, true, opts)
		if err != nil {
			// As the hub: an invalid job is marked so and the others are
			// placed.
			if res, ok := invalidResult(res, err); ok {
				res.Cluster = new(string)
				rows[i] = &res
				continue
			}
			return nil, err
		}
		hubCQ := f.Hub.clusterQueueOf(wl.Namespace, wl.Spec.QueueName)
		if why := hubRefuses(wl, hubCQ); why != "" {
			res.Reason, res.Cluster = why, new(string)
			rows[i] = &res
			continue
		}
		if wl.CreationTimestamp.IsZero() {
			wl.CreationTimestamp = metav1.NewTime(queuedAt[i]) // its place in the input
		}
		hub.prioritize(wl)
		prepared[i] = &fleetItem{wl: wl, res: res, cq: hubCQ}
		addTurn(i)
	}
	afs := queue.NewAdmissionFairSharing(cfg.AdmissionFairSharing)
	lqUsage := afs.NewPass(func(key types.NamespacedName) *strata.LocalQueue {
		return f.Hub.LocalQueues[key.Namespace+"/"+key.Name]
	}, queue.Penalties{})
	sortTurn := func(t *queue.Turn[int]) {
		if afs.Orders(t.Queue) {
			slices.SortStableFunc(t.Items, func(a, b int) int { return lqUsage.Compare(prepared[a].wl, prepared[b].wl) })
			return
		}
		slices.SortStableFunc(t.Items, func(a, b int) int { return queue.Compare(prepared[a].wl, prepared[b].wl) })
	}
	turnsInOrder := func() []*queue.Turn[int] {
		turns := make([]*queue.Turn[int], 0, len(queueNames))
		for _, name := range queueNames {
			sortTurn(byQueue[name])
			turns = append(turns, byQueue[name])
		}
		return turns
	}
	// lqUsageOf is a held workload's LocalQueue usage, for the order of
	// preemption candidates, where its queue is ordered by it.
	lqUsageOf := func(h *hubHeld) *float64 {
		if !afs.Orders(f.Hub.ClusterQueues[h.queue]) {
			return nil
		}
		return ptr.To(lqUsage.Usage(h.wl))
	}
	var placeErr error
	// evicted are the rows preempted at the hub in a pass, victimNote
	// what their rows said then; holds the quota held for a workload
	// whose preemption at the hub freed it and that was not placed.
	var evicted []int
	victimNote := map[int]string{}
	holds := map[int]hubHold{}
	servePass := func(turns []*queue.Turn[int]) {
		var pick func([]*strata.ClusterQueue, []int) int
		if fair != nil {
			pick = queue.FairPick(hub.books, func(i int) any { return i }, func(i int) *strata.Workload { return prepared[i].wl }, nil)
		}
		queue.Serve(turns, func(i int) *strata.Workload { return prepared[i].wl },
			func(cq *strata.ClusterQueue, i int) int {
				if prepared[i].cq == nil {
					return 0
				}
				if fair != nil {
					return hub.books.WouldBorrow(cq, prepared[i].wl)
				}
				// As the hub: Kueue's preemption oracle.
				return hub.books.WouldBorrowAfter(cq, prepared[i].wl, func(flavor string, need corev1.ResourceList) (int, bool) {
					return hubHeightAfterReclaiming(hub.books, cq, held, prepared[i].wl, queuedAt[i], flavor, need)
				})
			}, pick, nil,
			func(_ *strata.ClusterQueue, i int) bool {
				if placeErr != nil {
					return false
				}
				item, wl, res, hubCQ := items[i], prepared[i].wl, prepared[i].res, prepared[i].cq
				if hubCQ != nil && hub.books.InCycle(hubCQ.Name) {
					// As the hub: nothing is dispatched from a queue in a
					// cycle of Cohort parents.
					res.Reason, res.Cluster = queue.CohortCycleMessage(hubCQ), new(string)
					rows[i] = &res
					return false
				}
				// What its earlier preemption at the hub freed is held for
				// it: it is served on it, and holds it again if not placed.
				hold, holding := holds[i]
				if holding {
					hub.books.Charge(hold.queue, hold.flavor, hold.need, -1)
					delete(holds, i)
				}
				need := queue.WorkloadRequests(wl)
				// As the hub: the flavors of its hub ClusterQueue whose quota holds
				// it (hubFits), and those that hold its fewest pods when it may run
				// with fewer (partial admission checks each count).
				order, hubFits := seen, func(string, corev1.ResourceList) bool { return true }
				if hubCQ != nil {
					order = orders[hubCQ.Name]
					hubFits = func(flavor string, need corev1.ResourceList) bool {
						return hub.books.Check(hubCQ.Name, flavor, need, false).Err == nil
					}
				}
				withinQuota := func() (flavors, notes []string, partialOnly bool) {
					flavors, notes = hubQuotaFlavors(hub.books, hubCQ, order, need)
					if len(flavors) > 0 || workload.Reducible(wl.Spec.PodSets, opts.PartialSlices) == 0 {
						return flavors, notes, false
					}
					fewest := workload.ReducedCounts(wl.Spec.PodSets, math.MaxInt32, opts.PartialSlices)
					flavors, _ = hubQuotaFlavors(hub.books, hubCQ, order, queue.WorkloadRequests(workload.WithCounts(wl, fewest)))
					return flavors, notes, true
				}
				flavors, quotaNotes, partialOnly := withinQuota()
				var hubVictims []string
				// evict takes the victims of a preemption at the hub for wl out.
				evict := func(victims []*hubHeld) {
					for _, v := range victims {
						f.evictAtHub(v, wl, hubCQ, hub.books, targets, rows[v.row])
						evicted, victimNote[v.row] = append(evicted, v.row), rows[v.row].Reason
						hold, holding = hubHold{queue: hubCQ.Name, flavor: v.flavor, need: need}, true
						dispatched = slices.DeleteFunc(dispatched, func(d workload.Dispatched) bool { return d.Workload == v.wl })
						hubVictims = append(hubVictims, v.wl.Namespace+"/"+v.wl.Name)
					}
					held = heldBy(held, victims)
				}
				// As the hub: a workload whose pod sets (or PodSet groups) fit
				// on no one target may fit on different flavors of one worker,
				// each within its queues' quota on its own
				// (placement.Policy.DecideSplit), before any preemption.
				// The targets it may use, for the split (any flavor of its
				// queue, not refused there).
				var splitTargets []*placement.Target
				splittable := func() bool {
					return len(wl.Spec.PodSets) > 1 && len(workload.FlavorUnits(wl)) > 1 && !workload.Spreads(wl)
				}
				splitEligible := func() []*placement.Target {
					eligible, _, _ := placement.SplitTargets(targets, nil, order, func(t *placement.Target) string {
						lq, cq := f.landingQueues(t.Cluster, wl)
						if why := f.namespaceRefused(t.Cluster, wl.Namespace, cq); why != "" {
							return why
						}
						if stop := queue.StopOf(lq, cq); stop.Stopped {
							return stop.Message
						}
						return t.MissingClass(wl)
					})
					return eligible
				}
				tryNext := hubCQ != nil && queue.Fungibility(hubCQ).WhenCanBorrow == strata.FungibilityTryNextFlavor
				splitQuota := func(cluster, flavor string, placed *strata.Workload) workload.QuotaAnswer {
					need := queue.WorkloadRequests(placed)
					var fit queue.Fit
					if hubCQ != nil {
						if fit = hub.books.Check(hubCQ.Name, flavor, need, false); fit.Err != nil {
							return workload.QuotaAnswer{}
						}
					}
					if cq, books := f.landing(cluster, wl), f.books[cluster]; cq != nil && books != nil {
						if why, _ := placement.QuotaShort(books, cq.Name, flavor, need, nil, false); why != "" {
							return workload.QuotaAnswer{}
						}
					}
					a := workload.QuotaAnswer{Fits: true, Borrows: fit.Borrows}
					if hubCQ != nil {
						a.Height = hub.books.BorrowHeight(hubCQ.Name, flavor, need)
					}
					return a
				}
				splitFor := func() *placement.Decision {
					if !splittable() {
						return nil
					}
					splitTargets = splitEligible()
					return policy.DecideSplit(wl, order, splitTargets, splitQuota, tryNext)
				}
				// As the hub: the one worker that preempts for its pod sets
				// on different flavors, those that fit now on theirs.
				splitPreemptFor := func() (*placement.PreemptionChoice, string) {
					if !splittable() {
						return nil, ""
					}
					sp := placement.SplitPreemption{Quota: splitQuota, TryNextOnBorrow: tryNext,
						FirstPreempting: hubCQ != nil && queue.Fungibility(hubCQ).WhenCanPreempt == strata.FungibilityPreempt,
						HubFits: func(flavor string, placed *strata.Workload) (bool, bool) {
							if hubCQ == nil {
								return true, false
							}
							fit := hub.books.Check(hubCQ.Name, flavor, queue.WorkloadRequests(placed), false)
							return fit.Err == nil, fit.Borrows
						},
						Preempt: func(sub *strata.Workload, t *placement.Target) (*placement.PreemptionChoice, string) {
							return fleetPreemption(f, policy, wl, sub, []string{t.Flavor}, []*placement.Target{t})
						}}
					return policy.DecideSplitPreemption(wl, order, splitEligible(), sp)
				}
				var split *placement.Decision
				var splitChoice *placement.PreemptionChoice
				if len(flavors) == 0 && !partialOnly {
					if split = splitFor(); split == nil {
						splitChoice, _ = splitPreemptFor()
					}
				}
				if len(flavors) == 0 && split == nil && splitChoice == nil {
					// As the hub: preempting at the hub what its queue's policy
					// allows, for all of its pods or the most of them.
					victims, why := hubReclaim(hub.books, hubCQ, held, wl, queuedAt[i], fair, lqUsageOf, opts.PartialSlices)
					// As the hub: for its pod sets on different flavors, the
					// quota of the first that is within quota on none.
					var splitFlavor string
					var splitNeed corev1.ResourceList
					if victims == nil && !partialOnly && splittable() {
						victims, splitFlavor, splitNeed = hubSplitReclaim(hub.books, hubCQ, held, wl, queuedAt[i], fair, lqUsageOf)
					}
					evict(victims)
					if splitNeed != nil {
						hold = hubHold{queue: hubCQ.Name, flavor: splitFlavor, need: splitNeed}
					}
					if victims != nil {
						flavors, quotaNotes, partialOnly = withinQuota()
						if len(flavors) == 0 && !partialOnly {
							if split = splitFor(); split == nil {
								splitChoice, _ = splitPreemptFor()
							}
						}
					} else if why != "" {
						quotaNotes = append(quotaNotes, why)
					}
				}
				if len(flavors) == 0 && split == nil && splitChoice == nil {
					// As the hub: it waits for quota; nothing goes ahead of it in
					// a StrictFIFO queue.
					res.Reason, res.Cluster = "no flavor of ClusterQueue "+hubCQ.Name+" has quota left: "+strings.Join(quotaNotes, "; "), new(string)
					rows[i] = &res
					return true
				}
				// As the hub: no copy where the worker queue it lands in has no
				// quota left for it (a preemption there may still let it in).
				quotaShortOf := func(t *placement.Target, need corev1.ResourceList, freed map[string]corev1.ResourceList, nominal bool) (string, bool) {
					cq, books := f.landing(t.Cluster, wl), f.books[t.Cluster]
					if cq == nil || books == nil {
						return "", false
					}
					return placement.QuotaShort(books, cq.Name, t.Flavor, need, freed, nominal)
				}
				quotaShort := func(t *placement.Target, freed map[string]corev1.ResourceList, nominal bool) (string, bool) {
					return quotaShortOf(t, need, freed, nominal)
				}
				var shortWhy []Candidate
				// never: no copy nor preemption there; neverWhole: only its queue
				// could never hold all of its pods (it may hold fewer).
				never, neverWhole := map[*placement.Target]bool{}, map[*placement.Target]bool{}
				eligible, short, excluded := placement.SplitTargets(targets, nil, flavors, func(t *placement.Target) string {
					// No copy where its queue is stopped or its priority class
					// does not exist, nor a preemption there.
					lq, cq := f.landingQueues(t.Cluster, wl)
					if why := f.namespaceRefused(t.Cluster, wl.Namespace, cq); why != "" {
						never[t] = true
						return why + " there"
					}
					if stop := queue.StopOf(lq, cq); stop.Stopped {
						never[t] = true
						return stop.Message + " there"
					}
					if why := t.MissingClass(wl); why != "" {
						never[t] = true
						return why
					}
					why, nv := quotaShort(t, nil, false)
					never[t], neverWhole[t] = nv, nv
					if why != "" && slices.Contains(flavors, t.Flavor) {
						shortWhy = append(shortWhy, Candidate{Cluster: t.Cluster, Flavor: t.Flavor, Reason: why})
					}
					return why
				})
				var fewerOnly []*placement.Target
				short = slices.DeleteFunc(short, func(t *placement.Target) bool {
					if neverWhole[t] {
						fewerOnly = append(fewerOnly, t)
					}
					return never[t]
				})
				// Topology spreading counts, fleet-wide, what was placed before.
				d := &placement.Decision{Reason: "all of its pods are within quota on no flavor: " + strings.Join(quotaNotes, "; ")}
				switch {
				case split != nil:
					d = split
				case !partialOnly:
					d = policy.DecideAvoiding(wl, placement.Shape(wl), flavors, eligible, placement.SpreadAvoider(wl, dispatched))
					if d.Cluster == "" {
						if s := splitFor(); s != nil {
							d = s
						} else if p := policy.DecideProvisional(wl, flavors, eligible, func(t *placement.Target) bool {
							// As the hub: a worker whose queue provisions nodes
							// for it takes it on quota alone (the hub reads it
							// in the summary, where the agent says it as here).
							return f.provisions(t.Cluster, t.Flavor, wl)
						}); p.Cluster != "" {
							d = p
						} else if splitTargets != nil {
							policy.SplitLater(d, wl, order, splitTargets)
						}
					}
				default:
					// As the hub: all of its pods on different flavors before
					// fewer of them.
					if s := splitFor(); s != nil {
						d = s
					}
				}
				res.Cluster = &d.Cluster
				res.Reason = d.Reason
				switch {
				case len(excluded) > 0 && len(d.Candidates) == 0:
					res.Reason = "no worker may take it now: " + strings.Join(excluded, "; ")
				case len(excluded) > 0:
					res.Reason += "; " + strings.Join(excluded, "; ")
				}
				// charge takes usage (by flavor; nil: need on flavor) of the
				// worker's queue and the hub's.
				charge := func(cluster, flavor string, usage map[string]corev1.ResourceList) {
					if usage == nil {
						usage = map[string]corev1.ResourceList{flavor: need}
					}
					for flavor, need := range usage {
						if cq, books := f.landing(cluster, wl), f.books[cluster]; cq != nil && books != nil {
							books.Charge(cq.Name, flavor, need, 1)
						}
						if hubCQ != nil {
							hub.books.Charge(hubCQ.Name, flavor, need, 1)
						}
					}
				}
				// preemptFor is the one worker where preempting lets w (wl, or wl
				// with fewer pods) in, among targets, on flavors.
				preemptFor := func(w *strata.Workload, flavors []string, targets []*placement.Target) (*placement.PreemptionChoice, string) {
					return fleetPreemption(f, policy, wl, w, flavors, targets)
				}
				preempting := false
				var choice *placement.PreemptionChoice
				if !partialOnly && d.Cluster == "" && (!d.NeverFits || len(short) > 0) {
					// As the hub: the one worker where preempting lets it in.
					var why string
					choice, why = preemptFor(wl, flavors, append(slices.Clip(eligible), short...))
					if choice == nil && why != "" {
						res.Reason += "; no preemption helps: " + why
					}
				}
				if !partialOnly && d.Cluster == "" && choice == nil {
					// As the hub: its pod sets on different flavors of the one
					// worker that preempts for those that do not fit now.
					if splitChoice == nil {
						var why string
						if splitChoice, why = splitPreemptFor(); splitChoice == nil && why != "" {
							res.Reason += "; no preemption on different flavors helps: " + why
						}
					}
					choice = splitChoice
				}
				if d.Cluster == "" && choice == nil {
					// As the hub: with fewer pods (minCount), where they fit or a
					// preemption makes room for them.
					// As the hub: with the most pods a preemption at the hub frees
					// its queue's quota for, when that is more.
					partially := func(reclaimFor func(*strata.Workload) ([]*hubHeld, []string)) (*placement.Decision, *placement.PreemptionChoice, []*hubHeld, []int32) {
						return fleetPartially(wl, opts.PartialSlices, flavors, append(append(slices.Clip(eligible), short...), fewerOnly...), policy,
							placement.SpreadAvoider(wl, dispatched), hubFits, quotaShortOf, preemptFor, reclaimFor)
					}
					pd, pc, victims, counts := partially(hubReclaimSearch(hub.books, hubCQ, held, wl, queuedAt[i], fair, lqUsageOf))
					if victims != nil {
						evict(victims)
						// As the hub once they are gone: all of its pods when
						// they fit now, else the most that do.
						if whole, _ := hubQuotaFlavors(hub.books, hubCQ, order, need); len(whole) > 0 {
							if wd := policy.DecideAvoiding(wl, placement.Shape(wl), whole, eligible, placement.SpreadAvoider(wl, dispatched)); wd.Cluster != "" {
								d, res.Cluster, res.Reason = wd, &wd.Cluster, wd.Reason
							}
						}
						if d.Cluster == "" {
							pd, pc, _, counts = partially(nil)
						}
					}
					if pd != nil || pc != nil {
						wl = workload.WithCounts(wl, counts)
						need = queue.WorkloadRequests(wl)
						if pd != nil {
							d = pd
							res.Cluster, res.Reason = &d.Cluster, d.Reason
						}
						choice = pc
					}
				}
				{
					if choice != nil {
						if err := choice.Reserve(targets, fmt.Sprint(i)); err != nil {
							placeErr = fmt.Errorf("%s: %w", item.Source, err)
							return false
						}
						var split map[string]corev1.ResourceList
						if choice.Split() {
							split = queue.SplitUsage(wl, choice.Flavor, choice.PodSetFlavors())
						}
						charge(choice.Cluster, choice.Flavor, split)
						preempting = true
						res.Cluster, res.PreemptUpTo = &choice.Cluster, ptr.To(choice.UpTo)
						res.Reason = fmt.Sprintf("would preempt up to %d workloads of priority ≤ %d there: %s", choice.Workloads, choice.UpTo, choice.Reason)
					}
				}
				for _, c := range d.Candidates {
					cand := Candidate{Cluster: c.Cluster, Flavor: c.Flavor, Fits: c.Fits, Reason: c.Reason}
					if c.Fits && c.Level > 0 {
						cand.Level = placement.Find(targets, c.Cluster, c.Flavor).Levels()[c.Level-1]
					}
					res.Candidates = append(res.Candidates, cand)
				}
				res.Candidates = append(res.Candidates, shortWhy...)
				if d.Cluster != "" {
					if err := d.Reserve(targets, fmt.Sprint(i)); err != nil {
						placeErr = fmt.Errorf("%s: %w", item.Source, err)
						return false
					}
					var split map[string]corev1.ResourceList
					if d.Split() {
						split = queue.SplitUsage(wl, d.Flavor, d.PodSetFlavors())
					}
					charge(d.Cluster, d.Flavor, split)
					assignments := make([]*tas.Assignment, len(d.PodSets))
					for k, ps := range d.PodSets {
						assignments[k] = ps.Assignment
					}
					res.Admitted, res.PodSets = true, podSetResults(wl, d.Flavor, assignments)
					for k, ps := range d.PodSets {
						res.PodSets[k].Flavor = cmp.Or(ps.Flavor, d.Flavor)
					}
					hints := map[string]*tas.Assignment{}
					for k, ps := range d.PodSets {
						if assignments[k] != nil { // none on a worker that provisions
							hints[ps.Name] = assignments[k]
						}
					}
					dispatched = append(dispatched, workload.Dispatched{Workload: wl, Cluster: d.Cluster, Hints: hints})
				}
				if hubCQ != nil && (d.Cluster != "" || choice != nil) {
					placed++
					h := &hubHeld{row: i, key: fmt.Sprint(i), placedHere: true, queue: hubCQ.Name, cluster: d.Cluster, flavor: d.Flavor, wl: wl, need: need, queuedAt: queuedAt[i],
						at: base.Add(time.Duration(len(items)+placed) * time.Second)}
					if d.Split() {
						h.split = queue.SplitUsage(wl, d.Flavor, d.PodSetFlavors())
					}
					if choice != nil {
						h.cluster, h.flavor = choice.Cluster, choice.Flavor
						if choice.Split() {
							h.split = queue.SplitUsage(wl, choice.Flavor, choice.PodSetFlavors())
						}
					}
					held = append(held, h)
				}
				if len(hubVictims) > 0 {
					res.Preempts = append(res.Preempts, hubVictims...)
					res.Reason += "; preempted at the hub to free its queue's quota: " + strings.Join(hubVictims, ", ")
				}
				if (d.Cluster != "" || choice != nil) && afs.Orders(hubCQ) {
					// As the hub: a dispatch counts against its LocalQueue at once.
					lqUsage.Admitted(prepared[i].wl)
					sortTurn(byQueue[hubCQ.Name])
				}
				if holding && d.Cluster == "" && choice == nil {
					// As the hub: the quota its preemption freed stays held
					// for it while it waits.
					hub.books.Charge(hold.queue, hold.flavor, hold.need, 1)
					holds[i] = hold
				}
				rows[i] = &res
				// As the hub: a head that waits for capacity (not one that fits
				// no worker, even empty) holds its StrictFIFO queue.
				return d.Cluster == "" && !preempting && (!d.NeverFits || len(excluded) > 0)
			},
			func(cq *strata.ClusterQueue, behind []int) {
				for _, i := range behind {
					res := prepared[i].res
					res.Reason, res.Cluster = fmt.Sprintf("waiting in StrictFIFO ClusterQueue %s behind workloads that fit nowhere yet", cq.Name), new(string)
					rows[i] = &res
				}
			})
	}
	servePass(turnsInOrder())
	// As the hub: a workload preempted at the hub goes back to its queue,
	// and the hub's next pass serves it with the others still waiting.
	// One the input showed dispatched keeps what its worker's files hold
	// there.
	for pass := 1; pass < maxPasses && len(evicted) > 0 && placeErr == nil; pass++ {
		for _, i := range evicted {
			if prepared[i] != nil {
				continue
			}
			wl, res, err := toWorkload(items[i], true, opts)
			if err != nil {
				continue
			}
			hubCQ := f.Hub.clusterQueueOf(wl.Namespace, wl.Spec.QueueName)
			if !workload.IsActive(wl) || hubRefuses(wl, hubCQ) != "" {
				continue // as the hub: not dispatched again; its row says it was preempted
			}
			wl = wl.DeepCopy()
			wl.Status.Placement, wl.Status.Admission = nil, nil
			if wl.CreationTimestamp.IsZero() {
				wl.CreationTimestamp = metav1.NewTime(queuedAt[i])
			}
			hub.prioritize(wl)
			prepared[i] = &fleetItem{wl: wl, res: res, cq: hubCQ}
		}
		evicted, byQueue, queueNames = nil, map[string]*queue.Turn[int]{}, nil
		var again []int
		for _, i := range turn {
			if r := rows[i]; prepared[i] != nil && r != nil && !r.Admitted && r.PreemptUpTo == nil {
				again = append(again, i)
				addTurn(i)
			}
		}
		servePass(turnsInOrder())
		for _, i := range again {
			note, ok := victimNote[i]
			if !ok || rows[i].Reason == note {
				continue // not a victim, or preempted again: its row says so
			}
			delete(victimNote, i)
			note = strings.TrimSuffix(note, "; it waits in its queue again")
			if rows[i].Admitted || rows[i].PreemptUpTo != nil {
				rows[i].Reason = note + ", then placed again: " + rows[i].Reason
			} else {
				rows[i].Reason = note + "; " + rows[i].Reason
			}
		}
	}
	if placeErr != nil {
		return nil, placeErr
	}
	results := make([]Result, 0, len(items))
	for _, r := range rows {
		if r != nil {
			results = append(results, *r)
		}
	}
	return results, nil
}

// Summaries are the capacity summaries of every cluster's topology-aware
// flavors, built as each cluster's agent publishes them (its summarizer,
// within the default size budget, without the taints the flavor
// tolerates), in the order of the clusters and of their flavors.
func (f *Fleet) Summaries() ([]replay.Cluster, error) {
	var out []replay.Cluster
	budget := config.DefaultSummaryMaxBytes - 1024
	for _, c := range f.Clusters {
		flavors, err := buildFlavors(c.In)
		if err != nil {
			return nil, fmt.Errorf("cluster %s (%s): %w", c.Name, c.Path, err)
		}
		// Its running workloads hold their capacity and quota; those of
		// queues whose workloads may be preempted are what preempting
		// would free.
		run := newRunState(c.In)
		run.flavors = flavors
		for _, item := range c.In.Workloads {
			if done(item) {
				continue // finished: holds nothing, as on the agent
			}
			if err := run.addRunning(flavors, item, tas.Options{}); err != nil {
				return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
			}
		}
		if f.books == nil {
			f.books = map[string]*queue.Books{}
		}
		f.books[c.Name] = run.books
		cqs := make([]*strata.ClusterQueue, 0, len(c.In.ClusterQueues))
		for _, cq := range c.In.ClusterQueues {
			cqs = append(cqs, cq)
		}
		victims := preemption.VictimQueues(cqs, c.In.Cohorts...)
		held := map[string][]tas.Held{}
		borrowed := map[string]map[string]corev1.ResourceList{} // by flavor, queue
		for flavor, rs := range run.running {
			usage := map[string]corev1.ResourceList{}
			for _, r := range rs {
				_, reclaimed := victims.Reclaimed[r.queue]
				if victims.Within[r.queue] || reclaimed {
					held[flavor] = append(held[flavor], tas.Held{Queue: r.queue, Priority: queue.Priority(r.wl), Usage: r.usage, Requests: r.requests,
						AdmittedAt: r.admitted, Key: r.wl.Namespace + "/" + r.wl.Name})
				}
				if reclaimed {
					queue.AddRequests(usage, r.queue, r.requests)
				}
			}
			for q, u := range usage {
				if b := preemption.Borrowed(victims.Reclaimed[q], flavor, u); len(b) > 0 {
					if borrowed[flavor] == nil {
						borrowed[flavor] = map[string]corev1.ResourceList{}
					}
					borrowed[flavor][q] = b
				}
			}
		}
		for _, fl := range c.In.Flavors {
			st := flavors[fl.Name]
			if st == nil {
				continue
			}
			sum, err := st.snapshot.CapturePreemptible(fl.Spec.Tolerations, held[fl.Name], tas.Victims{Within: victims.Within, Borrowed: borrowed[fl.Name]}).Summarize(budget)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: flavor %s: %w", c.Name, fl.Name, err)
			}
			sum.SummaryGeneration = 1
			out = append(out, replay.Cluster{Name: c.Name, Flavor: fl.Name, Topology: st.topology.Name, Summary: &sum})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cluster has a topology-aware ResourceFlavor (with a topologyName and its Topology)")
	}
	return out, nil
}

// LoadClusters reads the clusters of a fleet, without the hub's side (a
// trace replay takes its Jobs from the trace).
func LoadClusters(clusters []ClusterArg) (*Fleet, error) {
	f := &Fleet{}
	for _, c := range clusters {
		in, err := Load(c.Path)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		for _, item := range in.Workloads {
			if item.Workload == nil || item.Workload.Status.Admission == nil {
				return nil, fmt.Errorf("cluster %s: %s: workloads are placed by the hub; pass them with -f (or a trace), not in --cluster (a cluster's files hold only what runs there: Workloads with a status.admission)",
					c.Name, item.Source)
			}
		}
		f.Clusters = append(f.Clusters, FleetCluster{Name: c.Name, Path: c.Path, In: in})
	}
	return f, nil
}

// landing is the ClusterQueue of cluster that a copy of wl lands in (its
// LocalQueue there); nil when there is none.
func (f *Fleet) landing(cluster string, wl *strata.Workload) *strata.ClusterQueue {
	_, cq := f.landingQueues(cluster, wl)
	return cq
}

// provisions says whether the ClusterQueue of cluster a copy of wl lands
// in has a ProvisioningRequest check on flavor.
func (f *Fleet) provisions(cluster, flavor string, wl *strata.Workload) bool {
	cq := f.landing(cluster, wl)
	if cq == nil {
		return false
	}
	for _, c := range f.Clusters {
		if c.Name == cluster {
			return c.In.delaysTopology(cq, flavor)
		}
	}
	return false
}

// landingQueues are the LocalQueue and ClusterQueue of cluster that a copy
// of wl lands in; nil when there are none.
func (f *Fleet) landingQueues(cluster string, wl *strata.Workload) (*strata.LocalQueue, *strata.ClusterQueue) {
	for _, c := range f.Clusters {
		if c.Name != cluster {
			continue
		}
		if lq := c.In.LocalQueues[wl.Namespace+"/"+wl.Spec.QueueName]; lq != nil {
			return lq, c.In.ClusterQueues[lq.Spec.ClusterQueue]
		}
	}
	return nil, nil
}

// namespaceRefused says why the ClusterQueue cq of cluster admits no
// workload of namespace ns ("" when it does, or the cluster's files do
// not tell).
func (f *Fleet) namespaceRefused(cluster, ns string, cq *strata.ClusterQueue) string {
	for _, c := range f.Clusters {
		if c.Name == cluster {
			return c.In.namespaceRefused(ns, cq)
		}
	}
	return ""
}

// fleetPreemption is the one worker where preempting lets w (wl, with
// fewer pods, or some of its pod sets) in, among targets of flavors, as
// the hub chooses it (placement.Policy.DecidePreemption): w's need in the
// queue wl's copy lands in on each worker.
func fleetPreemption(f *Fleet, policy *placement.Policy, wl, w *strata.Workload, flavors []string, targets []*placement.Target) (*placement.PreemptionChoice, string) {
	need := queue.WorkloadRequests(w)
	return policy.DecidePreemption(w, flavors, targets, func(t *placement.Target) (int32, bool) { return t.Priority(wl) }, func(t *placement.Target) []placement.PreemptionScope {
		priority, _ := t.Priority(wl)
		return placement.ScopesFor(f.landing(t.Cluster, wl), t.Flavor, need, priority, f.books[t.Cluster], t.FairSharing())
	}, func(t *placement.Target, freed map[string]corev1.ResourceList, nominal bool) string {
		cq, books := f.landing(t.Cluster, wl), f.books[t.Cluster]
		if cq == nil || books == nil {
			return ""
		}
		why, _ := placement.QuotaShort(books, cq.Name, t.Flavor, need, freed, nominal)
		return why
	})
}

// hubItems are the workloads as the hub takes them in: a job read as its
// groups (a LeaderWorkerSet) is one workload of all of them, placed on one
// cluster and flavor.
func hubItems(in []Item) []Item {
	out := make([]Item, 0, len(in))
	for _, item := range in {
		if item.whole == nil {
			out = append(out, item)
			continue
		}
		switch {
		case item.Job == nil:
			out = append(out, Item{Job: item.whole, Source: item.Source})
		case item.group == 0:
			source, _, _ := strings.Cut(item.Source, ", group 0)")
			out = append(out, Item{Job: item.whole, Source: source + ")"})
		}
	}
	return out
}

// fleetPartially is the hub's partial admission (hub/dispatch's
// placePartially) offline: for a workload whose pod sets may run with
// fewer pods (minCount) and that fits nowhere whole nor by preempting,
// the most pods, at least minCount, that fit on one worker of candidates
// whose queue has quota for them, or for which preemptFor chooses a
// worker; nil, nil when no count is admissible.
func fleetPartially(wl *strata.Workload, partialSlices bool, order []string, candidates []*placement.Target, policy *placement.Policy, avoid placement.Avoider,
	hubFits func(flavor string, need corev1.ResourceList) bool,
	quotaShort func(*placement.Target, corev1.ResourceList, map[string]corev1.ResourceList, bool) (string, bool),
	preemptFor func(*strata.Workload, []string, []*placement.Target) (*placement.PreemptionChoice, string),
	reclaimFor func(*strata.Workload) ([]*hubHeld, []string)) (*placement.Decision, *placement.PreemptionChoice, []*hubHeld, []int32) {
	total := workload.Reducible(wl.Spec.PodSets, partialSlices)
	if total == 0 {
		return nil, nil, nil, nil
	}
	type outcome struct {
		dec     *placement.Decision
		choice  *placement.PreemptionChoice
		victims []*hubHeld
	}
	k, o, ok := workload.FewestTakenAway(total, func(k int32) (outcome, bool) {
		sized := workload.WithCounts(wl, workload.ReducedCounts(wl.Spec.PodSets, k, partialSlices))
		need := queue.WorkloadRequests(sized)
		// The flavors whose hub quota holds that many, and the workers
		// there whose queue does.
		within := slices.DeleteFunc(slices.Clone(order), func(f string) bool { return !hubFits(f, need) })
		var o outcome
		if len(within) == 0 {
			if reclaimFor != nil {
				o.victims, _ = reclaimFor(sized)
			}
			return o, o.victims != nil
		}
		var fitting, short []*placement.Target
		for _, t := range candidates {
			if !slices.Contains(within, t.Flavor) {
				continue
			}
			if why, _ := quotaShort(t, need, nil, false); why != "" {
				short = append(short, t)
				continue
			}
			fitting = append(fitting, t)
		}
		if dec := policy.DecideAvoiding(sized, placement.Shape(sized), within, fitting, avoid); dec.Cluster != "" {
			o.dec = dec
		} else {
			o.choice, _ = preemptFor(sized, within, append(fitting, short...))
		}
		return o, o.dec != nil || o.choice != nil
	})
	if !ok {
		return nil, nil, nil, nil
	}
	counts := workload.ReducedCounts(wl.Spec.PodSets, k, partialSlices)
	note := "; with " + workload.FewerPods(wl.Spec.PodSets, counts) + " (partial admission: all fit on no worker or within quota)"
	switch {
	case o.victims != nil:
		return nil, nil, o.victims, counts
	case o.choice != nil:
		o.choice.Reason += note
	default:
		o.dec.Reason += note
	}
	return o.dec, o.choice, nil, counts
}

// hubQuotaFlavors are the flavors of order on which the hub ClusterQueue
// cq's quota holds need, as the hub walks them, and why each other does
// not; every flavor of order when the workload has no hub queue.
func hubQuotaFlavors(books *queue.Books, cq *strata.ClusterQueue, order []string, need corev1.ResourceList) (within, notes []string) {
	if cq == nil {
		return order, nil
	}
	for _, f := range order {
		if fit := books.Check(cq.Name, f, need, false); fit.Err != nil {
			notes = append(notes, fmt.Sprintf("flavor %s: %v", f, fit.Err))
			continue
		}
		within = append(within, f)
	}
	return within, notes
}
