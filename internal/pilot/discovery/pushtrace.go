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

// pushTraces is the ring of recent pushes' traces.
type pushTraces struct {
	mu     sync.Mutex
	traces []*PushTrace
	// byStart finds a push's trace from the request a proxy's push carries:
	// the queue hands each proxy a copy of the request (merged with any
	// it still had waiting), which keeps the oldest change's Start.
	byStart map[int64]*PushTrace
}

// begin opens the trace of a push started at began.
func (p *pushTraces) begin(n int64, req *model.PushRequest, began time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byStart == nil {
		p.byStart = make(map[int64]*PushTrace)
	}
	t := &PushTrace{Push: n, Start: req.Start, Began: began, Sent: map[string]time.Time{}}
	if len(p.traces) == pushTraceDepth {
		delete(p.byStart, p.traces[0].Start.UnixNano())
		p.traces = p.traces[1:]
	}
	p.traces = append(p.traces, t)
	p.byStart[req.Start.UnixNano()] = t
}

// sent records a proxy's push of req. A proxy still waiting in the queue
// when a later push starts gets both in one, traced as the older's.
func (p *pushTraces) sent(req *model.PushRequest, proxyID string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.byStart[req.Start.UnixNano()]; t != nil {
		t.Sent[proxyID] = at
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
