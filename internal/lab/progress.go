package lab

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// LivePublisher takes the lab's events for the dashboard without waiting
// (internal/live's Publisher).
type LivePublisher interface {
	Publish(live.Event)
}

// progress shows where the matrix is: on a terminal one live line that is
// rewritten at each run's start, elsewhere one plain line per run; and a
// line per finished run with its result or failure.
type progress struct {
	w     io.Writer
	tty   bool
	specs []scenario.RunSpec
	live  bool          // a live line is on the terminal
	pub   LivePublisher // the dashboard's, or nil
	runID string
	index int // the run going, for its end's event
}

func newProgress(w io.Writer, tty bool, specs []scenario.RunSpec, pub LivePublisher, runID string) *progress {
	return &progress{w: w, tty: tty, specs: specs, pub: pub, runID: runID}
}

// ProgressLine is the line shown when run i of specs starts.
func ProgressLine(specs []scenario.RunSpec, i int) string {
	s := specs[i]
	qps := "max qps"
	if s.QPS > 0 {
		qps = fmt.Sprintf("%d qps", s.QPS)
	}
	rep := ""
	if reps := specs[len(specs)-1].Repetition; reps > 1 {
		rep = fmt.Sprintf(", repetition %d/%d", s.Repetition, reps)
	}
	left := scenario.Remaining(specs, i).Round(time.Second)
	return fmt.Sprintf("run %d/%d: %s, %d conn, %s, %s%s (%s left)",
		i+1, len(specs), s.Mode, s.Connections, qps, s.Protocol, rep, left)
}

// ResultLine is the line shown when a run ends.
func ResultLine(o Outcome) string {
	r := o.Run
	if r.Failed {
		return fmt.Sprintf("  %s: FAILED: %s", r.Label, r.FailureReason)
	}
	var checks []string
	for _, c := range o.Checks {
		checks = append(checks, c.Name+" "+c.Detail)
	}
	line := fmt.Sprintf("  %s: %.1f qps, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, %.1f%% errors",
		r.Label, r.ActualQPS, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.ErrorPercent)
	if len(checks) > 0 {
		line += "; checks: " + strings.Join(checks, "; ")
	}
	return line
}

func (p *progress) start(i int) {
	p.index = i
	if p.pub != nil {
		s := p.specs[i]
		p.pub.Publish(live.Event{Kind: live.KindRun, RunIndex: i + 1, RunTotal: len(p.specs), Mode: string(s.Mode),
			Label: s.Label(p.runID), TargetQPS: float64(s.QPS), DurationS: s.Duration.Seconds(), Message: ProgressLine(p.specs, i)})
	}
	line := ProgressLine(p.specs, i)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.live = true
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) done(o Outcome) {
	if p.pub != nil {
		p.pub.Publish(runEndEvent(o, p.index, len(p.specs)))
	}
	p.clear()
	fmt.Fprintln(p.w, ResultLine(o))
}

func (p *progress) clear() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

func (p *progress) finish() { p.clear() }

// runEndEvent is a run's result as the dashboard's run-end event; a failed
// run's figures are those it has (none, mostly) and its reason.
func runEndEvent(o Outcome, i, total int) live.Event {
	r := o.Run
	e := live.Event{Kind: live.KindRunEnd, RunIndex: i + 1, RunTotal: total, Mode: r.Mode, Label: r.Label,
		TargetQPS: float64(max(r.RequestedQPS, 0)), QPS: results.OrZero(r.ActualQPS), Calls: r.Calls, Errors: r.Errors,
		P50Ms: results.OrZero(r.Latency.P50), P90Ms: results.OrZero(r.Latency.P90), P99Ms: results.OrZero(r.Latency.P99),
		Message: strings.TrimSpace(ResultLine(o))}
	return e
}
