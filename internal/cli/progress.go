package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// How often the live status is refreshed: on a terminal a few times a second,
// otherwise (a log file, CI) a plain line every few seconds; a dashboard
// gets the same figures once a second.
const (
	terminalRefresh  = 250 * time.Millisecond
	logRefresh       = 5 * time.Second
	dashboardRefresh = time.Second
)

// progressSample is the run's figures at one moment, as the status line
// and the dashboard both show them.
type progressSample struct {
	loadgen.Status
	qps float64 // since the sink's previous sample
}

// progressSink is one reader of the samples, every so many ticks.
type progressSink struct {
	every     time.Duration
	show      func(progressSample)
	lastCalls int64
	lastAt    time.Duration
	lastQPS   float64
}

// sample is s as this sink sees it: the rate since its last sample. Over
// less than half its period (the last sample, taken when the run stops)
// the rate would be noise, so the previous one stands.
func (k *progressSink) sample(s loadgen.Status) progressSample {
	dt := s.Elapsed - k.lastAt
	if dt < k.every/2 {
		return progressSample{Status: s, qps: k.lastQPS}
	}
	k.lastQPS = float64(s.Calls-k.lastCalls) / dt.Seconds()
	k.lastCalls, k.lastAt = s.Calls, s.Elapsed
	return progressSample{Status: s, qps: k.lastQPS}
}

// startProgress shows the run's status while it goes: on stderr unless
// -quiet, and to the dashboard when pub is set (with a last sample when
// stopped, so the dashboard sees the final figures). The returned func
// stops it and clears the status line.
func startProgress(ctx context.Context, r *loadgen.Runner, f *loadFlags, stderr io.Writer, pub *live.Publisher) (stop func()) {
	var sinks []*progressSink
	tty := isTerminal(stderr)
	if !f.quiet {
		sinks = append(sinks, statusLineSink(f, stderr, tty))
	}
	var dashboard *progressSink
	if pub != nil {
		dashboard = &progressSink{every: dashboardRefresh, show: func(p progressSample) {
			pub.Publish(progressEvent(live.KindProgress, f, p))
		}}
		sinks = append(sinks, dashboard)
	}
	if len(sinks) == 0 {
		return func() {}
	}
	tick := sinks[0].every
	for _, k := range sinks {
		tick = min(tick, k.every)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for n := int64(1); ; n++ {
			select {
			case <-ctx.Done():
				if tty && !f.quiet {
					fmt.Fprint(stderr, "\r\033[K")
				}
				if s := r.Status(); dashboard != nil && s.Started {
					dashboard.show(dashboard.sample(s))
				}
				return
			case <-ticker.C:
			}
			s := r.Status()
			if !s.Started {
				continue
			}
			for _, k := range sinks {
				if n%int64(k.every/tick) == 0 {
					k.show(k.sample(s))
				}
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// statusLineSink is the status line on stderr: rewritten in place on a
// terminal, a line at a time elsewhere.
func statusLineSink(f *loadFlags, stderr io.Writer, tty bool) *progressSink {
	every := logRefresh
	if tty {
		every = terminalRefresh
	}
	total := ""
	if f.exactly == 0 && f.duration > 0 {
		total = "/" + f.duration.String()
	}
	return &progressSink{every: every, show: func(p progressSample) {
		line := fmt.Sprintf("%s%s  %.0f qps  p50 %s  p99 %s  %d calls  %d errors",
			p.Elapsed.Round(100*time.Millisecond), total, p.qps,
			formatSeconds(p.P50.Seconds()), formatSeconds(p.P99.Seconds()), p.Calls, p.Errors)
		if tty {
			fmt.Fprintf(stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(stderr, line)
		}
	}}
}

// progressEvent is a sample as the dashboard's event of that kind.
func progressEvent(kind string, f *loadFlags, p progressSample) live.Event {
	e := live.Event{Kind: kind, ElapsedS: p.Elapsed.Seconds(), QPS: p.qps, Calls: p.Calls, Errors: p.Errors,
		P50Ms: live.Millis(p.P50), P90Ms: live.Millis(p.P90), P99Ms: live.Millis(p.P99)}
	if f.qps > 0 {
		e.TargetQPS = f.qps
	}
	if f.exactly == 0 && f.duration > 0 {
		e.DurationS = f.duration.Seconds()
	}
	return e
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
