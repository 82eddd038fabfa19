package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Runner runs one load test. Create it with NewRunner (a Caller per connection)
// or NewWireRunner (the event loop); read Status from any goroutine while Run is
// going.
type Runner struct {
	opts     Options
	clock    Clock
	engine   engine
	dispatch *dispatcher

	calls    atomic.Int64
	errs     atomic.Int64
	aborted  atomic.Bool
	started  atomic.Bool
	startAt  atomic.Int64 // clock time (ns) when the timetable started
	rec      recorder
	codesMu  sync.Mutex
	codes    map[int]int64
	stopLoad context.CancelFunc
	// firstNoResponse is why the first call without a response got none.
	firstNoResponse atomic.Pointer[error]
}

// engine is how requests are carried: goroutines calling Callers, or the event
// loop writing a Wire's bytes.
type engine interface {
	// warmUp makes one uncounted request per connection.
	warmUp(ctx context.Context) error
	// run sends requests as the dispatcher says until it says stop or ctx ends,
	// and returns the clock time of the last completion; an error only when the
	// engine itself failed (not a request).
	run(ctx context.Context) (time.Duration, error)
}

// NewRunner prepares a run over callers, one per connection, each driven by its
// own goroutine.
func NewRunner(o Options, callers []Caller) (*Runner, error) {
	if len(callers) == 0 {
		return nil, errors.New("loadgen: no connections to run on")
	}
	if o.Connections != len(callers) {
		return nil, fmt.Errorf("loadgen: %d callers for %d connections", len(callers), o.Connections)
	}
	r, err := newRunner(o)
	if err != nil {
		return nil, err
	}
	r.engine = &goroutineEngine{r: r, callers: callers}
	return r, nil
}

func newRunner(o Options) (*Runner, error) {
	switch {
	case o.Connections < 1:
		return nil, fmt.Errorf("loadgen: %d connections; at least one is needed", o.Connections)
	case o.Duration < 0:
		return nil, fmt.Errorf("loadgen: negative duration %v", o.Duration)
	case o.Exactly < 0:
		return nil, fmt.Errorf("loadgen: negative call count %d", o.Exactly)
	}
	clock := o.Clock
	if clock == nil {
		clock = NewClock()
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r := &Runner{opts: o, clock: clock, codes: map[int]int64{}, rec: newRecorder()}
	r.dispatch = &dispatcher{opts: o, table: Timetable{
		Rate: o.QPS, Connections: o.Connections, Uniform: o.Uniform, Jitter: o.Jitter, Seed: seed,
	}}
	return r, nil
}

// WarmupError is returned by Run when connections' uncounted first calls fail
// and Options.AllowInitialErrors is off. It describes the first failure.
type WarmupError struct {
	Failed, Of int   // how many connections failed, of how many
	Connection int   // the first that failed
	Code       int   // its outcome code
	Err        error // why it got no response, if it got none
}

func (e *WarmupError) Error() string {
	why := fmt.Sprintf("code %d", e.Code)
	if e.Err != nil {
		why = e.Err.Error()
	}
	return fmt.Sprintf("warm-up call failed on %d of %d connections (connection %d: %s)", e.Failed, e.Of, e.Connection, why)
}

func (e *WarmupError) Unwrap() error { return e.Err }

// NoResponseError is what Unanswered returns for a run in which no call
// got a response: each one ended in a socket error (refused, reset,
// timed out), so its latencies measure nothing of the target.
type NoResponseError struct {
	Calls int64
	First error // why the first of them got none
}

func (e *NoResponseError) Error() string {
	msg := fmt.Sprintf("no call got a response: all %d ended in socket errors", e.Calls)
	if e.First != nil {
		msg += ", the first: " + e.First.Error()
	}
	return msg
}

func (e *NoResponseError) Unwrap() error { return e.First }

// Unanswered says, after Run, whether the run made calls and none got a
// response (a *NoResponseError), which Run itself does not count as
// failing: the result is still the caller's to write. With Exactly there
// is no warm-up call to fail first, so this is how such a run is told
// from one that measured something.
func (r *Runner) Unanswered() error {
	calls := r.calls.Load()
	r.codesMu.Lock()
	failed := r.codes[SocketError]
	r.codesMu.Unlock()
	if calls == 0 || failed < calls {
		return nil
	}
	e := &NoResponseError{Calls: calls}
	if first := r.firstNoResponse.Load(); first != nil {
		e.First = *first
	}
	return e
}

// warmupFailures gathers the outcomes of the warm-up calls into one error.
func warmupFailures(outs []Outcome) error {
	var first *WarmupError
	failed := 0
	for i, o := range outs {
		if o.OK {
			continue
		}
		failed++
		if first == nil {
			first = &WarmupError{Connection: i, Code: o.Code, Err: o.Err}
		}
	}
	if first == nil {
		return nil
	}
	first.Failed, first.Of = failed, len(outs)
	return first
}

// Run warms each connection up with one uncounted call (except with Exactly, where
// as in Fortio every call counts), then runs the load until the duration or call
// count is reached, ctx ends, or AbortOn is seen. It returns what was measured; an
// error only when the run could not start.
func (r *Runner) Run(ctx context.Context) (*Stats, error) {
	if r.opts.Exactly == 0 {
		if err := r.engine.warmUp(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted during the warm-up: %w", ctx.Err())
			}
			return nil, err
		}
	}
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.stopLoad = cancel

	start := r.clock.Now()
	r.dispatch.start = start
	r.startAt.Store(int64(start))
	r.started.Store(true)
	wall := time.Now()
	end, err := r.engine.run(loadCtx)
	if err != nil {
		return nil, err
	}
	if loadCtx.Err() == nil {
		// The run kept to its schedule: it lasted as long as asked, even if the
		// last request came back a little before the end.
		end = max(end, r.dispatch.scheduleEnd())
	}
	return r.stats(wall, end-start), nil
}

