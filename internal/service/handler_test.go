package service

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/topology"
)

func TestScriptRunsInOrderWithSizesAndHost(t *testing.T) {
	g := newGraph(t)
	b := g.peer("b")
	c := g.peer("c")
	svc := topology.Service{Name: "a", ResponseSize: 1234, Script: topology.Script{
		callTo("b", 100), {Sleep: time.Millisecond}, callTo("c", 0), callTo("b", 5000),
	}}
	_, url := g.start(svc, Config{})
	status, body := get(t, url+"/some/path", nil)
	if status != http.StatusOK || len(body) != 1234 {
		t.Fatalf("got %d with %d bytes, want 200 with 1234", status, len(body))
	}
	if want := []string{"b", "c", "b"}; !slices.Equal(g.arrivals, want) {
		t.Errorf("calls arrived in order %v, want %v", g.arrivals, want)
	}
	if want := []int{100, 5000}; !slices.Equal(b.bodies, want) {
		t.Errorf("b received bodies of %v bytes, want %v", b.bodies, want)
	}
	if want := []int{0}; !slices.Equal(c.bodies, want) {
		t.Errorf("c received bodies of %v bytes, want %v", c.bodies, want)
	}
	r := b.requests[0]
	if r.Method != http.MethodGet || r.Host != "b:8080" || r.Proto != "HTTP/1.1" {
		t.Errorf("b got %s %s Host %q, want GET HTTP/1.1 Host b:8080", r.Method, r.Proto, r.Host)
	}
	// The body is made once: the same bytes answer every request.
	if _, again := get(t, url, nil); again != body {
		t.Error("the response body changed between requests")
	}
}

func TestSleepsRunInSequence(t *testing.T) {
	g := newGraph(t)
	svc := topology.Service{Name: "a", Script: topology.Script{{Sleep: 40 * time.Millisecond}, {Sleep: 40 * time.Millisecond}}}
	_, url := g.start(svc, Config{})
	start := time.Now()
	if status, _ := get(t, url, nil); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Errorf("two 40 ms sleeps took %s, want at least 80 ms", took)
	}
}

func TestConcurrentStepsOverlapAndAllFinish(t *testing.T) {
	g := newGraph(t)
	b := g.peer("b")
	c := g.peer("c")
	svc := topology.Service{Name: "a", Script: topology.Script{{Concurrent: []topology.Step{
		{Sleep: 100 * time.Millisecond}, {Sleep: 100 * time.Millisecond}, callTo("b", 10), callTo("c", 20),
	}}}}
	_, url := g.start(svc, Config{})
	start := time.Now()
	status, _ := get(t, url, nil)
	took := time.Since(start)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	// A correctness bound, not a performance goal: run one after the
	// other, the two sleeps alone would take 200 ms.
	if took < 100*time.Millisecond || took >= 180*time.Millisecond {
		t.Errorf("two concurrent 100 ms sleeps took %s, want 100 ms to 180 ms", took)
	}
	if len(b.requests) != 1 || len(c.requests) != 1 {
		t.Errorf("b got %d calls and c %d, want 1 each", len(b.requests), len(c.requests))
	}
}

func TestProbabilityMakesThatShareOfCalls(t *testing.T) {
	g := newGraph(t)
	b := g.peer("b")
	step := callTo("b", 0)
	step.Call.Probability = 30
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed: the same count every run
	var rmu sync.Mutex
	chance := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return rng.IntN(n) }
	_, url := g.start(topology.Service{Name: "a", Script: topology.Script{step}}, Config{Chance: chance})
	const requests = 1000
	for range requests {
		if status, body := get(t, url, nil); status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	// 30% of 1000: a binomial's standard deviation is 14.5, so 250..350
	// is more than three of them either side.
	if n := len(b.requests); n < 250 || n > 350 {
		t.Errorf("a call with probability 30 was made %d times in %d requests, want about 300", n, requests)
	}
}

