package cli

// The load command's range mode, `meshperf load -qps START:END[:STEP]`: a
// capacity sweep against the one TARGET. Each step is an ordinary paced run
// of the command's options at one rate (coordinated-omission corrected as any
// other), capacity.Search picks the rates and capacity.Judge says when to
// stop; capacity.Analyze finds the knees and the capacity. There are no
// proxies here (the target is whatever the user points at), so the analysis
// has knees and capacity only.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// sweepMode is the one curve's name in a load sweep's analysis: the target
// is whatever the user points at, not a mesh mode the load generator knows.
const sweepMode = "target"

// sweepFlags are the flags of load's range mode.
type sweepFlags struct {
	ranged     bool // -qps was START:END[:STEP]
	rates      capacity.Range
	objectives capacity.Objectives
	refine     int
	given      map[string]bool // the sweep flags set on the command line
}

// qpsFlag is -qps: a rate with Fortio's meaning (rateFlag), or with a ':'
// the ladder of rates of a sweep.
type qpsFlag struct {
	rateFlag
	sweep *sweepFlags
}

func (q *qpsFlag) Set(s string) error {
	if !strings.Contains(s, ":") {
		q.sweep.ranged = false
		return q.rateFlag.Set(s)
	}
	r, err := capacity.ParseRange(s)
	if err != nil {
		return err
	}
	q.sweep.ranged, q.sweep.rates = true, r
	return nil
}

// defineQPS registers -qps and the flags that only a range gives a meaning to.
func (f *loadFlags) defineQPS(fs *flag.FlagSet) {
	f.qps = 8
	fs.Var(&qpsFlag{rateFlag: rateFlag{p: &f.qps, special: []float64{-1}}, sweep: &f.sweep}, "qps",
		"target `rate` in requests per second; 0 or -1 for as fast as possible; "+
			"START:END[:STEP] sweeps the rate from START to END by STEP (doubling without STEP), a full run per step")
	fs.Var(&f.sweep.objectives, "slo", "with a -qps range: a latency `objective` every step must meet, e.g. p99=5ms "+
		"(repeatable, or a comma-separated list); the sweep stops at the first step that misses one")
	intVar(fs, &f.sweep.refine, "refine", 2, 0, 5, "with a -qps range: at most this many `steps` to add, halving the gap between the last rate that met the objectives and the first that did not")
}

// noteGiven records which sweep flags the command line set, for
// checkSweep: a default cannot say whether it was asked for.
func (f *loadFlags) noteGiven(fs *flag.FlagSet) {
	f.sweep.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "slo" || fl.Name == "refine" {
			f.sweep.given[fl.Name] = true
		}
	})
}

// checkSweep refuses what does not go with a range, or needs one.
func (f *loadFlags) checkSweep() error {
	if !f.sweep.ranged {
		for _, name := range []string{"slo", "refine"} {
			if f.sweep.given[name] {
				return fmt.Errorf("-%s needs a -qps range START:END[:STEP] (a sweep)", name)
			}
		}
		return nil
	}
	switch {
	case f.exactly > 0:
		return errors.New("-n makes one run of exactly N calls; a -qps range needs each step to run for -t")
	case f.duration == 0:
		return errors.New("-t 0 runs until interrupted; a -qps range needs each step to run for a duration")
	case f.publish.url != "":
		return errors.New("-dashboard does not follow a -qps range yet; run the sweep without it")
	}
	return nil
}

