package sim

import (
	"sync"
	"time"
)

// Response is one xDS response as a simulated proxy received it.
type Response struct {
	At        time.Time
	Type      Type
	Resources int32 // resources in the response (delta: added or changed ones)
	Removed   int32 // delta: names removed
	Bytes     int32 // the encoded size of the whole response
	Version   string
	Nonce     string
	Nacked    bool // the proxy rejected it
}

// ProxyStats is what one simulated proxy recorded. Times are zero until they
// happen.
type ProxyStats struct {
	Index     int
	NodeID    string
	Started   time.Time // its first stream was started
	Connected time.Time // its first stream was open
	// Synced is when every type it subscribes to had been answered for the
	// first time: CDS, LDS and SDS, plus EDS and RDS when CDS and LDS named
	// something to ask for.
	Synced time.Time
	// Waiting are the types the current stream needs and has not had
	// answered yet: what is missing of its first config on that stream.
	Waiting   [numTypes]bool
	Responses []Response
	Acks      [numTypes]int
	Nacks     [numTypes]int
	// SyncBytes is the bytes of each type received up to Synced: the size of
	// the proxy's first full config.
	SyncBytes [numTypes]int64
	// StreamErrors counts streams that ended with an error; Reconnects the
	// streams opened again after one.
	StreamErrors int
	Reconnects   int
	LastError    string
}

// Bytes sums the bytes of every response of type t.
func (s *ProxyStats) Bytes(t Type) int64 {
	var n int64
	for _, r := range s.Responses {
		if r.Type == t {
			n += int64(r.Bytes)
		}
	}
	return n
}

// FirstAfter returns the arrival of the first response of type t at or after
// t0: with it the churn driver decides that a proxy received the push a change
// caused.
func (s *ProxyStats) FirstAfter(t Type, t0 time.Time) (time.Time, bool) {
	for _, r := range s.Responses {
		if r.Type == t && !r.At.Before(t0) {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// recorder holds a proxy's stats; the proxy's goroutine writes, readers copy.
type recorder struct {
	mu sync.Mutex
	s  ProxyStats
}

func (r *recorder) update(fn func(s *ProxyStats)) {
	r.mu.Lock()
	fn(&r.s)
	r.mu.Unlock()
}

func (r *recorder) snapshot() ProxyStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	s.Responses = append([]Response(nil), r.s.Responses...)
	return s
}
