// Package admitevents records admissions as events, either one per
// admitted workload (Kueue's habit) or one digest per ClusterQueue and
// interval.
//
// An event per admission is one API write per Job on the hot path, on the
// hub and on every worker, for a record the Workload's Admitted condition
// already holds (kubectl strata explain and kubectl describe workload show
// it). The digest keeps a trace of admissions in kubectl get events: one
// event on the ClusterQueue, at most once per interval, saying how many
// workloads it admitted and naming the first of them. Events that report
// something going wrong (refusals, evictions, preemptions, node failures)
// are not affected: they stay one per workload.
package admitevents

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// DefaultInterval is how often a ClusterQueue's digest is recorded at
// most.
const DefaultInterval = 30 * time.Second

// DigestReason is the reason of a ClusterQueue's digest.
const DigestReason = "Admitted"

// named is how many workloads a digest names; the rest are counted.
const named = 5

// Admission is one admitted workload, as an event would report it.
type Admission struct {
	// ClusterQueue admitted it: the digest's object.
	ClusterQueue string
	// Workload is namespace/name, as the digest names it.
	Workload string
	// Regarding and Related are the per-workload event's objects (the Job
	// and its Workload).
	Regarding, Related runtime.Object
	// Reason and Note are the per-workload event's reason and message.
	Reason, Note string
}

// Recorder records admissions in the configured way. Its zero value is
// not usable: use New.
type Recorder struct {
	rec      events.EventRecorder
	mode     configv1beta1.AdmissionEvents
	reason   string
	action   string
	interval time.Duration
	clock    clock.WithTicker

	mu      sync.Mutex
	pending map[string]*digest
}

type digest struct {
	count int
	names []string
	// first is the first admission's related object (its Workload, as
	// its admission was read, with that resourceVersion): the digest's
	// related object.
	// client-go's events library folds an event into the series of an
	// earlier one with the same type, reason, action, regarding and
	// related objects, keeping the earlier note; without an object that
	// differs from digest to digest, every digest of a ClusterQueue after
	// the first would only count up the first one's series and repeat its
	// note.
	first runtime.Object
}

// New returns a Recorder that records admissions with action, one event
// per workload (with the admission's reason) or a digest per ClusterQueue
// (with reason Admitted) as mode says.
func New(rec events.EventRecorder, mode configv1beta1.AdmissionEvents, action string) *Recorder {
	return &Recorder{rec: rec, mode: mode, reason: DigestReason, action: action, interval: DefaultInterval, clock: clock.RealClock{}, pending: map[string]*digest{}}
}

// WithClock replaces the clock that paces the digests (tests).
func (r *Recorder) WithClock(c clock.WithTicker) *Recorder {
	r.clock = c
	return r
}

// Admitted records a: at once, as its own event, or in its ClusterQueue's
// next digest (at once too when it names no ClusterQueue).
func (r *Recorder) Admitted(a Admission) {
	if r.mode == configv1beta1.AdmissionEventsPerWorkload || a.ClusterQueue == "" {
		r.rec.Eventf(a.Regarding, a.Related, corev1.EventTypeNormal, a.Reason, r.action, "%s", a.Note)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.pending[a.ClusterQueue]
	if d == nil {
		d = &digest{first: a.Related}
		r.pending[a.ClusterQueue] = d
	}
	d.count++
	if len(d.names) < named {
		d.names = append(d.names, a.Workload)
	}
}

// NeedLeaderElection is true: the digests follow admissions, which only
// the leader makes.
func (r *Recorder) NeedLeaderElection() bool { return true }

// Start records the digests every interval until ctx ends, and what is
// pending then.
func (r *Recorder) Start(ctx context.Context) error {
	if r.mode == configv1beta1.AdmissionEventsPerWorkload {
		return nil
	}
	t := r.clock.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Flush()
			return nil
		case <-t.C():
			r.Flush()
		}
	}
}

// Flush records every ClusterQueue's pending digest now.
func (r *Recorder) Flush() {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[string]*digest{}
	r.mu.Unlock()
	queues := make([]string, 0, len(pending))
	for q := range pending {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	for _, q := range queues {
		d := pending[q]
		cq := &strata.ClusterQueue{TypeMeta: metav1.TypeMeta{APIVersion: strata.GroupVersion.String(), Kind: "ClusterQueue"}, ObjectMeta: metav1.ObjectMeta{Name: q}}
		r.rec.Eventf(cq, d.first, corev1.EventTypeNormal, r.reason, r.action, "%s", Message(d.count, d.names, r.interval))
	}
}

// Message is a digest's note: how many workloads were admitted within
// interval, naming the first of them.
func Message(count int, names []string, interval time.Duration) string {
	var b strings.Builder
	if count == 1 {
		fmt.Fprintf(&b, "1 workload admitted in the last %s: %s", interval, names[0])
		return b.String()
	}
	fmt.Fprintf(&b, "%d workloads admitted in the last %s: %s", count, interval, strings.Join(names, ", "))
	if rest := count - len(names); rest > 0 {
		fmt.Fprintf(&b, " and %d more", rest)
	}
	return b.String()
}
