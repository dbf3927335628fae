package dispatch

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// index is what a pass reads of the hub's Workloads and jobs, kept from
// their informers' events rather than listed and copied each pass: an
// entry per Workload that has not finished (by UID) with what a pass
// reads of it worked out once per change, and the jobs of the served
// kinds (by UID). A pass over tens of thousands of waiting Workloads
// reads these small records, not the Workloads: most of them wait for
// the same reason as in the pass before. It holds the informers'
// objects: read them only.
type index struct {
	mu        sync.Mutex
	workloads map[types.UID]*entry
	jobs      map[types.UID]*jobEntry
	// kinds are those whose informer feeds jobs.
	kinds map[schema.GroupVersionKind]bool
	// shared holds one copy of each shape and request total the entries
	// have: a backlog of 50,000 Workloads has a few dozen of each.
	shared map[string]sharedShape
	// synced says whether each handler has seen its informer's initial
	// list; a pass before that would take missing Workloads for gone.
	synced []func() bool
}

// entry is what a pass reads of a Workload.
type entry struct {
	wl  *strata.Workload
	uid types.UID
	// namespace, name, priority and queuedAt order the queues (queue.Compare).
	namespace, name string
	priority        int32
	queuedAt        time.Time
	localQueue      types.NamespacedName
	deleting        bool
	invalid         bool
	inactive        bool
	// outdated: evicted because its job's pod sets changed, its spec not
	// brought up to date yet (workload.OutdatedByJob).
	outdated bool
	// owner is the UID of the Workload's hub job; kind is its kind (nil when
	// it has no controller of a hub kind).
	owner types.UID
	kind  jobs.Kind
	// placed: dispatched to cluster and flavor now; generation is the
	// last dispatch generation.
	placed          bool
	cluster, flavor string
	generation      int64
	// attempts: the Workload has placement attempts (backoffs may apply).
	attempts bool
	// specGeneration, shape, need and needKey are the pod sets' shape
	// (placement.Shape) and requests in all (queue.WorkloadRequests),
	// worked out again only when the spec changes.
	specGeneration int64
	shape          string
	need           corev1.ResourceList
	needKey        string
	// waitingAs is the Workload's Admitted=False reason and meaning, {}
	// when it has none.
	waitingAs written
}

// sharedShape is a shape and request total the index keeps one copy of.
type sharedShape struct {
	shape   string
	need    corev1.ResourceList
	needKey string
}

// maxShared bounds the shapes the index shares; past it, it starts over
// (the entries keep theirs).
const maxShared = 4096

// newEntry works out wl's entry; the shape and requests of prev (the
// entry of the Workload's previous version, or nil) are kept when its
// spec did not change.
func newEntry(wl *strata.Workload, prev *entry) *entry {
	e := &entry{wl: wl, uid: wl.UID, namespace: wl.Namespace, name: wl.Name, priority: queue.Priority(wl), queuedAt: queue.QueuedAt(wl),
		localQueue: queue.Key(wl), deleting: !wl.DeletionTimestamp.IsZero(), invalid: wl.Annotations[strata.InvalidAnnotation] != "", inactive: !workload.IsActive(wl), outdated: workload.OutdatedByJob(wl),
		generation: Generation(wl), specGeneration: wl.Generation}
	if owner := metav1.GetControllerOfNoCopy(wl); owner != nil {
		e.owner, e.kind = owner.UID, jobs.KindOf(kinds.Hub, owner)
	}
	e.cluster, e.flavor, _, e.placed = Placed(wl)
	e.attempts = wl.Status.Placement != nil && len(wl.Status.Placement.Attempts) > 0
	if prev != nil && prev.specGeneration == wl.Generation && wl.Generation != 0 {
		e.shape, e.need, e.needKey = prev.shape, prev.need, prev.needKey
	} else {
		e.shape, e.need = placement.Shape(wl), queue.WorkloadRequests(wl)
		e.needKey = resourcesKey(e.need)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionFalse {
		e.waitingAs = written{reason: c.Reason, meaning: workload.WithoutNumbers(c.Message)}
	}
	return e
}

// resourcesKey names a resource list, whatever its order.
func resourcesKey(rl corev1.ResourceList) string {
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(';')
	}
	return b.String()
}

