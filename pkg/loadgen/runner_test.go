package loadgen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func runSim(t *testing.T, o Options, server simServer) *Stats {
	t.Helper()
	clock := &simClock{}
	o.Clock = clock
	r, err := NewRunner(o, simServers(clock, o.Connections, server))
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunKeepsTheRequestedRate(t *testing.T) {
	s := runSim(t, Options{QPS: 1000, Connections: 4, Duration: 10 * time.Second},
		simServer{service: 300 * time.Microsecond})
	if s.Calls != 10000 {
		t.Errorf("calls = %d, want 10000", s.Calls)
	}
	// The last group is due at 9.996 s and done at 9.9963 s; the schedule asked
	// for 10 s, and the run kept to it, so it lasted 10 s at exactly 1000 qps.
	if s.Duration != 10*time.Second || s.ActualQPS() != 1000 {
		t.Errorf("duration = %v, qps = %v; want 10s and 1000", s.Duration, s.ActualQPS())
	}
	if got := s.Latency.Percentile(100); got != int64(300*time.Microsecond) {
		t.Errorf("max latency = %v, want exactly the 300µs service time", time.Duration(got))
	}
}

// A server stopped for 1 s during a 10 s run at 1000 qps: the requests due during
// the stop wait for it, and their latency must say so (wrk2's "coordinated
// omission"), while the service time from the actual send barely notices.
func TestRunCountsAServerStallInTheLatency(t *testing.T) {
	s := runSim(t, Options{QPS: 1000, Connections: 4, Duration: 10 * time.Second, Uniform: true},
		simServer{service: 200 * time.Microsecond, stallFrom: 5 * time.Second, stallTo: 6 * time.Second})
	if s.Calls != 10000 {
		t.Errorf("calls = %d, want all 10000 (a stall delays requests, it does not drop them)", s.Calls)
	}
	p99 := time.Duration(s.Latency.Percentile(99))
	if p99 < 800*time.Millisecond {
		t.Errorf("corrected p99 = %v, want >= 800ms", p99)
	}
	// Requests due during the stall queue for it; the one due at 5.0 s waits ~1 s,
	// the one due at 5.9 s ~0.1 s: the p95 lies inside that ramp.
	p95 := time.Duration(s.Latency.Percentile(95))
	if p95 < 400*time.Millisecond || p95 > 600*time.Millisecond {
		t.Errorf("corrected p95 = %v, want ~500ms (the middle of the stall's ramp)", p95)
	}
	if st := time.Duration(s.ServiceTime.Percentile(99)); st > time.Millisecond {
		t.Errorf("uncorrected p99 = %v: the stall should hide from it", st)
	}
	if st := time.Duration(s.ServiceTime.Max()); st < 900*time.Millisecond {
		t.Errorf("uncorrected max = %v: the requests in flight at the stall took ~1s", st)
	}
}

func TestRunNoCatchUpSkipsLateRequests(t *testing.T) {
	s := runSim(t, Options{QPS: 1000, Connections: 4, Duration: 10 * time.Second, Uniform: true, NoCatchUp: true},
		simServer{service: 200 * time.Microsecond, stallFrom: 5 * time.Second, stallTo: 6 * time.Second})
	if s.Skipped < 950 || s.Skipped > 1000 {
		t.Errorf("skipped = %d, want about the 1000 requests due during the stall", s.Skipped)
	}
	if s.Calls+s.Skipped != 10000 {
		t.Errorf("calls %d + skipped %d != 10000", s.Calls, s.Skipped)
	}
}

func TestRunExactlyMakesThatManyCallsWithoutWarmUp(t *testing.T) {
	clock := &simClock{}
	server := simServer{service: time.Millisecond}
	callers := simServers(clock, 3, server)
	r, err := NewRunner(Options{QPS: 100, Connections: 3, Exactly: 37, Clock: clock}, callers)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	served := *callers[0].(simServer).calls
	if s.Calls != 37 || served != 37 {
		t.Errorf("calls = %d, server saw %d, want 37 and 37", s.Calls, served)
	}
}

func TestRunAsFastAsPossible(t *testing.T) {
	s := runSim(t, Options{Connections: 4, Duration: time.Second}, simServer{service: time.Millisecond})
	// Each connection does back-to-back 1 ms calls for 1 s.
	if s.Calls != 4000 {
		t.Errorf("calls = %d, want 4000", s.Calls)
	}
	if s.Latency.Max() != int64(time.Millisecond) {
		t.Errorf("max latency = %v, want 1ms", time.Duration(s.Latency.Max()))
	}
}

func TestRunStopsOnAbortCode(t *testing.T) {
	s := runSim(t, Options{QPS: 100, Connections: 2, Duration: 10 * time.Second, AbortOn: 503},
		simServer{service: time.Millisecond, outcome: func(n int) Outcome {
			if n == 50 {
				return Outcome{Code: 503}
			}
			return Outcome{Code: 200, OK: true}
		}})
	if !s.Aborted {
		t.Error("run not marked aborted")
	}
	if s.Calls > 60 || s.Codes[503] != 1 || s.Errors != 1 {
		t.Errorf("calls=%d codes=%v errors=%d: want a stop right after the 503", s.Calls, s.Codes, s.Errors)
	}
	if s.ErrorLatency.Count() != 1 {
		t.Errorf("error histogram has %d entries, want 1", s.ErrorLatency.Count())
	}
}

func TestRunWarmUpFailure(t *testing.T) {
	refuse := simServer{service: time.Millisecond, outcome: func(int) Outcome { return Outcome{Code: SocketError} }}
	clock := &simClock{}
	r, _ := NewRunner(Options{QPS: 10, Connections: 2, Duration: time.Second, Clock: clock}, simServers(clock, 2, refuse))
	_, err := r.Run(context.Background())
	var we *WarmupError
	if !errors.As(err, &we) || we.Code != SocketError {
		t.Fatalf("err = %v, want a WarmupError with code -1", err)
	}

	s := runSim(t, Options{QPS: 10, Connections: 2, Duration: time.Second, AllowInitialErrors: true}, refuse)
	if s.Codes[SocketError] != 10 || s.Errors != 10 {
		t.Errorf("codes = %v, errors = %d; want 10 socket errors counted", s.Codes, s.Errors)
	}
}

// With Exactly there is no warm-up to fail: Run measures the refused calls,
// and Unanswered tells that run, with why its first call got no response,
// from one in which a single call was answered, or none was made yet.
func TestUnansweredRunWithExactly(t *testing.T) {
	refused := errors.New("connect: connection refused")
	answeredAt := func(at int) simServer {
		return simServer{service: time.Millisecond, outcome: func(n int) Outcome {
			if n == at {
				return Outcome{Code: 503}
			}
			return Outcome{Code: SocketError, Err: refused}
		}}
	}
	newRunner := func(at int) *Runner {
		clock := &simClock{}
		r, err := NewRunner(Options{QPS: 100, Connections: 2, Exactly: 20, Clock: clock}, simServers(clock, 2, answeredAt(at)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := newRunner(0).Unanswered(); err != nil {
		t.Errorf("before Run: Unanswered = %v, want nil: no call was made", err)
	}
	for at, want := range map[int]bool{0: true, 7: false} {
		r := newRunner(at)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		err := r.Unanswered()
		var ne *NoResponseError
		switch {
		case want && (!errors.As(err, &ne) || ne.Calls != 20 || !errors.Is(err, refused)):
			t.Errorf("no call answered: Unanswered = %v, want a NoResponseError of 20 calls, the first refused", err)
		case !want && err != nil:
			t.Errorf("call %d answered: Unanswered = %v, want nil", at, err)
		}
	}
}

func TestNewRunnerRejectsBadOptions(t *testing.T) {
	c := []Caller{simServer{}}
	for _, o := range []Options{
		{Connections: 2},
		{Connections: 1, Duration: -time.Second},
		{Connections: 1, Exactly: -1},
	} {
		if _, err := NewRunner(o, c); err == nil {
			t.Errorf("NewRunner(%+v) accepted", o)
		}
	}
	if _, err := NewRunner(Options{Connections: 0}, nil); err == nil {
		t.Error("NewRunner with no callers accepted")
	}
}

func TestRunUntilCancelled(t *testing.T) {
	clock := NewClock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r, _ := NewRunner(Options{QPS: 200, Connections: 2, Clock: clock}, []Caller{okCaller{}, okCaller{}})
	s, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls == 0 || s.Calls > 100 {
		t.Errorf("calls = %d in ~300ms at 200 qps", s.Calls)
	}
}

type okCaller struct{}

func (okCaller) Call(context.Context) Outcome { return Outcome{Code: 200, OK: true} }

func TestRequestTimesLatency(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name                 string
		t                    requestTimes
		latency, service, sd time.Duration
	}{
		{"on time", requestTimes{due: 10 * ms, free: 5 * ms, sent: 10 * ms, done: 11 * ms}, ms, ms, 0},
		{"timer overshoot is not latency", requestTimes{due: 10 * ms, free: 5 * ms, sent: 10*ms + 80*time.Microsecond, done: 11 * ms}, 920 * time.Microsecond, 920 * time.Microsecond, 80 * time.Microsecond},
		{"waited for a connection", requestTimes{due: 10 * ms, free: 500 * ms, sent: 500 * ms, done: 501 * ms}, 491 * ms, ms, 0},
	} {
		if got := tc.t.latency(); got != tc.latency {
			t.Errorf("%s: latency = %v, want %v", tc.name, got, tc.latency)
		}
		if got := tc.t.serviceTime(); got != tc.service {
			t.Errorf("%s: service = %v, want %v", tc.name, got, tc.service)
		}
		if got := tc.t.sendDelay(); got != tc.sd {
			t.Errorf("%s: send delay = %v, want %v", tc.name, got, tc.sd)
		}
	}
}

// blockingCaller waits until its context ends, like a request to a server that
// never answers.
type blockingCaller struct{}

func (blockingCaller) Call(ctx context.Context) Outcome {
	<-ctx.Done()
	return Outcome{Code: SocketError, Err: ctx.Err()}
}

func TestRunInterruptedDuringWarmUpSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, _ := NewRunner(Options{QPS: 10, Connections: 2, Duration: time.Second}, []Caller{blockingCaller{}, blockingCaller{}})
	_, err := r.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "interrupted during the warm-up") {
		t.Errorf("err = %v, want an interruption, not a failed warm-up", err)
	}
}
