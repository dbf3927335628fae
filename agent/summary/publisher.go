// Package summary publishes the agent's CapacitySummary objects: one per
// topology-aware flavor, written promptly after capacity changes but at most
// once per configured interval, re-published unchanged every heartbeat
// interval so that the hub can tell a quiet worker from a silent one, and
// deleted when their flavor is gone or no longer topology-aware.
package summary

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/preemption"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// The Ready condition of a CapacitySummary.
const (
	ConditionReady = "Ready"
	// ReasonPublished: the summary describes the flavor's current capacity.
	ReasonPublished = "Published"
	// ReasonTooLarge: the summary did not fit in summary.maxBytes even
	// coarsened, so it has no domains (and offers no capacity).
	ReasonTooLarge = "TooLarge"
	// ReasonCountsUnderstated: to fit in summary.maxBytes, the summary
	// reports fewer of a counted resource (pods, GPUs, ...) than are free.
	// It never reports more than exists, so the hub may still use it.
	ReasonCountsUnderstated = "CountsUnderstated"
	// ReasonTooManyDispatches: the list of hub dispatches the flavor's
	// capacity accounts for does not fit in summary.maxBytes by itself, so
	// the summary has neither domains nor dispatches (and offers no
	// capacity).
	ReasonTooManyDispatches = "TooManyDispatches"
)

const (
	// statusReserve is the part of the byte budget kept for what the
	// publisher adds to tas's summary: generation, observed time and
	// conditions.
	statusReserve = 1024
	// retryBase and retryMax bound the backoff after a failed write.
	retryBase = time.Second
	retryMax  = 30 * time.Second
)

// Publisher writes CapacitySummary objects. It is a manager Runnable.
type Publisher struct {
	client client.Client
	// summaries reads CapacitySummaries; a controller-runtime cache is
	// started by Start.
	summaries client.Reader
	cache     *cache.Cache
	cfg       configv1beta1.Summary
	clock     clock.Clock
	// informers, when set, feed Start the changes a summary carries that
	// the capacity cache does not: ClusterQueues' specs (queues,
	// preemptible entries) and the priority classes (WithInformers).
	informers crcache.Informers
	// fair: the agent's configuration turns fair sharing on (published in
	// status.fairSharing).
	fair bool

	// flavors is the write backoff of each flavor it publishes, by name;
	// only Start's goroutine (or a test) uses it.
	flavors map[string]*retry
	// gc is the backoff of deleting orphaned summaries.
	gc retry
	// written is, by flavor, the summary as the last write returned it
	// and the resourceVersion that write replaced: until the informer
	// shows the write, its object is the one to write on (an update of
	// the informer's older copy would only conflict).
	written map[string]writtenSummary
}

type writtenSummary struct {
	obj      *strata.CapacitySummary
	replaced string
	// unseen: created by the publisher, not shown by the informer yet.
	unseen bool
}

// retry is the backoff state of something that failed.
type retry struct {
	failures int
	at       time.Time
}

// failed records a failure at now and returns when to retry.
func (r *retry) failed(now time.Time, minInterval, heartbeat time.Duration) time.Time {
	r.failures++
	r.at = now.Add(backoff(r.failures, minInterval, heartbeat))
	return r.at
}

// backoff is the delay before retrying after the given number of
// consecutive failures: doubling from retryBase, at most retryMax and the
// heartbeat interval (so that a failing flavor is retried before its summary
// would have been refreshed anyway), and never under minInterval.
func backoff(failures int, minInterval, heartbeat time.Duration) time.Duration {
	d := retryBase << min(max(failures-1, 0), 10)
	d = min(d, retryMax, heartbeat)
	return max(d, minInterval)
}

