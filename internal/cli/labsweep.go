package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// Search depth the -refine flag allows: each step halves the gap between
// the last good rate and the one that stopped the sweep, and costs a run.
const (
	defaultRefine = 2
	maxRefine     = 5
)

// labSweepFlags are `lab sweep`'s own flags.
type labSweepFlags struct {
	rates      []int // from -rates; nil: the scenario's qps
	refine     int
	objectives capacity.Objectives
	target     *int // -target-rps when given
}

func labSweep(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf lab sweep", "[SCENARIO|FILE] [flags]",
		"Raises the request rate through each mode of a scenario (default: sweep), no-mesh first, one measured run per\n"+
			"step, until a latency objective breaks, errors appear or the rate is not kept; then finds each mode's knee and\n"+
			"capacity, fits its proxies' CPU and memory against the rate and, with -target-rps, advises what to reserve.\n"+
			"Every step is stored as a run; the analysis beside them. The flags override the scenario's values.")
	var f labSweepFlags
	var opts lab.SweepOptions
	fs := cmd.flags
	fs.Func("rates", "the rate `ladder` START:END[:STEP] in requests per second (no STEP: doubling); default the scenario's qps",
		func(v string) error {
			r, err := capacity.ParseRange(v)
			f.rates = r.Rates()
			return err
		})
	fs.IntVar(&f.refine, "refine", defaultRefine, fmt.Sprintf("bisection `steps` between the last good rate and the one that stopped the sweep (0 to %d)", maxRefine))
	fs.Var(&f.objectives, "slo", "latency `objectives`, e.g. p99=5ms or p50=1ms,p99=5ms (repeatable); none: up to errors or a rate not kept")
	fs.Func("target-rps", "`rate` to give sizing advice for (requests per second)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a whole number")
		}
		f.target = &n
		return nil
	})
	cfg, err := parseLabRun(cmd, args, stdout, labRunOptions{defaultScenario: "sweep", scenarioFlags: sweepOverrideFlags,
		prometheus: true, ztunnel: true,
		check: func(s *scenario.Scenario) (err error) { opts, err = sweepOptions(s, f); return err }})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	for _, n := range sweepNotes(cfg.Scenario) {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	ctx, stop := labContext(stderr)
	defer stop()
	cfg.Out, cfg.Progress, cfg.ProgressTTY = stdout, stdout, isTerminal(stdout)
	rep, err := lab.Sweep(ctx, cfg, opts)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if failedRuns(rep) > 0 || rep.BaselineNotMet || ctx.Err() != nil {
		return exitFailed
	}
	return exitOK
}

// sweepOptions checks the sweep's flags against the scenario s.
func sweepOptions(s *scenario.Scenario, f labSweepFlags) (lab.SweepOptions, error) {
	opts := lab.SweepOptions{Rates: f.rates, Refine: f.refine, Objectives: f.objectives}
	if f.target != nil {
		if *f.target < 1 {
			return opts, fmt.Errorf("-target-rps: must be at least 1, got %d", *f.target)
		}
		opts.TargetRPS = *f.target
	}
	if f.refine < 0 || f.refine > maxRefine {
		return opts, fmt.Errorf("-refine: must be 0 to %d, got %d", maxRefine, f.refine)
	}
	if err := lab.CheckSweepable(s); err != nil {
		return opts, err
	}
	if opts.Rates == nil {
		opts.Rates = s.QPS
		if err := lab.CheckLadder(s.QPS); err != nil {
			return opts, fmt.Errorf("scenario %s: its qps %v cannot be the sweep's ladder: %w; give -rates START:END[:STEP]", s.Name, s.QPS, err)
		}
	}
	return opts, lab.CheckSweep(s, opts)
}

// sweepOverrideFlags are the scenario's flags a sweep takes: not -qps (the
// ladder is -rates), -conn with one count, as a sweep raises the rate at
// fixed connections, and -repetitions as the runs of each step.
func sweepOverrideFlags(fs *flag.FlagSet, o *scenario.Overrides) {
	fs.Func("conn", "connection `count` (one: a sweep raises the rate, not the connections)", func(v string) (err error) {
		if o.Connections, err = scenario.ParseIntList("-conn", v); err == nil && len(o.Connections) > 1 {
			err = fmt.Errorf("a sweep takes one connection count, got %d", len(o.Connections))
		}
		return err
	})
	shapeFlags(fs, o)
	wholeNumberFlag(fs, "repetitions", "`runs` of each step; the step judged and analysed is their median", &o.Repetitions)
}

// sweepNotes say what of the scenario a sweep leaves out.
func sweepNotes(s *scenario.Scenario) []string {
	notes := s.Notes()
	if len(s.Connections) > 1 {
		notes = append(notes, fmt.Sprintf("connections: a sweep runs at the first count only, %d", s.Connections[0]))
	}
	return notes
}
