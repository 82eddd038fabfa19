package lab

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// A capacity sweep raises the rate through each mode of a scenario, one
// full measured run (a step) at a time, until the latency objectives
// break, errors appear or the rate is not kept; capacity finds each mode's
// knee and capacity in the steps and fits its proxies' CPU and memory
// against the rate.

// SweepOptions are what a sweep adds to the lab's configuration.
type SweepOptions struct {
	// Rates is the ladder of requested rates the search climbs, ascending.
	Rates []int
	// Refine is how many bisection steps the search adds between the last
	// good rate and the one that stopped it.
	Refine int
	// Objectives are the latency objectives every step must meet; none
	// sweeps until errors appear or the rate is not kept.
	Objectives capacity.Objectives
	// TargetRPS is the rate to give sizing advice for; 0 for none.
	TargetRPS int
}

// CheckSweep says why cfg's scenario cannot be swept with opts.
func CheckSweep(s *scenario.Scenario, opts SweepOptions) error {
	if err := CheckSweepable(s); err != nil {
		return err
	}
	if err := CheckLadder(opts.Rates); err != nil {
		return err
	}
	if opts.Refine < 0 {
		return fmt.Errorf("lab sweep: refine %d: want 0 or more", opts.Refine)
	}
	if opts.TargetRPS < 0 {
		return fmt.Errorf("lab sweep: target rate %d: want 0 (no advice) or more", opts.TargetRPS)
	}
	return nil
}

// CheckSweepable says why s cannot be swept at all: an app has no request
// rate to raise.
func CheckSweepable(s *scenario.Scenario) error {
	if s.App != "" {
		return fmt.Errorf("app %s has no request rate to raise (its users send as fast as they can); sweep the two-pod benchmark or a topology", s.App)
	}
	return nil
}

// CheckLadder says why rates cannot be a sweep's ladder, whose steps must
// be real rates (not 0, "as fast as possible") going up.
func CheckLadder(rates []int) error {
	if len(rates) < 2 {
		return fmt.Errorf("a sweep needs at least 2 rates, got %d", len(rates))
	}
	for i, r := range rates {
		if r <= 0 {
			return fmt.Errorf("a sweep's rates must be above 0, got %d", r)
		}
		if i > 0 && r <= rates[i-1] {
			return fmt.Errorf("a sweep's rates must go up, got %d after %d", r, rates[i-1])
		}
	}
	return nil
}

// Sweep runs a capacity sweep of cfg's scenario: for each mode in order
// (the baseline, no-mesh, first when the scenario has it), the rate rises
// as capacity's search says, each step a run of the matrix's kind with the
// scenario's first connection count, stored as it ends. The analysis is
// stored with the runs, shown in the report and printed after the summary.
// Errors are as Run's.
func Sweep(ctx context.Context, cfg Config, opts SweepOptions) (*Report, error) {
	if cfg.Scenario == nil {
		return nil, errors.New("lab: no scenario")
	}
	if err := CheckSweep(cfg.Scenario, opts); err != nil {
		return nil, err
	}
	return invoke(ctx, cfg, func(ctx context.Context, l *lab, store *results.Store, rep *Report) {
		l.runSweep(ctx, store, opts, rep)
	})
}

// runSweep climbs each mode's ladder, then analyses and stores the sweep.
func (l *lab) runSweep(ctx context.Context, store *results.Store, opts SweepOptions, rep *Report) {
	s := l.cfg.Scenario
	in := capacity.Input{Objectives: opts.Objectives, TargetRPS: opts.TargetRPS, Baseline: string(scenario.NoMesh),
		CPUs: runtime.NumCPU()}
	for _, m := range sweepOrder(s.Modes) {
		if ctx.Err() != nil {
			break
		}
		steps, search := l.sweepMode(ctx, store, opts, m, rep)
		in.Modes = append(in.Modes, capacity.ModeSteps{Mode: string(m), Steps: steps, StopReason: search.StopReason()})
		line, stop := notMetAtStart(m, search, steps, opts.Objectives)
		if line != "" {
			l.logf("%s", line)
		}
		if stop {
			l.logf("the baseline (no-mesh) cannot meet the objectives: no mode through a mesh can; the sweep stops here")
			rep.BaselineNotMet = true
			break
		}
	}
	if len(in.Modes) == 0 {
		return
	}
	rep.Sweep = &results.Sweep{RunID: l.cfg.RunID, Scenario: s.Name, Analysis: capacity.Analyze(in)}
	if store != nil {
		if err := store.InsertSweep(*rep.Sweep); err != nil {
			l.logf("meshperf lab: %v", err)
		}
	}
}