// NewPublisher returns a Publisher that writes with c and reads
// CapacitySummaries with summaries. When summaries is a controller-runtime
// cache, Start starts it and waits for it: a cache of its own, not the
// manager's, because every controller waits for all of the manager's
// informers to sync before it starts, and an informer of CapacitySummaries
// (a resource no one else writes, empty on a new cluster) can take over a
// second to sync — admissions would wait for it after every restart.
func NewPublisher(c client.Client, summaries client.Reader, cc *cache.Cache, cfg configv1beta1.Summary, clk clock.Clock) *Publisher {
	return &Publisher{client: c, summaries: summaries, cache: cc, cfg: cfg, clock: clk, flavors: map[string]*retry{}, written: map[string]writtenSummary{}}
}

// WithInformers makes Start publish after a change of a ClusterQueue's
// spec or of a WorkloadPriorityClass or PriorityClass too, not only at the
// next capacity change or heartbeat: the summaries list the queues, what
// their preemption frees, and the classes' values, which the hub counts
// on. Their informers are started by Start (not with the manager's cache:
// an informer of classes, which most clusters do not have, would hold up
// every controller's start until it synced).
func (p *Publisher) WithInformers(informers crcache.Informers) *Publisher {
	p.informers = informers
	return p
}

// WithFairSharing makes the summaries say that the agent preempts by fair
// sharing.
func (p *Publisher) WithFairSharing(on bool) *Publisher {
	p.fair = on
	return p
}

// watchSpecs signals specs after each change WithInformers names.
func (p *Publisher) watchSpecs(ctx context.Context, specs chan<- struct{}) error {
	signal := func() {
		select {
		case specs <- struct{}{}:
		default:
		}
	}
	watches := []struct {
		obj client.Object
		// changed says whether an update matters; nil: every one does.
		changed func(old, cur any) bool
	}{
		// Not its status, which the scheduler writes as it admits.
		{&strata.ClusterQueue{}, func(old, cur any) bool {
			return old.(*strata.ClusterQueue).Generation != cur.(*strata.ClusterQueue).Generation
		}},
		// Which checks are the ProvisioningRequest's (queueUsage): a
		// check made or removed after its queues.
		{&strata.AdmissionCheck{}, func(old, cur any) bool {
			return old.(*strata.AdmissionCheck).Generation != cur.(*strata.AdmissionCheck).Generation
		}},
		{&strata.WorkloadPriorityClass{}, nil},
		{&schedulingv1.PriorityClass{}, nil},
	}
	for _, w := range watches {
		inf, err := p.informers.GetInformer(ctx, w.obj, crcache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching %T for the summaries: %w", w.obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { signal() },
			UpdateFunc: func(old, cur any) {
				if w.changed == nil || w.changed(old, cur) {
					signal()
				}
			},
			DeleteFunc: func(any) { signal() },
		}); err != nil {
			return err
		}
	}
	return nil
}

// NewSummaryCache returns the cache NewPublisher's summaries reads from.
func NewSummaryCache(mgr ctrl.Manager) (crcache.Cache, error) {
	return crcache.New(mgr.GetConfig(), crcache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		// A hub's copies of its workers' summaries, on a hub cluster that
		// is also a worker, are not this agent's to publish or collect.
		ByObject: map[client.Object]crcache.ByObject{&strata.CapacitySummary{}: {Label: summarycopy.Published()}},
	})
}

