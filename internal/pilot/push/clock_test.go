package push

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when a test calls Advance. Timers that
// come due are delivered on their (one-slot) channel during Advance; Stop and
// Reset discard an undelivered firing, as Go 1.23+ timers do. Tests run inside
// a synctest bubble and call synctest.Wait after each step, so the code under
// test has reacted before the test looks: no sleeps, no races.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{} // armed timers
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), timers: make(map[*fakeTimer]struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clk: c, c: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.armLocked(d)
	return t
}

// Advance moves the clock forward and fires every timer that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.fireLocked()
		}
	}
}

// armedAt lists the deadlines of armed timers, for tests that check when the
// code under test means to wake up.
func (c *fakeClock) armedAt() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at []time.Time
	for t := range c.timers {
		at = append(at, t.at)
	}
	return at
}

type fakeTimer struct {
	clk *fakeClock
	c   chan time.Time
	at  time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	return t.disarmLocked()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	was := t.disarmLocked()
	t.armLocked(d)
	return was
}

func (t *fakeTimer) armLocked(d time.Duration) {
	t.at = t.clk.now.Add(d)
	if d <= 0 {
		t.fireLocked()
		return
	}
	t.clk.timers[t] = struct{}{}
}

func (t *fakeTimer) fireLocked() {
	delete(t.clk.timers, t)
	select {
	case t.c <- t.at:
	default:
	}
}

func (t *fakeTimer) disarmLocked() bool {
	_, armed := t.clk.timers[t]
	delete(t.clk.timers, t)
	select {
	case <-t.c:
	default:
	}
	return armed
}

func TestFakeClockTimers(t *testing.T) {
	c := newFakeClock()
	t0 := c.Now()
	a := c.NewTimer(time.Second)
	b := c.NewTimer(2 * time.Second)
	c.Advance(time.Second)
	select {
	case at := <-a.C():
		if !at.Equal(t0.Add(time.Second)) {
			t.Errorf("a fired with %v", at)
		}
	default:
		t.Fatal("a did not fire")
	}
	if b.Reset(time.Second) != true {
		t.Error("Reset of an armed timer should report it was armed")
	}
	c.Advance(999 * time.Millisecond)
	if b.Stop() != true {
		t.Error("b should still be armed")
	}
	c.Advance(time.Hour)
	select {
	case <-b.C():
		t.Error("a stopped timer fired")
	default:
	}
	if n := len(c.armedAt()); n != 0 {
		t.Errorf("%d timers still armed", n)
	}
}
