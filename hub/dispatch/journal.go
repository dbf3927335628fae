package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/workload"
)

// The dispatch journal is the write-ahead record of the dispatches a pass
// decides (docs/hub.md, "Dispatch contract"). A pass writes its
// decisions as one ConfigMap in the hub's namespace (a page), before any
// of their copies is sent; each decision then reaches its hub Workload's
// status.placement with the next status write the copies controller makes
// of it (the worker's admission, most often), or on its own once it is
// PersistAfter old. A page whose dispatches are all in their Workloads'
// status (or whose Workloads are gone) is deleted. Until then the
// journal's entries are what this process and a restarted one read in
// place of status.placement (Apply): the dispatcher does not decide a
// Workload twice, and the copies controller sends and follows the copy.
//
// One page write per pass instead of one status write per dispatch: with
// a burst of Jobs the hub writes each Workload's status once (its
// admission) instead of twice.

// +kubebuilder:rbac:groups="",namespace=strata-system,resources=configmaps,verbs=create;list;delete

// JournalLabel labels the hub's journal pages with its origin.
const JournalLabel = strata.Prefix + "dispatch-journal"

// journalKey is a page's data key.
const journalKey = "dispatches"

// maxPageEntries bounds a page: a ConfigMap holds at most 1 MiB, an entry
// at most about 2 KiB (its reason and hint are bounded).
const maxPageEntries = 400

// PersistAfter is how long a dispatch may stay in the journal alone
// before the copies controller writes it to its Workload's status without
// waiting for the worker's answer: what `kubectl get workloads` and
// `kubectl strata explain` show of a dispatch lags it by at most this.
const PersistAfter = 3 * time.Second

// JournalEntry is one dispatch in the journal: what the dispatch record
// (RecordDispatch) writes on the Workload, and which Workload.
type JournalEntry struct {
	UID          types.UID        `json:"uid"`
	Namespace    string           `json:"namespace"`
	Name         string           `json:"name"`
	Generation   int64            `json:"generation"`
	Cluster      string           `json:"cluster"`
	Flavor       string           `json:"flavor"`
	Time         metav1.MicroTime `json:"time"`
	Reason       string           `json:"reason,omitempty"`
	PreemptUpTo  *int32           `json:"preemptUpTo,omitempty"`
	TopologyHint string           `json:"topologyHint,omitempty"`
	// PodSetCounts: placed with fewer pods (partial admission).
	PodSetCounts []strata.PodSetCount `json:"podSetCounts,omitempty"`
	// PodSetFlavors: pod sets placed on different flavors.
	PodSetFlavors []strata.PodSetFlavor `json:"podSetFlavors,omitempty"`
}

// Key names the entry's Workload.
func (e *JournalEntry) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
}

// ApplyEntry writes e's dispatch record on wl's status, as the
// dispatcher would have written it when it decided: the placement, the
// attempt, the conditions, Requeued.
func ApplyEntry(wl *strata.Workload, e *JournalEntry) {
	RecordDispatch(&wl.Status, e.Cluster, e.Flavor, e.Reason, e.Time.Time)
	p := wl.Status.Placement
	p.DispatchGeneration = e.Generation
	if n := len(p.Attempts); n > 0 {
		p.Attempts[n-1].DispatchGeneration = e.Generation
	}
	p.PreemptUpTo = e.PreemptUpTo
	p.TopologyHint = e.TopologyHint
	p.PodSetCounts = slices.Clone(e.PodSetCounts)
	RecordSplit(&wl.Status, e.PodSetFlavors)
	workload.Requeue(wl, true, e.Time.Time)
}

// entryOf is the journal entry of a dispatch decided on wl: RecordDispatch
// and the other fields the dispatcher set on its copy of wl, whose status
// now holds the record.
func entryOf(recordedWL *strata.Workload) JournalEntry {
	p := recordedWL.Status.Placement
	e := JournalEntry{UID: recordedWL.UID, Namespace: recordedWL.Namespace, Name: recordedWL.Name, Generation: p.DispatchGeneration,
		Cluster: p.Cluster, Flavor: p.Flavor, PreemptUpTo: p.PreemptUpTo, TopologyHint: p.TopologyHint,
		PodSetCounts: slices.Clone(p.PodSetCounts), PodSetFlavors: slices.Clone(p.PodSetFlavors)}
	if p.DispatchTime != nil {
		e.Time = *p.DispatchTime
	}
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		if a := p.Attempts[i]; a.DispatchGeneration == p.DispatchGeneration && a.Result == strata.PlacementDispatched {
			e.Reason = a.Message
			break
		}
	}
	return e
}

