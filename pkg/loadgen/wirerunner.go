package loadgen

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// WireTarget is where the event loop connects.
type WireTarget struct {
	Addr    string        // host:port; resolved once, before the run
	Timeout time.Duration // connect and per-request timeout; 0 for none
}

// WireConnStats are one event-loop connection's socket and response statistics.
type WireConnStats struct {
	SocketStats
	Sizes       *histogram.Histogram // response sizes on the wire
	HeaderSizes *histogram.Histogram // their headers' sizes
}

// ErrNoEventLoop is returned by NewWireRunner where the event loop does not
// exist (it needs Linux's epoll and timerfd); use Callers there.
var ErrNoEventLoop = errors.New("loadgen: the event loop needs Linux")

// NewWireRunner prepares a run whose connections are driven by one event loop
// thread writing w's requests to raw sockets. This is the cheap path: per request
// it costs a write, a read and an epoll wait, and its timer (timerfd) wakes it
// within microseconds of a request's due time, where Go's timers round sleeps up
// to whole milliseconds in an idle process.
func NewWireRunner(o Options, w Wire, t WireTarget) (*Runner, []*WireConnStats, error) {
	if !eventLoopSupported {
		return nil, nil, ErrNoEventLoop
	}
	if o.Clock != nil {
		if _, real := o.Clock.(realClock); !real {
			return nil, nil, errors.New("loadgen: the event loop runs on the real clock only")
		}
	}
	addr, err := net.ResolveTCPAddr("tcp", t.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("resolving %s: %w", t.Addr, err)
	}
	r, err := newRunner(o)
	if err != nil {
		return nil, nil, err
	}
	stats := make([]*WireConnStats, o.Connections)
	for i := range stats {
		stats[i] = &WireConnStats{
			SocketStats: newSocketStats(),
			Sizes:       histogram.New(histogram.Bytes),
			HeaderSizes: histogram.New(histogram.Bytes),
		}
	}
	r.engine = newEventLoop(r, w, addr, t.Timeout, stats)
	return r, stats, nil
}