// NeedLeaderElection is true: only the leader publishes.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Start publishes after every change, no more often than minInterval, and
// again when a summary is due: for its heartbeat, or to retry a failed
// write.
func (p *Publisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("summary")
	changes := p.cache.Subscribe()
	// A summary from a half-filled cache would report capacity that
	// admitted workloads hold.
	if !p.cache.WaitForSync(ctx) {
		return nil
	}
	specs := make(chan struct{}, 1)
	if p.informers != nil {
		if err := p.watchSpecs(ctx, specs); err != nil {
			return err
		}
	}
	if c, ok := p.summaries.(crcache.Cache); ok {
		if _, err := c.GetInformer(ctx, &strata.CapacitySummary{}); err != nil {
			return err
		}
		cacheCtx, stopCache := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- c.Start(cacheCtx) }()
		// The cache stops with the publisher, whichever way it returns.
		defer func() {
			stopCache()
			if err := <-stopped; err != nil {
				log.Error(err, "Capacity summary cache")
			}
		}()
		synced := make(chan bool, 1)
		go func() { synced <- c.WaitForCacheSync(cacheCtx) }()
		select {
		case err := <-stopped:
			stopped <- nil // for the deferred receive: err is returned
			return err
		case ok := <-synced:
			if !ok {
				return nil
			}
		}
	}
	wait := p.cfg.MinInterval.Duration
	for {
		due, err := p.PublishAll(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Publishing capacity summaries", "next", due)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(wait):
		}
		// Both taken: a signal left waiting would make the next wait
		// look busy.
		changed, specChanged := pending(changes), pending(specs)
		busy := changed || specChanged
		wait = spacing(wait, busy, p.cfg.MinInterval.Duration, p.maxInterval())
		if busy {
			continue
		}
		var (
			timer clock.Timer
			fire  <-chan time.Time
		)
		if !due.IsZero() {
			timer = p.clock.NewTimer(due.Sub(p.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-specs:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// pending takes a signal from ch if one is waiting.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// spacing is how long the publisher waits after its next write, having
// waited last after the one before: while changes keep coming (busy: one
// was already waiting when that wait ended) twice as long, up to
// maxInterval; after a quiet spell minInterval again. A backlog being
// admitted changes the capacity at every admission: its summaries are
// written at most every maxInterval, and the first change after it is
// written as soon as before. With no minInterval the spacing grows from
// firstSpacing.
func spacing(last time.Duration, busy bool, minInterval, maxInterval time.Duration) time.Duration {
	if !busy {
		return minInterval
	}
	next := 2 * last
	if minInterval == 0 {
		next = max(next, firstSpacing)
	}
	return max(minInterval, min(next, maxInterval))
}

// firstSpacing is the first wait a busy publisher doubles when
// summary.minInterval is 0.
const firstSpacing = 125 * time.Millisecond

// maxInterval is the configured summary.maxInterval, or minInterval when
// unset (a configuration that was not defaulted).
func (p *Publisher) maxInterval() time.Duration {
	if p.cfg.MaxInterval == nil {
		return p.cfg.MinInterval.Duration
	}
	return p.cfg.MaxInterval.Duration
}

// PublishAll writes the summary of every topology-aware flavor whose content
// changed or whose heartbeat is due, and deletes the summaries (and metric
// series) of flavors that are gone or no longer topology-aware. A flavor
// whose write failed is skipped until its backoff expires. It returns when
// it should run again (the earliest heartbeat or retry; zero when nothing
// is due), and the errors met.
func (p *Publisher) PublishAll(ctx context.Context) (time.Time, error) {
	now := p.clock.Now()
	heartbeat := p.heartbeat()
	var (
		errs []error
		due  time.Time
	)
	names := p.cache.TASFlavors()
	current := make(map[string]bool, len(names))
	for _, name := range names {
		current[name] = true
		fs := p.flavors[name]
		if fs == nil {
			fs = &retry{}
			p.flavors[name] = fs
		}
		if now.Before(fs.at) {
			due = earliest(due, fs.at)
			continue
		}
		observed, err := p.publish(ctx, name, now)
		if err != nil {
			errs = append(errs, err)
			due = earliest(due, fs.failed(now, p.cfg.MinInterval.Duration, heartbeat))
			continue
		}
		*fs = retry{}
		if !observed.IsZero() {
			due = earliest(due, observed.Add(heartbeat))
		}
	}
	for name := range p.flavors {
		if !current[name] {
			delete(p.flavors, name)
			delete(p.written, name)
			forget(name)
		}
	}
	if now.Before(p.gc.at) {
		due = earliest(due, p.gc.at)
	} else if err := p.collect(ctx, current); err != nil {
		errs = append(errs, err)
		due = earliest(due, p.gc.failed(now, p.cfg.MinInterval.Duration, heartbeat))
	} else {
		p.gc = retry{}
	}
	return due, errors.Join(errs...)
}

func (p *Publisher) heartbeat() time.Duration {
	if p.cfg.HeartbeatInterval == nil || p.cfg.HeartbeatInterval.Duration <= 0 {
		return config.DefaultSummaryHeartbeatInterval
	}
	return p.cfg.HeartbeatInterval.Duration
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// publish writes one flavor's summary if it changed or its heartbeat is
// due, and returns the observed time of the published summary (zero when
// the flavor is no longer topology-aware).
func (p *Publisher) publish(ctx context.Context, flavor string, now time.Time) (time.Time, error) {
	var (
		sum    strata.CapacitySummaryStatus
		sumErr error
	)
	maxBytes := int(*p.cfg.MaxBytes)
	// Copy the capacity and its dispatches under the cache's lock,
	// summarize outside it: the scheduler and the informers' handlers wait
	// for that lock.
	cqs, cohorts, listed := p.clusterQueues(ctx)
	var victims *preemption.Victims
	if v := preemption.VictimQueues(cqs, cohorts...); listed && !v.Empty() {
		victims = &v
	}
	captured, ok := p.cache.Capture(flavor, victims)
	if !ok {
		return time.Time{}, nil
	}
	var queues []strata.QueueUsage
	if listed {
		queues = queueUsage(cqs, flavor, captured.Usage, p.provisioningChecks(ctx, cqs))
	}
	var classes []strata.SummaryPriorityClass
	if victims != nil {
		classes = p.priorityClasses(ctx)
	}
	sum, sumErr = summarize(captured.Capacity, captured.Dispatches, queues, classes, maxBytes)
	sum.FairSharing = p.fair
	var cs strata.CapacitySummary
	err := p.summaries.Get(ctx, types.NamespacedName{Name: flavor}, &cs)
	w, wrote := p.written[flavor]
	// unseen: created here, and the informer has not shown it yet.
	unseen := wrote && w.unseen && apierrors.IsNotFound(err)
	switch {
	case unseen, wrote && err == nil && cs.UID == w.obj.UID && cs.ResourceVersion == w.replaced:
		// The informer does not show the last write yet.
		cs = *w.obj.DeepCopy()
		err = nil
	case apierrors.IsNotFound(err):
		cs = strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: flavor}, Spec: strata.CapacitySummarySpec{Flavor: flavor}}
		if err = p.client.Create(ctx, &cs); err == nil {
			unseen = true
			p.written[flavor] = writtenSummary{obj: cs.DeepCopy(), unseen: true}
		}
	}
	if err != nil {
		delete(p.written, flavor)
		return time.Time{}, fmt.Errorf("capacity summary %s: %w", flavor, err)
	}
	want := build(&cs.Status, sum, sumErr, maxBytes, now)
	st, write := next(&cs.Status, &want, now, p.heartbeat())
	if !write {
		return cs.Status.ObservedTime.Time, nil
	}
	// An update, not a merge patch: the domains are most of the object and
	// change as a whole, and a patch would have the API server encode the
	// stored object, merge and decode it again on top of what an update
	// costs (a summary of 5,000 nodes is about 25 KB). resourceVersion
	// guards against a concurrent write as the patch's optimistic lock did.
	cs.Status = st
	replaced := cs.ResourceVersion
	if err := p.client.Status().Update(ctx, &cs); err != nil {
		delete(p.written, flavor)
		return time.Time{}, fmt.Errorf("capacity summary %s: %w", flavor, err)
	}
	p.written[flavor] = writtenSummary{obj: cs.DeepCopy(), replaced: replaced, unseen: unseen}
	record(flavor, &st)
	return now, nil
}

// clusterQueues lists the worker's ClusterQueues; false when they cannot
// be listed. The summary tells the hub what preempting the workloads of
// those whose workloads may be preempted would free
// (preemption.VictimQueues: those that preempt within themselves, and
// those whose cohort has a queue that reclaims), and what every queue
// with a quota on the flavor holds there (queueUsage).
func (p *Publisher) clusterQueues(ctx context.Context) ([]*strata.ClusterQueue, []*strata.Cohort, bool) {
	var list strata.ClusterQueueList
	if err := p.client.List(ctx, &list); err != nil {
		return nil, nil, false
	}
	cqs := make([]*strata.ClusterQueue, len(list.Items))
	for i := range list.Items {
		cqs[i] = &list.Items[i]
	}
	var cohortList strata.CohortList
	if !queue.AnyInCohort(cqs) {
		return cqs, nil, true // the Cohort objects matter to no queue
	}
	if err := p.client.List(ctx, &cohortList); err != nil && !meta.IsNoMatchError(err) {
		return nil, nil, false // without the Cohort CRD, cohorts are flat
	}
	cohorts := make([]*strata.Cohort, len(cohortList.Items))
	for i := range cohortList.Items {
		cohorts[i] = &cohortList.Items[i]
	}
	return cqs, cohorts, true
}

// maxPriorityClasses bounds the summary's priority classes (the CRD's
// maxItems): beyond, none are listed.
const maxPriorityClasses = 64

// priorityClasses are the worker's WorkloadPriorityClasses and
// PriorityClasses with their values, by source and name; nil when they
// cannot be listed or are more than maxPriorityClasses. The hub
// translates a copy's priority into the worker's with them, to compare it
// with the preemptible entries' (the agent's search compares the copy's
// priority here), and takes a class they do not name for one the worker
// lacks: the list is complete or absent.
func (p *Publisher) priorityClasses(ctx context.Context) []strata.SummaryPriorityClass {
	var wpcs strata.WorkloadPriorityClassList
	var pcs schedulingv1.PriorityClassList
	if p.client.List(ctx, &wpcs) != nil || p.client.List(ctx, &pcs) != nil {
		return nil
	}
	out := make([]strata.SummaryPriorityClass, 0, len(wpcs.Items)+len(pcs.Items))
	for i := range wpcs.Items {
		out = append(out, strata.SummaryPriorityClass{Source: strata.WorkloadPriorityClassSource, Name: wpcs.Items[i].Name, Value: wpcs.Items[i].Value})
	}
	for i := range pcs.Items {
		out = append(out, strata.SummaryPriorityClass{Source: strata.PodPriorityClassSource, Name: pcs.Items[i].Name, Value: pcs.Items[i].Value})
	}
	slices.SortFunc(out, func(a, b strata.SummaryPriorityClass) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Name, b.Name))
	})
	if len(out) > maxPriorityClasses {
		return nil
	}
	return out
}

