package loadgen

import (
	"context"
	"sort"
	"sync"
	"time"
)

// simClock is a discrete-event clock: time stands still while any participant is
// running and jumps to the earliest wake-up once all of them sleep. A run on it is
// exact and instant, so tests can check latencies to the nanosecond.
type simClock struct {
	mu       sync.Mutex
	now      time.Duration
	parties  int
	sleepers []*sleeper
}

type sleeper struct {
	until time.Duration
	wake  chan struct{}
}

func (c *simClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) Join() {
	c.mu.Lock()
	c.parties++
	c.mu.Unlock()
}

func (c *simClock) Leave() {
	c.mu.Lock()
	c.parties--
	c.advanceLocked()
	c.mu.Unlock()
}

func (c *simClock) SleepUntil(_ context.Context, t time.Duration) bool {
	c.mu.Lock()
	if t <= c.now {
		c.mu.Unlock()
		return true
	}
	s := &sleeper{until: t, wake: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.advanceLocked()
	c.mu.Unlock()
	<-s.wake
	return true
}

// advanceLocked wakes the earliest sleepers once nobody is running.
func (c *simClock) advanceLocked() {
	if len(c.sleepers) == 0 || len(c.sleepers) < c.parties {
		return
	}
	sort.SliceStable(c.sleepers, func(i, j int) bool { return c.sleepers[i].until < c.sleepers[j].until })
	c.now = max(c.now, c.sleepers[0].until)
	for len(c.sleepers) > 0 && c.sleepers[0].until <= c.now {
		close(c.sleepers[0].wake)
		c.sleepers = c.sleepers[1:]
	}
}

// simServer is a Caller whose requests take a fixed service time in simulated
// time, except that it is stopped (as by SIGSTOP) between stallFrom and stallTo:
// nothing it is doing then completes before stallTo.
type simServer struct {
	clock              *simClock
	service            time.Duration
	stallFrom, stallTo time.Duration
	outcome            func(n int) Outcome // nil: always 200 OK
	mu                 *sync.Mutex
	calls              *int
}

func (s simServer) Call(ctx context.Context) Outcome {
	now := s.clock.Now()
	done := now + s.service
	if done > s.stallFrom && now < s.stallTo {
		done = max(done, s.stallTo+s.service)
	}
	s.clock.SleepUntil(ctx, done)
	s.mu.Lock()
	*s.calls++
	n := *s.calls
	s.mu.Unlock()
	if s.outcome != nil {
		return s.outcome(n)
	}
	return Outcome{Code: 200, OK: true}
}

// simServers returns c callers sharing one simulated server.
func simServers(clock *simClock, c int, proto simServer) []Caller {
	proto.clock = clock
	proto.mu = &sync.Mutex{}
	proto.calls = new(int)
	out := make([]Caller, c)
	for i := range out {
		out[i] = proto
	}
	return out
}
