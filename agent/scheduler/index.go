package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// workloadIndex is the scheduler's view of the Workloads, kept from the
// informer's events: the pending workloads of each queue and running
// totals of the admitted ones. A pass reads it in time proportional to the
// pending workloads and the queues, not to every workload the cluster
// holds, which a pass per admission would otherwise list and sum again.
type workloadIndex struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]indexed
	// pending by LocalQueue (the namespace and spec.queueName: a pass
	// resolves each to its ClusterQueue); admitted totals by the
	// admission's ClusterQueue.
	pending  map[types.NamespacedName]map[types.NamespacedName]*strata.Workload
	admitted map[string]*queueTotals
	// recheck are workloads whose accounting in the capacity cache the
	// next pass makes sure of: admitted ones the informer delivered, and
	// ones whose admission write failed (the server may have applied it).
	recheck map[types.NamespacedName]struct{}
	// secondPass are the reserved workloads whose delayed topology
	// assignment is due (workload.NeedsSecondPass).
	secondPass map[types.NamespacedName]*strata.Workload
	// resize are the admitted elastic workloads whose pod count changed
	// (workload.ResizeOf).
	resize map[types.NamespacedName]*strata.Workload
	// admissions counts the workloads the informer showed admitted that
	// were not before.
	admissions uint64
	// notReady counts the admitted workloads whose PodsReady condition is
	// not True (waitForPodsReady.blockAdmission).
	notReady int
}

// workloadState is what a pass does with a workload.
type workloadState int

const (
	statePending  workloadState = iota // to schedule
	stateAdmitted                      // counts against its queue
	stateFinished                      // ignored
	stateInvalid                       // the Job cannot be admitted as written: ignored
	stateInactive                      // spec.active false, the user's hold: ignored
)

// indexed is a workload as the informer last showed it; wl is the
// informer's object and is never modified.
type indexed struct {
	wl    *strata.Workload
	state workloadState
}

// queueTotals are the admitted workloads of one ClusterQueue.
type queueTotals struct {
	workloads int32
	// waiting are those of workloads whose quota is reserved while their
	// AdmissionChecks are not all Ready.
	waiting int32
	usage   map[string]corev1.ResourceList // by flavor
	pods    map[string]int32               // by flavor
}

func newWorkloadIndex() *workloadIndex {
	return &workloadIndex{
		entries:  map[types.NamespacedName]indexed{},
		pending:  map[types.NamespacedName]map[types.NamespacedName]*strata.Workload{},
		admitted: map[string]*queueTotals{},
		recheck:  map[types.NamespacedName]struct{}{},

		secondPass: map[types.NamespacedName]*strata.Workload{},
		resize:     map[types.NamespacedName]*strata.Workload{},
	}
}

func stateOf(wl *strata.Workload) workloadState {
	switch {
	case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
		return stateFinished
	case wl.Status.Admission != nil:
		return stateAdmitted
	}
	if _, invalid := wl.Annotations[strata.InvalidAnnotation]; invalid || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid) {
		return stateInvalid
	}
	if !workload.IsActive(wl) || workload.ExecutionExceeded(wl) || !wl.DeletionTimestamp.IsZero() {
		// Marked for its maximum execution time and evicted before its
		// deactivation was written: about to be deactivated, never
		// admitted again in between. Nor is one being deleted (a hub's
		// copy held until its pods are gone: strata.PodsGoneFinalizer).
		return stateInactive
	}
	return statePending
}

// set records the informer's current object of a workload.
func (x *workloadIndex) set(wl *strata.Workload) {
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	wasAdmitted := x.entries[key].state == stateAdmitted
	x.deleteLocked(key)
	e := indexed{wl: wl, state: stateOf(wl)}
	if e.state == stateAdmitted && !wasAdmitted {
		x.admissions++
	}
	x.entries[key] = e
	switch e.state {
	case statePending:
		q := queue.Key(wl)
		if x.pending[q] == nil {
			x.pending[q] = map[types.NamespacedName]*strata.Workload{}
		}
		x.pending[q][key] = wl
	case stateAdmitted:
		a := wl.Status.Admission
		t := x.admitted[a.ClusterQueue]
		if t == nil {
			t = &queueTotals{usage: map[string]corev1.ResourceList{}, pods: map[string]int32{}}
			x.admitted[a.ClusterQueue] = t
		}
		t.workloads++
		if workload.AwaitingChecks(wl) {
			t.waiting++
		}
		if !podsReady(wl) {
			x.notReady++
		}
		for _, psa := range a.PodSetAssignments {
			// Reclaimable pods (finished for good) no longer count.
			r := workload.Reclaimable(wl, psa.Name)
			queue.AddRequests(t.usage, psa.Flavor, queue.LessReclaimable(psa, r))
			t.pods[psa.Flavor] += max(psa.Count-r, 0)
		}
		x.recheck[key] = struct{}{}
		if workload.NeedsSecondPass(wl) {
			x.secondPass[key] = wl
		}
		if _, ok := workload.ResizeOf(wl); ok {
			x.resize[key] = wl
		}
	}
}

// podsReady says whether every pod of an admitted workload is ready or
// succeeded (its PodsReady condition).
func podsReady(wl *strata.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPodsReady)
}

