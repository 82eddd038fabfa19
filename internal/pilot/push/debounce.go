package push

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Debouncer merges bursts of changes into one push, as istiod does: a burst of
// config edits then costs one snapshot and one push per proxy, not one each.
type Debouncer struct {
	opts  Options
	clock Clock
	push  func(*model.PushRequest)
	m     *Metrics
	log   *slog.Logger
}

// NewDebouncer returns a debouncer that calls push with each merged request.
// push should return once the request is handed to the push queue (building
// the snapshot and calling Queue.StartPush), not when proxies have it: the
// next window waits for it. m may be nil.
func NewDebouncer(o Options, clock Clock, push func(*model.PushRequest), m *Metrics) *Debouncer {
	return &Debouncer{opts: o, clock: clock, push: push, m: m, log: slog.Default()}
}

// WithLogger sets the logger for the per-push line (default slog.Default()).
func (d *Debouncer) WithLogger(l *slog.Logger) *Debouncer {
	d.log = l
	return d
}

// debounceWindow is one open window: the merged request and when it opened and
// last grew.
type debounceWindow struct {
	merged mergedRequest
	events int
	opened time.Time
	last   time.Time
}

func (w *debounceWindow) isOpen() bool { return w.events > 0 }

func (w *debounceWindow) add(now time.Time, req *model.PushRequest) {
	if w.events == 0 {
		w.opened = now
	}
	w.last = now
	w.events++
	w.merged.add(req)
}

// closesAt is when the window closes: after a quiet period, or at the latest
// DebounceMax after it opened. istiod only checks the maximum when its quiet
// timer fires; closing exactly at the maximum cuts a trickle no later.
func (w *debounceWindow) closesAt(o Options) time.Time {
	quiet := w.last.Add(o.DebounceAfter)
	if latest := w.opened.Add(o.DebounceMax); latest.Before(quiet) {
		return latest
	}
	return quiet
}

// debounceRun is the state of one Run: everything is touched only by Run's
// goroutine, except what the push goroutines send on done.
type debounceRun struct {
	d      *Debouncer
	w      debounceWindow
	timer  Timer
	armed  bool
	busy   bool // a debounced push is running
	done   chan struct{}
	pushes int
	bypass sync.WaitGroup
}

// Run debounces the requests read from in until ctx ends or in is closed, and
// returns when no push it started is still running. When in is closed, an open
// window is pushed at once (after a running push) instead of being dropped.
// Nil requests are ignored; a request with no reason counts as "unknown".
//
// With EnableEDSDebounce false, an endpoint-only request (Full false) is pushed
// at once in its own goroutine, as istiod does: it neither waits for a running
// push nor touches the open window, which closes on its own schedule. push
// must then be safe to call concurrently.
func (d *Debouncer) Run(ctx context.Context, in <-chan *model.PushRequest) {
	r := &debounceRun{d: d, done: make(chan struct{}, 1)}
	defer r.bypass.Wait()
	defer r.disarm()
	for {
		var fired <-chan time.Time
		if r.armed {
			fired = r.timer.C()
		}
		select {
		case <-ctx.Done():
			if r.busy {
				<-r.done
			}
			return
		case req, ok := <-in:
			if !ok {
				r.flush()
				return
			}
			r.receive(req)
		case <-fired:
			r.armed = false
			if !r.busy {
				r.schedule(d.clock.Now())
			}
		case <-r.done:
			r.busy = false
			r.schedule(d.clock.Now())
		}
	}
}

func (r *debounceRun) receive(req *model.PushRequest) {
	if req == nil {
		return
	}
	if len(req.Reason) == 0 {
		req = req.Merge(&model.PushRequest{Reason: map[model.TriggerReason]int{model.ReasonUnknown: 1}})
	}
	if !r.d.opts.EnableEDSDebounce && !req.Full {
		r.d.log.Debug("push without debounce: endpoints only", "reasons", req.Reason)
		r.bypass.Add(1)
		go func() {
			defer r.bypass.Done()
			r.d.push(req)
		}()
		return
	}
	now := r.d.clock.Now()
	r.w.add(now, req)
	r.schedule(now)
}

// schedule pushes the window if it has closed and no push is running, else
// sets the timer for when it closes. A window that closed during a push is
// pushed when done arrives.
func (r *debounceRun) schedule(now time.Time) {
	if !r.w.isOpen() {
		return
	}
	closes := r.w.closesAt(r.d.opts)
	if !r.busy && !now.Before(closes) {
		r.start(now)
		return
	}
	r.arm(max(closes.Sub(now), 0))
}

func (r *debounceRun) arm(d time.Duration) {
	if r.timer == nil {
		r.timer = r.d.clock.NewTimer(d)
	} else {
		r.timer.Reset(d)
	}
	r.armed = true
}

func (r *debounceRun) disarm() {
	if r.armed {
		r.timer.Stop()
		r.armed = false
	}
}

func (r *debounceRun) start(now time.Time) {
	w := r.w
	r.w = debounceWindow{}
	r.disarm()
	r.busy = true
	r.pushes++
	if r.d.log.Enabled(context.Background(), slog.LevelInfo) {
		r.d.log.Info("push debounce stable",
			"push", r.pushes, "events", w.events, "configs", configsSummary(w.merged.req),
			"reasons", w.merged.req.Reason, "quiet", now.Sub(w.last), "open", now.Sub(w.opened),
			"full", w.merged.req.Full)
	}
	go func() {
		r.d.push(w.merged.req)
		r.d.m.observeDebounce(r.d.clock.Now().Sub(w.opened))
		r.done <- struct{}{}
	}()
}

// flush pushes whatever is left when the input closes.
func (r *debounceRun) flush() {
	r.disarm()
	if r.busy {
		<-r.done
		r.busy = false
	}
	if r.w.isOpen() {
		r.start(r.d.clock.Now())
		<-r.done
		r.busy = false
	}
}

// configsSummary names one changed config and counts the rest, as istiod's
// log does, so a push of thousands of configs stays one short line. The name
// shown is the smallest, so the line is stable from run to run.
func configsSummary(req *model.PushRequest) string {
	if len(req.ConfigsUpdated) == 0 {
		if req.Full {
			return "(all)"
		}
		return "(none)"
	}
	first := ""
	for k := range req.ConfigsUpdated {
		if s := k.String(); first == "" || s < first {
			first = s
		}
	}
	if n := len(req.ConfigsUpdated) - 1; n > 0 {
		return first + " and " + strconv.Itoa(n) + " more"
	}
	return first
}