// withSweepPercentiles adds capacity.Percentiles to ps: every step carries
// them, so no objective depends on interpolation.
func withSweepPercentiles(ps []float64) []float64 {
	for _, p := range capacity.Percentiles {
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// sweepDocument is -json's document for a sweep: the analysis, and each
// step's result exactly as a single run at its rate writes it (in Fortio's
// field order, which the analysis's NaN-safe encoding would not keep).
type sweepDocument struct {
	Sweep capacity.Analysis
	Steps []json.RawMessage
}

// writeSweepJSON writes the sweep's document to path or ("-")
// to stdout. An unknown figure of the analysis (NaN) is written as null.
func writeSweepJSON(path string, a capacity.Analysis, steps []any, stdout io.Writer) error {
	doc := sweepDocument{Sweep: a}
	for _, s := range steps {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encoding a step's JSON result: %w", err)
		}
		doc.Steps = append(doc.Steps, b)
	}
	b, err := results.MarshalNaN(doc)
	if err != nil {
		return fmt.Errorf("encoding the sweep's JSON result: %w", err)
	}
	return writeJSON(path, json.RawMessage(b), stdout) // which indents it
}

// runSweep runs the steps capacity.Search asks for, one line each, then
// prints the analysis. Ctrl-C ends the current step, which counts with what
// it measured, and the sweep. Only a step that could not run fails it.
func runSweep(ctx context.Context, cmd *command, f *loadFlags, target string, stdout, stderr io.Writer) int {
	out := stdout
	if f.jsonPath == "-" {
		out = stderr // standard output carries the JSON
	}
	fmt.Fprintln(out, describeSweep(f, target))
	search := capacity.NewSearch(f.sweep.rates.Rates(), f.sweep.refine)
	var steps []capacity.Step
	var stepResults []any
	var first capacity.Judgement
	for n := 1; ctx.Err() == nil; n++ {
		rps, refined, ok := search.Next()
		if !ok {
			break
		}
		step, rep, err := runStep(ctx, f, target, rps, stderr)
		if err != nil {
			if ctx.Err() != nil {
				break // interrupted before the step measured anything
			}
			return cmd.exit(stderr, fmt.Errorf("step %d at %d rps: %w", n, rps, withRunHint(err)))
		}
		step.Refined = refined
		j := capacity.Judge(step, f.sweep.objectives)
		if n == 1 {
			first = j
		}
		search.Record(rps, j)
		steps, stepResults = append(steps, step), append(stepResults, rep.json)
		fmt.Fprintln(out, stepLine(n, step, j, rep.common.ErrorsDurationHistogram.Count, ctx.Err() != nil))
	}
	stop := search.StopReason()
	if ctx.Err() != nil {
		stop = "interrupted"
	}
	if search.NotMetAtStart() && len(steps) > 0 {
		fmt.Fprintln(out, capacity.LowestRateMissed(f.sweep.objectives, steps[0], first)+"; the sweep stops")
	}
	a := capacity.Analyze(capacity.Input{
		Objectives: f.sweep.objectives,
		Modes:      []capacity.ModeSteps{{Mode: sweepMode, Steps: steps, StopReason: stop}},
		CPUs:       runtime.NumCPU(),
	})
	// The result file is written before anything more is printed, so that a
	// reader that goes away (| head) cannot cost the result.
	if f.jsonPath != "" {
		if err := writeSweepJSON(f.jsonPath, a, stepResults, stdout); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	if err := a.WriteText(out); err != nil {
		return cmd.exit(stderr, fmt.Errorf("printing the analysis: %w", err))
	}
	if f.jsonPath != "" && f.jsonPath != "-" {
		fmt.Fprintf(out, "JSON result written to %s\n", f.jsonPath)
	}
	return exitOK
}

// runStep runs one step at rps with the command's options and returns it as
// capacity sees it, with the generator's own saturation: its send delay and
// the CPU this process used over the step.
func runStep(ctx context.Context, f *loadFlags, target string, rps int, stderr io.Writer) (capacity.Step, report, error) {
	at := *f
	at.qps = float64(rps)
	load, d, err := prepareLoad(&at, target)
	if err != nil {
		return capacity.Step{}, report{}, err
	}
	cpu0, err := processCPU()
	if err != nil {
		return capacity.Step{}, report{}, err
	}
	wall0 := time.Now()
	stopProgress := startProgress(ctx, load.Runner(), &at, stderr, nil)
	rep, err := load.run(ctx, d)
	stopProgress()
	if err != nil {
		return capacity.Step{}, report{}, err
	}
	cpu1, err := processCPU()
	if err != nil {
		return capacity.Step{}, report{}, err
	}
	return stepOf(rep.common, rps, (cpu1-cpu0).Seconds()/time.Since(wall0).Seconds()), rep, nil
}

// stepOf reads a step from a run's result; vcpu is the generator's CPU
// seconds per second over it.
func stepOf(c *loadgen.RunResult, rps int, vcpu float64) capacity.Step {
	s := capacity.Step{
		Label:        c.Labels,
		RequestedRPS: rps,
		ActualRPS:    c.ActualQPS,
		Connections:  c.NumThreads,
		MeanMS:       math.NaN(),
		Generator: capacity.Saturation{
			VCPU: vcpu, Cores: float64(runtime.GOMAXPROCS(0)),
			SendDelayP99MS: math.NaN(),
		},
		// The server is whatever the user points at: its CPU is not ours to see.
		Server: capacity.Saturation{VCPU: math.NaN(), Cores: math.NaN(), SendDelayP99MS: math.NaN()},
	}
	if c.DurationHistogram.Count > 0 {
		s.MeanMS = c.DurationHistogram.Avg * 1e3
	}
	if c.SendDelayHistogram.Count > 0 {
		s.Generator.SendDelayP99MS = percentile(c.SendDelayHistogram, 99) * 1e3
	}
	for _, p := range capacity.Percentiles {
		s.Latency = append(s.Latency, capacity.PercentileMS{Percentile: p, MS: percentile(c.DurationHistogram, p) * 1e3})
	}
	// DurationHistogram counts every call, ErrorsDurationHistogram the failed ones.
	if n := c.DurationHistogram.Count; n > 0 {
		s.ErrorPercent = 100 * float64(c.ErrorsDurationHistogram.Count) / float64(n)
	}
	return s
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading the generator's CPU time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// describeSweep is a sweep's first line: what is about to happen.
func describeSweep(f *loadFlags, target string) string {
	r := f.sweep.rates
	by := "doubling"
	if r.Step > 0 {
		by = fmt.Sprintf("by %d", r.Step)
	}
	objectives := "no latency objective"
	if len(f.sweep.objectives) > 0 {
		objectives = "objectives " + f.sweep.objectives.String()
	}
	return fmt.Sprintf("meshperf load sweep from %d to %d qps (%s), %d connections, %s a step, %s: %s",
		r.Start, r.End, by, f.connections, f.duration, objectives, target)
}

// stepLine is a finished step for a person: "step 3: 2000 rps asked, 1998
// actual, p50 0.41 p90 0.62 p99 1.3 ms, 0 errors — ok".
func stepLine(n int, s capacity.Step, j capacity.Judgement, errs int64, interrupted bool) string {
	var ps []string
	for _, p := range capacity.CurvePercentiles {
		ms, _ := s.At(p)
		ps = append(ps, fmt.Sprintf("p%s %s", strconv.FormatFloat(p, 'f', -1, 64), strconv.FormatFloat(roundSig(ms), 'f', -1, 64)))
	}
	verdict := string(j.Verdict)
	if j.Detail != "" {
		verdict += ": " + j.Detail
	}
	if interrupted {
		verdict += " (interrupted: the step is shorter than asked)"
	}
	refined := ""
	if s.Refined {
		refined = " (refining)"
	}
	return fmt.Sprintf("step %d: %d rps asked%s, %.0f actual, %s ms, %d errors — %s",
		n, s.RequestedRPS, refined, s.ActualRPS, strings.Join(ps, " "), errs, verdict)
}
