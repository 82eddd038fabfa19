package push

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// debounceHarness runs a Debouncer on a fake clock inside a synctest bubble.
// Every push blocks until the test releases it, so the test decides how long
// a push runs; synctest.Wait after each step lets the debouncer react first.
type debounceHarness struct {
	t       *testing.T
	clk     *fakeClock
	in      chan *model.PushRequest
	pushes  chan *model.PushRequest
	release chan struct{}
	running atomic.Int32
	most    atomic.Int32 // the most pushes ever running at once
	reg     *prometheus.Registry
	logs    *logCapture
	stopped chan struct{}
}

func startDebouncer(t *testing.T, o Options) *debounceHarness {
	h := &debounceHarness{
		t:       t,
		clk:     newFakeClock(),
		in:      make(chan *model.PushRequest),
		pushes:  make(chan *model.PushRequest),
		release: make(chan struct{}),
		reg:     prometheus.NewRegistry(),
		logs:    &logCapture{},
		stopped: make(chan struct{}),
	}
	d := NewDebouncer(o, h.clk, h.push, NewMetrics(h.reg)).WithLogger(slog.New(h.logs))
	go func() {
		d.Run(context.Background(), h.in)
		close(h.stopped)
	}()
	return h
}

func (h *debounceHarness) push(req *model.PushRequest) {
	n := h.running.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	h.pushes <- req
	<-h.release
	h.running.Add(-1)
}

func (h *debounceHarness) send(req *model.PushRequest) {
	h.in <- req
	synctest.Wait()
}

func (h *debounceHarness) advance(d time.Duration) {
	h.clk.Advance(d)
	synctest.Wait()
}

// started returns the push that has started, failing if none has.
func (h *debounceHarness) started() *model.PushRequest {
	h.t.Helper()
	synctest.Wait()
	select {
	case r := <-h.pushes:
		return r
	default:
		h.t.Fatalf("no push started by %v", h.elapsed())
		return nil
	}
}

func (h *debounceHarness) noPush() {
	h.t.Helper()
	synctest.Wait()
	select {
	case r := <-h.pushes:
		h.t.Fatalf("unexpected push at %v: %+v", h.elapsed(), r)
	default:
	}
}

// finishPush lets one started push return.
func (h *debounceHarness) finishPush() {
	h.release <- struct{}{}
	synctest.Wait()
}

func (h *debounceHarness) stop() {
	h.t.Helper()
	close(h.in)
	synctest.Wait()
	select {
	case <-h.stopped:
	default:
		h.t.Fatal("Run did not return after its input closed")
	}
}

var epoch = newFakeClock().Now()

func (h *debounceHarness) elapsed() time.Duration { return h.clk.Now().Sub(epoch) }

func (h *debounceHarness) req(reason model.TriggerReason, full bool, names ...string) *model.PushRequest {
	keys := make([]config.Key, len(names))
	for i, n := range names {
		keys[i] = config.Key{Kind: config.KindVirtualService, Namespace: "ns", Name: n}
	}
	return model.NewPushRequest(reason, full, h.clk.Now(), keys...)
}

// logCapture keeps every log record, so tests can read the debounce line.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCapture) WithGroup(string) slog.Handler            { return l }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// debounced returns the attributes of each "push debounce stable" line.
func (l *logCapture) debounced() []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.recs {
		if r.Message != "push debounce stable" {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// checkLine checks the i-th debounce line's event count, quiet time and
// window age: they say when, relative to the events, the window closed.
func checkLine(t *testing.T, h *debounceHarness, i int, events int64, quiet, open time.Duration) {
	t.Helper()
	lines := h.logs.debounced()
	if len(lines) <= i {
		t.Fatalf("%d debounce lines, want line %d", len(lines), i)
	}
	l := lines[i]
	if l["events"].Int64() != events || l["quiet"].Duration() != quiet || l["open"].Duration() != open {
		t.Errorf("line %d: events=%v quiet=%v open=%v, want %d %v %v", i, l["events"], l["quiet"], l["open"], events, quiet, open)
	}
}

func testOptions() Options {
	o := DefaultOptions()
	o.DebounceAfter = 100 * time.Millisecond
	o.DebounceMax = time.Second
	return o
}

func TestDebounceQuietPeriodClosesWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions())
		h.send(h.req(model.ReasonConfig, true, "a"))
		h.advance(99 * time.Millisecond)
		h.send(h.req(model.ReasonConfig, true, "b")) // restarts the quiet period
		h.advance(1 * time.Millisecond)              // the first quiet period would have ended here
		h.noPush()
		h.advance(98 * time.Millisecond)
		h.noPush()
		h.advance(1 * time.Millisecond) // 100ms after the last event
		got := h.started()
		if got.Reasons() != 2 || len(got.ConfigsUpdated) != 2 {
			t.Errorf("pushed %+v, want both events merged", got)
		}
		checkLine(t, h, 0, 2, 100*time.Millisecond, 199*time.Millisecond)
		h.finishPush()
		if at := h.clk.armedAt(); len(at) != 0 {
			t.Errorf("timer still armed at %v with nothing pending", at)
		}
		h.stop()
		if n, sum := histogram(t, h.reg, "pilot_debounce_time"); n != 1 || sum != 0.199 {
			t.Errorf("pilot_debounce_time: %d samples, sum %v; want 1, 0.199", n, sum)
		}
	})
}