// provisioningChecks are the worker's AdmissionChecks of the
// ProvisioningRequest controller, by name (the checks that delay a
// workload's topology assignment, as the scheduler's placement does); nil
// when no queue names a check, or they cannot be listed.
func (p *Publisher) provisioningChecks(ctx context.Context, cqs []*strata.ClusterQueue) map[string]bool {
	if !slices.ContainsFunc(cqs, func(cq *strata.ClusterQueue) bool { return len(workload.QueueChecks(cq)) > 0 }) {
		return nil
	}
	var list strata.AdmissionCheckList
	if err := p.client.List(ctx, &list); err != nil {
		return nil
	}
	var out map[string]bool
	for i := range list.Items {
		if ac := &list.Items[i]; ac.Spec.ControllerName == strata.ProvisioningRequestControllerName {
			if out == nil {
				out = map[string]bool{}
			}
			out[ac.Name] = true
		}
	}
	return out
}

// maxQueues bounds the summary's queues (the CRD's maxItems): beyond it
// none are listed, and the hub reads the queues' status.
const maxQueues = 1000

// queueUsage is the summary's queues: every ClusterQueue with a quota on
// the flavor, by name, with the quota usage says it holds there (of the
// resources of its quota); nil when there are more than maxQueues.
func queueUsage(cqs []*strata.ClusterQueue, flavor string, usage map[string]corev1.ResourceList, provisioning map[string]bool) []strata.QueueUsage {
	var out []strata.QueueUsage
	for _, cq := range cqs {
		for _, fq := range queue.Flavors(cq) {
			if fq.Name != flavor {
				continue
			}
			qu := strata.QueueUsage{Name: cq.Name, Provisions: slices.ContainsFunc(workload.ChecksOf(cq, []string{flavor}),
				func(check string) bool { return provisioning[check] })}
			for _, rq := range fq.Resources {
				if v, ok := usage[cq.Name][rq.Name]; ok && !v.IsZero() {
					if qu.Usage == nil {
						qu.Usage = corev1.ResourceList{}
					}
					qu.Usage[rq.Name] = v
				}
			}
			out = append(out, qu)
			break
		}
	}
	if len(out) > maxQueues {
		return nil
	}
	slices.SortFunc(out, func(a, b strata.QueueUsage) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// summaryBudget is the budget of tas's summary and the dispatches together:
// maxBytes less what the publisher adds.
func summaryBudget(maxBytes int) int { return max(maxBytes-statusReserve, 0) }

// summarize returns the summary of a flavor's captured capacity with the
// dispatches it accounts for, sorted (in place), the queues' usage and the
// priority classes. The dispatches are listed first: tas's Summarize gets
// the budget they leave. When they alone take
// more than the budget, the error is a *tooManyDispatchesError.
func summarize(capacity *tas.Capacity, dispatches []string, queues []strata.QueueUsage, classes []strata.SummaryPriorityClass, maxBytes int) (strata.CapacitySummaryStatus, error) {
	slices.Sort(dispatches)
	budget := summaryBudget(maxBytes)
	listed := dispatchesSize(dispatches)
	if listed > budget {
		// Its shape still: the hub keeps the flavor's target, unavailable
		// for the reason the Ready condition gives, with its reservations.
		return capacity.Shape(), &tooManyDispatchesError{count: len(dispatches), bytes: listed, budget: budget, maxBytes: maxBytes}
	}
	// The queues' usage takes at most an eighth of what the dispatches
	// leave: beyond, none is listed (the hub then reads the queues'
	// status), so that it never crowds out the capacity.
	queued := 0
	if len(queues) > 0 {
		data, err := json.Marshal(queues)
		if err == nil && len(`,"queues":`)+len(data) <= (budget-listed)/8 {
			queued = len(`,"queues":`) + len(data)
		} else {
			queues = nil
		}
	}
	// The priority classes likewise take at most a sixteenth.
	classed := 0
	if len(classes) > 0 {
		data, err := json.Marshal(classes)
		if err == nil && len(`,"priorityClasses":`)+len(data) <= (budget-listed)/16 {
			classed = len(`,"priorityClasses":`) + len(data)
		} else {
			classes = nil
		}
	}
	sum, err := capacity.Summarize(budget - listed - queued - classed)
	if err != nil {
		if len(dispatches) > 0 {
			err = fmt.Errorf("%w (the %d dispatches listed take %d bytes of it)", err, len(dispatches), listed)
		}
		return sum, err
	}
	if len(dispatches) > 0 {
		sum.Dispatches = dispatches
	}
	sum.Queues = queues
	sum.PriorityClasses = classes
	return sum, nil
}

// dispatchesSize is what a list of dispatches adds to a status's JSON.
func dispatchesSize(dispatches []string) int {
	if len(dispatches) == 0 {
		return 0 // omitted
	}
	data, err := json.Marshal(dispatches)
	if err != nil {
		return math.MaxInt
	}
	return len(`,"dispatches":`) + len(data)
}

// tooManyDispatchesError says that a flavor's dispatches alone do not fit
// in the summary's budget.
type tooManyDispatchesError struct {
	count, bytes, budget, maxBytes int
}

func (e *tooManyDispatchesError) Error() string {
	return fmt.Sprintf("the %d dispatches the flavor's capacity accounts for need %d bytes, more than the %d bytes summary.maxBytes (%d bytes) leaves for the summary",
		e.count, e.bytes, e.budget, e.maxBytes)
}

// build returns the status to publish for a flavor whose summary is sum
// (and sumErr, from summarize), with old's generation and observed time and
// an updated Ready condition. Its JSON never exceeds a valid maxBytes (at
// least 4096): a summary that does not fit even coarsened is replaced by
// one without domains or dispatches, Ready=False with reason TooLarge, or
// TooManyDispatches when the dispatches alone do not fit.
func build(old *strata.CapacitySummaryStatus, sum strata.CapacitySummaryStatus, sumErr error, maxBytes int, now time.Time) strata.CapacitySummaryStatus {
	st := sum
	if sumErr == nil {
		ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonPublished, Message: "current capacity of the flavor's nodes"}
		if st.Coarsened {
			ready.Message = fmt.Sprintf("free capacity rounded down to stay within %d bytes: %s", maxBytes, understated(st.Understated))
		}
		if counts := tas.CountsUnderstated(&st); len(counts) > 0 {
			ready.Status, ready.Reason = metav1.ConditionFalse, ReasonCountsUnderstated
			ready.Message = fmt.Sprintf("to stay within summary.maxBytes (%d bytes) the summary reports less than is free: %s; raise summary.maxBytes", maxBytes, understated(st.Understated))
		}
		withMeta(&st, old, ready, now)
		n := size(&st, now)
		if n <= maxBytes {
			return st
		}
		sumErr = fmt.Errorf("the summary of %d domains needs %d bytes, more than the budget of %d", len(st.Domains), n, maxBytes)
	}
	ready := metav1.Condition{
		Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonTooLarge,
		Message: fmt.Sprintf("no domains published, the summary does not fit in summary.maxBytes (%d bytes): %v", maxBytes, sumErr),
	}
	if errors.As(sumErr, new(*tooManyDispatchesError)) {
		ready.Reason = ReasonTooManyDispatches
		ready.Message = fmt.Sprintf("no domains or dispatches published: %v; raise summary.maxBytes", sumErr)
	}
	st = strata.CapacitySummaryStatus{Levels: sum.Levels, LeafLevels: sum.LeafLevels, Resources: sum.Resources, Nodes: sum.Nodes}
	withMeta(&st, old, ready, now)
	if size(&st, now) > maxBytes {
		// Levels and resources named by very long label keys.
		st.Levels, st.LeafLevels, st.Resources = nil, 0, nil
	}
	return st
}

// understated names what a summary left out, e.g. "nvidia.com/gpu 12, memory 3Gi".
// At most understatedBytes of it, and the number of the others: the
// message is part of the status's reserve (statusReserve), which long
// extended resource names could pass; status.understated has them all.
func understated(us []strata.UnderstatedResource) string {
	if len(us) == 0 {
		return "nothing left out"
	}
	var b strings.Builder
	for i, u := range us {
		part := fmt.Sprintf("%s %s", u.Name, u.Amount.String())
		if i > 0 && b.Len()+len(part) > understatedBytes {
			fmt.Fprintf(&b, " and %d more (status.understated)", len(us)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(part)
	}
	return b.String()
}

// understatedBytes bounds the list of understated resources in the Ready
// condition's message.
const understatedBytes = 384

// withMeta gives st old's generation and observed time, and the Ready
// condition ready (the only condition the publisher writes), keeping old's
// transition time unless its status changes.
func withMeta(st, old *strata.CapacitySummaryStatus, ready metav1.Condition, now time.Time) {
	st.SummaryGeneration = old.SummaryGeneration
	st.ObservedTime = old.ObservedTime
	st.Conditions = nil
	if c := meta.FindStatusCondition(old.Conditions, ConditionReady); c != nil {
		st.Conditions = []metav1.Condition{*c.DeepCopy()}
	}
	ready.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&st.Conditions, ready)
}

// size is the largest JSON size of st once published: with any generation
// and an observed time.
func size(st *strata.CapacitySummaryStatus, now time.Time) int {
	c := *st
	c.SummaryGeneration = math.MaxInt64
	c.ObservedTime = &metav1.Time{Time: now}
	data, err := json.Marshal(&c)
	if err != nil {
		return math.MaxInt
	}
	return len(data)
}

// next decides whether to write want, a status built on old: a change is
// published with the next generation, and an unchanged summary whose
// observed time is heartbeat old (or unset) is re-published with only its
// observed time moved. It returns the status to write.
func next(old, want *strata.CapacitySummaryStatus, now time.Time, heartbeat time.Duration) (strata.CapacitySummaryStatus, bool) {
	st := *want
	switch {
	case !equality.Semantic.DeepEqual(*old, st):
		st.SummaryGeneration++
	case old.ObservedTime == nil || !now.Before(old.ObservedTime.Add(heartbeat)):
	default:
		return st, false
	}
	st.ObservedTime = &metav1.Time{Time: now}
	return st, true
}

// collect deletes the summaries of flavors that are not topology-aware
// (current lists those that are), once the API objects confirm it: the
// capacity cache may not have caught up with the informers yet.
func (p *Publisher) collect(ctx context.Context, current map[string]bool) error {
	var list strata.CapacitySummaryList
	// Only names are read: no need to copy every summary from the
	// informer's store on every round.
	if err := p.summaries.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing capacity summaries: %w", err)
	}
	var errs []error
	for i := range list.Items {
		cs := &list.Items[i]
		if _, hubCopy := cs.Labels[strata.WorkerClusterLabel]; hubCopy || current[cs.Name] || cs.DeletionTimestamp != nil {
			continue
		}
		tasFlavor, err := p.topologyAware(ctx, cs.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("capacity summary %s: %w", cs.Name, err))
			continue
		}
		if tasFlavor {
			continue // the cache will list it soon
		}
		orphan := &strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: cs.Name, UID: cs.UID}}
		if err := p.client.Delete(ctx, orphan, client.Preconditions{UID: &cs.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting capacity summary %s: %w", cs.Name, err))
			continue
		}
		forget(cs.Name)
	}
	return errors.Join(errs...)
}

