package push

import "time"

// Clock is the pipeline's source of time. The debouncer's windows and the
// queue's timings read it, so tests can drive them with a fake clock instead
// of sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers the time on C once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the pipeline uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; after it returns, nothing more is
	// delivered on C (Go 1.23+ timer semantics).
	Stop() bool
	// Reset re-arms the timer to fire d from now, discarding any pending
	// firing.
	Reset(d time.Duration) bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
