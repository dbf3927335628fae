package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
)

// The hub reads each worker's Namespaces, LocalQueues and ClusterQueues,
// so that it sends no copy where the worker would refuse it whatever its
// capacity (no namespace, no LocalQueue, a ClusterQueue that does not take
// the namespace), and places such a workload as soon as the worker is
// fixed: a change to one of them wakes the dispatcher. What the hub cannot
// read (an agent chart older than these permissions) it does not judge:
// such a worker is tried, and its refusals back off, as before.

// queuesRecheck is how soon reading a worker's queues is tried again after
// its identity was found not to have the permissions.
var queuesRecheck = 30 * time.Second

// queuesWatch is the cache of a worker's Namespaces, LocalQueues and
// ClusterQueues.
type queuesWatch struct {
	cache  crcache.Cache
	synced bool
	// denied says why the hub may not read them ("" when it may).
	denied string
	// cohorts is the synced cache of the worker's Cohorts, nil until
	// the hub may read them (an agent chart older than Cohorts does not
	// let it, and a worker may lack the CRD: its queues' books are flat
	// until then). A cache of its own: a Cohort list that fails never
	// holds up the queues'.
	cohorts crcache.Cache
}

// queueObjects are what the watch reads on a worker.
func queueObjects() []client.Object {
	return []client.Object{&corev1.Namespace{}, &strata.LocalQueue{}, &strata.ClusterQueue{}}
}

