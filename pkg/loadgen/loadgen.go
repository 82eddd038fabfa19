// Package loadgen is meshperf's load engine: it drives requests over a set of
// connections at a target rate and records how long each took, correcting for
// coordinated omission.
//
// A protocol (HTTP, TCP, gRPC) plugs in by giving one Caller per connection; the
// engine owns the clock, the timetable, dispatch and recording. At a target rate
// every request has a due time fixed in advance by a Timetable. Connections take
// the next due request as soon as they are free, so a late request goes out at
// once but never in a catch-up burst beyond what connections allow. A request's
// latency is counted from the moment it was due whenever it had to wait for a
// connection (a stalled server shows up as the full stall, not as the one request
// that hit it); its service time, from the actual send, is recorded beside it.
//
// This package is the equivalent of Fortio's periodic package, and is meant to be
// imported by other programs in the same way.
package loadgen

import (
	"context"
	"time"
)

// A Caller makes requests on one connection. The runner calls it from one
// goroutine at a time.
type Caller interface {
	// Call makes one request and reports its outcome. Failures are outcomes, not
	// errors: a socket error is Code -1, as in Fortio.
	Call(ctx context.Context) Outcome
}

// Outcome is what one request came to.
type Outcome struct {
	// Code is the protocol's result code: the HTTP status, or a protocol-defined
	// code; SocketError when no response came.
	Code int
	// OK says whether the request succeeded (a 2xx for HTTP).
	OK bool
	// Err says why a request got no response (only then; it is not counted,
	// but a failed warm-up reports it).
	Err error
}

// SocketError is the code of a request that got no response, as in Fortio.
const SocketError = -1

// Options configure a run. The zero value of each field means what Fortio's
// default does, except Connections which must be set.
type Options struct {
	// QPS is the target rate in requests per second; 0 or less means as fast as
	// the connections allow.
	QPS float64
	// Connections is how many callers run at once (Fortio's -c, NumThreads).
	Connections int
	// Duration ends the run; 0 runs until Exactly calls or until ctx ends.
	Duration time.Duration
	// Exactly, when > 0, makes the run exactly this many calls (Fortio's -n).
	Exactly int64
	// Uniform, Jitter and NoCatchUp have Fortio's meaning; see Timetable and
	// Runner.
	Uniform, Jitter, NoCatchUp bool
	// AllowInitialErrors keeps going when a connection's warm-up call fails.
	AllowInitialErrors bool
	// AbortOn stops the run when a call returns this code (0: never).
	AbortOn int
	// Clock is the time source; nil means the real monotonic clock.
	Clock Clock
	// Seed makes jitter reproducible; 0 picks one from the time.
	Seed uint64
}

// paced says whether requests follow a timetable.
func (o Options) paced() bool { return o.QPS > 0 }
