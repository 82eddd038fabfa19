package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/meshperf/meshperf/pkg/loadgen"
)

// How often the live status is refreshed: on a terminal a few times a second,
// otherwise (a log file, CI) a plain line every few seconds.
const (
	terminalRefresh = 250 * time.Millisecond
	logRefresh      = 5 * time.Second
)

// startProgress shows the run's status while it goes, on stderr, unless -quiet;
// the returned func stops it and clears the status line.
func startProgress(ctx context.Context, r *loadgen.Runner, f *loadFlags, stderr io.Writer) (stop func()) {
	if f.quiet {
		return func() {}
	}
	tty := isTerminal(stderr)
	every := logRefresh
	if tty {
		every = terminalRefresh
	}
	total := ""
	if f.exactly == 0 && f.duration > 0 {
		total = "/" + f.duration.String()
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		var lastCalls int64
		var lastAt time.Duration
		for {
			select {
			case <-ctx.Done():
				if tty {
					fmt.Fprint(stderr, "\r\033[K")
				}
				return
			case <-tick.C:
			}
			s := r.Status()
			if !s.Started {
				continue
			}
			qps := 0.0
			if dt := s.Elapsed - lastAt; dt > 0 {
				qps = float64(s.Calls-lastCalls) / dt.Seconds()
			}
			lastCalls, lastAt = s.Calls, s.Elapsed
			line := fmt.Sprintf("%s%s  %.0f qps  p50 %s  p99 %s  %d calls  %d errors",
				s.Elapsed.Round(100*time.Millisecond), total, qps,
				formatSeconds(s.P50.Seconds()), formatSeconds(s.P99.Seconds()), s.Calls, s.Errors)
			if tty {
				fmt.Fprintf(stderr, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(stderr, line)
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