// watchQueues starts reading the worker's queues once its identity may
// (asked with direct, at the connection and every queuesRecheck while it
// may not), and watches them with cfg until ctx ends.
func (f *Fleet) watchQueues(ctx context.Context, name string, r *remote, direct client.Client, cfg *rest.Config) {
	for {
		denied, err := mayReadQueues(ctx, direct)
		f.mu.Lock()
		r.queues.denied = denied
		f.mu.Unlock()
		if err == nil && denied == "" {
			if err = f.startQueues(ctx, name, r, cfg); err == nil {
				go f.watchCohorts(ctx, name, r, direct, cfg)
				return
			}
		}
		next := queuesRecheck
		if err != nil {
			next = kindRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// mayReadQueues lists one of each queue object on the worker: denied says
// which one the hub's identity may not read; err that the worker did not
// answer.
func mayReadQueues(ctx context.Context, c client.Client) (denied string, err error) {
	lists := []client.ObjectList{&corev1.NamespaceList{}, &strata.LocalQueueList{}, &strata.ClusterQueueList{}}
	for _, l := range lists {
		err := c.List(ctx, l, client.Limit(1))
		switch {
		case apierrors.IsForbidden(err), apierrors.IsNotFound(err):
			return fmt.Sprintf("the hub's identity may not list %T there: %v", l, err), nil
		case err != nil:
			return "", err
		}
	}
	return "", nil
}

// mayReadCohorts says whether the hub's identity may list the worker's
// Cohorts (and the worker has them); err that the worker did not answer.
func mayReadCohorts(ctx context.Context, c client.Client) (bool, error) {
	err := c.List(ctx, &strata.CohortList{}, client.Limit(1))
	switch {
	case apierrors.IsForbidden(err), apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// watchCohorts starts reading the worker's Cohorts once its identity may
// and the worker has them (asked at once and every queuesRecheck, so that
// a worker whose agent chart is upgraded later is read then), and wakes
// the listeners when they change.
func (f *Fleet) watchCohorts(ctx context.Context, name string, r *remote, direct client.Client, cfg *rest.Config) {
	for {
		ok, err := mayReadCohorts(ctx, direct)
		if err == nil && ok {
			if err = f.startCohorts(ctx, name, r, cfg); err == nil {
				return
			}
		}
		next := queuesRecheck
		if err != nil {
			next = kindRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// startCohorts starts the cache of the worker's Cohorts; once synced, the
// books read it, and its changes wake the listeners.
func (f *Fleet) startCohorts(ctx context.Context, name string, r *remote, cfg *rest.Config) error {
	c, err := crcache.New(cfg, crcache.Options{Scheme: f.scheme, ByObject: map[client.Object]crcache.ByObject{&strata.Cohort{}: {}},
		ReaderFailOnMissingInformer: true, DefaultTransform: crcache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	var synced atomic.Bool
	wake := func() {
		if !synced.Load() {
			return
		}
		f.mu.Lock()
		listeners := f.listeners
		f.mu.Unlock()
		for _, fn := range listeners {
			fn(name)
		}
	}
	inf, err := c.GetInformer(ctx, &strata.Cohort{}, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if !c.WaitForCacheSync(ctx) {
			return
		}
		f.mu.Lock()
		r.queues.cohorts = c
		f.mu.Unlock()
		synced.Store(true)
		wake()
	}()
	return nil
}

// startQueues starts the cache of the worker's queues; once synced, a
// change to any of them wakes the listeners (the dispatcher).
func (f *Fleet) startQueues(ctx context.Context, name string, r *remote, cfg *rest.Config) error {
	objects := queueObjects()
	byObject := map[client.Object]crcache.ByObject{}
	for _, o := range objects {
		byObject[o] = crcache.ByObject{}
	}
	c, err := crcache.New(cfg, crcache.Options{Scheme: f.scheme, ByObject: byObject, ReaderFailOnMissingInformer: true,
		DefaultTransform: crcache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	changed := func() {
		f.mu.Lock()
		synced := r.queues.synced
		listeners := f.listeners
		f.mu.Unlock()
		if !synced {
			return // the initial list: one wake when synced
		}
		for _, fn := range listeners {
			fn(name)
		}
	}
	for _, o := range objects {
		inf, err := c.GetInformer(ctx, o, crcache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return err
		}
	}
	f.mu.Lock()
	r.queues.cache = c
	f.mu.Unlock()
	go func() { _ = c.Start(ctx) }()
	go func() {
		if !c.WaitForCacheSync(ctx) {
			return
		}
		f.mu.Lock()
		r.queues.synced = true
		f.mu.Unlock()
		changed()
	}()
	return nil
}

// QueueTarget is where a worker's copies of a hub workload are queued:
// the namespace and LocalQueue, and what the hub does for them there.
type QueueTarget struct {
	Namespace, LocalQueue string
	// CreatesNamespace: the hub creates a missing namespace
	// (dispatch.createNamespaces).
	CreatesNamespace bool
	// OnboardingClusterQueue, when set, is the worker's ClusterQueue the
	// hub creates a missing namespace and LocalQueue for (the
	// WorkerCluster's spec.onboarding).
	OnboardingClusterQueue string
}

// QueueRefusal says why the worker would refuse, whatever its capacity,
// a copy queued to t: its reason (queue.Reason* or
// ReasonNamespaceNotFound) and message, both "" when it would not. known
// is false when the hub does not know: the worker's queues are not read
// (yet, or the hub's identity may not read them).
func (f *Fleet) QueueRefusal(name string, t QueueTarget) (reason, message string, known bool) {
	c := f.queuesCache(name)
	if c == nil {
		return "", "", false
	}
	ctx := context.Background()
	ns, err := getOrNil(ctx, c, types.NamespacedName{Name: t.Namespace}, &corev1.Namespace{})
	if err != nil {
		return "", "", false
	}
	lq, err := getOrNil(ctx, c, types.NamespacedName{Namespace: t.Namespace, Name: t.LocalQueue}, &strata.LocalQueue{})
	if err != nil {
		return "", "", false
	}
	cqName := t.OnboardingClusterQueue
	if lq != nil {
		cqName = lq.Spec.ClusterQueue
	}
	var cq *strata.ClusterQueue
	if cqName != "" {
		if cq, err = getOrNil(ctx, c, types.NamespacedName{Name: cqName}, &strata.ClusterQueue{}); err != nil {
			return "", "", false
		}
	}
	reason, message = JudgeQueue(name, t, ns, lq, cq)
	return reason, message, true
}

// LandingQueue returns the worker ClusterQueue a copy queued to t lands
// in (a copy of the cached one). ok is false when the hub does not know:
// it does not read the worker's queues, or there is no such queue
// (QueueRefusal says so).
func (f *Fleet) LandingQueue(name string, t QueueTarget) (cq *strata.ClusterQueue, ok bool) {
	c := f.queuesCache(name)
	if c == nil {
		return nil, false
	}
	landing, err := landingQueue(context.Background(), c, t)
	if err != nil || landing == nil {
		return nil, false
	}
	return landing, true
}

// WorkerBooks returns the quota books of a worker's ClusterQueues (its
// cohorts lend and borrow among them) charged with what their status
// says they hold (chargeStatus); false when the hub does not read
// them. The status is the agent's, written at most once a second per
// queue: copies the hub sent since are not in it.
func (f *Fleet) WorkerBooks(name string) (*queue.Books, bool) {
	c := f.queuesCache(name)
	if c == nil {
		return nil, false
	}
	var list strata.ClusterQueueList
	if err := c.List(context.Background(), &list); err != nil {
		return nil, false
	}
	cqs := make([]*strata.ClusterQueue, len(list.Items))
	for i := range list.Items {
		cqs[i] = &list.Items[i]
	}
	var cohorts []*strata.Cohort
	var cohortCache crcache.Cache
	f.mu.Lock()
	if r := f.remotes[name]; r != nil {
		cohortCache = r.queues.cohorts
	}
	f.mu.Unlock()
	if cohortCache != nil {
		var cl strata.CohortList
		if err := cohortCache.List(context.Background(), &cl); err != nil {
			return nil, false
		}
		for i := range cl.Items {
			cohorts = append(cohorts, &cl.Items[i])
		}
	}
	books := queue.NewBooks(cqs, cohorts...)
	for _, q := range cqs {
		// As the agent: a queue that cannot admit for a missing flavor is
		// out of its cohort (a stopped one is already).
		if c := meta.FindStatusCondition(q.Status.Conditions, "Active"); c != nil && c.Status == metav1.ConditionFalse && c.Reason == strata.QueueFlavorNotReady {
			books.Detach(q.Name)
		}
		chargeStatus(books, q)
	}
	return books, true
}

// chargeStatus charges a worker ClusterQueue's books with what its status
// says it holds: flavorsReservation's totals, which count the quota the
// agent holds for a preemptor while its victims' pods end, where the
// agent writes them; else flavorsUsage (admitted workloads).
func chargeStatus(books *queue.Books, q *strata.ClusterQueue) {
	if len(q.Status.FlavorsReservation) == 0 {
		for _, u := range q.Status.FlavorsUsage {
			books.Charge(q.Name, u.Name, u.Resources, 1)
		}
		return
	}
	for _, f := range q.Status.FlavorsReservation {
		held := corev1.ResourceList{}
		for _, r := range f.Resources {
			held[r.Name] = r.Total
		}
		books.Charge(q.Name, f.Name, held, 1)
	}
}

// queuesCache is the synced cache of a worker's queues; nil when the hub
// does not read them (yet).
func (f *Fleet) queuesCache(name string) crcache.Cache {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.remotes[name]
	if r == nil || !r.queues.synced {
		return nil
	}
	return r.queues.cache
}

// landingQueue is the worker ClusterQueue a copy queued to t lands in
// (its LocalQueue's, or the onboarding one when the hub creates the
// LocalQueue); nil when there is none.
func landingQueue(ctx context.Context, c client.Reader, t QueueTarget) (*strata.ClusterQueue, error) {
	cqName := t.OnboardingClusterQueue
	lq, err := getOrNil(ctx, c, types.NamespacedName{Namespace: t.Namespace, Name: t.LocalQueue}, &strata.LocalQueue{})
	if err != nil {
		return nil, err
	}
	if lq != nil {
		cqName = lq.Spec.ClusterQueue
	}
	if cqName == "" {
		return nil, nil
	}
	return getOrNil(ctx, c, types.NamespacedName{Name: cqName}, &strata.ClusterQueue{})
}

// getOrNil reads an object: nil when it does not exist.
func getOrNil[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, err
	}
	return obj, nil
}

// JudgeQueue says why worker would refuse a copy queued to t, given its
// namespace, the LocalQueue t names and that LocalQueue's ClusterQueue
// (or, when the hub onboards and the LocalQueue does not exist, the
// onboarding ClusterQueue), each nil when it does not exist. Both are ""
// when it would not.
func JudgeQueue(worker string, t QueueTarget, ns *corev1.Namespace, lq *strata.LocalQueue, cq *strata.ClusterQueue) (reason, message string) {
	onboards := t.OnboardingClusterQueue != ""
	if ns == nil {
		switch {
		case !t.CreatesNamespace && !onboards:
			return ReasonNamespaceNotFound, fmt.Sprintf("namespace %s does not exist there", t.Namespace)
		case !onboards:
			return queue.ReasonLocalQueueNotFound, fmt.Sprintf("LocalQueue %s does not exist in namespace %s there (the hub creates the namespace, not the LocalQueue)",
				t.LocalQueue, t.Namespace)
		case cq == nil:
			return queue.ReasonClusterQueueNotFound, fmt.Sprintf("ClusterQueue %s (WorkerCluster %s spec.onboarding) does not exist there", t.OnboardingClusterQueue, worker)
		}
		// Created with the copy, labelled by the hub: its ClusterQueue's
		// namespaceSelector is the worker's admin's to get right.
		if stop := queue.StopOf(nil, cq); stop.Stopped {
			return strata.QueueStopped, stop.Message + " there"
		}
		if why := cohortCycle(cq); why != "" {
			return strata.QueueCohortCycle, why
		}
		if why := checksNotReady(cq); why != "" {
			return strata.QueueAdmissionCheckNotReady, why
		}
		return "", ""
	}
	if lq == nil && onboards {
		// The hub creates it, for the onboarding ClusterQueue.
		lq = &strata.LocalQueue{Spec: strata.LocalQueueSpec{ClusterQueue: t.OnboardingClusterQueue}}
	}
	res := queue.Resolve(t.Namespace, t.LocalQueue, ns.Labels, lq, cq)
	if res.OK() {
		// The agent would mark the copy Inadmissible: the hub places it
		// elsewhere until the queue's stopPolicy is None again.
		if stop := queue.StopOf(lq, cq); stop.Stopped {
			return strata.QueueStopped, stop.Message + " there"
		}
		if why := cohortCycle(cq); why != "" {
			return strata.QueueCohortCycle, why
		}
		if why := checksNotReady(cq); why != "" {
			return strata.QueueAdmissionCheckNotReady, why
		}
	}
	return res.Reason, res.Message
}

// cohortCycle says why a worker's ClusterQueue admits nothing for a cycle
// of Cohort parents, as its agent's status says ("" when it does not).
func cohortCycle(cq *strata.ClusterQueue) string {
	if cq == nil {
		return ""
	}
	if c := meta.FindStatusCondition(cq.Status.Conditions, "Active"); c != nil && c.Status == metav1.ConditionFalse && c.Reason == strata.QueueCohortCycle {
		return queue.CohortCycleMessage(cq) + " there"
	}
	return ""
}

// checksNotReady says why a worker's ClusterQueue admits nothing while an
// AdmissionCheck it names does not exist or is not Active, as its agent's
// status says ("" when it does not).
func checksNotReady(cq *strata.ClusterQueue) string {
	if cq == nil {
		return ""
	}
	if c := meta.FindStatusCondition(cq.Status.Conditions, "Active"); c != nil && c.Status == metav1.ConditionFalse && c.Reason == strata.QueueAdmissionCheckNotReady {
		return c.Message + " there"
	}
	return ""
}

// ReasonNamespaceNotFound is a worker's refusal of a copy whose namespace
// does not exist there.
const ReasonNamespaceNotFound = "NamespaceNotFound"