func TestDebounceMaxCutsSteadyTrickle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions()) // quiet 100ms, max 1s
		for i := range 20 {
			h.send(h.req(model.ReasonEndpoint, false, "svc"))
			if i < 19 {
				h.advance(50 * time.Millisecond)
				h.noPush()
			}
		}
		h.advance(50 * time.Millisecond) // 1s after the first event, never quiet
		got := h.started()
		if got.Reason[model.ReasonEndpoint] != 20 {
			t.Errorf("pushed %+v, want 20 endpoint events", got.Reason)
		}
		checkLine(t, h, 0, 20, 50*time.Millisecond, time.Second)
		// The trickle goes on: the next window opens with the next event.
		h.send(h.req(model.ReasonEndpoint, false, "svc"))
		h.finishPush()
		h.advance(100 * time.Millisecond)
		if got := h.started(); got.Reasons() != 1 {
			t.Errorf("second window pushed %+v", got.Reason)
		}
		h.finishPush()
		h.stop()
	})
}

func TestDebounceEndpointsBypassWhenEDSDebounceOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions()
		o.EnableEDSDebounce = false
		h := startDebouncer(t, o)
		h.send(h.req(model.ReasonConfig, true, "vs"))
		eds := h.req(model.ReasonEndpoint, false, "svc")
		h.send(eds)
		if got := h.started(); got != eds {
			t.Fatalf("endpoint push %+v, want the request itself at once", got)
		}
		if h.elapsed() != 0 {
			t.Errorf("endpoint push waited %v", h.elapsed())
		}
		h.finishPush()
		// Like istiod, the bypass leaves the open window alone: same schedule,
		// and the endpoint change is not merged into it.
		h.advance(100 * time.Millisecond)
		got := h.started()
		if got.Reason[model.ReasonEndpoint] != 0 || got.Reasons() != 1 || !got.Full {
			t.Errorf("window pushed %+v, want only the config change", got)
		}
		checkLine(t, h, 0, 1, 100*time.Millisecond, 100*time.Millisecond)
		// An endpoint change does not wait for a running push either.
		h.send(h.req(model.ReasonEndpoint, false, "svc"))
		h.started()
		if h.most.Load() != 2 {
			t.Errorf("at most %d pushes ran at once, want the bypass beside the running push", h.most.Load())
		}
		h.finishPush()
		h.finishPush()
		h.stop()
		if len(h.logs.debounced()) != 1 {
			t.Errorf("%d debounce lines, want 1 (bypasses are not debounced)", len(h.logs.debounced()))
		}
	})
}

func TestDebounceEndpointsWaitWhenEDSDebounceOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions())
		h.send(h.req(model.ReasonEndpoint, false, "svc"))
		h.noPush()
		h.advance(100 * time.Millisecond)
		h.started()
		h.finishPush()
		h.stop()
	})
}

func TestDebounceMergesWithIstiodRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions())
		first := h.req(model.ReasonEndpoint, false, "a")
		older := h.req(model.ReasonConfig, true, "a", "b")
		older.Start = epoch.Add(-time.Minute)
		h.send(first)
		h.send(older)
		h.send(h.req(model.ReasonEndpoint, false, "c"))
		h.send(&model.PushRequest{Full: false}) // no reason: counts as unknown
		h.send(nil)                             // ignored
		h.advance(100 * time.Millisecond)
		got := h.started()
		want := map[model.TriggerReason]int{model.ReasonEndpoint: 2, model.ReasonConfig: 1, model.ReasonUnknown: 1}
		if len(got.Reason) != len(want) {
			t.Errorf("reasons %v, want %v", got.Reason, want)
		}
		for r, n := range want {
			if got.Reason[r] != n {
				t.Errorf("reasons %v, want %v", got.Reason, want)
			}
		}
		if !got.Full || len(got.ConfigsUpdated) != 3 || !got.Start.Equal(older.Start) {
			t.Errorf("merged Full=%v configs=%v start=%v", got.Full, got.ConfigsUpdated, got.Start)
		}
		if first.Full || len(first.ConfigsUpdated) != 1 || first.Reasons() != 1 {
			t.Errorf("the window modified a caller's request: %+v", first)
		}
		checkLine(t, h, 0, 4, 100*time.Millisecond, 100*time.Millisecond)
		h.finishPush()
		h.stop()
	})
}

func TestDebounceWindowClosingDuringPushWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions())
		h.send(h.req(model.ReasonConfig, true, "a"))
		h.advance(100 * time.Millisecond)
		h.started() // push 1 runs until released

		h.send(h.req(model.ReasonConfig, true, "b"))
		h.advance(100 * time.Millisecond) // window 2 is quiet, but push 1 still runs
		h.noPush()
		h.advance(50 * time.Millisecond)
		h.finishPush()
		got := h.started() // pushed as soon as push 1 returned
		if got.Reasons() != 1 {
			t.Errorf("pushed %+v", got.Reason)
		}
		checkLine(t, h, 1, 1, 150*time.Millisecond, 150*time.Millisecond)

		// A window keeps merging while it waits, and a new event restarts
		// its quiet period.
		h.send(h.req(model.ReasonConfig, true, "c"))
		h.advance(100 * time.Millisecond)
		h.send(h.req(model.ReasonConfig, true, "d"))
		h.advance(20 * time.Millisecond)
		h.finishPush()
		h.noPush() // quiet for only 20ms
		h.advance(80 * time.Millisecond)
		if got := h.started(); len(got.ConfigsUpdated) != 2 {
			t.Errorf("pushed %v, want c and d", got.ConfigsUpdated)
		}
		checkLine(t, h, 2, 2, 100*time.Millisecond, 200*time.Millisecond)
		h.finishPush()
		if h.most.Load() != 1 {
			t.Errorf("%d debounced pushes ran at once", h.most.Load())
		}
		h.stop()
	})
}

func TestDebounceFlushesOpenWindowWhenInputCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions())
		h.send(h.req(model.ReasonConfig, true, "a"))
		close(h.in)
		synctest.Wait()
		if got := h.started(); got.Reasons() != 1 {
			t.Errorf("flushed %+v", got)
		}
		h.finishPush()
		select {
		case <-h.stopped:
		default:
			t.Fatal("Run did not return")
		}
	})
}

func TestDebounceStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		clk := newFakeClock()
		var pushed atomic.Int32
		d := NewDebouncer(testOptions(), clk, func(*model.PushRequest) { pushed.Add(1) }, nil)
		in := make(chan *model.PushRequest)
		stopped := make(chan struct{})
		go func() {
			d.Run(ctx, in)
			close(stopped)
		}()
		in <- model.NewPushRequest(model.ReasonConfig, true, clk.Now())
		cancel()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("Run did not return after cancel")
		}
		if pushed.Load() != 0 {
			t.Error("cancel pushed the open window")
		}
	})
}

func TestDebounceWindowPastMaxWaitsForRunningPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDebouncer(t, testOptions()) // quiet 100ms, max 1s
		h.send(h.req(model.ReasonConfig, true, "a"))
		h.advance(100 * time.Millisecond)
		h.started() // push 1 runs until released
		// Window 2 opens during push 1 and outlives its maximum under a
		// trickle; each new event still finds push 1 running.
		for range 25 {
			h.send(h.req(model.ReasonEndpoint, false, "svc"))
			h.advance(50 * time.Millisecond)
			h.noPush()
		}
		if h.most.Load() != 1 {
			t.Fatalf("%d pushes ran at once", h.most.Load())
		}
		h.finishPush()
		if got := h.started(); got.Reason[model.ReasonEndpoint] != 25 {
			t.Errorf("pushed %v, want all 25 events", got.Reason)
		}
		checkLine(t, h, 1, 25, 50*time.Millisecond, 1250*time.Millisecond)
		h.finishPush()
		h.stop()
	})
}

// TestDebounceOnRealClock wires the debouncer to RealClock; inside a synctest
// bubble the time package's clock is virtual, so this is still instant.
func TestDebounceOnRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pushed := make(chan *model.PushRequest, 1)
		d := NewDebouncer(testOptions(), RealClock{}, func(r *model.PushRequest) { pushed <- r }, nil)
		in := make(chan *model.PushRequest)
		go d.Run(context.Background(), in)
		start := time.Now()
		in <- model.NewPushRequest(model.ReasonConfig, true, start)
		// Inside the bubble time is virtual: this sleep moves the clock 60ms
		// without waiting, and is the event spacing under test.
		time.Sleep(60 * time.Millisecond)
		in <- model.NewPushRequest(model.ReasonConfig, true, time.Now())
		got := <-pushed
		if waited := time.Since(start); waited != 160*time.Millisecond || got.Reasons() != 2 {
			t.Errorf("pushed %v after %v, want 2 reasons after 160ms", got.Reason, waited)
		}
		close(in)
		synctest.Wait()
	})
}
