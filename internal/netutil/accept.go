// Package netutil holds what meshperf's servers add to the standard
// library's listeners and to gRPC's transport: failed accepts counted,
// connections that do not speak the protocol (or fail their TLS
// handshake) reported, and the log lines a remote party can cause rate
// limited, so that a server under attack or at its limits says so without
// drowning its log.
package netutil

import (
	"errors"
	"log/slog"
	"net"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons an accept failed, the values of the counter's "reason" label.
const (
	ReasonTooManyOpenFiles = "too_many_open_files"
	ReasonOther            = "other"
)

// AcceptErrors counts and reports the errors a server's listeners return
// from Accept. gRPC's server retries a failed accept after a short backoff
// and says nothing a user would see, so a server at its open-files limit
// would turn proxies away unnoticed.
type AcceptErrors struct {
	counter *prometheus.CounterVec
	// log gets a line per reason at most every DefaultLogInterval: at the
	// open-files limit a server fails an accept every few milliseconds.
	log    *LogLimiter
	advice string
}

// NewAcceptErrors registers the counter name on reg (labelled by reason)
// and logs failures on log with advice, what the user can do about them.
func NewAcceptErrors(reg prometheus.Registerer, name, help string, log *slog.Logger, advice string) (*AcceptErrors, error) {
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"reason"})
	if err := reg.Register(counter); err != nil {
		return nil, err
	}
	// Both series exist from the start, so that a dashboard's rate shows 0
	// rather than nothing until the first failure.
	counter.WithLabelValues(ReasonTooManyOpenFiles)
	counter.WithLabelValues(ReasonOther)
	return &AcceptErrors{counter: counter, log: NewLogLimiter(log, DefaultLogInterval), advice: advice}, nil
}

// Wrap returns ln with its accept errors counted and logged. The errors are
// still returned, so that the server backs off and retries as before.
func (a *AcceptErrors) Wrap(ln net.Listener) net.Listener {
	return &countingListener{Listener: ln, errs: a}
}

type countingListener struct {
	net.Listener
	errs *AcceptErrors
}

func (l *countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil && !errors.Is(err, net.ErrClosed) { // closed is the server stopping
		l.errs.record(l.Addr().String(), err)
	}
	return conn, err
}

// AcceptReason is the counter's reason for err.
func AcceptReason(err error) string {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return ReasonTooManyOpenFiles
	}
	return ReasonOther
}

func (a *AcceptErrors) record(addr string, err error) {
	reason := AcceptReason(err)
	a.counter.WithLabelValues(reason).Inc()
	a.log.Warn(reason, "connections refused: accept failed", "address", addr,
		"reason", reason, "error", err.Error(), "fix", a.advice)
}