// topologyAware says whether the named ResourceFlavor exists and names a
// Topology that exists.
func (p *Publisher) topologyAware(ctx context.Context, name string) (bool, error) {
	var rf strata.ResourceFlavor
	if err := p.client.Get(ctx, types.NamespacedName{Name: name}, &rf); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if rf.Spec.TopologyName == nil {
		return false, nil
	}
	var t strata.Topology
	if err := p.client.Get(ctx, types.NamespacedName{Name: *rf.Spec.TopologyName}, &t); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// record exports a published summary: its size and time, and the free
// capacity per top-level domain.
func record(flavor string, st *strata.CapacitySummaryStatus) {
	if data, err := json.Marshal(st); err == nil {
		metrics.SummaryBytes.WithLabelValues(flavor).Set(float64(len(data)))
	}
	metrics.SummaryTimestamp.WithLabelValues(flavor).Set(float64(st.ObservedTime.Unix()))
	metrics.FreeCapacity.DeletePartialMatch(prometheus.Labels{"flavor": flavor})
	free := map[string][]float64{}
	for _, d := range st.Domains {
		top := "-"
		if len(d.Values) > 0 {
			top = d.Values[0]
		}
		if free[top] == nil {
			free[top] = make([]float64, len(st.Resources))
		}
		for i := 0; i+1 < len(d.Free); i += 2 {
			if int(d.Free[i]) >= len(st.Vectors) {
				continue
			}
			v := st.Vectors[d.Free[i]]
			for r := range min(len(st.Resources), len(v)) {
				free[top][r] += float64(v[r]) / 1000 * float64(d.Free[i+1])
			}
		}
	}
	for top, amounts := range free {
		for r, name := range st.Resources {
			metrics.FreeCapacity.WithLabelValues(flavor, top, string(name)).Set(amounts[r])
		}
	}
}

// forget deletes a flavor's metric series.
func forget(flavor string) {
	metrics.FreeCapacity.DeletePartialMatch(prometheus.Labels{"flavor": flavor})
	metrics.SummaryBytes.DeleteLabelValues(flavor)
	metrics.SummaryTimestamp.DeleteLabelValues(flavor)
}
