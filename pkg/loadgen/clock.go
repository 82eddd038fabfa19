package loadgen

import (
	"context"
	"time"
)

// A Clock tells the time since the start of a run and sleeps until a given time.
// The runner reads all time through one, so tests can drive a run in simulated
// time.
type Clock interface {
	// Now is the time elapsed since the clock's origin.
	Now() time.Duration
	// SleepUntil blocks until Now() >= t, or until ctx ends (then it returns false).
	SleepUntil(ctx context.Context, t time.Duration) bool
}

// NewClock returns the real monotonic clock, with its origin now.
func NewClock() Clock { return realClock{origin: time.Now()} }

type realClock struct{ origin time.Time }

func (c realClock) Now() time.Duration { return time.Since(c.origin) }

// fineSleepWindow is how long before its deadline a sleep switches from Go's timer
// to the kernel's nanosleep. Go's timers wake an idle process through its network
// poller, whose timeout is whole milliseconds on Linux, so a 200 µs sleep there
// takes about 1.1 ms; nanosleep lands within the kernel's timer slack (tens of µs).
// The window is wide enough to absorb the timer's overshoot and narrow enough that
// a thread blocked in nanosleep is cheap and ctx is still checked often.
const fineSleepWindow = 2 * time.Millisecond

func (c realClock) SleepUntil(ctx context.Context, t time.Duration) bool {
	if coarse := t - c.Now() - fineSleepWindow; coarse > 0 {
		timer := time.NewTimer(coarse)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
	if ctx.Err() != nil {
		return false
	}
	for {
		d := t - c.Now()
		if d <= 0 {
			return true
		}
		fineSleep(d)
	}
}
