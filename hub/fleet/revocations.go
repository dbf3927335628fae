package fleet

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Sweep is what the sweep before a renewal found on a worker: the
// dispatches of all this hub's copies there, and those of orphaned copies
// it could not delete (to be revoked instead).
type Sweep struct {
	Present map[string]bool
	Stuck   []string
}

// MaxRevoked bounds the dispatches a fencing Lease lists as revoked; a
// worker with more is not renewed (its agent then stops every copy of the
// hub there, which is safe).
const MaxRevoked = 2000

// renewLock returns the lock a worker's renewals and revocations take.
func (f *Fleet) renewLock(name string) *sync.Mutex {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.renewing[name]
	if l == nil {
		l = &sync.Mutex{}
		f.renewing[name] = l
	}
	return l
}

// Revoke lists dispatch key as revoked on a worker, to be written into its
// fencing Lease by a renewal it asks for at once (not only the next one,
// renewInterval away), so that its agent never runs that copy again; call
// it before placing the workload elsewhere without its copy known gone.
// basis is the last renewal the decision counted from (LastRenewed): false
// when a renewal reached the worker since, and the decision is to be
// taken again (the worker answers). RevocationWritten says when the Lease
// lists it.
func (f *Fleet) Revoke(name, key string, basis time.Time) bool {
	l := f.renewLock(name)
	l.Lock()
	defer l.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.renewed[name]; ok && t.After(basis) {
		return false
	}
	if f.revoked[name] == nil {
		f.revoked[name] = map[string]bool{}
	}
	if _, ok := f.revoked[name][key]; !ok {
		f.revoked[name][key] = false
		if f.revokedAt[name] == nil {
			f.revokedAt[name] = map[string]time.Time{}
		}
		f.revokedAt[name][key] = f.clock.Now()
		f.wakeLocked(name)
	}
	return true
}

// revocationWriteWait is how long RevocationWritten waits at least for
// a renewal to write a revocation. A worker whose renewals keep failing
// while it answers reads (a Lease write refused, the sweep before it
// failing) would otherwise hold the workload for ever; after it, and
// once the worker's agent has certainly fenced the hub's copies (replace
// after the last renewal that may have landed: its agent stops them
// fenceAfter after it), the dispatch is given up as before revocations
// were awaited. The worker's WorkerCluster says why it is not renewed.
const revocationWriteWait = 30 * time.Second

// RevocationWritten says whether a renewal that certainly landed wrote
// dispatch key into the worker's fencing Lease as revoked (or the Lease
// listed it when this process adopted it), or, with fencing Enabled,
// revocationWriteWait passed since it was revoked and replaceAfter since
// the last renewal that may have landed (the agent stopped the copies).
// Without fencing configured there is no Lease to wait for.
func (f *Fleet) RevocationWritten(name, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fencing == nil || f.revoked[name][key] {
		return true
	}
	at, ok := f.revokedAt[name][key]
	if !ok || f.clock.Since(at) < revocationWriteWait || !f.fencing.Enabled {
		// Without a duration on the Lease no agent stops a copy: the
		// revocation is the only thing that keeps it from running.
		return false
	}
	last, renewed := f.renewed[name]
	if !renewed {
		last = f.startedAt
	}
	published, known := f.published[name]
	wait, fenced := ReplaceWait(f.fencing.ReplaceAfter, f.fencing.FenceAfter, published, known)
	return fenced && f.clock.Since(last) >= wait
}

// wakeLocked asks the worker's renewal loop for a renewal now; f.mu held.
func (f *Fleet) wakeLocked(name string) {
	select {
	case f.wakeChanLocked(name) <- struct{}{}:
	default: // one is asked for already
	}
}

// wakeChan is the channel that asks the worker's renewal loop for a
// renewal now.
func (f *Fleet) wakeChan(name string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wakeChanLocked(name)
}

func (f *Fleet) wakeChanLocked(name string) chan struct{} {
	ch := f.wakes[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		f.wakes[name] = ch
	}
	return ch
}

// markWritten records that keys were written into the worker's Lease.
func (f *Fleet) markWritten(name string, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if _, ok := f.revoked[name][k]; ok {
			f.revoked[name][k] = true
			delete(f.revokedAt[name], k)
			f.noteWrittenLocked(name, k)
		}
	}
}

// noteWrittenLocked records when a revocation was first written into the
// worker's Lease (or found there); f.mu held.
func (f *Fleet) noteWrittenLocked(name, key string) {
	if f.writtenAt[name] == nil {
		f.writtenAt[name] = map[string]time.Time{}
	}
	if _, ok := f.writtenAt[name][key]; !ok {
		f.writtenAt[name][key] = f.clock.Now()
	}
}

// revocationHold is how long a revocation written into a worker's Lease
// stays there at least when no sweep ever found a copy of its dispatch: a
// copy whose create had an unknown outcome may still land (a request the
// worker's API server was serving; kube-apiserver's --request-timeout is
// a minute by default), and its agent must find it revoked then. One
// whose copy a sweep found ends once that copy is gone.
const revocationHold = 2 * time.Minute

// Revoked returns the dispatches revoked on a worker, sorted.
func (f *Fleet) Revoked(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.revoked[name]))
	for k := range f.revoked[name] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// settle brings a worker's revocations up to date with a sweep: the stuck
// copies are revoked, and revocations of copies no longer there end once
// written and, when no sweep ever found their copy, held revocationHold.
// One not written yet stays for the renewal that follows: it may be of a
// copy whose create had an unknown outcome (no copy found yet), and
// ending it unwritten would leave the dispatch waiting for a write that
// never comes.
func (f *Fleet) settle(name string, s Sweep) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.revoked[name]
	for _, k := range s.Stuck {
		if set == nil {
			set = map[string]bool{}
			f.revoked[name] = set
		}
		if _, ok := set[k]; !ok {
			set[k] = false // the renewal that follows the sweep writes it
		}
	}
	for k, written := range set {
		if s.Present[k] {
			if f.seen[name] == nil {
				f.seen[name] = map[string]bool{}
			}
			f.seen[name][k] = true
			continue
		}
		if !written {
			continue
		}
		if at, ok := f.writtenAt[name][k]; ok && !f.seen[name][k] && f.clock.Since(at) < revocationHold {
			continue
		}
		delete(set, k)
		delete(f.revokedAt[name], k)
		delete(f.writtenAt[name], k)
		delete(f.seen[name], k)
	}
}

// adoptRevoked adds to a worker's revocations those a fencing Lease's
// RevokedDispatchesAnnotation lists (value).
func (f *Fleet) adoptRevoked(name, value string) {
	if value == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range strings.Split(value, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if f.revoked[name] == nil {
			f.revoked[name] = map[string]bool{}
		}
		f.revoked[name][k] = true // the Lease lists it
		delete(f.revokedAt[name], k)
		f.noteWrittenLocked(name, k)
	}
}

// revokedValue is the RevokedDispatchesAnnotation of a set of keys.
func revokedValue(keys []string) string { return strings.Join(keys, ",") }
