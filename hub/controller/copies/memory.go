package copies

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
)

// memory holds what this process remembers of the dispatches it follows.
// Every entry is a shortcut or a wait that the objects' state can rebuild:
// a restarted hub starts with none and loses nothing but time. Dispatches
// are keyed by dispatch.Key.
type memory struct {
	mu sync.Mutex
	// known is the last dispatch seen per hub Workload, to take back the
	// copy of a Workload deleted meanwhile.
	known map[types.NamespacedName]known
	// created is when the hub created each dispatch's copy.
	created map[string]time.Time
	// sent are the dispatches whose copy this process may have created: a
	// create that succeeded, found it there, or has an unknown outcome.
	sent map[string]bool
	// unknown are the dispatches whose copy's create had an unknown
	// outcome in this process: it may still land on its worker after a
	// read that did not find it.
	unknown map[string]bool
	// seen is when this process first saw each dispatch's copy.
	seen map[string]time.Time
	// pending is, per dispatch, when this process first saw the copy's
	// current Pending spell on its worker (on the hub's clock).
	pending map[string]pendingSighting
	// admissions are the dispatches whose admission this process wrote
	// and the cache does not show yet.
	admissions map[string]bool
	// undoing are the dispatches whose copy was taken back and whose
	// outcome is not recorded yet: a reconcile that meets one records it
	// again instead of creating the copy anew.
	undoing map[string]outcome
	// takenBack is, by hub Workload, the dispatch whose take-back this
	// process recorded and the cache may still show placed: a reconcile
	// that meets it waits for the cache instead of sending the copy
	// again.
	takenBack map[types.NamespacedName]string
	// onboarded is, by "worker/namespace/queue", when this process last
	// made sure of a namespace and LocalQueue on a worker (onboard).
	onboarded map[string]time.Time
}

// known is the dispatch of a hub Workload, as last seen.
type known struct {
	uid             types.UID
	cluster, flavor string
	generation      int64
	job             ref
}

// ref names a hub Workload's job: its kind and key (the copy on the
// worker has the same).
type ref struct {
	kind jobs.Kind
	key  types.NamespacedName
}

func (j ref) String() string {
	return j.kind.GroupVersionKind().Kind + " " + j.key.String()
}

// pendingSighting is a copy's Pending spell as the hub saw it begin: the
// worker's transition time (only compared, never with the hub's clock)
// and the hub's time when it first saw that transition.
type pendingSighting struct {
	workerSince time.Time
	at          time.Time
}

// outcome is how a dispatch ended, as the hub Workload records it.
type outcome struct {
	result strata.PlacementResult
	// reason is the hub Workload's condition reason; cause the attempt's
	// (the worker's refusal reason, when there is one).
	reason, cause, message string
	// requeue, after a refusal for pods not ready in time (cause
	// PodsReadyTimeout), is the hub Workload's requeueState: the worker's
	// count, and its backoff measured from the hub's now (requeueOf).
	requeue *strata.RequeueState
}

func newMemory() *memory {
	return &memory{known: map[types.NamespacedName]known{}, created: map[string]time.Time{}, sent: map[string]bool{}, unknown: map[string]bool{}, seen: map[string]time.Time{},
		pending: map[string]pendingSighting{}, admissions: map[string]bool{}, undoing: map[string]outcome{},
		takenBack: map[types.NamespacedName]string{}, onboarded: map[string]time.Time{}}
}

// track notes the dispatch of Workload key.
func (m *memory) track(key types.NamespacedName, k known) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[key] = k
}

// untrack forgets Workload key's dispatch.
func (m *memory) untrack(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.known, key)
	delete(m.takenBack, key)
}

// knownOf returns the dispatch noted for Workload key.
func (m *memory) knownOf(key types.NamespacedName) (known, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.known[key]
	return k, ok
}

// createdAt returns when this process created dispatch d's copy.
func (m *memory) createdAt(d string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.created[d]
	return t, ok
}

