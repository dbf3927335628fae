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
// fencing Lease with the next renewal, so that its agent never runs that
// copy again; call it before placing the workload elsewhere without its
// copy known gone. basis is the last renewal the decision counted from
// (LastRenewed): false when a renewal reached the worker since, and the
// decision is to be taken again (the worker answers).
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
	f.revoked[name][key] = true
	return true
}

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
// copies are revoked, and revocations of copies no longer there end.
func (f *Fleet) settle(name string, s Sweep) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.revoked[name]
	for _, k := range s.Stuck {
		if set == nil {
			set = map[string]bool{}
			f.revoked[name] = set
		}
		set[k] = true
	}
	for k := range set {
		if !s.Present[k] {
			delete(set, k)
		}
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
		f.revoked[name][k] = true
	}
}

// revokedValue is the RevokedDispatchesAnnotation of a set of keys.
func revokedValue(keys []string) string { return strings.Join(keys, ",") }
