package loadgen

import (
	"math"
	"time"
)

// Timetable says when each request of a paced run is due, as an offset from the
// start of the run. Request i's time depends only on i, never on when earlier
// requests went out or came back: that is what makes the recorded latency honest
// when the server stalls (the schedule does not stall with it).
//
// The spacing follows Fortio's meaning of its flags, with the run's connections
// sharing one schedule:
//   - default: the connections start together, so requests are due in groups of
//     Connections, one group every Connections/Rate seconds;
//   - Uniform: the groups are spread out, one request every 1/Rate seconds;
//   - Jitter: each request moves by a random amount within ±10% of a connection's
//     period (Connections/Rate), independently, so the long-run rate is exact.
type Timetable struct {
	Rate        float64 // requests per second, > 0
	Connections int     // >= 1
	Uniform     bool
	Jitter      bool
	Seed        uint64 // makes jitter reproducible
}

// jitterFraction is Fortio's jitter: ±10% of the sleep between two requests.
const jitterFraction = 0.10

// ConnectionPeriod is the time between two requests of one connection.
func (t Timetable) ConnectionPeriod() time.Duration {
	return time.Duration(float64(t.Connections) / t.Rate * float64(time.Second))
}

// Slot returns when request i (counting from 0) is due.
func (t Timetable) Slot(i int64) time.Duration {
	var seconds float64
	if t.Uniform {
		seconds = float64(i) / t.Rate
	} else {
		group := i / int64(t.Connections)
		seconds = float64(group) * float64(t.Connections) / t.Rate
	}
	if t.Jitter {
		period := float64(t.Connections) / t.Rate
		seconds += (2*unitFloat(t.Seed, uint64(i)) - 1) * jitterFraction * period
	}
	return time.Duration(math.Max(seconds, 0) * float64(time.Second))
}

// CountBefore returns how many requests are due before d: the number of requests
// in a run of duration d. It ignores jitter, which moves requests but does not
// change their number in the long run.
func (t Timetable) CountBefore(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := d.Seconds()
	if t.Uniform {
		return int64(math.Ceil(s * t.Rate))
	}
	groups := int64(math.Ceil(s * t.Rate / float64(t.Connections)))
	return groups * int64(t.Connections)
}

// unitFloat is a uniform number in [0,1) drawn from (seed, i) alone (splitmix64),
// so that Slot stays a pure function that many connections can call at once.
func unitFloat(seed, i uint64) float64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