// Journal holds the journal's entries not yet in their Workloads' status.
type Journal struct {
	writer    client.Client
	reader    client.Reader // the API server: a page just written is read back after a restart
	namespace string
	origin    string

	mu      sync.Mutex
	entries map[types.UID]*journalEntry
	// pages counts, per page, its entries still held; a page at 0 is
	// deleted (gone lists pages whose deletion failed, to retry).
	pages map[string]int
	gone  map[string]bool
	// loaded is closed once the pages written before this process
	// started (or became leader) are read.
	loaded chan struct{}
	// notify hears of the Workloads whose dispatch was journalled or
	// loaded: the copies controller, which sends their copies.
	notify func([]types.NamespacedName)
}

type journalEntry struct {
	JournalEntry
	page string
}

// NewJournal returns an empty journal of the hub origin's pages in
// namespace; Load reads what earlier processes wrote.
func NewJournal(writer client.Client, reader client.Reader, namespace, origin string) *Journal {
	return &Journal{writer: writer, reader: reader, namespace: namespace, origin: origin,
		entries: map[types.UID]*journalEntry{}, pages: map[string]int{}, gone: map[string]bool{}, loaded: make(chan struct{})}
}

// OnJournalled sets who hears of journalled and loaded dispatches.
func (j *Journal) OnJournalled(fn func([]types.NamespacedName)) {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.notify = fn
	j.mu.Unlock()
}

// Apply returns wl with the journal's dispatch record applied when the
// journal holds a dispatch of wl newer than its status shows (a copy; wl
// is not changed), and since when that dispatch is held; ok is false
// when it holds none: wl is returned as is.
func (j *Journal) Apply(wl *strata.Workload) (out *strata.Workload, since time.Time, ok bool) {
	entry, ok := j.newer(wl)
	if !ok {
		return wl, time.Time{}, false
	}
	out = wl.DeepCopy()
	ApplyEntry(out, &entry)
	return out, entry.Time.Time, true
}

// ApplyTo is Apply on wl itself (a copy the caller owns).
func (j *Journal) ApplyTo(wl *strata.Workload) (since time.Time, ok bool) {
	entry, ok := j.newer(wl)
	if !ok {
		return time.Time{}, false
	}
	ApplyEntry(wl, &entry)
	return entry.Time.Time, true
}

// newer returns the journal's dispatch of wl when it is newer than wl's
// status shows.
func (j *Journal) newer(wl *strata.Workload) (JournalEntry, bool) {
	if j == nil {
		return JournalEntry{}, false
	}
	j.mu.Lock()
	e, held := j.entries[wl.UID]
	var entry JournalEntry
	if held {
		entry = e.JournalEntry
	}
	j.mu.Unlock()
	if !held || Generation(wl) >= entry.Generation {
		return JournalEntry{}, false
	}
	return entry, true
}

// On returns the Workloads the journal holds a dispatch of to cluster.
func (j *Journal) On(cluster string) []types.NamespacedName {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []types.NamespacedName
	for _, e := range j.entries {
		if e.Cluster == cluster {
			out = append(out, e.Key())
		}
	}
	return out
}

// Held returns the entry the journal holds of Workload uid.
func (j *Journal) Held(uid types.UID) (JournalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[uid]
	if !ok {
		return JournalEntry{}, false
	}
	return e.JournalEntry, true
}

// Write journals entries, in pages of at most maxPageEntries, and returns
// those of the pages that could not be written with the error; the others
// are held once their page is written, and their Workloads notified.
func (j *Journal) Write(ctx context.Context, entries []JournalEntry) (failed []JournalEntry, err error) {
	var errs []error
	for start := 0; start < len(entries); start += maxPageEntries {
		page := entries[start:min(start+maxPageEntries, len(entries))]
		name, werr := j.writePage(ctx, page)
		if werr != nil {
			metrics.HubJournalWriteFailures.Inc()
			failed = append(failed, page...)
			errs = append(errs, werr)
			continue
		}
		keys := make([]types.NamespacedName, 0, len(page))
		j.mu.Lock()
		for i := range page {
			j.holdLocked(name, page[i])
			keys = append(keys, page[i].Key())
		}
		notify := j.notify
		j.mu.Unlock()
		if notify != nil {
			notify(keys)
		}
	}
	return failed, errors.Join(errs...)
}