// record counts one finished call; safe from any goroutine.
func (r *Runner) record(t requestTimes, out Outcome) {
	r.calls.Add(1)
	if !out.OK {
		r.errs.Add(1)
	}
	r.rec.record(t, out.OK)
	r.codesMu.Lock()
	r.codes[out.Code]++
	r.codesMu.Unlock()
	if out.Code == SocketError && out.Err != nil && r.firstNoResponse.Load() == nil {
		err := out.Err
		r.firstNoResponse.CompareAndSwap(nil, &err)
	}
	if r.opts.AbortOn != 0 && out.Code == r.opts.AbortOn {
		r.aborted.Store(true)
		r.stopLoad()
	}
}

// goroutineEngine gives each Caller a goroutine.
type goroutineEngine struct {
	r       *Runner
	callers []Caller
}

// warmUp makes the first calls all at once, as Fortio does: it opens the
// connections and warms the server before anything is timed.
func (e *goroutineEngine) warmUp(ctx context.Context) error {
	outs := make([]Outcome, len(e.callers))
	e.each(func(id int, c Caller) { outs[id] = c.Call(ctx) })
	if e.r.opts.AllowInitialErrors {
		return nil
	}
	return warmupFailures(outs)
}

func (e *goroutineEngine) run(ctx context.Context) (time.Duration, error) {
	ends := make([]time.Duration, len(e.callers))
	e.each(func(id int, c Caller) { ends[id] = e.work(ctx, c) })
	var end time.Duration
	for _, t := range ends {
		end = max(end, t)
	}
	return end, nil
}

// work is one connection's loop: take the next request, wait until it is due,
// send it, record it. It returns the clock time of its last completion.
func (e *goroutineEngine) work(ctx context.Context, c Caller) time.Duration {
	clock := e.r.clock
	free := clock.Now() // when this connection last became free
	for ctx.Err() == nil {
		now := clock.Now()
		due, more := e.r.dispatch.take(free, now)
		if !more {
			break
		}
		if due > now && !clock.SleepUntil(ctx, due) {
			break
		}
		sent := clock.Now()
		out := c.Call(ctx)
		done := clock.Now()
		e.r.record(requestTimes{due: due, free: free, sent: sent, done: done}, out)
		free = done
	}
	return free
}

// each runs f for every caller at once, one goroutine each, and waits for all.
// Every goroutine joins the clock before any starts, so that a simulated clock
// never advances while some have yet to begin.
func (e *goroutineEngine) each(f func(id int, c Caller)) {
	leaves := make([]func(), len(e.callers))
	for id := range e.callers {
		leaves[id] = join(e.r.clock)
	}
	var wg sync.WaitGroup
	for id, c := range e.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer leaves[id]()
			f(id, c)
		}()
	}
	wg.Wait()
}

// join tells a simulated clock (in tests) that one more goroutine takes part in the
// run, so that it advances time only when every participant is asleep. It is
// called before the goroutine starts, and the goroutine calls the returned func
// when it ends.
func join(c Clock) (leave func()) {
	p, ok := c.(interface {
		Join()
		Leave()
	})
	if !ok {
		return func() {}
	}
	p.Join()
	return p.Leave
}