// compareEntries is queue.Compare on entries.
func compareEntries(a, b *entry) int {
	if a.priority != b.priority {
		return -cmp.Compare(a.priority, b.priority)
	}
	if c := a.queuedAt.Compare(b.queuedAt); c != 0 {
		return c
	}
	return queue.CompareKeys(a.namespace, a.name, b.namespace, b.name)
}

// jobEntry is what a pass reads of a hub job.
type jobEntry struct {
	job      jobs.Job
	deleting bool
}

func newIndex() *index {
	return &index{workloads: map[types.UID]*entry{}, jobs: map[types.UID]*jobEntry{}, kinds: map[schema.GroupVersionKind]bool{},
		shared: map[string]sharedShape{}}
}

// live says whether a Workload is one a pass looks at: not finished.
func live(wl *strata.Workload) bool {
	return !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished)
}

// setWorkload records the informer's latest wl.
func (x *index) setWorkload(wl *strata.Workload) {
	if !live(wl) {
		x.deleteWorkload(wl)
		return
	}
	x.mu.Lock()
	prev := x.workloads[wl.UID]
	x.mu.Unlock()
	e := newEntry(wl, prev)
	x.mu.Lock()
	defer x.mu.Unlock()
	if e != prev && (prev == nil || e.shape != prev.shape || e.needKey != prev.needKey) {
		key := e.needKey + "\x00" + e.shape
		if sh, ok := x.shared[key]; ok {
			e.shape, e.need, e.needKey = sh.shape, sh.need, sh.needKey
		} else {
			if len(x.shared) >= maxShared {
				clear(x.shared)
			}
			x.shared[key] = sharedShape{shape: e.shape, need: e.need, needKey: e.needKey}
		}
	}
	x.workloads[wl.UID] = e
}

func (x *index) deleteWorkload(wl *strata.Workload) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.workloads, wl.UID)
}

// list returns the entries of the Workloads that have not finished.
func (x *index) list() []*entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]*entry, 0, len(x.workloads))
	for _, e := range x.workloads {
		out = append(out, e)
	}
	return out
}

func (x *index) setJob(k jobs.Kind, obj client.Object) {
	j, ok := k.Adapt(obj)
	if !ok {
		return
	}
	je := &jobEntry{job: j, deleting: !obj.GetDeletionTimestamp().IsZero()}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.jobs[obj.GetUID()] = je
}

func (x *index) deleteJob(obj client.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.jobs, obj.GetUID())
}

// job returns the hub job of an entry, nil when there is none; known is
// false when no informer of its kind feeds the index.
func (x *index) job(e *entry) (j *jobEntry, known bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.jobs[e.owner], x.kinds[e.kind.GroupVersionKind()]
}

func (x *index) hasSynced() bool {
	for _, s := range x.synced {
		if !s() {
			return false
		}
	}
	return true
}

// WorkloadEvents is the handler the hub's Workload informer feeds the
// dispatcher's index with; every event asks for a pass.
func (d *Dispatcher) WorkloadEvents() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if wl, ok := obj.(*strata.Workload); ok {
				d.index.setWorkload(wl)
			}
			d.Wake()
		},
		UpdateFunc: func(_, obj any) {
			if wl, ok := obj.(*strata.Workload); ok {
				d.index.setWorkload(wl)
			}
			d.Wake()
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if wl, ok := obj.(*strata.Workload); ok {
				d.index.deleteWorkload(wl)
			}
			d.Wake()
		},
	}
}

// JobEvents is the handler the hub's informer of job kind k feeds the
// dispatcher's index with; every event asks for a pass.
func (d *Dispatcher) JobEvents(k jobs.Kind) toolscache.ResourceEventHandler {
	d.index.mu.Lock()
	d.index.kinds[k.GroupVersionKind()] = true
	d.index.mu.Unlock()
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(client.Object); ok {
				d.index.setJob(k, o)
			}
			d.Wake()
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(client.Object); ok {
				d.index.setJob(k, o)
			}
			d.Wake()
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(client.Object); ok {
				d.index.deleteJob(o)
			}
			d.Wake()
		},
	}
}

// Synced adds a handler's HasSynced: no pass runs before every handler
// has seen its informer's initial list.
func (d *Dispatcher) Synced(hasSynced func() bool) {
	d.index.synced = append(d.index.synced, hasSynced)
}
