package discovery

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// The traces keep at most maxTracedSends proxies' timestamps: at a large
// mesh's scale older pushes are forgotten first, and the push being sent
// is kept whole.
func TestPushTracesBoundTheirSends(t *testing.T) {
	var p pushTraces
	start := time.Unix(1000, 0)
	proxies := maxTracedSends/2 + 1 // two whole pushes are more than the bound
	for n := range 3 {
		began := start.Add(time.Duration(n) * time.Second)
		req := &model.PushRequest{Start: began}
		p.begin(int64(n+1), req, began)
		for i := range proxies {
			p.sent(req, fmt.Sprintf("proxy-%d", i), began.Add(time.Millisecond))
		}
		p.sent(req, "proxy-0", began.Add(2*time.Millisecond)) // a second send to one proxy is not a new entry
	}
	traces := p.list()
	total := 0
	for _, tr := range traces {
		total += len(tr.Sent)
	}
	if total > maxTracedSends || p.sends != total {
		t.Errorf("%d timestamps kept (counted %d), want at most %d", total, p.sends, maxTracedSends)
	}
	if last := traces[len(traces)-1]; last.Push != 3 || len(last.Sent) != proxies {
		t.Errorf("newest trace: push %d with %d proxies, want push 3 whole (%d)", last.Push, len(last.Sent), proxies)
	}
	if len(traces) != 1 {
		t.Errorf("%d traces kept, want only the newest (two would exceed the bound)", len(traces))
	}
}

// Up to the bound, every push is kept, oldest first, each send in the
// push that began last before it was queued.
func TestPushTracesKeepRecentPushes(t *testing.T) {
	var p pushTraces
	start := time.Unix(1000, 0)
	for n := range pushTraceDepth + 5 {
		began := start.Add(time.Duration(n) * time.Second)
		req := &model.PushRequest{Start: began}
		p.begin(int64(n+1), req, began)
		p.sent(req, "a", began)
	}
	traces := p.list()
	if len(traces) != pushTraceDepth || traces[0].Push != 6 || len(traces[0].Sent) != 1 {
		t.Fatalf("%d traces, the oldest push %d", len(traces), traces[0].Push)
	}
	if p.sends != pushTraceDepth {
		t.Errorf("sends counted %d, want %d", p.sends, pushTraceDepth)
	}
}
