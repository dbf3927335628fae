package replay

import (
	"cmp"
	"container/heap"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
)

// GPU is the resource a trace's Jobs ask for.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Policy is how a Job's cluster is chosen.
type Policy string

// The policies Run compares.
const (
	// Compact and Spread are the hub's policies (pkg/placement): every
	// cluster's summary is asked, and the tightest (loosest) domain wins.
	Compact Policy = "compact"
	Spread  Policy = "spread"
	// FirstFit takes the first cluster, in the order given, where the Job
	// fits now: what MultiKueue's incremental dispatcher approximates.
	FirstFit Policy = "first-fit"
	// AnyFit takes a cluster drawn uniformly among those where the Job
	// fits now: what "the first worker whose Kueue admits it wins" amounts
	// to when the Job is sent to every worker at once.
	AnyFit Policy = "any-fit"
	// NoTopology chooses the cluster by free GPUs alone (the most, among
	// those with enough), as a topology-blind fleet scheduler does; the
	// Job then waits there until the cluster's TAS places it.
	NoTopology Policy = "no-topology"
)

// Policies are all the policies, in the order reports show them.
var Policies = []Policy{Compact, Spread, FirstFit, AnyFit, NoTopology}

// ParsePolicies reads a comma-separated list of policies; "all" or ""
// is every one.
func ParsePolicies(s string) ([]Policy, error) {
	if s == "" || s == "all" {
		return Policies, nil
	}
	var out []Policy
	for _, name := range strings.Split(s, ",") {
		p := Policy(strings.TrimSpace(name))
		if !slices.Contains(Policies, p) {
			return nil, fmt.Errorf("unknown policy %q: want some of %s", name, joinPolicies(Policies))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func joinPolicies(ps []Policy) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// Cluster is one flavor of one worker cluster, as its agent summarizes it.
type Cluster struct {
	Name, Flavor, Topology string
	Summary                *strata.CapacitySummaryStatus
}

// Preemption is how a Job that fits nowhere may preempt running Jobs of
// lower priority.
type Preemption string

// The preemption modes Run compares.
const (
	// NoPreemption: a Job waits for capacity to free up.
	NoPreemption Preemption = "none"
	// FirstPreempting preempts on the first cluster, in the order given,
	// where preempting lets the Job in: what "every worker may preempt
	// for its copy, the first admission wins" amounts to.
	FirstPreempting Preemption = "first-cluster"
	// FleetPreemption preempts on the one cluster where it costs least,
	// in the hub's order (docs/placement.md, "Fleet preemption"): fewest
	// victims, then the lowest highest victim priority, then the least
	// GPU time thrown away (GPUs × time the victims had run), then the
	// clusters' order.
	FleetPreemption Preemption = "fleet"
)

// Preemptions are the modes, in the order reports show them.
var Preemptions = []Preemption{NoPreemption, FirstPreempting, FleetPreemption}

// ParsePreemptions reads a comma-separated list of modes; "all" is every
// one, "" none but NoPreemption.
func ParsePreemptions(s string) ([]Preemption, error) {
	switch s {
	case "":
		return []Preemption{NoPreemption}, nil
	case "all":
		return Preemptions, nil
	}
	var out []Preemption
	for _, name := range strings.Split(s, ",") {
		p := Preemption(strings.TrimSpace(name))
		if !slices.Contains(Preemptions, p) {
			return nil, fmt.Errorf("unknown preemption %q: want some of none, first-cluster, fleet", name)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Options tune a replay.
type Options struct {
	// Seed draws AnyFit's choices.
	Seed uint64
	// TAS are the engine's algorithms.
	TAS tas.Options
	// Preemption lets a Job that fits nowhere preempt running Jobs of
	// lower priority (as a ClusterQueue with withinClusterQueue:
	// LowerPriority, on the cluster's whole capacity); "" is none. A
	// preempted Job goes back to the queue and starts again from the
	// beginning when it runs.
	Preemption Preemption
}

// Sample is the fleet's state after the Jobs of one instant started and
// ended.
type Sample struct {
	Time     float64
	UsedGPUs int64
	Queued   int
	// HighQueued are the queued Jobs of a priority above the trace's
	// lowest.
	HighQueued int
}

// Result is what one policy achieved on a trace.
type Result struct {
	Policy     Policy     `json:"policy"`
	Preemption Preemption `json:"preemption"`
	// Jobs in the trace; Started ran; Never did not: they fit no
	// cluster even empty, or (no-topology) waited to the end on a
	// cluster chosen for them where they never fit.
	Jobs    int `json:"jobs"`
	Started int `json:"started"`
	Never   int `json:"never"`
	// MeanWait and P90Wait are in seconds, over the started Jobs and
	// those left waiting (until the replay's end); Makespan runs from the
	// first arrival to the last end.
	MeanWait float64 `json:"meanWaitSeconds"`
	P90Wait  float64 `json:"p90WaitSeconds"`
	Makespan float64 `json:"makespanSeconds"`
	// Utilisation is the time-weighted mean share of the fleet's GPUs in
	// use over the makespan.
	Utilisation float64 `json:"gpuUtilisation"`
	// ArrivalUtilisation is the same from the first arrival to the
	// last, while the trace offers its load: the makespan's tail, when
	// the last long Jobs run alone, does not dilute it.
	ArrivalUtilisation float64 `json:"gpuUtilisationWhileJobsArrive"`
	TotalGPUs          int64   `json:"totalGPUs"`
	// Required counts the Jobs of a required topology;
	// RequiredFragmented those of them that waited at a moment when one
	// cluster had enough GPUs free for them but not in one domain of the
	// level.
	Required           int `json:"required"`
	RequiredFragmented int `json:"requiredWaitedFragmented"`
	// PreferredStarted counts the started Jobs of a preferred topology;
	// PreferredOneDomain those placed in one domain of that level.
	PreferredStarted   int `json:"preferredStarted"`
	PreferredOneDomain int `json:"preferredInOneDomain"`
	// HighPriority counts the Jobs of a priority above the trace's
	// lowest; HighMeanWait and HighP90Wait are their waits, in seconds,
	// as MeanWait and P90Wait (a preempted Job's wait is all the time it
	// spent queued).
	HighPriority int     `json:"highPriority"`
	HighMeanWait float64 `json:"highPriorityMeanWaitSeconds"`
	HighP90Wait  float64 `json:"highPriorityP90WaitSeconds"`
	// Preempted counts preemptions (a Job preempted twice counts twice);
	// LostGPUHours is the GPU time they threw away.
	Preempted    int     `json:"preempted"`
	LostGPUHours float64 `json:"lostGPUHours"`
	// Series is the fleet's state at every instant something changed
	// (in the plot, not in the JSON or YAML report).
	Series []Sample `json:"-"`
}

// job is a trace Job during a replay.
type job struct {
	*Job
	index      int
	wl         *strata.Workload
	shape      string
	level      string // the request's node label, resolved
	bound      int    // NoTopology: the cluster chosen, -1 before
	fragmented bool
	started    bool
	// running: it holds its placement (dec) on target since start; runs
	// counts its starts, so that the end of a preempted run is ignored.
	running bool
	runs    int
	dec     *placement.Decision
	target  int
	start   float64
	// queuedAt is when it last joined the queue; waited sums its spells
	// there.
	queuedAt float64
	waited   float64
}

// running is a started Job: its end and where it holds GPUs.
type running struct {
	end    float64
	key    string
	target int
	gpus   int64
	job    *job
	run    int
}

type runningHeap []running

func (h runningHeap) Len() int { return len(h) }
func (h runningHeap) Less(i, j int) bool {
	return h[i].end < h[j].end || h[i].end == h[j].end && h[i].key < h[j].key
}
func (h runningHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runningHeap) Push(x any)   { *h = append(*h, x.(running)) }
func (h *runningHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run replays jobs over clusters under policy, in simulated time: at every
// instant, ended Jobs give their capacity back and arrived ones join the
// queue, which is then tried in arrival order (best-effort FIFO: a Job
// that does not fit lets the next ones try). A started Job holds its
// placement's capacity on its cluster until it ends.
func Run(clusters []Cluster, trace []Job, policy Policy, opts Options) (*Result, error) {
	if !slices.Contains(Policies, policy) {
		return nil, fmt.Errorf("unknown policy %q: want one of %s", policy, joinPolicies(Policies))
	}
	if opts.Preemption == "" {
		opts.Preemption = NoPreemption
	}
	if !slices.Contains(Preemptions, opts.Preemption) {
		return nil, fmt.Errorf("unknown preemption %q: want one of none, first-cluster, fleet", opts.Preemption)
	}
	if len(clusters) == 0 {
		return nil, fmt.Errorf("no clusters to replay over")
	}
	targets := make([]*placement.Target, len(clusters))
	free := make([]int64, len(clusters))
	levels := map[string]string{}
	res := &Result{Policy: policy, Preemption: opts.Preemption, Jobs: len(trace)}
	for i, c := range clusters {
		t, err := placement.NewTarget(c.Name, c.Flavor, c.Summary)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		t.Topology = c.Topology
		targets[i] = t
		free[i], err = t.Snapshot().Room(nil, tas.Request{PodRequests: corev1.ResourceList{GPU: resource.MustParse("1")}})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		res.TotalGPUs += free[i]
		for _, l := range t.Levels() {
			levels[l], levels[tas.LevelName(l)] = l, l
		}
	}
	if res.TotalGPUs == 0 {
		return nil, fmt.Errorf("the clusters have no free %s", GPU)
	}
	jobs := make([]*job, len(trace))
	lowest := int32(0)
	for i := range trace {
		if i == 0 || trace[i].Priority < lowest {
			lowest = trace[i].Priority
		}
	}
	for i := range trace {
		j := &job{Job: &trace[i], index: i, bound: -1}
		if j.Mode != "" {
			if j.level = levels[j.Level]; j.level == "" {
				return nil, fmt.Errorf("job %s: topology level %q is none of the clusters' levels", j.Name, j.Level)
			}
		}
		j.wl = workloadOf(j)
		j.shape = fmt.Sprintf("%d/%d/%s/%s", j.Pods, j.GPUsPerPod, j.Mode, j.level)
		if j.Mode == Required {
			res.Required++
		}
		if j.Priority > lowest {
			res.HighPriority++
		}
		jobs[i] = j
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Arrival < jobs[b].Arrival })

	kind := configv1beta1.Compact
	if policy == Spread {
		kind = configv1beta1.Spread
	}
	hub := placement.New(kind, opts.TAS, 0)
	// A Job that fits no cluster as the replay starts (its emptiest: the
	// pods of the cluster files never end) never starts: it is counted,
	// and does not wait in the queue.
	initial := make([]*placement.Target, len(clusters))
	for i, c := range clusters {
		initial[i], _ = placement.NewTarget(c.Name, c.Flavor, c.Summary)
		initial[i].Topology = c.Topology
	}
	probe := placement.New(configv1beta1.Compact, opts.TAS, 0)
	fitsAtAll := map[string]bool{}
	never := 0
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0xa11))
	var (
		queue       []*job
		run         runningHeap
		used        int64
		area        float64
		arrivalArea float64
		last        float64
		next        int
		failed      = map[string]bool{}
		// onTarget are the running Jobs of each cluster: the candidates
		// of a preemption there.
		onTarget = make([]map[*job]bool, len(targets))
	)
	for i := range onTarget {
		onTarget[i] = map[*job]bool{}
	}
	if len(jobs) > 0 {
		last = jobs[0].Arrival
	}
	first := last
	// decide returns the decision that starts j now, or nil. A cluster
	// with fewer GPUs free than the Job's is not asked: the engine could
	// only say no.
	eligible := make([]*placement.Target, 0, len(targets))
	decide := func(j *job) *placement.Decision {
		one := func(i int) *placement.Decision {
			if free[i] < j.GPUs() {
				return nil
			}
			if d := hub.Decide(j.wl, nil, targets[i:i+1]); d.Cluster != "" {
				return d
			}
			return nil
		}
		switch policy {
		case Compact, Spread:
			eligible = eligible[:0]
			for i, t := range targets {
				if free[i] >= j.GPUs() {
					eligible = append(eligible, t)
				}
			}
			if len(eligible) == 0 {
				return nil
			}
			if d := hub.Decide(j.wl, nil, eligible); d.Cluster != "" {
				return d
			}
		case FirstFit:
			for i := range targets {
				if d := one(i); d != nil {
					return d
				}
			}
		case AnyFit:
			var fits []int
			for i := range targets {
				if one(i) != nil {
					fits = append(fits, i)
				}
			}
			if len(fits) > 0 {
				return one(fits[rng.IntN(len(fits))])
			}
		case NoTopology:
			if j.bound < 0 {
				best := -1
				for i := range targets {
					if free[i] >= j.GPUs() && (best < 0 || free[i] > free[best]) {
						best = i
					}
				}
				j.bound = best
			}
			if j.bound >= 0 {
				return one(j.bound)
			}
		}
		return nil
	}
	failedPreempt := map[string]bool{}
	var requeued []*job
	fitsOn := func(j *job, i int) *placement.Decision {
		if d := hub.Decide(j.wl, nil, targets[i:i+1]); d.Cluster != "" {
			return d
		}
		return nil
	}
	// preempt finds where j fits once running Jobs of lower priority are
	// preempted: on each cluster the minimal set, as the agent's search
	// makes it (pkg/preemption: candidates of the lowest priority first,
	// the most recently started first among equals, removed until j fits,
	// then every one not needed put back, last removed first); then the
	// cluster by opts.Preemption. The targets are left as they were.
	preempt := func(j *job, now float64) (*preemption, error) {
		var best *preemption
		for i := range targets {
			var cands []*job
			freeable := free[i]
			for r := range onTarget[i] {
				if r.Priority < j.Priority {
					cands = append(cands, r)
					freeable += r.GPUs()
				}
			}
			if freeable < j.GPUs() {
				continue
			}
			slices.SortFunc(cands, func(a, b *job) int {
				if a.Priority != b.Priority {
					return cmp.Compare(a.Priority, b.Priority)
				}
				if a.start != b.start {
					return cmp.Compare(b.start, a.start)
				}
				return cmp.Compare(a.Name, b.Name)
			})
			p, err := victimsOn(targets[i], i, j, cands, fitsOn)
			if err != nil || p == nil {
				if err != nil {
					return nil, err
				}
				continue
			}
			for _, v := range p.victims {
				p.lost += float64(v.GPUs()) * (now - v.start)
				p.top = max(p.top, v.Priority)
			}
			if opts.Preemption == FirstPreempting {
				return p, nil
			}
			if best == nil || p.better(best) {
				best = p
			}
		}
		return best, nil
	}
	for next < len(jobs) || len(run) > 0 {
		now := 0.0
		switch {
		case len(run) == 0:
			now = jobs[next].Arrival
		case next == len(jobs):
			now = run[0].end
		default:
			now = min(jobs[next].Arrival, run[0].end)
		}
		area += float64(used) * (now - last)
		if next < len(jobs) {
			arrivalArea += float64(used) * (now - last)
		}
		last = now
		for len(run) > 0 && run[0].end <= now {
			r := heap.Pop(&run).(running)
			if !r.job.running || r.job.runs != r.run {
				continue // preempted: that run ended then
			}
			r.job.running = false
			delete(onTarget[r.target], r.job)
			targets[r.target].Release(r.key)
			free[r.target] += r.gpus
			used -= r.gpus
			clear(failed)
			clear(failedPreempt)
		}
		for next < len(jobs) && jobs[next].Arrival <= now {
			j := jobs[next]
			next++
			fits, known := fitsAtAll[j.shape]
			if !known {
				fits = probe.Decide(j.wl, nil, initial).Cluster != ""
				fitsAtAll[j.shape] = fits
			}
			if !fits {
				never++
				continue
			}
			j.queuedAt = now
			queue = append(queue, j)
		}
		for _, j := range queue {
			key := j.shape
			if policy == NoTopology {
				key += "@" + strconv.Itoa(j.bound)
			}
			if j.started {
				continue // started by a preemption earlier in this instant's loop
			}
			var d *placement.Decision
			if !failed[key] {
				if d = decide(j); d == nil && (policy != NoTopology || j.bound >= 0) {
					failed[key] = true
				}
			}
			if d == nil && opts.Preemption != NoPreemption && j.Priority > lowest {
				pkey := fmt.Sprintf("%s#%d", key, j.Priority)
				if !failedPreempt[pkey] {
					pre, err := preempt(j, now)
					if err != nil {
						return nil, err
					}
					if pre == nil {
						failedPreempt[pkey] = true
					} else {
						for _, v := range pre.victims {
							targets[pre.target].Release(v.Name)
							delete(onTarget[pre.target], v)
							free[pre.target] += v.GPUs()
							used -= v.GPUs()
							v.running, v.started = false, false
							v.queuedAt = now
							res.Preempted++
							res.LostGPUHours += float64(v.GPUs()) * (now - v.start) / 3600
							if !slices.Contains(queue, v) { // not started in this instant
								requeued = append(requeued, v)
							}
						}
						d = pre.decision
						clear(failed)
					}
				}
			}
			if d == nil {
				markFragmented(j, free)
				continue
			}
			t := slices.IndexFunc(targets, func(t *placement.Target) bool { return t.Cluster == d.Cluster && t.Flavor == d.Flavor })
			if err := d.Reserve(targets, j.Name); err != nil {
				return nil, fmt.Errorf("job %s: %w", j.Name, err)
			}
			j.started, j.running, j.dec, j.target, j.start = true, true, d, t, now
			j.runs++
			j.waited += now - j.queuedAt
			onTarget[t][j] = true
			clear(failedPreempt)
			heap.Push(&run, running{end: now + j.Duration, key: j.Name, target: t, gpus: j.GPUs(), job: j, run: j.runs})
			free[t] -= j.GPUs()
			used += j.GPUs()
			if j.Mode == Preferred {
				res.PreferredStarted++
				if oneDomain(d, targets[t], j.level) {
					res.PreferredOneDomain++
				}
			}
		}
		queue = slices.DeleteFunc(queue, func(j *job) bool { return j.started })
		if len(requeued) > 0 {
			// Preempted Jobs queue again behind those that arrived before
			// them, in arrival order (Kueue keeps a preempted workload's
			// place by its creation time).
			queue = append(queue, requeued...)
			slices.SortStableFunc(queue, func(a, b *job) int { return cmp.Compare(a.Arrival, b.Arrival) })
			requeued = requeued[:0]
		}
		highQueued := 0
		for _, j := range queue {
			if j.Priority > lowest {
				highQueued++
			}
		}
		res.Series = append(res.Series, Sample{Time: now, UsedGPUs: used, Queued: len(queue), HighQueued: highQueued})
	}
	var waits, highWaits []float64
	for _, j := range jobs {
		if !j.started && !slices.Contains(queue, j) {
			continue // never queued: it fits no cluster
		}
		w := j.waited
		if !j.started {
			// Left waiting (no-topology: on a cluster chosen for it where
			// it never fits): it waited until the replay's end.
			w += last - j.queuedAt
		} else {
			res.Started++
		}
		waits = append(waits, w)
		if j.Priority > lowest {
			highWaits = append(highWaits, w)
		}
	}
	res.Never = never + len(queue)
	for _, j := range jobs {
		if j.fragmented {
			res.RequiredFragmented++
		}
	}
	res.Makespan = last - first
	if res.Makespan > 0 {
		res.Utilisation = area / (float64(res.TotalGPUs) * res.Makespan)
	}
	if len(jobs) > 0 {
		if window := jobs[len(jobs)-1].Arrival - first; window > 0 {
			res.ArrivalUtilisation = arrivalArea / (float64(res.TotalGPUs) * window)
		}
	}
	res.MeanWait, res.P90Wait = meanP90(waits)
	res.HighMeanWait, res.HighP90Wait = meanP90(highWaits)
	return res, nil
}

// meanP90 returns the mean and the 90th percentile of waits (sorted in
// place); zeros for none.
func meanP90(waits []float64) (float64, float64) {
	if len(waits) == 0 {
		return 0, 0
	}
	total := 0.0
	for _, w := range waits {
		total += w
	}
	slices.Sort(waits)
	return total / float64(len(waits)), waits[min(len(waits)-1, (len(waits)*9+9)/10-1)]
}

// preemption is where a Job fits once victims, running on target, are
// preempted: decision places it there then.
type preemption struct {
	target   int
	victims  []*job
	decision *placement.Decision
	top      int32   // the highest victim priority
	lost     float64 // GPU-seconds the victims had run
}

// better orders preemptions as the hub does: fewest victims, the lowest
// highest victim priority, the least GPU time thrown away; the clusters'
// order last.
func (p *preemption) better(o *preemption) bool {
	if len(p.victims) != len(o.victims) {
		return len(p.victims) < len(o.victims)
	}
	if p.top != o.top {
		return p.top < o.top
	}
	if p.lost != o.lost {
		return p.lost < o.lost
	}
	return p.target < o.target
}

// victimsOn is the minimal set of cands (in candidate order) whose
// preemption on t (the i-th cluster) lets j in, and the decision that
// places j then; nil when preempting them all does not. t is left as it
// was.
func victimsOn(t *placement.Target, i int, j *job, cands []*job, fitsOn func(*job, int) *placement.Decision) (*preemption, error) {
	targets := []*placement.Target{t}
	var removed []*job
	fits := false
	for _, c := range cands {
		t.Release(c.Name)
		removed = append(removed, c)
		if fitsOn(j, i) != nil {
			fits = true
			break
		}
	}
	restore := func(c *job) error { return c.dec.Reserve(targets, c.Name) }
	if !fits {
		for _, c := range removed {
			if err := restore(c); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	// Put back, last removed first, every one j fits without.
	var needed []*job
	for k := len(removed) - 2; k >= 0; k-- {
		c := removed[k]
		if err := restore(c); err != nil {
			return nil, err
		}
		if fitsOn(j, i) == nil {
			t.Release(c.Name)
			needed = append(needed, c)
		}
	}
	needed = append(needed, removed[len(removed)-1])
	d := fitsOn(j, i)
	for _, c := range needed {
		if err := restore(c); err != nil {
			return nil, err
		}
	}
	if d == nil {
		return nil, fmt.Errorf("job %s: fits on %s once its victims are gone, then not", j.Name, t.Cluster)
	}
	slices.SortFunc(needed, func(a, b *job) int {
		return cmp.Compare(slices.Index(cands, a), slices.Index(cands, b))
	})
	return &preemption{target: i, victims: needed, decision: d}, nil
}

// markFragmented notes that a required Job waits while one cluster has
// the GPUs it needs free, though not in one domain of its level.
func markFragmented(j *job, free []int64) {
	if j.Mode != Required || j.fragmented {
		return
	}
	for _, f := range free {
		if f >= j.GPUs() {
			j.fragmented = true
			return
		}
	}
}

// oneDomain says whether the decision put its Job in one domain of level
// on target t.
func oneDomain(d *placement.Decision, t *placement.Target, level string) bool {
	li := slices.Index(t.Levels(), level)
	for _, c := range d.Candidates {
		if c.Cluster == d.Cluster && c.Flavor == d.Flavor {
			return li >= 0 && c.Level >= li+1
		}
	}
	return false
}

// workloadOf is a Job's Workload: one pod set of its pods, each asking for
// its GPUs, with its topology request.
func workloadOf(j *job) *strata.Workload {
	ps := strata.PodSet{Name: "main", Count: j.Pods, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{GPU: *resource.NewQuantity(j.GPUsPerPod, resource.DecimalSI)}},
	}}}}}
	switch j.Mode {
	case Required:
		ps.TopologyRequest = &strata.PodSetTopologyRequest{Required: ptr.To(j.level)}
	case Preferred:
		ps.TopologyRequest = &strata.PodSetTopologyRequest{Preferred: ptr.To(j.level)}
	}
	wl := &strata.Workload{Spec: strata.WorkloadSpec{QueueName: "replay", PodSets: []strata.PodSet{ps}}}
	wl.Name = j.Name
	return wl
}

// WriteTable writes one line per result: waits, makespan, utilisation,
// and the topology shares; when the trace has priorities, the preemption
// mode, the high-priority Jobs' waits, the preemptions and the GPU time
// they threw away.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	high := slices.ContainsFunc(results, func(r *Result) bool { return r.HighPriority > 0 })
	header := "POLICY\tSTARTED\tNEVER\tMEAN WAIT\tP90 WAIT\tMAKESPAN\tGPU UTIL\tWHILE JOBS ARRIVE\tREQUIRED WAITED FRAGMENTED\tPREFERRED IN ONE DOMAIN"
	if high {
		header = "POLICY\tPREEMPTION\tHIGH-PRIORITY MEAN WAIT\tHIGH-PRIORITY P90 WAIT\tPREEMPTED\tGPU-HOURS LOST\t" + strings.TrimPrefix(header, "POLICY\t")
	}
	fmt.Fprintln(tw, header)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t", r.Policy)
		if high {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t", r.Preemption, duration(r.HighMeanWait), duration(r.HighP90Wait), r.Preempted, r.LostGPUHours)
		}
		fmt.Fprintf(tw, "%d/%d\t%d\t%s\t%s\t%s\t%.1f%%\t%.1f%%\t%s\t%s\n", r.Started, r.Jobs, r.Never,
			duration(r.MeanWait), duration(r.P90Wait), duration(r.Makespan), 100*r.Utilisation, 100*r.ArrivalUtilisation,
			share(r.RequiredFragmented, r.Required), share(r.PreferredOneDomain, r.PreferredStarted))
	}
	return tw.Flush()
}

func duration(seconds float64) string {
	return (time.Duration(seconds) * time.Second).Round(time.Second).String()
}

func share(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(n)/float64(of), n, of)
}
