package loadgen

import (
	"sync/atomic"
	"time"
)

// dispatcher decides which request a free connection sends next, and when. Both
// engines (one goroutine per connection, and the event loop) use it, so they
// follow the same policy:
//
//   - requests are handed out in timetable order, each to the first connection
//     that is free, never to a busy one;
//   - a connection that is free before its request is due waits for it;
//   - a connection that becomes free after its request was due sends at once,
//     and the request's latency counts the wait (see requestTimes.latency);
//   - with NoCatchUp, a request that is a whole connection period late is
//     skipped instead, as Fortio does.
type dispatcher struct {
	opts    Options
	table   Timetable
	start   time.Duration
	next    atomic.Int64 // index of the next request to hand out
	skipped atomic.Int64
}

// take returns when the next request of a connection that is free since `free`
// is due, with the clock at now; false when the run has no more requests.
func (d *dispatcher) take(free, now time.Duration) (due time.Duration, more bool) {
	timed := d.opts.Duration > 0 && d.opts.Exactly == 0
	for {
		i := d.next.Add(1) - 1
		if d.opts.Exactly > 0 && i >= d.opts.Exactly {
			return 0, false
		}
		if !d.opts.paced() {
			// Unpaced: a request is due the moment a connection is free.
			if timed && now-d.start >= d.opts.Duration {
				return 0, false
			}
			return free, true
		}
		due = d.start + d.table.Slot(i)
		if timed && due >= d.start+d.opts.Duration {
			return 0, false
		}
		if d.opts.NoCatchUp && now-due >= d.table.ConnectionPeriod() {
			d.skipped.Add(1)
			continue
		}
		return due, true
	}
}

// scheduleEnd is when the requested schedule ends: the rate applies up to it, so
// a run that kept up lasts at least this long (its last requests are due just
// before it).
func (d *dispatcher) scheduleEnd() time.Duration {
	switch {
	case d.opts.Exactly > 0 && d.opts.paced():
		return d.start + time.Duration(float64(d.opts.Exactly)/d.opts.QPS*float64(time.Second))
	case d.opts.Exactly == 0 && d.opts.Duration > 0:
		return d.start + d.opts.Duration
	default:
		return d.start
	}
}