// noteCreated notes that dispatch d's copy was created at t.
func (m *memory) noteCreated(d string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.created[d] = t
}

// noteSent notes that dispatch d's copy may exist on its worker.
func (m *memory) noteSent(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent[d] = true
}

// noteUnknownCreate notes that creating dispatch d's copy had an
// unknown outcome.
func (m *memory) noteUnknownCreate(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unknown[d] = true
}

// createUnknown says whether creating dispatch d's copy had an unknown
// outcome in this process.
func (m *memory) createUnknown(d string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unknown[d]
}

// wasSent says whether dispatch d's copy may exist on its worker by this
// process's doing.
func (m *memory) wasSent(d string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[d]
}

// seenAt returns when this process first saw dispatch d's copy; zero
// when it has not.
func (m *memory) seenAt(d string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[d]
}

// noteSeen notes that dispatch d's copy was first seen at t, unless it
// was seen before.
func (m *memory) noteSeen(d string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[d]; !ok {
		m.seen[d] = t
	}
}

// pendingOf returns the Pending spell of dispatch d's copy this process
// saw begin; ok is false when it saw none.
func (m *memory) pendingOf(d string) (pendingSighting, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pending[d]
	return p, ok
}

// notePending notes that dispatch d's copy began Pending spell p.
func (m *memory) notePending(d string, p pendingSighting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[d] = p
}

// admissionWritten says whether this process wrote dispatch d's admission
// and the cache did not show it yet; shown says the cache shows it now.
func (m *memory) admissionWritten(d string, shown bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	written := m.admissions[d]
	if shown {
		delete(m.admissions, d)
	}
	return written
}

// noteAdmissionWritten notes that this process wrote dispatch d's
// admission.
func (m *memory) noteAdmissionWritten(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admissions[d] = true
}

// undoingOf returns the outcome dispatch d's take-back is to record.
func (m *memory) undoingOf(d string) (outcome, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.undoing[d]
	return o, ok
}

// noteUndoing notes that dispatch d is being taken back, to record o.
func (m *memory) noteUndoing(d string, o outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.undoing[d] = o
}

// undone forgets dispatch d's take-back: its outcome is recorded.
func (m *memory) undone(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.undoing, d)
}

// noteTakenBack notes that the take-back of Workload key's dispatch d is
// recorded.
func (m *memory) noteTakenBack(key types.NamespacedName, d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.takenBack[key] = d
}

// takenBackShown says whether the cache still shows Workload key placed
// with dispatch d, whose take-back this process recorded; d is what the
// cache shows now ("" when not placed). The note is dropped once the
// cache shows anything else.
func (m *memory) takenBackShown(key types.NamespacedName, d string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	taken, ok := m.takenBack[key]
	if !ok {
		return false
	}
	if taken == d {
		return true
	}
	delete(m.takenBack, key)
	return false
}

// forgetCopy forgets what was noted of dispatch d's copy: its creation,
// when it was seen and its admission's write.
func (m *memory) forgetCopy(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.created, d)
	delete(m.seen, d)
	delete(m.pending, d)
	delete(m.admissions, d)
}

// forgetTimers forgets when dispatch d's copy was created and seen: the
// copy was admitted, and no timeout counts from them any more.
func (m *memory) forgetTimers(d string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.created, d)
	delete(m.seen, d)
	delete(m.pending, d)
}

// forgetDispatch forgets everything noted of dispatch d but its Workload.
func (m *memory) forgetDispatch(d string) {
	m.forgetCopy(d)
	m.undone(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sent, d)
	delete(m.unknown, d)
}

// onboardedAt returns when this process last made sure of a namespace and
// LocalQueue (key "worker/namespace/queue").
func (m *memory) onboardedAt(key string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.onboarded[key]
	return t, ok
}

// noteOnboarded notes that this process made sure of key at t.
func (m *memory) noteOnboarded(key string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onboarded[key] = t
}