func TestErrorsEveryNthRequestBeforeTheScript(t *testing.T) {
	g := newGraph(t)
	b := g.peer("b")
	svc := topology.Service{Name: "a", ErrorRate: 0.25, ResponseSize: 10, Script: topology.Script{callTo("b", 0)}}
	_, url := g.start(svc, Config{})
	var failed []int
	for i := 1; i <= 12; i++ {
		status, body := get(t, url, nil)
		switch {
		case status == http.StatusInternalServerError && body == simulatedFailure:
			failed = append(failed, i)
		case status != http.StatusOK:
			t.Fatalf("request %d: %d %q", i, status, body)
		}
	}
	if want := []int{4, 8, 12}; !slices.Equal(failed, want) {
		t.Errorf("requests %v failed, want %v (one in 4 at 25%%)", failed, want)
	}
	if len(b.requests) != 9 {
		t.Errorf("b got %d calls, want 9: a failed request runs no step", len(b.requests))
	}
}

func TestFailedCallAnswers500WithTheReason(t *testing.T) {
	g := newGraph(t)
	b := g.peer("b")
	b.status = http.StatusServiceUnavailable
	_, url := g.start(topology.Service{Name: "a", Script: topology.Script{callTo("b", 0)}}, Config{})
	status, body := get(t, url, nil)
	if status != http.StatusInternalServerError || !strings.Contains(body, "503") || !strings.Contains(body, "from b") {
		t.Errorf("got %d %q, want 500 naming b's 503 and its body", status, body)
	}

	// Nothing listens on the port "gone" resolves to: a transport error.
	ln := g.listen("gone:8080")
	ln.Close()
	_, url = g.start(topology.Service{Name: "d", Script: topology.Script{callTo("gone", 0), {Sleep: time.Second}}}, Config{})
	start := time.Now()
	status, body = get(t, url, nil)
	if status != http.StatusInternalServerError || !strings.Contains(body, "gone:8080") {
		t.Errorf("got %d %q, want 500 naming gone:8080", status, body)
	}
	if time.Since(start) >= time.Second {
		t.Error("the script went on after a failed call")
	}
}

func TestConcurrentFailuresAreAllReported(t *testing.T) {
	g := newGraph(t)
	for _, n := range []string{"b", "c"} {
		g.peer(n).status = http.StatusBadGateway
	}
	ok := g.peer("e")
	svc := topology.Service{Name: "a", Script: topology.Script{{Concurrent: []topology.Step{callTo("b", 0), callTo("e", 0), callTo("c", 0)}}}}
	_, url := g.start(svc, Config{})
	status, body := get(t, url, nil)
	if status != http.StatusInternalServerError || !strings.HasPrefix(body, "2 errors occurred") ||
		!strings.Contains(body, "b:8080") || !strings.Contains(body, "c:8080") {
		t.Errorf("got %d %q, want 500 reporting both failed calls", status, body)
	}
	if len(ok.requests) != 1 {
		t.Errorf("e got %d calls, want 1: a failure does not cancel the others", len(ok.requests))
	}
}

func TestTraceHeadersForwardedThroughAChain(t *testing.T) {
	g := newGraph(t)
	c := g.peer("c")
	callC := callTo("c", 0)
	callC.Call.ExtraHeader = map[string]string{"x-extra": "from-b", "x-request-id": "overridden"}
	g.start(topology.Service{Name: "b", Script: topology.Script{callC}}, Config{})
	_, url := g.start(topology.Service{Name: "a", Script: topology.Script{callTo("b", 0)}}, Config{})

	in := http.Header{}
	for i, name := range tracedHeaders {
		in.Set(strings.ToLower(name), fmt.Sprintf("value-%d", i))
	}
	in.Set("X-Not-Traced", "dropped")
	if status, body := get(t, url, in); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.requests[0].Header
	for i, name := range tracedHeaders {
		if v := got.Values(name); !slices.Equal(v, []string{fmt.Sprintf("value-%d", i)}) {
			t.Errorf("c received %s = %q, want %q", name, v, fmt.Sprintf("value-%d", i))
		}
	}
	if v := got.Get("X-Not-Traced"); v != "" {
		t.Errorf("an untraced header reached c: %q", v)
	}
	if v := got.Get("X-Extra"); v != "from-b" {
		t.Errorf("b's extra header reached c as %q, want from-b", v)
	}
}