// admittedWhere returns the admitted workloads keep takes (the
// informer's objects: not to be modified), in no order. It reads every
// workload: for the rare pass that drains a queue.
func (x *workloadIndex) admittedWhere(keep func(*strata.Workload) bool) []*strata.Workload {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*strata.Workload
	for _, e := range x.entries {
		if e.state == stateAdmitted && keep(e.wl) {
			out = append(out, e.wl)
		}
	}
	return out
}

// admissionCount is how many times a workload became admitted.
func (x *workloadIndex) admissionCount() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.admissions
}

// delete forgets a deleted workload.
func (x *workloadIndex) delete(key types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteLocked(key)
}

func (x *workloadIndex) deleteLocked(key types.NamespacedName) {
	e, ok := x.entries[key]
	if !ok {
		return
	}
	delete(x.entries, key)
	delete(x.recheck, key)
	delete(x.secondPass, key)
	delete(x.resize, key)
	switch e.state {
	case statePending:
		q := queue.Key(e.wl)
		delete(x.pending[q], key)
		if len(x.pending[q]) == 0 {
			delete(x.pending, q)
		}
	case stateAdmitted:
		a := e.wl.Status.Admission
		t := x.admitted[a.ClusterQueue]
		t.workloads--
		if workload.AwaitingChecks(e.wl) {
			t.waiting--
		}
		if !podsReady(e.wl) {
			x.notReady--
		}
		subUsage(t.usage, e.wl)
		for _, psa := range a.PodSetAssignments {
			if t.pods[psa.Flavor] -= max(psa.Count-workload.Reclaimable(e.wl, psa.Name), 0); t.pods[psa.Flavor] == 0 {
				delete(t.pods, psa.Flavor)
			}
		}
		if t.workloads == 0 {
			delete(x.admitted, a.ClusterQueue)
		}
	}
}

// recheckLater has the next pass make sure of a workload's accounting.
func (x *workloadIndex) recheckLater(key types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.recheck[key] = struct{}{}
}

// indexView is what one pass reads: copies it may change, of one moment.
type indexView struct {
	pending   map[types.NamespacedName][]*strata.Workload // by LocalQueue
	admitted  map[string]int32                            // workloads by queue
	reserving map[string]int32                            // workloads holding quota by queue, admitted or awaiting checks
	usage     map[string]map[string]corev1.ResourceList   // queue -> flavor -> usage
	pods      map[string]int32                            // admitted pods by flavor
	// notReady is the number of admitted workloads whose pods are not
	// all ready.
	notReady int
	// recheck are the admitted workloads to make sure of.
	recheck []*strata.Workload
	// secondPass are the reservations whose delayed topology assignment
	// is due.
	secondPass []*strata.Workload
	// resize are the admitted elastic workloads to resize.
	resize []*strata.Workload
	// asked are the entries of the keys view was asked for; a key
	// missing is a workload that does not exist.
	asked map[types.NamespacedName]indexed
}

// view returns the index as it is now, with the entries of keys, and
// empties the recheck set.
func (x *workloadIndex) view(keys []types.NamespacedName) *indexView {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := &indexView{
		pending:   make(map[types.NamespacedName][]*strata.Workload, len(x.pending)),
		admitted:  make(map[string]int32, len(x.admitted)),
		reserving: make(map[string]int32, len(x.admitted)),
		usage:     make(map[string]map[string]corev1.ResourceList, len(x.admitted)),
		pods:      map[string]int32{},
		asked:     make(map[types.NamespacedName]indexed, len(keys)),
		notReady:  x.notReady,
	}
	for q, wls := range x.pending {
		v.pending[q] = make([]*strata.Workload, 0, len(wls))
		for _, wl := range wls {
			v.pending[q] = append(v.pending[q], wl)
		}
	}
	for q, t := range x.admitted {
		v.admitted[q], v.reserving[q] = t.workloads-t.waiting, t.workloads
		u := make(map[string]corev1.ResourceList, len(t.usage))
		for f, rl := range t.usage {
			u[f] = rl.DeepCopy()
		}
		v.usage[q] = u
		for f, n := range t.pods {
			v.pods[f] += n
		}
	}
	for key := range x.recheck {
		if e, ok := x.entries[key]; ok && e.state == stateAdmitted {
			v.recheck = append(v.recheck, e.wl)
		}
	}
	clear(x.recheck)
	for _, wl := range x.secondPass {
		v.secondPass = append(v.secondPass, wl)
	}
	for _, wl := range x.resize {
		v.resize = append(v.resize, wl)
	}
	for _, key := range keys {
		if e, ok := x.entries[key]; ok {
			v.asked[key] = e
		}
	}
	return v
}

// subUsage takes the resource usage of pod set assignments off a queue's
// usage per flavor; what reaches zero is removed.
func subUsage(usage map[string]corev1.ResourceList, wl *strata.Workload) {
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		rl := usage[psa.Flavor]
		if rl == nil {
			continue
		}
		for name, v := range queue.LessReclaimable(psa, workload.Reclaimable(wl, psa.Name)) {
			sum := rl[name]
			sum.Sub(v)
			if sum.IsZero() {
				delete(rl, name)
			} else {
				rl[name] = sum
			}
		}
		if len(rl) == 0 {
			delete(usage, psa.Flavor)
		}
	}
}
