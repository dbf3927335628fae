package simulate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// Result is the outcome for one workload.
type Result struct {
	Name      string         `json:"name"`
	Namespace string         `json:"namespace"`
	Admitted  bool           `json:"admitted"`
	Reason    string         `json:"reason"`
	PodSets   []PodSetResult `json:"podSets"`
	// Cluster and Candidates are set by RunFleet only: the chosen cluster
	// ("" when not admitted) and every (cluster, flavor) considered, best
	// first.
	Cluster    *string     `json:"cluster,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// Preempts are the running workloads (namespace/name) this one is
	// admitted in place of, by its ClusterQueue's preemption policy.
	Preempts []string `json:"preempts,omitempty"`
	// PreemptUpTo is set by RunFleet for a workload that fits nowhere as
	// the fleet stands: the hub sends it to Cluster to preempt workloads
	// of priority ≤ it there.
	PreemptUpTo *int32 `json:"preemptUpTo,omitempty"`
	// Invalid is set for a job the intake refuses as written (its
	// annotations or pod sets): the agent and the hub mark its Workload
	// Invalid (reason InvalidJob) and admit nothing of it; Reason says why.
	Invalid bool `json:"invalid,omitempty"`
	// UnderRoundHold says that it was served, at least once, in a round
	// where an earlier head that must preempt and found no victims held
	// quota (Kueue's reservation, which the agent does not make:
	// docs/engine.md): where it went, or that it waits, may differ on an
	// agent. Not in the output; the agent's differential checks read it.
	UnderRoundHold bool `json:"-"`
	source         string
}

// Invalid counts the results of invalid jobs.
func Invalid(results []Result) int {
	n := 0
	for i := range results {
		if results[i].Invalid {
			n++
		}
	}
	return n
}

// invalidError is a job the intake refuses as written.
type invalidError struct {
	source string
	err    error
}

func (e *invalidError) Error() string { return fmt.Sprintf("%s: invalid: %v", e.source, e.err) }

// invalidResult is the row of a job the intake refuses, when err is one;
// ok is false for any other error.
func invalidResult(res Result, err error) (Result, bool) {
	var ie *invalidError
	if !errors.As(err, &ie) {
		return res, false
	}
	res.Admitted, res.Invalid, res.Reason = false, true, fmt.Sprintf("invalid: %v", ie.err)
	return res, true
}

// Candidate is the hub's verdict on one (cluster, flavor) for a workload.
type Candidate struct {
	Cluster string `json:"cluster"`
	Flavor  string `json:"flavor"`
	Fits    bool   `json:"fits"`
	// Level is the node label of the level of the smallest domain that
	// holds every pod; "" when the pods spread over top-level domains or
	// do not fit.
	Level  string `json:"level"`
	Reason string `json:"reason"`
}

// PodSetResult is where one pod set's pods go.
type PodSetResult struct {
	Name    string   `json:"name"`
	Flavor  string   `json:"flavor"`
	Count   int32    `json:"count"`
	Levels  []string `json:"levels"`
	Domains []Domain `json:"domains"`
	// DelayedTopology: its quota is reserved without a topology
	// assignment, which a ProvisioningRequest check delays until the
	// nodes it asks for are provisioned (not simulated).
	DelayedTopology bool `json:"delayedTopology,omitempty"`
}

// Domain is one domain of the lowest assigned level and its pod count.
type Domain struct {
	Values []string `json:"values"`
	Count  int32    `json:"count"`
}

type flavorState struct {
	flavor   *strata.ResourceFlavor
	topology *strata.Topology
	snapshot *tas.Snapshot
}

// Run places the workloads in order, each taking capacity from the next.
// Workloads with an admission are running: they take their capacity
// first, and a workload that fits nowhere may preempt them as the agent
// would, under its ClusterQueue's policies. Errors are about the cluster
// description; a workload that cannot be placed gets a Result with
// admitted false and the reason, and an invalid job one with Invalid set.
func Run(in *Input, opts tas.Options) ([]Result, error) {
	flavors, err := buildFlavors(in)
	if err != nil {
		return nil, err
	}
	st := newRunState(in)
	st.flavors = flavors
	for _, item := range in.Workloads {
		if item.Workload != nil && item.Workload.Status.Admission != nil && !done(item) {
			if err := st.addRunning(flavors, item, opts); err != nil {
				return nil, err
			}
		}
	}
	names := map[string]bool{}
	for _, item := range in.Workloads {
		if item.Workload != nil {
			names[item.Workload.Namespace+"/"+item.Workload.Name] = true
		}
	}
	// As the agent serves its queues: each ClusterQueue's workloads in its
	// order (priority, then the time each was queued: its creation, or its
	// place in the input for one without), heads of every queue in turn.
	// The rows keep the input's order.
	rows := make([]*Result, len(in.Workloads))
	turns := map[string]*queue.Turn[*pendingItem]{}
	var queueNames []string
	turnOf := func(p *pendingItem) *queue.Turn[*pendingItem] {
		name := ""
		if p.cq != nil {
			name = p.cq.Name
		}
		t := turns[name]
		if t == nil {
			t = &queue.Turn[*pendingItem]{Queue: p.cq}
			if t.Queue == nil {
				t.Queue = &strata.ClusterQueue{} // no queue in the input: one BestEffortFIFO queue
			}
			turns[name] = t
			queueNames = append(queueNames, name)
		}
		return t
	}
	// The input's running workloads by namespace/name: one a placement
	// preempts goes back to its queue (evicted), as on the agent.
	runningRow := map[string]int{}
	for i, item := range in.Workloads {
		if item.Workload != nil && item.Workload.Status.Admission != nil && !done(item) {
			runningRow[item.Workload.Namespace+"/"+item.Workload.Name] = i
		}
	}
	for i, item := range in.Workloads {
		if item.Job == nil && item.Workload == nil {
			continue // a job of no group: the agent makes no Workload of it
		}
		if item.Workload != nil && item.Workload.Status.Admission != nil || done(item) || hasWorkload(item, names) {
			continue
		}
		if item.Workload != nil && !workload.IsActive(item.Workload) {
			// The agent schedules no deactivated Workload.
			rows[i] = &Result{Name: item.Workload.Name, Namespace: item.Workload.Namespace, source: item.Source,
				Reason: "deactivated (spec.active: false): not admitted until it is active again"}
			continue
		}
		p, r, err := prepare(in, st, item, opts)
		if err != nil {
			// As the agent: an invalid job is marked so and the others
			// are placed.
			if r, ok := invalidResult(r, err); ok {
				rows[i] = &r
				continue
			}
			return nil, err
		}
		if p == nil {
			rows[i] = &r
			continue
		}
		p.row = i
		t := turnOf(p)
		t.Items = append(t.Items, p)
	}
	// Admission fair sharing: the usage of a workload's LocalQueue, as its
	// status says, and what the simulation admitted from it.
	afs := queue.NewAdmissionFairSharing(in.AdmissionFairSharing)
	lqUsage := afs.NewPass(func(key types.NamespacedName) *strata.LocalQueue {
		return in.LocalQueues[key.Namespace+"/"+key.Name]
	}, queue.Penalties{})
	if afs.On() {
		st.afs, st.lqUsage = afs, lqUsage
	}
	order := func(t *queue.Turn[*pendingItem]) {
		if afs.Orders(t.Queue) {
			slices.SortStableFunc(t.Items, func(a, b *pendingItem) int { return lqUsage.Compare(a.wl, b.wl) })
			return
		}
		slices.SortStableFunc(t.Items, func(a, b *pendingItem) int { return queue.Compare(a.wl, b.wl) })
	}
	// Every workload to place: those still waiting after a pass that
	// preempted are served again.
	var all []*pendingItem
	byKey := map[string]*pendingItem{}
	for _, name := range queueNames {
		all = append(all, turns[name].Items...)
		for _, p := range turns[name].Items {
			byKey[p.wl.Namespace+"/"+p.wl.Name] = p
		}
	}
	var placeErr error
	for range maxPasses {
		list := make([]*queue.Turn[*pendingItem], 0, len(queueNames))
		for _, name := range queueNames {
			t := turns[name]
			order(t)
			list = append(list, t)
		}
		victims := st.victims
		queue.Serve(list, func(p *pendingItem) *strata.Workload { return p.wl },
			func(cq *strata.ClusterQueue, p *pendingItem) int {
				if p.cq == nil {
					return 0
				}
				if st.in.FairSharing != nil {
					return st.books.WouldBorrowByUnit(p.cq, p.wl, nil)
				}
				return st.books.WouldBorrowByUnit(p.cq, p.wl, func(flavor string, _ corev1.ResourceList) (int, bool) {
					return st.heightAfterPreempting(flavors[flavor], p.cq, p.wl)
				})
			}, st.fairPick(), st.endRound,
			func(cq *strata.ClusterQueue, p *pendingItem) bool {
				if placeErr != nil {
					return false
				}
				r, err := place(flavors, st, p, opts)
				if err != nil {
					placeErr = err
					return false
				}
				fresh := r.Preempts
				p.underRoundHold = p.underRoundHold || len(st.held) > 0
				r.UnderRoundHold = p.underRoundHold
				if prev := rows[p.row]; prev != nil {
					// Served again in a later pass: what it preempted
					// before is gone all the same, and a victim says so.
					r.Preempts = append(slices.Clone(prev.Preempts), r.Preempts...)
					if p.preemptedBy != "" {
						note := preemptedNote(p.preemptedBy)
						if p.wasRunning {
							note = runningPreemptedNote(p.preemptedBy)
						}
						if r.Admitted {
							r.Reason = note + ", then admitted again"
						} else {
							r.Reason = note + "; " + r.Reason
						}
					}
				}
				rows[p.row] = &r
				for _, v := range fresh {
					// A victim admitted earlier in this simulation goes
					// back to its queue, as on the agent (and Kueue): it
					// waits, and is served again after this pass.
					if q := byKey[v]; q != nil && q != p && rows[q.row] != nil && rows[q.row].Admitted {
						q.preemptedBy, q.wasRunning = p.wl.Namespace+"/"+p.wl.Name, false
						rows[q.row] = &Result{Name: q.wl.Name, Namespace: q.wl.Namespace, source: q.item.Source,
							Preempts: rows[q.row].Preempts, Reason: preemptedNote(q.preemptedBy), UnderRoundHold: q.underRoundHold}
						continue
					}
					// So does one the input showed running.
					i, ok := runningRow[v]
					if !ok || byKey[v] != nil {
						continue
					}
					q, row, err := prepare(in, st, evicted(in.Workloads[i]), opts)
					if err != nil {
						placeErr = err
						return false
					}
					row.Reason = runningPreemptedNote(p.wl.Namespace+"/"+p.wl.Name) + "; " + row.Reason
					if q == nil {
						rows[i] = &row
						continue
					}
					q.row, q.preemptedBy, q.wasRunning = i, p.wl.Namespace+"/"+p.wl.Name, true
					rows[i] = &Result{Name: q.wl.Name, Namespace: q.wl.Namespace, source: q.item.Source, Reason: runningPreemptedNote(q.preemptedBy)}
					all = append(all, q)
					byKey[v] = q
				}
				if r.Admitted {
					noteChecks(&r, p.cq)
				}
				if r.Admitted && afs.Orders(p.cq) {
					// Its LocalQueue's next workloads come after those of
					// queues that now consumed less.
					lqUsage.Admitted(p.wl)
					if t := turns[cq.Name]; t != nil {
						order(t)
					}
				}
				if !r.Admitted && st.retry(p) {
					// Served again first in the next round, as Kueue's next
					// cycle takes a head its cycle skipped.
					t := turns[cq.Name]
					t.Items = append([]*pendingItem{p}, t.Items...)
					return false
				}
				// A head that is not admitted holds a StrictFIFO queue.
				return !r.Admitted
			},
			func(cq *strata.ClusterQueue, behind []*pendingItem) {
				for _, p := range behind {
					rows[p.row] = &Result{Name: p.wl.Name, Namespace: p.wl.Namespace, source: p.item.Source,
						Reason: fmt.Sprintf("waiting in StrictFIFO ClusterQueue %s behind workloads that do not fit yet", cq.Name)}
				}
			})
		if placeErr != nil || st.victims == victims {
			break
		}
		// The victims left capacity and quota that the workloads served
		// before them did not see: as the agent's next pass (and Kueue's
		// requeue of inadmissible workloads when one of their cohort
		// goes), those still waiting are served again, with the victims
		// this simulation had admitted and those the input showed running.
		waiting := 0
		for _, name := range queueNames {
			turns[name].Items = nil
		}
		for _, p := range all {
			if r := rows[p.row]; r != nil && (r.Admitted || r.Invalid) {
				continue
			}
			p.retries, p.skipped = 0, false
			t := turnOf(p)
			t.Items = append(t.Items, p)
			waiting++
		}
		if waiting == 0 {
			break
		}
	}
	if placeErr != nil {
		return nil, placeErr
	}
	results := make([]Result, 0, len(in.Workloads))
	for _, r := range rows {
		if r != nil {
			results = append(results, *r)
		}
	}
	return results, nil
}

// buildFlavors builds the snapshot of every topology-aware flavor of a
// cluster from its Nodes and bound Pods.
func buildFlavors(in *Input) (map[string]*flavorState, error) {
	running := in.runningWorkloads()
	flavors := map[string]*flavorState{}
	for _, f := range in.Flavors {
		if f.Spec.TopologyName == nil {
			continue
		}
		t, ok := in.Topologies[*f.Spec.TopologyName]
		if !ok {
			return nil, fmt.Errorf("ResourceFlavor %q uses Topology %q, which is not in the input", f.Name, *f.Spec.TopologyName)
		}
		levels := make([]string, len(t.Spec.Levels))
		for i, l := range t.Spec.Levels {
			levels[i] = l.NodeLabel
		}
		st := &flavorState{flavor: f, topology: t, snapshot: tas.NewSnapshot(levels, f.Spec.NodeLabels)}
		for i := range in.Nodes {
			st.snapshot.SetNode(tas.NodeFromAPI(&in.Nodes[i], true))
		}
		for i := range in.Pods {
			p := &in.Pods[i]
			if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if w := p.Labels[strata.WorkloadLabel]; w != "" && p.Labels[strata.TASLabel] != "" && running[p.Namespace+"/"+w] {
				// As the agent's cache: a pod of a topology-aware workload
				// counts through its workload's admission while there is one.
				continue
			}
			st.snapshot.AddUsage(p.Spec.NodeName, tas.WithPod(workload.TemplateRequests(&p.Spec)), 1)
		}
		flavors[f.Name] = st
	}
	if len(flavors) == 0 {
		return nil, fmt.Errorf("the input has no ResourceFlavor with a topologyName (and its Topology)")
	}
	return flavors, nil
}

// runningWorkloads are the Workloads of the input that hold an admission
// and did not finish, by namespace/name.
func (in *Input) runningWorkloads() map[string]bool {
	out := map[string]bool{}
	for _, item := range in.Workloads {
		if wl := item.Workload; wl != nil && wl.Status.Admission != nil && !done(item) {
			out[wl.Namespace+"/"+wl.Name] = true
		}
	}
	return out
}

// hasWorkload says whether the input holds the Workload of a job item (a
// dump of a cluster holds both; names are the input's Workloads by
// namespace/name): the Workload stands for it, and the job is not placed
// again.
func hasWorkload(item Item, names map[string]bool) bool {
	if item.Job == nil || item.whole != nil {
		return false
	}
	o := item.Job.Object()
	return names[o.GetNamespace()+"/"+item.Job.Kind().WorkloadName(o.GetName())]
}

// done says whether an item finished, as the agent sees it: a Workload
// Finished (its capacity given back, though its admission stays), or a
// job that completed or failed (it gets no Workload). Neither is placed,
// nor holds capacity.
func done(item Item) bool {
	if item.Workload != nil {
		return meta.IsStatusConditionTrue(item.Workload.Status.Conditions, strata.WorkloadFinished)
	}
	if item.Job == nil {
		return false
	}
	finished, _ := item.Job.Finished()
	return finished
}

// errNotManaged says a job is not Strata's (it has no queue label): its
// Result says so, and it is neither placed nor invalid.
var errNotManaged = errors.New("not managed by Strata")

// toWorkload converts an input item and checks it, as the intake of a
// cluster configured with opts does. Invalid annotations are an
// *invalidError naming the file and object, with res naming the job.
func toWorkload(item Item, queueOptional bool, opts tas.Options) (*strata.Workload, Result, error) {
	wl, errs := item.Workload.DeepCopy(), field.ErrorList(nil)
	if item.Job != nil {
		wl, errs = jobs.WorkloadFor(item.Job)
		errs = workload.AllowPartialSlices(errs, opts.PartialSlices)
		if queueOptional {
			errs = errs.Filter(func(e error) bool {
				var fe *field.Error
				return errors.As(e, &fe) && fe.Type == field.ErrorTypeRequired && strings.HasPrefix(fe.Field, "metadata.labels")
			})
		}
		wl.Name = item.Job.Object().GetName()
		if item.whole != nil {
			wl.Name = fmt.Sprintf("%s-%d", wl.Name, item.group) // the group's leader pod's name
		}
		// Its job is its controller, as on a cluster (topology spreading
		// without selectors counts the workloads of one job).
		owner := item.Job.Object()
		if item.whole != nil {
			owner = item.whole.Object()
		}
		gvk := item.Job.Kind().GroupVersionKind()
		wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
		// Queued when its job was created (a cluster's dump has the
		// time), as the Workload made for it at once is.
		wl.CreationTimestamp = owner.GetCreationTimestamp()
	}
	res := Result{Name: wl.Name, Namespace: wl.Namespace, source: item.Source}
	if item.Job != nil && !queueOptional && wl.Spec.QueueName == "" {
		// Not Strata's: the agent leaves a job without the label alone.
		res.Reason = fmt.Sprintf("no %s label: not Strata's, the agent leaves it alone (it runs as its own controller runs it)", strata.QueueNameLabel)
		return nil, res, errNotManaged
	}
	errs = append(errs, workload.ValidatePodSets(wl.Spec.PodSets, field.NewPath("spec", "podSets"))...)
	if len(errs) > 0 {
		return nil, res, &invalidError{source: item.Source, err: errs.ToAggregate()}
	}
	return wl, res, nil
}

// pendingItem is a workload of the input to place, read and checked.
type pendingItem struct {
	item  Item
	wl    *strata.Workload
	res   Result
	cq    *strata.ClusterQueue // nil when the input has no ClusterQueue
	order []*strata.ResourceFlavor
	row   int
	// retries: how often it was served again in the next round (see
	// runState.retry).
	retries int
	// nominated is the flavor the round nominated it on as it began, and
	// nominatedFit whether its quota fitted there then (runState.nominate);
	// skipped, that an earlier head of the round took that quota.
	nominated             string
	nominatedFit, skipped bool
	// freedInRound: a preemption earlier in the round freed quota of its
	// cohort (runState.nominate).
	freedInRound bool
	// preemptedBy names (namespace/name) the workload whose preemption
	// took it out after this simulation admitted it (or, with wasRunning,
	// after the input showed it running); "" when none did.
	preemptedBy string
	wasRunning  bool
	// underRoundHold: served at least once while the round held quota for
	// a head that found no victims (Result.UnderRoundHold).
	underRoundHold bool
	// replaced: placed again right after a preemption for some of its pod
	// sets (runState.preemptByUnit) whose walk from its first pod set no
	// longer fitted them, as the agent's next pass places it: no
	// nomination, no second preemption.
	replaced bool
}

// preemptedNote is the reason of a workload the simulation admitted and
// then preempted for by (namespace/name).
func preemptedNote(by string) string {
	return fmt.Sprintf("admitted, then preempted to make room for %s", by)
}

// runningPreemptedNote is the reason of a workload the input showed
// running that the simulation preempted for by (namespace/name).
func runningPreemptedNote(by string) string {
	return fmt.Sprintf("was running, preempted to make room for %s", by)
}

// evicted is a running workload of the input as its eviction leaves it:
// back in its queue without an admission (the agent's evictVictim, as
// Kueue's), queued at its creation as before.
func evicted(item Item) Item {
	wl := item.Workload.DeepCopy()
	wl.Status.Admission = nil
	meta.RemoveStatusCondition(&wl.Status.Conditions, strata.WorkloadAdmitted)
	item.Workload = wl
	return item
}

// prepare reads and checks one workload of the input as the agent's
// intake and scheduler do before placing it. It returns the workload to
// place, or nil and its row when it is not placed (not Strata's, its
// queue refuses it or is stopped). Invalid annotations are an error
// naming the file and object.
func prepare(in *Input, st *runState, item Item, opts tas.Options) (*pendingItem, Result, error) {
	// Without ClusterQueues in the input, a queue label is optional.
	wl, res, err := toWorkload(item, len(in.ClusterQueues) == 0, opts)
	if errors.Is(err, errNotManaged) {
		return nil, res, nil
	}
	if err != nil {
		return nil, res, err
	}
	order, err := in.flavorOrder(wl.Namespace, wl.Spec.QueueName)
	if err != nil {
		res.Reason = err.Error()
		return nil, res, nil
	}
	cq := in.clusterQueueOf(wl.Namespace, wl.Spec.QueueName)
	if pins, err := workload.PinnedPodSetFlavors(wl); err != nil || pins != nil {
		// As the agent: each pod set of a hub's copy is tried on the
		// flavor the hub chose for it alone.
		if err != nil {
			res.Reason = err.Error()
			return nil, res, nil
		}
		for _, ps := range wl.Spec.PodSets {
			if !slices.ContainsFunc(order, func(f *strata.ResourceFlavor) bool { return f.Name == pins[ps.Name] }) {
				res.Reason = fmt.Sprintf("the hub placed pod set %s on flavor %q (annotation %s), which is not in the input", ps.Name, pins[ps.Name], strata.PodSetFlavorsAnnotation)
				if cq != nil {
					_, res.Reason = queue.FlavorsFor(cq, wl)
				}
				return nil, res, nil
			}
		}
		order = slices.DeleteFunc(order, func(f *strata.ResourceFlavor) bool {
			return !slices.ContainsFunc(wl.Spec.PodSets, func(ps strata.PodSet) bool { return pins[ps.Name] == f.Name })
		})
	} else if pinned := workload.PinnedFlavor(wl); pinned != "" {
		// As the agent: a hub's copy is tried on the flavor the hub chose
		// alone.
		order = slices.DeleteFunc(order, func(f *strata.ResourceFlavor) bool { return f.Name != pinned })
		if len(order) == 0 {
			res.Reason = fmt.Sprintf("the hub pinned flavor %q (annotation %s), which is not in the input", pinned, strata.FlavorAnnotation)
			if cq != nil {
				_, res.Reason = queue.FlavorsFor(cq, wl)
			}
			return nil, res, nil
		}
	}
	if why := in.namespaceRefused(wl.Namespace, cq); why != "" {
		res.Reason = why
		return nil, res, nil
	}
	if stop := queue.StopOf(in.LocalQueues[wl.Namespace+"/"+wl.Spec.QueueName], cq); stop.Stopped {
		res.Reason = stop.Message
		return nil, res, nil
	}
	if cq != nil && st.books.InCycle(cq.Name) {
		res.Reason = queue.CohortCycleMessage(cq)
		return nil, res, nil
	}
	st.prioritize(wl)
	if wl.CreationTimestamp.IsZero() {
		wl.CreationTimestamp.Time = st.tick() // queued in the input's order
	}
	return &pendingItem{item: item, wl: wl, res: res, cq: cq, order: order}, res, nil
}

// place places one workload on the first flavor of its order where it
// fits, or preempts for it as the agent would; not fitting is a Result
// with the reason.
func place(flavors map[string]*flavorState, st *runState, p *pendingItem, opts tas.Options) (Result, error) {
	item, wl, res, cq, order := p.item, p.wl, p.res, p.cq, p.order
	fung := queue.Fungibility(cq)
	// As the agent: a hub's copy preempts only where the hub chose, and
	// only up to the priority it marked.
	preempts, upTo := false, (*int32)(nil)
	if cq != nil && !p.replaced {
		preempts, upTo = preemption.Allowed(cq, wl)
	}
	var reasons, cannot []string
	var borrowing, preemptable []*flavorState
	quotaShort := map[string]bool{}
	// As Kueue's cycle: a head nominated on a flavor whose quota held it
	// as the round began, and taken by an earlier head of the round, is
	// not walked to another flavor: it waits for the next round.
	if !p.replaced {
		st.nominate(p, func(flavor string) bool {
			fs := flavors[flavor]
			return fs != nil && workload.FlavorRefusal(fs.flavor, wl) == ""
		})
	}
	p.skipped = false
	if p.nominatedFit {
		if fit := st.books.Check(cq.Name, p.nominated, queue.WorkloadRequests(wl), false); fit.Err != nil {
			p.skipped = true
			res.Reason = fmt.Sprintf("flavor %s: %v (taken by a workload admitted before it in this round; tried again in the next)", p.nominated, fit.Err)
			return res, nil
		}
	}
	// As Kueue's cycle, whose heads are nominated as it begins: a head
	// whose quota held it nowhere then is not admitted on what a
	// preemption of the cycle freed; the next round serves it again, with
	// the heads that come after it in the order.
	if p.freedInRound && !p.nominatedFit {
		p.skipped = true
		res.Reason = "its quota held it on no flavor as the round began, and a preemption of this round freed quota (tried again in the next)"
		return res, nil
	}
	// tryFlavor admits wl on a flavor where its quota and topology fit.
	tryFlavor := func(fs *flavorState) bool {
		if why := workload.FlavorRefusal(fs.flavor, wl); why != "" {
			reasons = append(reasons, fmt.Sprintf("flavor %s: %s", fs.flavor.Name, why))
			return false // as the agent: no preemption helps
		}
		if cq != nil {
			if fit := st.books.Check(cq.Name, fs.flavor.Name, queue.WorkloadRequests(wl), false); fit.Err != nil {
				reasons = append(reasons, fmt.Sprintf("flavor %s: %v", fs.flavor.Name, fit.Err))
				if !fit.Never {
					preemptable = append(preemptable, fs)
					quotaShort[fs.flavor.Name] = true
				}
				return false
			}
		}
		podSets, err := st.admit(fs, cq, wl, opts)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("flavor %s: %v", fs.flavor.Name, err))
			if !errors.As(err, new(*workload.TopologyMismatchError)) {
				preemptable = append(preemptable, fs)
			}
			return false
		}
		res.Admitted, res.PodSets = true, podSets
		return true
	}
	searched := map[string]*preemption.Result{}
	searchOn := func(fs *flavorState) (preemption.Result, bool) {
		if r, ok := searched[fs.flavor.Name]; ok {
			return *r, len(r.Victims) > 0
		}
		// As Kueue, which finds a cycle's preemption targets as it
		// nominates its heads: what earlier heads of the round hold
		// (holdRound) does not make it preempt more.
		var r preemption.Result
		st.withoutHolds(func() { r = st.search(fs, cq, wl, upTo, opts) })
		searched[fs.flavor.Name] = &r
		if len(r.Victims) == 0 {
			cannot = append(cannot, fmt.Sprintf("flavor %s: %s", fs.flavor.Name, r.Why))
		}
		return r, len(r.Victims) > 0
	}
	preemptOn := func(fs *flavorState, r preemption.Result) (Result, error) {
		if !st.fitsAfter(cq, fs.flavor.Name, r, queue.WorkloadRequests(wl)) {
			// Kueue skips it for the cycle ("no longer fits after
			// processing another workload") and takes it again in its
			// next; so does the next round here.
			p.skipped = true
			res.Reason = fmt.Sprintf("flavor %s: would preempt %d workload(s), but an earlier head of this round holds quota it needs (tried again in the next round)", fs.flavor.Name, len(r.Victims))
			return res, nil
		}
		victims := st.preempt(fs, r)
		podSets, err := st.admit(fs, cq, wl, opts)
		if err != nil {
			return res, fmt.Errorf("%s: placing after preempting %s: %w", item.Source, strings.Join(victims, ", "), err)
		}
		res.Admitted, res.PodSets, res.Preempts = true, podSets, victims
		return res, nil
	}
	// The flavor nominated as the round began, whose quota still holds
	// it, is taken (Kueue admits a cycle's head on its nomination); the
	// walk below only when the topology refuses it there.
	if fs := flavors[p.nominated]; p.nominatedFit && fs != nil {
		if tryFlavor(fs) {
			return res, nil
		}
	}
	// Each pod set (or PodSet group) on its own flavor when they fit on
	// different flavors and not all on one, as the agent admits them.
	if podSets, ok := st.admitByUnit(flavors, order, cq, wl, opts); ok {
		res.Admitted, res.PodSets = true, podSets
		return res, nil
	}
	// The flavors in order, as the agent walks them (Kueue's flavor
	// assigner; see the agent's scheduler).
	for _, f := range order {
		fs := flavors[f.Name]
		if p.nominatedFit && f.Name == p.nominated && fs != nil {
			continue // tried above
		}
		if fs == nil {
			reasons = append(reasons, fmt.Sprintf("flavor %s: not topology-aware", f.Name))
			continue
		}
		if cq != nil && fung.WhenCanBorrow == strata.FungibilityTryNextFlavor {
			if fit := st.books.Check(cq.Name, f.Name, queue.WorkloadRequests(wl), false); fit.Err == nil && fit.Borrows {
				borrowing = append(borrowing, fs)
				continue
			}
		}
		if tryFlavor(fs) {
			return res, nil
		}
		if preempts && fung.WhenCanPreempt == strata.FungibilityPreempt && len(preemptable) > 0 && preemptable[len(preemptable)-1] == fs {
			if r, ok := searchOn(fs); ok && (!r.Borrows || fung.WhenCanBorrow != strata.FungibilityTryNextFlavor) {
				return preemptOn(fs, r)
			}
		}
	}
	// The lowest borrowing in a cohort tree first, as the agent.
	slices.SortStableFunc(borrowing, func(a, b *flavorState) int {
		need := queue.WorkloadRequests(wl)
		return st.books.BorrowHeight(cq.Name, a.flavor.Name, need) - st.books.BorrowHeight(cq.Name, b.flavor.Name, need)
	})
	for _, fs := range borrowing {
		if tryFlavor(fs) {
			return res, nil
		}
	}
	if preempts {
		// Several pod sets: for those that fit nowhere, on their own
		// flavor, as the agent preempts.
		if podSets, victims, ok := st.preemptByUnit(flavors, order, cq, wl, upTo, opts); ok {
			if podSets == nil {
				// Placed as the agent's next pass places it.
				again := *p
				again.replaced = true
				r, err := place(flavors, st, &again, opts)
				r.Preempts = append(victims, r.Preempts...)
				if err == nil && !r.Admitted {
					r.Reason = fmt.Sprintf("preempted %s for the pod sets that fit nowhere, but walked again from its first pod set they fit no longer: %s", strings.Join(victims, ", "), r.Reason)
				}
				return r, err
			}
			res.Admitted, res.PodSets, res.Preempts = true, podSets, victims
			return res, nil
		}
		var best *flavorState
		var bestResult preemption.Result
		for _, fs := range preemptable {
			if r, ok := searchOn(fs); ok && (best == nil || preemption.Better(r, bestResult, cq.Name)) {
				best, bestResult = fs, r
			}
		}
		if best != nil {
			return preemptOn(best, bestResult)
		}
		if len(cannot) > 0 {
			reasons = append(reasons, "cannot preempt: "+strings.Join(cannot, "; "))
		}
	}
	if podSets, victims, ok := st.admitPartially(flavors, order, cq, wl, preempts, upTo, opts); ok {
		res.Admitted, res.PodSets, res.Preempts = true, podSets, victims
		return res, nil
	}
	if cq != nil && !p.nominatedFit {
		st.holdRound(cq, preemptable, quotaShort, queue.WorkloadRequests(wl))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no flavor to try")
	}
	res.Reason = strings.Join(reasons, "; ")
	return res, nil
}

// podSetResults reports where the pod sets of wl go on flavor.
func podSetResults(wl *strata.Workload, flavor string, assignments []*tas.Assignment) []PodSetResult {
	results := make([]PodSetResult, len(assignments))
	for i, a := range assignments {
		ps := &wl.Spec.PodSets[i]
		if a == nil {
			results[i] = PodSetResult{Name: ps.Name, Flavor: flavor, Count: ps.Count, DelayedTopology: true}
			continue
		}
		results[i] = PodSetResult{Name: ps.Name, Flavor: flavor, Count: ps.Count, Levels: a.Levels}
		for _, d := range a.Domains {
			results[i].Domains = append(results[i].Domains, Domain{Values: d.Values, Count: d.Count})
		}
	}
	return results
}

// noteChecks says, on an admitted row of a ClusterQueue with
// AdmissionChecks for its flavors, that on the cluster its quota is
// reserved and its job starts once those checks are Ready: simulate takes
// them as Ready.
func noteChecks(r *Result, cq *strata.ClusterQueue) {
	var flavors []string
	for _, ps := range r.PodSets {
		if !slices.Contains(flavors, ps.Flavor) {
			flavors = append(flavors, ps.Flavor)
		}
	}
	checks := workload.ChecksOf(cq, flavors)
	if len(checks) == 0 {
		return
	}
	note := fmt.Sprintf("quota reserved; starts once admission checks %s are Ready (taken as Ready here)", strings.Join(checks, ", "))
	if slices.ContainsFunc(r.PodSets, func(ps PodSetResult) bool { return ps.DelayedTopology }) {
		note = fmt.Sprintf("quota reserved without a topology: admission checks %s include a ProvisioningRequest check, "+
			"and its pods are placed on the nodes it asks the cluster autoscaler for once they are provisioned (not simulated)", strings.Join(checks, ", "))
	}
	if r.Reason != "" {
		note = r.Reason + "; " + note
	}
	r.Reason = note
}
