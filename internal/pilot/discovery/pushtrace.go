package discovery

import (
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// PushTrace is one debounced push's stage timestamps, for
// /debug/push_trace: when its first change entered the debounce, when the
// debounce let it through, and when each proxy's config was generated and
// written to its stream. With the time a change was made and the time a
// proxy received it (which only the two ends know), they split a change's
// way to the proxies into watch, debounce, push and send — what
// `meshperf bench pilot` reports. The metrics carry the same stages as
// istiod's histograms (pilot_debounce_time, pilot_proxy_queue_time,
// pilot_proxy_convergence_time), but a histogram cannot say which change
// a sample belongs to.
type PushTrace struct {
	Push int64 `json:"push"`
	// Start is when the push's oldest merged change reached the debounce
	// (the store had read it).
	Start time.Time `json:"start"`
	// Began is when the debounce closed and the push started.
	Began time.Time `json:"began"`
	// Sent is, per proxy ID, when its push was generated and written to
	// its stream; proxies the dependency filter skipped are absent.
	Sent map[string]time.Time `json:"sent"`
}

// pushTraceDepth is how many pushes /debug/push_trace keeps: a benchmark's
// run of changes, each its own push, with room for the connects' pushes.
const pushTraceDepth = 256

// maxTracedSends bounds the proxies' timestamps kept over all the traces:
// at a mesh's scale (tens of thousands of proxies, every one in every
// push) 256 whole pushes would hold millions of them, so older traces go
// first, and the newest is kept whole however large.
const maxTracedSends = 1 << 16

// pushTraces is the ring of recent pushes' traces.
type pushTraces struct {
	mu     sync.Mutex
	traces []*PushTrace // in the order they began
	sends  int          // entries in all the traces' Sent
}

// begin opens the trace of a push started at began.
func (p *pushTraces) begin(n int64, req *model.PushRequest, began time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := &PushTrace{Push: n, Start: req.Start, Began: began, Sent: map[string]time.Time{}}
	if len(p.traces) == pushTraceDepth {
		p.dropOldest()
	}
	p.traces = append(p.traces, t)
}

// dropOldest forgets the oldest trace.
func (p *pushTraces) dropOldest() {
	p.sends -= len(p.traces[0].Sent)
	p.traces[0] = nil
	p.traces = p.traces[1:]
}

// sent records a proxy's push of req. The queue hands each proxy a copy
// of the push's request stamped with when it was queued (merged with one
// the proxy still had waiting, keeping the older stamp), so the push it
// belongs to is the last one that began by then.
func (p *pushTraces) sent(req *model.PushRequest, proxyID string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.traces) - 1; i >= 0; i-- {
		if t := p.traces[i]; !t.Began.After(req.Start) {
			if _, again := t.Sent[proxyID]; !again {
				p.sends++
			}
			t.Sent[proxyID] = at
			for p.sends > maxTracedSends && len(p.traces) > 1 && p.traces[0] != t {
				p.dropOldest()
			}
			return
		}
	}
}

// list copies the traces, oldest first.
func (p *pushTraces) list() []PushTrace {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PushTrace, len(p.traces))
	for i, t := range p.traces {
		out[i] = *t
		out[i].Sent = make(map[string]time.Time, len(t.Sent))
		for id, at := range t.Sent {
			out[i].Sent[id] = at
		}
	}
	return out
}

// PushTraces returns the recent pushes' stage timestamps, oldest first.
func (s *Server) PushTraces() []PushTrace { return s.traces.list() }
