package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/perfcheck"
)

// The defaults of perfcheck's measurement, chosen on the project's 2-core
// machines, which other builds share (docs/tracking.md, ## perfcheck, says
// how they were measured).
const (
	// perfcheckCount runs give the median a 95% confidence interval and the
	// U test a p-value as low as 0.002: benchmath needs 6 for both.
	perfcheckCount = 6
	// perfcheckBenchtime keeps the whole tree's Go benchmarks at about
	// 2-3 minutes with perfcheckCount runs each.
	perfcheckBenchtime = 300 * time.Millisecond
	// perfcheckThreshold (percent) is above the noise of the allocation
	// figures; the timings of load-sensitive benchmarks drift further on a
	// shared machine (docs/tracking.md, ## perfcheck, has the figures).
	perfcheckThreshold = 10
)

const perfcheckAbout = `Runs the micro-benchmarks under PATH and compares each with the baseline kept beside it, as Istio's
perfcheck.sh promises: the Go benchmarks of each package (go test -bench) against its bench.baseline file,
and, when PATH is the whole tree or proxy/, the proxy's criterion benches against proxy/benches/baseline/.
Go results are judged with benchstat's statistics (medians with confidence intervals, Mann-Whitney U test),
Rust results with criterion's own estimate of the change. A benchmark is worse when its change in sec/op,
B/op or allocs/op is significant and larger than -threshold; any worse benchmark makes perfcheck exit 1.
-update rewrites the baselines instead. Baselines record their machine: a comparison with another machine's
is made but said so at the top. PATH is a folder (dir/... for everything under it) or a Go package pattern;
the default is ./..., the whole module. With -compare, perfcheck runs nothing: it compares two files of Go
benchmark output (OLD as the baseline, NEW as the results) with the same statistics, as the regression job
does with two builds' runs interleaved on one machine.`

// Perfcheck runs `meshperf perfcheck`.
func Perfcheck(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf perfcheck", "[PATH] [flags] | -compare OLD NEW", perfcheckAbout)
	var o perfcheck.Options
	var update, asJSON, compareFiles bool
	fs := cmd.flags
	fs.StringVar(&o.Bench, "bench", ".", "run only the benchmarks matching this `regexp` (go test -bench; criterion's filter for Rust)")
	intVar(fs, &o.Count, "count", perfcheckCount, 2, 0, "runs of each Go benchmark (2 or more; 6 or more for a 95% interval)")
	durationVar(fs, &o.Benchtime, "benchtime", perfcheckBenchtime, "time each run of a Go benchmark takes (go test -benchtime)")
	percentVar(fs, &o.Stats.Confidence, "confidence", 95, true, "confidence level of the intervals and of the test (alpha is 100% minus it)")
	percentVar(fs, &o.Stats.Threshold, "threshold", perfcheckThreshold, false, "a significant change counts as worse or better only beyond this")
	fs.BoolVar(&o.GoOnly, "go-only", false, "run only the Go benchmarks")
	fs.BoolVar(&o.RustOnly, "rust-only", false, "run only the proxy's criterion benches")
	fs.BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	fs.BoolVar(&update, "update", false, "rewrite the baselines with this run's results instead of comparing")
	fs.BoolVar(&compareFiles, "compare", false, "compare two files of go test -bench output, OLD and NEW, instead of running anything")
	rest, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if compareFiles {
		if len(rest) != 2 || update {
			return cmd.exit(stderr, usagef("-compare takes two files, OLD and NEW, and no -update"))
		}
		report, err := perfcheck.CompareFiles(rest[0], rest[1], o.Stats)
		if ie := (perfcheck.InputError{}); errors.As(err, &ie) {
			err = inputError{ie}
		}
		if err != nil {
			return cmd.exit(stderr, err)
		}
		return writePerfcheckReport(cmd, report, asJSON, stdout, stderr)
	}
	switch {
	case len(rest) > 1:
		return cmd.exit(stderr, usagef("one PATH at most, got %q too", rest[1]))
	case o.GoOnly && o.RustOnly:
		return cmd.exit(stderr, usagef("-go-only and -rust-only exclude each other"))
	case o.Benchtime <= 0:
		return cmd.exit(stderr, usagef("-benchtime must be more than 0"))
	case update && asJSON:
		return cmd.exit(stderr, usagef("-json is for the comparison; -update prints the files it wrote"))
	}
	if _, err := regexp.Compile(o.Bench); err != nil {
		return cmd.exit(stderr, usagef("-bench %q is not a regexp: %v", o.Bench, err))
	}
	if len(rest) == 1 {
		o.Path = rest[0]
	}
	o.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	plan, err := perfcheck.NewPlan(ctx, o, update)
	if err != nil {
		if ie := (perfcheck.InputError{}); errors.As(err, &ie) {
			err = inputError{ie}
		}
		return cmd.exit(stderr, err)
	}
	if update {
		written, err := plan.Update(ctx)
		if err != nil {
			return cmd.exit(stderr, err)
		}
		_, _ = fmt.Fprintln(stdout, strings.Join(written, "\n"))
		return exitOK
	}
	report, err := plan.Check(ctx)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	return writePerfcheckReport(cmd, report, asJSON, stdout, stderr)
}

// writePerfcheckReport prints a comparison as a table or JSON, and exits 1
// when a benchmark is significantly worse.
func writePerfcheckReport(cmd *command, report *perfcheck.Report, asJSON bool, stdout, stderr io.Writer) int {
	var err error
	if asJSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if report.Failed() {
		worse := report.WorseLines()
		return cmd.exit(stderr, fmt.Errorf("%d significantly worse: %s", len(worse), strings.Join(worse, "; ")))
	}
	return exitOK
}
