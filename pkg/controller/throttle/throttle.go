// Package throttle spaces out the status writes of objects that would
// otherwise be written on every change of what they count (queue status
// during a burst of admissions or dispatches).
package throttle

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Throttle remembers when each object's status was last written.
type Throttle[K comparable] struct {
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	written map[K]time.Time
}

// New returns a Throttle allowing one write per interval and key.
func New[K comparable](clk clock.Clock, interval time.Duration) *Throttle[K] {
	return &Throttle[K]{clock: clk, interval: interval, written: map[K]time.Time{}}
}

// Wait is how long to wait before writing key's status again; 0 when it
// may be written now.
func (t *Throttle[K]) Wait(key K) time.Duration {
	t.mu.Lock()
	last, ok := t.written[key]
	t.mu.Unlock()
	if !ok {
		return 0
	}
	return max(0, t.interval-t.clock.Since(last))
}

// Wrote records that key's status was written now.
func (t *Throttle[K]) Wrote(key K) {
	t.mu.Lock()
	t.written[key] = t.clock.Now()
	t.mu.Unlock()
}

// Forget drops key (its object is gone).
func (t *Throttle[K]) Forget(key K) {
	t.mu.Lock()
	delete(t.written, key)
	t.mu.Unlock()
}