// sweepOrder puts the baseline first, the other modes in the scenario's
// order: every loss is measured against it, and if it cannot meet the
// objectives no other mode needs to be run.
func sweepOrder(modes []scenario.Mode) []scenario.Mode {
	out := make([]scenario.Mode, 0, len(modes))
	if slices.Contains(modes, scenario.NoMesh) {
		out = append(out, scenario.NoMesh)
	}
	for _, m := range modes {
		if m != scenario.NoMesh {
			out = append(out, m)
		}
	}
	return out
}

// sweepMode runs mode m's steps until the search ends, storing each run.
func (l *lab) sweepMode(ctx context.Context, store *results.Store, opts SweepOptions, m scenario.Mode, rep *Report) ([]capacity.Step, *capacity.Search) {
	s := l.cfg.Scenario
	search := capacity.NewSearch(opts.Rates, opts.Refine)
	var steps []capacity.Step
	for n := 1; ctx.Err() == nil; n++ {
		rps, refined, ok := search.Next()
		if !ok {
			break
		}
		if n > 1 {
			sleepCtx(ctx, s.Cooldown.D())
		}
		refining := ""
		if refined {
			refining = " (refining)"
		}
		fmt.Fprintf(l.cfg.Progress, "sweep %s: step %d, %d rps%s\n", m, n, rps, refining)
		// Each repetition is a run of its own, stored as the matrix stores
		// one; the step judged is their median.
		var reps []capacity.Step
		for r := 1; r <= s.Repetitions && ctx.Err() == nil; r++ {
			if r > 1 {
				sleepCtx(ctx, s.Cooldown.D())
			}
			o := l.sweepRun(ctx, store, s.SpecAt(m, s.Connections[0], rps, r))
			rep.Outcomes = append(rep.Outcomes, o)
			reps = append(reps, results.StepOf(o.Run, runtime.NumCPU()))
		}
		if len(reps) == 0 {
			break
		}
		step := capacity.MedianStep(reps)
		step.Refined = refined
		if len(reps) > 1 {
			fmt.Fprintf(l.cfg.Progress, "  median of %d runs: %s\n", len(reps), medianLine(step))
		}
		j := capacity.Judge(step, opts.Objectives)
		search.Record(rps, j)
		steps = append(steps, step)
		if j.Stops() {
			fmt.Fprintf(l.cfg.Progress, "  %s: %s\n", j.Verdict, j.Detail)
		}
	}
	return steps, search
}

// sweepRun is one run of a sweep's step: the mode set up (once: ensure
// does nothing when it already is), the run measured, shown and stored.
func (l *lab) sweepRun(ctx context.Context, store *results.Store, spec scenario.RunSpec) Outcome {
	var o Outcome
	if err := l.ensure(ctx, spec); err != nil {
		o = l.failed(spec, "set up "+string(spec.Mode)+": "+err.Error())
	} else {
		o = l.runOne(ctx, spec)
	}
	fmt.Fprintln(l.cfg.Progress, ResultLine(o))
	if store != nil {
		if err := store.Insert(o.Run); err != nil {
			l.logf("meshperf lab: %v", err)
		}
	}
	return o
}

// notMetAtStart says what a mode's finished search means for the sweep:
// when the mode missed the objectives (or gave way) at its first, lowest
// step, the line that says so — "ambient: cannot meet p99=5ms even at the
// lowest rate, 500 rps (p99 7.2 ms > 5ms)" — and, when that mode is the
// baseline, that the sweep stops: no mode through a mesh can do better.
func notMetAtStart(m scenario.Mode, search *capacity.Search, steps []capacity.Step, objs capacity.Objectives) (line string, stop bool) {
	if !search.NotMetAtStart() || len(steps) == 0 {
		return "", false
	}
	return fmt.Sprintf("%s: %s", m, capacity.LowestRateMissed(objs, steps[0], capacity.Judge(steps[0], objs))), m == scenario.NoMesh
}

// medianLine is a step's median figures, as ResultLine writes a run's.
func medianLine(s capacity.Step) string {
	ms := func(p float64) float64 {
		v, _ := s.At(p)
		return v
	}
	return fmt.Sprintf("%.1f qps, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, %.1f%% errors",
		s.ActualRPS, ms(50), ms(90), ms(99), s.ErrorPercent)
}