// holdLocked holds e of page name, in place of an older entry of its
// Workload.
func (j *Journal) holdLocked(name string, e JournalEntry) {
	if old, ok := j.entries[e.UID]; ok {
		if old.Generation >= e.Generation {
			return
		}
		j.releaseLocked(old)
	}
	j.entries[e.UID] = &journalEntry{JournalEntry: e, page: name}
	j.pages[name]++
}

func (j *Journal) releaseLocked(e *journalEntry) {
	delete(j.entries, e.UID)
	j.pages[e.page]--
	if j.pages[e.page] <= 0 {
		delete(j.pages, e.page)
		j.gone[e.page] = true
	}
}

func (j *Journal) writePage(ctx context.Context, entries []JournalEntry) (string, error) {
	data, err := json.Marshal(entries)
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "strata-dispatch-", Namespace: j.namespace,
			Labels: map[string]string{JournalLabel: j.origin}},
		Data: map[string]string{journalKey: string(data)},
	}
	if err := j.writer.Create(ctx, cm); err != nil {
		return "", fmt.Errorf("journalling %d dispatches (ConfigMap in namespace %s): %w", len(entries), j.namespace, err)
	}
	return cm.Name, nil
}

// Forget drops the entry of Workload uid when its status shows
// generation (or a later dispatch), or the Workload is gone (shown < 0).
func (j *Journal) Forget(uid types.UID, shown int64) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if e, ok := j.entries[uid]; ok && (shown < 0 || shown >= e.Generation) {
		j.releaseLocked(e)
	}
}

// Prune deletes the pages whose entries are all dropped, and sets the
// journal's gauges.
func (j *Journal) Prune(ctx context.Context) {
	defer j.gauge()
	j.mu.Lock()
	gone := make([]string, 0, len(j.gone))
	for name := range j.gone {
		gone = append(gone, name)
	}
	j.mu.Unlock()
	for _, name := range gone {
		err := j.writer.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: j.namespace, Name: name}},
			client.Preconditions{}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(2).Info("Deleting a dispatch journal page", "configmap", name, "error", err.Error())
			continue
		}
		j.mu.Lock()
		if _, held := j.pages[name]; !held {
			delete(j.gone, name)
		}
		j.mu.Unlock()
	}
}

// gauge sets the journal's gauges: its dispatches, and its pages held or
// not yet deleted.
func (j *Journal) gauge() {
	j.mu.Lock()
	defer j.mu.Unlock()
	metrics.HubJournalDispatches.Set(float64(len(j.entries)))
	metrics.HubJournalPages.Set(float64(len(j.pages) + len(j.gone)))
}

// Load reads the pages earlier processes of this origin wrote, holds
// their entries and notifies their Workloads. It returns the entries
// read. Until it succeeded once, Loaded is not closed.
func (j *Journal) Load(ctx context.Context) ([]JournalEntry, error) {
	var pages corev1.ConfigMapList
	if err := j.reader.List(ctx, &pages, client.InNamespace(j.namespace), client.MatchingLabels{JournalLabel: j.origin}); err != nil {
		return nil, fmt.Errorf("reading the dispatch journal (ConfigMaps labelled %s=%s in namespace %s): %w", JournalLabel, j.origin, j.namespace, err)
	}
	var all []JournalEntry
	var keys []types.NamespacedName
	j.mu.Lock()
	for i := range pages.Items {
		cm := &pages.Items[i]
		var entries []JournalEntry
		if err := json.Unmarshal([]byte(cm.Data[journalKey]), &entries); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "A dispatch journal page does not decode; deleting it", "configmap", cm.Name)
			j.gone[cm.Name] = true
			continue
		}
		if len(entries) == 0 {
			j.gone[cm.Name] = true
		}
		for _, e := range entries {
			if e.UID == "" || e.Generation <= 0 || e.Cluster == "" {
				continue
			}
			j.holdLocked(cm.Name, e)
			all = append(all, e)
			keys = append(keys, e.Key())
		}
		if j.pages[cm.Name] == 0 {
			j.gone[cm.Name] = true
		}
	}
	notify := j.notify
	select {
	case <-j.loaded:
	default:
		close(j.loaded)
	}
	j.mu.Unlock()
	if notify != nil && len(keys) > 0 {
		notify(keys)
	}
	return all, nil
}

// Loaded is closed once Load succeeded.
func (j *Journal) Loaded() <-chan struct{} {
	return j.loaded
}

// recordedOf is the dispatcher's memory of a journalled entry.
func recordedOf(e JournalEntry) recorded {
	return recorded{generation: e.Generation, cluster: e.Cluster, flavor: e.Flavor, podSetFlavors: slices.Clone(e.PodSetFlavors)}
}
