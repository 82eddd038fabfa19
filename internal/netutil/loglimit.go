package netutil

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultLogInterval is how often a LogLimiter logs one kind of event at
// most: often enough that an operator watching the log sees a problem
// within seconds, rarely enough that a client repeating it (a proxy
// reconnecting in a loop, a scanner, a server at its open-files limit
// failing an accept every few milliseconds) cannot bury everything else.
const DefaultLogInterval = 5 * time.Second

// LogLimiter logs warnings that a remote party can cause at will, at most
// one line per kind of event every interval; the next line of that kind
// says how many were left out since (suppressed=N), so the rate still
// shows. Kinds must come from a fixed set the server chooses (a reason, a
// status code), never from what the client sent: the limiter keeps one
// entry per kind for its life.
type LogLimiter struct {
	log      *slog.Logger
	interval time.Duration

	mu    sync.Mutex
	kinds map[string]*limitedKind
}

// limitedKind is one kind's state: when it was last logged and how many of
// it were left out since.
type limitedKind struct {
	last       time.Time
	suppressed int
}

// NewLogLimiter logs on log (nil discards) at most one line per kind every
// interval (DefaultLogInterval when not positive).
func NewLogLimiter(log *slog.Logger, interval time.Duration) *LogLimiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultLogInterval
	}
	return &LogLimiter{log: log, interval: interval, kinds: map[string]*limitedKind{}}
}

// Warn logs msg with args at warn level, unless a line of the same kind
// went out less than the interval ago; it then only counts the event.
// It reports whether it logged.
func (l *LogLimiter) Warn(kind, msg string, args ...any) bool {
	if !l.log.Enabled(context.Background(), slog.LevelWarn) {
		return false
	}
	now := time.Now()
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &limitedKind{}
		l.kinds[kind] = k
	} else if now.Sub(k.last) < l.interval {
		k.suppressed++
		l.mu.Unlock()
		return false
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(args, "suppressed", suppressed)...)
	return true
}
