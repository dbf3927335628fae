package framework

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// SkewedClock is the real clock moved by Offset: the clock of a hub or an
// agent that is wrong by that much. Timers and tickers run at the real
// rate; only the time it reads is off.
type SkewedClock struct {
	clock.RealClock
	Offset time.Duration
}

// Now is the real time plus Offset.
func (c SkewedClock) Now() time.Time { return time.Now().Add(c.Offset) }

// Since is the time elapsed since t on this clock.
func (c SkewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// ShiftingClock is the real clock moved by an offset a test may change
// while components read it: a hub whose time jumps ahead, as time passing
// without waiting for it.
type ShiftingClock struct {
	clock.RealClock
	offset atomic.Int64
}

// Shift moves the clock by d.
func (c *ShiftingClock) Shift(d time.Duration) { c.offset.Add(int64(d)) }

// Now is the real time plus the offset.
func (c *ShiftingClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Since is the time elapsed since t on this clock.
func (c *ShiftingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
