package churn

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Runner applies changes and times their delivery.
type Runner struct {
	Applier Applier
	Proxies Proxies
	Clock   Clock // RealClock if nil
	// Timeout bounds the wait for one change's delivery (sequential) or for
	// all outstanding ones after the last change (paced); 30s if zero. A
	// change not delivered in time is counted as missed, not failed: the
	// report says how many.
	Timeout time.Duration
}

func (r *Runner) clock() Clock {
	if r.Clock == nil {
		return RealClock{}
	}
	return r.Clock
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return 30 * time.Second
	}
	return r.Timeout
}

// inflight is a change applied and not yet collected.
type inflight struct {
	res     ChangeResult
	expect  []Expect
	watches []Arrivals
}

// apply registers the change's watches, then applies it.
func (r *Runner) apply(ctx context.Context, c Change, due time.Time) (*inflight, error) {
	f := &inflight{res: ChangeResult{Label: c.Label}, expect: c.Expect}
	for _, e := range c.Expect {
		var w Arrivals
		if e.Name != "" && len(e.Proxies) > 0 {
			w = r.Proxies.Watch(e.Name)
		}
		f.watches = append(f.watches, w)
		f.res.Expected += len(e.Proxies)
	}
	clk := r.clock()
	f.res.Applied = clk.Now()
	if !due.IsZero() {
		f.res.Lag = max(f.res.Applied.Sub(due), 0)
	}
	if len(c.Apply) > 0 {
		if err := r.Applier.Apply(ctx, c.Apply); err != nil {
			r.unwatch(f)
			return nil, fmt.Errorf("change %s: %w", c.Label, err)
		}
	}
	if len(c.Delete) > 0 {
		if err := r.Applier.Delete(ctx, c.Delete); err != nil {
			r.unwatch(f)
			return nil, fmt.Errorf("change %s: %w", c.Label, err)
		}
	}
	f.res.ApplyTook = clk.Now().Sub(f.res.Applied)
	return f, nil
}

func (r *Runner) unwatch(f *inflight) {
	for _, w := range f.watches {
		if w != nil {
			r.Proxies.Unwatch(w)
		}
	}
}

// wait blocks until every expected proxy has the change's watched names or
// ctx ends; by-type expectations are polled.
func (r *Runner) wait(ctx context.Context, f *inflight) {
	for i, e := range f.expect {
		if w := f.watches[i]; w != nil {
			_ = w.Wait(ctx, e.Proxies)
			continue
		}
		for _, p := range e.Proxies {
			for {
				if _, ok := r.Proxies.FirstAfter(p, e.Type, f.res.Applied); ok || ctx.Err() != nil {
					break
				}
				if r.clock().Sleep(ctx, 20*time.Millisecond) != nil {
					break
				}
			}
		}
	}
}

// collect reads the arrivals into the result and drops the watches.
func (r *Runner) collect(f *inflight) ChangeResult {
	res := f.res
	for i, e := range f.expect {
		for _, p := range e.Proxies {
			var at time.Time
			var ok bool
			if w := f.watches[i]; w != nil {
				at, ok = w.Arrival(p)
			} else {
				at, ok = r.Proxies.FirstAfter(p, e.Type, res.Applied)
			}
			if !ok {
				continue
			}
			d := max(at.Sub(res.Applied), 0)
			res.Received++
			res.Latencies = append(res.Latencies, d)
			res.Receivers = append(res.Receivers, p)
			res.Last = max(res.Last, d)
		}
	}
	r.unwatch(f)
	return res
}

// Sequential is the performance test's loop: apply a change, wait until
// every proxy it affects has it, wait delay, and so on.
func (r *Runner) Sequential(ctx context.Context, kind string, changes []Change, delay time.Duration) (Result, error) {
	clk := r.clock()
	start := clk.Now()
	var out []ChangeResult
	for i, c := range changes {
		if i > 0 && delay > 0 {
			if err := clk.Sleep(ctx, delay); err != nil {
				return Summarize(kind, start, clk.Now(), out), err
			}
		}
		f, err := r.apply(ctx, c, time.Time{})
		if err != nil {
			return Summarize(kind, start, clk.Now(), out), err
		}
		wctx, cancel := context.WithTimeout(ctx, r.timeout())
		r.wait(wctx, f)
		cancel()
		out = append(out, r.collect(f))
		if ctx.Err() != nil {
			return Summarize(kind, start, clk.Now(), out), ctx.Err()
		}
	}
	return Summarize(kind, start, clk.Now(), out), nil
}

// Paced applies change i at start + i/rate, whether or not earlier ones
// have arrived (as a busy cluster does), then waits for all of them.
func (r *Runner) Paced(ctx context.Context, kind string, changes []Change, rate float64) (Result, error) {
	if rate <= 0 {
		return Result{}, errors.New("churn: the rate of changes must be positive")
	}
	clk := r.clock()
	start := clk.Now()
	var pending []*inflight
	var runErr error
	for i, c := range changes {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if err := clk.Sleep(ctx, due.Sub(clk.Now())); err != nil {
			runErr = err
			break
		}
		f, err := r.apply(ctx, c, due)
		if err != nil {
			runErr = err
			break
		}
		pending = append(pending, f)
	}
	wctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	// Waiting for the last change is enough: pushes are ordered, so once it
	// has arrived everything before it has too or was merged into a later
	// push (a name renamed away before the push never arrives at all).
	if len(pending) > 0 {
		r.wait(wctx, pending[len(pending)-1])
	}
	out := make([]ChangeResult, len(pending))
	for i, f := range pending {
		out[i] = r.collect(f)
	}
	supersede(out, pending)
	return Summarize(kind, start, clk.Now(), out), runErr
}

// supersede counts a change whose own name never reached a proxy as
// delivered by the first later change that did (see EachCatchUp).
func supersede(out []ChangeResult, pending []*inflight) {
	expects := make([][]Expect, len(pending))
	for i, f := range pending {
		expects[i] = f.expect
	}
	EachCatchUp(expects, func(i, j int) Arrivals { return pending[i].watches[j] }, func(i, p int, at time.Time, own bool) {
		if own {
			return // collect counted it
		}
		d := max(at.Sub(out[i].Applied), 0)
		out[i].Received++
		out[i].Latencies = append(out[i].Latencies, d)
		out[i].Receivers = append(out[i].Receivers, p)
		out[i].Last = max(out[i].Last, d)
	})
}

// EachCatchUp visits, for each of a paced run's changes (in order) and every
// proxy the change expected, when that proxy's config caught up with the
// change. watches(i, j) is what watched change i's j-th expectation (nil when
// nothing did, and that expectation is skipped). own is set when the
// change's own name arrived; a proxy that never saw it caught up when it saw
// the first later change's, because the control plane merged the two into one
// push. Proxies that never caught up are not visited.
func EachCatchUp(changes [][]Expect, watches func(i, j int) Arrivals, visit func(i, p int, at time.Time, own bool)) {
	next := map[int]time.Time{} // proxy -> earliest arrival of a later change
	for i := len(changes) - 1; i >= 0; i-- {
		got := map[int]time.Time{}
		for j, e := range changes[i] {
			w := watches(i, j)
			if w == nil {
				continue
			}
			for _, p := range e.Proxies {
				if at, ok := w.Arrival(p); ok {
					visit(i, p, at, true)
					got[p] = at
				} else if at, ok := next[p]; ok {
					visit(i, p, at, false)
					got[p] = at
				}
			}
		}
		for p, at := range got {
			if cur, ok := next[p]; !ok || at.Before(cur) {
				next[p] = at
			}
		}
	}
}
